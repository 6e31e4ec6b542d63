package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"

	"github.com/northstar-mcp/mcpclient/internal/headers"
)

// toolHints remembers, from the last tools/list, which tools the server says are safe to run
// twice. notifications/tools/list_changed forgets them: until the tools are listed again, no
// tool is taken for safe on the word of a listing that may predate the change, and a listing
// that began before the notification teaches nothing.
type toolHints struct {
	mu   sync.Mutex
	safe map[string]bool // guarded by mu
	gen  uint64          // counts the forgettings; guarded by mu
}

func (h *toolHints) repeatable(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.safe[name]
}

// generation returns the gen a listing beginning now passes to learn and replace.
func (h *toolHints) generation() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gen
}

// learn records the hints of one page of tools listed from generation gen.
func (h *toolHints) learn(tools []*Tool, gen uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gen != h.gen {
		return
	}
	if h.safe == nil {
		h.safe = make(map[string]bool)
	}
	for _, t := range tools {
		if t != nil {
			h.safe[t.Name] = t.Annotations.safeToRepeat()
		}
	}
}

// replace installs the hints of a complete listing that began in generation gen, forgetting
// tools no longer listed.
func (h *toolHints) replace(safe map[string]bool, gen uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gen == h.gen {
		h.safe = safe
	}
}

// forget drops every hint, for a tool list that changed.
func (h *toolHints) forget() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gen++
	h.safe = nil
}

// call sends method with params and decodes the result into out.
func (c *Client) call(ctx context.Context, method string, params, out any, opts ...CallOption) error {
	_, err := c.callResponse(ctx, method, params, out, opts)
	return err
}

// callResponse is call, returning the response too, for callers that name its request later.
func (c *Client) callResponse(ctx context.Context, method string, params, out any, opts []CallOption) (*Response, error) {
	req, err := c.newRequest(method, params, opts)
	if err != nil {
		return nil, returned(err)
	}
	resp, err := c.do(ctx, req)
	if err != nil {
		return nil, returned(err)
	}
	if out == nil {
		return resp, nil
	}
	if err := resp.Decode(out); err != nil {
		return nil, returned(&Error{Code: CodeProtocol, ID: req.id, Request: resp.Request, Attempts: resp.Attempts,
			Err: fmt.Errorf("decoding the %s result: %w", method, err)})
	}
	return resp, nil
}

// Ping checks that the server answers. It sends ping, or, in a stateless revision (2026-07-28),
// which has no ping, server/discover, the cheapest request there; any answer that is not an
// error means the server is alive, and the answer is not used otherwise. Without a live session
// it connects first, since the revision decides the request. Its id is fresh and nothing depends
// on it: both requests are safe to repeat and are re-issued after an uncertain attempt.
func (c *Client) Ping(ctx context.Context, opts ...CallOption) error {
	s, err := c.liveSession(ctx)
	if err != nil {
		return returned(err)
	}
	method := "ping"
	if s.modern {
		method = "server/discover"
	}
	return c.call(ctx, method, nil, nil, opts...)
}

// liveSession returns the current session, connecting when there is none, for callers whose
// request depends on what the session settled (its revision, the server's capabilities).
func (c *Client) liveSession(ctx context.Context) (*session, error) {
	s, err := c.session(ctx)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, &Error{Code: CodeNotDelivered, Err: err}
	}
	return s, nil
}

// ListToolsPage returns one page of tools/list, starting at cursor ("" for the first page).
func (c *Client) ListToolsPage(ctx context.Context, cursor string, opts ...CallOption) (*ListToolsResult, error) {
	var res ListToolsResult
	gen := c.hints.generation()
	if err := c.call(ctx, "tools/list", ListToolsParams{Cursor: cursor}, &res, opts...); err != nil {
		return nil, err
	}
	c.hints.learn(res.Tools, gen)
	return &res, nil
}

