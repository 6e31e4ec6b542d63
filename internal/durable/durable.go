// Package durable holds what the modules for durable-execution engines (temporal, dbos) share:
// the key a retried activity or step derives its request id from, and which errors of a call
// such an engine may retry.
//
// An engine runs an activity or step at least once: it retries one that failed, and one whose
// worker died. Each attempt calls the tool under one request id, derived from the activity's or
// step's identity, with the same arguments and no per-attempt data, so that every attempt is the
// same request and a server that keeps receipts runs the tool once. A retry is then safe as long
// as the error says the request did not run, or that sending it again under its id only reads
// the outcome back; it is wrong where the same request can no longer be sent, or where sending
// it again could run the tool a second time.
package durable

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/northstar-mcp/mcpclient"
)

// Key joins the parts of an identity into one IDFromKey key. Each part is quoted, so that no
// two lists of parts give the same key: ("a/b", "c") and ("a", "b/c") differ.
func Key(parts ...string) string {
	b, _ := json.Marshal(parts) // a []string always marshals
	return string(b)
}

// A Class is what an engine should do with an error of a call.
type Class int

const (
	// Retry: nothing ran, or the request is running or ran under its id and another attempt
	// under the same id reads its outcome: the engine may try again.
	Retry Class = iota + 1
	// Stop: another attempt would not help (the server answered, the caller erred) or could
	// run the tool again; the error needs a decision the engine cannot make.
	Stop
)

// A Verdict is the classification of one error.
type Verdict struct {
	Class Class
	// Type names the verdict for the engine's error types, stable across versions: it is what
	// retry policies and workflow code match on.
	Type string
	// RequestID is the id of the request the error is about; zero when the error names none.
	RequestID mcpclient.ID
	// Code is the error's mcpclient Code; 0 when it is no *mcpclient.Error.
	Code mcpclient.Code
}

// The verdicts' types.
const (
	// TypeOutcomeUnknown: the request may have run and the client could not learn its outcome,
	// and cannot safely by another attempt (see mcpclient.ErrOutcomeUnknown). Stop.
	TypeOutcomeUnknown = "MCPOutcomeUnknown"
	// TypeInterrupted: the call's own context ended (the engine's timeout or cancellation, a
	// worker stopping, the call's WithTimeouts) after the request may have been sent. The
	// client would have sent the same bytes again under the same id had it had the time;
	// another attempt does just that. Retry.
	TypeInterrupted = "MCPCallInterrupted"
	// TypeInFlight: the server is running the request under its id and refused a second copy
	// (mcpclient.ErrRequestInFlight). It cannot run twice; a later attempt reads its outcome.
	// Retry.
	TypeInFlight = "MCPRequestInFlight"
	// TypeConflict: the id is taken by other content (ErrRequestIDReused), replaced by
	// another request (ErrAlreadySuperseded), or answered under receipts the server no longer
	// holds (ErrAlreadyAnswered). Sending it again is refused or could run the tool again.
	// Stop.
	TypeConflict = "MCPRequestConflict"
	// TypeNotDelivered: nothing ran: no attempt reached the server (ErrNotDelivered), or the
	// request was never sent (the client closed, its ledger full, its journal failing, the
	// server refusing credentials). Retry.
	TypeNotDelivered = "MCPNotDelivered"
	// TypeFailed: the call ended for good: the server answered with a JSON-RPC error, or an
	// answer that is not valid MCP, or the call itself is wrong (invalid arguments, refused by
	// an interceptor, an unsupported protocol revision). Another attempt under the same id gets
	// the same. Stop.
	TypeFailed = "MCPCallFailed"
)

// Classify returns what an engine should do with err, the error of a call made under ctx.
// An error that is no *mcpclient.Error (the activity or step context missing, say) is TypeFailed.
func Classify(ctx context.Context, err error) Verdict {
	var e *mcpclient.Error
	if !errors.As(err, &e) {
		return Verdict{Class: Stop, Type: TypeFailed}
	}
	v := Verdict{Code: e.Code}
	if e.Request != nil {
		v.RequestID = e.Request.ID()
	}
	switch e.Code {
	case mcpclient.CodeOutcomeUnknown:
		if interrupted(ctx, err) {
			v.Class, v.Type = Retry, TypeInterrupted
		} else {
			v.Class, v.Type = Stop, TypeOutcomeUnknown
		}
	case mcpclient.CodeRequestInFlight:
		v.Class, v.Type = Retry, TypeInFlight
	case mcpclient.CodeRequestIDReused, mcpclient.CodeSuperseded, mcpclient.CodeAlreadyAnswered:
		v.Class, v.Type = Stop, TypeConflict
	case mcpclient.CodeNotDelivered, mcpclient.CodeClosed, mcpclient.CodeLedgerFull,
		mcpclient.CodeJournal, mcpclient.CodeUnauthorized:
		v.Class, v.Type = Retry, TypeNotDelivered
	default:
		// CodeServerError, CodeProtocol, CodeStructuredContent, CodeInvalidArgument,
		// CodeUnsupportedVersion, CodeRefused, CodeSkillVerification, and any Code added later
		// until it is classified here: stopping is the choice that cannot run a tool twice.
		v.Class, v.Type = Stop, TypeFailed
	}
	return v
}

// interrupted reports whether an ErrOutcomeUnknown ended because the call ran out of time or was
// cancelled by its caller (ctx, or the bound WithTimeouts set), rather than because the client
// gave up on learning the outcome. A context error deeper in the chain while ctx is still live
// (a transport's own timeout) is the client giving up, and does not count.
func interrupted(ctx context.Context, err error) bool {
	if errors.Is(err, mcpclient.ErrCallTimeout) {
		return true
	}
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}
