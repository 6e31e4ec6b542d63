package mcpclient

// The life of a call, in the order it is lived: Do hands a frozen request to the rounds of its
// revision (do, rounds), each round runs one attempt loop under one id (doOnce, run), each
// attempt sends the bytes once and reads what happened (attempt), the outcome decides between an
// answer, a resend, a re-issue under a new id, or an error (step), and the ledger records how the
// id ended (settle). Resend and Supersede, the caller's two ways on after an unknown outcome,
// follow.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/transport"
)

// Do sends a frozen request and returns the server's answer.
//
// The request's id denotes its bytes for as long as the client lives, and with a journal for as
// long as the journal holds it (see [Ledger], [WithJournal]). Do retries under the client's
// RetryPolicy: a request that was not delivered is resent as it is; after an uncertain attempt,
// the same bytes are resent under the same id when the server keeps receipts, a request that is
// safe to repeat is otherwise re-issued under a new id, and any other request ends with
// ErrOutcomeUnknown. Calling Do again with the same request is a resend; if the request is still
// in flight, the second caller waits for the first attempt loop and gets its result.
//
// After ErrOutcomeUnknown, or for a request Recover reports unknown after a restart, inspect the
// server's state before anything else (did the reservation happen?), then either Resend the same
// request to re-read its outcome, or Supersede it.
//
// In a stateless revision Do carries the call through its rounds (input the server asks for,
// a refused revision or header corrected), and a tasks/get whose task of the tasks extension
// waits for input gets the client's answers, from its handlers, with one tasks/update; each
// request of a task is put to the handlers once. A tools/call that declares the tasks extension
// may be answered with a task (resultType "task"): Do returns that answer as it is.
func (c *Client) Do(ctx context.Context, req *Request) (*Response, error) {
	resp, err := c.do(ctx, req)
	return resp, returned(err)
}

// MaxRounds bounds the requests one call may take in a stateless revision: the original, and
// the re-issues that answer the server's input requests or correct a refused revision or header.
const MaxRounds = 8

// do sends req and carries the call through the rounds of its revision (see rounds), then fills
// the caller's Response (WithResponse) with the answer.
func (c *Client) do(ctx context.Context, req *Request) (*Response, error) {
	resp, err := c.rounds(ctx, req)
	if err == nil && req.response != nil {
		*req.response = *resp
	}
	return resp, withCallerEnding(ctx, err)
}

// rounds sends req and, in a stateless revision, carries the call through the rounds the protocol
// defines. Each round is a new request with a new id, linked to the one before in the ledger:
//   - input_required: the client answers the input requests with its handlers (elicitation,
//     sampling, roots) and sends the request again with inputResponses and the server's
//     requestState, untouched (multi round-trip requests, SEP-2322);
//   - -32022 UnsupportedProtocolVersion: sent again in a revision the refusal names;
//   - -32020 HeaderMismatch on tools/call: sent again after listing the tools, with fresh
//     Mcp-Param-* headers.
//
// Both refusals come before execution, so the re-issue cannot run anything twice. A complete
// answer ends the call in any round; when the answer to round MaxRounds would need one more
// round, the call ends with ErrRoundLimit before anything more is sent.
func (c *Client) rounds(ctx context.Context, req *Request) (*Response, error) {
	corrected := map[int64]bool{}
	for round := 1; ; round++ {
		resp, err := c.doOnce(ctx, req)
		if req.version == "" { // an older revision: nothing more to do
			return resp, err
		}
		last := round == MaxRounds
		if err != nil {
			var rpc *RPCError
			if !errors.As(err, &rpc) || corrected[rpc.Code] || !correctable(req, rpc) {
				return nil, err
			}
			if last {
				return nil, &Error{Code: CodeServerError, Request: req, Attempts: attemptsOf(err),
					Err: fmt.Errorf("%w: the request mending this refusal would be request %d: %w", ErrRoundLimit, MaxRounds+1, rpc)}
			}
			next, cerr := c.correct(ctx, req, rpc, err)
			if cerr != nil {
				return nil, cerr
			}
			corrected[rpc.Code] = true
			req = next
			continue
		}
		resultType, ok := resultTypeOf(resp.Result)
		if !ok {
			return resp, nil // not an object: the caller's decoding will say so
		}
		switch resultType {
		case "", "complete":
			if req.method == "tasks/get" {
				if err := c.answerTaskInputs(ctx, req, resp.Result); err != nil {
					return nil, err
				}
			}
			return resp, nil
		case "task":
			if !c.acceptsTask(req) {
				return nil, &Error{Code: CodeProtocol, Request: req, Attempts: resp.Attempts,
					Err: fmt.Errorf("%s answered with a task, which only a tools/call that declares the %s extension may be", req.method, tasksExtension)}
			}
			return resp, nil
		case "input_required":
			var r struct {
				InputRequests map[string]json.RawMessage `json:"inputRequests"`
				RequestState  *string                    `json:"requestState"`
			}
			if err := json.Unmarshal(resp.Result, &r); err != nil {
				return resp, nil // the caller's decoding will say what is wrong with it
			}
			if !asksForInput(req.method) {
				return nil, &Error{Code: CodeProtocol, Request: req, Attempts: resp.Attempts,
					Err: fmt.Errorf("%s answered input_required", req.method)}
			}
			if last {
				return nil, &Error{Code: CodeProtocol, Request: req, Attempts: resp.Attempts,
					Err: fmt.Errorf("%w: request %d still answered input_required", ErrRoundLimit, MaxRounds)}
			}
			next, err := c.answerInputs(ctx, req, r.InputRequests, r.RequestState)
			if err != nil {
				return nil, err
			}
			req = next
		default:
			return nil, &Error{Code: CodeProtocol, Request: req, Attempts: resp.Attempts,
				Err: fmt.Errorf("unknown resultType %q", resultType)}
		}
	}
}

