package interop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/tasks"
	"github.com/northstar-mcp/mcpclient/transport"
)

// TestTSSDKTasks runs the tasks extension (io.modelcontextprotocol/tasks) against a server that
// the TypeScript SDK v2 serves over Streamable HTTP (testdata/ts-sdk-tasks-server.mjs): the task
// handle and its polling (package tasks), Client.CallTool following a task, input asked of the
// client through tasks/get and answered through tasks/update, cancellation and failure. The SDK
// checks, before the script's handlers run, that every tasks/get, tasks/update and tasks/cancel
// carries an Mcp-Name header mirroring params.taskId, and refuses the ones that do not with
// -32020 (HTTP 400): an independent check of the client's headers.
func TestTSSDKTasks(t *testing.T) {
	dir, err := tsSDKDir()
	if err != nil {
		t.Skipf("@modelcontextprotocol/server unavailable (needs node and npm, and the npm registry on first use): %v", err)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "ts-sdk-tasks-server.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	noOrphans(t)

	cb := newCombo(t, "ts-sdk "+tsSDKVersionToUse()+" tasks extension", "streamable-http", "server's choice")
	url := startListening(t, cb, exec.Command("node", script, dir, "0")) + "/mcp"
	cb.wire = &wireLog{}
	hc := cb.wire.client(t)
	posts := &postLog{base: hc.Transport}
	hc.Transport = posts

	var asked atomic.Int32
	c, _, err := cb.connect(t, &transport.HTTP{URL: url, Client: hc},
		mcpclient.WithElicitationHandler(func(_ context.Context, p *mcpclient.ElicitParams) (*mcpclient.ElicitResult, error) {
			asked.Add(1)
			if p.Message != "Who is there?" {
				return &mcpclient.ElicitResult{Action: mcpclient.ElicitDecline}, nil
			}
			return &mcpclient.ElicitResult{Action: mcpclient.ElicitAccept, Content: map[string]any{"name": "Ada"}}, nil
		}))
	if err != nil {
		t.Fatalf("Connect: %s\nHTTP exchanges:\n%s", errorChain(err), cb.wire.since(0))
	}
	cb.setNegotiated(c.ProtocolVersion())

	cb.check("server/discover declares the extension", func(t *testing.T) {
		if got := c.ProtocolVersion(); got != mcpclient.ProtocolVersion20260728 {
			t.Fatalf("ProtocolVersion() = %q, want %q", got, mcpclient.ProtocolVersion20260728)
		}
		if _, ok := c.ServerCapabilities().Extensions[tasks.Extension]; !ok {
			t.Errorf("capabilities.extensions = %v, want %s", c.ServerCapabilities().Extensions, tasks.Extension)
		}
	})

	cb.check("tasks.CallTool, Get, Await", func(t *testing.T) {
		ctx := ctxFor(t)
		task, err := tasks.CallTool(ctx, c, "echo_later", map[string]string{"message": "handle"}, 0)
		if err != nil {
			t.Fatalf("CallTool: %s", errorChain(err))
		}
		if task.TaskID == "" || task.Status != tasks.Working || task.PollIntervalDuration() != 20*time.Millisecond {
			t.Errorf("created %+v, want a working task polled every 20ms", task)
		}
		if d, limited := task.TTLDuration(); !limited || d != time.Minute {
			t.Errorf("ttl %v (limited %v), want the server's minute", d, limited)
		}
		res, err := tasks.Await(ctx, c, task.TaskID)
		if err != nil || res.IsError || res.Text() != "Echo: handle" {
			t.Fatalf("Await: %+v, %s", res, errorChain(err))
		}
		done, err := tasks.Get(ctx, c, task.TaskID)
		if err != nil || done.Status != tasks.Completed {
			t.Fatalf("Get after Await: %+v, %s", done, errorChain(err))
		}
		if r, err := done.ToolResult(); err != nil || r.Text() != "Echo: handle" {
			t.Errorf("ToolResult of the completed task: %+v, %v", r, err)
		}
	})

	cb.check("Client.CallTool follows a task when the call declares the extension", func(t *testing.T) {
		ctx := ctxFor(t)
		start := posts.len()
		res, err := c.CallTool(ctx, "echo_later", map[string]string{"message": "followed"}, mcpclient.WithExtension(tasks.Extension, nil))
		if err != nil || res.Text() != "Echo: followed" {
			t.Fatalf("CallTool declaring the extension: %+v, %s", res, errorChain(err))
		}
		if gets := posts.count(start, "tasks/get", ""); gets < 2 {
			t.Errorf("%d tasks/get, want the task polled to its end (the server completes it after the 2nd)", gets)
		}
		start = posts.len()
		res, err = c.CallTool(ctx, "echo_later", map[string]string{"message": "plain"})
		if err != nil || res.Text() != "Echo: plain" {
			t.Fatalf("CallTool without the extension: %+v, %s", res, errorChain(err))
		}
		if gets := posts.count(start, "tasks/get", ""); gets != 0 {
			t.Errorf("%d tasks/get after a call that declared nothing, want none: the server answers it at once", gets)
		}
		// The spec wants -32021 here, but McpServer turns whatever a tool handler throws into an
		// isError result (see the script): the client sees the refusal as the tool's answer.
		res, err = c.CallTool(ctx, "greet", noArgs)
		if err != nil || !res.IsError || !strings.Contains(res.Text(), "Missing required client capability") {
			t.Errorf("CallTool of a tool that only runs as a task, without the extension: %+v, %v; want the refusal", res, err)
		}
	})

	// The server shows the elicitation once more on the poll after tasks/update acknowledged it
	// (the acknowledgement is eventually consistent): the client must not answer it twice.
	inputOnce := func(t *testing.T, what string, run func(ctx context.Context) (*mcpclient.CallToolResult, string, error)) {
		ctx := ctxFor(t)
		before := asked.Load()
		start := posts.len()
		res, taskID, err := run(ctx)
		if err != nil || res.IsError || res.Text() != "Hello, Ada!" {
			t.Fatalf("%s: %+v, %s", what, res, errorChain(err))
		}
		if n := asked.Load() - before; n != 1 {
			t.Errorf("the elicitation handler was asked %d times, want once", n)
		}
		if taskID == "" {
			taskID = posts.taskOf(start, "tasks/update")
		}
		if n := posts.answered(start, "tasks/get", taskID, `"status":"input_required"`); n < 2 {
			t.Errorf("%d tasks/get showed task %s input_required, want the request shown again after its answer", n, taskID)
		}
		if n := posts.count(start, "tasks/update", taskID); n != 1 {
			t.Errorf("%d tasks/update for task %s, want one", n, taskID)
		}
		var seen struct {
			Updates int            `json:"updates"`
			Answers map[string]int `json:"answers"`
			Dropped []string       `json:"dropped"`
		}
		stats := callTool(t, c, "stats", map[string]string{"taskId": taskID})
		if err := json.Unmarshal(stats.StructuredContent, &seen); err != nil {
			t.Fatalf("stats: %s: %v", stats.StructuredContent, err)
		}
		key := "name-" + taskID[:min(8, len(taskID))]
		if seen.Updates != 1 || len(seen.Answers) != 1 || seen.Answers[key] != 1 || len(seen.Dropped) != 0 {
			t.Errorf("the server saw %s, want one tasks/update answering %s once, as a bare result", stats.StructuredContent, key)
		}
	}
	cb.check("input_required: tasks.Await answers the elicitation once, by tasks/update", func(t *testing.T) {
		inputOnce(t, "Await", func(ctx context.Context) (*mcpclient.CallToolResult, string, error) {
			task, err := tasks.CallTool(ctx, c, "greet", nil, 0)
			if err != nil {
				return nil, "", err
			}
			res, err := tasks.Await(ctx, c, task.TaskID)
			return res, task.TaskID, err
		})
	})
	cb.check("input_required: Client.CallTool answers the elicitation once, by tasks/update", func(t *testing.T) {
		inputOnce(t, "CallTool", func(ctx context.Context) (*mcpclient.CallToolResult, string, error) {
			res, err := c.CallTool(ctx, "greet", noArgs, mcpclient.WithExtension(tasks.Extension, nil))
			return res, "", err
		})
	})

	cb.check("tasks.Cancel, then Await: ErrCancelled", func(t *testing.T) {
		ctx := ctxFor(t)
		task, err := tasks.CallTool(ctx, c, "endless", nil, 0)
		if err != nil {
			t.Fatalf("CallTool: %s", errorChain(err))
		}
		st, err := tasks.Cancel(ctx, c, task.TaskID)
		if err != nil || st.TaskID != task.TaskID {
			t.Fatalf("Cancel: %+v, %s", st, errorChain(err))
		}
		cb.note("after tasks/cancel, tasks/get shows the task %s", st.Status)
		_, err = tasks.Await(ctx, c, task.TaskID)
		var te *tasks.Error
		if !errors.Is(err, tasks.ErrCancelled) || !errors.As(err, &te) || te.Task.StatusMessage != "cancelled by the client" {
			t.Errorf("Await of the cancelled task: %s, want ErrCancelled with the server's statusMessage", errorChain(err))
		}
	})

	cb.check("a failed task: ErrFailed with its JSON-RPC error", func(t *testing.T) {
		ctx := ctxFor(t)
		task, err := tasks.CallTool(ctx, c, "explode", nil, 0)
		if err != nil {
			t.Fatalf("CallTool: %s", errorChain(err))
		}
		_, err = tasks.Await(ctx, c, task.TaskID)
		var te *tasks.Error
		if r := rpcErrorOf(err); !errors.Is(err, tasks.ErrFailed) || !errors.As(err, &te) || te.Task.TaskID != task.TaskID ||
			r == nil || r.Code != mcpclient.RPCInternalError || r.Message != "backend unavailable" {
			t.Errorf("Await of the failed task: %s, want ErrFailed with -32603 \"backend unavailable\"", errorChain(err))
		}
		_, err = c.CallTool(ctx, "explode", noArgs, mcpclient.WithExtension(tasks.Extension, nil))
		if r := rpcErrorOf(err); mcpclient.CodeOf(err) != mcpclient.CodeServerError || r == nil || r.Code != mcpclient.RPCInternalError {
			t.Errorf("Client.CallTool following the failed task: %s, want CodeServerError with -32603", errorChain(err))
		}
	})

	// Task ids are the server's to choose. Ones that a header cannot carry as they are go in
	// Mcp-Name as =?base64?…?=, which the SDK decodes before comparing: a mismatch is -32020, a
	// match reaches the handler, which does not know the task (-32602).
	unknownIDs := []string{"tâche nº1", " padded ", "=?base64?Zm9v?="}
	cb.check("tasks/get of ids a header cannot carry plainly: Mcp-Name encoded, the task not found", func(t *testing.T) {
		for _, id := range unknownIDs {
			start := posts.len()
			_, err := tasks.Get(ctxFor(t), c, id)
			for _, p := range posts.all()[start:] {
				if p.method == "tasks/get" && !strings.HasPrefix(p.mcpName, "=?base64?") {
					t.Errorf("tasks/get of %q sent Mcp-Name %q, want it Base64-encoded", id, p.mcpName)
				}
			}
			var e *mcpclient.Error
			if r := rpcErrorOf(err); r == nil || r.Code != mcpclient.RPCInvalidParams || !errors.As(err, &e) || e.Attempts != 1 {
				t.Errorf("Get(%q): %s, want -32602 (task not found) at the first attempt", id, errorChain(err))
			}
		}
	})

	cb.check("the SDK accepted the headers of every tasks/* request", func(t *testing.T) {
		counts := map[string]int{}
		for _, p := range posts.all() {
			if strings.Contains(p.answer, `"code":-32020`) {
				t.Errorf("%s %q answered -32020 (header mismatch): %s", p.method, p.taskID, p.answer)
			}
			if !strings.HasPrefix(p.method, "tasks/") || slices.Contains(unknownIDs, p.taskID) {
				continue
			}
			counts[p.method]++
			if p.mcpName != p.taskID || p.mcpMethod != p.method || p.taskID == "" {
				t.Errorf("%s of task %q sent Mcp-Method %q, Mcp-Name %q", p.method, p.taskID, p.mcpMethod, p.mcpName)
			}
			var answer struct {
				Result json.RawMessage `json:"result"`
			}
			if p.status != http.StatusOK || json.Unmarshal([]byte(p.answer), &answer) != nil || answer.Result == nil {
				t.Errorf("%s of task %s answered HTTP %d: %s; want a JSON result", p.method, p.taskID, p.status, p.answer)
			}
		}
		for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			if counts[m] == 0 {
				t.Errorf("no %s was sent", m)
			}
		}
		cb.note("tasks/get %d, tasks/update %d, tasks/cancel %d, each with Mcp-Name = params.taskId, all accepted",
			counts["tasks/get"], counts["tasks/update"], counts["tasks/cancel"])
	})
}

