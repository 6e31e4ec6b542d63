// Package transport moves MCP frames between a client and a server and reports how far each
// frame got.
//
// A transport is deliberately dumb, in the way net/http's RoundTripper is: it never parses
// results, never retries and never rewrites ids. It hands a frame's bytes to the peer and, when
// an exchange breaks, says whether the bytes can have reached the server (see [Outcome]). The
// mcpclient.Client owns negotiation, the request ledger and every retry decision.
//
// There is one way in each direction. The client sends with [Conn.Send]; the connection hands
// every frame it reads, and every failure it meets, to the [Receiver] the client gave
// [Transport.Connect], on the goroutine that read it. [HTTP], [SSE], [Stream], [Command] and
// [Memory] all work so, and a transport written outside this package does too: see the example
// of [Transport].
package transport

import (
	"context"
	"errors"
	"net/http"
)

// A Transport opens connections to one MCP server.
//
// Connect may be called again after a connection ends; whether the new connection continues the
// old server session is the transport's business, and a client treats every new connection as a
// new session. Implementations must be safe for concurrent use.
type Transport interface {
	// Connect opens a connection whose incoming frames and failures go to r, from the moment
	// Connect is called until the connection has ended (see Receiver). An error means there is
	// no connection: it should be an *Error, NotDelivered, since nothing was sent on it; wrap
	// ErrMisconfigured when trying again cannot help.
	Connect(ctx context.Context, r Receiver) (Conn, error)
}

// DialFunc adapts a function to the [Transport] interface.
type DialFunc func(ctx context.Context, r Receiver) (Conn, error)

// Connect calls f(ctx, r).
func (f DialFunc) Connect(ctx context.Context, r Receiver) (Conn, error) { return f(ctx, r) }

// A Conn is one logical connection to a server session. What it reads from the server goes to
// the [Receiver] it was opened with.
//
// Send may be called from several goroutines at once, and concurrently with Close. Close
// unblocks Send and is idempotent.
type Conn interface {
	// Send hands one frame to the server. The transport must not modify or retain msg.Frame
	// beyond the call, and must write it byte for byte.
	//
	// A nil error means the frame was handed over; the answer to a request reaches the
	// Receiver, or the Receiver's Fail reports the exchange broken with an *Error carrying
	// msg.ID. Send may read the answer itself and deliver it before it returns (an HTTP POST
	// answered with JSON). A non-nil error should be an *Error whose Outcome says whether the
	// bytes can have reached the server; any other error is treated as Uncertain.
	Send(ctx context.Context, msg *Message) error

	// Close ends the connection. It is idempotent and safe to call concurrently. The connection
	// does not report the end it causes to its Receiver.
	Close() error
}

// A Receiver takes everything a connection reads from its server: frames, and the failures of
// exchanges or of the connection itself. The client implements it and passes it to
// [Transport.Connect]; the connection calls it, never the other way round. A Receiver is safe for
// concurrent use.
//
// The contract, for those who write a transport:
//   - The connection calls the Receiver on a goroutine of its own: a reader's, or the goroutine
//     of the Send that reads its answer itself. It may do so as soon as Connect was called,
//     before Connect returns.
//   - Frames read from one stream are delivered one at a time, in the order they were read;
//     frames of different streams (two HTTP response streams) may be delivered concurrently.
//   - A call may block. While it does, the connection reads nothing more from where the frame
//     came: the backpressure a slow client puts on its server.
//   - The Receiver never calls Close from within a call: Close may wait for the goroutines that
//     deliver.
//   - After the connection reported its own end (Fail with an error that is not an exchange's),
//     or once Close was called, what it still reads may be delivered or dropped; the Receiver
//     ignores it.
type Receiver interface {
	// Deliver hands over one frame from the server: a response, a notification, a server
	// request, or a batch of them. The frame is the Receiver's from then on: the connection
	// must not modify or reuse it.
	//
	// awaited is the id of the request (its JSON text, as in [Message.ID]) whose answer the
	// connection waits for on the stream the frame came from, or "". Deliver reports whether the
	// frame holds the response to that request, so that the connection learns it without
	// decoding the frame itself: a Streamable HTTP response stream is done with its answer, and
	// a JSON body that answers another request leaves its own without an answer. For awaited
	// "" it reports false.
	Deliver(frame []byte, awaited string) (answered bool)

	// Fail reports a failure. An *Error whose ID is set reports that the exchange of that one
	// request broke; the connection lives on. Any other error reports that the connection has
	// ended: every request sent on it and not yet answered will get no answer from it. The
	// client still calls Close.
	Fail(err error)
}

