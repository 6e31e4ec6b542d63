package testpeer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/northstar-mcp/mcpclient/transport"
)

// PipeScript sees every message the client sends on a connection, in order, on the goroutine
// that reads the connection. It reports whether it dealt with the message; if not, the message
// gets the default answer (see the package doc).
type PipeScript func(c *Conn, m Msg) (handled bool)

// Pipe is a scripted server at the far end of in-memory connections: each connection its
// [Pipe.Transport] opens is served by a goroutine of its own until the client closes it, and
// the test waits for those goroutines at its end.
type Pipe struct {
	t      testing.TB // nil when serving a process's stdin
	script PipeScript
	opts   options
	tr     transport.Transport
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns []*Conn
	gone  bool
}

// errGone refuses the connections of a server that hung up.
var errGone = errors.New("testpeer: the server is gone")

// NewPipe returns a server that runs script (nil: the defaults alone). Its connections carry
// transport frames over transport.Pipe, or newline-delimited JSON with the [Lines] option.
func NewPipe(t testing.TB, script PipeScript, opts ...Option) *Pipe {
	p := &Pipe{t: t, script: script, opts: newOptions(opts)}
	if p.opts.lines {
		p.tr = &transport.Stream{MaxFrameSize: p.opts.maxFrame, Open: p.openLines}
	} else {
		p.tr = transport.DialFunc(p.dial)
	}
	t.Cleanup(p.wg.Wait)
	return p
}

// Serve runs script over one newline-delimited connection reading r and writing w, such as a
// process's stdin and stdout, until r ends.
func Serve(r io.Reader, w io.Writer, script PipeScript, opts ...Option) {
	p := &Pipe{script: script, opts: newOptions(opts)}
	p.serveLines(&Conn{p: p, w: w}, r)
}

// Transport returns the transport whose every Connect opens a new connection to the server.
func (p *Pipe) Transport() transport.Transport { return p.tr }

// Opened returns how many connections the client opened.
func (p *Pipe) Opened() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// HangUp closes every connection and refuses new ones.
func (p *Pipe) HangUp() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gone = true
	for _, c := range p.conns {
		c.Close()
	}
}

// Wait waits until the goroutines serving connections, and those started by [Conn.Go], have
// returned: once the client closed its connections.
func (p *Pipe) Wait() { p.wg.Wait() }

// add numbers c and keeps it, unless the server hung up.
func (p *Pipe) add(c *Conn) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone {
		return errGone
	}
	c.N = len(p.conns)
	p.conns = append(p.conns, c)
	return nil
}

func (p *Pipe) dial(_ context.Context, r transport.Receiver) (transport.Conn, error) {
	t := p.t
	client, server := transport.Pipe(r)
	c := &Conn{p: p, mem: server}
	if err := p.add(c); err != nil {
		client.Close()
		return nil, &transport.Error{Outcome: transport.NotDelivered, Err: err}
	}
	p.wg.Go(func() {
		for {
			frame, err := server.Receive(context.Background())
			if err != nil {
				if !errors.Is(err, transport.ErrClosed) {
					t.Errorf("testpeer: Receive: %v", err)
				}
				return
			}
			p.handle(c, frame)
		}
	})
	return client, nil
}

func (p *Pipe) openLines(context.Context) (io.ReadWriteCloser, error) {
	client, server := net.Pipe()
	c := &Conn{p: p, w: server, closer: server}
	if err := p.add(c); err != nil {
		client.Close()
		server.Close()
		return nil, err
	}
	p.wg.Go(func() {
		defer server.Close()
		p.serveLines(c, server)
	})
	return client, nil
}

// maxLine bounds a line the server reads; it reads on past a longer one without keeping it, so
// that the client's writes do not block.
const maxLine = 16 << 20

func (p *Pipe) serveLines(c *Conn, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, maxLine)
	sc.Split(wholeLines)
	for sc.Scan() {
		if len(sc.Bytes()) > 0 {
			p.handle(c, sc.Bytes())
		}
	}
	io.Copy(io.Discard, r)
}

// wholeLines splits newline-terminated lines, and drops what follows the last newline when the
// stream ends: a line cut by the end of the stream (a client whose write failed halfway) is no
// frame.
func wholeLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, bytes.TrimSuffix(data[:i], []byte("\r")), nil
	}
	if atEOF {
		return len(data), nil, nil
	}
	return 0, nil, nil
}

func (p *Pipe) handle(c *Conn, frame []byte) {
	var m Msg
	if err := json.Unmarshal(frame, &m); err != nil {
		if p.t != nil {
			p.t.Errorf("the client sent a frame that is no JSON-RPC message: %s", frame)
		}
		return
	}
	if p.script != nil && p.script(c, m) {
		return
	}
	if frame := p.opts.answer(m); frame != "" {
		c.Send(frame)
	}
}

// answer is the default answer to m, "" for none.
func (o options) answer(m Msg) string {
	switch {
	case !m.IsRequest():
		return ""
	case m.Method == "initialize":
		return Result(m.ID, o.init)
	case m.Method == "tools/call":
		return Result(m.ID, ToolResult)
	case m.Method == "ping":
		return Result(m.ID, `{}`)
	default: // server/discover included: an older server does not know it
		return NoMethod(m.ID)
	}
}

// Conn is the server's end of one connection.
type Conn struct {
	// N numbers the connections of a [Pipe] from 0, in the order the client opened them.
	N int

	p      *Pipe
	mem    *transport.MemoryConn // an in-memory connection
	w      io.Writer             // a newline-delimited one
	closer io.Closer             // its server end, if it has one to close
}

// Send sends frame to the client: a transport frame, or a line (Send adds the newline).
func (c *Conn) Send(frame string) error {
	if c.mem != nil {
		return c.mem.Send(context.Background(), &transport.Message{Frame: []byte(frame)})
	}
	_, err := io.WriteString(c.w, frame+"\n") // one write: a net.Pipe keeps it whole
	return err
}

// Write writes raw bytes to a newline-delimited connection, for answers that arrive in pieces.
func (c *Conn) Write(b []byte) (int, error) {
	if c.mem != nil {
		return 0, errors.New("testpeer: raw bytes on a connection of frames")
	}
	return c.w.Write(b)
}

// Go runs f on a goroutine the test waits for: for a script that answers later, or goes on
// sending.
func (c *Conn) Go(f func()) { c.p.wg.Go(f) }

// Close hangs up this connection.
func (c *Conn) Close() error {
	if c.mem != nil {
		return c.mem.Close()
	}
	if c.closer != nil {
		return c.closer.Close()
	}
	return nil
}