func rpcErrorOf(err error) *mcpclient.RPCError {
	var r *mcpclient.RPCError
	if errors.As(err, &r) {
		return r
	}
	return nil
}

// postLog records, for each JSON-RPC request the client POSTs, the standard headers that route
// it, what its body says, and the answer: to check the headers against the body, and to count
// the requests of a task.
type postLog struct {
	base http.RoundTripper
	mu   sync.Mutex
	list []*postRecord
}

type post struct {
	method, taskID     string // from the body
	mcpMethod, mcpName string // the headers
	status             int
	answer             string // the answer's body, as far as the client read it
}

// postRecord is a post being recorded: its answer is read after RoundTrip returns.
type postRecord struct {
	post
	mu   sync.Mutex
	body bytes.Buffer
}

const postAnswerLimit = 64 << 10

func (pl *postLog) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || req.GetBody == nil {
		return pl.base.RoundTrip(req)
	}
	rc, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(rc)
	rc.Close()
	var msg struct {
		Method string `json:"method"`
		Params struct {
			TaskID string `json:"taskId"`
		} `json:"params"`
	}
	json.Unmarshal(body, &msg) // a response or notification records an empty method
	p := &postRecord{post: post{method: msg.Method, taskID: msg.Params.TaskID,
		mcpMethod: req.Header.Get("Mcp-Method"), mcpName: req.Header.Get("Mcp-Name")}}
	pl.mu.Lock()
	pl.list = append(pl.list, p)
	pl.mu.Unlock()
	resp, err := pl.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.status = resp.StatusCode
	p.mu.Unlock()
	resp.Body = &answerTee{ReadCloser: resp.Body, p: p}
	return resp, nil
}

