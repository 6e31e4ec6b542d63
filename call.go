package mcpclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/northstar-mcp/mcpclient/transport"
)

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
	spec := r.cur.requestSpec
	spec.id = ID{}
	spec.supersedes, spec.automatic = r.cur.id, true
	spec.reason = "re-issued under a new id after an uncertain attempt; the request is safe to repeat"
	// Its progress token is its own id: reports of the first execution, which may still run,
	// must not pass for this one's.
	next, err := r.c.build(spec)
	if err != nil {
		return r.fail(CodeOutcomeUnknown, fmt.Errorf("re-issuing: %w (last attempt: %w)", err, r.lastErr))
	}
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
	if next.asksProgress() {
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
	return req.method == "tools/call" && c.hints.repeatable(req.name)
}
