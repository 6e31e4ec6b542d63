package mcptest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/tasks"
)

// taskCapsMeta is the _meta of a request opted into the tasks extension whose client declares
// caps besides.
func taskCapsMeta(caps map[string]any) map[string]any {
	c := maps.Clone(caps)
	if c == nil {
		c = map[string]any{}
	}
	c["extensions"] = map[string]any{tasksExt: map[string]any{}}
	return meta(map[string]any{"io.modelcontextprotocol/clientCapabilities": c})
}

// startTask posts tools/call of tool, with m as _meta, and returns the id of the task it created.
func startTask(t *testing.T, srv *mcptest.HTTPServer, id any, tool string, m map[string]any) string {
	t.Helper()
	r := rpc(t, srv, id, "tools/call", tool, m, map[string]any{"name": tool})
	res := r.result(t)
	if string(res["resultType"]) != `"task"` {
		t.Fatalf("tools/call of %s answered %s, want a CreateTaskResult", tool, show(r.last()))
	}
	return taskIDOf(t, res)
}

type inputRequestsWire map[string]struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// wantInputs checks that a task, as tasks/get or notifications/tasks carry it, is
// input_required and waits on the requests under keys, and returns them.
func wantInputs(t *testing.T, what string, task map[string]json.RawMessage, keys ...string) inputRequestsWire {
	t.Helper()
	var reqs inputRequestsWire
	json.Unmarshal(task["inputRequests"], &reqs)
	if got := slices.Sorted(maps.Keys(reqs)); string(task["status"]) != `"input_required"` || !slices.Equal(got, keys) {
		t.Errorf("%s: %s, want input_required waiting on %v", what, show(task), keys)
	}
	if task["result"] != nil || task["error"] != nil {
		t.Errorf("%s: a waiting task carries an outcome: %s", what, show(task))
	}
	return reqs
}

// wantWorking checks that a task is working, waiting on no input.
func wantWorking(t *testing.T, what string, task map[string]json.RawMessage) {
	t.Helper()
	if string(task["status"]) != `"working"` || task["inputRequests"] != nil {
		t.Errorf("%s: %s, want working with no inputRequests", what, show(task))
	}
}

// wantCompleted checks that a task completed with a result whose text is text.
func wantCompleted(t *testing.T, what string, task map[string]json.RawMessage, text string) {
	t.Helper()
	var res mcpclient.CallToolResult
	if string(task["status"]) != `"completed"` || json.Unmarshal(task["result"], &res) != nil || res.Text() != text || task["inputRequests"] != nil {
		t.Errorf("%s: %s, want completed with %q", what, show(task), text)
	}
}

// wantAck checks that a tasks/update or tasks/cancel was acknowledged with the empty result.
func wantAck(t *testing.T, what string, r rpcReply) {
	t.Helper()
	if r.Status != http.StatusOK || string(r.last()["result"]) != `{"resultType":"complete"}` {
		t.Errorf("%s: %d %s, want the empty acknowledgement", what, r.Status, show(r.last()))
	}
}

// pastWorking returns a task as tasks/get answers it or, while it is working, as the next
// notification on l, a listener of the task, tells it.
func pastWorking(t *testing.T, srv *mcptest.HTTPServer, l listenStream, id string) map[string]json.RawMessage {
	t.Helper()
	got := taskRPC(t, srv, "tasks/get", id, nil).result(t)
	if string(got["status"]) == `"working"` {
		return l.awaitTaskStatus(t, id)
	}
	return got
}

func update(t *testing.T, srv *mcptest.HTTPServer, taskID string, responses map[string]any) rpcReply {
	t.Helper()
	return taskRPC(t, srv, "tasks/update", taskID, map[string]any{"inputResponses": responses})
}

func text(s string) *mcpclient.CallToolResult {
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(s)}}
}

