package mcpclient

import (
	"errors"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/northstar-mcp/mcpclient/transport"
)

// RetryMode decides what happens after an uncertain attempt.
type RetryMode int

const (
	// RetryAuto (the default): when the server keeps receipts (declared, or asserted with
	// WithReceipts), resend the same bytes under the same id. Otherwise re-issue a request that
	// is safe to run twice under a new id, and give up on any other with ErrOutcomeUnknown.
	RetryAuto RetryMode = iota
	// RetryAlways resends the same bytes under the same id whether or not the server declares
	// receipts: for servers known to keep receipts that do not say so.
	RetryAlways
	// RetryNever sends every request once.
	RetryNever
)

// RetryPolicy is how a Client retries. Its zero fields take the defaults of
// [DefaultRetryPolicy]; wrap the exported defaults rather than rewriting them.
//
// Whatever the policy, the client never retries a conflict or an answer (a JSON-RPC error or a
// tool's isError result is the definite outcome of its id), never puts other bytes under an id,
// and never resends a request that is not safe to repeat once its receipt scope is lost.
type RetryPolicy struct {
	// Mode decides what follows an uncertain attempt. Default RetryAuto.
	Mode RetryMode

	// MaxAttempts bounds the tries of one call: every send counts, re-issues included, and so
	// does a failed reconnect before a send. Default 4.
	MaxAttempts int

	// Classify tells the outcome of one attempt from its error: nil for a response, an
	// *RPCError for a JSON-RPC error answer, a transport or context error otherwise. resent
	// reports that an earlier attempt of the same bytes may have reached the server. Default
	// DefaultClassify.
	Classify func(err error, resent bool) transport.Outcome

	// NewBackOff returns a fresh BackOff for each call, and each Connect, that needs a second
	// attempt (one settled by its first asks for none, so an elapsed-time limit counts from the
	// end of the first attempt); the client bounds it by MaxAttempts and wraps it with the
	// call's context, outermost. Default DefaultBackOff.
	NewBackOff func() backoff.BackOff

	// RetryAfterIsUncertain makes an HTTP 429 or 503 that carries Retry-After an uncertain
	// outcome, where by default it is not delivered.
	//
	// The default assumes the server itself answered so, turning the request away before its
	// MCP handler read it: nothing ran, so the same bytes are resent under the same id after the
	// delay, whatever the request. A gateway, load balancer or proxy in front of the server may
	// answer 503 (some with Retry-After) after it forwarded the request, which may then have run:
	// set this when one may stand in front of the server. Such a refusal then follows the rule of
	// any uncertain attempt: the same bytes resent under the same id (after the delay) when the
	// server keeps receipts, a re-issue of a request safe to repeat, and ErrOutcomeUnknown for
	// any other. It applies to what Classify returns.
	RetryAfterIsUncertain bool

	// MaxServerDelay caps the server's delay hints (Retry-After, SSE retry:), which replace the
	// computed wait when present. Default 30s.
	MaxServerDelay time.Duration

	// OnRetry, if set, is called before each wait: once for every failed attempt that another
	// follows, never after the last. attempt numbers the failed one from 1 as MaxAttempts counts
	// them: in a call, every send and every reconnection that failed before a send (so it may
	// exceed the Attempts of the call's Response or Error, which count sends only); in Connect,
	// every try at opening the session. cause is why it failed, delay the wait that follows. It
	// runs on the caller's goroutine, for logs and metrics; it must not block.
	OnRetry func(attempt int, cause error, delay time.Duration)
}

// DefaultMaxAttempts is the MaxAttempts of a RetryPolicy that sets none.
const DefaultMaxAttempts = 4

// defaultMaxServerDelay is the MaxServerDelay of a RetryPolicy that sets none.
const defaultMaxServerDelay = 30 * time.Second

// DefaultRetryPolicy returns the policy a Client uses unless WithRetryPolicy says otherwise.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{
		Mode:           RetryAuto,
		MaxAttempts:    DefaultMaxAttempts,
		Classify:       DefaultClassify,
		NewBackOff:     DefaultBackOff,
		MaxServerDelay: defaultMaxServerDelay,
	}
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	d := DefaultRetryPolicy()
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.Classify == nil {
		p.Classify = d.Classify
	}
	if p.NewBackOff == nil {
		p.NewBackOff = d.NewBackOff
	}
	if p.MaxServerDelay <= 0 {
		p.MaxServerDelay = d.MaxServerDelay
	}
	if p.RetryAfterIsUncertain {
		classify := p.Classify
		p.Classify = func(err error, resent bool) transport.Outcome {
			outcome := classify(err, resent)
			if outcome == transport.NotDelivered && refusedWithRetryAfter(err) {
				return transport.Uncertain
			}
			return outcome
		}
	}
	return p
}

// refusedWithRetryAfter reports whether err is an HTTP 429 or 503 that the transport reported
// as not delivered: one that carried Retry-After.
func refusedWithRetryAfter(err error) bool {
	var status *transport.StatusError
	return transport.OutcomeOf(err) == transport.NotDelivered && errors.As(err, &status) &&
		(status.StatusCode == http.StatusTooManyRequests || status.StatusCode == http.StatusServiceUnavailable)
}

