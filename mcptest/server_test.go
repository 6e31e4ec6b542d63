package mcptest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/transporttest"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/receipts"
	"github.com/northstar-mcp/mcpclient/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// raw is a hand-driven connection to a server, for checks on exact frames.
type raw struct {
	t    *testing.T
	conn transport.Conn
	in   *transporttest.Queue // what the server sent
}

// connectRaw opens a connection to srv without initializing it.
func connectRaw(t *testing.T, srv *mcptest.Server) *raw {
	t.Helper()
	in := new(transporttest.Queue)
	conn, err := srv.Transport().Connect(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &raw{t: t, conn: conn, in: in}
}

// dialRaw opens a session that opts into receipts, as this module's client does.
func dialRaw(t *testing.T, srv *mcptest.Server) *raw {
	t.Helper()
	return dialRawDeclaring(t, srv, `{"extensions":{"`+receipts.ExtensionID+`":{}}}`)
}

// dialRawDeclaring opens a session whose initialize declares capabilities.
func dialRawDeclaring(t *testing.T, srv *mcptest.Server, capabilities string) *raw {
	t.Helper()
	r := connectRaw(t, srv)
	r.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":` + capabilities + `,"clientInfo":{"name":"raw","version":"0"}}}`)
	if got := r.recv(); !strings.Contains(got, `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize answered %s", got)
	}
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return r
}

func (r *raw) send(frame string) {
	r.t.Helper()
	if err := r.conn.Send(context.Background(), &transport.Message{Frame: []byte(frame)}); err != nil {
		r.t.Fatal(err)
	}
}

// recv returns the next frame, or the text of an exchange failure prefixed with "fail:".
func (r *raw) recv() string {
	r.t.Helper()
	frame, err := r.in.Receive(context.Background())
	if err != nil {
		var te *transport.Error
		if errors.As(err, &te) {
			return "fail:" + te.Outcome.String() + ":" + te.ID + ":" + te.Err.Error()
		}
		r.t.Fatal(err)
	}
	return string(frame)
}

func call(id, args string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":` + args + `}}`
}

func echo(runs *int, mu *sync.Mutex) mcptest.ToolFunc {
	return func(_ context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		mu.Lock()
		*runs++
		mu.Unlock()
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(string(c.Arguments))}}, nil
	}
}

// A receipt fingerprints the bytes exactly as received, as the receipts middleware does: a
// client resends the very bytes it froze, so the same content spelled otherwise is another
// request, refused under a used id however little it differs.
func TestFingerprintIsTheBytesAsReceived(t *testing.T) {
	var runs int
	var mu sync.Mutex
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echo(&runs, &mu)))
	r := dialRaw(t, srv)
	r.send(call(`"a"`, `{"x":1,"y":[1,2]}`))
	first := r.recv()
	r.send(call(`"a"`, `{"x":1,"y":[1,2]}`))
	if second := r.recv(); !sameAnswer(second, first) || runs != 1 {
		t.Fatalf("the same bytes: runs %d; answers\n%s\n%s", runs, first, second)
	}
	r.send(`{ "params" : {"arguments":{"y":[1, 2],"x":1},"name":"echo"}, "method":"tools/call", "id":"a", "jsonrpc":"2.0" }`)
	if got := r.recv(); !strings.Contains(got, receipts.CodeIDReused) || runs != 1 {
		t.Fatalf("the same content spelled otherwise: runs %d; %s", runs, got)
	}
	r.send(call(`"b"`, `{"n":12345678901234567890}`))
	r.recv()
	r.send(call(`"b"`, `{"n":12345678901234567891}`))
	if got := r.recv(); !strings.Contains(got, receipts.CodeIDReused) {
		t.Fatalf("different big integers under one id: %s", got)
	}
}

func TestReusedIDIsRefusedWithoutExecution(t *testing.T) {
	var runs int
	var mu sync.Mutex
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echo(&runs, &mu)))
	r := dialRaw(t, srv)
	r.send(call(`7`, `{"v":1}`))
	r.recv()
	r.send(call(`7`, `{"v":2}`))
	got := r.recv()
	var resp struct {
		ID    json.RawMessage     `json:"id"`
		Error *mcpclient.RPCError `json:"error"`
	}
	if err := json.Unmarshal([]byte(got), &resp); err != nil || resp.Error == nil {
		t.Fatalf("answer %s is no error", got)
	}
	if string(resp.ID) != "7" || resp.Error.Code != mcpclient.RPCInvalidRequest || !resp.Error.IDReused() {
		t.Errorf("refusal %s", got)
	}
	if !bytes.Contains(resp.Error.Data, []byte(`"code":"MCP_REQUEST_ID_REUSED"`)) {
		t.Errorf("data %s lacks the code", resp.Error.Data)
	}
	if runs != 1 || srv.ExecutionsOf("echo", mcpclient.IntID(7)) != 1 {
		t.Errorf("runs %d", runs)
	}
	// "7" is another id than 7.
	r.send(call(`"7"`, `{"v":2}`))
	if got := r.recv(); strings.Contains(got, "error") {
		t.Errorf("string id \"7\" was taken for 7: %s", got)
	}
}

