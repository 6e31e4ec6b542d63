package mcpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

func manyTools(n int, k *counter) []mcptest.Option {
	var opts []mcptest.Option
	for i := range n {
		opts = append(opts, mcptest.WithTool(mcpclient.Tool{Name: fmt.Sprintf("t%d", i)}, k.tool))
	}
	return opts
}

// framesAfterSync returns the server's frame count once every frame the client sent so far was
// counted: the server reads a connection in order, so the answer to a ping follows them all.
func framesAfterSync(t *testing.T, c *mcpclient.Client, srv *mcptest.Server) int {
	t.Helper()
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	return srv.FramesReceived()
}

func TestListToolsFetchesEveryPage(t *testing.T) {
	var k counter
	srv := mcptest.NewTestServer(t, append(manyTools(5, &k), mcptest.WithPageSize(2))...)
	c := mcptest.NewClient(t, srv)
	tools, err := c.CachedTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 5 {
		t.Fatalf("%d tools, want 5", len(tools))
	}
	for i, tool := range tools {
		if want := fmt.Sprintf("t%d", i); tool.Name != want {
			t.Errorf("tool %d is %q, want %q", i, tool.Name, want)
		}
	}
}

func TestToolsIteratorStopsFetchingWhenTheLoopBreaks(t *testing.T) {
	var k counter
	srv := mcptest.NewTestServer(t, append(manyTools(6, &k), mcptest.WithPageSize(2))...)
	c := mcptest.NewClient(t, srv)
	before := framesAfterSync(t, c, srv)
	n := 0
	for tool, err := range c.Tools(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if tool.Name == "t2" {
			break
		}
	}
	if n != 3 {
		t.Errorf("iterated %d tools, want 3", n)
	}
	if pages := srv.FramesReceived() - before; pages != 2 {
		t.Errorf("fetched %d pages, want 2", pages)
	}
}

func TestToolsIteratorStopsOnRepeatedCursor(t *testing.T) {
	srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
		if m.Method != "tools/list" {
			return false
		}
		p.Send(testpeer.Result(m.ID, `{"tools":[{"name":"a","inputSchema":{"type":"object"}}],"nextCursor":"same"}`))
		return true
	})
	c, err := mcpclient.Connect(context.Background(), srv.Transport())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.CachedTools(context.Background())
	if mcpclient.CodeOf(err) != mcpclient.CodeProtocol {
		t.Fatalf("error %v, want a protocol error for a cursor loop", err)
	}
}

func TestCompleteListingReplacesToolHints(t *testing.T) {
	var k counter
	srv := mcptest.NewTestServer(t,
		mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithTool(mcpclient.Tool{Name: "lookup", Annotations: &mcpclient.ToolAnnotations{IdempotentHint: boolPtr(true)}}, k.tool))
	c := mcptest.NewClient(t, srv, noWait)
	ctx := context.Background()
	if _, err := c.CachedTools(ctx); err != nil {
		t.Fatal(err)
	}
	// The server redefines the tool as unsafe; until the client lists again it trusts the old
	// hint, afterwards the new one.
	srv.AddTool(mcpclient.Tool{Name: "lookup"}, k.tool)
	for _, err := range c.Tools(ctx) { // Tools always asks; ListTools may answer from its cache
		if err != nil {
			t.Fatal(err)
		}
	}
	srv.Inject(mcptest.Fault{Kind: mcptest.DropBeforeExecution, Tool: "lookup"})
	_, err := c.CallTool(ctx, "lookup", nil)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("error %v: the relisted tool is no longer idempotent, want ErrOutcomeUnknown", err)
	}
}

func TestConcurrentCalls(t *testing.T) {
	var k counter
	srv := mcptest.NewTestServer(t, mcptest.WithTool(unsafeTool, k.tool))
	c := mcptest.NewClient(t, srv)
	const n = 64
	var wg sync.WaitGroup
	results := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.CallTool(context.Background(), "reserve", map[string]int{"i": i})
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = res.Text()
		}()
	}
	wg.Wait()
	for i, r := range results {
		if want := fmt.Sprintf(`{"i":%d}`, i); len(r) < len(want) || r[len(r)-len(want):] != want {
			t.Errorf("call %d got %q: answers were misrouted", i, r)
		}
	}
	if k.runs != n {
		t.Errorf("runs %d, want %d", k.runs, n)
	}
}

func TestCallToolValidatesArguments(t *testing.T) {
	srv := mcptest.NewTestServer(t)
	c := mcptest.NewClient(t, srv)
	frames := framesAfterSync(t, c, srv)
	for _, bad := range []any{[]int{1}, "text", make(chan int)} {
		if _, err := c.CallTool(context.Background(), "x", bad); mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument {
			t.Errorf("arguments %T: %v, want CodeInvalidArgument", bad, err)
		}
	}
	if srv.FramesReceived() != frames {
		t.Error("invalid arguments were sent")
	}
	if _, err := c.CallTool(context.Background(), "missing", nil); mcpclient.CodeOf(err) != mcpclient.CodeServerError {
		t.Errorf("unknown tool: %v, want the server's error", err)
	}
}