// resultTypeOf reads a stateless result's resultType as encoding/json decodes it into a string
// field, without decoding the rest of the result, which is the caller's. ok is false when it would
// not decode (the result is no object, resultType no string).
func resultTypeOf(result json.RawMessage) (resultType string, ok bool) {
	var raw []byte
	folded := false
	if jsonrpc.EachMember(result, func(k []byte, start, end int) {
		switch {
		case string(k) == "resultType":
			raw = result[start:end]
		case bytes.EqualFold(k, []byte("resultType")):
			folded = true
		}
	}) && !folded {
		if raw == nil {
			return "", true
		}
		if end, s, ok := jsonrpc.String(raw, 0); ok && end == len(raw) {
			return s, true
		}
		return resultType, json.Unmarshal(raw, &resultType) == nil
	}
	var r struct {
		ResultType string `json:"resultType"`
	}
	err := json.Unmarshal(result, &r)
	return r.ResultType, err == nil
}

// doOnce runs the attempt loop of one request: one id, one content.
func (c *Client) doOnce(ctx context.Context, req *Request) (*Response, error) {
	if req == nil || req.owner != c {
		return nil, &Error{Code: CodeInvalidArgument, Err: errors.New("the request was not made by this client")}
	}
	f, leader, err := c.beginFlight(ctx, req)
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
	safe := c.safeToRepeat(req)
	r := &attemptLoop{c: c, orig: req, cur: req, safe: safe, staleHint: !safe && req.method == "tools/call" && c.tools.staleSafe(req.name),
		prior: f.prior, followProgress: followProgress,
		// A resend inherits what earlier calls, in this process or an earlier one, learned
		// about the id.
		resent: f.reached, everUncertain: f.prior == StateUncertain || f.prior == StateConflict, state: f.prior,
		claim: f.claim, bound: f.bound, receiptsGuard: req.receiptsGuard, receiptsSince: req.receiptsSince, answered: f.answered()}
	settled := false
	defer func() {
		if !settled { // a panic in a hook: release the waiters, then let it go on
			r.settle(nil, &Error{Code: CodeOutcomeUnknown, Request: r.cur, Attempts: r.attempts,
				Err: errors.New("panic during the attempt loop")}, StateUncertain, f)
		}
	}()
	resp, state, err := r.run(ctx)
	r.settle(resp, err, state, f)
	settled = true
	return resp, err
}

// beginFlight starts the ledger's flight for req and, with a journal, claims the id there before
// anything is sent: the journal must hold the request's bytes before the first of them leaves.
// A claim the journal refuses ends the flight as it found the id, nothing sent.
func (c *Client) beginFlight(ctx context.Context, req *Request) (f *flight, leader bool, err error) {
	l := c.Ledger()
	f, leader, err = l.begin(req)
	if err != nil || !leader || c.cfg.journal == nil {
		return f, leader, err
	}
	rec := c.journalRecord(req)
	claim, cerr := c.cfg.journal.Claim(ctx, rec)
	if cerr != nil {
		e := &Error{Code: journalCode(cerr), Request: req, Err: fmt.Errorf("the journal did not record the request, which was not sent: %w", cerr)}
		l.abandon(req, f, e)
		return nil, false, e
	}
	f.claim = claim
	f.bound = rec.Receipts
	if prior, known := claim.Prior(); known {
		// The journal's record is the id's history: an earlier process may have sent it,
		// had it answered, or left it open mid-call. A known id keeps the receipts of its last
		// send, which may not be those at hand: a send under others records its own first.
		l.adopt(req, f, prior)
		f.bound = prior.Receipts
	}
	return f, true, nil
}

// journalCode is the Code of a journal's refusal of a claim.
func journalCode(err error) Code {
	for _, code := range []Code{CodeRequestIDReused, CodeRequestInFlight, CodeLedgerFull, CodeSuperseded} {
		if errors.Is(err, sentinels[code]) {
			return code
		}
	}
	return CodeJournal
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
		return nil, &Error{Code: CodeOutcomeUnknown, Request: req, Err: fmt.Errorf("waiting for the attempt already in flight: %w", ctx.Err())}
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
	// staleHint: the tool is safe to repeat by a listing that went stale; refreshSafety asks
	// a fresh one when it matters.
	staleHint bool

	attempts int
	// resent: an attempt of cur's bytes may have reached the server, so a refusal of the id may
	// be the server recognizing it.
	resent bool
	// reached: an attempt of cur may have reached the server in this loop. Unlike resent it
	// survives a new session, for the ledger; via is the session of the last such attempt, and
	// origVia that of orig's once a re-issue took its place.
	reached      bool
	via, origVia *session
	// uncertainIn is the session of cur's last uncertain attempt; the receipt that could settle
	// it lives there.
	uncertainIn   *session
	everUncertain bool
	prior         State // the original's state before this loop
	// state is cur's state as its attempts left it (see transition), from what was known before
	// the loop: orig's prior, nothing for a re-issue.
	state   State
	lastErr error
	// hint carries the server's delay hint from an attempt to the wait after it; its BackOff
	// is made only once an attempt fails.
	hint hintedBackOff
	// reissueNext: cur is to be re-issued under a new id before the next send.
	reissueNext bool
	// tries counts the attempts as RetryPolicy.MaxAttempts does: sends, and reconnections that
	// failed before one.
	tries int
	// event is the last attempt's, for the attempt hook, told once the wait after it is known.
	event *AttemptEvent
	// ctx is the call's, for the attempt hook.
	ctx context.Context
	// followProgress moves the call's progress handler and idle timeout to a re-issue's token.
	followProgress func(token string)
	// claim is the journal's hold on cur's id, and bound the receipts it holds for it; claim is
	// nil without a journal.
	claim JournalClaim
	bound ReceiptBinding
	// receiptsGuard is the receipts an earlier process sent orig under, until the first session
	// of this loop is checked against them (see Client.Recover).
	receiptsGuard *ReceiptBinding
	receiptsSince time.Time // when the earlier process first sent orig
	// answered is how orig was answered before this loop, until its first send is checked
	// against it: a request answered before is sent again only where a receipt answers it.
	answered *answeredBefore
}