func TestInFlightModeFreesFinishedIDs(t *testing.T) {
	var runs int
	var mu sync.Mutex
	srv := mcptest.NewTestServer(t, mcptest.WithMode(mcptest.ModeInFlightRefusal), mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echo(&runs, &mu)))
	r := dialRaw(t, srv)
	r.send(call(`1`, `{}`))
	r.recv()
	r.send(call(`1`, `{"other":true}`))
	if got := r.recv(); strings.Contains(got, "error") {
		t.Fatalf("finished id refused: %s", got)
	}
	if runs != 2 {
		t.Errorf("runs %d, want 2: no receipts in this mode", runs)
	}
	caps := initCaps(t, srv)
	if _, ok := caps.RequestReceipts(); ok {
		t.Error("in-flight mode declares receipts")
	}
}

func initCaps(t *testing.T, srv *mcptest.Server) mcpclient.ServerCapabilities {
	c := mcptest.NewClient(t, srv)
	return c.ServerCapabilities()
}

func TestRestartForgetsReceiptsAndSessions(t *testing.T) {
	var runs int
	var mu sync.Mutex
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echo(&runs, &mu)))
	r := dialRaw(t, srv)
	r.send(call(`1`, `{}`))
	r.recv()
	if srv.Receipts() != 1 {
		t.Fatalf("receipts %d", srv.Receipts())
	}
	srv.Restart()
	if srv.Receipts() != 0 {
		t.Errorf("receipts %d after restart", srv.Receipts())
	}
	r.send(call(`1`, `{}`))
	if got := r.recv(); got != "fail:not delivered:1:"+transport.ErrSessionNotFound.Error() {
		t.Errorf("old session after restart: %s", got)
	}
	r2 := dialRaw(t, srv)
	r2.send(call(`1`, `{}`))
	r2.recv()
	if runs != 2 {
		t.Errorf("runs %d, want 2: the receipt died with the restart", runs)
	}
}

func TestRequestsBeforeInitializeHaveNoSession(t *testing.T) {
	srv := mcptest.NewTestServer(t)
	r := connectRaw(t, srv)
	r.send(`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	if got := r.recv(); !strings.HasPrefix(got, `fail:not delivered:"p":`) {
		t.Errorf("ping without a session: %s", got)
	}
}

func TestFaults(t *testing.T) {
	var runs int
	var mu sync.Mutex
	tool := mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echo(&runs, &mu))
	tests := []struct {
		name  string
		fault mcptest.Fault
		want  []string // outcome of three calls in a row: "ok" or a failure prefix
		runs  int
	}{
		{"drop before, once", mcptest.Fault{Kind: mcptest.DropBeforeExecution, Tool: "echo"}, []string{"fail:uncertain", "ok", "ok"}, 2},
		{"drop after, twice", mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "echo", Times: 2}, []string{"fail:uncertain", "fail:uncertain", "ok"}, 3},
		{"fail always", mcptest.Fault{Kind: mcptest.Fail, Method: "tools/call", Times: -1, RetryAfter: time.Second}, []string{"fail:not delivered", "fail:not delivered", "fail:not delivered"}, 0},
		{"other tool", mcptest.Fault{Kind: mcptest.Fail, Tool: "other"}, []string{"ok", "ok", "ok"}, 3},
		{"other method", mcptest.Fault{Kind: mcptest.Fail, Method: "ping"}, []string{"ok", "ok", "ok"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs = 0
			srv := mcptest.NewTestServer(t, tool, mcptest.WithFault(tt.fault))
			r := dialRaw(t, srv)
			for i, want := range tt.want {
				r.send(call(fmt.Sprint(i+1), `{}`))
				got := r.recv()
				if want == "ok" && !strings.Contains(got, `"result"`) || want != "ok" && !strings.HasPrefix(got, want) {
					t.Errorf("call %d: %s, want %s", i+1, got, want)
				}
			}
			if runs != tt.runs {
				t.Errorf("runs %d, want %d", runs, tt.runs)
			}
		})
	}
}

func TestFailFaultCarriesRetryAfter(t *testing.T) {
	srv := mcptest.NewTestServer(t, mcptest.WithFault(mcptest.Fault{Kind: mcptest.Fail, Method: "ping", RetryAfter: 3 * time.Second}))
	r := dialRaw(t, srv)
	r.send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	_, err := r.in.Receive(context.Background())
	var te *transport.Error
	if !errors.As(err, &te) || te.RetryAfter != 3*time.Second || !errors.Is(err, mcptest.ErrUnavailable) {
		t.Fatalf("got %v, want an unavailable refusal with a 3s hint", err)
	}
}

func TestDelayFault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := mcptest.NewServer(mcptest.WithFault(mcptest.Fault{Kind: mcptest.Delay, Method: "ping", Delay: 4 * time.Second}))
		defer srv.Close()
		r := dialRaw(t, srv)
		start := time.Now()
		r.send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		r.recv()
		if d := time.Since(start); d != 4*time.Second {
			t.Errorf("ping took %v, want 4s", d)
		}
	})
}

func TestToolPanicBecomesErrorResult(t *testing.T) {
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		panic("bad tool")
	}))
	c := mcptest.NewClient(t, srv)
	res, err := c.CallTool(context.Background(), "echo", nil)
	if err != nil || !res.IsError || !strings.Contains(res.Text(), "bad tool") {
		t.Fatalf("got %+v, %v", res, err)
	}
}

func TestInvalidFramesAreAnswered(t *testing.T) {
	srv := mcptest.NewTestServer(t)
	r := dialRaw(t, srv)
	for frame, wantCode := range map[string]string{
		`{nope`: "-32700",
		`{"jsonrpc":"1.0","id":3,"method":"ping"}`:                               "-32600",
		`{"jsonrpc":"2.0","id":4,"method":"nope"}`:                               "-32601",
		`{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"cursor":"x"}}`: "-32602",
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{}}`:             "-32602",
	} {
		r.send(frame)
		if got := r.recv(); !strings.Contains(got, `"code":`+wantCode) {
			t.Errorf("%s answered %s, want %s", frame, got, wantCode)
		}
	}
}