type answerTee struct {
	io.ReadCloser
	p *postRecord
}

func (a *answerTee) Read(b []byte) (int, error) {
	n, err := a.ReadCloser.Read(b)
	if n > 0 {
		a.p.mu.Lock()
		if room := postAnswerLimit - a.p.body.Len(); room > 0 {
			a.p.body.Write(b[:min(n, room)])
		}
		a.p.mu.Unlock()
	}
	return n, err
}

func (pl *postLog) len() int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return len(pl.list)
}

// all returns copies of the records, with the answers read so far.
func (pl *postLog) all() []post {
	pl.mu.Lock()
	list := append([]*postRecord(nil), pl.list...)
	pl.mu.Unlock()
	out := make([]post, 0, len(list))
	for _, p := range list {
		p.mu.Lock()
		rec := p.post
		rec.answer = p.body.String()
		p.mu.Unlock()
		out = append(out, rec)
	}
	return out
}

// count counts the requests of method since the start-th, of task taskID ("" for any task).
func (pl *postLog) count(start int, method, taskID string) int {
	n := 0
	for _, p := range pl.all()[start:] {
		if p.method == method && (taskID == "" || p.taskID == taskID) {
			n++
		}
	}
	return n
}

// answered counts the requests of method for task taskID since the start-th whose answer
// contains s.
func (pl *postLog) answered(start int, method, taskID, s string) int {
	n := 0
	for _, p := range pl.all()[start:] {
		if p.method == method && p.taskID == taskID && strings.Contains(p.answer, s) {
			n++
		}
	}
	return n
}

// taskOf returns the task of the first request of method since the start-th.
func (pl *postLog) taskOf(start int, method string) string {
	for _, p := range pl.all()[start:] {
		if p.method == method {
			return p.taskID
		}
	}
	return ""
}
