package tasks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/metakeys"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/tasks"
)

// taskTools are the tools of the task tests. slow and block report their task id on started;
// slow answers "done <v>" once the test sends v on release; block waits for its context to end
// and reports why on stopped.
type taskTools struct {
	started chan string
	release chan string
	stopped chan error
}

// newTaskTools must run where the test runs (inside its synctest bubble, if any).
func newTaskTools() *taskTools {
	return &taskTools{started: make(chan string, 16), release: make(chan string, 16), stopped: make(chan error, 16)}
}

func taskExec(support string) *mcpclient.ToolExecution {
	return &mcpclient.ToolExecution{TaskSupport: support}
}

func (k *taskTools) options() []mcptest.Option {
	return []mcptest.Option{
		mcptest.WithPageSize(2),
		mcptest.WithTool(mcpclient.Tool{Name: "slow", Execution: taskExec(tasks.SupportOptional)},
			func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
				k.started <- call.TaskID()
				select {
				case v := <-k.release:
					return textResult("done " + v), nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}),
		mcptest.WithTool(mcpclient.Tool{Name: "block", Execution: taskExec(tasks.SupportOptional)},
			func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
				k.started <- call.TaskID()
				<-ctx.Done()
				k.stopped <- ctx.Err()
				return nil, ctx.Err()
			}),
		mcptest.WithTool(mcpclient.Tool{Name: "fails", Execution: taskExec(tasks.SupportOptional)},
			func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
				return nil, errors.New("API rate limit exceeded")
			}),
		mcptest.WithTool(mcpclient.Tool{Name: "ask", Execution: taskExec(tasks.SupportRequired)},
			func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
				raw, err := call.RequestInput(ctx, "elicitation/create", map[string]any{
					"message":         "the answer?",
					"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}},
				})
				if err != nil {
					return nil, err
				}
				var res mcpclient.ElicitResult
				if err := json.Unmarshal(raw, &res); err != nil {
					return nil, err
				}
				return textResult(fmt.Sprintf("%s %v", res.Action, res.Content["answer"])), nil
			}),
		mcptest.WithTool(mcpclient.Tool{Name: "plain"}, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			return textResult("plain"), nil
		}),
		mcptest.WithTool(mcpclient.Tool{Name: "forbidden", Execution: taskExec(tasks.SupportForbidden)}, nil),
	}
}

// taskStatusLog collects notifications/tasks/status.
type taskStatusLog struct {
	mu     sync.Mutex
	seen   map[string][]tasks.Status
	signal chan struct{}
}

func newTaskStatusLog() *taskStatusLog {
	return &taskStatusLog{seen: map[string][]tasks.Status{}, signal: make(chan struct{}, 1)}
}

func (l *taskStatusLog) handler(_ context.Context, t *tasks.Task) {
	l.mu.Lock()
	l.seen[t.TaskID] = append(l.seen[t.TaskID], t.Status)
	l.mu.Unlock()
	select {
	case l.signal <- struct{}{}:
	default:
	}
}

// await waits until the task's notifications end with status, and returns them all.
func (l *taskStatusLog) await(t *testing.T, id string, status tasks.Status) []tasks.Status {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		l.mu.Lock()
		got := slices.Clone(l.seen[id])
		l.mu.Unlock()
		if len(got) > 0 && got[len(got)-1] == status {
			return got
		}
		select {
		case <-l.signal:
		case <-deadline:
			t.Fatalf("task %s: status notifications %v, want them to end with %s", id, got, status)
		}
	}
}