// TestTasksExtensionTaskAsksForInput: a task's tool asks its client in its own run, once per
// request: the task shows the requests while it waits, tasks/update brings the answers, and
// the tool goes on with them.
func TestTasksExtensionTaskAsksForInput(t *testing.T) {
	var runs atomic.Int32
	open := make(chan struct{})
	causes := make(chan error, 2)
	ask := interview(causes)
	srv := statelessServer(t, taskTool("interview", tasks.SupportOptional, func(ctx context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		runs.Add(1)
		<-open
		return ask(ctx, c)
	}))
	id := startTask(t, srv, 1, "interview", taskCapsMeta(everyInputCap))
	l, _ := listenTasks(t, srv, 2, capsMeta(tasksExt), id)
	l.next(t) // the acknowledgement
	close(open)

	reqs := wantInputs(t, "the first notification", l.awaitTaskStatus(t, id), "user_name")
	if reqs["user_name"].Method != "elicitation/create" || !strings.Contains(string(reqs["user_name"].Params), `"message":"What is your name?"`) {
		t.Errorf("inputRequests %v, want the tool's elicitation", reqs)
	}
	got := taskRPC(t, srv, "tasks/get", id, nil).result(t)
	wantInputs(t, "tasks/get", got, "user_name")
	if string(got["resultType"]) != `"complete"` || !strings.Contains(string(got["statusMessage"]), "input") {
		t.Errorf("tasks/get %s", show(got))
	}

	// An answer to a key the task does not wait on is ignored; the one to its request delivered.
	wantAck(t, "the first update", update(t, srv, id, map[string]any{
		"user_name": accepted(map[string]any{"name": "Ada"}),
		"nosuch":    map[string]any{"ignored": true},
	}))
	wantWorking(t, "once answered", l.awaitTaskStatus(t, id))
	wantInputs(t, "the second request", l.awaitTaskStatus(t, id), "input-2")

	// A key already answered is ignored too.
	wantAck(t, "the second update", update(t, srv, id, map[string]any{
		"user_name": accepted(map[string]any{"name": "Bob"}),
		"input-2":   sampled("Paris"),
	}))
	wantWorking(t, "once answered again", l.awaitTaskStatus(t, id))
	wantCompleted(t, "the last notification", l.awaitTaskStatus(t, id), "round 1: Ada, Paris")
	wantCompleted(t, "tasks/get", taskRPC(t, srv, "tasks/get", id, nil).result(t), "round 1: Ada, Paris")
	if n := runs.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
	select {
	case cause := <-causes:
		t.Errorf("a request for input ended the task's run: %v", cause)
	default:
	}
}

// TestTasksExtensionTaskAnswersInParts: a client may answer some of the requests a task waits
// on and the rest later; an answer that is no result of its request refuses the whole update.
func TestTasksExtensionTaskAnswersInParts(t *testing.T) {
	open := make(chan struct{})
	srv := statelessServer(t, taskTool("both", tasks.SupportOptional, func(ctx context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		<-open
		res, err := c.RequestAll(ctx, askName, askRoots)
		if err != nil {
			return nil, err
		}
		var roots struct {
			Roots []struct {
				URI string `json:"uri"`
			} `json:"roots"`
		}
		json.Unmarshal(res[1], &roots)
		return text(nameOf(res[0]) + " in " + roots.Roots[0].URI), nil
	}))
	id := startTask(t, srv, 1, "both", taskCapsMeta(everyInputCap))
	l, _ := listenTasks(t, srv, 2, capsMeta(tasksExt), id)
	l.next(t)
	close(open)
	wantInputs(t, "the tool's requests", l.awaitTaskStatus(t, id), "roots", "user_name")

	for _, bad := range []map[string]any{
		{"user_name": map[string]any{"action": "maybe"}, "roots": rootsResult},
		{"user_name": 42},
		{"roots": map[string]any{"roots": []any{map[string]any{"name": "no uri"}}}},
	} {
		if r := update(t, srv, id, bad); r.Status != http.StatusOK || r.errorCode() != mcpclient.RPCInvalidParams {
			t.Errorf("update %v: %d %s, want -32602", bad, r.Status, show(r.last()))
		}
	}
	wantInputs(t, "after refused updates", taskRPC(t, srv, "tasks/get", id, nil).result(t), "roots", "user_name")

	wantAck(t, "a partial update", update(t, srv, id, map[string]any{"roots": rootsResult}))
	wantInputs(t, "the notification after a partial update", l.awaitTaskStatus(t, id), "user_name")
	wantInputs(t, "tasks/get after a partial update", taskRPC(t, srv, "tasks/get", id, nil).result(t), "user_name")

	wantAck(t, "the last update", update(t, srv, id, map[string]any{"user_name": accepted(map[string]any{"name": "Ada"})}))
	wantWorking(t, "once all answered", l.awaitTaskStatus(t, id))
	wantCompleted(t, "the end", l.awaitTaskStatus(t, id), "Ada in file:///work")
}

