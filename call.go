package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/northstar-mcp/mcpclient/transport"
)

// NewRequest freezes a request: it picks the id (a fresh UUID, or the one pinned with
// WithRequestID), serializes method and params once and fingerprints the bytes. Nothing is sent.
//
// Freezing first and sending with Do lets a caller record the id durably before any byte leaves,
// which is what a restart needs to find out later what became of the request.
//
// params may be nil, a json.RawMessage, or anything encoding/json marshals to an object.
func (c *Client) NewRequest(method string, params any, opts ...CallOption) (*Request, error) {
	req, err := c.newRequest(method, params, opts)
	return req, returned(err)
}

func (c *Client) newRequest(method string, params any, opts []CallOption) (*Request, error) {
	var cc callConfig
	for _, o := range opts {
		if o != nil {
			o.applyCall(&cc)
		}
	}
	raw, err := marshalParams(params)
	if err != nil {
		return nil, &Error{Code: CodeInvalidArgument, Err: fmt.Errorf("params of %s: %w", method, err)}
	}
	var toolName string
	if method == "tools/call" {
		if toolName = toolNameOf(params, raw); toolName == "" {
			// Most often a tool's arguments passed where the call's params belong: the server
			// would only refuse it, and a recovery would be spent on that refusal.
			return nil, &Error{Code: CodeInvalidArgument, Err: errors.New("tools/call params need the tool's name (for new arguments to the same tool, use CallTool or SupersedeToolCall)")}
		}
	}
	id := cc.id
	pinned := !id.IsZero()
	if !pinned {
		if id, err = newID(c.cfg.idVersion); err != nil {
			return nil, &Error{Code: CodeInvalidArgument, Err: err}
		}
	}
	if cc.progress != nil || cc.idle > 0 {
		// The request's own id is a progress token no other request in flight can have.
		if raw, err = setMeta(raw, map[string]json.RawMessage{"progressToken": json.RawMessage(id.JSON())}); err != nil {
			return nil, &Error{Code: CodeInvalidArgument, Err: err}
		}
	}
	var header map[string]string
	if s := c.current(); s != nil && s.modern {
		if removedMethods[method] {
			return nil, &Error{Code: CodeInvalidArgument, Err: fmt.Errorf("%w: %s is not in %s", ErrMethodRemoved, method, s.init.ProtocolVersion)}
		}
		if raw, err = c.stampModern(raw, s.init.ProtocolVersion); err != nil {
			return nil, &Error{Code: CodeInvalidArgument, Err: err}
		}
		header = standardHeaders(method, raw, s.init.ProtocolVersion)
		if method == "tools/call" {
			if err := c.addParamHeaders(header, toolName, raw); err != nil {
				return nil, &Error{Code: CodeInvalidArgument, Err: err}
			}
		}
	}
	req := freeze(c, id, method, raw)
	req.header = header
	req.idempotent = cc.idempotent
	req.progress, req.idle, req.max = cc.progress, cc.idle, cc.max
	req.toolName = toolName
	if pinned {
		if err := c.ledger.check(req); err != nil {
			return nil, &Error{Code: CodeRequestIDReused, ID: id, Request: req, Err: err}
		}
	}
	return req, nil
}

func marshalParams(params any) (json.RawMessage, error) {
	switch p := params.(type) {
	case nil:
		return nil, nil
	case encodedToolCall:
		return p.raw, nil
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, fmt.Errorf("must be a JSON object, not %s", truncate(raw, 40))
	}
	return raw, nil
}

// encodedToolCall is the params of a tools/call the client serialized itself, as
// encoding/json would have serialized CallToolParams: marshalling them again would only scan
// the arguments, of any size, once more to compact them.
type encodedToolCall struct {
	name string
	raw  json.RawMessage
}