func TestCloseIsIdempotentAndNamesWhatItWaitsFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		var logMu sync.Mutex
		release := make(chan struct{})
		stubborn := func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			<-release // ignores its context, as a badly written tool does
			return &mcpclient.CallToolResult{}, nil
		}
		srv := mcptest.NewServer(
			mcptest.WithTool(mcpclient.Tool{Name: "echo"}, stubborn),
			mcptest.WithLogger(slog.New(slog.NewTextHandler(lockedWriter{&logs, &logMu}, nil))))
		r := dialRaw(t, srv)
		r.send(call(`"slow-1"`, `{}`))
		synctest.Wait()

		closed := make(chan struct{})
		go func() {
			srv.Close()
			srv.Close()
			close(closed)
		}()
		time.Sleep(6 * time.Second)
		synctest.Wait()
		logMu.Lock()
		got := logs.String()
		logMu.Unlock()
		if !strings.Contains(got, `slow-1`) {
			t.Errorf("after 6s Close logged %q, want the id it waits for", got)
		}
		select {
		case <-closed:
			t.Fatal("Close returned while a request was running")
		default:
		}
		close(release)
		<-closed
		if _, err := srv.Transport().Connect(context.Background(), new(transporttest.Queue)); err == nil {
			t.Error("a closed server accepted a connection")
		}
	})
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func TestNewClientHelperConnects(t *testing.T) {
	srv := mcptest.NewTestServer(t)
	c := mcptest.NewClient(t, srv)
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestReceiptsOnlyForSessionsThatOptIn: a session whose initialize did not declare the receipts
// extension gets none (real clients reuse ids), and the server declares the extension for it to
// opt into.
func TestReceiptsOnlyForSessionsThatOptIn(t *testing.T) {
	var runs int
	var mu sync.Mutex
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echo(&runs, &mu)))
	r := dialRawDeclaring(t, srv, `{}`)
	r.send(call(`1`, `{"v":1}`))
	r.recv()
	r.send(call(`1`, `{"v":1}`))
	r.recv()
	r.send(call(`1`, `{"v":2}`))
	if got := r.recv(); strings.Contains(got, receipts.CodeIDReused) {
		t.Errorf("other content under an id of a session that did not opt in was refused: %s", got)
	}
	if runs != 3 || srv.Receipts() != 0 {
		t.Errorf("%d runs, %d receipts: want every request run and no receipt", runs, srv.Receipts())
	}
	opted := dialRaw(t, srv)
	opted.send(call(`1`, `{"v":1}`))
	opted.recv()
	opted.send(call(`1`, `{"v":1}`))
	opted.recv()
	if runs != 4 || srv.Receipts() != 1 {
		t.Errorf("%d runs, %d receipts after an opted-in session sent the same request twice: want 4 and 1", runs, srv.Receipts())
	}
}

// sameAnswer reports whether replay, JSON (a frame, or a result), is the answer first read back
// from a receipt: equal to it but for the replay marker in the result's _meta, which it must
// carry.
func sameAnswer(replay, first string) bool {
	const marker = receipts.ExtensionID + ".replay"
	var r, f map[string]any
	if json.Unmarshal([]byte(replay), &r) != nil || json.Unmarshal([]byte(first), &f) != nil {
		return false
	}
	result := r
	if inner, ok := r["result"].(map[string]any); ok {
		result = inner
	}
	meta, _ := result["_meta"].(map[string]any)
	if meta[marker] != true {
		return false
	}
	delete(meta, marker)
	if len(meta) == 0 {
		delete(result, "_meta")
	}
	a, _ := json.Marshal(r)
	b, _ := json.Marshal(f)
	return string(a) == string(b)
}