// TestTasksExtensionTaskInputKeys: a key names one request over the task's life, and a request
// whose ctx ends is given up.
func TestTasksExtensionTaskInputKeys(t *testing.T) {
	open, giveUp, finish := make(chan struct{}), make(chan struct{}), make(chan struct{})
	errs := make(chan error, 2)
	srv := statelessServer(t, taskTool("keys", tasks.SupportOptional, func(ctx context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		<-open
		if _, err := c.Request(ctx, "elicitation/create", map[string]any{"message": "first"}); err != nil {
			return nil, err
		}
		_, err := c.RequestAll(ctx, mcptest.InputRequest{Key: "input-1", Method: "elicitation/create"})
		errs <- err
		sub, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-giveUp:
				cancel()
			case <-sub.Done():
			}
		}()
		_, err = c.Request(sub, "elicitation/create", map[string]any{"message": "third"})
		errs <- err
		<-finish
		return text("gave up"), nil
	}))
	id := startTask(t, srv, 1, "keys", taskCapsMeta(everyInputCap))
	l, _ := listenTasks(t, srv, 2, capsMeta(tasksExt), id)
	l.next(t)
	close(open)

	wantInputs(t, "the first request", l.awaitTaskStatus(t, id), "input-1")
	wantAck(t, "its answer", update(t, srv, id, map[string]any{"input-1": accepted(map[string]any{})}))
	wantWorking(t, "once answered", l.awaitTaskStatus(t, id))
	if err := <-errs; err == nil || !strings.Contains(err.Error(), `"input-1"`) {
		t.Errorf("asking input-1 again: %v, want an error naming the key", err)
	}
	// The refused request took no number: the next one is the task's second.
	wantInputs(t, "the next request", l.awaitTaskStatus(t, id), "input-2")

	close(giveUp)
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Errorf("a request whose ctx ended returned %v", err)
	}
	wantWorking(t, "once given up", l.awaitTaskStatus(t, id))
	wantWorking(t, "tasks/get once given up", taskRPC(t, srv, "tasks/get", id, nil).result(t))
	wantAck(t, "an answer to a request given up", update(t, srv, id, map[string]any{"input-2": accepted(map[string]any{})}))
	close(finish)
	wantCompleted(t, "the end", l.awaitTaskStatus(t, id), "gave up")
}

// TestTasksExtensionTaskInputNeedsCapabilities: a task that asks what the capabilities of the
// request that created it do not cover fails with -32021.
func TestTasksExtensionTaskInputNeedsCapabilities(t *testing.T) {
	open := make(chan struct{})
	causes := make(chan error, 1)
	srv := statelessServer(t, taskTool("ask", tasks.SupportOptional, func(ctx context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		<-open
		_, err := c.RequestAll(ctx, askName)
		causes <- context.Cause(ctx)
		return text("asked anyway"), err
	}))
	id := startTask(t, srv, 1, "ask", taskCapsMeta(map[string]any{"sampling": map[string]any{}}))
	l, _ := listenTasks(t, srv, 2, capsMeta(tasksExt), id)
	l.next(t)
	close(open)

	if cause := <-causes; !errors.Is(cause, mcptest.ErrMissingClientCapability) {
		t.Errorf("the tool's ctx ended with %v", cause)
	}
	for what, task := range map[string]map[string]json.RawMessage{
		"the notification": l.awaitTaskStatus(t, id),
		"tasks/get":        taskRPC(t, srv, "tasks/get", id, nil).result(t),
	} {
		var e struct {
			Code int64           `json:"code"`
			Data json.RawMessage `json:"data"`
		}
		json.Unmarshal(task["error"], &e)
		if string(task["status"]) != `"failed"` || e.Code != -32021 || string(e.Data) != `{"requiredCapabilities":{"elicitation":{"form":{}}}}` || task["result"] != nil {
			t.Errorf("%s: %s, want failed with -32021 requiring elicitation", what, show(task))
		}
	}
}

