package mcpclient_test

// Helpers the tests of this package share. The scripted servers they talk to are in
// internal/testpeer.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/receipts"
	"github.com/northstar-mcp/mcpclient/transport"
)

// noWait retries at once, for tests about what is retried rather than when.
var noWait = mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{
	NewBackOff: func() backoff.BackOff { return &backoff.ZeroBackOff{} },
})

// counter is a tool with a side effect to count: every run adds one.
type counter struct {
	mu   sync.Mutex
	runs int
}

func (k *counter) tool(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	k.mu.Lock()
	k.runs++
	n := k.runs
	k.mu.Unlock()
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{
		mcpclient.TextContent(fmt.Sprintf("run %d with %s", n, call.Arguments)),
	}}, nil
}

// waitFor polls cond; for state that has no event to wait on, such as a frame arriving at the
// server. It is bounded so a broken test fails rather than hangs.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func boolPtr(b bool) *bool { return &b }

var (
	unsafeTool   = mcpclient.Tool{Name: "reserve"}
	readOnlyTool = mcpclient.Tool{Name: "lookup", Annotations: &mcpclient.ToolAnnotations{ReadOnlyHint: boolPtr(true)}}
)

// callReq builds a tools/call of tool with args.
func callReq(t *testing.T, c *mcpclient.Client, tool string, args any, opts ...mcpclient.CallOption) *mcpclient.Request {
	t.Helper()
	req, err := c.NewRequest("tools/call", mcpclient.CallToolParams{Name: tool, Arguments: args}, opts...)
	if err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	return req
}

// newRequest builds a request of method with params.
func newRequest(t *testing.T, c *mcpclient.Client, method string, params any, opts ...mcpclient.CallOption) *mcpclient.Request {
	t.Helper()
	req, err := c.NewRequest(method, params, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// text returns the text of a tool call's response.
func text(t *testing.T, resp *mcpclient.Response) string {
	t.Helper()
	var res mcpclient.CallToolResult
	if err := resp.Decode(&res); err != nil {
		t.Fatalf("decoding result: %v", err)
	}
	return res.Text()
}

// asError returns the *mcpclient.Error err is, or wraps, failing the test if there is none.
func asError(t *testing.T, err error) *mcpclient.Error {
	t.Helper()
	var e *mcpclient.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *mcpclient.Error", err, err)
	}
	return e
}

// assertFramesIdentical checks that the server received want frames, all the same bytes.
func assertFramesIdentical(t *testing.T, frames [][]byte, want int) {
	t.Helper()
	if len(frames) != want {
		t.Fatalf("server received %d frames for the id, want %d", len(frames), want)
	}
	for i, f := range frames[1:] {
		if !bytes.Equal(f, frames[0]) {
			t.Fatalf("frame %d differs from the first:\n%s\n%s", i+1, frames[0], f)
		}
	}
}

// testCtx bounds a test's calls so that a broken test fails rather than hangs.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// recv returns the next value from ch, failing the test if none comes in time.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// connect connects to tr with the test's logger and no waits between attempts, and closes the
// client at the end of the test.
func connect(t *testing.T, tr transport.Transport, opts ...mcpclient.Option) *mcpclient.Client {
	t.Helper()
	opts = append([]mcpclient.Option{mcpclient.WithLogger(mcptest.TestLogger(t)), noWait}, opts...)
	c, err := mcpclient.Connect(testCtx(t), tr, opts...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// stillUsable checks a client after a server misbehaved: a call of the tool reserve gets the
// server's own answer, "ok", and a ping succeeds.
func stillUsable(t *testing.T, c *mcpclient.Client) {
	t.Helper()
	res, err := c.CallTool(testCtx(t), "reserve", nil)
	if err != nil {
		t.Fatalf("the client is not usable after the episode: %v", err)
	}
	if res.Text() != "ok" {
		t.Fatalf("follow-up call answered %q, want the server's own answer %q", res.Text(), "ok")
	}
	if err := c.Ping(testCtx(t)); err != nil {
		t.Fatalf("ping after the episode: %v", err)
	}
}

// featBackend is one way to reach an mcptest server: in memory, Streamable HTTP answering with
// JSON or with SSE, or legacy HTTP+SSE.
type featBackend struct {
	name  string
	start func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, mcptest.Dialer)
}

// legacyDialer reaches an HTTPServer by its HTTP+SSE endpoints.
type legacyDialer struct{ h *mcptest.HTTPServer }

func (d legacyDialer) Transport() transport.Transport { return d.h.SSETransport() }

var featBackends = []featBackend{
	{"memory", func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, mcptest.Dialer) {
		s := mcptest.NewTestServer(t, opts...)
		return s, s
	}},
	{"http-json", func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, mcptest.Dialer) {
		h := mcptest.NewTestHTTPServer(t, opts...)
		return h.Server, h
	}},
	{"http-sse", func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, mcptest.Dialer) {
		h := mcptest.NewTestHTTPServer(t, append(opts, mcptest.WithSSEResponses(10*time.Millisecond))...)
		return h.Server, h
	}},
	{"legacy-sse", func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, mcptest.Dialer) {
		h := mcptest.NewTestHTTPServer(t, opts...)
		return h.Server, legacyDialer{h}
	}},
	{"stateless-memory", func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, mcptest.Dialer) {
		s := mcptest.NewTestServer(t, append([]mcptest.Option{statelessRevisions}, opts...)...)
		return s, s
	}},
	{"stateless-http-json", func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, mcptest.Dialer) {
		h := mcptest.NewTestHTTPServer(t, append([]mcptest.Option{statelessRevisions}, opts...)...)
		return h.Server, h
	}},
	{"stateless-http-sse", func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, mcptest.Dialer) {
		h := mcptest.NewTestHTTPServer(t, append([]mcptest.Option{statelessRevisions, mcptest.WithSSEResponses(10 * time.Millisecond)}, opts...)...)
		return h.Server, h
	}},
}

