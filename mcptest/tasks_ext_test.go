package mcptest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/receipts"
	"github.com/northstar-mcp/mcpclient/tasks"
)

const tasksExt = "io.modelcontextprotocol/tasks"

// capsMeta is the _meta of a stateless request whose client capabilities name extensions.
func capsMeta(extensions ...string) map[string]any {
	exts := map[string]any{}
	for _, e := range extensions {
		exts[e] = map[string]any{}
	}
	return meta(map[string]any{"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": exts}})
}

// rpc posts a stateless request whose params carry m as _meta; name goes in Mcp-Name.
func rpc(t *testing.T, srv *mcptest.HTTPServer, id any, method, name string, m map[string]any, params map[string]any) rpcReply {
	t.Helper()
	p := map[string]any{"_meta": m}
	for k, v := range params {
		p[k] = v
	}
	return post(t, srv.URL, headersFor(method, name, nil), request(id, method, p))
}

// callTask posts tools/call of tool with the tasks extension and returns the created task.
func callTask(t *testing.T, srv *mcptest.HTTPServer, id any, tool string, args map[string]any) map[string]json.RawMessage {
	t.Helper()
	r := rpc(t, srv, id, "tools/call", tool, capsMeta(tasksExt), map[string]any{"name": tool, "arguments": args})
	res := r.result(t)
	if string(res["resultType"]) != `"task"` {
		t.Fatalf("tools/call of %s answered %s, want a CreateTaskResult", tool, show(r.last()))
	}
	return res
}

// show renders a decoded object for a failure message.
func show(m map[string]json.RawMessage) string {
	b, _ := json.Marshal(m)
	return string(b)
}

func taskIDOf(t *testing.T, res map[string]json.RawMessage) string {
	t.Helper()
	var id string
	if json.Unmarshal(res["taskId"], &id) != nil || id == "" {
		t.Fatalf("no taskId in %s", show(res))
	}
	return id
}

// taskRPC posts tasks/get, tasks/update or tasks/cancel of a task, opted into the extension.
func taskRPC(t *testing.T, srv *mcptest.HTTPServer, method, taskID string, params map[string]any) rpcReply {
	t.Helper()
	p := map[string]any{"taskId": taskID}
	for k, v := range params {
		p[k] = v
	}
	return rpc(t, srv, method, method, taskID, capsMeta(tasksExt), p)
}

// gate is a tool that waits for open to be closed, reports its context's end on ended, and
// answers with the outcome the test chose.
type gate struct {
	open  chan struct{}
	ended chan error
	res   *mcpclient.CallToolResult
	err   error
}

func newGate(res *mcpclient.CallToolResult, err error) *gate {
	return &gate{open: make(chan struct{}), ended: make(chan error, 1), res: res, err: err}
}

func (g *gate) tool(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	select {
	case <-g.open:
		return g.res, g.err
	case <-ctx.Done():
		select {
		case g.ended <- ctx.Err(): // the first call's end; a test looks at no other
		default:
		}
		return nil, ctx.Err()
	}
}

// A listenStream is an open subscriptions/listen.
type listenStream struct {
	frames chan map[string]json.RawMessage
}

// listenTasks opens subscriptions/listen for task ids; a refused one is answered at once, and
// reply is that answer.
func listenTasks(t *testing.T, srv *mcptest.HTTPServer, id int, m map[string]any, taskIDs ...string) (s listenStream, reply rpcReply) {
	t.Helper()
	body, _ := json.Marshal(request(id, "subscriptions/listen", map[string]any{"_meta": m, "notifications": map[string]any{"taskIds": taskIDs}}))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(string(body)))
	req.Header = headersFor("subscriptions/listen", "", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		defer resp.Body.Close()
		reply.Status = resp.StatusCode
		var f map[string]json.RawMessage
		if b, _ := io.ReadAll(resp.Body); json.Unmarshal(b, &f) == nil {
			reply.Frames = append(reply.Frames, f)
		}
		return s, reply
	}
	s.frames = make(chan map[string]json.RawMessage, 16)
	go func() {
		defer resp.Body.Close()
		defer close(s.frames)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var f map[string]json.RawMessage
				json.Unmarshal([]byte(data), &f)
				s.frames <- f
			}
		}
	}()
	return s, rpcReply{Status: resp.StatusCode}
}

