package receiptsgosdk_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/northstar-mcp/mcpclient/receipts"
	receiptsgosdk "github.com/northstar-mcp/mcpclient/receipts/gosdk"
)

// booking is a go-sdk server with one unsafe tool, charge, that counts its executions. A test
// may hold charge after it ran and before it answers (hold), to cut the connection then.
type booking struct {
	srv  *mcp.Server
	runs atomic.Int64

	mu      sync.Mutex
	hold    chan struct{} // when not nil, charge waits for it to close after it ran
	ran     chan struct{} // when not nil, charge closes it once it ran
	lastCtx context.Context
}

type chargeArgs struct {
	Cents int `json:"cents"`
}

func newBooking() *booking {
	b := &booking{srv: mcp.NewServer(&mcp.Implementation{Name: "booking", Version: "1.0.0"}, nil)}
	no := false
	mcp.AddTool(b.srv, &mcp.Tool{Name: "charge", Annotations: &mcp.ToolAnnotations{DestructiveHint: &no}},
		func(ctx context.Context, _ *mcp.CallToolRequest, args chargeArgs) (*mcp.CallToolResult, any, error) {
			n := b.runs.Add(1)
			b.mu.Lock()
			hold, ran := b.hold, b.ran
			b.ran = nil
			b.lastCtx = ctx
			b.mu.Unlock()
			if ran != nil {
				close(ran)
			}
			if hold != nil {
				select {
				case <-hold:
				case <-ctx.Done():
					return nil, nil, context.Cause(ctx)
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("charged %d cents, run %d", args.Cents, n)}}}, nil, nil
		})
	return b
}

// holdNext makes the next charge wait, after it ran, until release is called; ran is closed
// once it ran.
func (b *booking) holdNext() (ran <-chan struct{}, release func()) {
	r, h := make(chan struct{}), make(chan struct{})
	b.mu.Lock()
	b.ran, b.hold = r, h
	b.mu.Unlock()
	var once sync.Once
	return r, func() {
		once.Do(func() {
			b.mu.Lock()
			b.hold = nil
			b.mu.Unlock()
			close(h)
		})
	}
}

// served runs the server's connections, each through wrap, and waits for them at cleanup.
type served struct {
	t        testing.TB
	srv      *mcp.Server
	wrap     func(mcp.Transport) mcp.Transport
	mu       sync.Mutex
	sessions []*mcp.ServerSession
}

func serve(t testing.TB, srv *mcp.Server, wrap func(mcp.Transport) mcp.Transport) *served {
	s := &served{t: t, srv: srv, wrap: wrap}
	t.Cleanup(s.close)
	return s
}

// open connects a new server session and returns the client's end of its stream.
func (s *served) open(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	var tr mcp.Transport = &mcp.IOTransport{Reader: server, Writer: server}
	if s.wrap != nil {
		tr = s.wrap(tr)
	}
	ss, err := s.srv.Connect(ctx, tr, nil)
	if err != nil {
		client.Close()
		server.Close()
		return nil, err
	}
	s.mu.Lock()
	s.sessions = append(s.sessions, ss)
	s.mu.Unlock()
	return client, nil
}

func (s *served) close() {
	s.mu.Lock()
	sessions := s.sessions
	s.sessions = nil
	s.mu.Unlock()
	for _, ss := range sessions {
		ss.Close()
		ss.Wait()
	}
}

func adapterFor(opts receipts.Options) *receiptsgosdk.Adapter {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return receiptsgosdk.New(opts)
}

// through wraps every connection with a.
func through(a *receiptsgosdk.Adapter, options ...receiptsgosdk.Option) func(mcp.Transport) mcp.Transport {
	return func(t mcp.Transport) mcp.Transport { return a.Transport(t, options...) }
}

// A line is one raw client: it writes lines and reads the server's.
type lines struct {
	t    testing.TB
	conn net.Conn
	r    *bufio.Reader
}

func dialLines(t testing.TB, s *served) *lines {
	t.Helper()
	conn, err := s.open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &lines{t: t, conn: conn, r: bufio.NewReaderSize(conn, 1<<20)}
}

func (l *lines) send(line string) {
	l.t.Helper()
	l.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(l.conn, line+"\n"); err != nil {
		l.t.Fatalf("send: %v", err)
	}
}

// recv reads the next line of the server.
func (l *lines) recv() string {
	l.t.Helper()
	l.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := l.r.ReadString('\n')
	if err != nil {
		l.t.Fatalf("recv: %v (read %q)", err, line)
	}
	return line[:len(line)-1]
}

// A reply is what a test reads of a response.
type reply struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result *struct {
		Meta         map[string]json.RawMessage `json:"_meta"`
		Content      []struct{ Text string }    `json:"content"`
		Capabilities struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		} `json:"capabilities"`
	} `json:"result"`
	Error *struct {
		Code int `json:"code"`
		Data struct {
			Code string `json:"code"`
		} `json:"data"`
	} `json:"error"`
}

func parseReply(t testing.TB, line string) reply {
	t.Helper()
	var r reply
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("reply %q: %v", line, err)
	}
	return r
}

func (r reply) replayed() bool {
	return r.Result != nil && string(r.Result.Meta[receipts.ReplayMetaKey]) == "true"
}

func (r reply) text() string {
	if r.Result == nil || len(r.Result.Content) == 0 {
		return ""
	}
	return r.Result.Content[0].Text
}

// The lines of a session of a revision before 2026-07-28, opted in by its initialize.
const (
	initOptedIn  = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"extensions":{"io.github.northstar-mcp/request-receipts":{}}},"clientInfo":{"name":"raw","version":"1"}}}`
	initPlain    = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	initialized  = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	chargeFormat = `{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"charge","arguments":{"cents":%d}}}`
)

func charge(id string, cents int) string { return fmt.Sprintf(chargeFormat, id, cents) }

// open runs initialize on l and returns its answer.
func (l *lines) open(init string) reply {
	l.t.Helper()
	l.send(init)
	r := parseReply(l.t, l.recv())
	l.send(initialized)
	return r
}
