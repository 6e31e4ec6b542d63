package mcpclient

import "encoding/json"

// ReceiptScope is where a server remembers request ids: for as long as its process lives, or for
// as long as one session lives. Within the scope, the server answers a byte-identical resend
// with the reply it already has, executing the request at most once.
type ReceiptScope string

const (
	// ReceiptScopeProcess: receipts outlive sessions but not a server restart.
	ReceiptScopeProcess ReceiptScope = "process"
	// ReceiptScopeSession: receipts end with the session.
	ReceiptScopeSession ReceiptScope = "session"
)

// RequestReceiptsKey is the key under capabilities.experimental where a server declares
// receipts.
const RequestReceiptsKey = "requestReceipts"

// RequestReceiptsExtension is the identifier of the request receipts extension: in the stateless
// revisions a request opts into receipts by naming it among the extensions of its per-request
// client capabilities, and a server that keeps receipts names it among the extensions of its
// capabilities, with its RequestReceipts declaration. A request that did not opt in gets no
// receipt: real clients reuse ids.
const RequestReceiptsExtension = "io.github.northstar-mcp/request-receipts"

// RequestReceipts is a server's receipt declaration:
// capabilities.experimental.requestReceipts = {"scope": "process"|"session", "maxReceipts": N,
// "epoch": "..."}. The capability is experimental, this module's own.
type RequestReceipts struct {
	Scope       ReceiptScope `json:"scope"`
	MaxReceipts int          `json:"maxReceipts,omitempty"`
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
func (c *ServerCapabilities) RequestReceipts() (r RequestReceipts, ok bool) {
	raw, found := c.Experimental[RequestReceiptsKey]
	if !found {
		return RequestReceipts{}, false
	}
	var d struct {
		Scope       ReceiptScope    `json:"scope"`
		MaxReceipts int             `json:"maxReceipts"`
		Epoch       json.RawMessage `json:"epoch"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return RequestReceipts{}, false
	}
	switch d.Scope {
	case ReceiptScopeProcess, ReceiptScopeSession:
	default:
		return RequestReceipts{}, false
	}
	r = RequestReceipts{Scope: d.Scope, MaxReceipts: d.MaxReceipts}
	if json.Unmarshal(d.Epoch, &r.Epoch) != nil {
		r.Epoch = ""
	}
	return r, true
}

// receiptsHeld reports whether receipts kept under then are known to be kept under now: both
// declare receipts kept for the server's whole process, under the same epoch. A lost session, or
// a restarted client, is then no lost receipt, since the epoch names the process that holds them
// and changes when it restarts. A scope of session, an asserted scope, or an epoch missing on
// either side proves nothing: the process may have restarted in between.
func receiptsHeld(then, now ReceiptBinding) bool {
	return then.Scope == ReceiptScopeProcess && then.Epoch != "" && then == now
}