func encodeToolCall(name string, args json.RawMessage) encodedToolCall {
	quoted, _ := json.Marshal(name) // a Go string always marshals
	raw := make([]byte, 0, len(`{"name":,"arguments":}`)+len(quoted)+len(args))
	raw = append(append(raw, `{"name":`...), quoted...)
	if args != nil {
		raw = append(append(raw, `,"arguments":`...), args...)
	}
	return encodedToolCall{name, append(raw, '}')}
}

func toolNameOf(params any, raw json.RawMessage) string {
	switch p := params.(type) {
	case encodedToolCall:
		return p.name
	case CallToolParams:
		return p.Name
	case *CallToolParams:
		return p.Name
	}
	var p struct {
		Name string `json:"name"`
	}
	json.Unmarshal(raw, &p) // a missing or odd name just means no hints apply
	return p.Name
}

// Do sends a frozen request and returns the server's answer.
//
// The request's id denotes its bytes for as long as the client lives (see [Ledger]). Do retries
// under the client's RetryPolicy: a request that was not delivered is resent as it is; after an
// uncertain attempt, the same bytes are resent under the same id when the server keeps receipts,
// a request that is safe to repeat is otherwise re-issued under a new id, and any other request
// ends with ErrOutcomeUnknown. Calling Do again with the same request is a resend; if the request
// is still in flight, the second caller waits for the first attempt loop and gets its result.
//
// After ErrOutcomeUnknown, inspect the server's state before anything else (did the reservation
// happen?), then either Resend the same request to re-read its outcome, or Supersede it.
func (c *Client) Do(ctx context.Context, req *Request) (*Response, error) {
	resp, err := c.do(ctx, req)
	return resp, returned(err)
}

// doOnce runs the attempt loop of one request: one id, one content.
func (c *Client) doOnce(ctx context.Context, req *Request) (*Response, error) {
	if req == nil || req.owner != c {
		return nil, &Error{Code: CodeInvalidArgument, Err: errors.New("the request was not made by this client")}
	}
	f, leader, err := c.ledger.begin(req)
	if err != nil {
		return nil, err
	}
	if !leader {
		return awaitFlight(ctx, req, f)
	}
	ctx, stop, followProgress := c.watchCall(ctx, req)
	defer stop()
	if req.progress != nil || req.idle > 0 {
		c.listenForProgress()
	}
	r := &attemptLoop{c: c, orig: req, cur: req, safe: c.safeToRepeat(req), prior: f.prior, followProgress: followProgress,
		// A resend inherits what earlier calls learned about the id.
		resent: f.reached, everUncertain: f.prior == StateUncertain || f.prior == StateConflict}
	settled := false
	defer func() {
		if !settled { // a panic in a hook: release the waiters, then let it go on
			r.settle(nil, &Error{Code: CodeOutcomeUnknown, ID: r.cur.id, Request: r.cur, Attempts: r.attempts,
				Err: errors.New("panic during the attempt loop")}, StateUncertain, f)
		}
	}()
	resp, err, state := r.run(ctx)
	r.settle(resp, err, state, f)
	settled = true
	return resp, err
}

// awaitFlight waits for another caller's attempt loop for the same request.
func awaitFlight(ctx context.Context, req *Request, f *flight) (*Response, error) {
	select {
	case <-f.done:
		if f.resp == nil {
			return nil, f.err
		}
		resp := *f.resp
		resp.Result = bytes.Clone(resp.Result)
		return &resp, nil
	case <-ctx.Done():
		return nil, &Error{Code: CodeOutcomeUnknown, ID: req.id, Request: req, Err: fmt.Errorf("waiting for the attempt already in flight: %w", ctx.Err())}
	}
}

