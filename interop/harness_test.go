package interop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/transport"
)

// TestMain fails the run when a test leaves a goroutine behind. Started as a server process of
// TestFleet, the binary serves instead of testing.
func TestMain(m *testing.M) {
	if os.Getenv(fleetEnvRole) == "server" {
		os.Exit(serveFleetMember())
	}
	goleak.VerifyTestMain(m)
}

// matrixEnv names the file to which every combination appends its matrix row (see run.sh).
const matrixEnv = "MCPCLIENT_INTEROP_MATRIX"

// checkTimeout bounds one check.
const checkTimeout = 30 * time.Second

var matrixMu sync.Mutex

// noteSep separates the notes of a matrix row (run.sh splits on it).
const noteSep = " ¦ "

// A combo is one cell of the matrix: one server, over one transport, at one protocol revision.
// Its checks are subtests; at the end it logs one matrix line and appends it to $matrixEnv.
type combo struct {
	t                           *testing.T
	server, transport, revision string
	wire                        *wireLog // the HTTP exchanges, for HTTP transports

	mu         sync.Mutex
	negotiated string
	failed     []string
	skipped    []string
	notes      []string
	logs       bytes.Buffer // the client's log records and the server's stderr
}

func newCombo(t *testing.T, server, transportName, revision string) *combo {
	cb := &combo{t: t, server: server, transport: transportName, revision: revision}
	t.Cleanup(cb.record)
	return cb
}

// check runs one check as a subtest. When it fails, the HTTP exchanges it made are logged.
func (cb *combo) check(name string, f func(t *testing.T)) bool {
	start := cb.wire.len()
	ok := cb.t.Run(name, func(t *testing.T) {
		t.Cleanup(func() {
			if t.Skipped() {
				cb.mu.Lock()
				cb.skipped = append(cb.skipped, name)
				cb.mu.Unlock()
			}
			if t.Failed() {
				if ex := cb.wire.since(start); ex != "" {
					t.Logf("HTTP exchanges of this check:\n%s", ex)
				}
			}
		})
		f(t)
	})
	if !ok {
		cb.mu.Lock()
		cb.failed = append(cb.failed, name)
		cb.mu.Unlock()
	}
	return ok
}

// note records an observation about the server's behaviour: logged, and kept in the matrix.
func (cb *combo) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	cb.t.Helper()
	cb.t.Log("NOTE: " + s)
	cb.mu.Lock()
	cb.notes = append(cb.notes, s)
	cb.mu.Unlock()
}

func (cb *combo) setNegotiated(v string) {
	cb.mu.Lock()
	cb.negotiated = v
	cb.mu.Unlock()
}

// logWriter collects the client's log records and a server's stderr, shown when the combo fails.
func (cb *combo) Write(p []byte) (int, error) {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if cb.logs.Len() < 256<<10 {
		cb.logs.Write(p)
	}
	return len(p), nil
}