// TestTasksExtensionWaitingTaskEnds: a task that waits for input ends when it is cancelled or
// the server restarts, and its tool's request with it.
func TestTasksExtensionWaitingTaskEnds(t *testing.T) {
	open := make(chan struct{})
	ended := make(chan error, 2)
	srv := statelessServer(t, taskTool("ask", tasks.SupportOptional, func(ctx context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		<-open
		_, err := c.Request(ctx, askName.Method, askName.Params)
		ended <- err
		return nil, err
	}))
	cancelled := startTask(t, srv, 1, "ask", taskCapsMeta(everyInputCap))
	forgotten := startTask(t, srv, 2, "ask", taskCapsMeta(everyInputCap))
	l, _ := listenTasks(t, srv, 3, capsMeta(tasksExt), cancelled, forgotten)
	l.next(t)
	close(open)
	for range 2 {
		note := l.next(t)
		var params map[string]json.RawMessage
		json.Unmarshal(note["params"], &params)
		wantInputs(t, "a task", params, "input-1")
	}

	wantAck(t, "tasks/cancel", taskRPC(t, srv, "tasks/cancel", cancelled, nil))
	if err := <-ended; err == nil {
		t.Error("the request of a cancelled task succeeded")
	}
	if got := taskRPC(t, srv, "tasks/get", cancelled, nil).result(t); string(got["status"]) != `"cancelled"` || got["inputRequests"] != nil {
		t.Errorf("tasks/get of the cancelled task %s", show(got))
	}
	wantAck(t, "an answer to a cancelled task", update(t, srv, cancelled, map[string]any{"input-1": accepted(map[string]any{})}))

	srv.Restart()
	if err := <-ended; err == nil {
		t.Error("the request of a task the server forgot succeeded")
	}
	if r := taskRPC(t, srv, "tasks/get", forgotten, nil); r.errorCode() != mcpclient.RPCInvalidParams {
		t.Errorf("tasks/get after a restart: %s", show(r.last()))
	}
}