// attemptLoop is the state of one Do call across its attempts.
type attemptLoop struct {
	c    *Client
	orig *Request
	// cur is the request now being sent: orig, or its re-issue under a new id.
	cur       *Request
	curFlight *flight // the ledger flight of cur when cur is a re-issue
	safe      bool

	attempts int
	// resent: an attempt of cur's bytes may have reached the server, so a refusal of the id may
	// be the server recognizing it.
	resent bool
	// reached: an attempt of cur may have reached the server in this loop. Unlike resent it
	// survives a new session, for the ledger.
	reached bool
	// uncertainIn is the session of cur's last uncertain attempt; the receipt that could settle
	// it lives there.
	uncertainIn   *session
	everUncertain bool
	prior         State // the original's state before this loop
	lastErr       error
	hint          *hintedBackOff
	// reissueNext: cur is to be re-issued under a new id before the next send.
	reissueNext bool
	// followProgress moves the call's progress handler and idle timeout to a re-issue's token.
	followProgress func(token string)
}

func (r *attemptLoop) run(ctx context.Context) (*Response, error, State) {
	p := r.c.cfg.retry
	r.hint = &hintedBackOff{BackOff: backoff.WithMaxRetries(p.NewBackOff(), uint64(p.MaxAttempts-1)), max: p.MaxServerDelay}
	// The waits between attempts end with the caller's context, and when the client closes.
	waitCtx, stopWaiting := r.c.untilClosed(ctx)
	defer stopWaiting()
	b := backoff.WithContext(r.hint, waitCtx)
	var final *Error
	var finalState State
	tries := 0 // the failed attempts as MaxAttempts counts them: sends, and reconnections before one
	resp, err := backoff.RetryNotifyWithData(func() (*Response, error) {
		resp, fail, state, retryErr := r.attempt(ctx)
		if fail != nil {
			final, finalState = fail, state
			return nil, backoff.Permanent(fail)
		}
		return resp, retryErr
	}, b, func(err error, d time.Duration) {
		tries++
		r.c.log.Debug("mcpclient: retrying", "id", r.cur.key, "method", r.cur.method, "attempt", tries, "delay", d, "err", err)
		if p.OnRetry != nil {
			p.OnRetry(tries, err, d)
		}
	})
	switch {
	case err == nil:
		return resp, nil, StateAnswered
	case final != nil:
		return nil, final, finalState
	}
	// Out of attempts, or the context ended or the client closed between attempts.
	cause := r.lastErr
	closed := errors.Is(context.Cause(waitCtx), ErrClosed) && ctx.Err() == nil
	if ctxErr := context.Cause(waitCtx); ctxErr != nil && !errors.Is(cause, ctxErr) {
		cause = fmt.Errorf("%w (last attempt: %w)", ctxErr, cause)
	}
	switch {
	case r.everUncertain:
		return nil, r.fail(CodeOutcomeUnknown, cause), StateUncertain
	case closed:
		return nil, r.fail(CodeClosed, fmt.Errorf("while waiting to retry (last attempt: %w)", r.lastErr)), r.undeliveredState()
	}
	return nil, r.fail(CodeNotDelivered, cause), r.undeliveredState()
}

// untilClosed returns a context that ends with ctx, or with ErrClosed as its cause when the
// client closes, and the func that releases it.
func (c *Client) untilClosed(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(c.ctx, func() { cancel(ErrClosed) })
	return ctx, func() { stop(); cancel(nil) }
}

// undeliveredState is the ledger state after a loop none of whose attempts was delivered: what
// was known before, if anything definite was (a re-read that failed does not undo an answer).
func (r *attemptLoop) undeliveredState() State {
	if r.cur == r.orig && (r.prior == StateAnswered || r.prior == StateFailed) {
		return r.prior
	}
	return StateFailed
}

func (r *attemptLoop) fail(code Code, cause error) *Error {
	return &Error{Code: code, ID: r.cur.id, Request: r.cur, Attempts: r.attempts, Err: cause}
}

