package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/tasks"
	"github.com/northstar-mcp/mcpclient/transport"
)

// extServer is an mcptest server of the stateless revision alone, serving the tasks extension
// for its tools of task support "optional" or "required".
func extServer(t *testing.T, opts ...mcptest.Option) *mcptest.HTTPServer {
	t.Helper()
	return mcptest.NewTestHTTPServer(t, append([]mcptest.Option{
		mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728),
		mcptest.WithTaskPollInterval(2 * time.Millisecond),
	}, opts...)...)
}

func taskTool(name, support string) mcpclient.Tool {
	return mcpclient.Tool{Name: name, Execution: &mcpclient.ToolExecution{TaskSupport: support}}
}

// declaresExtension reports whether req's own client capabilities name the tasks extension.
func declaresExtension(req *mcpclient.Request) bool {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	json.Unmarshal(req.Params(), &p)
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	json.Unmarshal(p.Meta["io.modelcontextprotocol/clientCapabilities"], &caps)
	_, ok := caps.Extensions[tasks.Extension]
	return ok
}

// TestExtensionLifecycle: on 2026-07-28 CallTool declares the extension for its call alone and
// returns the task the server made, with the extension's ttlMs and pollIntervalMs read; Get
// shows it working, Await returns the result the last poll carries, and the client's other calls
// are answered plainly.
func TestExtensionLifecycle(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	open := make(chan struct{})
	srv := extServer(t, mcptest.WithTaskTTL(time.Minute),
		mcptest.WithTool(taskTool("export", tasks.SupportOptional), func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			select {
			case <-open:
				return textResult("exported"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}))
	c := mcptest.NewClient(t, srv)

	var created mcpclient.Response
	task, err := tasks.CallTool(ctx, c, "export", map[string]any{"format": "csv"}, time.Hour, mcpclient.WithResponse(&created))
	if err != nil {
		t.Fatal(err)
	}
	if task.TaskID == "" || task.Status != tasks.Working || task.PollIntervalDuration() != 2*time.Millisecond {
		t.Errorf("created %+v, want a working task polled every 2ms", task)
	}
	if d, limited := task.TTLDuration(); !limited || d != time.Minute {
		t.Errorf("ttl %v (limited %v), want the server's minute", d, limited)
	}
	if !declaresExtension(created.Request) || strings.Contains(string(created.Request.Params()), `"task"`) {
		t.Errorf("the call sent %s, want the extension declared and no task param", created.Request.Params())
	}
	got, err := tasks.Get(ctx, c, task.TaskID)
	if err != nil || got.Status != tasks.Working || got.Result != nil {
		t.Fatalf("Get: %+v %v, want working", got, err)
	}

	close(open)
	res, err := tasks.Await(ctx, c, task.TaskID)
	if err != nil || res.Text() != "exported" {
		t.Fatalf("Await: %v %v", res, err)
	}
	done, err := tasks.Get(ctx, c, task.TaskID)
	if err != nil || done.Status != tasks.Completed {
		t.Fatalf("Get after: %+v %v", done, err)
	}
	if r, err := done.ToolResult(); err != nil || r.Text() != "exported" {
		t.Errorf("ToolResult of the completed task: %v %v", r, err)
	}
	if res, err := c.CallTool(ctx, "export", nil); err != nil || res.Text() != "exported" {
		t.Fatalf("the client's own CallTool: %v %v", res, err)
	}
	if srv.Tasks() != 1 {
		t.Errorf("%d tasks, want 1: the client's own CallTool declared nothing and made none", srv.Tasks())
	}
}

// TestExtensionAnswerWithoutATask: the server decides; a call it answers at once comes back as a
// completed Task without an id, its result inside.
func TestExtensionAnswerWithoutATask(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := extServer(t,
		mcptest.WithTool(taskTool("long", tasks.SupportOptional), func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			return textResult("long"), nil
		}),
		mcptest.WithTool(mcpclient.Tool{Name: "quick"}, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			return textResult("quick"), nil
		}))
	c := mcptest.NewClient(t, srv)
	task, err := tasks.CallTool(ctx, c, "quick", nil, 0)
	if err != nil || task.TaskID != "" || task.Status != tasks.Completed {
		t.Fatalf("CallTool of a tool the server runs at once: %+v %v", task, err)
	}
	if res, err := task.ToolResult(); err != nil || res.Text() != "quick" {
		t.Errorf("its result: %v %v", res, err)
	}
	if _, err := tasks.Await(ctx, c, task.TaskID); mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument {
		t.Errorf("Await without a task id: %v, want CodeInvalidArgument", err)
	}
	for _, call := range []func() error{
		func() error { _, err := tasks.Result(ctx, c, "x"); return err },
		func() error { _, err := tasks.ListPage(ctx, c, ""); return err },
	} {
		if err := call(); !errors.Is(err, mcpclient.ErrMethodRemoved) {
			t.Errorf("a method the extension does not have: %v, want ErrMethodRemoved", err)
		}
	}
}