// TestTasksExtensionDeferredTask: a tool of WithDeferredTask gathers input by multi round-trip
// requests, then starts its task, which answers that round's request; it runs on as the task, in
// the same run, beyond the request's end.
func TestTasksExtensionDeferredTask(t *testing.T) {
	open := make(chan struct{})
	ended := make(chan error, 1)
	srv := statelessServer(t, mcptest.WithDeferredTask("register"),
		taskTool("register", tasks.SupportRequired, func(ctx context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			who, err := c.RequestAll(ctx, askName)
			if err != nil {
				return nil, err
			}
			if err := c.StartTask(); err != nil {
				return nil, err
			}
			<-open
			model, err := c.Request(ctx, askModel.Method, askModel.Params)
			if err != nil {
				select {
				case <-ctx.Done():
					ended <- context.Cause(ctx)
				case <-time.After(5 * time.Second):
					ended <- errors.New("the tool's ctx did not end")
				}
				return nil, err
			}
			return text(fmt.Sprintf("round %d: %s, %s", c.Round(), nameOf(who[0]), textOf(model))), nil
		}))
	m := taskCapsMeta(everyInputCap)
	round1 := rpc(t, srv, 1, "tools/call", "register", m, map[string]any{"name": "register"})
	ir := inputRequired(t, round1)
	if _, ok := ir.InputRequests["user_name"]; !ok || round1.last()["result"] == nil || strings.Contains(string(round1.last()["result"]), "taskId") {
		t.Fatalf("round 1: %s, want input_required asking user_name, no task", show(round1.last()))
	}
	if n := srv.Tasks(); n != 0 {
		t.Errorf("%d tasks after round 1, want none", n)
	}
	answers := map[string]any{"user_name": accepted(map[string]any{"name": "Ada"})}
	res := rpc(t, srv, 2, "tools/call", "register", m, map[string]any{"name": "register", "inputResponses": answers, "requestState": ir.RequestState}).result(t)
	if string(res["resultType"]) != `"task"` || string(res["status"]) != `"working"` || res["requestState"] != nil || res["inputRequests"] != nil {
		t.Fatalf("round 2: %s, want a CreateTaskResult", show(res))
	}
	id := taskIDOf(t, res)

	l, _ := listenTasks(t, srv, 3, capsMeta(tasksExt), id)
	l.next(t)
	close(open)
	// The task numbers its requests on from the round trips': the model is the second.
	wantInputs(t, "the task's request", l.awaitTaskStatus(t, id), "input-2")
	wantAck(t, "its answer", update(t, srv, id, map[string]any{"input-2": sampled("Paris")}))
	wantWorking(t, "once answered", l.awaitTaskStatus(t, id))
	wantCompleted(t, "the end", l.awaitTaskStatus(t, id), "round 2: Ada, Paris")

	// Its ctx ends with the task: tasks/cancel ends it.
	round2 := map[string]any{"name": "register", "inputResponses": answers, "requestState": ir.RequestState}
	other := taskIDOf(t, rpc(t, srv, 4, "tools/call", "register", m, round2).result(t))
	l2, _ := listenTasks(t, srv, 5, capsMeta(tasksExt), other)
	l2.next(t)
	wantInputs(t, "another task's request", pastWorking(t, srv, l2, other), "input-2")
	wantAck(t, "tasks/cancel", taskRPC(t, srv, "tasks/cancel", other, nil))
	if cause := <-ended; !errors.Is(cause, context.Canceled) {
		t.Errorf("the cancelled task's ctx ended with %v", cause)
	}
	if got := taskRPC(t, srv, "tasks/get", other, nil).result(t); string(got["status"]) != `"cancelled"` {
		t.Errorf("tasks/get of the cancelled task %s", show(got))
	}
}

// TestTasksExtensionStartTask: StartTask makes a task only of a call that may become one, and
// does nothing for a call that runs as a task already.
func TestTasksExtensionStartTask(t *testing.T) {
	started := func(_ context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		switch err := c.StartTask(); {
		case errors.Is(err, mcptest.ErrNoTask):
			return text("plain"), nil
		case err != nil:
			return nil, err
		}
		return text("task " + c.TaskID()), nil
	}
	srv := statelessServer(t, mcptest.WithDeferredTask("deferred"), mcptest.WithDeferredTask("plain"),
		taskTool("deferred", tasks.SupportOptional, started), taskTool("eager", tasks.SupportOptional, started),
		mcptest.WithTool(mcpclient.Tool{Name: "plain"}, started))
	for _, c := range []struct {
		tool   string
		optIn  bool
		isTask bool
	}{
		{"deferred", true, true}, {"deferred", false, false},
		{"eager", true, true}, {"eager", false, false},
		{"plain", true, false},
	} {
		m := capsMeta()
		if c.optIn {
			m = capsMeta(tasksExt)
		}
		res := rpc(t, srv, 1, "tools/call", c.tool, m, map[string]any{"name": c.tool}).result(t)
		if !c.isTask {
			if string(res["resultType"]) != `"complete"` || !strings.Contains(string(res["content"]), `"plain"`) {
				t.Errorf("%s, opted in %v: %s, want a plain call", c.tool, c.optIn, show(res))
			}
			continue
		}
		id := taskIDOf(t, res)
		l, _ := listenTasks(t, srv, 2, capsMeta(tasksExt), id)
		l.next(t)
		wantCompleted(t, c.tool, pastWorking(t, srv, l, id), "task "+id)
	}
}
