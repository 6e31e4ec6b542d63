// Package transport moves MCP frames between a client and a server and reports how far each
// frame got.
//
// A transport is deliberately dumb, in the way net/http's RoundTripper is: it never parses
// results, never retries and never rewrites ids. It hands a frame's bytes to the peer and, when
// an exchange breaks, says whether the bytes can have reached the server (see [Outcome]). The
// mcpclient.Client owns negotiation, the request ledger and every retry decision.
package transport

import (
	"context"
	"errors"
)

// A Transport opens connections to one MCP server.
//
// Connect may be called again after a connection ends; whether the new connection continues the
// old server session is the transport's business, and a client treats every new connection as a
// new session. Implementations must be safe for concurrent use.
type Transport interface {
	Connect(ctx context.Context) (Conn, error)
}

// DialFunc adapts a function to the [Transport] interface.
type DialFunc func(ctx context.Context) (Conn, error)

// Connect calls f(ctx).
func (f DialFunc) Connect(ctx context.Context) (Conn, error) { return f(ctx) }

// A Conn is one logical connection to a server session.
//
// Send and Receive may be called concurrently with each other and with Close; Send may be
// called from several goroutines at once. Close unblocks Receive and Send and is idempotent.
type Conn interface {
	// Send hands one frame to the server. The transport must not modify or retain msg.Frame
	// beyond the call, and must write it byte for byte.
	//
	// A nil error means the frame was handed over; the answer to a request arrives through
	// Receive, or Receive reports the exchange broken with an *Error carrying msg.ID. A non-nil
	// error should be an *Error whose Outcome says whether the bytes can have reached the server;
	// any other error is treated as Uncertain.
	Send(ctx context.Context, msg *Message) error

	// Receive returns the next frame from the server: a response, a notification or a
	// server-initiated request. The frame is the caller's: the connection must not reuse it.
	//
	// An *Error whose ID is set reports that the exchange of that one request broke; the
	// connection lives on and Receive may be called again. Any other error means the connection
	// has ended: every request sent on it and not yet answered will get no answer from it.
	Receive(ctx context.Context) ([]byte, error)

	// Close ends the connection. It is idempotent and safe to call concurrently.
	Close() error
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

	// Header holds transport headers that name the message (Mcp-Method, Mcp-Name,
	// Mcp-Param-*, MCP-Protocol-Version of the stateless revisions), already encoded. Transports
	// without headers ignore it.
	Header map[string]string
}

// IsRequest reports whether m carries a request, which expects an answer.
func (m *Message) IsRequest() bool { return m.ID != "" }

// ProtocolVersionSetter is implemented by connections that send the negotiated protocol
// revision with every message (MCP-Protocol-Version over HTTP). The client calls it as soon as
// initialize has answered.
type ProtocolVersionSetter interface {
	SetProtocolVersion(version string)
}

// Listener is implemented by connections that must open a channel of their own for messages
// the server sends unprompted (the Streamable HTTP GET stream). The client calls Listen once it
// has something to receive there, such as notification handlers.
type Listener interface {
	Listen()
}

// SessionIDer is implemented by connections whose server session has an id (Mcp-Session-Id).
type SessionIDer interface {
	SessionID() string
}

// Detacher is implemented by connections that can end without ending their server session
// (Streamable HTTP: no DELETE), so that the server keeps what the session holds, receipts
// included, until it expires the session itself.
type Detacher interface {
	Detach() error
}

// StreamCanceler is implemented by connections on which abandoning an exchange is itself its
// cancellation (closing the response stream, in the stateless revisions of Streamable HTTP), so
// that the client sends no notifications/cancelled.
type StreamCanceler interface {
	CancelsByClosing() bool
}

// A Pusher is a connection that can hand what it receives to the client as it arrives, on the
// goroutine that read it (the caller's own, in Send, for a JSON answer to a POST), instead of
// queueing it for Receive. A connection whose frames only come from its own exchanges, such as
// Streamable HTTP without its GET stream, then keeps no goroutine waiting for frames, and an
// answer reaches its caller without passing through another goroutine.
type Pusher interface {
	// Push makes every later frame, and every error Receive would have returned, go to deliver
	// instead; Receive is not called afterwards. The client calls it before the first Send.
	// deliver may be called from several goroutines at once. It may block, which holds up the
	// exchange or stream the frame came from, and it must not call Close.
	Push(deliver func(frame []byte, err error))
}

// ErrClosed is returned by Send and Receive once the connection was closed.
var ErrClosed = errors.New("transport: connection closed")

// ErrMisconfigured marks a connect failure that trying again cannot mend: a malformed URL, a
// program that does not exist or may not be run. Clients give up on it at once.
var ErrMisconfigured = errors.New("transport: misconfigured")

// ErrSessionNotFound reports that the server no longer knows the connection's session (HTTP 404
// on a known session id, or a restarted in-memory server). Nothing was executed for the frame
// that met it, but whatever the session remembered, such as request receipts, is gone.
var ErrSessionNotFound = errors.New("transport: session not found")
