package mcptest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/metakeys"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/receipts"
	"github.com/northstar-mcp/mcpclient/tasks"
)

// taskAnswer returns the next response on r, skipping the notifications sent meanwhile.
func taskAnswer(t *testing.T, r *raw) rpcResponse {
	t.Helper()
	for {
		resp := decode(t, r.recv())
		if resp.Method == "" {
			return resp
		}
	}
}

// taskRequest sends a request and returns its answer.
func taskRequest(t *testing.T, r *raw, id, method, params string) rpcResponse {
	t.Helper()
	r.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + params + `}`)
	return taskAnswer(t, r)
}

func taskOf(t *testing.T, resp rpcResponse) tasks.Task {
	t.Helper()
	var task tasks.Task
	if resp.Error != nil || json.Unmarshal(resp.Result, &task) != nil || task.TaskID == "" {
		t.Fatalf("answer %+v is no task", resp)
	}
	return task
}

func createdTask(t *testing.T, resp rpcResponse) tasks.Task {
	t.Helper()
	var res tasks.CreateResult
	if resp.Error != nil || json.Unmarshal(resp.Result, &res) != nil || res.Task == nil {
		t.Fatalf("answer %+v is no CreateTaskResult", resp)
	}
	return *res.Task
}

func taskTool(name, support string, fn mcptest.ToolFunc) mcptest.Option {
	return mcptest.WithTool(mcpclient.Tool{Name: name, Execution: &mcpclient.ToolExecution{TaskSupport: support}}, fn)
}

func quick(_ context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("quick " + string(c.Arguments))}}, nil
}

func waitForCancel(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestTasksDeclaredWithTaskTools(t *testing.T) {
	if caps := initCaps(t, mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "plain"}, quick),
		taskTool("no", tasks.SupportForbidden, quick))); caps.Tasks != nil {
		t.Errorf("a server without task tools declares tasks %s", caps.Tasks)
	}
	srv := mcptest.NewTestServer(t, taskTool("opt", tasks.SupportOptional, quick))
	caps := initCaps(t, srv)
	if got := tasks.CapabilitiesOf(caps); got != (tasks.Capabilities{List: true, Cancel: true, ToolsCall: true}) {
		t.Errorf("tasks %s", caps.Tasks)
	}
	r := dialRaw(t, srv)
	if resp := taskRequest(t, r, "1", "tools/list", "{}"); !strings.Contains(string(resp.Result), `"execution":{"taskSupport":"optional"}`) {
		t.Errorf("tools/list %s lacks the tool's execution", resp.Result)
	}
	// Without task tools, the task methods do not exist.
	r = dialRaw(t, mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "plain"}, quick)))
	if resp := taskRequest(t, r, "1", "tasks/get", `{"taskId":"x"}`); resp.Error == nil || resp.Error.Code != mcpclient.RPCMethodNotFound {
		t.Errorf("tasks/get answered %+v, want -32601", resp)
	}
}

func TestTaskRequestsAreChecked(t *testing.T) {
	srv := mcptest.NewTestServer(t, taskTool("opt", tasks.SupportOptional, quick),
		taskTool("req", tasks.SupportRequired, quick), taskTool("no", tasks.SupportForbidden, quick),
		mcptest.WithTool(mcpclient.Tool{Name: "plain"}, quick))
	r := dialRaw(t, srv)
	tests := []struct {
		method, params string
		code           int64
	}{
		{"tools/call", `{"name":"no","task":{}}`, mcpclient.RPCMethodNotFound},
		{"tools/call", `{"name":"plain","task":{}}`, mcpclient.RPCMethodNotFound},
		{"tools/call", `{"name":"req"}`, mcpclient.RPCMethodNotFound},
		{"tools/call", `{"name":"nosuch","task":{}}`, mcpclient.RPCInvalidParams},
		{"tools/call", `{"name":"opt","task":{"ttl":-1}}`, mcpclient.RPCInvalidParams},
		{"tools/call", `{"name":"opt","task":"soon"}`, mcpclient.RPCInvalidParams},
		{"tasks/get", `{}`, mcpclient.RPCInvalidParams},
		{"tasks/get", `{"taskId":"nosuch"}`, mcpclient.RPCInvalidParams},
		{"tasks/result", `{"taskId":"nosuch"}`, mcpclient.RPCInvalidParams},
		{"tasks/cancel", `{"taskId":"nosuch"}`, mcpclient.RPCInvalidParams},
		{"tasks/list", `{"cursor":"bogus"}`, mcpclient.RPCInvalidParams},
	}
	for i, tt := range tests {
		resp := taskRequest(t, r, strconv.Itoa(i+1), tt.method, tt.params)
		if resp.Error == nil || resp.Error.Code != tt.code {
			t.Errorf("%s %s: %+v, want error %d", tt.method, tt.params, resp, tt.code)
		}
	}
	if n := srv.Tasks(); n != 0 {
		t.Errorf("refused requests made %d tasks", n)
	}
	// A plain call of an optional tool is a plain call.
	if resp := taskRequest(t, r, "100", "tools/call", `{"name":"opt","arguments":{"a":1}}`); !strings.Contains(string(resp.Result), `quick {\"a\":1}`) {
		t.Errorf("plain call answered %+v", resp)
	}
}

