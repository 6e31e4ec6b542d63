package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Code classifies every error the Client returns. Match with [CodeOf] or, for the codes that
// have one, with errors.Is and the sentinel.
type Code int

const (
	// CodeOutcomeUnknown: the request may or may not have run, and the client will not find out
	// by itself (see ErrOutcomeUnknown).
	CodeOutcomeUnknown Code = iota + 1
	// CodeNotDelivered: no attempt reached the server; nothing ran.
	CodeNotDelivered
	// CodeRequestInFlight: the server refused the id because a request under it is still running.
	CodeRequestInFlight
	// CodeRequestIDReused: other content under an id already used, refused by the server
	// (MCP_REQUEST_ID_REUSED) or locally by the ledger before sending.
	CodeRequestIDReused
	// CodeLedgerFull: every ledger entry is unresolved, so no new request can be tracked.
	CodeLedgerFull
	// CodeServerError: the server answered with a JSON-RPC error; errors.As gives the *RPCError.
	// An interceptor that turns the server's answer into an error of its own ends the call with
	// this Code too, its error in the chain: the request was answered, and is not sent again.
	CodeServerError
	// CodeUnsupportedVersion: the server chose a protocol revision this client does not speak.
	CodeUnsupportedVersion
	// CodeProtocol: the server's answer was not valid MCP.
	CodeProtocol
	// CodeInvalidArgument: the caller's mistake, such as params that do not marshal, a request
	// made by another client, or a Supersede without an inspection.
	CodeInvalidArgument
	// CodeClosed: the client was closed.
	CodeClosed
	// CodeStructuredContent: a tool ran and answered, but its structuredContent does not match
	// the outputSchema the tool was listed with (see ErrStructuredContent). Unlike every other
	// Code, it comes with the result: CallTool returns both.
	CodeStructuredContent
	// CodeRefused: an interceptor refused the request before anything was sent (see
	// WithInterceptors); its error is in the chain.
	CodeRefused
	// CodeUnauthorized: the server refused the request for its credentials (HTTP 401, or 403)
	// before running it, and the transport could not authorize it: no Authorizer, a refresh or
	// an authorization that failed or was abandoned, or a server refusing every new token.
	// Nothing ran; the request may be sent again once the cause in the chain is dealt with.
	CodeUnauthorized
	// CodeSkillVerification: a skill file was refused by package skills, because its entry
	// cannot vouch for it or because what the server sent does not match the entry. The
	// *skills.VerificationError in the chain names the file and the check (errors.Is matches
	// skills.ErrVerification).
	CodeSkillVerification
	// CodeJournal: the client's journal could not record the request, or could not be read
	// (see ErrJournal); nothing was sent for want of the record.
	CodeJournal
	// CodeSuperseded: the request was replaced by another (Supersede, the next round of a
	// stateless call, the client's own re-issue of a request safe to repeat), in this process
	// or, with a journal, in any: it is neither sent again nor replaced a second time. Nothing
	// was sent. See ErrAlreadySuperseded.
	CodeSuperseded
	// CodeAlreadyAnswered: the request was answered before, in this process or, with a journal,
	// an earlier one, and the receipts it was answered under are no longer held: sending it
	// again would run it again. Nothing was sent. See ErrAlreadyAnswered.
	CodeAlreadyAnswered
)

var codeNames = [...]string{
	CodeOutcomeUnknown:     "outcome unknown",
	CodeNotDelivered:       "not delivered",
	CodeRequestInFlight:    "request in flight",
	CodeRequestIDReused:    "request id reused",
	CodeLedgerFull:         "ledger full",
	CodeServerError:        "server error",
	CodeUnsupportedVersion: "unsupported protocol version",
	CodeProtocol:           "protocol error",
	CodeInvalidArgument:    "invalid argument",
	CodeClosed:             "client closed",
	CodeStructuredContent:  "structuredContent mismatch",
	CodeRefused:            "refused by an interceptor",
	CodeUnauthorized:       "unauthorized",
	CodeSkillVerification:  "skill verification failed",
	CodeJournal:            "journal failed",
	CodeSuperseded:         "request superseded",
	CodeAlreadyAnswered:    "request already answered",
}