// After notifications/tools/list_changed the hints of the last listing may be stale: a tool that
// lost its idempotentHint must not be re-issued on their word.
func TestListChangedForgetsToolHints(t *testing.T) {
	var k counter
	srv := mcptest.NewTestServer(t,
		mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithTool(mcpclient.Tool{Name: "lookup", Annotations: &mcpclient.ToolAnnotations{IdempotentHint: boolPtr(true)}}, k.tool))
	changed := make(chan struct{}, 1)
	c := mcptest.NewClient(t, srv, noWait, mcpclient.WithNotificationHandler("notifications/tools/list_changed",
		func(context.Context, string, json.RawMessage) { changed <- struct{}{} }))
	ctx := context.Background()
	if _, err := c.CachedTools(ctx); err != nil {
		t.Fatal(err)
	}
	srv.AddTool(mcpclient.Tool{Name: "lookup"}, k.tool) // no longer idempotent
	srv.Notify("notifications/tools/list_changed", nil)
	<-changed // the client's own handling runs before the caller's handler
	srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "lookup"})
	_, err := c.CallTool(ctx, "lookup", nil)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("error %v: after list_changed the tool's old hint was trusted; want ErrOutcomeUnknown", err)
	}
	if k.runs != 1 {
		t.Errorf("the tool ran %d times", k.runs)
	}
}

func TestListToolsCacheEmptiedByListChanged(t *testing.T) {
	var k counter
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "a"}, k.tool))
	changed := make(chan struct{}, 1)
	c := mcptest.NewClient(t, srv, mcpclient.WithNotificationHandler("notifications/tools/list_changed",
		func(context.Context, string, json.RawMessage) { changed <- struct{}{} }))
	ctx := context.Background()
	first, err := c.CachedTools(ctx)
	if err != nil || len(first) != 1 {
		t.Fatalf("%v %v", first, err)
	}
	frames := framesAfterSync(t, c, srv)
	srv.AddTool(mcpclient.Tool{Name: "b"}, k.tool)
	cached, _ := c.CachedTools(ctx)
	if len(cached) != 1 || srv.FramesReceived() != frames {
		t.Fatalf("ListTools asked the server again (%d tools) without a list_changed", len(cached))
	}
	srv.Notify("notifications/tools/list_changed", nil)
	<-changed // the client's own handling runs before the caller's handler
	fresh, err := c.CachedTools(ctx)
	if err != nil || len(fresh) != 2 {
		t.Fatalf("after list_changed: %d tools, %v", len(fresh), err)
	}
}