func TestTaskLifecycleOnTheWire(t *testing.T) {
	release := make(chan struct{})
	srv := mcptest.NewTestServer(t, mcptest.WithTaskPollInterval(250*time.Millisecond),
		taskTool("gate", tasks.SupportOptional, func(ctx context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			<-release
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("opened")},
				Meta: json.RawMessage(`{"trace":"t1"}`)}, nil
		}),
		taskTool("wait", tasks.SupportOptional, waitForCancel))
	r := dialRaw(t, srv)
	task := createdTask(t, taskRequest(t, r, `"c1"`, "tools/call", `{"name":"gate","task":{"ttl":60000}}`))
	if task.Status != tasks.Working || task.TTL == nil || *task.TTL != 60000 || task.PollInterval == nil || *task.PollInterval != 250 ||
		task.CreatedAt == "" || task.LastUpdatedAt == "" {
		t.Errorf("created %+v", task)
	}
	// tasks/result waits for the end.
	r.send(`{"jsonrpc":"2.0","id":"r1","method":"tasks/result","params":{"taskId":"` + task.TaskID + `"}}`)
	if got := taskOf(t, taskRequest(t, r, `"g1"`, "tasks/get", `{"taskId":"`+task.TaskID+`"}`)); got.Status != tasks.Working {
		t.Errorf("tasks/get %+v", got)
	}
	close(release)
	// The result and the status notification, in either order.
	var sawStatus, sawResult bool
	for !sawStatus || !sawResult {
		resp := decode(t, r.recv())
		if resp.Method == "notifications/tasks/status" {
			var st tasks.Task
			json.Unmarshal(resp.Params, &st)
			if st.TaskID != task.TaskID || st.Status != tasks.Completed || st.LastUpdatedAt == "" {
				t.Errorf("notifications/tasks/status %s", resp.Params)
			}
			sawStatus = true
			continue
		}
		var res struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		if string(resp.ID) != `"r1"` || json.Unmarshal(resp.Result, &res) != nil ||
			string(res.Meta[metakeys.RelatedTask]) != `{"taskId":"`+task.TaskID+`"}` || string(res.Meta["trace"]) != `"t1"` {
			t.Fatalf("tasks/result answered %+v, want the result with related-task and the tool's own _meta", resp)
		}
		sawResult = true
	}
	if resp := taskRequest(t, r, `"x1"`, "tasks/cancel", `{"taskId":"`+task.TaskID+`"}`); resp.Error == nil ||
		resp.Error.Code != mcpclient.RPCInvalidParams || !strings.Contains(resp.Error.Message, "completed") {
		t.Errorf("cancelling a completed task: %+v", resp)
	}

	// A cancelled task's result is an error; listing shows both tasks.
	waiting := createdTask(t, taskRequest(t, r, `"c2"`, "tools/call", `{"name":"wait","task":{}}`))
	if got := taskOf(t, taskRequest(t, r, `"x2"`, "tasks/cancel", `{"taskId":"`+waiting.TaskID+`"}`)); got.Status != tasks.Cancelled || got.TTL != nil {
		t.Errorf("tasks/cancel %+v", got)
	}
	if resp := taskRequest(t, r, `"r2"`, "tasks/result", `{"taskId":"`+waiting.TaskID+`"}`); resp.Error == nil {
		t.Errorf("tasks/result of a cancelled task: %+v", resp)
	}
	var list tasks.ListResult
	if resp := taskRequest(t, r, `"l1"`, "tasks/list", `{}`); json.Unmarshal(resp.Result, &list) != nil || len(list.Tasks) != 2 ||
		list.Tasks[0].Status != tasks.Completed || list.Tasks[1].Status != tasks.Cancelled {
		t.Errorf("tasks/list %+v", resp)
	}
}

