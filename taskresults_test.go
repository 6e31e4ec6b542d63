package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

const tasksExtensionID = "io.modelcontextprotocol/tasks"

// taskServer is an mcptest server of the stateless revision with a tool that may run as a task
// (support "optional" or "required"), answering with fn's result.
func taskServer(t *testing.T, name, support string, fn mcptest.ToolFunc, opts ...mcptest.Option) *mcptest.HTTPServer {
	t.Helper()
	opts = append([]mcptest.Option{
		mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728),
		mcptest.WithTaskPollInterval(5 * time.Millisecond),
		mcptest.WithTool(mcpclient.Tool{Name: name, Execution: &mcpclient.ToolExecution{TaskSupport: support}}, fn),
	}, opts...)
	return mcptest.NewTestHTTPServer(t, opts...)
}

func answering(text string) mcptest.ToolFunc {
	return func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(text)}}, nil
	}
}

// TestCallToolFollowsATask: a call that declares the tasks extension (for the client or for the
// call) may be answered with a task; CallTool follows it to its result, and the tool runs once.
// A call that declares nothing is answered plainly, or refused for a tool that needs a task.
func TestCallToolFollowsATask(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := taskServer(t, "render", "optional", answering("rendered"))

	plain := mcptest.NewClient(t, srv)
	if res, err := plain.CallTool(ctx, "render", nil); err != nil || res.Text() != "rendered" {
		t.Fatalf("plain call: %v %v", res, err)
	}
	if n := srv.Tasks(); n != 0 {
		t.Fatalf("a call that did not declare the extension made %d tasks", n)
	}

	var resp mcpclient.Response
	res, err := plain.CallTool(ctx, "render", nil, mcpclient.WithExtension(tasksExtensionID, nil), mcpclient.WithResponse(&resp))
	if err != nil || res.Text() != "rendered" {
		t.Fatalf("call declaring the extension: %v %v", res, err)
	}
	if n := srv.Tasks(); n != 1 {
		t.Fatalf("%d tasks, want the call to have made one", n)
	}
	if !strings.Contains(string(resp.Result), `"rendered"`) || resp.Request.Method() != "tools/call" {
		t.Errorf("WithResponse got %s of %s, want the tool's result for the call", resp.Result, resp.Request.Method())
	}
	var params struct {
		Meta map[string]struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		} `json:"_meta"`
	}
	json.Unmarshal(resp.Request.Params(), &params)
	caps := params.Meta["io.modelcontextprotocol/clientCapabilities"].Extensions
	if _, ok := caps[tasksExtensionID]; !ok || caps["io.github.northstar-mcp/request-receipts"] == nil {
		t.Errorf("the call's client capabilities declare %v, want the tasks extension beside the client's own", caps)
	}

	// The declaration was the call's alone.
	if _, err := plain.CallTool(ctx, "render", nil); err != nil || srv.Tasks() != 1 {
		t.Fatalf("the next plain call: %v, %d tasks", err, srv.Tasks())
	}

	declaring := mcptest.NewClient(t, srv, mcpclient.WithExtension(tasksExtensionID, nil))
	if res, err := declaring.CallTool(ctx, "render", nil); err != nil || res.Text() != "rendered" || srv.Tasks() != 2 {
		t.Fatalf("client declaring the extension: %v %v, %d tasks", res, err, srv.Tasks())
	}
	if n := srv.Executions("render"); n != 4 {
		t.Errorf("the tool ran %d times, want 4 (one per call)", n)
	}

	required := taskServer(t, "batch", "required", answering("done"))
	var rpc *mcpclient.RPCError
	if _, err := mcptest.NewClient(t, required).CallTool(ctx, "batch", nil); !errors.As(err, &rpc) || rpc.Code != -32021 {
		t.Errorf("a tool that needs a task, called without the extension: %v, want -32021", err)
	}
}

