package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// tasksClient speaks the tasks extension of the stateless revision to a server, as the
// conformance suite does: each request declares elicitation and the extension.
type tasksClient struct {
	t   *testing.T
	url string
}

func newTasksClient(t *testing.T) tasksClient {
	srv := mcptest.NewTestHTTPServer(t, append([]mcptest.Option{
		mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728, mcpclient.ProtocolVersion20251125),
	}, taskFixtures()...)...)
	return tasksClient{t, srv.URL}
}

func (c tasksClient) request(id int, method, name string, params map[string]any) *http.Request {
	c.t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion": mcpclient.ProtocolVersion20260728,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{
			"elicitation": map[string]any{},
			"extensions":  map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}},
		},
		"io.modelcontextprotocol/clientInfo": map[string]any{"name": "tasks-test", "version": "1"},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	req, err := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", mcpclient.ProtocolVersion20260728)
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	return req
}

// call sends a request and returns its result; an error answer fails the test.
func (c tasksClient) call(id int, method, name string, params map[string]any) map[string]json.RawMessage {
	c.t.Helper()
	resp, err := http.DefaultClient.Do(c.request(id, method, name, params))
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		Result map[string]json.RawMessage `json:"result"`
		Error  json.RawMessage            `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || answer.Result == nil {
		c.t.Fatalf("%s %s: %d %v %s", method, name, resp.StatusCode, err, answer.Error)
	}
	return answer.Result
}

// listen opens subscriptions/listen for a task; its notifications/tasks arrive on the channel.
func (c tasksClient) listen(taskID string) <-chan map[string]json.RawMessage {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c.t.Cleanup(cancel)
	req := c.request(99, "subscriptions/listen", "", map[string]any{"notifications": map[string]any{"taskIds": []string{taskID}}})
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		c.t.Fatal(err)
	}
	notes := make(chan map[string]json.RawMessage, 16)
	go func() {
		defer resp.Body.Close()
		defer close(notes)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			var frame struct {
				Method string                     `json:"method"`
				Params map[string]json.RawMessage `json:"params"`
			}
			if ok && json.Unmarshal([]byte(data), &frame) == nil && frame.Method == "notifications/tasks" {
				notes <- frame.Params
			}
		}
	}()
	return notes
}

// awaitStatus returns the task once it is in status (as tasks/get tells it, or a notification on
// notes after it).
func (c tasksClient) awaitStatus(taskID, status string, notes <-chan map[string]json.RawMessage) map[string]json.RawMessage {
	c.t.Helper()
	task := c.call(1, "tasks/get", taskID, map[string]any{"taskId": taskID})
	for string(task["status"]) != `"`+status+`"` {
		select {
		case task = <-notes:
		case <-time.After(5 * time.Second):
			c.t.Fatalf("task %s is %s, not %s", taskID, task["status"], status)
		}
	}
	return task
}

func (c tasksClient) update(taskID string, responses map[string]any) {
	c.t.Helper()
	if ack := c.call(2, "tasks/update", taskID, map[string]any{"taskId": taskID, "inputResponses": responses}); len(ack) != 1 {
		c.t.Errorf("tasks/update acknowledged with %v", ack)
	}
}

func inputKeys(task map[string]json.RawMessage) []string {
	var reqs map[string]json.RawMessage
	json.Unmarshal(task["inputRequests"], &reqs)
	return slices.Sorted(maps.Keys(reqs))
}

func resultText(t *testing.T, task map[string]json.RawMessage) string {
	t.Helper()
	var res mcpclient.CallToolResult
	if err := json.Unmarshal(task["result"], &res); err != nil {
		t.Fatalf("task %v has no result", task)
	}
	return res.Text()
}

func accept(content map[string]any) map[string]any {
	return map[string]any{"action": "accept", "content": content}
}

// TestTaskFixturesAskForInput: the fixtures that ask for input inside their task wait in
// input_required until tasks/update answers every request, then complete with the answers.
func TestTaskFixturesAskForInput(t *testing.T) {
	c := newTasksClient(t)

	id := c.call(1, "tools/call", "confirm_delete", map[string]any{"name": "confirm_delete", "arguments": map[string]any{"filename": "a.txt"}})["taskId"]
	var confirm string
	json.Unmarshal(id, &confirm)
	notes := c.listen(confirm)
	task := c.awaitStatus(confirm, "input_required", notes)
	keys := inputKeys(task)
	if len(keys) != 1 {
		t.Fatalf("confirm_delete waits on %v, want one request", keys)
	}
	c.update(confirm, map[string]any{keys[0]: accept(map[string]any{"confirm": true})})
	if got := resultText(t, c.awaitStatus(confirm, "completed", notes)); got != "deleted a.txt" {
		t.Errorf("confirm_delete: %q", got)
	}

	id = c.call(3, "tools/call", "multi_input", map[string]any{"name": "multi_input", "arguments": map[string]any{}})["taskId"]
	var multi string
	json.Unmarshal(id, &multi)
	notes = c.listen(multi)
	if keys := inputKeys(c.awaitStatus(multi, "input_required", notes)); !slices.Equal(keys, []string{"first", "second"}) {
		t.Fatalf("multi_input waits on %v, want two requests", keys)
	}
	c.update(multi, map[string]any{"first": accept(map[string]any{"name": "Ada", "confirm": true})})
	if task := c.call(4, "tasks/get", multi, map[string]any{"taskId": multi}); string(task["status"]) != `"input_required"` || !slices.Equal(inputKeys(task), []string{"second"}) {
		t.Errorf("multi_input after one answer: %s %v", task["status"], inputKeys(task))
	}
	c.update(multi, map[string]any{"second": accept(map[string]any{"name": "Bob", "confirm": true})})
	if got := resultText(t, c.awaitStatus(multi, "completed", notes)); got != `first "Ada", second "Bob"` {
		t.Errorf("multi_input: %q", got)
	}
}

// TestTaskFixtureAsksBeforeItsTask: test_tool_with_task asks the user's name by a multi
// round-trip request, then answers the last round with its task, which greets the user.
func TestTaskFixtureAsksBeforeItsTask(t *testing.T) {
	c := newTasksClient(t)
	params := map[string]any{"name": "test_tool_with_task", "arguments": map[string]any{}}
	round1 := c.call(1, "tools/call", "test_tool_with_task", params)
	var reqs map[string]json.RawMessage
	json.Unmarshal(round1["inputRequests"], &reqs)
	if string(round1["resultType"]) != `"input_required"` || reqs["user_name"] == nil || round1["taskId"] != nil {
		t.Fatalf("round 1: %v, want input_required asking user_name", round1)
	}
	params["inputResponses"] = map[string]any{"user_name": accept(map[string]any{"name": "Alice"})}
	params["requestState"] = round1["requestState"]
	round2 := c.call(2, "tools/call", "test_tool_with_task", params)
	var id string
	if json.Unmarshal(round2["taskId"], &id) != nil || string(round2["resultType"]) != `"task"` || round2["requestState"] != nil {
		t.Fatalf("round 2: %v, want the task", round2)
	}
	if got := resultText(t, c.awaitStatus(id, "completed", c.listen(id))); got != "Hello, Alice!" {
		t.Errorf("the task's result: %q", got)
	}
}