func (s listenStream) next(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	select {
	case f := <-s.frames:
		return f
	case <-time.After(5 * time.Second):
		t.Fatal("no frame on the listen stream")
		return nil
	}
}

// awaitTaskStatus waits on s for the notifications/tasks of taskID and returns its params.
func (s listenStream) awaitTaskStatus(t *testing.T, taskID string) map[string]json.RawMessage {
	t.Helper()
	f := s.next(t)
	var params map[string]json.RawMessage
	if string(f["method"]) != `"notifications/tasks"` || json.Unmarshal(f["params"], &params) != nil || string(params["taskId"]) != `"`+taskID+`"` {
		t.Fatalf("listener got %s, want notifications/tasks of %s", show(f), taskID)
	}
	return params
}

func TestTasksExtensionDeclaredInDiscoverOnly(t *testing.T) {
	plain := statelessServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echoArgs))
	withTasks := statelessServer(t, taskTool("opt", tasks.SupportOptional, quick))
	for _, c := range []struct {
		srv  *mcptest.HTTPServer
		want bool
	}{{plain, false}, {withTasks, true}} {
		res := rpc(t, c.srv, 1, "server/discover", "", meta(nil), nil).result(t)
		var caps map[string]json.RawMessage
		json.Unmarshal(res["capabilities"], &caps)
		var exts map[string]json.RawMessage
		json.Unmarshal(caps["extensions"], &exts)
		if decl, ok := exts[tasksExt]; ok != c.want || (ok && string(decl) != "{}") {
			t.Errorf("task tools %v: extensions %s", c.want, caps["extensions"])
		}
		if _, ok := caps["tasks"]; ok {
			t.Errorf("server/discover declares capabilities.tasks %s: the stateless revisions have the extension instead", caps["tasks"])
		}
	}
	// A session of 2025-11-25 is told of tasks as that revision has them.
	c := mcptest.NewClient(t, withTasks, mcpclient.WithProtocolVersion(mcpclient.ProtocolVersion20251125))
	caps := c.ServerCapabilities()
	if got := tasks.CapabilitiesOf(caps); !got.ToolsCall {
		t.Errorf("initialize declares tasks %s", caps.Tasks)
	}
	if _, ok := caps.Extensions[tasksExt]; ok {
		t.Errorf("initialize declares the extension: %v", caps.Extensions)
	}
}