// run sends cur until an attempt settles the matter or the policy's attempts, the caller's
// context or the client run out, waiting between attempts as the backoff and the server's delay
// hints say.
func (r *attemptLoop) run(ctx context.Context) (*Response, State, error) {
	r.ctx = ctx
	// Most calls end with their first attempt: the backoff, the context of the waits and the
	// retry loop are made only for a call that needs a second.
	first := r.attempt(ctx)
	if first.retry == nil {
		r.told(0)
		if first.final != nil {
			return nil, first.state, first.final
		}
		return first.resp, first.state, nil
	}
	p := r.c.cfg.retry
	r.hint.BackOff = backoff.WithMaxRetries(p.NewBackOff(), uint64(p.MaxAttempts-1))
	r.hint.max = p.MaxServerDelay
	// The waits between attempts end with the caller's context, and when the client closes; the
	// client is watched from the first wait on.
	waitCtx, endWait := context.WithCancelCause(ctx)
	defer endWait(nil)
	var stopWatching func() bool
	defer func() {
		if stopWatching != nil {
			stopWatching()
		}
	}()
	b := backoff.WithContext(&r.hint, waitCtx)
	var final step
	pending := &first
	resp, err := backoff.RetryNotifyWithData(func() (*Response, error) {
		var st step
		if pending != nil { // the first attempt, already made
			st, pending = *pending, nil
		} else {
			st = r.attempt(ctx)
		}
		if st.final != nil {
			final = st
			return nil, backoff.Permanent(st.final)
		}
		if st.resp != nil {
			final = st
		}
		return st.resp, st.retry
	}, b, func(err error, d time.Duration) {
		if stopWatching == nil {
			stopWatching = context.AfterFunc(r.c.lifetime(), func() { endWait(ErrClosed) })
		}
		r.c.log.Debug("mcpclient: retrying", "id", r.cur.key, "method", r.cur.method, "attempt", r.tries, "delay", d, "err", err)
		r.told(d)
		if p.OnRetry != nil {
			p.OnRetry(r.tries, err, d)
		}
	})
	r.told(0)
	switch {
	case err == nil:
		return resp, final.state, nil
	case final.final != nil:
		return nil, final.state, final.final
	}
	// Out of attempts, or the context ended or the client closed between attempts.
	cause := r.lastErr
	closed := errors.Is(context.Cause(waitCtx), ErrClosed) && ctx.Err() == nil
	if ctxErr := context.Cause(waitCtx); ctxErr != nil && !errors.Is(cause, ctxErr) {
		cause = fmt.Errorf("%w (last attempt: %w)", ctxErr, cause)
	}
	switch {
	case r.everUncertain:
		return nil, StateUncertain, r.fail(CodeOutcomeUnknown, cause)
	case closed:
		return nil, r.undeliveredState(), r.fail(CodeClosed, fmt.Errorf("while waiting to retry (last attempt: %w)", r.lastErr))
	}
	return nil, r.undeliveredState(), r.fail(CodeNotDelivered, cause)
}

// A step is what one attempt leaves its loop with: an answer; or the end of the loop, with the
// ledger state it leaves and the error the call returns; or, with neither, the cause to retry
// after.
type step struct {
	resp  *Response
	state State  // with final
	final *Error // the call's error: no more attempts
	retry error  // the cause of a retry
}

// stepAnswer ends the loop with resp, leaving the id in state: answered, unless the caller's
// answer is an interceptor's, for a request that was not sent or that the server refused.
func stepAnswer(resp *Response, state State) step { return step{resp: resp, state: state} }

// stepEnd ends the loop with err, leaving the id in state.
func stepEnd(state State, err *Error) step { return step{state: state, final: err} }

// stepRetry asks for another attempt after the loop's wait, cause being why.
func stepRetry(cause error) step { return step{retry: cause} }

// noteAttempt records the outcome of the attempt just made in its event, if the hook wants one.
func (r *attemptLoop) noteAttempt(start time.Time, outcome transport.Outcome, err error) {
	if r.event != nil {
		r.event.finish(start, outcome, err)
	}
}

// told hands the last attempt's event to the attempt hook, with the wait before the next.
func (r *attemptLoop) told(delay time.Duration) {
	if ev := r.event; ev != nil {
		r.event = nil
		ev.Delay = delay
		r.c.cfg.onAttempt(r.ctx, *ev)
	}
}

