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

// RequestReceipts is a server's receipt declaration:
// capabilities.experimental.requestReceipts = {"scope": "process"|"session", "maxReceipts": N}.
type RequestReceipts struct {
	Scope       ReceiptScope `json:"scope"`
	MaxReceipts int          `json:"maxReceipts,omitempty"`
}

// RequestReceipts returns the server's receipt declaration. ok is false when the server declares
// none, or declares a scope this client does not know, which it must not rely on.
func (c *ServerCapabilities) RequestReceipts() (r RequestReceipts, ok bool) {
	raw, found := c.Experimental[RequestReceiptsKey]
	if !found {
		return RequestReceipts{}, false
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return RequestReceipts{}, false
	}
	switch r.Scope {
	case ReceiptScopeProcess, ReceiptScopeSession:
		return r, true
	}
	return RequestReceipts{}, false
}
