// Package receiptsgosdk keeps request receipts (the extension io.github.northstar-mcp/request-receipts,
// see package receipts) for servers built with the official go-sdk over stdio or any other byte
// stream: a client that lost the answer to a request resends the same line under the same id,
// and gets the answer the server already gave instead of a second run.
//
// Wrap the server's transport:
//
//	server := mcp.NewServer(&mcp.Implementation{Name: "booking", Version: "1.0.0"}, nil)
//	err := server.Run(ctx, receiptsgosdk.Transport(&mcp.StdioTransport{}, receipts.Options{}))
//
// # Why the bytes
//
// A receipt is kept under the request's id with the SHA-256 of the request as the client sent
// it: the client never re-serializes a resend, so byte equality is the test of "the same
// request". A go-sdk mcp.Connection hands on messages already decoded, their bytes gone, so the
// adapter does not wrap the Connection: it sits on the stream below go-sdk's own newline-delimited
// connection (mcp.StdioTransport, mcp.IOTransport), reads each line the client sends, and passes
// every line to go-sdk unchanged but for those it answers itself. go-sdk keeps its own framing,
// batching and revision rules.
//
// # What it does on the stream
//
//   - The client's initialize opts the whole session in when it declares the extension
//     (capabilities.extensions); from 2026-07-28, a request opts in by its per-request client
//     capabilities in _meta. Other requests, notifications, the client's responses, batches and
//     lines that are no JSON pass through untouched.
//   - The adapter adds its Declaration to the results of initialize and server/discover.
//   - An opted-in request is admitted by a receipts.Keeper under (principal, id): the first
//     delivery runs, and the server's response to it is settled into the receipt before it goes
//     to the client; a byte-identical resend gets that response, marked as a replay, without
//     reaching the server, waiting for it if it still runs (without holding up the lines behind
//     it); other bytes under the id are refused (MCP_REQUEST_ID_REUSED), and so on, as package
//     receipts says. A response that is an error of a request refused before it ran (parse,
//     invalid request, method not found, invalid params, header mismatch, unsupported
//     revision: -32700, -32600, -32601, -32602, -32020, -32022) keeps no receipt.
//   - A request line longer than Options.MaxBodyBytes is never held whole: it passes through
//     without a receipt, unless the session opted in and the line's head names a request, which
//     is then refused unread.
//
// # When the client disconnects
//
// go-sdk cancels every running request, and drops its response, the moment the stream it reads
// ends. Under receipts.DisconnectContinue (the default) the adapter keeps the server's stream
// open after the client's ended, until every opted-in request it let run has answered, or for
// at most Options.DetachedTimeout; the answers are settled into their receipts and a resend on a
// new connection collects them. Meanwhile the server's writes to the gone client succeed, and a
// request the server sends to the client gets an error at once. Under receipts.DisconnectCancel
// the server's stream ends with the client's, and a request that did not answer keeps the
// cancellation as its receipt.
//
// # Scope: which resends find a receipt
//
// The receipts live in Options.Store, and the scope and epoch the adapter declares are the
// store's. Over stdio a broken connection usually means the server process is gone, and a
// MemoryStore (the default, scope "process") goes with it: it serves a resend only within one
// process's lifetime, for a server that serves several connections in turn, over a socket to a
// long-running server that a client reconnects to (share one Adapter between the connections),
// or for a resend on the same connection after a response timeout. A store shared across
// restarts (the PostgreSQL store of receipts/postgres, scope "store") is what makes receipts
// survive the restart of a stdio server: its epoch stays the same, and a client that restarts
// the server resends under the same id.
//
// The principal is the client at the other end of the stream (WithPrincipal): all connections
// of an Adapter share the principal "" unless the application names one per connection.
package receiptsgosdk