// TestCallToolTaskOutcomes: a task that fails ends the call with its JSON-RPC error, one that is
// cancelled with a server error naming it, an isError result is the tool's answer; and a task
// whose result does not match the tool's outputSchema is caught as a plain call's would be.
func TestCallToolTaskOutcomes(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := taskServer(t, "fails", "required", func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return nil, mcptest.ProtocolError(-32603, "disk full", nil)
	})
	c := mcptest.NewClient(t, srv, mcpclient.WithExtension(tasksExtensionID, nil))
	_, err := c.CallTool(ctx, "fails", nil)
	var rpc *mcpclient.RPCError
	if mcpclient.CodeOf(err) != mcpclient.CodeServerError || !errors.As(err, &rpc) || rpc.Code != -32603 || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("failed task: %v, want CodeServerError with the task's -32603", err)
	}

	srv.AddTool(mcpclient.Tool{Name: "soft", Execution: &mcpclient.ToolExecution{TaskSupport: "required"}},
		func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			return &mcpclient.CallToolResult{IsError: true, Content: []mcpclient.Content{mcpclient.TextContent("no such city")}}, nil
		})
	if res, err := c.CallTool(ctx, "soft", nil); err != nil || !res.IsError || res.Text() != "no such city" {
		t.Fatalf("isError result: %v %v, want the tool's answer", res, err)
	}

	started := make(chan string, 1)
	srv.AddTool(mcpclient.Tool{Name: "slow", Execution: &mcpclient.ToolExecution{TaskSupport: "required"}},
		func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			started <- call.TaskID()
			<-ctx.Done() // until the task is cancelled
			return nil, ctx.Err()
		})
	done := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctx, "slow", nil)
		done <- err
	}()
	id := <-started
	cancelReq, err := c.NewRequest("tasks/cancel", map[string]string{"taskId": id}, mcpclient.WithExtension(tasksExtensionID, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := cancelReq.Header().Get("Mcp-Name"); got != id {
		t.Errorf("tasks/cancel carries Mcp-Name %q, want the task id %q", got, id)
	}
	if _, err := c.Do(ctx, cancelReq); err != nil {
		t.Fatalf("tasks/cancel: %v", err)
	}
	select {
	case err := <-done:
		if mcpclient.CodeOf(err) != mcpclient.CodeServerError || !strings.Contains(err.Error(), "task "+id+" was cancelled") {
			t.Fatalf("cancelled task: %v, want CodeServerError naming the task", err)
		}
	case <-ctx.Done():
		t.Fatal("CallTool did not see the task cancelled")
	}

	typed := mcpclient.Tool{Name: "typed", Execution: &mcpclient.ToolExecution{TaskSupport: "required"},
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)}
	srv.AddTool(typed, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return &mcpclient.CallToolResult{StructuredContent: json.RawMessage(`{"n":"three"}`)}, nil
	})
	if _, err := mcpclient.Collect(c.Tools(ctx)); err != nil {
		t.Fatal(err)
	}
	if res, err := c.CallTool(ctx, "typed", nil); res == nil || !errors.Is(err, mcpclient.ErrStructuredContent) {
		t.Errorf("task result off its outputSchema: %v %v, want the result with ErrStructuredContent", res, err)
	}
}

// TestCallToolAnswersATaskInputOnce: a task that asks for input gets the client's handler's
// answer through tasks/update, once however many polls see the request before the server takes
// the answer in; a handler that fails ends the call and leaves the request to be asked again.
func TestCallToolAnswersATaskInputOnce(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := taskServer(t, "greet", "required", func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		raw, err := call.RequestInput(ctx, "elicitation/create", map[string]any{
			"mode": "form", "message": "Your name?",
			"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}},
		})
		if err != nil {
			return nil, err
		}
		var answer struct {
			Content struct {
				Name string `json:"name"`
			} `json:"content"`
		}
		json.Unmarshal(raw, &answer)
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("hello " + answer.Content.Name)}}, nil
	}, mcptest.WithTaskPollInterval(time.Millisecond))
	var asked atomic.Int32
	c := mcptest.NewClient(t, srv, mcpclient.WithExtension(tasksExtensionID, nil),
		mcpclient.WithElicitationHandler(func(ctx context.Context, p *mcpclient.ElicitParams) (*mcpclient.ElicitResult, error) {
			asked.Add(1)
			time.Sleep(20 * time.Millisecond) // several polls of other callers fall in here
			return &mcpclient.ElicitResult{Action: mcpclient.ElicitAccept, Content: map[string]any{"name": "Ada"}}, nil
		}))
	res, err := c.CallTool(ctx, "greet", nil)
	if err != nil || res.Text() != "hello Ada" {
		t.Fatalf("call: %v %v", res, err)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the handler was asked %d times, want once", n)
	}
}