// statelessRevisions makes an mcptest server speak the stateless revision, preferred, beside the
// newest session one.
var statelessRevisions = mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728, mcpclient.ProtocolVersion20251125)

// stateless reports whether a backend serves the stateless revision.
func (b featBackend) stateless() bool { return strings.HasPrefix(b.name, "stateless") }

// overHTTP reports whether a backend is reached over HTTP.
func (b featBackend) overHTTP() bool { return !strings.HasSuffix(b.name, "memory") }

// cancelsByClosingTheStream reports whether the client cancels a request by closing its
// stream, saying nothing more: the stateless revisions over HTTP. A request that opted into
// receipts runs on past that, for a resend of its id to collect.
func (b featBackend) cancelsByClosingTheStream() bool { return b.stateless() && b.overHTTP() }

// featEach runs f against every backend.
func featEach(t *testing.T, f func(t *testing.T, b featBackend)) {
	for _, b := range featBackends {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

// featRPCError returns the *RPCError in err's chain, failing the test if there is none or if
// err is not a server error.
func featRPCError(t *testing.T, err error) *mcpclient.RPCError {
	t.Helper()
	var rpc *mcpclient.RPCError
	if !errors.As(err, &rpc) {
		t.Fatalf("error %v carries no *RPCError", err)
	}
	if mcpclient.CodeOf(err) != mcpclient.CodeServerError {
		t.Errorf("error %v has code %v, want %v", err, mcpclient.CodeOf(err), mcpclient.CodeServerError)
	}
	return rpc
}

// featText is a tool result of one text block.
func featText(s string) *mcpclient.CallToolResult {
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(s)}}
}