// runTaskScenario exercises every task operation against a server made with taskTools.
func runTaskScenario(t *testing.T, srv *mcptest.Server, d mcptest.Dialer, k *taskTools) {
	statuses := newTaskStatusLog()
	c := mcptest.NewClient(t, d, tasks.WithStatusHandler(statuses.handler),
		mcpclient.WithElicitationHandler(func(_ context.Context, p *mcpclient.ElicitParams) (*mcpclient.ElicitResult, error) {
			if !bytes.Contains(p.Meta, []byte(metakeys.RelatedTask)) {
				t.Errorf("elicitation _meta %s lacks %s", p.Meta, metakeys.RelatedTask)
			}
			return &mcpclient.ElicitResult{Action: mcpclient.ElicitAccept, Content: map[string]any{"answer": "42"}}, nil
		}))
	ctx := testCtx(t)

	caps := c.ServerCapabilities()
	if got := tasks.CapabilitiesOf(caps); got != (tasks.Capabilities{List: true, Cancel: true, ToolsCall: true}) {
		t.Errorf("task capabilities %+v (%s), want all", got, caps.Tasks)
	}

	// Create, poll, await, read.
	task, err := tasks.CallTool(ctx, c, "slow", map[string]string{"v": "x"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != tasks.Working || task.TTL == nil || *task.TTL != 60000 || task.PollInterval == nil || task.CreatedTime().IsZero() {
		t.Errorf("created task %+v, want working with ttl 60000, a pollInterval and createdAt", task)
	}
	if id := recv(t, k.started, "the tool to start"); id != task.TaskID {
		t.Errorf("the tool runs as task %q, want %q", id, task.TaskID)
	}
	got, err := tasks.Get(ctx, c, task.TaskID)
	if err != nil || got.Status != tasks.Working || got.CreatedAt != task.CreatedAt || got.Terminal() {
		t.Errorf("Get: %+v, %v; want the task working", got, err)
	}
	k.release <- "x"
	res, err := tasks.Await(ctx, c, task.TaskID)
	if err != nil || res.Text() != "done x" {
		t.Fatalf("Await: %+v, %v", res, err)
	}
	if got, err := tasks.Get(ctx, c, task.TaskID); err != nil || got.Status != tasks.Completed || !got.Terminal() {
		t.Errorf("Get after the end: %+v, %v", got, err)
	}
	res, err = tasks.Result(ctx, c, task.TaskID)
	if err != nil || res.Text() != "done x" || !bytes.Contains(res.Meta, []byte(task.TaskID)) {
		t.Errorf("Result: %+v, %v; want the result with the related task in _meta", res, err)
	}
	statuses.await(t, task.TaskID, tasks.Completed)

	// A tool failing inside a task.
	failed, err := tasks.CallTool(ctx, c, "fails", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if failed.TTL != nil {
		t.Errorf("ttl %d, want none asked and none given", *failed.TTL)
	}
	_, err = tasks.Await(ctx, c, failed.TaskID)
	var te *tasks.Error
	if !errors.Is(err, tasks.ErrFailed) || mcpclient.CodeOf(err) != mcpclient.CodeServerError || !errors.As(err, &te) {
		t.Fatalf("Await of a failing tool: %v, want ErrFailed with a *tasks.Error", err)
	}
	if te.Task.Status != tasks.Failed || !strings.Contains(te.Task.StatusMessage, "rate limit") ||
		te.Result == nil || !te.Result.IsError || !strings.Contains(err.Error(), failed.TaskID) {
		t.Errorf("task error %v: task %+v, result %+v", err, te.Task, te.Result)
	}
	if res, err := tasks.Result(ctx, c, failed.TaskID); err != nil || !res.IsError {
		t.Errorf("Result of a failed task: %+v, %v; want the isError result", res, err)
	}
	statuses.await(t, failed.TaskID, tasks.Failed)

	// Cancel a running task.
	blocked, err := tasks.CallTool(ctx, c, "block", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	recv(t, k.started, "the blocking tool to start")
	cancelled, err := tasks.Cancel(ctx, c, blocked.TaskID)
	if err != nil || cancelled.Status != tasks.Cancelled {
		t.Fatalf("CancelTask: %+v, %v", cancelled, err)
	}
	if err := recv(t, k.stopped, "the tool's context to end"); !errors.Is(err, context.Canceled) {
		t.Errorf("the tool's context ended with %v", err)
	}
	if _, err := tasks.Cancel(ctx, c, blocked.TaskID); rpcError(t, err).Code != mcpclient.RPCInvalidParams {
		t.Errorf("cancelling a cancelled task: %v, want -32602", err)
	}
	if _, err := tasks.Await(ctx, c, blocked.TaskID); !errors.Is(err, tasks.ErrCancelled) || !errors.As(err, &te) || te.Task.TaskID != blocked.TaskID {
		t.Errorf("Await of a cancelled task: %v, want ErrCancelled", err)
	}
	if got, err := tasks.Get(ctx, c, blocked.TaskID); err != nil || got.Status != tasks.Cancelled {
		t.Errorf("a cancelled task whose tool then returned: %+v, %v", got, err)
	}
	statuses.await(t, blocked.TaskID, tasks.Cancelled)

	// input_required: the server's elicitation reaches the handler while Await polls.
	asked, err := tasks.CallTool(ctx, c, "ask", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := tasks.Await(ctx, c, asked.TaskID); err != nil || res.Text() != "accept 42" {
		t.Fatalf("Await with input: %+v, %v", res, err)
	}
	seq := statuses.await(t, asked.TaskID, tasks.Completed)
	if want := []tasks.Status{tasks.InputRequired, tasks.Working, tasks.Completed}; !slices.Equal(seq, want) {
		t.Errorf("status notifications %v, want %v", seq, want)
	}

	// Listing, two a page.
	page, err := tasks.ListPage(ctx, c, "")
	if err != nil || len(page.Tasks) != 2 || page.NextCursor == "" {
		t.Errorf("first page: %+v, %v; want 2 tasks and a cursor", page, err)
	}
	all, err := mcpclient.Collect(tasks.List(ctx, c))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tk := range all {
		ids = append(ids, tk.TaskID)
	}
	if want := []string{task.TaskID, failed.TaskID, blocked.TaskID, asked.TaskID}; !slices.Equal(ids, want) {
		t.Errorf("listed %v, want %v", ids, want)
	}

	// Refusals.
	frames := srv.FramesReceived()
	for _, name := range []string{"plain", "forbidden", "unknown"} {
		_, err := tasks.CallTool(ctx, c, name, nil, 0)
		if !errors.Is(err, tasks.ErrNotSupported) || mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument {
			t.Errorf("CallTool(%s): %v, want ErrNotSupported", name, err)
		}
	}
	if _, err := tasks.Get(ctx, c, ""); mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument {
		t.Errorf("Get without an id: %v", err)
	}
	if n := srv.FramesReceived(); n != frames {
		t.Errorf("local refusals sent %d frames", n-frames)
	}
	if _, err := c.CallTool(ctx, "ask", nil); rpcError(t, err).Code != mcpclient.RPCMethodNotFound {
		t.Errorf("CallTool of a tool requiring tasks: %v, want -32601", err)
	}
	if _, err := tasks.Get(ctx, c, "no-such-task"); rpcError(t, err).Code != mcpclient.RPCInvalidParams {
		t.Errorf("Get of an unknown task: %v, want -32602", err)
	}
	// An optional tool called plainly runs as a plain call.
	k.release <- "plain"
	if res, err := c.CallTool(ctx, "slow", nil); err != nil || res.Text() != "done plain" {
		t.Errorf("a plain call of an optional tool: %+v, %v", res, err)
	}
	if id := recv(t, k.started, "the plain call"); id != "" {
		t.Errorf("a plain call runs as task %q", id)
	}
}

func TestTasks(t *testing.T) {
	t.Parallel()
	t.Run("memory", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			k := newTaskTools()
			srv := mcptest.NewTestServer(t, k.options()...)
			runTaskScenario(t, srv, srv, k)
		})
	})
	for _, b := range networkBackends {
		t.Run(b.name, func(t *testing.T) {
			k := newTaskTools()
			srv, d := b.start(t, append(k.options(), mcptest.WithTaskPollInterval(5*time.Millisecond))...)
			runTaskScenario(t, srv, d, k)
		})
	}
}

// TestAwaitHonoursPollInterval: Await polls at the server's pollInterval, on the
// bubble's fake clock.
func TestAwaitHonoursPollInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := mcptest.NewTestServer(t, mcptest.WithTaskPollInterval(300*time.Millisecond),
			mcptest.WithTool(mcpclient.Tool{Name: "sleepy", Execution: taskExec(tasks.SupportOptional)},
				func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
					select {
					case <-time.After(time.Second):
						return textResult("rested"), nil
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}))
		// The polls are requests like any other: the client's interceptors see each.
		var polls atomic.Int32
		countPolls := func(next mcpclient.Handler) mcpclient.Handler {
			return func(ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
				if x.Request.Method() == "tasks/get" {
					polls.Add(1)
				}
				return next(ctx, x)
			}
		}
		c := mcptest.NewClient(t, srv, mcpclient.WithInterceptors(countPolls))
		ctx := testCtx(t)
		if _, err := c.CachedTools(ctx); err != nil { // the listing CallTool needs, made beforehand
			t.Fatal(err)
		}
		start := time.Now()
		task, err := tasks.CallTool(ctx, c, "sleepy", nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if task.PollIntervalDuration() != 300*time.Millisecond {
			t.Errorf("pollInterval %v", task.PollIntervalDuration())
		}
		res, err := tasks.Await(ctx, c, task.TaskID)
		if err != nil || res.Text() != "rested" {
			t.Fatalf("Await: %+v, %v", res, err)
		}
		// Polls at 0, 300, 600, 900 ms find it working; the one at 1200 ms finds it done.
		if d := time.Since(start); d != 1200*time.Millisecond || polls.Load() != 5 {
			t.Errorf("Await returned after %v and %d polls, want 1.2s and 5", d, polls.Load())
		}

		// A caller's deadline ends the wait, not the task.
		task, err = tasks.CallTool(ctx, c, "sleepy", nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		_, err = tasks.Await(short, c, task.TaskID)
		if !errors.Is(err, context.DeadlineExceeded) || mcpclient.CodeOf(err) == 0 || !strings.Contains(err.Error(), task.TaskID) {
			t.Errorf("Await past its deadline: %v", err)
		}
		// The deadline came between two polls: the error names the last tasks/get, answered.
		var e *mcpclient.Error
		if !errors.As(err, &e) || e.Request.ID().IsZero() || e.Request == nil || e.Request.ID() != e.Request.ID() ||
			e.Request.Method() != "tasks/get" || !strings.Contains(string(e.Request.Params()), task.TaskID) {
			t.Fatalf("Await past its deadline: %+v, want the last tasks/get named", e)
		}
		if entry, _ := c.Ledger().Lookup(e.Request.ID()); entry.State != mcpclient.StateAnswered {
			t.Errorf("the named request is %v, want the answered tasks/get", entry.State)
		}
		if res, err := tasks.Await(ctx, c, task.TaskID); err != nil || res.Text() != "rested" {
			t.Errorf("Await again: %+v, %v", res, err)
		}
	})
}

func TestCallToolRefusedWithoutCapability(t *testing.T) {
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "plain"},
		func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			return textResult("plain"), nil
		}))
	c := mcptest.NewClient(t, srv)
	ctx := testCtx(t)
	if caps := c.ServerCapabilities(); caps.Tasks != nil || tasks.CapabilitiesOf(caps) != (tasks.Capabilities{}) {
		t.Errorf("a server without task tools declares tasks %s", caps.Tasks)
	}
	if err := c.Ping(ctx); err != nil { // after notifications/initialized, in the pipe's order
		t.Fatal(err)
	}
	frames := srv.FramesReceived()
	_, err := tasks.CallTool(ctx, c, "plain", nil, time.Second)
	if !errors.Is(err, tasks.ErrNotSupported) || mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument ||
		!strings.Contains(err.Error(), "capabilities") {
		t.Errorf("CallTool: %v, want ErrNotSupported for the capability", err)
	}
	if n := srv.FramesReceived(); n != frames {
		t.Errorf("the refusal sent %d frames", n-frames)
	}
	// Sent anyway, a task-augmented call runs as a plain one, as the protocol asks of a server
	// that does not declare tasks.
	resp, err := c.Do(ctx, newRequest(t, c, "tools/call", map[string]any{"name": "plain", "task": map[string]any{"ttl": 1000}}))
	if err != nil {
		t.Fatal(err)
	}
	var res mcpclient.CallToolResult
	if err := resp.Decode(&res); err != nil || res.Text() != "plain" {
		t.Errorf("answer %s, want the plain result", resp.Result)
	}
}