// TestExtensionFailedAndCancelled: a task failed by a JSON-RPC error ends Await with ErrFailed and
// that error; Cancel is acknowledged and the task, once cancelled, ends Await with ErrCancelled.
func TestExtensionFailedAndCancelled(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := extServer(t,
		mcptest.WithTool(taskTool("fails", tasks.SupportRequired), func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			return nil, mcptest.ProtocolError(-32603, "rate limited", nil)
		}),
		mcptest.WithTool(taskTool("forever", tasks.SupportRequired), func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}))
	c := mcptest.NewClient(t, srv)

	task, err := tasks.CallTool(ctx, c, "fails", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tasks.Await(ctx, c, task.TaskID)
	var te *tasks.Error
	if !errors.Is(err, tasks.ErrFailed) || !errors.As(err, &te) || rpcError(t, err).Code != -32603 || te.Task.TaskID != task.TaskID {
		t.Fatalf("Await of a failed task: %v", err)
	}

	task, err = tasks.CallTool(ctx, c, "forever", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, err := tasks.Cancel(ctx, c, task.TaskID)
	if err != nil || st.TaskID != task.TaskID {
		t.Fatalf("Cancel: %+v %v", st, err)
	}
	if _, err := tasks.Await(ctx, c, task.TaskID); !errors.Is(err, tasks.ErrCancelled) {
		t.Fatalf("Await of a cancelled task: %v, want ErrCancelled", err)
	}
	if _, err := tasks.Cancel(ctx, c, task.TaskID); err != nil {
		t.Errorf("Cancel of a task already cancelled: %v, want the acknowledgement", err)
	}
}

// TestExtensionInputFromTheClientsHandlers: a task that asks for input while Await polls gets the
// client's handler's answer, once, and goes on to its result.
func TestExtensionInputFromTheClientsHandlers(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := extServer(t, mcptest.WithTool(taskTool("sign", tasks.SupportRequired), func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		raw, err := call.RequestInput(ctx, "elicitation/create", map[string]any{
			"mode": "form", "message": "Sign as?", "requestedSchema": map[string]any{"type": "object"},
		})
		if err != nil {
			return nil, err
		}
		var r mcpclient.ElicitResult
		json.Unmarshal(raw, &r)
		return textResult("signed by " + r.Content["name"].(string)), nil
	}))
	var asked atomic.Int32
	c := mcptest.NewClient(t, srv, mcpclient.WithElicitationHandler(func(context.Context, *mcpclient.ElicitParams) (*mcpclient.ElicitResult, error) {
		asked.Add(1)
		return &mcpclient.ElicitResult{Action: mcpclient.ElicitAccept, Content: map[string]any{"name": "Ada"}}, nil
	}))
	task, err := tasks.CallTool(ctx, c, "sign", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tasks.Await(ctx, c, task.TaskID, tasks.PollInterval(time.Millisecond))
	if err != nil || res.Text() != "signed by Ada" {
		t.Fatalf("Await: %v %v", res, err)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the handler was asked %d times, want once", n)
	}
}

// TestExtensionInputTheClientCannotGive: a task waiting for a capability the client does not
// declare ends Await with ErrInputRequired instead of polling forever; Update answers it, on
// the wire as the extension has it, and the task goes on.
func TestExtensionInputTheClientCannotGive(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	answered := false
	var updates []testpeer.Received
	peer := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		switch r.Method {
		case "server/discover":
			r.Reply(http.StatusOK, `"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"tasks","version":"1"}}}`)
		case "tools/call":
			r.Reply(http.StatusOK, `"result":{"resultType":"task","taskId":"t-1","status":"working","createdAt":"2026-12-02T00:00:00Z","lastUpdatedAt":"2026-12-02T00:00:00Z","ttlMs":null,"pollIntervalMs":1}`)
		case "tasks/get":
			if answered {
				r.Reply(http.StatusOK, `"result":{"resultType":"complete","taskId":"t-1","status":"completed","createdAt":"2026-12-02T00:00:00Z","lastUpdatedAt":"2026-12-02T00:00:01Z","ttlMs":null,"result":{"content":[{"type":"text","text":"summarized"}]}}`)
			} else {
				r.Reply(http.StatusOK, `"result":{"resultType":"complete","taskId":"t-1","status":"input_required","createdAt":"2026-12-02T00:00:00Z","lastUpdatedAt":"2026-12-02T00:00:01Z","ttlMs":null,"pollIntervalMs":1,`+
					`"inputRequests":{"draft":{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":10}}}}`)
			}
		case "tasks/update":
			updates = append(updates, r.Received)
			answered = true
			r.Reply(http.StatusOK, `"result":{"resultType":"complete"}`)
		default:
			return false
		}
		return true
	}, testpeer.Stateless())
	ctx := testCtx(t)
	c, err := mcpclient.Connect(ctx, &transport.HTTP{URL: peer.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	task, err := tasks.CallTool(ctx, c, "summarize", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tasks.Await(ctx, c, task.TaskID)
	var te *tasks.Error
	if !errors.Is(err, tasks.ErrInputRequired) || !errors.As(err, &te) || te.Task.InputRequests["draft"] == nil {
		t.Fatalf("Await of a task waiting for sampling the client does not declare: %v, want ErrInputRequired with the request", err)
	}
	if err := tasks.Update(ctx, c, task.TaskID, map[string]any{"draft": mcpclient.CreateMessageResult{Role: "assistant", Model: "m", Content: mcpclient.SamplingContent{mcpclient.TextContent("draft")}}}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(updates) != 1 || updates[0].Header.Get("Mcp-Name") != "t-1" || !strings.Contains(string(updates[0].Params), `"inputResponses":{"draft":{`) {
		t.Errorf("tasks/update sent %+v, want Mcp-Name t-1 and the response by its key", updates)
	}
	mu.Unlock()
	if res, err := tasks.Await(ctx, c, task.TaskID); err != nil || res.Text() != "summarized" {
		t.Fatalf("Await after the update: %v %v", res, err)
	}
}

// TestExtensionLostCreateAnswer: the answer that carried the task handle is lost after the server
// made the task; the resend under the same id reads it back from the server's receipt: one task,
// one run, and the caller holds its handle.
func TestExtensionLostCreateAnswer(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := extServer(t, mcptest.WithTool(taskTool("charge", tasks.SupportRequired), func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return textResult("charged"), nil
	}))
	srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "charge"})
	c := mcptest.NewClient(t, srv, noWait)
	task, err := tasks.CallTool(ctx, c, "charge", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := tasks.Await(ctx, c, task.TaskID); err != nil || res.Text() != "charged" {
		t.Fatalf("Await: %v %v", res, err)
	}
	if srv.Tasks() != 1 || srv.Executions("charge") != 1 {
		t.Errorf("%d tasks, %d runs: want one of each", srv.Tasks(), srv.Executions("charge"))
	}
}

// TestExtensionNotDeclared: a server of 2026-07-28 that does not declare the extension is not
// sent a call as a task.
func TestExtensionNotDeclared(t *testing.T) {
	t.Parallel()
	srv := extServer(t, mcptest.WithTool(mcpclient.Tool{Name: "plain"}, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return textResult("plain"), nil
	}))
	c := mcptest.NewClient(t, srv)
	if _, err := tasks.CallTool(testCtx(t), c, "plain", nil, 0); !errors.Is(err, tasks.ErrNotSupported) {
		t.Fatalf("CallTool without the extension declared: %v, want ErrNotSupported", err)
	}
	if n := srv.Executions("plain"); n != 0 {
		t.Errorf("the tool ran %d times", n)
	}
}