// TestTaskInputAnsweredOnceByConcurrentPolls: polls of one task at once, by callers of their own,
// put each request for input to the handlers once.
func TestTaskInputAnsweredOnceByConcurrentPolls(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := taskServer(t, "confirm", "required", func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		if _, err := call.RequestInput(ctx, "elicitation/create", map[string]any{
			"mode": "form", "message": "Sure?", "requestedSchema": map[string]any{"type": "object"},
		}); err != nil {
			return nil, err
		}
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("confirmed")}}, nil
	})
	var asked atomic.Int32
	entered, polled := make(chan struct{}), make(chan struct{})
	c := mcptest.NewClient(t, srv,
		mcpclient.WithElicitationHandler(func(ctx context.Context, p *mcpclient.ElicitParams) (*mcpclient.ElicitResult, error) {
			if asked.Add(1) == 1 {
				close(entered)
				<-polled // the other polls come and go while this one answers
			}
			return &mcpclient.ElicitResult{Action: mcpclient.ElicitAccept, Content: map[string]any{}}, nil
		}))
	call, err := c.NewRequest("tools/call", map[string]string{"name": "confirm"}, mcpclient.WithExtension(tasksExtensionID, nil))
	if err != nil {
		t.Fatal(err)
	}
	created, err := c.Do(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	var task struct {
		ResultType string `json:"resultType"`
		TaskID     string `json:"taskId"`
		Status     string `json:"status"`
	}
	if err := created.Decode(&task); err != nil || task.ResultType != "task" || task.TaskID == "" {
		t.Fatalf("tools/call answered %s, want a task", created.Result)
	}
	poll := func() string {
		get, err := c.NewRequest("tasks/get", map[string]string{"taskId": task.TaskID}, mcpclient.WithExtension(tasksExtensionID, nil))
		if err != nil {
			t.Error(err)
			return ""
		}
		resp, err := c.Do(ctx, get)
		if err != nil {
			t.Error(err)
			return ""
		}
		var got struct {
			Status string `json:"status"`
		}
		resp.Decode(&got)
		return got.Status
	}
	var wg sync.WaitGroup
	wg.Go(func() { // polls until one sees the request for input, and answers it
		for poll() == "working" {
			time.Sleep(time.Millisecond)
		}
	})
	<-entered
	for range 3 {
		if got := poll(); got != "input_required" {
			t.Errorf("a poll while the answer is on its way saw %s", got)
		}
	}
	close(polled)
	wg.Wait()
	for st := poll(); st != "completed"; st = poll() {
		if st == "" || st == "failed" || st == "cancelled" {
			t.Fatalf("the task ended %s", st)
		}
		time.Sleep(time.Millisecond)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the handler was asked %d times, want once", n)
	}
}

// TestTaskAnswerWithoutTheExtensionIsInvalid: a server that answers with a task a request that
// did not declare the tasks extension, or a method the extension does not augment, answered it
// wrongly: CodeProtocol, never a tool result made of the task's fields.
func TestTaskAnswerWithoutTheExtensionIsInvalid(t *testing.T) {
	t.Parallel()
	const task = `"result":{"resultType":"task","taskId":"t1","status":"working","createdAt":"2026-12-02T00:00:00Z","lastUpdatedAt":"2026-12-02T00:00:00Z","ttlMs":null}`
	peer := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		switch r.Method {
		case "tools/call", "prompts/get":
			r.Reply(http.StatusOK, task)
			return true
		}
		return false
	}, testpeer.Stateless())
	ctx := testCtx(t)
	c := connect(t, &transport.HTTP{URL: peer.URL})
	if res, err := c.CallTool(ctx, "book", nil); mcpclient.CodeOf(err) != mcpclient.CodeProtocol || !strings.Contains(fmt.Sprint(err), "answered with a task") {
		t.Errorf("tools/call without the extension answered with a task: %v %v, want CodeProtocol", res, err)
	}
	if _, err := c.GetPrompt(ctx, "p", nil, mcpclient.WithExtension(tasksExtensionID, nil)); mcpclient.CodeOf(err) != mcpclient.CodeProtocol {
		t.Errorf("prompts/get answered with a task: %v, want CodeProtocol", err)
	}
}

