package mcpclient

// What a plugin can put around the client's requests: interceptors, which wrap every sending of
// a request, and the attempt hook, which hears how each sending went.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/northstar-mcp/mcpclient/transport"
)

// An Exchange is one sending of a request on a session and the wait for its answer: what an
// Interceptor sees. Every request the client sends is one or more exchanges: the handshake's
// (server/discover, initialize), each attempt of a typed call or of Do, Resend and Supersede,
// the re-issues of a safe request under a new id, the rounds of a stateless revision's
// multi round-trip requests, and the polls of the tasks package.
type Exchange struct {
	// Request is the request being sent: its method, id, tool name and params, frozen when it
	// was built. A resend carries the same bytes under the same id, so an interceptor cannot
	// change them; what it must add to a request's bytes (a trace context in _meta) it adds
	// when the request is built, with WithMeta.
	Request *Request
	// Attempt counts the sendings of Request's id in this call, from 1; a handshake request
	// is sent once.
	Attempt int
	// Handshake: the request opens the session (server/discover, initialize). It stays out of
	// the ledger, and a failed one is followed by a new connection and a new request.
	Handshake bool
	// SessionID is the transport's session id (Streamable HTTP's Mcp-Session-Id), or "".
	SessionID string
	// Header holds HTTP headers to send with this exchange alone: an interceptor may add to it
	// (a token chosen for the caller). They win over transport.HTTP's configured Header; the
	// protocol's own (the session id, Content-Type) and those that name the request in a
	// stateless revision win over them. Transports without headers (stdio, memory, streams)
	// ignore it.
	Header http.Header

	s       *session
	reached bool // the innermost handler ran: the request went to the transport
}

// A Handler sends an exchange and returns the server's answer: a Response whose Result is the
// JSON-RPC result, or an error (an *RPCError for a JSON-RPC error, a *transport.Error for a
// failure to deliver or to read the answer).
type Handler func(ctx context.Context, x *Exchange) (*Response, error)

// An Interceptor wraps the sending of every request: it may read the exchange, add headers,
// refuse it by returning an error without calling next (nothing is sent), and see or replace
// what next returns. What it returns is what the client reads as the attempt's outcome: an
// error is classified as the transport's would be, and a Response it makes up is recorded as
// the server's answer.
type Interceptor func(next Handler) Handler

// WithInterceptors wraps every sending of a request in ics, the first listed outermost. They run
// on the calling goroutine, under the caller's context (its values included), once per attempt.
// An interceptor that returns an error without calling next refuses the request: the call ends
// at once with CodeRefused (or, after an earlier attempt whose outcome is unknown,
// ErrOutcomeUnknown) and the error in its chain, and nothing is sent. Later options add to the
// chain, outside those given before.
func WithInterceptors(ics ...Interceptor) Option {
	return optionFunc(func(c *config) {
		for _, ic := range ics {
			if ic != nil {
				c.interceptors = append(c.interceptors, ic)
			}
		}
	})
}

// chain composes the interceptors around the sending of an exchange.
func chain(ics []Interceptor) Handler {
	var h Handler = func(ctx context.Context, x *Exchange) (*Response, error) {
		x.reached = true
		raw, err := x.s.exchange(ctx, x.Request, x.Header)
		if err != nil {
			return nil, err
		}
		return &Response{Request: x.Request, Result: raw, Attempts: x.Attempt}, nil
	}
	for i := len(ics) - 1; i >= 0; i-- {
		h = ics[i](h)
	}
	return h
}

// send sends req on s through the interceptors, if any. refused reports an interceptor that
// returned err without letting the request reach the transport.
func (c *Client) send(ctx context.Context, s *session, req *Request, attempt int, handshake bool) (result json.RawMessage, refused bool, err error) {
	if c.cfg.intercept == nil {
		result, err = s.exchange(ctx, req, nil)
		return result, false, err
	}
	x := &Exchange{Request: req, Attempt: attempt, Handshake: handshake, Header: http.Header{}, s: s}
	if sc, ok := s.conn.(transport.SessionConn); ok {
		x.SessionID = sc.SessionID()
	}
	resp, err := c.cfg.intercept(ctx, x)
	if err == nil && resp == nil {
		err = errNoResponse
		if x.reached { // the request may have run: no usable answer came
			err = &errMalformedAnswer{err}
		}
	}
	if err != nil {
		return nil, !x.reached, err
	}
	return resp.Result, false, nil
}