func TestTasksExtensionLifecycle(t *testing.T) {
	ok := newGate(&mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("done")}, Meta: json.RawMessage(`{"trace":"t1"}`)}, nil)
	toolErr := newGate(nil, errors.New("the tool failed"))
	protoErr := newGate(nil, mcptest.ProtocolError(mcpclient.RPCInternalError, "the backend is gone", nil))
	srv := statelessServer(t, mcptest.WithTaskPollInterval(250*time.Millisecond),
		taskTool("ok", tasks.SupportOptional, ok.tool), taskTool("toolErr", tasks.SupportOptional, toolErr.tool),
		taskTool("protoErr", tasks.SupportRequired, protoErr.tool))

	created := callTask(t, srv, 1, "ok", nil)
	id := taskIDOf(t, created)
	if string(created["status"]) != `"working"` || string(created["ttlMs"]) != "null" || string(created["pollIntervalMs"]) != "250" ||
		!strings.HasPrefix(string(created["createdAt"]), `"20`) || !strings.HasPrefix(string(created["lastUpdatedAt"]), `"20`) {
		t.Errorf("created %s", show(created))
	}
	for _, k := range []string{"task", "result", "error", "ttl", "pollInterval", "requestState"} {
		if _, has := created[k]; has {
			t.Errorf("CreateTaskResult carries %s: %s", k, show(created))
		}
	}
	got := taskRPC(t, srv, "tasks/get", id, nil).result(t)
	if string(got["resultType"]) != `"complete"` || string(got["taskId"]) != `"`+id+`"` || string(got["status"]) != `"working"` {
		t.Errorf("tasks/get of a working task %s", show(got))
	}
	if _, has := got["result"]; has {
		t.Errorf("a working task carries a result: %s", show(got))
	}

	// Each outcome, as the listener hears of it and as tasks/get tells it.
	outcomes := []struct {
		g      *gate
		tool   string
		id     string
		status string
		check  func(got map[string]json.RawMessage) bool
	}{
		{ok, "ok", id, "completed", func(got map[string]json.RawMessage) bool {
			// The tool's result as it was, with no related-task _meta.
			var res mcpclient.CallToolResult
			return json.Unmarshal(got["result"], &res) == nil && res.Text() == "done" && string(res.Meta) == `{"trace":"t1"}` && got["error"] == nil
		}},
		{toolErr, "toolErr", "", "completed", func(got map[string]json.RawMessage) bool {
			return strings.Contains(string(got["result"]), `"isError":true`) && got["error"] == nil
		}},
		{protoErr, "protoErr", "", "failed", func(got map[string]json.RawMessage) bool {
			return string(got["error"]) == `{"code":-32603,"message":"the backend is gone"}` && got["result"] == nil &&
				string(got["statusMessage"]) == `"the backend is gone"`
		}},
	}
	for i := range outcomes {
		o := &outcomes[i]
		if o.id == "" {
			o.id = taskIDOf(t, callTask(t, srv, 10+i, o.tool, nil))
		}
		l, _ := listenTasks(t, srv, 20+i, capsMeta(tasksExt), o.id)
		l.next(t) // the acknowledgement
		close(o.g.open)
		note := l.awaitTaskStatus(t, o.id)
		if string(note["status"]) != `"`+o.status+`"` || !o.check(note) {
			t.Errorf("%s: notifications/tasks %s", o.tool, show(note))
		}
		got := taskRPC(t, srv, "tasks/get", o.id, nil).result(t)
		if string(got["status"]) != `"`+o.status+`"` || !o.check(got) {
			t.Errorf("%s: tasks/get %s", o.tool, show(got))
		}
	}
}

func TestTasksExtensionCancelAndUpdate(t *testing.T) {
	g := newGate(nil, nil)
	srv := statelessServer(t, taskTool("wait", tasks.SupportOptional, g.tool))
	id := taskIDOf(t, callTask(t, srv, 1, "wait", nil))

	if r := taskRPC(t, srv, "tasks/update", id, map[string]any{"inputResponses": map[string]any{"unknown": map[string]any{"action": "accept"}}}); string(r.last()["result"]) != `{"resultType":"complete"}` {
		t.Errorf("tasks/update answered %d %s, want the empty acknowledgement", r.Status, show(r.last()))
	}
	for _, params := range []map[string]any{{}, {"inputResponses": []string{"x"}}} {
		if r := taskRPC(t, srv, "tasks/update", id, params); r.errorCode() != mcpclient.RPCInvalidParams {
			t.Errorf("tasks/update %v answered %s, want -32602", params, show(r.last()))
		}
	}
	for range 2 { // the second on a task that already ended
		if r := taskRPC(t, srv, "tasks/cancel", id, nil); r.Status != http.StatusOK || string(r.last()["result"]) != `{"resultType":"complete"}` {
			t.Errorf("tasks/cancel answered %d %s, want the empty acknowledgement", r.Status, show(r.last()))
		}
	}
	if err := <-g.ended; !errors.Is(err, context.Canceled) {
		t.Errorf("the tool's context ended with %v", err)
	}
	if got := taskRPC(t, srv, "tasks/get", id, nil).result(t); string(got["status"]) != `"cancelled"` || got["result"] != nil || got["error"] != nil {
		t.Errorf("tasks/get of a cancelled task %s", show(got))
	}

	for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		r := taskRPC(t, srv, method, "nosuch", map[string]any{"inputResponses": map[string]any{}})
		if r.Status != http.StatusOK || r.errorCode() != mcpclient.RPCInvalidParams {
			t.Errorf("%s of an unknown task: %d %s, want -32602", method, r.Status, show(r.last()))
		}
	}
	for _, method := range []string{"tasks/result", "tasks/list"} {
		r := rpc(t, srv, 1, method, "", capsMeta(tasksExt), map[string]any{"taskId": id})
		if r.Status != http.StatusNotFound || r.errorCode() != mcpclient.RPCMethodNotFound {
			t.Errorf("%s: %d %s, want 404 -32601: the extension has no such method", method, r.Status, show(r.last()))
		}
	}
}

