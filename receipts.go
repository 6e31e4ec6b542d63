package mcpclient

import (
	"bytes"
	"encoding/json"
	"time"
)

// ReceiptScope is where a server remembers request ids: for as long as its process lives, or for
// as long as one session lives. Within the scope, the server answers a byte-identical resend
// with the reply it already has, executing the request at most once.
type ReceiptScope string

const (
	// ReceiptScopeProcess: receipts outlive sessions but not a server restart.
	ReceiptScopeProcess ReceiptScope = "process"
	// ReceiptScopeSession: receipts end with the session.
	ReceiptScopeSession ReceiptScope = "session"
	// ReceiptScopeStore: receipts are kept in a store every server process of a deployment
	// shares (a fleet behind a load balancer): they outlive sessions and the restart of any one
	// process; the epoch names the store.
	ReceiptScopeStore ReceiptScope = "store"
)

// outlivesSessions reports whether receipts of the scope outlive the session that made them,
// under an epoch that names what holds them.
func (s ReceiptScope) outlivesSessions() bool {
	return s == ReceiptScopeProcess || s == ReceiptScopeStore
}

// requestReceiptsExtension is the identifier of the request receipts extension
// (receipts.ExtensionID): in the stateless revisions a request opts into receipts by naming it
// among the extensions of its per-request client capabilities, and a server that keeps receipts
// names it among the extensions of its capabilities, with its RequestReceipts declaration. A
// request that did not opt in gets no receipt: real clients reuse ids.
const requestReceiptsExtension = "io.github.northstar-mcp/request-receipts"

// replayMarker is the key, in a result's _meta, with which a server that keeps receipts marks an
// answer read from a receipt rather than produced by running the request now.
const replayMarker = requestReceiptsExtension + ".replay"

// replayMarked reports whether a result carries the replay marker, true.
func replayMarked(result json.RawMessage) bool {
	if !bytes.Contains(result, []byte(replayMarker)) {
		return false // the common case, decided without decoding the result
	}
	var r struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	return json.Unmarshal(result, &r) == nil && string(r.Meta[replayMarker]) == "true"
}

// RequestReceipts is a server's receipt declaration, under the receipts extension's identifier
// among its capabilities' extensions: {"scope": "session"|"process"|"store", "epoch": "...",
// "retentionMs": N, "maxReceipts": N, "disconnect": "continue"|"cancel"} (docs/request-receipts.md
// in this module's repository specifies the extension).
type RequestReceipts struct {
	Scope       ReceiptScope `json:"scope"`
	MaxReceipts int          `json:"maxReceipts,omitempty"`
	// RetentionMs is how long the server keeps a settled receipt at least; 0 when it does not
	// say (the extension's default is a day).
	RetentionMs int64 `json:"retentionMs,omitempty"`
	// Disconnect is what a client's disconnect does to a running request that opted in:
	// "continue" (it runs to its end, for a resend to collect) or "cancel"; "" when the server
	// does not say, which means continue.
	Disconnect string `json:"disconnect,omitempty"`
	// Epoch is an opaque id of the server process that holds the receipts, new at every start
	// of the server. With scope process, a client whose session was lost and that finds the
	// same epoch on its new session knows the receipts outlived the session: it resends the
	// same bytes under the same id, which the receipt answers. Without an epoch, or with
	// another, a lost session counts as lost receipts. "" when the server declares none.
	Epoch string `json:"epoch,omitempty"`
}

// RequestReceipts returns the server's receipt declaration. ok is false when the server declares
// none, or declares a scope this client does not know, which it must not rely on. An epoch that
// is no string is read as none: the scope it comes with stays usable.
func (c ServerCapabilities) RequestReceipts() (r RequestReceipts, ok bool) {
	raw, found := c.Extensions[requestReceiptsExtension]
	if !found {
		return RequestReceipts{}, false
	}
	var d struct {
		Scope       ReceiptScope    `json:"scope"`
		MaxReceipts int             `json:"maxReceipts"`
		RetentionMs int64           `json:"retentionMs"`
		Disconnect  string          `json:"disconnect"`
		Epoch       json.RawMessage `json:"epoch"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return RequestReceipts{}, false
	}
	switch d.Scope {
	case ReceiptScopeProcess, ReceiptScopeSession, ReceiptScopeStore:
	default:
		return RequestReceipts{}, false
	}
	r = RequestReceipts{Scope: d.Scope, MaxReceipts: d.MaxReceipts, RetentionMs: d.RetentionMs, Disconnect: d.Disconnect}
	// Decoded apart, so that r itself stays off the heap for a server that declares no receipts.
	var epoch string
	if json.Unmarshal(d.Epoch, &epoch) == nil {
		r.Epoch = epoch
	}
	return r, true
}

// defaultReceiptRetention is how long a server keeps a settled receipt at least when its
// declaration does not say: the extension's default.
const defaultReceiptRetention = 24 * time.Hour

// receiptRetention is how long the server of s keeps a settled receipt at least.
func (s *session) receiptRetention() time.Duration {
	if d, ok := s.settled().Capabilities.RequestReceipts(); ok && d.RetentionMs > 0 {
		return time.Duration(d.RetentionMs) * time.Millisecond
	}
	return defaultReceiptRetention
}

// receiptsPruned reports whether a receipt of a request first sent at sent may be gone from the
// server of s, past the retention it declares: a same-id resend could then run the request
// again. Retention counts from when the receipt was settled, which is after the first send, so
// counting from the send errs on the safe side.
func receiptsPruned(sent time.Time, s *session) bool {
	return !sent.IsZero() && time.Since(sent) >= s.receiptRetention()
}

// receiptsHeld reports whether receipts kept under then are known to be kept under now: both
// declare receipts kept for the server's whole process, under the same epoch. A lost session, or
// a restarted client, is then no lost receipt, since the epoch names the process that holds them
// and changes when it restarts. A scope of session, an asserted scope, or an epoch missing on
// either side proves nothing: the process may have restarted in between.
func receiptsHeld(then, now ReceiptBinding) bool {
	return then.Scope.outlivesSessions() && then.Epoch != "" && then == now
}