// TestTaskCreationResentUnderSameIDCreatesOneTask: the answer of the task-creating tools/call is
// lost after the task was created; the client resends the same bytes under the same id, and the
// server's receipt answers with the same task.
func TestTaskCreationResentUnderSameIDCreatesOneTask(t *testing.T) {
	t.Parallel()
	for _, b := range backends[:2] {
		t.Run(b.name, func(t *testing.T) {
			k := newTaskTools()
			srv, d := b.start(t, append(k.options(), mcptest.WithTaskPollInterval(5*time.Millisecond),
				mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "slow"}))...)
			c := mcptest.NewClient(t, d, noWait)
			ctx := testCtx(t)
			id := mcpclient.StringID(uuid.NewString())
			task, err := tasks.CallTool(ctx, c, "slow", map[string]string{"v": "once"}, 0, mcpclient.WithRequestID(id))
			if err != nil {
				t.Fatal(err)
			}
			frames := srv.Received(id)
			if len(frames) != 2 || !bytes.Equal(frames[0], frames[1]) || !bytes.Contains(frames[0], []byte(`"task":{}`)) {
				t.Fatalf("server received %d frames under the id: %q", len(frames), frames)
			}
			if n := srv.Tasks(); n != 1 {
				t.Errorf("the server holds %d tasks, want 1", n)
			}
			listed, err := mcpclient.Collect(tasks.List(ctx, c))
			if err != nil || len(listed) != 1 || listed[0].TaskID != task.TaskID {
				t.Errorf("List: %+v, %v; want only %s", listed, err, task.TaskID)
			}
			k.release <- "once"
			if res, err := tasks.Await(ctx, c, task.TaskID); err != nil || res.Text() != "done once" {
				t.Fatalf("Await: %+v, %v", res, err)
			}
			if n := srv.ExecutionsOf("slow", id); n != 1 {
				t.Errorf("the tool ran %d times under the id, want 1", n)
			}
			if e, ok := c.Ledger().Lookup(id); !ok || e.State != mcpclient.StateAnswered || e.Attempts != 2 {
				t.Errorf("ledger entry %+v", e)
			}
		})
	}
}

