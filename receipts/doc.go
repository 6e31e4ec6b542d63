// Package receipts keeps request receipts on the server side of MCP: the extension
// io.github.northstar-mcp/request-receipts, under which a client that lost the answer to a
// request resends the same bytes under the same id, and the server answers from its receipt
// instead of running the request a second time.
//
// # The rules
//
// A receipt is kept per key, the principal that sent the request and its JSON-RPC id (as JSON
// text), with the SHA-256 fingerprint of the request's bytes as received:
//
//   - an unseen key is claimed atomically with a lease; the request runs, and its whole
//     JSON-RPC response (result or error) is settled into the receipt;
//   - the same key and bytes, settled: the stored response, marked as a replay (a _meta flag on
//     a result, and the HTTP header Mcp-Receipt-Replay);
//   - the same key and bytes, still running: wait for its response (bounded); past the bound,
//     refuse with MCP_REQUEST_IN_FLIGHT;
//   - the same key, other bytes: refuse with MCP_REQUEST_ID_REUSED;
//   - claimed, lease lapsed, no response (its holder died mid-handler): MCP_RECEIPT_IN_DOUBT,
//     and never run again;
//   - failed before it ran (the handler answered a 4xx, or a 503 with Retry-After): no receipt;
//   - any other ending without a 2xx response for the id (another 5xx, a stream that ended
//     early, a panic): the request may have run, and its receipt says the outcome is unknown;
//   - a store full of unresolved receipts: refuse new requests with MCP_RECEIPTS_FULL, never
//     forgetting an unresolved one.
//
// Only requests that opt in get receipts, since real clients reuse ids: see HTTP.
//
// # Pieces
//
// A Store keeps receipts: MemoryStore in the server's memory, or a store shared by a fleet of
// server processes (leases by the store's clock, fenced by their token). Decide is the rules'
// table; a Keeper applies them over a Store for any transport; HTTP is net/http middleware that
// applies them to any Streamable HTTP MCP handler, and adds the server's Declaration to its
// initialize and server/discover results.
//
// # Using it
//
// Wrap the MCP handler, inside whatever verifies the bearer token:
//
//	mcpHandler := mcp.NewStreamableHTTPHandler(getServer, nil) // any SDK's handler
//	http.Handle("/mcp", verifyToken(receipts.HTTP(mcpHandler, receipts.Options{})))
//
// The middleware answers replays without calling the wrapped handler, so authentication must
// happen in front of it; see BearerPrincipal.
//
// Every bound has a default (Options): 100,000 receipts of at most 4 MiB responses in 256 MiB, a
// 30 s wait, a 1 h retention, 4096 remembered sessions. A store never forgets a receipt within
// its retention and refuses new requests instead (503, MCP_RECEIPTS_FULL): size MaxReceipts to
// at least the opted-in requests a server takes per retention. Batches, notifications and responses
// pass through untouched.
package receipts
