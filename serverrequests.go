package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/transport"
)

// A RequestHandler answers one request the server sends to the client. It returns the result
// (anything that marshals to a JSON object) or an error: an *RPCError is sent as it is, any other
// error as an internal error (-32603) carrying its text. ctx ends when the server cancels the
// request or the session ends.
//
// Each handler runs on a goroutine of its own, and may wait as long as it needs (for a person,
// say): nothing else waits for it. A session runs at most 16 handlers at once, typed ones
// (sampling, elicitation, roots) included. A server request that finds all 16 busy is refused at
// once with an internal error (-32603) whose message says the client is busy; the server may send
// it again later. Notifications, the server's cancellations and its pings never wait for a
// handler to return: a ping is answered at once, by the client itself.
type RequestHandler func(ctx context.Context, params json.RawMessage) (any, error)

// maxServerRequests bounds the server requests handled at once per session. More are refused at
// once rather than queued: a request waiting for a slot would hold up every message behind it,
// the server's cancellation of a request holding a slot included, and a waiting list would only
// postpone the refusal while the handlers wait for a person.
const maxServerRequests = 16

// handlerFor returns the handler of a server request method, or nil.
func (c *Client) handlerFor(method string) RequestHandler {
	switch method {
	case "roots/list":
		if c.roots.declared() {
			return c.roots.list
		}
	case "sampling/createMessage":
		if c.cfg.sampling != nil {
			return c.sample
		}
	case "elicitation/create":
		if c.cfg.elicitation != nil || c.cfg.urlElicitation != nil {
			return c.elicit
		}
	}
	return c.cfg.requestHandlers[method]
}

// startServerRequest runs the handler of a server request on a goroutine of its own, owned by
// the session, which waits for it when it ends.
func (s *session) startServerRequest(m jsonrpc.Message) {
	if m.Method == "ping" {
		// At once and without a slot: a server asking whether the client is alive must hear
		// so while every handler waits for a person.
		s.answer(m.ID, struct{}{}, nil)
		return
	}
	h := s.c.handlerFor(m.Method)
	if h == nil {
		s.answer(m.ID, nil, &RPCError{Code: RPCMethodNotFound, Message: "method not found: " + m.Method})
		return
	}
	var id ID
	if err := json.Unmarshal(m.ID, &id); err != nil {
		s.answer(nil, nil, &RPCError{Code: RPCInvalidRequest, Message: "unusable request id"})
		return
	}
	key := id.JSON()
	life := s.lifetime()
	ctx, cancel := context.WithCancel(life)
	s.mu.Lock()
	b := s.busyState() // made by lifetime already
	_, dup := b.handling[key]
	busy := len(b.handling) >= maxServerRequests
	if !dup && !busy {
		if b.handling == nil {
			b.handling = make(map[string]context.CancelFunc)
		}
		b.handling[key] = cancel
	}
	s.mu.Unlock()
	switch {
	case dup:
		// Two answers under one id could not be told apart, and the server could no longer
		// cancel the first.
		cancel()
		s.answer(m.ID, nil, &RPCError{Code: RPCInvalidRequest, Message: "request id " + key + " is already in use"})
		return
	case busy:
		cancel()
		s.answer(m.ID, nil, errClientBusy)
		return
	}
	s.c.wg.Add(1) // from the dispatcher, which holds a count
	go func() {
		defer s.c.wg.Done()
		defer func() {
			cancel()
			s.mu.Lock()
			delete(b.handling, key)
			s.mu.Unlock()
		}()
		result, err := runRequestHandler(ctx, h, m.Params)
		if ctx.Err() != nil && life.Err() == nil {
			return // the server cancelled it: it expects no answer
		}
		s.answer(m.ID, result, err)
	}()
}

// errClientBusy refuses a server request that finds every slot taken.
var errClientBusy = &RPCError{Code: RPCInternalError,
	Message: fmt.Sprintf("client busy: it is handling %d requests of the server's already; try again later", maxServerRequests)}

func runRequestHandler(ctx context.Context, h RequestHandler, params json.RawMessage) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			result, err = nil, &RPCError{Code: RPCInternalError, Message: "the client's handler failed"}
		}
	}()
	return h(ctx, params)
}

// cancelServerRequest handles the server's notifications/cancelled for one of its requests.
func (s *session) cancelServerRequest(params json.RawMessage) {
	var p struct {
		RequestID ID `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	var cancel context.CancelFunc
	s.mu.Lock()
	if s.busy != nil {
		cancel = s.busy.handling[p.RequestID.JSON()]
	}
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// answer sends the response to a server request.
func (s *session) answer(id json.RawMessage, result any, err error) {
	var frame []byte
	if err == nil {
		body, merr := json.Marshal(result)
		if merr != nil || len(body) == 0 || body[0] != '{' {
			err = &RPCError{Code: RPCInternalError, Message: "the client's handler returned no JSON object"}
		} else {
			frame = jsonrpc.AppendResult(nil, id, body)
		}
	}
	if err != nil {
		var rpc *RPCError
		if !errors.As(err, &rpc) {
			rpc = &RPCError{Code: RPCInternalError, Message: err.Error()}
		}
		body, _ := json.Marshal(rpc) // plain fields
		frame = jsonrpc.AppendError(nil, id, body)
	}
	if err := s.conn.Send(s.lifetime(), &transport.Message{Frame: frame, Header: s.ownHeader()}); err != nil {
		s.c.log.Debug("mcpclient: could not answer a server request", "err", err)
	}
}
