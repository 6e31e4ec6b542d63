package receiptsgosdk

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/northstar-mcp/mcpclient/receipts"
)

// An Adapter keeps request receipts for the connections of go-sdk servers over byte streams.
// Every connection it wraps shares its receipts.Keeper, and so its store: a client that lost a
// connection and resends on a new one, to the same server process, gets the receipt. Create one
// per server process (or per store) and reuse it; it is safe for concurrent use.
type Adapter struct {
	keeper *receipts.Keeper
}

// New returns an Adapter keeping receipts under opts. Of receipts.Options, Principal and
// MaxSessions are HTTP's and unused here; MaxBodyBytes bounds a request line, and
// DetachedTimeout bounds how long the requests of a client that disconnected run on under
// DisconnectContinue. A nil opts.Store means a MemoryStore of this process, which makes the
// declared scope "process": see the package documentation for when that is enough.
func New(opts receipts.Options) *Adapter {
	return &Adapter{keeper: receipts.NewKeeper(opts)}
}

// Transport returns a transport that serves one connection through inner, keeping receipts for
// the requests of its client that opt in. inner must be a *mcp.StdioTransport or a
// *mcp.IOTransport: the receipts rest on the bytes of each request line as the client sent
// them, which only a byte stream gives; the returned transport's Connect fails for any other.
// Like any go-sdk transport, it serves one Connect.
func Transport(inner mcp.Transport, opts receipts.Options, options ...Option) mcp.Transport {
	return New(opts).Transport(inner, options...)
}

// Transport returns a transport that serves one connection through inner under a's receipts;
// see the package-level Transport.
func (a *Adapter) Transport(inner mcp.Transport, options ...Option) mcp.Transport {
	t := &transport{a: a, inner: inner}
	for _, o := range options {
		o(&t.cfg)
	}
	return t
}

// An Option configures one connection.
type Option func(*connConfig)

type connConfig struct {
	principal string
}

// WithPrincipal keys the connection's receipts by principal: who the client at the other end
// is, as the application authenticated it (a socket's peer credentials, a token it presented).
// Receipts of different principals never meet. Default "": every client of the adapter is the
// same principal, and a request's id (a UUID) is the only secret that keeps one client from
// another's answers.
func WithPrincipal(principal string) Option {
	return func(c *connConfig) { c.principal = principal }
}

type transport struct {
	a     *Adapter
	inner mcp.Transport
	cfg   connConfig
}

// Connect implements mcp.Transport.
func (t *transport) Connect(ctx context.Context) (mcp.Connection, error) {
	var s stream
	var maxLine int
	switch in := t.inner.(type) {
	case *mcp.StdioTransport:
		// As go-sdk does, stdin is closed with the connection and stdout is left open.
		s = stream{r: os.Stdin, w: os.Stdout, close: os.Stdin.Close}
		maxLine = in.MaxLineLength
	case *mcp.IOTransport:
		s = stream{r: in.Reader, w: in.Writer, close: closeBoth(in.Reader, in.Writer)}
		maxLine = in.MaxLineLength
	default:
		return nil, fmt.Errorf("receiptsgosdk: cannot keep receipts over a %T: only a byte stream (mcp.StdioTransport, mcp.IOTransport) carries the request bytes a receipt is kept for", t.inner)
	}
	c := newConn(t.a.keeper, t.cfg.principal, s)
	go c.readClient()
	side := serverSide{c}
	return (&mcp.IOTransport{Reader: side, Writer: side, MaxLineLength: maxLine}).Connect(ctx)
}

// closeBoth closes the reader and then the writer, which may be the same stream (a net.Conn):
// the first error is the one that counts.
func closeBoth(r io.Closer, w io.Closer) func() error {
	return func() error {
		err := r.Close()
		if werr := w.Close(); err == nil && werr != nil && r != w {
			err = werr
		}
		return err
	}
}

// serverSide is the stream go-sdk's connection reads and writes.
type serverSide struct{ c *conn }

func (s serverSide) Read(p []byte) (int, error)  { return s.c.toServer.Read(p) }
func (s serverSide) Write(p []byte) (int, error) { return s.c.fromServer(p) }
func (s serverSide) Close() error                { return s.c.Close() }
