package mcpclient

// What a plugin can put around the client's requests: interceptors, which wrap every sending of
// a request, and the attempt hook, which hears how each sending went.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/northstar-mcp/mcpclient/transport"
)

// An Exchange is one sending of a request on a session and the wait for its answer: what an
// Interceptor sees. Every request the client sends is one or more exchanges: the handshake's
// (server/discover, initialize), each attempt of a typed call or of Do, Resend and Supersede,
// the re-issues of a safe request under a new id, the rounds of a stateless revision's
// multi round-trip requests, and the polls of the tasks package.
//
// An exchange is sent at most once: the first call of next sends it, and any other call, from
// any goroutine, or one made after the interceptors returned without calling next, returns
// ErrExchangeSent and sends nothing.
type Exchange struct {
	// Request is the request being sent: its method, id, tool name and params, frozen when it
	// was built. A resend carries the same bytes under the same id, so an interceptor cannot
	// change them; what it must add to a request's bytes (a trace context in _meta) it adds
	// when the request is built, with WithMeta. The exchange sends only the request it was made
	// for: with another one put here, next returns ErrExchangeRequestChanged and sends nothing.
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

	s      *session
	frozen *Request // the request the exchange was made for: what it sends
	// state moves once from open, either to sending and then done, or to closed.
	state atomic.Int32
	// done is closed when the sending ended; wire holds its outcome, written before.
	done chan struct{}
	wire wireOutcome
}

// The states of an Exchange.
const (
	exchangeOpen    int32 = iota // next not called yet
	exchangeSending              // next is sending it
	exchangeDone                 // sent, and its outcome recorded
	exchangeClosed               // the interceptors returned without sending it: nothing will be
)

// wireOutcome is what the transport made of one sending: the answer's result, or the error.
type wireOutcome struct {
	result json.RawMessage
	err    error
}

// A Handler sends an exchange and returns the server's answer: a Response whose Result is the
// JSON-RPC result, or an error (an *RPCError for a JSON-RPC error, a *transport.Error for a
// failure to deliver or to read the answer).
type Handler func(ctx context.Context, x *Exchange) (*Response, error)

// An Interceptor wraps the sending of every request: it may read the exchange, add headers,
// refuse it by returning an error without calling next (nothing is sent), answer by itself
// without calling next (a cache), and see or replace what next returns.
//
// What happened on the wire, not what an interceptor returns, is what the client records and
// retries on. When next brought the server's answer (a result or a JSON-RPC error), what the
// interceptor returns is what the caller gets: a Response it returns, or an error, which ends
// the call with CodeServerError. When next did not bring an answer (nothing was delivered, or
// the reply was lost), the client goes on as it would without interceptors, whatever the
// interceptor returns. An interceptor that returns while the next it started on another
// goroutine is still sending leaves the attempt uncertain: the request may have been sent. An
// answer returned without calling next reaches the caller, and the id counts as never sent.
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
				hs := c.ownHandlers()
				hs.interceptors = append(hs.interceptors, ic)
			}
		}
	})
}

// chain composes the interceptors around the sending of an exchange.
func chain(ics []Interceptor) Handler {
	h := Handler(func(ctx context.Context, x *Exchange) (*Response, error) { return x.send(ctx) })
	for i := len(ics) - 1; i >= 0; i-- {
		h = ics[i](h)
	}
	return h
}

// send puts the exchange's request on the wire, if nothing was sent yet and nothing will be by
// another call: the compare-and-set from open to sending is what makes the sending happen once.
func (x *Exchange) send(ctx context.Context) (*Response, error) {
	if x.Request != x.frozen {
		return nil, fmt.Errorf("%w: the exchange of request %s holds another request; nothing was sent", ErrExchangeRequestChanged, x.frozen.key)
	}
	if !x.state.CompareAndSwap(exchangeOpen, exchangeSending) {
		if x.state.Load() == exchangeClosed {
			return nil, fmt.Errorf("%w: next was called for request %s after the interceptors returned without it; nothing was sent", ErrExchangeSent, x.frozen.key)
		}
		return nil, fmt.Errorf("%w: next was called again for request %s; nothing was sent", ErrExchangeSent, x.frozen.key)
	}
	x.wire.err = errSendPanicked // unless the transport returns
	defer x.finish()
	raw, err := x.s.exchange(ctx, x.frozen, x.Header)
	x.wire = wireOutcome{raw, err}
	if err != nil {
		return nil, err
	}
	return &Response{Request: x.frozen, Result: raw, Attempts: x.Attempt}, nil
}