// attempt sends cur once, on the live session, and reads its outcome.
func (r *attemptLoop) attempt(ctx context.Context) step {
	c, p := r.c, r.c.cfg.retry
	r.tries++
	// An answer to server/discover asked for once the attempt began (its session's, if that one
	// was stale) is fresh enough to confirm the receipts the attempt relies on: one asked before
	// is not.
	begun := discoverSerials.Load()
	s, err := c.session(ctx)
	if err != nil {
		if c.cfg.onAttempt != nil {
			// No request went out: the session it would have gone on could not be opened.
			r.event = &AttemptEvent{Method: r.cur.method, Attempt: r.tries, Outcome: transport.NotDelivered, Err: err}
		}
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
				return stepEnd(StateUncertain, r.fail(CodeOutcomeUnknown, err))
			}
			return stepEnd(r.undeliveredState(), r.fail(e.Code, err))
		}
		r.lastErr = err
		return r.giveUpUnlessRetrying(err)
	}
	if st, ok := r.receiptsBeforeSend(ctx, s, begun); !ok {
		return st
	}
	if r.reissueNext {
		r.reissueNext = false
		if fail := r.reissue(ctx, s); fail != nil {
			return stepEnd(StateUncertain, fail)
		}
	}
	if st, ok := r.journalBeforeSend(ctx, s); !ok {
		return st
	}

	var start time.Time
	if c.cfg.onAttempt != nil {
		ev := attemptEvent(r.cur, s, r.tries, false)
		r.event, start = &ev, time.Now()
	}
	out := c.send(ctx, s, r.cur, r.tries, false)
	result, err := out.result, out.err
	if !out.sent {
		r.noteAttempt(start, transport.NotDelivered, err)
		if err == nil { // an interceptor answered by itself: the id was not sent
			state := r.undeliveredState()
			if r.everUncertain {
				state = StateUncertain
			}
			return stepAnswer(&Response{Request: r.cur, Result: result, Attempts: r.attempts}, state)
		}
		if r.everUncertain {
			return stepEnd(StateUncertain, r.fail(CodeOutcomeUnknown, fmt.Errorf("%w: %w", ErrRefused, err)))
		}
		return stepEnd(r.undeliveredState(), r.fail(CodeRefused, err))
	}
	r.attempts++
	c.Ledger().attempted(r.cur.key)
	if err != nil && (isMalformedAnswer(err) || errors.Is(err, transport.ErrMessageTooLarge)) {
		// The server answered the id with something that is no usable answer (both result and
		// error, an error that is no object, more bytes than the limit): the request may have
		// run, and a resend would only fetch the same thing again.
		r.reached, r.via, r.everUncertain = true, s, true
		r.state = transition(r.state, transport.Uncertain, false)
		r.noteAttempt(start, transport.Uncertain, err)
		return stepEnd(StateUncertain, r.fail(CodeOutcomeUnknown, err))
	}
	outcome := p.Classify(err, r.resent)
	r.noteAttempt(start, outcome, err)
	r.state = transition(r.state, outcome, err != nil)
	if outcome != transport.NotDelivered {
		r.reached, r.via = true, s
	}
	switch outcome {
	case transport.Answered:
		state := StateAnswered
		if err != nil {
			state = StateFailed
		}
		if err != nil && receiptInDoubt(err) {
			// The server that holds the request's receipt cannot say how it ended, and will
			// not run it again: the outcome is unknown, for good.
			return stepEnd(StateUncertain, r.fail(CodeOutcomeUnknown, err))
		}
		// The ledger keeps the server's answer; the caller gets what the interceptors made of it.
		if result, err = out.answer(); err != nil {
			return stepEnd(state, r.fail(CodeServerError, err))
		}
		replayed := replayMarked(result)
		if r.event != nil {
			r.event.Replayed = replayed
		}
		return stepAnswer(&Response{Request: r.cur, Result: result, Attempts: r.attempts, Replayed: replayed}, state)
	case transport.Conflict:
		code := CodeRequestInFlight
		var rpc *RPCError
		if errors.As(err, &rpc) && rpc.IDReused() {
			code = CodeRequestIDReused
		}
		return stepEnd(StateConflict, r.fail(code, err))
	case transport.NotDelivered:
		r.lastErr = err
		r.hint.hint = serverDelay(err)
		if errors.Is(err, transport.ErrUnauthorized) {
			// The transport's authorizer, if any, already did what new credentials can do:
			// sending again would only be refused again.
			if r.everUncertain {
				return stepEnd(StateUncertain, r.fail(CodeOutcomeUnknown, err))
			}
			return stepEnd(r.undeliveredState(), r.fail(CodeUnauthorized, err))
		}
		return r.giveUpUnlessRetrying(err)
	}

	// Uncertain. The server's delay hint bounds a resend and a re-issue alike.
	r.lastErr = err
	r.everUncertain, r.resent, r.uncertainIn = true, true, s
	r.hint.hint = serverDelay(err)
	if s.receipts == "" && p.Mode == RetryAuto {
		r.refreshSafety(ctx)
	}
	switch {
	case p.Mode == RetryNever:
		return stepEnd(StateUncertain, r.fail(CodeOutcomeUnknown, err))
	case s.receipts != "" || p.Mode == RetryAlways:
		return stepRetry(err)
	case r.safe:
		// Re-issued just before the next send, so that no id takes a ledger entry, or names
		// the call's error, without having been sent.
		r.reissueNext = true
		return stepRetry(err)
	}
	return stepEnd(StateUncertain, r.fail(CodeOutcomeUnknown, fmt.Errorf("no receipts known and the request is not safe to repeat: %w", err)))
}

