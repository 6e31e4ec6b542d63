package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/northstar-mcp/mcpclient/internal/redact"
	"github.com/northstar-mcp/mcpclient/transport"
)

// With -v every frame mcpcall sends or receives is traced on stderr, one line each, with what
// the transport knows of it (the HTTP method, endpoint and status). The trace is taken where the
// bytes are, below the client: an http.RoundTripper for -url and -sse, a wrapping of the
// connection for -cmd. So it shows the handshake, notifications, resends and the GET stream as
// they went, which no interceptor sees.
//
// What could carry a credential is not shown: of the request headers only Authorization's
// scheme appears (a -header of any other name is not shown at all), and every URL has its
// userinfo, query values and fragment masked. The OAuth flow of -auth sends its requests (the
// token endpoint's answers, a registered client's secret) with a client of its own, which is
// not traced.

// maxTracedFrame bounds the bytes of one frame the trace shows; the rest is counted, not shown,
// so that -v with a result of megabytes leaves a readable trace.
const maxTracedFrame = 64 << 10

// maxTracedErrorBody bounds what the trace shows of a response that carries no frame (an HTTP
// error's text).
const maxTracedErrorBody = 512

// tracer writes the trace lines to the terminal.
type tracer struct {
	term *terminal
}

// frame writes one traced frame: dir is "->" or "<-", what says where it went or came from.
func (t *tracer) frame(dir, what string, frame []byte, total int) {
	frame = bytes.TrimSpace(frame)
	var more string
	if len(frame) > maxTracedFrame {
		frame = frame[:maxTracedFrame]
	}
	if total > len(frame) {
		more = fmt.Sprintf(" … (%d bytes not shown of %d)", total-len(frame), total)
	}
	t.term.trace("mcpcall: %s %s %s%s", dir, what, frame, more)
}

// line writes one trace line that carries no frame.
func (t *tracer) line(dir, what string) {
	t.term.trace("mcpcall: %s %s", dir, what)
}

// httpClient returns the client the HTTP transports send with: one like the transports' own,
// whose round trips are traced.
func (t *tracer) httpClient() *http.Client {
	base := http.DefaultTransport.(*http.Transport).Clone()
	// MCP's headers are a few hundred bytes: a server sending megabytes of them is refused, as
	// by the transports' own client.
	base.MaxResponseHeaderBytes = 1 << 20
	return &http.Client{Transport: &traceRoundTripper{next: base, t: t}}
}

// traceRoundTripper traces each HTTP request of the MCP transports and the frames of its
// response as the transport reads them.
type traceRoundTripper struct {
	next http.RoundTripper
	t    *tracer
}

func (rt *traceRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	what := req.Method + " " + redact.URL(req.URL.String())
	sent := what
	if auth := req.Header.Get("Authorization"); auth != "" {
		scheme, _, _ := strings.Cut(auth, " ")
		if !knownAuthScheme(scheme) {
			scheme = "" // what comes first may be the credential, or a part of it
		}
		sent += " (Authorization: " + strings.TrimSpace(scheme+" "+redact.Mask) + ")"
	}
	if id := req.Header.Get("Last-Event-ID"); id != "" {
		sent += " (Last-Event-ID: " + id + ")"
	}
	switch body := requestBody(req); {
	case body != nil:
		rt.t.frame("->", sent, body, len(body))
	default:
		rt.t.line("->", sent)
	}
	resp, err := rt.next.RoundTrip(req)
	if err != nil {
		rt.t.line("<-", what+": "+redactedError(err))
		return resp, err
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	got := fmt.Sprintf("%d %s", resp.StatusCode, what)
	switch {
	case resp.Body == nil || resp.Body == http.NoBody || req.Method == http.MethodHead:
		rt.t.line("<-", got)
	case mediaType == "text/event-stream":
		rt.t.line("<-", got+" sse stream")
		resp.Body = &tracedEvents{ReadCloser: resp.Body, t: rt.t, what: got + " sse"}
	case mediaType == "application/json":
		resp.Body = &tracedBody{ReadCloser: resp.Body, t: rt.t, what: got + " json", limit: maxTracedFrame, isFrame: true, length: resp.ContentLength}
	default:
		// No frame: the status, and the start of the body that says why.
		resp.Body = &tracedBody{ReadCloser: resp.Body, t: rt.t, what: strings.TrimSpace(got + " " + mediaType), limit: maxTracedErrorBody, length: resp.ContentLength}
	}
	return resp, nil
}

// requestBody returns a copy of the request's body, or nil when there is none or it cannot be
// had without consuming what the transport sends.
func requestBody(req *http.Request) []byte {
	if req.Body == nil || req.Body == http.NoBody || req.GetBody == nil {
		return nil
	}
	rc, err := req.GetBody()
	if err != nil {
		return nil
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil
	}
	return b
}

// tracedBody traces a response body as one line once it has been read to its end or closed:
// a frame (a JSON answer), or the text of an error.
type tracedBody struct {
	io.ReadCloser
	t       *tracer
	what    string
	limit   int
	isFrame bool
	length  int64 // the body's declared length, or -1

	mu    sync.Mutex
	buf   []byte
	total int
	once  sync.Once
}

func (b *tracedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.mu.Lock()
	b.total += n
	if room := b.limit - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(n, room)]...)
	}
	b.mu.Unlock()
	if err != nil {
		b.done(err != io.EOF)
	}
	return n, err
}

func (b *tracedBody) Close() error {
	b.done(true)
	return b.ReadCloser.Close()
}