// wantMissingTasks checks a refusal for want of the tasks extension.
func wantMissingTasks(t *testing.T, what string, r rpcReply) {
	t.Helper()
	var e struct {
		Code int64 `json:"code"`
		Data struct {
			Required struct {
				Extensions map[string]json.RawMessage `json:"extensions"`
			} `json:"requiredCapabilities"`
		} `json:"data"`
	}
	json.Unmarshal(r.last()["error"], &e)
	if r.Status != http.StatusBadRequest || e.Code != -32021 || string(e.Data.Required.Extensions[tasksExt]) != "{}" {
		t.Errorf("%s: %d %s, want 400 -32021 requiring the tasks extension", what, r.Status, r.last()["error"])
	}
}

func TestTasksExtensionNeedsTheRequestToOptIn(t *testing.T) {
	srv := statelessServer(t, taskTool("opt", tasks.SupportOptional, quick), taskTool("req", tasks.SupportRequired, quick),
		mcptest.WithTool(mcpclient.Tool{Name: "plain"}, quick))
	id := taskIDOf(t, callTask(t, srv, 1, "opt", nil))

	for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		r := rpc(t, srv, 2, method, id, capsMeta(), map[string]any{"taskId": id, "inputResponses": map[string]any{}})
		wantMissingTasks(t, method, r)
	}
	wantMissingTasks(t, "a tool that requires a task", rpc(t, srv, 3, "tools/call", "req", capsMeta(), map[string]any{"name": "req"}))
	_, refused := listenTasks(t, srv, 4, capsMeta(), id)
	wantMissingTasks(t, "listening to a task", refused)

	// Without the extension, a tool that may run as a task runs as a plain call; with it, a
	// tool that may not ignores the task param of 2025-11-25.
	for _, c := range []struct {
		tool string
		meta map[string]any
	}{{"opt", capsMeta()}, {"plain", capsMeta(tasksExt)}} {
		r := rpc(t, srv, 5, "tools/call", c.tool, c.meta, map[string]any{"name": c.tool, "arguments": map[string]any{"a": 1}, "task": map[string]any{"ttl": 1000}})
		res := r.result(t)
		if string(res["resultType"]) != `"complete"` || res["taskId"] != nil || !strings.Contains(string(res["content"]), `quick {\"a\":1}`) {
			t.Errorf("%s: %s, want a plain result", c.tool, show(res))
		}
	}
	if n := srv.Tasks(); n != 1 {
		t.Errorf("%d tasks, want the one that opted in", n)
	}

	// A server without task tools has no task methods.
	bare := statelessServer(t, mcptest.WithTool(mcpclient.Tool{Name: "plain"}, quick))
	if r := rpc(t, bare, 1, "tasks/get", "x", capsMeta(tasksExt), map[string]any{"taskId": "x"}); r.Status != http.StatusNotFound || r.errorCode() != mcpclient.RPCMethodNotFound {
		t.Errorf("tasks/get of a server without task tools: %d %s", r.Status, show(r.last()))
	}
}

func TestTasksExtensionTTL(t *testing.T) {
	srv := statelessServer(t, mcptest.WithTaskTTL(90*time.Second+time.Microsecond), taskTool("opt", tasks.SupportOptional, quick))
	id := taskIDOf(t, callTask(t, srv, 1, "opt", nil))
	if got := taskRPC(t, srv, "tasks/get", id, nil).result(t); string(got["ttlMs"]) != "90000" {
		t.Errorf("ttlMs %s, want the server's 90000", got["ttlMs"])
	}
}

func TestTasksExtensionListenGrantsKnownTasks(t *testing.T) {
	g := newGate(&mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("done")}}, nil)
	srv := statelessServer(t, taskTool("wait", tasks.SupportOptional, g.tool))
	id := taskIDOf(t, callTask(t, srv, 1, "wait", nil))
	l, _ := listenTasks(t, srv, 7, capsMeta(tasksExt), "nosuch", id, id)
	ack := l.next(t)
	var p struct {
		Notifications struct {
			TaskIDs []string `json:"taskIds"`
		} `json:"notifications"`
	}
	json.Unmarshal(ack["params"], &p)
	if string(ack["method"]) != `"notifications/subscriptions/acknowledged"` || strings.Join(p.Notifications.TaskIDs, ",") != id {
		t.Fatalf("acknowledgement %s, want the one known task granted", show(ack))
	}
	close(g.open)
	note := l.awaitTaskStatus(t, id)
	if string(note["status"]) != `"completed"` || !strings.Contains(string(note["_meta"]), `"io.modelcontextprotocol/subscriptionId":7`) {
		t.Errorf("notifications/tasks %s", show(note))
	}
}