// Tools iterates over every tool the server lists, fetching pages as needed. It yields the first
// error and stops. A complete listing replaces the tool hints (readOnlyHint, idempotentHint) that
// decide whether a tools/call is safe to repeat, and refreshes the cache ListTools serves from.
func (c *Client) Tools(ctx context.Context) iter.Seq2[*Tool, error] {
	var (
		listed   []*Tool
		safe     map[string]bool
		gen      uint64
		hintsGen uint64
	)
	fetch := func(ctx context.Context, cursor string) ([]*Tool, string, error) {
		if cursor == "" { // a listing begins (again, when the iterator is ranged once more)
			listed, safe, gen, hintsGen = nil, map[string]bool{}, c.tools.generation(), c.hints.generation()
		}
		page, err := c.ListToolsPage(ctx, cursor)
		if err != nil {
			return nil, "", err
		}
		modern := c.modern()
		tools := make([]*Tool, 0, len(page.Tools))
		for _, t := range page.Tools {
			if t == nil {
				continue
			}
			if _, err := headers.Declarations(t.InputSchema); err != nil && modern {
				// The protocol requires leaving out a tool whose headers cannot be sent right.
				c.log.Warn("mcpclient: tool left out of the listing", "tool", t.Name, "err", err)
				continue
			}
			safe[t.Name] = t.Annotations.safeToRepeat()
			tools = append(tools, t)
		}
		listed = append(listed, tools...)
		return tools, page.NextCursor, nil
	}
	return paginate(ctx, fetch, func() {
		c.hints.replace(safe, hintsGen)
		c.tools.store(listed, gen)
	})
}

// ListTools returns every tool the server lists, all pages. It answers from a cache that a
// complete listing fills and notifications/tools/list_changed empties; Tools always asks the
// server.
func (c *Client) ListTools(ctx context.Context) ([]*Tool, error) {
	if tools, ok := c.tools.all(); ok {
		return tools, nil
	}
	return collect(c.Tools(ctx))
}

// CallTool calls the tool name with args (anything that marshals to a JSON object, or nil).
//
// Its id is a fresh UUID unless pinned with WithRequestID, and the ledger remembers it (see
// [Ledger]). A result with IsError set is the tool's definite answer and is returned, not
// retried. After ErrOutcomeUnknown the *Error holds the frozen request: inspect what the tool
// does (did the reservation happen?) before calling Resend or Supersede with it. To keep the id
// before anything is sent, build the request with NewRequest and send it with Do.
//
// The result's structuredContent is checked against the outputSchema of the tool as the client
// last listed it (Tools, ListTools). CallTool never lists the tools itself, and a tool the client
// holds no listing of (never listed, or listed before a notifications/tools/list_changed) is not
// checked. When the check fails, the tool has run and answered, and CallTool returns both the
// result and an *Error with ErrStructuredContent (CodeStructuredContent) naming the call, as
// io.Reader returns n > 0 with an error: keep what the result says (a booking reference, say)
// before deciding what the mismatch means. With any other error the result is nil.
func (c *Client) CallTool(ctx context.Context, name string, args any, opts ...CallOption) (*CallToolResult, error) {
	rawArgs, err := marshalParams(args)
	if err != nil {
		return nil, returned(&Error{Code: CodeInvalidArgument, Err: fmt.Errorf("arguments of tool %s: %w", name, err)})
	}
	req, err := c.newRequest("tools/call", encodeToolCall(name, rawArgs), opts)
	if err != nil {
		return nil, returned(err)
	}
	return c.sendToolCall(ctx, req)
}

// sendToolCall sends a frozen tools/call and decodes its result.
func (c *Client) sendToolCall(ctx context.Context, req *Request) (*CallToolResult, error) {
	resp, err := c.do(ctx, req)
	if err != nil {
		return nil, returned(err)
	}
	var res CallToolResult
	if err := decodeCallToolResult(resp.Result, &res); err != nil {
		return nil, returned(&Error{Code: CodeProtocol, ID: resp.Request.id, Request: resp.Request, Attempts: resp.Attempts,
			Err: fmt.Errorf("decoding the tools/call result: %w", err)})
	}
	if err := c.tools.checkStructured(req.name, &res); err != nil {
		return &res, returned(&Error{Code: CodeStructuredContent, ID: resp.Request.id, Request: resp.Request, Attempts: resp.Attempts, Err: err})
	}
	return &res, nil
}