// attempt sends cur once. It returns a response, or a final error and the ledger state it
// leaves, or an error to retry after.
func (r *attemptLoop) attempt(ctx context.Context) (resp *Response, final *Error, state State, retry error) {
	c, p := r.c, r.c.cfg.retry
	s, err := c.session(ctx)
	if err != nil {
		var e *Error
		if errors.As(err, &e) { // the client is closed, or the server refused the session
			if e.Code == CodeClosed { // named once, by the code or the cause, not once per layer
				switch {
				case r.everUncertain:
					err = ErrClosed
				case r.lastErr != nil:
					err = fmt.Errorf("before the next attempt (last attempt: %w)", r.lastErr)
				default:
					err = nil
				}
			}
			if r.everUncertain {
				return nil, r.fail(CodeOutcomeUnknown, err), StateUncertain, nil
			}
			return nil, r.fail(e.Code, err), r.undeliveredState(), nil
		}
		r.lastErr = err
		return r.giveUpUnlessRetrying(err)
	}
	if r.uncertainIn != nil && r.uncertainIn != s {
		// Rule 7: the session that could answer for the uncertain attempt is gone, and with it
		// any receipt. A resend could run the request a second time.
		if !r.safe {
			return nil, r.fail(CodeOutcomeUnknown, fmt.Errorf("%w: a resend could run the request twice (last attempt: %w)", ErrSessionLost, r.lastErr)), StateUncertain, nil
		}
		r.uncertainIn, r.resent = nil, false
	}
	if r.reissueNext {
		r.reissueNext = false
		if fail := r.reissue(); fail != nil {
			return nil, fail, StateUncertain, nil
		}
	}

	r.attempts++
	c.ledger.attempted(r.cur.key)
	result, err := s.exchange(ctx, r.cur)
	var malformed *errMalformedAnswer
	if errors.As(err, &malformed) || errors.Is(err, transport.ErrMessageTooLarge) {
		// The server answered the id with something that is no usable answer (both result and
		// error, an error that is no object, more bytes than the limit): the request may have
		// run, and a resend would only fetch the same thing again.
		r.reached, r.everUncertain = true, true
		return nil, r.fail(CodeOutcomeUnknown, err), StateUncertain, nil
	}
	outcome := p.Classify(err, r.resent)
	if outcome != OutcomeNotDelivered {
		r.reached = true
	}
	switch outcome {
	case OutcomeAnswered:
		if err != nil {
			return nil, r.fail(CodeServerError, err), StateFailed, nil
		}
		return &Response{Request: r.cur, Result: result, Attempts: r.attempts}, nil, StateAnswered, nil
	case OutcomeConflict:
		code := CodeRequestInFlight
		var rpc *RPCError
		if errors.As(err, &rpc) && rpc.IDReused() {
			code = CodeRequestIDReused
		}
		return nil, r.fail(code, err), StateConflict, nil
	case OutcomeNotDelivered:
		r.lastErr = err
		r.hint.hint = serverDelay(err)
		return r.giveUpUnlessRetrying(err)
	}

	// Uncertain. The server's delay hint bounds a resend and a re-issue alike.
	r.lastErr = err
	r.everUncertain, r.resent, r.uncertainIn = true, true, s
	r.hint.hint = serverDelay(err)
	switch {
	case p.Mode == RetryNever:
		return nil, r.fail(CodeOutcomeUnknown, err), StateUncertain, nil
	case s.receipts != "" || p.Mode == RetryAlways:
		return nil, nil, 0, err
	case r.safe:
		// Re-issued just before the next send, so that no id takes a ledger entry, or names
		// the call's error, without having been sent.
		r.reissueNext = true
		return nil, nil, 0, err
	}
	return nil, r.fail(CodeOutcomeUnknown, fmt.Errorf("no receipts known and the request is not safe to repeat: %w", err)), StateUncertain, nil
}