// receiptsBeforeSend checks, before an attempt on s, that the receipts a send of cur's bytes
// relies on are held: the server must answer it from a receipt rather than run it again. Three
// sends rely on them: a resend after an uncertain attempt of this loop; the first send of a
// request Recover found under receipts the server still declared; and a send of a request
// answered before, which only a receipt can answer without running it again. receiptsHold
// decides each, on what the server declares in an answer to a server/discover sent after the one
// numbered begun. ok is false, with the step that ends or retries the loop, when the attempt
// must not be sent.
func (r *attemptLoop) receiptsBeforeSend(ctx context.Context, s *session, begun uint64) (st step, ok bool) {
	mode := r.c.cfg.retry.Mode
	var sent time.Time
	if r.uncertainIn != nil {
		// Whatever session it goes on, a resend is answered from the receipt only while the
		// server still keeps it, which it promises for its retention and no longer.
		if sent = r.c.Ledger().created(r.cur.key); receiptsPruned(sent, s) {
			if !r.safe {
				return stepEnd(StateUncertain, r.fail(CodeOutcomeUnknown, fmt.Errorf("the request was first sent %s ago, and the server keeps receipts for %s: its receipt may be gone, and a resend could run it twice (last attempt: %w)", time.Since(sent).Round(time.Millisecond), s.receiptRetention(), r.lastErr))), false
			}
			// Past the retention the old id promises nothing: as without receipts, the request
			// goes again under a new id.
			r.uncertainIn, r.resent, r.reissueNext = nil, false, true
		}
	}
	if r.uncertainIn != nil && !(r.uncertainIn == s && (r.safe || mode == RetryAlways)) {
		then := bindingOf(r.uncertainIn)
		var held bool
		var now ReceiptBinding
		var err error
		if r.safe {
			// Running it again does no harm: what s declared is enough to tell whether a
			// refusal of the id is the server recognizing it.
			now = bindingOf(s)
			held = receiptsHeld(then, now)
		} else {
			held, now, err = r.c.receiptsHold(ctx, s, then, sent, r.uncertainIn == s, begun)
		}
		switch {
		case err != nil:
			return r.giveUpUnlessRetrying(err), false
		case held:
			// The receipt is there: the same bytes under the same id read it on s, and a
			// refusal of the id is still the server recognizing it.
			r.uncertainIn = s
		case !r.safe:
			// The receipt that could answer for the uncertain attempt is gone, with the
			// session or the server process that held it: a resend could run the request a
			// second time.
			return stepEnd(StateUncertain, r.fail(CodeOutcomeUnknown, fmt.Errorf("%w: the request went out under %s and the server now declares %s; a resend could run it twice (last attempt: %w)", ErrSessionLost, then, now, r.lastErr))), false
		default: // safe to repeat: it goes on
			r.uncertainIn, r.resent = nil, false
		}
	}
	if under := r.receiptsGuard; under != nil {
		// An earlier process may have sent the request, and only a receipt of the same server
		// process can answer for it without running it again.
		held, now, err := r.c.receiptsHold(ctx, s, *under, r.receiptsSince, false, begun)
		if err != nil {
			return r.giveUpUnlessRetrying(err), false
		}
		r.receiptsGuard = nil
		if !held {
			return stepEnd(StateUncertain, r.fail(CodeOutcomeUnknown, fmt.Errorf("%w: recovered from the journal, sent under %s %s ago, and the server now declares %s, keeping receipts %s; a resend could run the request twice", ErrSessionLost, *under, time.Since(r.receiptsSince).Round(time.Second), now, s.receiptRetention()))), false
		}
		r.uncertainIn = s
	}
	if a := r.answered; a != nil && r.cur == r.orig {
		if !r.safe && mode != RetryAlways {
			r.refreshSafety(ctx)
		}
		if !r.safe && mode != RetryAlways {
			held, now, err := r.c.receiptsHold(ctx, s, a.record.Receipts, a.record.Created, a.via == s.serial, begun)
			if err != nil {
				return r.giveUpUnlessRetrying(err), false
			}
			if !held {
				r.answered = nil
				return stepEnd(StateAnswered, r.fail(CodeAlreadyAnswered, &AnsweredError{Record: *a.record, Now: now})), false
			}
		}
		r.answered = nil
	}
	return step{}, true
}

// refreshSafety lists the tools again when the call's only word on whether it is safe to
// repeat came from a listing that went stale (a server that lets its listings be cached briefly,
// or not at all: ttlMs 0), and takes the word of the listing it gets, which is as fresh as a
// listing can be. It asks once per call, and only when the answer decides what happens next; a
// listing that fails leaves the call unsafe.
func (r *attemptLoop) refreshSafety(ctx context.Context) {
	if !r.staleHint {
		return
	}
	r.staleHint = false
	tools, err := Collect(r.c.Tools(ctx))
	if err != nil {
		r.c.log.Debug("mcpclient: the tools could not be listed again; the call stays unsafe to repeat", "tool", r.orig.name, "err", err)
		return
	}
	for _, t := range tools {
		if t.Name == r.orig.name {
			r.safe = t.Annotations.safeToRepeat()
			return
		}
	}
}