// done traces the body once; cut says it ended before its end was read.
func (b *tracedBody) done(cut bool) {
	b.once.Do(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		what := b.what
		if cut && b.total > 0 && int64(b.total) != b.length {
			what += " (cut short)"
		}
		switch {
		case b.isFrame && b.total > 0:
			b.t.frame("<-", what, b.buf, b.total)
		case b.total > 0:
			b.t.line("<-", fmt.Sprintf("%s: %q", what, clip(b.buf, b.total)))
		default:
			b.t.line("<-", what)
		}
	})
}

// clip returns the body's start, marked as cut when there was more.
func clip(b []byte, total int) string {
	if total > len(b) {
		return string(b) + "…"
	}
	return string(b)
}

// tracedEvents traces each event of an SSE response as the transport reads it: a message event
// as its frame, the legacy transport's endpoint event as its (masked) URL.
type tracedEvents struct {
	io.ReadCloser
	t    *tracer
	what string

	mu        sync.Mutex
	line      []byte // the start of a line not yet ended, up to maxTracedFrame bytes
	lineTotal int    // its length, what was not kept included
	event, id string
	data      []byte // the event's data, up to maxTracedFrame bytes
	dataTotal int
	afterCR   bool // the last byte scanned was a CR, which a LF may follow
	ended     bool
}

func (e *tracedEvents) Read(p []byte) (int, error) {
	n, err := e.ReadCloser.Read(p)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.scan(p[:n])
	if err != nil && !e.ended {
		e.ended = true
		ending := "stream ended"
		if err != io.EOF {
			ending = "stream broke: " + redactedError(err)
		}
		e.t.line("<-", e.what+" "+ending)
	}
	return n, err
}

func (e *tracedEvents) Close() error {
	e.mu.Lock()
	if !e.ended {
		e.ended = true
		e.t.line("<-", e.what+" stream closed")
	}
	e.mu.Unlock()
	return e.ReadCloser.Close()
}

// scan splits what was read into lines as SSE ends them (LF, CRLF or CR), across reads.
func (e *tracedEvents) scan(p []byte) {
	for _, c := range p {
		switch {
		case c == '\n' && e.afterCR:
			e.afterCR = false // the LF of a CRLF
		case c == '\r' || c == '\n':
			e.afterCR = c == '\r'
			e.field()
			e.line, e.lineTotal = e.line[:0], 0
		default:
			e.afterCR = false
			e.lineTotal++
			if len(e.line) < maxTracedFrame+len("data: ") {
				e.line = append(e.line, c)
			}
		}
	}
}

// field reads the line scanned; an empty one dispatches the event.
func (e *tracedEvents) field() {
	if e.lineTotal == 0 {
		if e.dataTotal > 0 {
			what := e.what
			if e.id != "" {
				what += " id=" + e.id
			}
			switch e.event {
			case "", "message":
				e.t.frame("<-", what, e.data, e.dataTotal)
			case "endpoint":
				e.t.line("<-", what+" endpoint "+redact.URL(string(bytes.TrimSpace(e.data))))
			default:
				e.t.line("<-", fmt.Sprintf("%s event %q", what, e.event))
			}
		}
		e.event, e.data, e.dataTotal = "", e.data[:0], 0
		return
	}
	name, value, _ := bytes.Cut(e.line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(name) {
	case "event":
		e.event = string(value)
	case "id":
		e.id = string(value)
	case "data":
		if e.dataTotal > 0 {
			e.dataTotal++
			e.data = append(e.data, '\n')
		}
		e.dataTotal += len(value) + e.lineTotal - len(e.line)
		if room := maxTracedFrame - len(e.data); room > 0 {
			e.data = append(e.data, value[:min(len(value), room)]...)
		}
	}
}

// knownAuthScheme reports whether s names one of the common HTTP authentication schemes, which
// the trace shows before the masked credential.
func knownAuthScheme(s string) bool {
	for _, known := range []string{"Bearer", "Basic", "DPoP", "Digest", "Negotiate"} {
		if strings.EqualFold(s, known) {
			return true
		}
	}
	return false
}

// tracedTransport traces the frames of a stdio server's connection.
type tracedTransport struct {
	next transport.Transport
	t    *tracer
}

func (tt *tracedTransport) Connect(ctx context.Context, r transport.Receiver) (transport.Conn, error) {
	conn, err := tt.next.Connect(ctx, &tracedReceiver{next: r, t: tt.t})
	if err != nil {
		return nil, err
	}
	if _, ok := conn.(transport.SessionConn); ok {
		// A wrapping would hide what the client learns of the session from the connection.
		tt.t.line("<-", "connected; this transport's frames are not traced")
		return conn, nil
	}
	return &tracedConn{Conn: conn, t: tt.t}, nil
}

type tracedConn struct {
	transport.Conn
	t *tracer
}

func (c *tracedConn) Send(ctx context.Context, msg *transport.Message) error {
	c.t.frame("->", "stdio", msg.Frame, len(msg.Frame))
	err := c.Conn.Send(ctx, msg)
	if err != nil {
		c.t.line("->", "stdio: "+err.Error())
	}
	return err
}

type tracedReceiver struct {
	next transport.Receiver
	t    *tracer
}

func (r *tracedReceiver) Deliver(frame []byte, awaited string) bool {
	r.t.frame("<-", "stdio", frame, len(frame))
	return r.next.Deliver(frame, awaited)
}

func (r *tracedReceiver) Fail(err error) {
	r.t.line("<-", "stdio: "+err.Error())
	r.next.Fail(err)
}
