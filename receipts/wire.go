package receipts

import (
	"encoding/json"
	"fmt"
)

// ExtensionID identifies the request receipts extension: a server declares it among the
// extensions of its capabilities, a client opts a request into it.
const ExtensionID = "io.github.northstar-mcp/request-receipts"

// ReplayMetaKey is the key of the result _meta flag, true, that marks a replayed result.
const ReplayMetaKey = ExtensionID + ".replay"

// The HTTP headers of the extension.
const (
	// HeaderOptIn, set to "1" on a request, opts it into receipts in the session revisions.
	// Clients send it on every opted-in request, so that a server (or this middleware) that
	// cannot tie the request to its session's initialize still knows. In the stateless
	// revision the request's _meta opts it in and the header only mirrors it: a request whose
	// header and _meta disagree is refused with -32020 before it runs.
	HeaderOptIn = "Mcp-Request-Receipts"
	// HeaderReplay, set to "1" on a response, marks it as a replay of a stored response.
	HeaderReplay = "Mcp-Receipt-Replay"
)

// The error.data.code markers of the refusals, and their JSON-RPC error codes.
const (
	CodeInFlight = "MCP_REQUEST_IN_FLIGHT"
	CodeIDReused = "MCP_REQUEST_ID_REUSED"
	CodeInDoubt  = "MCP_RECEIPT_IN_DOUBT"
	CodeFull     = "MCP_RECEIPTS_FULL"

	// RPCInvalidRequest is the JSON-RPC code of the in-flight and reused refusals.
	RPCInvalidRequest = -32600
	// RPCInDoubt lies outside the range JSON-RPC reserves, so that no client mistakes an
	// unknown outcome for one of the protocol's own errors, which say the request did not run.
	RPCInDoubt = -31000
	// RPCFull is the JSON-RPC code of the full refusal, outside the reserved range as RPCInDoubt.
	RPCFull = -31001
	// RPCCancelled is the JSON-RPC code a receipt records when a client's disconnect
	// cancelled its request (Disconnect cancel) and the handler wrote no response of its own;
	// the Language Server Protocol uses the same code for a cancelled request.
	RPCCancelled = -32800
)

// Disconnect is what a client's disconnect does to a running opted-in request.
type Disconnect string

const (
	// DisconnectContinue: the handler runs on to its end, detached from the client's
	// connection and bounded by a deadline of its own, so that a resend collects the real
	// outcome.
	DisconnectContinue Disconnect = "continue"
	// DisconnectCancel: the disconnect cancels the request, and the receipt records the
	// cancellation.
	DisconnectCancel Disconnect = "cancel"
)

// A Declaration is what a server declares in capabilities.extensions[ExtensionID] of its
// server/discover and initialize results.
type Declaration struct {
	Scope       Scope      `json:"scope"`
	Epoch       string     `json:"epoch,omitempty"`
	RetentionMs int64      `json:"retentionMs"`
	MaxReceipts int        `json:"maxReceipts,omitempty"`
	Disconnect  Disconnect `json:"disconnect"`
}

// ErrorResponse returns the JSON-RPC error response a server sends for a refusal verdict
// (InFlight, Reused, InDoubt or Full) to the request whose id has the JSON text id. ok is false
// for the verdicts that are no refusal.
func ErrorResponse(v Verdict, id string) (response []byte, ok bool) {
	var code int
	var marker, text string
	switch v {
	case InFlight:
		code, marker, text = RPCInvalidRequest, CodeInFlight, "the request with this id is still running; ask again later"
	case Reused:
		code, marker, text = RPCInvalidRequest, CodeIDReused, "request id already used with different content"
	case InDoubt:
		code, marker, text = RPCInDoubt, CodeInDoubt, "the request with this id was claimed and never answered; its outcome is unknown and it will not run again"
	case Full:
		code, marker, text = RPCFull, CodeFull, "receipt store full: new request ids are refused for now"
	default:
		return nil, false
	}
	return errorResponse(id, code, marker+": "+text, marker), true
}

// errorResponse builds a JSON-RPC error response; marker, if not empty, goes to error.data.code.
func errorResponse(id string, code int, message, marker string) []byte {
	e := struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data,omitempty"`
	}{Code: code, Message: message}
	if marker != "" {
		e.Data = map[string]string{"code": marker}
	}
	obj, err := json.Marshal(e)
	if err != nil {
		panic(fmt.Sprintf("receipts: marshal error object: %v", err)) // strings and ints always marshal
	}
	if id == "" {
		id = "null"
	}
	out := make([]byte, 0, len(obj)+len(id)+32)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"error":`...)
	out = append(out, obj...)
	return append(out, '}')
}

// inDoubtResponse is the response a receipt keeps when its request ran, or may have run, and no
// response can be kept for it: a resend learns that its outcome is unknown.
func inDoubtResponse(id, why string) []byte {
	return errorResponse(id, RPCInDoubt, CodeInDoubt+": "+why, CodeInDoubt)
}

// CancelledResponse returns the response a receipt keeps, under DisconnectCancel, for the
// request whose id has the JSON text id when the client's disconnect cancelled it and the server
// wrote no response of its own.
func CancelledResponse(id string) []byte {
	return errorResponse(id, RPCCancelled, "request cancelled: the client disconnected before the response", "")
}