// DefaultBackOff returns an exponential backoff with jitter: base waits of 100ms, 200ms,
// 400ms… capped at 5s, each randomized by ±50% (so no wait exceeds 7.5s). It sets no
// elapsed-time limit: attempts and the caller's context bound a call.
func DefaultBackOff() backoff.BackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(100*time.Millisecond),
		backoff.WithRandomizationFactor(0.5),
		backoff.WithMultiplier(2),
		backoff.WithMaxInterval(5*time.Second),
		backoff.WithMaxElapsedTime(0),
	)
}

// DefaultClassify is the outcome classification of record:
//
//   - nil: answered.
//   - a transport.Error reporting a conflict (HTTP 409): conflict, whatever its body says.
//   - an *RPCError flagged MCP_REQUEST_ID_REUSED: conflict.
//   - an *RPCError -32600 (invalid request) for a resend that may follow a delivered attempt:
//     conflict, the in-flight refusal of servers that keep no receipts (Ruby SDK, Go SDK).
//   - any other *RPCError: answered; an error is an outcome.
//   - a transport.Error: its own outcome (HTTP 409 is a conflict there; a 429 or 503 that
//     carries Retry-After is not delivered, the server's refusal of a request it did not read,
//     unless RetryPolicy.RetryAfterIsUncertain says a gateway may answer so after forwarding).
//   - anything else, context errors included: uncertain, since the bytes may be out.
func DefaultClassify(err error, resent bool) transport.Outcome {
	if err == nil {
		return transport.Answered
	}
	if transport.OutcomeOf(err) == transport.Conflict {
		return transport.Conflict
	}
	var rpc *RPCError
	if errors.As(err, &rpc) {
		if rpc.IDReused() || (resent && rpc.Code == RPCInvalidRequest) {
			return transport.Conflict
		}
		return transport.Answered
	}
	return transport.OutcomeOf(err)
}

// serverDelay returns the delay hint a transport error carries, or zero.
func serverDelay(err error) time.Duration {
	var te *transport.Error
	if errors.As(err, &te) {
		return te.RetryAfter
	}
	return 0
}

// hintedBackOff lets a server's delay hint replace the computed wait while still counting the
// attempt, so that hints never extend the attempt budget.
type hintedBackOff struct {
	backoff.BackOff
	hint time.Duration
	max  time.Duration
}

func (b *hintedBackOff) NextBackOff() time.Duration {
	next := b.BackOff.NextBackOff()
	if next == backoff.Stop || b.hint <= 0 {
		return next
	}
	next = min(b.hint, b.max)
	b.hint = 0
	return next
}

// methodFacts are what the client knows of a client request method, as far as retries and
// revisions are concerned.
type methodFacts struct {
	// safe: the request changes nothing on the server, so running it twice does no harm.
	safe bool
	// removed: the stateless revisions (2026-07-28 and later) took the method out of the
	// protocol; the client refuses it before sending there.
	removed bool
	// input: a stateless server may answer it with input_required (multi round-trip requests).
	input bool
}

// methods is the one table of method facts; a method it does not name is none of these.
var methods = map[string]methodFacts{
	"initialize":               {safe: true, removed: true},
	"ping":                     {safe: true, removed: true},
	"server/discover":          {safe: true},
	"tools/list":               {safe: true},
	"tools/call":               {input: true},
	"resources/list":           {safe: true},
	"resources/templates/list": {safe: true},
	"resources/read":           {safe: true, input: true},
	"resources/subscribe":      {safe: true, removed: true},
	"resources/unsubscribe":    {safe: true, removed: true},
	"prompts/list":             {safe: true},
	"prompts/get":              {safe: true, input: true},
	"completion/complete":      {safe: true},
	"logging/setLevel":         {safe: true},
	"subscriptions/listen":     {safe: true},
	// tasks/get, tasks/update and tasks/cancel are those of the tasks extension in the stateless
	// revisions, and of the task feature of 2025-11-25 (no tasks/update there). An update
	// repeated is ignored by the server (it answers only keys still outstanding, each asked once
	// in a task's life); a cancel repeated finds the task cancelling.
	"tasks/get":                {safe: true},
	"tasks/update":             {safe: true},
	"tasks/cancel":             {safe: true},
	"tasks/list":               {safe: true, removed: true},
	"tasks/result":             {safe: true, removed: true}, // blocks until the task ends, reads its result
	"skills/list":              {safe: true},
	"skills/get":               {safe: true},
	"resources/directory/read": {safe: true},
}

// removedIn reports whether revision version took method out of the protocol.
func removedIn(method, version string) bool { return isStateless(version) && methods[method].removed }

// asksForInput reports whether a stateless server may answer method with input_required.
func asksForInput(method string) bool { return methods[method].input }

// safeToRepeat reports whether req may run twice without harm: a read-only method, a request
// the caller vouched for, or a call of a tool whose last listing, still fresh by the lifetime
// the server gave it, says readOnlyHint or idempotentHint (past that lifetime the attempt loop
// asks a fresh listing when it matters: refreshSafety).
func (c *Client) safeToRepeat(req *Request) bool {
	if req.idempotent || methods[req.method].safe {
		return true
	}
	return req.method == "tools/call" && c.tools.repeatable(req.name)
}