func (c Code) String() string {
	if c > 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// The sentinels, one per Code that callers branch on. Every error the Client returns is an
// *Error; errors.Is(err, ErrOutcomeUnknown) holds when its Code is CodeOutcomeUnknown, and so on.
var (
	// ErrOutcomeUnknown: the request's bytes may have reached the server and no usable answer
	// came (none at all, a malformed one, one over the size limit), and the client cannot learn
	// the outcome safely by itself (no receipts known, the receipt scope was lost, or a resend
	// would fetch the same unusable answer). The *Error holds the frozen Request: inspect the
	// server's state, then Resend it to re-read the outcome, or Supersede it with an inspection
	// record.
	//
	// A call whose own context ended (cancelled, or past its deadline) once its request may have
	// been sent ends so too, since the request may have run: errors.Is(err, context.Canceled)
	// or errors.Is(err, context.DeadlineExceeded) tells that ending from the others, whatever
	// cause the context was given. One that ended before the request was ever sent is
	// ErrNotDelivered, with the same error in its chain.
	ErrOutcomeUnknown = errors.New("mcpclient: outcome unknown")
	// ErrNotDelivered: every attempt failed before any byte could reach the server.
	ErrNotDelivered = errors.New("mcpclient: not delivered")
	// ErrRequestInFlight: the server refuses the id while a request under it is running (HTTP
	// 409, or JSON-RPC -32600 for a resend). A hard signal: the client stops.
	ErrRequestInFlight = errors.New("mcpclient: request in flight")
	// ErrRequestIDReused: content other than the original under a used id. A hard signal: the
	// client stops and never moves to a new id by itself.
	ErrRequestIDReused = errors.New("mcpclient: request id reused")
	// ErrLedgerFull: the ledger holds only unresolved entries and refuses new ones.
	ErrLedgerFull = errors.New("mcpclient: ledger full")
	// ErrSessionLost: the server session ended (HTTP 404, a restarted server, a dead
	// connection), and with it the receipt scope, unless the server declares receipts for its
	// whole process under an epoch that the new session finds unchanged. It appears in the
	// chain of the error of a request whose outcome it made unknowable.
	ErrSessionLost = errors.New("mcpclient: session lost")
	// ErrUnsupportedVersion: the server answered initialize with a revision this client does not
	// speak.
	ErrUnsupportedVersion = errors.New("mcpclient: unsupported protocol version")
	// ErrMalformedResponse is in the chain of an ErrOutcomeUnknown when the server answered the
	// request's id with something that is no valid JSON-RPC response (a result and an error
	// together, an error that is not an error object): the request may have run, and the client
	// does not resend it, which would fetch the same answer.
	ErrMalformedResponse = errors.New("mcpclient: malformed response")
	// ErrInspectionRequired: Supersede was called without an inspection record.
	ErrInspectionRequired = errors.New("mcpclient: supersede needs an inspection of the server's state")
	// ErrClosed: the client is closed.
	ErrClosed = errors.New("mcpclient: client closed")
	// ErrStructuredContent: a tool result whose structuredContent does not match the tool's
	// outputSchema, or is missing although the tool declares one. The tool ran: CallTool returns
	// its result together with this error, whose Code is CodeStructuredContent.
	ErrStructuredContent = errors.New("mcpclient: structuredContent does not match the tool's outputSchema")
	// ErrUnauthorized: the server refused the request's credentials before running it, and no
	// new ones could be had (CodeUnauthorized). Nothing ran. The cause in the chain says what
	// to do: give the transport an Authorizer (package oauth), sign in again after a refresh
	// token was revoked, or ask for the access the server wants.
	ErrUnauthorized = errors.New("mcpclient: unauthorized")
	// ErrAlreadySuperseded: the request was replaced by another, whose id the error names
	// (CodeSuperseded). A replaced request is not sent again, since it could then run beside
	// its replacement, and it is replaced at most once, across the processes sharing a journal
	// too: of two Supersedes of one request, the first wins. Work on with the replacement.
	ErrAlreadySuperseded = errors.New("mcpclient: request already superseded")
	// ErrAlreadyAnswered: the request was answered before and sending it again could run it
	// again (CodeAlreadyAnswered): it is not safe to repeat, and the receipts it was answered
	// under are gone (the server restarted, its session ended, or it keeps none). Nothing was
	// sent. errors.As gives the *AnsweredError, with what the client holds of the answer.
	ErrAlreadyAnswered = errors.New("mcpclient: request already answered")
)

// An AnsweredError is the cause of an ErrAlreadyAnswered: what the client's journal (or,
// without one, its ledger) holds of the request, and the receipts the server declares now.
type AnsweredError struct {
	// Record is the request as the journal holds it: answered, with the receipts it was last
	// sent under. Without a journal only its ID, Method, Fingerprint, State, Reached, Attempts
	// and Receipts are set.
	Record JournalRecord
	// Now is the receipt binding the server declares now.
	Now ReceiptBinding
}

func (e *AnsweredError) Error() string {
	return fmt.Sprintf("request %s was answered under %s and the server now declares %s: sending it again could run it again",
		e.Record.ID.JSON(), e.Record.Receipts, e.Now)
}

// The sentinels of particular failures, found in the chain of an *Error with errors.Is.
var (
	// ErrRoundLimit: a call in a stateless revision would need a request beyond MaxRounds, because
	// the answer to the last one asked for input again, or refused it in a way a re-issue would
	// mend. The client does not send that request. The *Error names the last request sent; its
	// answer was no result, so nothing the call produced was thrown away. Its Code is CodeProtocol
	// after input_required, and CodeServerError, with the *RPCError, after a refusal.
	ErrRoundLimit = errors.New("mcpclient: the call needs more requests than MaxRounds")
	// ErrInvalidID reports a JSON value that is not a usable request id.
	ErrInvalidID = errors.New("mcpclient: request id must be a string or an integer")
	// ErrInboundOverflow ends a session whose server sent more notifications and requests than the
	// client could queue while it awaited answers (see WithNotificationHandler): its calls that
	// were awaiting answers end as on any lost session.
	ErrInboundOverflow = errors.New("mcpclient: the server sent more messages than the client could queue for its handlers")
	// ErrMethodRemoved reports a method the negotiated revision no longer has (ping,
	// logging/setLevel, resources/subscribe and the like in 2026-07-28). The client refuses it
	// before sending. Client.Ping is not refused: it sends server/discover there.
	ErrMethodRemoved = errors.New("mcpclient: method not in the negotiated protocol revision")
	// ErrHandshakeTimeout is the cause of a session not opened within the handshake timeout.
	ErrHandshakeTimeout = errors.New("mcpclient: handshake timed out")
	// ErrListTooLong reports a listing longer than MaxListItems, with CodeProtocol.
	ErrListTooLong = errors.New("mcpclient: the server listed more items than MaxListItems")
	// ErrCallTimeout is the cause of a call ended by WithTimeouts.
	ErrCallTimeout = errors.New("mcpclient: call timed out")
	// ErrRefused: an interceptor refused the request before anything was sent (CodeRefused).
	ErrRefused = errors.New("mcpclient: refused by an interceptor")
	// ErrExchangeSent is what an interceptor's next returns, having sent nothing, when called
	// for an exchange it already sent (a second call, from any goroutine), or after the
	// interceptors returned without calling it: next sends at most once per exchange.
	ErrExchangeSent = errors.New("mcpclient: the exchange was already sent or ended")
	// ErrExchangeRequestChanged is what an interceptor's next returns, having sent nothing,
	// when Exchange.Request holds another request than the one the exchange was made for: an
	// exchange sends only the request it was made for.
	ErrExchangeRequestChanged = errors.New("mcpclient: the exchange's request was replaced")
	// ErrNotStateless reports a call that only the stateless revisions (2026-07-28) have.
	ErrNotStateless = errors.New("mcpclient: the session does not speak a stateless revision")
	// ErrJournal reports, with CodeJournal, a journal that failed to record or to read: a
	// request it could not record was not sent.
	ErrJournal = errors.New("mcpclient: journal failed")
)

var sentinels = map[Code]error{
	CodeOutcomeUnknown:     ErrOutcomeUnknown,
	CodeNotDelivered:       ErrNotDelivered,
	CodeRequestInFlight:    ErrRequestInFlight,
	CodeRequestIDReused:    ErrRequestIDReused,
	CodeLedgerFull:         ErrLedgerFull,
	CodeUnsupportedVersion: ErrUnsupportedVersion,
	CodeClosed:             ErrClosed,
	CodeStructuredContent:  ErrStructuredContent,
	CodeRefused:            ErrRefused,
	CodeUnauthorized:       ErrUnauthorized,
	CodeJournal:            ErrJournal,
	CodeSuperseded:         ErrAlreadySuperseded,
	CodeAlreadyAnswered:    ErrAlreadyAnswered,
}

// Error is the one error type the Client returns.
type Error struct {
	// Code classifies the failure.
	Code Code
	// Request is the frozen request the error is about, or nil when no request was made; its
	// ID names it. After an uncertain or conflicting outcome it is the handle to pass to
	// Client.Resend or Client.Supersede.
	Request *Request
	// Attempts is how many times the request's bytes were sent.
	Attempts int
	// Err is the last cause: a transport error, an *RPCError, a context error.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("mcpclient: ")
	b.WriteString(e.Code.String())
	if e.Request != nil {
		b.WriteString(" for request ")
		b.WriteString(e.Request.key)
	}
	if e.Attempts > 0 {
		fmt.Fprintf(&b, " after %d attempt", e.Attempts)
		if e.Attempts > 1 {
			b.WriteByte('s')
		}
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel of e's Code.
func (e *Error) Is(target error) bool {
	s, ok := sentinels[e.Code]
	return ok && s == target
}

// withCallerEnding returns err, the error of a call made under ctx, with ctx's error in its chain
// when ctx's ending is what ended the call and err names only the cause the caller gave it
// (context.WithCancelCause, WithTimeoutCause): errors.Is(err, context.Canceled) or
// errors.Is(err, context.DeadlineExceeded) tells a caller's own ending, whatever its cause.
func withCallerEnding(ctx context.Context, err error) error {
	ctxErr := ctx.Err()
	e, ok := err.(*Error)
	if ctxErr == nil || !ok || errors.Is(err, ctxErr) || !errors.Is(err, context.Cause(ctx)) {
		return err
	}
	ended := *e // the *Error may be shared with the ledger and other waiters
	ended.Err = fmt.Errorf("%w (%w)", e.Err, ctxErr)
	return &ended
}

// testHookReturned, set only by tests, sees every error an exported method returns, so that
// the promise "every error is an *Error" is checked by every test.
var testHookReturned func(error)

func returned(err error) error {
	if err != nil && testHookReturned != nil {
		testHookReturned(err)
	}
	return err
}

// CodeOf returns the Code of the *Error in err's chain, or 0 if there is none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// IsWireError reports whether err carries a JSON-RPC error the server sent, as opposed to one
// the client made (a local refusal, a transport failure, a context error).
func IsWireError(err error) bool {
	var r *RPCError
	return errors.As(err, &r)
}

// JSON-RPC error codes: the standard ones, and those of the stateless revisions.
const (
	RPCParseError     = -32700
	RPCInvalidRequest = -32600
	RPCMethodNotFound = -32601
	RPCInvalidParams  = -32602
	RPCInternalError  = -32603

	RPCHeaderMismatch                  = -32020
	RPCMissingRequiredClientCapability = -32021
	RPCUnsupportedProtocolVersion      = -32022
)

// reusedIDMarker is how servers that keep receipts flag other content under a known id: in
// error.data.code, error.data.reason, or the message (receipts.CodeIDReused).
const reusedIDMarker = "MCP_REQUEST_ID_REUSED"

// receiptInDoubtMarker is how a server that keeps receipts answers, in error.data.code, a request
// whose earlier run it cannot account for: it was claimed, and the process running it died
// before storing an answer. The request may have run; the server will never run it again
// (receipts.CodeInDoubt).
const receiptInDoubtMarker = "MCP_RECEIPT_IN_DOUBT"

// RPCError is a JSON-RPC error object sent by the server. Like any answer it is the definite
// outcome of its request and is never retried.
type RPCError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message)
}

// ReceiptInDoubt reports whether the server answered that the request's outcome is unknown to
// it too (MCP_RECEIPT_IN_DOUBT in error.data.code).
func (e *RPCError) ReceiptInDoubt() bool {
	var data struct {
		Code any `json:"code"`
	}
	return len(e.Data) > 0 && json.Unmarshal(e.Data, &data) == nil && data.Code == receiptInDoubtMarker
}

// IDReused reports whether the server refused the request as other content under an id it
// already holds a receipt for.
func (e *RPCError) IDReused() bool {
	if strings.Contains(e.Message, reusedIDMarker) {
		return true
	}
	var data struct {
		Code   any `json:"code"`
		Reason any `json:"reason"`
	}
	if len(e.Data) == 0 || json.Unmarshal(e.Data, &data) != nil {
		return false
	}
	return data.Code == reusedIDMarker || data.Reason == reusedIDMarker
}