// finish ends the sending, however it ended: a panic in the transport leaves the outcome
// uncertain rather than the exchange sending forever.
func (x *Exchange) finish() {
	x.state.Store(exchangeDone)
	close(x.done)
	x.s.c.unfinished.CompareAndDelete(x.frozen.key, x)
}

// A sending is what became of a request handed to the interceptors: whether it went to the
// transport, what the transport made of it, and what the interceptors returned.
type sending struct {
	// sent: the request went to the transport, or may have (the interceptors returned while
	// it was being sent).
	sent bool
	// result and err are the transport's outcome when sent. Otherwise err is the interceptors'
	// refusal, or, when nil, result is the answer they gave by themselves.
	result json.RawMessage
	err    error
	// intercepted: the interceptors returned reply and replyErr after the transport's outcome.
	intercepted bool
	reply       *Response
	replyErr    error
	// header is the exchange's Header, as the interceptors left it; nil without interceptors.
	header http.Header
}

// answer returns what the caller gets when the transport's outcome is the server's answer: what
// the interceptors made of it.
func (o *sending) answer() (json.RawMessage, error) {
	switch {
	case !o.intercepted:
		return o.result, o.err
	case o.replyErr != nil:
		return nil, o.replyErr
	case o.reply == nil:
		return nil, errNoResponse
	}
	return o.reply.Result, nil
}

// send sends req on s through the interceptors, if any, and reports what the transport made of
// it, which the client records and retries on, whatever the interceptors returned.
func (c *Client) send(ctx context.Context, s *session, req *Request, attempt int, handshake bool) sending {
	if c.cfg.intercept == nil {
		result, err := s.exchange(ctx, req, nil)
		return sending{sent: true, result: result, err: err}
	}
	if v, ok := c.unfinished.Load(req.key); ok {
		// The interceptors of an earlier attempt returned while it was being sent: this one
		// waits for that sending to end, so that the two do not meet at the server.
		select {
		case <-v.(*Exchange).done:
		case <-ctx.Done():
			return sending{sent: true, err: &transport.Error{Outcome: transport.NotDelivered,
				Err: fmt.Errorf("waiting for the earlier sending of the request to end: %w", context.Cause(ctx))}}
		}
	}
	x := &Exchange{Request: req, Attempt: attempt, Handshake: handshake, Header: http.Header{}, s: s, frozen: req, done: make(chan struct{})}
	if sc, ok := s.conn.(transport.SessionConn); ok {
		x.SessionID = sc.SessionID()
	}
	resp, err := c.cfg.intercept(ctx, x)
	if x.state.CompareAndSwap(exchangeOpen, exchangeClosed) {
		switch {
		case err != nil:
			return sending{err: err, header: x.Header}
		case resp == nil:
			return sending{err: errNoResponse, header: x.Header}
		}
		return sending{result: resp.Result, header: x.Header}
	}
	select {
	case <-x.done:
		return sending{sent: true, result: x.wire.result, err: x.wire.err, intercepted: true, reply: resp, replyErr: err, header: x.Header}
	default:
	}
	// The next this attempt started is still sending, on another goroutine: the request may
	// have gone out, and the next attempt under its id waits for it to end.
	c.unfinished.Store(req.key, x)
	select {
	case <-x.done: // it ended meanwhile, perhaps before it could see the entry
		c.unfinished.CompareAndDelete(req.key, x)
	default:
	}
	cause := errors.New("the interceptors returned while the request was being sent")
	if err != nil {
		cause = fmt.Errorf("%w: %w", cause, err)
	}
	return sending{sent: true, err: &transport.Error{Outcome: transport.Uncertain, Err: cause}, header: x.Header}
}

var (
	errNoResponse   = errors.New("an interceptor returned neither a response nor an error")
	errSendPanicked = &transport.Error{Outcome: transport.Uncertain, Err: errors.New("the sending of the request panicked")}
)

// sendHandshake sends a request that opens the session, through the interceptors, and tells the
// attempt hook. A refusal is an *Error with CodeRefused: the session cannot open, and dialing
// again would meet the same refusal. The headers the interceptors gave an answered request
// become the session's, for its messages that belong to no call.
func (c *Client) sendHandshake(ctx context.Context, s *session, req *Request) (json.RawMessage, error) {
	var a handshakeAttempt
	raw, err := c.exchangeHandshake(ctx, s, req, &a)
	c.tellAttempt(ctx, &a)
	return raw, err
}

