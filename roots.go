package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"

	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/transport"
)

// A Root is a place the server may work in, such as a directory (file:// URI).
type Root struct {
	URI  string          `json:"uri"`
	Name string          `json:"name,omitempty"`
	Meta json.RawMessage `json:"_meta,omitempty"`
}

// rootsState is the client's current roots; nil when the client declared no roots capability.
type rootsState struct {
	mu    sync.Mutex
	roots []Root // guarded by mu
}

func (r *rootsState) declared() bool { return r != nil }

func (r *rootsState) list(context.Context, json.RawMessage) (any, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	roots := r.roots
	if roots == nil {
		roots = []Root{}
	}
	return struct {
		Roots []Root `json:"roots"`
	}{roots}, nil
}

// SetRoots replaces the roots and tells the server with notifications/roots/list_changed. It
// fails with CodeInvalidArgument when the client did not declare roots with WithRoots.
func (c *Client) SetRoots(ctx context.Context, roots ...Root) error {
	if !c.roots.declared() {
		return returned(&Error{Code: CodeInvalidArgument, Err: errNoRootsCapability})
	}
	c.roots.mu.Lock()
	c.roots.roots = slices.Clone(roots)
	c.roots.mu.Unlock()
	if s := c.current(); s != nil && s.stateless {
		return nil // stateless revisions ask for roots within each request that needs them
	}
	return returned(c.notify(ctx, "notifications/roots/list_changed", nil))
}

var errNoRootsCapability = errors.New("the client declared no roots capability (WithRoots)")

// notify sends a notification on the current session, connecting first if there is none.
func (c *Client) notify(ctx context.Context, method string, params any) error {
	raw, err := marshalParams(params)
	if err != nil {
		return &Error{Code: CodeInvalidArgument, Err: err}
	}
	s, err := c.session(ctx)
	if err != nil {
		if _, ok := err.(*Error); ok {
			return err
		}
		return &Error{Code: CodeNotDelivered, Err: err}
	}
	frame := jsonrpc.AppendRequest(nil, "", method, raw)
	if err := s.conn.Send(ctx, &transport.Message{Frame: frame, Method: method, Header: s.ownHeader()}); err != nil {
		return &Error{Code: CodeNotDelivered, Err: err}
	}
	return nil
}