// giveUpUnlessRetrying ends the loop after an undelivered attempt under RetryNever, and
// otherwise asks for a retry after err.
func (r *attemptLoop) giveUpUnlessRetrying(err error) (*Response, *Error, State, error) {
	switch {
	case r.c.cfg.retry.Mode != RetryNever:
		return nil, nil, 0, err
	case r.everUncertain:
		return nil, r.fail(CodeOutcomeUnknown, err), StateUncertain, nil
	}
	return nil, r.fail(CodeNotDelivered, err), r.undeliveredState(), nil
}

// reissue replaces cur by the same method and params under a new id, as the protocol asks of a
// safe request whose stream broke. The old entry stays in the ledger, marked superseded.
func (r *attemptLoop) reissue() *Error {
	id, err := newID(r.c.cfg.idVersion)
	if err != nil {
		return r.fail(CodeOutcomeUnknown, err)
	}
	params := r.cur.params
	asksProgress := r.cur.progress != nil || r.cur.idle > 0
	if asksProgress {
		// Reports of the first execution, which may still run, must not pass for this one's.
		if params, err = setMeta(params, map[string]json.RawMessage{"progressToken": json.RawMessage(id.JSON())}); err != nil {
			return r.fail(CodeOutcomeUnknown, fmt.Errorf("re-issuing: %w (last attempt: %w)", err, r.lastErr))
		}
	}
	next := freeze(r.c, id, r.cur.method, params)
	next.toolName, next.idempotent, next.header = r.cur.toolName, r.cur.idempotent, r.cur.header
	next.progress, next.idle, next.max = r.cur.progress, r.cur.idle, r.cur.max
	next.supersedes, next.automatic = r.cur.id, true
	next.reason = "re-issued under a new id after an uncertain attempt; the request is safe to repeat"
	f, _, err := r.c.ledger.begin(next)
	if err != nil {
		// The request may have run, and it stays in the ledger, unresolved: its outcome is
		// what the caller must learn, whatever kept the re-issue from being tracked.
		return r.fail(CodeOutcomeUnknown, fmt.Errorf("the re-issue under a new id was refused: %w (last attempt: %w)", err, r.lastErr))
	}
	if r.curFlight != nil {
		r.c.ledger.settle(r.cur.key, r.curFlight, StateUncertain, true, nil,
			r.fail(CodeOutcomeUnknown, fmt.Errorf("re-issued as %s after: %w", next.key, r.lastErr)))
	}
	r.cur, r.curFlight = next, f
	r.resent, r.reached, r.uncertainIn = false, false, nil
	if asksProgress {
		r.followProgress(next.key)
	}
	return nil
}

// settle records the end of the loop in the ledger: for the request last sent, and for the
// original when a re-issue took its place.
func (r *attemptLoop) settle(resp *Response, err error, state State, f *flight) {
	reached := r.reached
	if r.curFlight != nil {
		r.c.ledger.settle(r.cur.key, r.curFlight, state, reached, resp, err)
		// The original was re-issued after an uncertain attempt: it may or may not have run.
		state, reached = StateUncertain, true
	}
	r.c.ledger.settle(r.orig.key, f, state, reached, resp, err)
}

// safeMethods are the client requests that change nothing on the server, so that running one
// twice does no harm.
var safeMethods = map[string]bool{
	"initialize":               true,
	"ping":                     true,
	"tools/list":               true,
	"resources/list":           true,
	"resources/templates/list": true,
	"resources/read":           true,
	"prompts/list":             true,
	"prompts/get":              true,
	"completion/complete":      true,
	"server/discover":          true,
	"resources/subscribe":      true,
	"resources/unsubscribe":    true,
	"logging/setLevel":         true,
	"subscriptions/listen":     true,
	"tasks/get":                true,
	"tasks/list":               true,
	"tasks/result":             true, // blocks until the task ends, reads its result
	"tasks/cancel":             true, // idempotent: a repeat finds the task cancelled
}

func (c *Client) safeToRepeat(req *Request) bool {
	if req.idempotent || safeMethods[req.method] {
		return true
	}
	return req.method == "tools/call" && c.hints.repeatable(req.toolName)
}