func TestTasksExtensionReceiptsAndFaults(t *testing.T) {
	g := newGate(nil, nil)
	srv := statelessServer(t, taskTool("wait", tasks.SupportOptional, g.tool))
	both := capsMeta(tasksExt, receipts.ExtensionID)
	call := func(id string, m map[string]any) map[string]json.RawMessage {
		return rpc(t, srv, id, "tools/call", "wait", m, map[string]any{"name": "wait"}).result(t)
	}

	first, again := call("r1", both), call("r1", both)
	if taskIDOf(t, first) != taskIDOf(t, again) || srv.Tasks() != 1 {
		t.Errorf("a resend that opted into receipts got %s after %s; %d tasks", show(again), show(first), srv.Tasks())
	}
	call("n1", capsMeta(tasksExt))
	call("n1", capsMeta(tasksExt))
	if n := srv.Tasks(); n != 3 {
		t.Errorf("%d tasks, want two more for a request without receipts sent twice", n)
	}

	// The answer lost, the task stays; the resend under the same id finds it.
	srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "wait"})
	body, _ := json.Marshal(request("d1", "tools/call", map[string]any{"name": "wait", "_meta": both}))
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(string(body)))
	req.Header = headersFor("tools/call", "wait", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Fatalf("the exchange did not break: %d", resp.StatusCode)
		}
	}
	if n := srv.Tasks(); n != 4 {
		t.Fatalf("%d tasks after a lost answer, want 4", n)
	}
	resent := call("d1", both)
	if got := taskRPC(t, srv, "tasks/get", taskIDOf(t, resent), nil).result(t); string(got["status"]) != `"working"` || srv.Tasks() != 4 {
		t.Errorf("the resend got %s; %d tasks", show(got), srv.Tasks())
	}

	// Refused unread, nothing is created.
	srv.Inject(mcptest.Fault{Kind: mcptest.Fail, Tool: "wait"})
	if r := post(t, srv.URL, headersFor("tools/call", "wait", nil), request("f1", "tools/call", map[string]any{"name": "wait", "_meta": both})); r.Status != http.StatusServiceUnavailable || srv.Tasks() != 4 {
		t.Errorf("a refused call: %d, %d tasks", r.Status, srv.Tasks())
	}

	srv.Restart()
	if r := taskRPC(t, srv, "tasks/get", taskIDOf(t, first), nil); r.errorCode() != mcpclient.RPCInvalidParams || srv.Tasks() != 0 {
		t.Errorf("after a restart, tasks/get answered %s; %d tasks", show(r.last()), srv.Tasks())
	}
}

// TestTaskKindsStayApart: the tasks of a session revision and those of the extension share the
// store, but each kind is served only by its own methods.
func TestTaskKindsStayApart(t *testing.T) {
	srv := statelessServer(t, taskTool("opt", tasks.SupportOptional, quick))
	extID := taskIDOf(t, callTask(t, srv, 1, "opt", nil))
	c := mcptest.NewClient(t, srv, mcpclient.WithProtocolVersion(mcpclient.ProtocolVersion20251125))
	sessionTask, err := tasks.CallTool(context.Background(), c, "opt", nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tasks.Get(context.Background(), c, extID); err == nil {
		t.Error("a session read a task of the extension")
	}
	for task, err := range tasks.List(context.Background(), c) {
		if err != nil || task.TaskID != sessionTask.TaskID {
			t.Errorf("tasks/list lists %+v, %v; want only the session's task", task, err)
		}
	}
	if r := taskRPC(t, srv, "tasks/get", sessionTask.TaskID, nil); r.errorCode() != mcpclient.RPCInvalidParams {
		t.Errorf("the extension read a session's task: %s", show(r.last()))
	}
}
