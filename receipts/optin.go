package receipts

import (
	"encoding/json"

	"github.com/northstar-mcp/mcpclient/internal/metakeys"
)

// The rules of the opt-in, the same for every transport.

// Receipted reports whether a request of method gets a receipt when it opted in. initialize,
// server/discover and ping do not: they open a session or ask whether a server is alive, and
// are safe to run again; nor does subscriptions/listen, a stream that lasts as long as its
// connection and is replaced by a new listen when it breaks.
func Receipted(method string) bool {
	switch method {
	case "initialize", "server/discover", "ping", "subscriptions/listen":
		return false
	}
	return true
}

// RequestOptsIn reports whether a request's params opt it in by its per-request client
// capabilities (2026-07-28 and later): _meta["io.modelcontextprotocol/clientCapabilities"]
// .extensions[ExtensionID].
func RequestOptsIn(params json.RawMessage) bool {
	return metaOptsIn(metaOf(params))
}

// metaOf returns the members of params' _meta, reading params once (they may carry a tool's
// large arguments); nil when there is no _meta object. Keys match exactly, as hasMember's do.
func metaOf(params json.RawMessage) map[string]json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(params, &obj) != nil {
		return nil
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(obj["_meta"], &meta) != nil {
		return nil
	}
	return meta
}

// metaOptsIn reports whether a request's _meta members name the extension among its
// per-request client capabilities.
func metaOptsIn(meta map[string]json.RawMessage) bool {
	return hasMember(meta[metakeys.ClientCapabilities], "extensions", ExtensionID)
}

// InitializeOptsIn reports whether the params of an initialize request declare the extension
// among the client's capabilities (capabilities.extensions[ExtensionID]), which opts in every
// request of the session it opens (the revisions before 2026-07-28).
func InitializeOptsIn(params json.RawMessage) bool {
	return hasMember(params, "capabilities", "extensions", ExtensionID)
}

// Options returns the keeper's options, every zero field replaced by its default: what a
// transport adapter built over the keeper bounds itself by.
func (k *Keeper) Options() Options { return k.opts }