func TestToolsIteratorRangedTwiceCachesOneListing(t *testing.T) {
	var k counter
	srv := mcptest.NewTestServer(t, append(manyTools(3, &k), mcptest.WithPageSize(2))...)
	c := mcptest.NewClient(t, srv)
	tools := c.Tools(context.Background())
	for range 2 {
		for _, err := range tools {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if cached, err := c.CachedTools(context.Background()); err != nil || len(cached) != 3 {
		t.Errorf("cached %d tools, %v; want the 3 of one listing", len(cached), err)
	}
}

func TestListingOverlappingListChangedIsNotCached(t *testing.T) {
	handled := make(chan struct{})
	var mu sync.Mutex
	lists := 0
	srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
		if m.Method != "tools/list" {
			return false
		}
		mu.Lock()
		lists++
		first := lists == 1
		mu.Unlock()
		if first {
			// The tools change while the answer is on its way: the answer may be stale.
			p.Send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
			<-handled
		}
		p.Send(testpeer.Result(m.ID, `{"tools":[{"name":"a","inputSchema":{"type":"object"}}]}`))
		return true
	})
	c, err := mcpclient.Connect(context.Background(), srv.Transport(), mcpclient.WithNotificationHandler("notifications/tools/list_changed",
		func(context.Context, string, json.RawMessage) { handled <- struct{}{} }))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 2 {
		if _, err := c.CachedTools(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if lists != 2 {
		t.Errorf("%d listings: a listing answered after list_changed must not be served from the cache", lists)
	}
}

func TestStructuredContentIsCheckedAgainstOutputSchema(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"sum":{"type":"number"}},"required":["sum"]}`)
	var mu sync.Mutex
	reply := `{"sum":3}`
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "add", OutputSchema: schema},
		func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			mu.Lock()
			defer mu.Unlock()
			return &mcpclient.CallToolResult{StructuredContent: json.RawMessage(reply)}, nil
		}))
	changed := make(chan struct{}, 1)
	c := mcptest.NewClient(t, srv, mcpclient.WithNotificationHandler("notifications/tools/list_changed",
		func(context.Context, string, json.RawMessage) { changed <- struct{}{} }))
	ctx := context.Background()
	// call returns whether the result was checked, failing the test unless the result came back.
	call := func(t *testing.T, structured string) (checked bool) {
		t.Helper()
		mu.Lock()
		reply = structured
		mu.Unlock()
		res, err := c.CallTool(ctx, "add", nil)
		if err == nil {
			return false
		}
		var e *mcpclient.Error
		if !errors.Is(err, mcpclient.ErrStructuredContent) || mcpclient.CodeOf(err) != mcpclient.CodeStructuredContent || !errors.As(err, &e) {
			t.Fatalf("structuredContent %q: error %v, want ErrStructuredContent", structured, err)
		}
		if res == nil || string(res.StructuredContent) != structured {
			t.Fatalf("structuredContent %q: result %+v; the tool ran, its result must come back with the error", structured, res)
		}
		if entry, ok := c.Ledger().Lookup(e.Request.ID()); !ok || entry.State != mcpclient.StateAnswered || e.Request.ID() != e.Request.ID() {
			t.Errorf("the error names %s, ledger %+v: want the answered call", e.Request.ID().JSON(), entry)
		}
		return true
	}
	t.Run("unlisted", func(t *testing.T) {
		// The client never listed the tools: it knows no schema and checks nothing.
		if call(t, `{"sum":"three"}`) {
			t.Error("a tool the client has not listed was checked")
		}
	})
	if _, err := c.CachedTools(ctx); err != nil {
		t.Fatal(err)
	}
	t.Run("listed", func(t *testing.T) {
		for structured, bad := range map[string]bool{`{"sum":3}`: false, `{"sum":"three"}`: true, ``: true} {
			if call(t, structured) != bad {
				t.Errorf("structuredContent %q: checked %v, want %v", structured, !bad, bad)
			}
		}
	})
	t.Run("list changed", func(t *testing.T) {
		srv.Notify("notifications/tools/list_changed", nil)
		<-changed // the client's own handling runs before the caller's handler
		if call(t, `{"sum":"three"}`) {
			t.Error("checked against the schema of a listing the server said has changed")
		}
		if _, err := c.CachedTools(ctx); err != nil {
			t.Fatal(err)
		}
		if !call(t, `{"sum":"three"}`) {
			t.Error("not checked after listing the tools again")
		}
	})
	t.Run("listed by a page", func(t *testing.T) {
		srv.Notify("notifications/tools/list_changed", nil)
		<-changed
		if _, err := c.ListToolsPage(ctx, ""); err != nil {
			t.Fatal(err)
		}
		if !call(t, `{"sum":"three"}`) {
			t.Error("a tool listed by ListToolsPage was not checked")
		}
	})
}

func TestOutputSchemaReferencesAreNotFetched(t *testing.T) {
	t.Parallel()
	fetched := make(chan string, 1)
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched <- r.URL.Path
		w.Write([]byte(`{"type":"string"}`))
	}))
	defer remote.Close()
	schema := json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"` + remote.URL + `/x.json"}}}`)
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "t", OutputSchema: schema},
		func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			return &mcpclient.CallToolResult{StructuredContent: json.RawMessage(`{"x":1}`)}, nil
		}))
	c := mcptest.NewClient(t, srv)
	if _, err := c.CachedTools(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CallTool(context.Background(), "t", nil); err != nil {
		t.Fatalf("a schema the client cannot check without fetching is not checked: %v", err)
	}
	select {
	case p := <-fetched:
		t.Fatalf("the client fetched %s", p)
	default:
	}
}

// CallTool writes its params itself; they must be the bytes encoding/json writes for the
// CallToolParams that NewRequest would be given.
func TestCallToolParamsAreWhatEncodingJSONWrites(t *testing.T) {
	for _, tc := range []struct {
		name string
		args json.RawMessage
	}{{"plain", nil}, {"plain", json.RawMessage(`{"x":1,"y":"\u003c\u003e"}`)}, {"a<b&\"c\u2028é", json.RawMessage(`{"a":[1,2]}`)}, {"", json.RawMessage(`{}`)}} {
		params := mcpclient.CallToolParams{Name: tc.name}
		if tc.args != nil {
			params.Arguments = tc.args
		}
		want, err := json.Marshal(params)
		if err != nil {
			t.Fatal(err)
		}
		if got := mcpclient.EncodeToolCallForTest(tc.name, tc.args); !bytes.Equal(got, want) {
			t.Errorf("CallTool(%q) params %s, encoding/json writes %s", tc.name, got, want)
		}
	}
}

func TestCallToolWithoutArgumentsOmitsThem(t *testing.T) {
	var k counter
	srv := mcptest.NewTestServer(t, mcptest.WithTool(unsafeTool, k.tool))
	c := mcptest.NewClient(t, srv)
	req := callReq(t, c, "reserve", nil)
	if strings.Contains(string(req.Bytes()), "arguments") {
		t.Fatalf("frame %s", req.Bytes())
	}
	if _, err := c.CallTool(context.Background(), "reserve", nil); err != nil {
		t.Fatal(err)
	}
}