var errNoResponse = errors.New("an interceptor returned neither a response nor an error")

// sendHandshake sends a request that opens the session, through the interceptors, and tells the
// attempt hook. A refusal is an *Error with CodeRefused: the session cannot open, and dialing
// again would meet the same refusal.
func (c *Client) sendHandshake(ctx context.Context, s *session, req *Request) (json.RawMessage, error) {
	var ev AttemptEvent
	var start time.Time
	if c.cfg.onAttempt != nil {
		ev, start = attemptEvent(req, s, 1, true), time.Now()
	}
	result, refused, err := c.send(ctx, s, req, 1, true)
	if c.cfg.onAttempt != nil {
		outcome := c.cfg.retry.Classify(err, false)
		if refused {
			outcome = transport.NotDelivered
		}
		ev.finish(start, outcome, err)
		c.cfg.onAttempt(ctx, ev)
	}
	if refused {
		return nil, &Error{Code: CodeRefused, Request: req, Err: err}
	}
	return result, err
}

// An AttemptEvent tells how one attempt went: one sending of a request, or a failure to open
// the session it would have been sent on.
type AttemptEvent struct {
	// Method, Tool and ID name the request; Tool is the tool of a tools/call, else "". ID is
	// the zero ID for an attempt that failed before a request was sent (no session).
	Method string
	Tool   string
	ID     ID
	// Attempt counts the attempts of the call as RetryPolicy.MaxAttempts does, from 1;
	// handshake requests count 1.
	Attempt int
	// Handshake: the attempt opens a session (server/discover, initialize).
	Handshake bool
	// SessionID is the transport's session id, or "".
	SessionID string
	// Latency is the time from the sending to the answer or the failure.
	Latency time.Duration
	// Outcome is how far the request got: Answered (a result, or a JSON-RPC error), NotDelivered,
	// Uncertain or Conflict (the server recognized an id in use).
	Outcome transport.Outcome
	// HTTPStatus is the status of a non-2xx HTTP response, or 0.
	HTTPStatus int
	// Err is the attempt's error, nil for a result.
	Err error
	// Delay is the wait before the call's next attempt; 0 when none follows.
	Delay time.Duration
}

// WithAttemptHook calls h once per attempt, after its outcome is known and, when another
// follows, the wait before it: every attempt of a call (resends, re-issues, rounds), and each
// handshake request. ctx is the call's context (for a handshake, that of the call or Connect
// that opened the session), with its values: a span to add the attempt to. h runs on the
// calling goroutine: it must not block. RetryPolicy.OnRetry is the special case of the attempts
// that another follows. Each WithAttemptHook adds a hook; they are called in the order given.
func WithAttemptHook(h func(ctx context.Context, ev AttemptEvent)) Option {
	return optionFunc(func(c *config) {
		switch prev := c.onAttempt; {
		case h == nil:
		case prev == nil:
			c.onAttempt = h
		default:
			c.onAttempt = func(ctx context.Context, ev AttemptEvent) {
				prev(ctx, ev)
				h(ctx, ev)
			}
		}
	})
}

// attemptEvent starts the event of an attempt of req.
func attemptEvent(req *Request, s *session, attempt int, handshake bool) AttemptEvent {
	ev := AttemptEvent{Attempt: attempt, Handshake: handshake}
	if req != nil {
		ev.Method, ev.ID = req.method, req.id
		if req.method == "tools/call" {
			ev.Tool = req.name
		}
	}
	if s != nil {
		if sc, ok := s.conn.(transport.SessionConn); ok {
			ev.SessionID = sc.SessionID()
		}
	}
	return ev
}

// finish records the attempt's outcome.
func (ev *AttemptEvent) finish(start time.Time, outcome transport.Outcome, err error) {
	ev.Latency = time.Since(start)
	ev.Outcome, ev.Err = outcome, err
	var se *transport.StatusError
	if errors.As(err, &se) {
		ev.HTTPStatus = se.StatusCode
	}
}