// TestExtensionStatusNotifications: a subscription naming a task's id is acknowledged with it, and
// the task's changes reach WithStatusHandler as full tasks, the last with the result inside.
func TestExtensionStatusNotifications(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	open := make(chan struct{})
	srv := extServer(t, mcptest.WithTool(taskTool("render", tasks.SupportRequired), func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		select {
		case <-open:
			return textResult("rendered"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}))
	seen := make(chan *tasks.Task, 16)
	c := mcptest.NewClient(t, srv, tasks.WithStatusHandler(func(_ context.Context, t *tasks.Task) { seen <- t }))
	task, err := tasks.CallTool(ctx, c, "render", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.Listen(ctx, mcpclient.SubscriptionFilter{TaskIDs: []string{task.TaskID}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if got := sub.Acknowledged.TaskIDs; len(got) != 1 || got[0] != task.TaskID {
		t.Errorf("acknowledged task ids %v, want [%s]", got, task.TaskID)
	}
	close(open)
	for {
		st := recv(t, seen, "a status notification")
		if st.TaskID != task.TaskID {
			t.Fatalf("notification of task %s, want %s", st.TaskID, task.TaskID)
		}
		if !st.Terminal() {
			continue
		}
		if res, err := st.ToolResult(); err != nil || res.Text() != "rendered" {
			t.Fatalf("the last notification's result: %v %v", res, err)
		}
		return
	}
}