// exchangeHandshake is sendHandshake but for the attempt hook: it records the attempt in a, for
// the caller to tell once it has read the answer.
func (c *Client) exchangeHandshake(ctx context.Context, s *session, req *Request, a *handshakeAttempt) (json.RawMessage, error) {
	var start time.Time
	if c.cfg.onAttempt != nil {
		a.ev, a.hooked, start = attemptEvent(req, s, 1, true), true, time.Now()
	}
	out := c.send(ctx, s, req, 1, true)
	outcome := transport.NotDelivered
	if out.sent {
		outcome = c.cfg.retry.Classify(out.err, false)
	}
	if a.hooked {
		a.ev.finish(start, outcome, out.err)
	}
	switch {
	case !out.sent && out.err != nil:
		return nil, &Error{Code: CodeRefused, Request: req, Err: out.err}
	case outcome == transport.Answered:
		if len(out.header) > 0 {
			s.setHeader(out.header.Clone())
		}
		return out.answer()
	}
	return out.result, out.err
}

// handshakeAttempt is the event of a handshake request's attempt, kept until the answer has been
// read: only then does server/discover know whether its refusal was an older server's answer.
type handshakeAttempt struct {
	ev     AttemptEvent
	hooked bool // the client has an attempt hook, and ev is its event
}

// olderServer marks the attempt as a server/discover that an older server answered as such: the
// answer the probe asked for, whatever its status, so no failure.
func (a *handshakeAttempt) olderServer() {
	if a.hooked {
		a.ev.OlderServer, a.ev.Outcome, a.ev.Err = true, transport.Answered, nil
	}
}

// fail marks the attempt failed with err, for an answer that arrived but cannot be read.
func (a *handshakeAttempt) fail(err error) {
	if a.hooked && a.ev.Err == nil {
		a.ev.Err = err
	}
}

// tellAttempt calls the attempt hook with the event of a, if the client has one.
func (c *Client) tellAttempt(ctx context.Context, a *handshakeAttempt) {
	if a.hooked {
		c.cfg.onAttempt(ctx, a.ev)
	}
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
	// Err is the attempt's error: an attempt failed when Err is not nil. It is nil for a result,
	// and for a server/discover that an older server refused (OlderServer).
	Err error
	// OlderServer: the attempt is the server/discover with which a client whose revision is not
	// pinned opens a session, and the server answered it as a server of the revisions with
	// sessions (2025-11-25 and earlier) does, so the session opens with initialize, whose attempt
	// follows. Such a server refuses a method it does not know: with the JSON-RPC error Invalid
	// Request, Method not found or Invalid params, with an HTTP 400, 404 or 405 (whatever error
	// its body holds), by ending the session, or with the error Unsupported protocol version
	// naming revisions with sessions alone; or it answers with a result that names no stateless
	// revision. That answer is what the probe asked, not a failure: Outcome is Answered, Err is
	// nil, and HTTPStatus keeps the status of the refusal. A server/discover that went otherwise
	// (no answer in time, a 5xx, a result that does not decode, another JSON-RPC error) has its
	// error in Err, though the client may go on to initialize all the same.
	OlderServer bool
	// Replayed: the server answered from its receipt of an earlier send (see Response.Replayed).
	Replayed bool
	// Delay is the wait before the call's next attempt; 0 when none follows.
	Delay time.Duration
}

// WithAttemptHook calls h once per attempt, after its outcome is known and, when another
// follows, the wait before it: every attempt of a call (resends, re-issues, rounds), and each
// handshake request. ctx is the call's context (for a handshake, that of the call or Connect
// that opened the session), with its values: a span to add the attempt to. h runs on the
// calling goroutine: it must not block. RetryPolicy.OnRetry is the special case of the attempts
// that another follows.
//
// Hooks add up: each WithAttemptHook option adds h to those given before it, none replaces
// another, and every hook is called for every attempt, in the order the options were given (an
// option that installs a hook, such as the OpenTelemetry module's AttemptHook, counts as one of
// them). A nil h adds nothing.
//
// A client whose revision is not pinned opens a session with a server of the revisions with
// sessions in two attempts: the server/discover the server refuses, told with OlderServer set and
// no error, then the initialize that opens the session. Once it knows the server is older, its
// later sessions open with initialize alone. A failed attempt is one whose Err is not nil.
func WithAttemptHook(h func(ctx context.Context, ev AttemptEvent)) Option {
	return optionFunc(func(c *config) {
		switch prev := c.onAttempt; {
		case h == nil:
		case prev == nil:
			c.ownHandlers().onAttempt = h
		default:
			c.ownHandlers().onAttempt = func(ctx context.Context, ev AttemptEvent) {
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