// receiptsHold decides whether receipts kept under then, for a request first sent at sent (zero:
// not known) on s itself (sameSession) or elsewhere, answer a send of the same bytes under the
// same id on s without running the request again. On the session that made the send they are
// held while it lives, and elsewhere only process-scope receipts under an epoch the server still
// declares (see receiptsHeld); never past the retention the server declares, after which a
// receipt may be pruned (see receiptsPruned). What the server declares is read again where a
// server restart could hide behind s (the stateless revision, a session that outlives its
// process), from an answer to a server/discover sent after the one numbered begun; elsewhere a
// restart would have ended s, and s declared it when it opened.
func (c *Client) receiptsHold(ctx context.Context, s *session, then ReceiptBinding, sent time.Time, sameSession bool, begun uint64) (held bool, now ReceiptBinding, err error) {
	if receiptsPruned(sent, s) {
		return false, bindingOf(s), nil
	}
	if !s.stateless && !outlivesItsProcess(s) {
		now = bindingOf(s)
		if sameSession {
			return then.Scope != "", now, nil
		}
		return receiptsHeld(then, now), now, nil
	}
	if now, err = c.freshBinding(ctx, s, begun); err != nil {
		return false, now, err
	}
	return receiptsHeld(then, now), now, nil
}

// journalBeforeSend checks, before an attempt on s, that the journal's claim on cur's id still
// holds, and records the receipts the attempt goes out under when they are not those last
// recorded. ok is false, with the step that ends the loop, when the attempt must not be sent.
func (r *attemptLoop) journalBeforeSend(ctx context.Context, s *session) (st step, ok bool) {
	if r.claim == nil {
		return step{}, true
	}
	var err error
	select {
	case <-r.claim.Lost():
		err = errors.New("the journal's claim on the id lapsed; another holder may now send it")
	default:
		if b := bindingOf(s); b != r.bound {
			if err = r.claim.Rebind(ctx, b); err == nil {
				r.bound = b
			}
		}
	}
	if err == nil {
		return step{}, true
	}
	if r.lastErr != nil {
		err = fmt.Errorf("%w (last attempt: %w)", err, r.lastErr)
	}
	if r.everUncertain {
		return stepEnd(StateUncertain, r.fail(CodeOutcomeUnknown, fmt.Errorf("%w: %w", ErrJournal, err))), false
	}
	return stepEnd(r.undeliveredState(), r.fail(CodeJournal, err)), false
}

// giveUpUnlessRetrying ends the loop after an undelivered attempt under RetryNever, and
// otherwise asks for a retry after err.
func (r *attemptLoop) giveUpUnlessRetrying(err error) step {
	switch {
	case r.c.cfg.retry.Mode != RetryNever:
		return stepRetry(err)
	case r.everUncertain:
		return stepEnd(StateUncertain, r.fail(CodeOutcomeUnknown, err))
	}
	return stepEnd(r.undeliveredState(), r.fail(CodeNotDelivered, err))
}

// undeliveredState is the ledger state of cur after a loop none of whose attempts was delivered:
// what was known before, if anything was (a re-read that failed does not undo an answer).
func (r *attemptLoop) undeliveredState() State { return settledState(r.state) }

// transition is the one rule for what an attempt under an id makes of its state, whatever
// process sent it before: an answer is the id's outcome (a JSON-RPC error, failed), a conflict
// and an uncertain attempt are what they are, and an attempt that was not delivered leaves what
// was known.
func transition(prior State, outcome transport.Outcome, rpcError bool) State {
	switch outcome {
	case transport.Answered:
		if rpcError {
			return StateFailed
		}
		return StateAnswered
	case transport.Conflict:
		return StateConflict
	case transport.Uncertain:
		return StateUncertain
	}
	return prior
}

// settledState is the state an attempt loop leaves its id in: the one its attempts left, or
// failed when none was ever delivered and nothing was known before (nothing ran).
func settledState(s State) State {
	if s == 0 || s == StatePending {
		return StateFailed
	}
	return s
}

func (r *attemptLoop) fail(code Code, cause error) *Error {
	return &Error{Code: code, Request: r.cur, Attempts: r.attempts, Err: cause}
}

// reissue replaces cur by the same method and params under a new id, as the protocol asks of a
// safe request whose stream broke. The old entry stays in the ledger, marked superseded. The new
// request is written for s, the session it is sent on: a reconnection may have found the server
// speaking another revision than the lost session did.
func (r *attemptLoop) reissue(ctx context.Context, s *session) *Error {
	spec := r.cur.requestSpec
	spec.id = ID{}
	spec.version = ""
	if s.stateless {
		spec.version = s.init.ProtocolVersion
	}
	spec.supersedes, spec.automatic = r.cur.id, true
	spec.reason = "re-issued under a new id after an uncertain attempt; the request is safe to repeat"
	// Its progress token is its own id: reports of the first execution, which may still run,
	// must not pass for this one's.
	next, err := r.c.build(spec)
	if err != nil {
		return r.fail(CodeOutcomeUnknown, fmt.Errorf("re-issuing: %w (last attempt: %w)", err, r.lastErr))
	}
	f, _, err := r.c.beginFlight(ctx, next)
	if err != nil {
		// The request may have run, and it stays in the ledger, unresolved: its outcome is
		// what the caller must learn, whatever kept the re-issue from being tracked.
		return r.fail(CodeOutcomeUnknown, fmt.Errorf("the re-issue under a new id was refused: %w (last attempt: %w)", err, r.lastErr))
	}
	if r.curFlight != nil {
		r.c.Ledger().settle(r.cur.key, r.curFlight, StateUncertain, r.via, nil,
			r.fail(CodeOutcomeUnknown, fmt.Errorf("re-issued as %s after: %w", next.key, r.lastErr)))
	} else {
		r.origVia = r.via
	}
	r.cur, r.curFlight, r.state = next, f, 0
	r.claim, r.bound = f.claim, f.bound
	r.resent, r.reached, r.via, r.uncertainIn = false, false, nil, nil
	if next.asksProgress() {
		r.followProgress(next.key)
	}
	return nil
}