// featAsk is a tool that sends the server request its arguments name to the calling client and
// answers with the client's result, or with the client's error as an isError result whose
// structuredContent is the error object.
func featAsk(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	var a struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(call.Arguments, &a); err != nil {
		return nil, err
	}
	var params any
	if len(a.Params) > 0 {
		params = a.Params
	}
	res, err := call.Request(ctx, a.Method, params)
	var rpc *mcpclient.RPCError
	switch {
	case errors.As(err, &rpc):
		body, _ := json.Marshal(rpc)
		return &mcpclient.CallToolResult{IsError: true, StructuredContent: body,
			Content: []mcpclient.Content{mcpclient.TextContent(rpc.Error())}}, nil
	case err != nil:
		return nil, err
	}
	return &mcpclient.CallToolResult{StructuredContent: res, Content: []mcpclient.Content{mcpclient.TextContent(string(res))}}, nil
}

var featAskTool = mcpclient.Tool{Name: "ask"}

// featAskClient has the server ask the client method with params through the ask tool. It
// returns the client's result, or its error object.
func featAskClient(t *testing.T, c *mcpclient.Client, method string, params any) (json.RawMessage, *mcpclient.RPCError) {
	t.Helper()
	res, err := c.CallTool(testCtx(t), "ask", map[string]any{"method": method, "params": params})
	if err != nil {
		t.Fatalf("ask %s: %v", method, err)
	}
	if res.IsError {
		var rpc mcpclient.RPCError
		if err := json.Unmarshal(res.StructuredContent, &rpc); err != nil {
			t.Fatalf("ask %s: %s", method, res.Text())
		}
		return nil, &rpc
	}
	return res.StructuredContent, nil
}

// firstToolCall is a script for testpeer.NewHTTP that answers the first tools/call with f and
// leaves everything else to the server's defaults: a server that misbehaves once.
func firstToolCall(f func(r *testpeer.Request)) testpeer.HTTPScript {
	first := testpeer.Once()
	return func(r *testpeer.Request) bool {
		if r.Method != "tools/call" || !first() {
			return false
		}
		f(r)
		return true
	}
}

// awaitHandshake waits until an in-memory server has read the notifications/initialized of its
// one client: the client sends it before Connect returns, but the server reads it on its own
// goroutine, so a count of frames taken right after Connect may miss it.
func awaitHandshake(t *testing.T, srv *mcptest.Server) {
	t.Helper()
	if err := srv.AwaitNotifications(testCtx(t), "notifications/initialized", 1); err != nil {
		t.Fatal(err)
	}
}

// replayOf reports whether resp is first read back from the server's receipt: marked as a replay,
// and the same result but for the marker in its _meta.
func replayOf(resp, first *mcpclient.Response) bool {
	const marker = receipts.ExtensionID + ".replay"
	var r, f map[string]any
	if !resp.Replayed || json.Unmarshal(resp.Result, &r) != nil || json.Unmarshal(first.Result, &f) != nil {
		return false
	}
	meta, _ := r["_meta"].(map[string]any)
	delete(meta, marker)
	if len(meta) == 0 {
		delete(r, "_meta")
	}
	a, _ := json.Marshal(r)
	b, _ := json.Marshal(f)
	return string(a) == string(b)
}

// sentCounter counts the requests a client sends to an mcptest server in memory, by method, and
// can hold or fail the server/discover requests among them.
type sentCounter struct {
	mu   sync.Mutex
	sent []string // methods, in the order sent
	// discover, when set, decides what becomes of a server/discover request: it may block.
	discover transport.SendHook
}

func (k *sentCounter) transport(srv *mcptest.Server) transport.Transport {
	return &transport.Memory{Accept: srv.Accept, BeforeSend: func(m *transport.Message) (bool, error) {
		k.mu.Lock()
		k.sent = append(k.sent, m.Method)
		hook := k.discover
		k.mu.Unlock()
		if m.Method == "server/discover" && hook != nil {
			return hook(m)
		}
		return true, nil
	}}
}

func (k *sentCounter) count(method string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, m := range k.sent {
		if m == method {
			n++
		}
	}
	return n
}

// since returns the methods sent after the first n.
func (k *sentCounter) since(n int) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.sent[n:])
}

func (k *sentCounter) total() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.sent)
}

func (k *sentCounter) setDiscover(h transport.SendHook) {
	k.mu.Lock()
	k.discover = h
	k.mu.Unlock()
}