// TestCallToolFollowingATaskEndsWithItsContext: a caller that stops waiting for a task gets
// ErrOutcomeUnknown naming the call and the task, which goes on; the call's resend under the
// same id reads the same task back from the server's receipt, and a lost answer to the call is
// recovered the same way: one task, one run.
func TestCallToolFollowingATaskEndsWithItsContext(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := taskServer(t, "export", "required", func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("exported")}}, nil
	})
	// The caller gives up once a poll has shown the task: while the client follows it, whatever
	// the tools/call itself took on a loaded machine.
	var giveUp atomic.Pointer[context.CancelFunc]
	c := mcptest.NewClient(t, srv, mcpclient.WithExtension(tasksExtensionID, nil), mcpclient.WithRetryPolicy(mcptest.FastRetryPolicy()),
		mcpclient.WithInterceptors(func(next mcpclient.Handler) mcpclient.Handler {
			return func(ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
				resp, err := next(ctx, x)
				if f := giveUp.Load(); f != nil && x.Request.Method() == "tasks/get" {
					(*f)()
				}
				return resp, err
			}
		}))

	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	giveUp.Store(&cancel)
	_, err := c.CallTool(ctx, "export", nil)
	giveUp.Store(nil)
	var e *mcpclient.Error
	if !errors.As(err, &e) || !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) ||
		e.Request.Method() != "tools/call" || !strings.Contains(err.Error(), "runs as task") {
		t.Fatalf("caller giving up while following: %v, want ErrOutcomeUnknown naming the call and its task", err)
	}
	_, err = c.CallTool(testCtx(t), "export", nil, mcpclient.WithTimeouts(0, time.Second))
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, mcpclient.ErrCallTimeout) || !strings.Contains(err.Error(), "runs as task") {
		t.Fatalf("WithTimeouts' bound while following: %v, want ErrOutcomeUnknown with ErrCallTimeout", err)
	}
	resp, err := c.Resend(testCtx(t), e.Request)
	if err != nil || !strings.Contains(string(resp.Result), `"resultType":"task"`) || !resp.Replayed {
		t.Fatalf("resend of the call: %v %+v, want the task back from the receipt", err, resp)
	}
	if srv.Tasks() != 2 || srv.Executions("export") != 2 {
		t.Errorf("%d tasks, %d runs; want one per call", srv.Tasks(), srv.Executions("export"))
	}
	close(release)

	srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "export"})
	res, err := c.CallTool(testCtx(t), "export", nil)
	if err != nil || res.Text() != "exported" {
		t.Fatalf("call whose task answer was lost: %v %v", res, err)
	}
	if srv.Tasks() != 3 || srv.Executions("export") != 3 {
		t.Errorf("%d tasks, %d runs after the lost answer; want one more of each", srv.Tasks(), srv.Executions("export"))
	}
}

// TestCallToolInputThenTask: a server that asks for input on the call itself (multi round-trip)
// before it commits to a task answers the last round with the task; CallTool answers the rounds
// with its handler, follows the task, and the task's own request for input is answered too.
func TestCallToolInputThenTask(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := taskServer(t, "deploy", "optional", func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		ask := func(message string) (string, error) {
			raw, err := call.RequestInput(ctx, "elicitation/create", map[string]any{
				"mode": "form", "message": message, "requestedSchema": map[string]any{"type": "object"},
			})
			if err != nil {
				return "", err
			}
			var r mcpclient.ElicitResult
			json.Unmarshal(raw, &r)
			return r.Content["answer"].(string), nil
		}
		target, err := ask("Where to?")
		if err != nil {
			return nil, err
		}
		if err := call.StartTask(); err != nil {
			return nil, err
		}
		confirm, err := ask("Deploy to " + target + "?")
		if err != nil {
			return nil, err
		}
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("deployed to " + target + ": " + confirm)}}, nil
	}, mcptest.WithDeferredTask("deploy"))
	var asked []string
	var mu sync.Mutex
	c := mcptest.NewClient(t, srv, mcpclient.WithElicitationHandler(func(_ context.Context, p *mcpclient.ElicitParams) (*mcpclient.ElicitResult, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, p.Message)
		answer := "staging"
		if strings.HasPrefix(p.Message, "Deploy") {
			answer = "yes"
		}
		return &mcpclient.ElicitResult{Action: mcpclient.ElicitAccept, Content: map[string]any{"answer": answer}}, nil
	}))
	res, err := c.CallTool(ctx, "deploy", nil, mcpclient.WithExtension(tasksExtensionID, nil))
	if err != nil || res.Text() != "deployed to staging: yes" {
		t.Fatalf("call: %v %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || asked[0] != "Where to?" || asked[1] != "Deploy to staging?" {
		t.Errorf("the handler was asked %q, want each question once", asked)
	}
	if srv.Tasks() != 1 {
		t.Errorf("%d tasks, want the call to have become one", srv.Tasks())
	}
}

// TestWithExtensionAsACallOption: settings that are no object, or no identifier, refuse the call
// before anything is built or sent, as they refuse Connect.
func TestWithExtensionAsACallOption(t *testing.T) {
	t.Parallel()
	srv := taskServer(t, "render", "optional", answering("rendered"))
	c := mcptest.NewClient(t, srv)
	for _, opt := range []mcpclient.CallOption{
		mcpclient.WithExtension("x.example/ext", []int{1}),
		mcpclient.WithExtension("", nil),
		mcpclient.WithExtension("x.example/ext", func() {}),
	} {
		if _, err := c.CallTool(testCtx(t), "render", nil, opt); mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument {
			t.Errorf("CallTool with a bad extension declaration: %v, want CodeInvalidArgument", err)
		}
	}
	if n := srv.Executions("render"); n != 0 {
		t.Errorf("the tool ran %d times", n)
	}
}