// settle records the end of the loop in the ledger: for the request last sent, and for the
// original when a re-issue took its place.
func (r *attemptLoop) settle(resp *Response, err error, state State, f *flight) {
	via := r.via
	if r.curFlight != nil {
		r.c.Ledger().settle(r.cur.key, r.curFlight, state, via, resp, err)
		// The original was re-issued after an uncertain attempt: it may or may not have run.
		state, via = StateUncertain, r.origVia
	}
	r.c.Ledger().settle(r.orig.key, f, state, via, resp, err)
}

// attemptsOf returns the attempts an *Error in err's chain counts.
func attemptsOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Attempts
	}
	return 0
}

// correctable reports whether a stateless server's refusal of req says how to mend it.
func correctable(req *Request, rpc *RPCError) bool {
	switch rpc.Code {
	case RPCUnsupportedProtocolVersion:
		return bestVersion(rpc.supportedVersions(), "", true) != ""
	case RPCHeaderMismatch:
		return req.method == "tools/call"
	}
	return false
}

// correct builds the re-issue of a request a stateless server refused before running it, with
// a refusal that correctable accepted. refusal is the error of req that carries rpc.
func (c *Client) correct(ctx context.Context, req *Request, rpc *RPCError, refusal error) (*Request, error) {
	if rpc.Code == RPCUnsupportedProtocolVersion {
		v := bestVersion(rpc.supportedVersions(), "", true)
		return c.reround(req, req.extra, v, "sent again in "+v+", the revision the server named")
	}
	if _, err := Collect(c.Tools(ctx)); err != nil {
		return nil, listingFailed(req, rpc, attemptsOf(refusal), err)
	}
	return c.reround(req, req.extra, req.version, "sent again with the headers of the tool as listed now")
}

// listingFailed is the error of a tools/call refused for its headers whose tools could not be
// listed again to mend them. It is about the call, which the server refused before running it:
// its id, its refusal, and the listing's failure as the cause. The listing's own *Error is not
// in the chain, so that its Code (ErrOutcomeUnknown for a lost tools/list, say) is not taken for
// the call's.
func listingFailed(req *Request, rpc *RPCError, attempts int, err error) *Error {
	cause := err
	var e *Error
	if errors.As(err, &e) {
		cause = fmt.Errorf("%s for tools/list request %s: %w", e.Code, e.Request.ID().JSON(), e.Err)
		if e.Request == nil {
			cause = fmt.Errorf("%s: %w", e.Code, e.Err)
		}
	}
	return &Error{Code: CodeServerError, Request: req, Attempts: attempts,
		Err: fmt.Errorf("%w; listing the tools to mend the headers failed: %w", rpc, cause)}
}

// answerInputs answers the server's input requests with the client's handlers and builds the
// next round: the same request with inputResponses, and requestState exactly as the server sent
// it, or none.
func (c *Client) answerInputs(ctx context.Context, req *Request, inputs map[string]json.RawMessage, state *string) (*Request, error) {
	extra := map[string]json.RawMessage{}
	if len(inputs) > 0 {
		responses := make(map[string]json.RawMessage, len(inputs))
		for key, raw := range inputs {
			b, err := c.answerInput(ctx, req, key, raw)
			if err != nil {
				return nil, err
			}
			responses[key] = b
		}
		b, _ := json.Marshal(responses) // raw values that marshalled once
		extra["inputResponses"] = b
	}
	if state != nil {
		b, _ := json.Marshal(*state) // a Go string always marshals
		extra["requestState"] = b
	}
	return c.reround(req, extra, req.version, "the next round of a multi round-trip request")
}

// An inputRequest is one request for input a server puts in inputRequests: of a multi round-trip
// request, or of a task.
type inputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func inputRequestOf(raw json.RawMessage) (inputRequest, error) {
	var in inputRequest
	err := json.Unmarshal(raw, &in)
	return in, err
}

// answers reports whether the client has a handler for requests for input of method.
func (c *Client) answers(method string) bool { return method != "ping" && c.handlerFor(method) != nil }

// answerInput answers the request for input raw, under key, with the client's handler for its
// method; req is the request whose answer asked for it.
func (c *Client) answerInput(ctx context.Context, req *Request, key string, raw json.RawMessage) (json.RawMessage, error) {
	in, err := inputRequestOf(raw)
	if err != nil {
		return nil, &Error{Code: CodeProtocol, Request: req, Err: fmt.Errorf("input request %q: %w", key, err)}
	}
	if !c.answers(in.Method) {
		return nil, &Error{Code: CodeProtocol, Request: req,
			Err: fmt.Errorf("input request %q asks for %s, which the client did not declare", key, in.Method)}
	}
	result, err := runRequestHandler(ctx, c.handlerFor(in.Method), in.Params)
	if err != nil {
		return nil, &Error{Code: CodeInvalidArgument, Request: req,
			Err: fmt.Errorf("the handler of input request %q (%s): %w", key, in.Method, err)}
	}
	b, err := json.Marshal(result)
	if err != nil {
		return nil, &Error{Code: CodeInvalidArgument, Request: req, Err: err}
	}
	return b, nil
}

// reround builds the next round of a call: req's request with extra as its top-level members
// (the answers of this round; none for a correction), in revision version, under a new id that
// the ledger records as replacing req's.
func (c *Client) reround(req *Request, extra map[string]json.RawMessage, version, reason string) (*Request, error) {
	spec := req.requestSpec
	spec.id = ID{}
	spec.extra, spec.version = extra, version
	spec.supersedes, spec.reason, spec.automatic = req.id, reason, false
	return c.build(spec)
}