// A SessionConn is a connection that keeps a server session of its own across its exchanges,
// as Streamable HTTP does: every message is a request of its own, so the session has an id, the
// protocol revision travels with each message, and messages the server sends unprompted need a
// stream of their own. The client finds these abilities with a type assertion; a connection
// over one byte stream or one event stream has none of them.
type SessionConn interface {
	Conn

	// SessionID returns the id of the server session (Mcp-Session-Id), or "" when the server
	// gave none.
	SessionID() string

	// SetProtocolVersion makes every later message carry the negotiated protocol revision
	// (MCP-Protocol-Version). The client calls it as soon as the revision is known: once
	// initialize has answered, or once it chose a stateless revision.
	SetProtocolVersion(version string)

	// Listen opens the channel for messages the server sends unprompted (the GET stream of
	// Streamable HTTP), once, and returns when the server has answered for it; a server that
	// offers none is no error. The client calls it once it has something to receive there,
	// such as notification handlers.
	Listen()

	// CancelsByClosing reports whether abandoning an exchange is itself its cancellation
	// (closing the response stream, in the stateless revisions), so that the client sends no
	// notifications/cancelled.
	CancelsByClosing() bool

	// Detach ends the connection as Close does but leaves the server session open (no DELETE),
	// so that the server keeps what the session holds, receipts included, until it expires the
	// session itself.
	Detach() error
}

// A SessionHeaderConn is a SessionConn whose own requests, those that carry no Message (the
// GET stream, the DELETE that ends the session), can carry headers the client chose for the
// session: those its interceptors gave the handshake, so that a gateway that checks every
// request lets them through. The client finds it with a type assertion.
type SessionHeaderConn interface {
	SessionConn

	// SetSessionHeader makes the connection's later requests that carry no Message carry h,
	// with the precedence a Message's Header has. The client calls it once the handshake has
	// been answered, and does not modify h afterwards.
	SetSessionHeader(h http.Header)
}

// A Message is one outgoing frame and what the client knows about it.
//
// ID and Method are metadata the client already has, passed along so that transports that need
// them (an HTTP transport routing a response stream, a header naming the method) never parse the
// frame.
type Message struct {
	// Frame is the exact serialized JSON-RPC message. It is shared with the caller's ledger
	// entry: transports must neither modify nor keep it.
	Frame []byte

	// ID is the JSON text of the request id (`"b3c1…"` or `42`), or empty for notifications and
	// responses.
	ID string

	// Method is the JSON-RPC method, or empty for responses.
	Method string

	// Header holds HTTP headers for the message: those that name it in the stateless revisions
	// (Mcp-Method, Mcp-Name, Mcp-Param-*, MCP-Protocol-Version), already encoded, and those the
	// client's interceptors added. They win over an HTTP transport's configured Header, and the
	// protocol's own (the session's, Content-Type) over them. Every HTTP request made for the
	// message carries them, a resumption of its response stream included. Transports must not
	// modify it, and may keep it while the message's exchange lasts: the client does not modify
	// it after Send. Transports without headers ignore it.
	Header http.Header
}

// IsRequest reports whether m carries a request, which expects an answer.
func (m *Message) IsRequest() bool { return m.ID != "" }

// ErrClosed is returned by Send once the connection was closed, and reports to the Receiver a
// connection that ended without a cause of its own.
var ErrClosed = errors.New("transport: connection closed")

// ErrMisconfigured marks a connect failure that trying again cannot mend: a malformed URL, a
// program that does not exist or may not be run. Clients give up on it at once.
var ErrMisconfigured = errors.New("transport: misconfigured")

// ErrSessionNotFound reports that the server no longer knows the connection's session (HTTP 404
// on a known session id, or a restarted in-memory server). Nothing was executed for the frame
// that met it, but whatever the session remembered is gone: request receipts too, unless the
// server keeps them for its whole process.
var ErrSessionNotFound = errors.New("transport: session not found")