// TestTaskInspectionFeedsSupersede: a task-creating call whose answer is lost, on a server
// without receipts, ends with ErrOutcomeUnknown; the caller finds the task it created, sees it
// failed, and supersedes the request with that inspection.
func TestTaskInspectionFeedsSupersede(t *testing.T) {
	var runs atomic.Int32
	srv := mcptest.NewTestServer(t, mcptest.WithMode(mcptest.ModeNone), mcptest.WithTaskPollInterval(5*time.Millisecond),
		mcptest.WithTool(mcpclient.Tool{Name: "reserve", Execution: taskExec(tasks.SupportOptional)},
			func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
				if runs.Add(1) == 1 {
					return nil, errors.New("backend down")
				}
				return textResult("reserved"), nil
			}),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "reserve"}))
	c := mcptest.NewClient(t, srv, noWait)
	ctx := testCtx(t)

	start := time.Now()
	_, err := tasks.CallTool(ctx, c, "reserve", map[string]string{"room": "12"}, 0)
	var lost *mcpclient.Error
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.As(err, &lost) || lost.Request == nil {
		t.Fatalf("CallTool: %v, want ErrOutcomeUnknown with the request", err)
	}

	// Inspect: the lost request created a task, which failed.
	listed, err := mcpclient.Collect(tasks.List(ctx, c))
	if err != nil || len(listed) != 1 || listed[0].CreatedTime().Before(start.Add(-time.Second)) {
		t.Fatalf("List: %+v, %v; want the one task the lost request created", listed, err)
	}
	if _, err := tasks.Await(ctx, c, listed[0].TaskID); !errors.Is(err, tasks.ErrFailed) {
		t.Fatalf("Await: %v, want ErrFailed", err)
	}
	seen, err := tasks.Get(ctx, c, listed[0].TaskID)
	if err != nil {
		t.Fatal(err)
	}
	insp := tasks.Inspection(seen)
	if insp.Checked != "tasks/get "+seen.TaskID || !strings.Contains(insp.Found, "failed") || !strings.Contains(insp.Found, "backend down") {
		t.Errorf("inspection %+v", insp)
	}
	if _, err := c.Supersede(ctx, lost.Request, tasks.Inspection(nil), nil); !errors.Is(err, mcpclient.ErrInspectionRequired) {
		t.Errorf("Supersede with no task inspected: %v, want ErrInspectionRequired", err)
	}

	resp, err := c.Supersede(ctx, lost.Request, insp, nil)
	if err != nil {
		t.Fatal(err)
	}
	var created tasks.CreateResult
	if err := resp.Decode(&created); err != nil || created.Task == nil || created.Task.TaskID == seen.TaskID {
		t.Fatalf("Supersede answered %s", resp.Result)
	}
	if res, err := tasks.Await(ctx, c, created.Task.TaskID); err != nil || res.Text() != "reserved" {
		t.Fatalf("Await of the new task: %+v, %v", res, err)
	}
	next, ok := c.Ledger().Lookup(resp.Request.ID())
	if !ok || next.Supersedes != lost.Request.ID() || next.Reason != insp.String() {
		t.Errorf("ledger entry of the new request %+v, want it to supersede %v because %q", next, lost.Request.ID(), insp)
	}
	if old, _ := c.Ledger().Lookup(lost.Request.ID()); old.SupersededBy != resp.Request.ID() {
		t.Errorf("ledger entry of the lost request %+v", old)
	}
	frames := srv.Received(resp.Request.ID())
	if len(frames) != 1 || !bytes.Contains(frames[0], []byte(`"supersedes":`+lost.Request.ID().JSON())) {
		t.Errorf("frames of the new request %q, want _meta.supersedes", frames)
	}
	if n := srv.Tasks(); n != 2 {
		t.Errorf("%d tasks, want 2", n)
	}
}

// TestCancelTaskResentAfterLostAnswer: the answer of tasks/cancel is lost after the task was
// cancelled; the resend finds the task terminal (-32602), and CancelTask reports the task
// cancelled rather than that refusal.
func TestCancelTaskResentAfterLostAnswer(t *testing.T) {
	k := newTaskTools()
	srv := mcptest.NewTestServer(t, append(k.options(),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Method: "tasks/cancel"}))...)
	c := mcptest.NewClient(t, srv, noWait)
	ctx := testCtx(t)
	task, err := tasks.CallTool(ctx, c, "block", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	recv(t, k.started, "the tool to start")
	id := mcpclient.StringID(uuid.NewString())
	got, err := tasks.Cancel(ctx, c, task.TaskID, mcpclient.WithRequestID(id))
	if err != nil || got.Status != tasks.Cancelled {
		t.Fatalf("CancelTask: %+v, %v", got, err)
	}
	if n := len(srv.Received(id)); n != 2 {
		t.Errorf("tasks/cancel sent %d times, want 2 (the lost answer, then the refusal)", n)
	}
	recv(t, k.stopped, "the tool's context to end")
}