// Resend sends req again: the same bytes under the same id. Use it to re-read the outcome of a
// request that ended with ErrOutcomeUnknown or a conflict, after inspecting the server's state.
// A server that keeps receipts answers with the reply it holds, without running the request
// again; one that keeps none may run it again, which is why Resend is the caller's decision and
// never the client's.
//
// Resend is Do by another name, so that code that re-reads says so; it retries under the same
// policy.
func (c *Client) Resend(ctx context.Context, req *Request) (*Response, error) {
	return c.Do(ctx, req)
}

// An Inspection records what a caller looked at, after an uncertain or refused request, before
// deciding to send different content: the evidence that replacing the request is deliberate.
type Inspection struct {
	// Checked says what was looked at: a query, a resource read, a person asked.
	Checked string
	// Found says what it showed about the earlier request's effect.
	Found string
}

func (i Inspection) String() string { return "checked " + i.Checked + "; found " + i.Found }

// Supersede replaces prev by a new request under a new id, and sends it.
//
// Use Supersede, not Resend, when the content must change, or when the inspection showed that
// prev did not run and must run again under a new id. It refuses to work without an inspection
// (ErrInspectionRequired) and while prev is still in flight (ErrRequestInFlight): moving to a new
// id merely to get past an error is what it is there to prevent.
//
// The new request has prev's method and params (nil keeps prev's), and carries
// _meta.supersedes = prev's id on the wire. The ledger keeps prev's entry and records which id
// replaced it and why. Note that the server will run the new request: it is a new request.
//
// For a tools/call, params are the call's params, the tool's name included; to change only the
// tool's arguments, use SupersedeToolCall.
func (c *Client) Supersede(ctx context.Context, prev *Request, inspection Inspection, params any, opts ...CallOption) (*Response, error) {
	next, err := c.newSupersedingRequest(prev, inspection, params, opts)
	if err != nil {
		return nil, returned(err)
	}
	if c.cfg.onSupersedeBuilt != nil {
		c.cfg.onSupersedeBuilt()
	}
	return c.Do(ctx, next)
}

// SupersedeToolCall replaces the tool call prev by a call of the same tool with args (anything
// that marshals to a JSON object, or nil), under a new id, and sends it: Supersede for the usual
// correction, new arguments for the same tool. The new call's params are the tool's name, args
// and _meta.supersedes; what else prev's params carried is not kept (use Supersede to write the
// params whole). It needs an inspection and refuses a prev still in flight, as Supersede does,
// and returns the result as CallTool does.
func (c *Client) SupersedeToolCall(ctx context.Context, prev *Request, inspection Inspection, args any, opts ...CallOption) (*CallToolResult, error) {
	if prev == nil || prev.owner != c {
		return nil, returned(&Error{Code: CodeInvalidArgument, Err: errors.New("the request to supersede was not made by this client")})
	}
	if prev.method != "tools/call" {
		return nil, returned(&Error{Code: CodeInvalidArgument, Request: prev,
			Err: fmt.Errorf("SupersedeToolCall replaces a tools/call, not a %s", prev.method)})
	}
	call, err := encodeToolCall(prev.name, args, 0)
	if err != nil {
		return nil, returned(&Error{Code: CodeInvalidArgument, Request: prev, Err: fmt.Errorf("arguments of tool %s: %w", prev.name, err)})
	}
	next, err := c.newSupersedingRequest(prev, inspection, call, opts)
	if err != nil {
		return nil, returned(err)
	}
	return c.sendToolCall(ctx, next)
}

func (c *Client) newSupersedingRequest(prev *Request, inspection Inspection, params any, opts []CallOption) (*Request, error) {
	if prev == nil || prev.owner != c {
		return nil, &Error{Code: CodeInvalidArgument, Err: errors.New("the request to supersede was not made by this client")}
	}
	if inspection.Checked == "" || inspection.Found == "" {
		return nil, &Error{Code: CodeInvalidArgument, Request: prev, Err: ErrInspectionRequired}
	}
	if e, ok := c.Ledger().Lookup(prev.id); ok && e.State == StatePending {
		return nil, &Error{Code: CodeRequestInFlight, Request: prev,
			Err: errors.New("the request is still in flight; wait for its outcome before superseding it")}
	}
	spec := prev.requestSpec // nil params keep prev's content, without what the client added to it
	if params != nil {
		var err error
		if spec, err = specOf(prev.method, params); err != nil {
			var e *Error
			errors.As(err, &e)
			e.Request = prev
			return nil, e
		}
	}
	spec.meta = map[string]json.RawMessage{"supersedes": json.RawMessage(prev.key)}
	spec.extra, spec.version = nil, ""
	if s := c.current(); s != nil && s.stateless {
		spec.version = s.init.ProtocolVersion
	}
	spec.supersedes, spec.reason, spec.automatic = prev.id, inspection.String(), false
	return c.buildWith(spec, opts)
}

// isMalformedAnswer reports whether err says the server answered with something that is no
// usable answer. It is a function of its own, like receiptInDoubt, so that the variable
// errors.As needs is made only for a failure, not for every answer.
func isMalformedAnswer(err error) bool {
	var malformed *errMalformedAnswer
	return errors.As(err, &malformed)
}

// receiptInDoubt reports whether err is the answer of a server that holds the request's receipt
// and cannot say how it ended.
func receiptInDoubt(err error) bool {
	var rpc *RPCError
	return errors.As(err, &rpc) && rpc.ReceiptInDoubt()
}