func (cb *combo) record() {
	t := cb.t
	result := "PASS"
	switch {
	case t.Skipped():
		result = "SKIP"
	case t.Failed():
		result = "FAIL"
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if result == "FAIL" && cb.logs.Len() > 0 {
		t.Logf("client log and server stderr:\n%s", cb.logs.String())
	}
	negotiated := cb.negotiated
	if negotiated == "" {
		negotiated = "-"
	}
	detail := ""
	if len(cb.failed) > 0 {
		detail = "failed: " + strings.Join(cb.failed, "; ")
	}
	if len(cb.skipped) > 0 {
		if detail != "" {
			detail += " / "
		}
		detail += "skipped: " + strings.Join(cb.skipped, "; ")
	}
	t.Logf("MATRIX %s | %s | %s | negotiated %s | %s | %s", cb.server, cb.transport, cb.revision, negotiated, result, detail)

	path := os.Getenv(matrixEnv)
	if path == "" {
		return
	}
	clean := func(s string) string { return strings.NewReplacer("\t", " ", "\n", " ").Replace(s) }
	row := strings.Join([]string{cb.server, cb.transport, cb.revision, negotiated, result,
		clean(strings.Join(cb.failed, "; ")), clean(strings.Join(cb.skipped, "; ")), clean(strings.Join(cb.notes, noteSep))}, "\t")
	matrixMu.Lock()
	defer matrixMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("matrix file: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintln(f, row)
}

// retryCounter counts the client's retries (its OnRetry hook).
type retryCounter struct{ n atomic.Int64 }

// connect connects a client through tr, with a retry counter and the client's log kept in cb.
// The client is closed at cleanup.
func (cb *combo) connect(t *testing.T, tr transport.Transport, opts ...mcpclient.Option) (*mcpclient.Client, *retryCounter, error) {
	t.Helper()
	rc := new(retryCounter)
	base := []mcpclient.Option{
		mcpclient.WithLogger(slog.New(slog.NewTextHandler(cb, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{OnRetry: func(attempt int, cause error, d time.Duration) {
			rc.n.Add(1)
			fmt.Fprintf(cb, "OnRetry attempt=%d delay=%v cause=%v\n", attempt, d, cause)
		}}),
		mcpclient.WithClientInfo(mcpclient.Implementation{Name: "mcpclient-interop", Version: mcpclient.Version}),
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	c, err := mcpclient.Connect(ctx, tr, append(base, opts...)...)
	if err != nil {
		return nil, rc, err
	}
	t.Cleanup(func() { c.Close() })
	return c, rc, nil
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	t.Cleanup(cancel)
	return ctx
}

// callTool calls a tool and fails the check on an error.
func callTool(t *testing.T, c *mcpclient.Client, name string, args any, opts ...mcpclient.CallOption) *mcpclient.CallToolResult {
	t.Helper()
	res, err := c.CallTool(ctxFor(t), name, args, opts...)
	if err != nil {
		t.Fatalf("CallTool(%s, %v): %v", name, args, err)
	}
	return res
}

// do sends method with params through NewRequest and Do, and decodes the result into out.
func do(t *testing.T, c *mcpclient.Client, method string, params, out any) *mcpclient.Response {
	t.Helper()
	req, err := c.NewRequest(method, params)
	if err != nil {
		t.Fatalf("NewRequest(%s): %v", method, err)
	}
	resp, err := c.Do(ctxFor(t), req)
	if err != nil {
		t.Fatalf("Do(%s): %v", method, err)
	}
	if out != nil {
		if err := resp.Decode(out); err != nil {
			t.Fatalf("decoding the %s result %s: %v", method, resp.Result, err)
		}
	}
	return resp
}

func toolNames(tools []*mcpclient.Tool) []string {
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	return names
}

func findTool(tools []*mcpclient.Tool, name string) *mcpclient.Tool {
	for _, tl := range tools {
		if tl.Name == name {
			return tl
		}
	}
	return nil
}

// jsonEqual reports whether two JSON texts denote the same value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// waitFor polls cond until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// --- HTTP: a recording client, and raw requests -------------------------------------------

// wireLog records the HTTP exchanges of one combo: requests with their bodies, responses with
// what of their bodies was read.
type wireLog struct {
	mu        sync.Mutex
	exchanges []*exchange
}

type exchange struct {
	mu   sync.Mutex
	req  string
	resp string
	body bytes.Buffer
}

const wireBodyLimit = 2048

func (w *wireLog) len() int {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.exchanges)
}

func (w *wireLog) since(i int) string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	exs := append([]*exchange(nil), w.exchanges[min(i, len(w.exchanges)):]...)
	w.mu.Unlock()
	var b strings.Builder
	for n, ex := range exs {
		ex.mu.Lock()
		fmt.Fprintf(&b, "--- #%d\n> %s\n< %s\n", i+n, ex.req, ex.resp)
		if ex.body.Len() > 0 {
			fmt.Fprintf(&b, "< body: %q\n", ex.body.String())
		}
		ex.mu.Unlock()
	}
	return b.String()
}

// streamOpen reports whether a GET of session got an event stream.
func (w *wireLog) streamOpen(session string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ex := range w.exchanges {
		ex.mu.Lock()
		ok := strings.HasPrefix(ex.req, "GET ") && strings.Contains(ex.req, "Mcp-Session-Id: "+session+";") &&
			strings.HasPrefix(ex.resp, "200 ") && strings.Contains(ex.resp, "text/event-stream")
		ex.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

// client returns an HTTP client of its own that records into w; its idle connections are
// closed at cleanup.
func (w *wireLog) client(t *testing.T) *http.Client {
	base := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections)
	return &http.Client{Transport: &recordingTransport{base: base, log: w}}
}

type recordingTransport struct {
	base *http.Transport
	log  *wireLog
}

var loggedHeaders = []string{"Accept", "Content-Type", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id"}

func headerSummary(h http.Header) string {
	var parts []string
	for _, k := range loggedHeaders {
		if v := h.Get(k); v != "" {
			parts = append(parts, k+": "+v)
		}
	}
	return strings.Join(parts, "; ")
}

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ex := &exchange{}
	var body []byte
	if req.Body != nil && req.GetBody != nil {
		if rc, err := req.GetBody(); err == nil {
			body, _ = io.ReadAll(io.LimitReader(rc, wireBodyLimit))
			rc.Close()
		}
	}
	ex.req = fmt.Sprintf("%s %s [%s] %s", req.Method, req.URL.Path, headerSummary(req.Header), body)
	rt.log.mu.Lock()
	rt.log.exchanges = append(rt.log.exchanges, ex)
	rt.log.mu.Unlock()
	resp, err := rt.base.RoundTrip(req)
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if err != nil {
		ex.resp = "error: " + err.Error()
		return nil, err
	}
	ex.resp = fmt.Sprintf("%s [%s]", resp.Status, headerSummary(resp.Header))
	resp.Body = &teeBody{ReadCloser: resp.Body, ex: ex}
	return resp, nil
}

type teeBody struct {
	io.ReadCloser
	ex *exchange
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.ex.mu.Lock()
		if room := wireBodyLimit - b.ex.body.Len(); room > 0 {
			b.ex.body.Write(p[:min(n, room)])
		}
		b.ex.mu.Unlock()
	}
	return n, err
}

// rawReply is what a raw HTTP request got.
type rawReply struct {
	Status      int
	ContentType string
	SessionID   string
	Body        string
}

func (r rawReply) String() string {
	return fmt.Sprintf("HTTP %d (%s) %s", r.Status, r.ContentType, strings.TrimSpace(r.Body))
}

// rawHTTP sends one request outside the client, for probing a server, and reads the whole answer.
// It is safe to call from any goroutine: a failure is reported with t.Error and Status -1.
func rawHTTP(t *testing.T, hc *http.Client, method, url, session, version, body string, header ...string) rawReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		t.Error(err)
		return rawReply{Status: -1, Body: err.Error()}
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Errorf("raw %s %s: %v", method, url, err)
		return rawReply{Status: -1, Body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return rawReply{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"),
		SessionID: resp.Header.Get("Mcp-Session-Id"), Body: string(b)}
}

// --- processes ----------------------------------------------------------------------------

// noOrphans registers a cleanup, to run after every other of the test, that fails the test when
// a process the test started is still alive, and kills it.
func noOrphans(t *testing.T) {
	t.Cleanup(func() {
		var left []int
		ok := waitFor(5*time.Second, func() bool {
			left = childProcesses()
			return len(left) == 0
		})
		if ok {
			return
		}
		for _, pid := range left {
			t.Errorf("process %d (%s) outlived the test: killed", pid, cmdline(pid))
			if p, err := os.FindProcess(pid); err == nil {
				p.Kill()
				p.Wait()
			}
		}
	})
}

// childProcesses returns the live (not zombie) child processes of this one; nil where /proc
// does not exist.
func childProcesses() []int {
	me := os.Getpid()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var pids []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == me {
			pid, _ := strconv.Atoi(strings.Fields(s)[0])
			pids = append(pids, pid)
		}
	}
	return pids
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// errorChain renders err with the kinds of the client's sentinels it matches.
func errorChain(err error) string {
	var kinds []string
	for _, s := range []error{mcpclient.ErrOutcomeUnknown, mcpclient.ErrNotDelivered, mcpclient.ErrRequestInFlight,
		mcpclient.ErrRequestIDReused, mcpclient.ErrSessionLost, mcpclient.ErrClosed, transport.ErrSessionNotFound, transport.ErrProcessExited} {
		if errors.Is(err, s) {
			kinds = append(kinds, s.Error())
		}
	}
	return fmt.Sprintf("%v [code %v; is: %s; wire error: %v]", err, mcpclient.CodeOf(err), strings.Join(kinds, ", "), mcpclient.IsWireError(err))
}