func TestTaskReceipts(t *testing.T) {
	srv := mcptest.NewTestServer(t, taskTool("opt", tasks.SupportOptional, quick))
	r := dialRaw(t, srv)
	first := createdTask(t, taskRequest(t, r, "7", "tools/call", `{"name":"opt","task":{"ttl":1000}}`))
	again := createdTask(t, taskRequest(t, r, "7", "tools/call", `{"name":"opt","task":{"ttl":1000}}`))
	if again.TaskID != first.TaskID || again.CreatedAt != first.CreatedAt {
		t.Errorf("same id and content: %+v, want %+v", again, first)
	}
	if resp := taskRequest(t, r, "7", "tools/call", `{"name":"opt","task":{"ttl":2000}}`); resp.Error == nil ||
		!strings.Contains(resp.Error.Message, receipts.CodeIDReused) {
		t.Errorf("same id, other content: %+v", resp)
	}
	if n, runs := srv.Tasks(), srv.Executions("opt"); n != 1 || runs > 1 {
		t.Errorf("%d tasks, %d runs; want 1", n, runs)
	}
}

func TestTaskStoreBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := mcptest.NewServer(mcptest.WithMaxTasks(2), taskTool("opt", tasks.SupportOptional, quick),
			taskTool("wait", tasks.SupportOptional, waitForCancel))
		defer srv.Close()
		r := dialRaw(t, srv)
		done := createdTask(t, taskRequest(t, r, "1", "tools/call", `{"name":"opt","task":{"ttl":1000}}`))
		taskRequest(t, r, "2", "tasks/result", `{"taskId":"`+done.TaskID+`"}`)
		running := createdTask(t, taskRequest(t, r, "3", "tools/call", `{"name":"wait","task":{"ttl":1000}}`))
		resp := taskRequest(t, r, "4", "tools/call", `{"name":"opt","task":{}}`)
		if resp.Error == nil || resp.Error.Code != -32000 || !strings.Contains(string(resp.Error.Data), "MCP_TASKS_FULL") {
			t.Errorf("a third task: %+v, want the store full", resp)
		}
		// Past their ttl, the terminal task goes, the running one stays.
		time.Sleep(2 * time.Second)
		if resp := taskRequest(t, r, "5", "tasks/get", `{"taskId":"`+done.TaskID+`"}`); resp.Error == nil || resp.Error.Code != mcpclient.RPCInvalidParams {
			t.Errorf("an expired task: %+v", resp)
		}
		if got := taskOf(t, taskRequest(t, r, "6", "tasks/get", `{"taskId":"`+running.TaskID+`"}`)); got.Status != tasks.Working {
			t.Errorf("the running task: %+v", got)
		}
		createdTask(t, taskRequest(t, r, "7", "tools/call", `{"name":"opt","task":{}}`))
		// Restart forgets the tasks and ends the running one.
		srv.Restart()
		if n := srv.Tasks(); n != 0 {
			t.Errorf("%d tasks after a restart", n)
		}
	})
}

func TestProtocolErrorFailsTheCall(t *testing.T) {
	gone := func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return nil, fmt.Errorf("backend: %w", mcptest.ProtocolError(mcpclient.RPCInternalError, "the backend is gone", map[string]string{"backend": "db"}))
	}
	srv := mcptest.NewTestServer(t, taskTool("gone", tasks.SupportOptional, gone))
	r := dialRaw(t, srv)
	resp := taskRequest(t, r, "1", "tools/call", `{"name":"gone"}`)
	if resp.Error == nil || resp.Error.Code != mcpclient.RPCInternalError || resp.Error.Message != "the backend is gone" ||
		string(resp.Error.Data) != `{"backend":"db"}` {
		t.Fatalf("plain call answered %+v, want the JSON-RPC error", resp)
	}
	// As a task, the call fails the task, and tasks/result answers the error.
	task := createdTask(t, taskRequest(t, r, "2", "tools/call", `{"name":"gone","task":{}}`))
	if resp := taskRequest(t, r, "3", "tasks/result", `{"taskId":"`+task.TaskID+`"}`); resp.Error == nil || resp.Error.Code != mcpclient.RPCInternalError {
		t.Errorf("tasks/result answered %+v, want the JSON-RPC error", resp)
	}
	if got := taskOf(t, taskRequest(t, r, "4", "tasks/get", `{"taskId":"`+task.TaskID+`"}`)); got.Status != tasks.Failed || got.StatusMessage != "the backend is gone" {
		t.Errorf("tasks/get %+v", got)
	}
}
