package mcpclient

// The tasks extension (io.modelcontextprotocol/tasks) of the stateless revisions, where the
// client's own calls meet it. A request that declares the extension (WithExtension, for the
// client or for that request) lets the server answer a tools/call with a task, resultType
// "task", instead of the tool's result: that answer ends the request (the ledger records it
// answered; a resend under the same id to a server keeping receipts gets the same task back).
// Any other request answered so is answered wrongly, as the extension says.
//
// Two things follow from the answer. CallTool, whose caller wants the tool's result, follows the
// task to its end: it polls tasks/get at the interval the server suggests and returns the result
// or error the task ends with. And every tasks/get whose answer shows the task waiting for input
// gets the client's answers to it (tasks/update), from the same handlers that answer the
// server's own requests (elicitation, sampling, roots), each request of a task once: the
// package tasks, which follows tasks for callers that keep the handle, relies on that.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// tasksExtension is the identifier of the tasks extension.
const tasksExtension = "io.modelcontextprotocol/tasks"

// taskMethod reports whether method is one of the tasks extension's, whose params name a task.
func taskMethod(method string) bool {
	switch method {
	case "tasks/get", "tasks/update", "tasks/cancel":
		return true
	}
	return false
}

// acceptsTask reports whether req may be answered with a task: a tools/call, the one method the
// extension augments, that declares the extension.
func (c *Client) acceptsTask(req *Request) bool {
	return req.method == "tools/call" && c.declares(req, tasksExtension)
}

// isTaskAnswer reports whether a result is a task (resultType "task"): read only for a request
// that may be answered so, since reading it scans the whole result.
func isTaskAnswer(result json.RawMessage) bool {
	rt, _ := resultTypeOf(result)
	return rt == "task"
}

// defaultTaskPoll is the wait between two polls of a task whose server suggests none.
const defaultTaskPoll = time.Second

// A taskState is a task as tasks/get (and the answer that created it) carries it, as far as the
// client's own calls read it.
type taskState struct {
	TaskID         string                     `json:"taskId"`
	Status         string                     `json:"status"`
	StatusMessage  string                     `json:"statusMessage"`
	PollIntervalMs *int64                     `json:"pollIntervalMs"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests"`
	Result         json.RawMessage            `json:"result"`
	Error          *RPCError                  `json:"error"`
}

func (t *taskState) terminal() bool {
	switch t.Status {
	case "completed", "failed", "cancelled":
		return true
	}
	return false
}

// followTask polls the task that answered call (a tools/call answered with a task) until it ends
// and returns what it ended with: the tool's result, or the error that failed it (CodeServerError,
// the *RPCError in the chain) or the note that it was cancelled (CodeServerError). When ctx ends
// first, or the task cannot be read any more, the call's outcome is unknown: the task may go on
// at the server, and the error names both the call and the task.
func (c *Client) followTask(ctx context.Context, call *Response) (*Response, error) {
	var t taskState
	if err := json.Unmarshal(call.Result, &t); err != nil || t.TaskID == "" {
		return nil, &Error{Code: CodeProtocol, Request: call.Request, Attempts: call.Attempts,
			Err: errors.New("the tools/call answer is a task without a taskId")}
	}
	id := t.TaskID
	unknown := func(err error) error {
		return &Error{Code: CodeOutcomeUnknown, Request: call.Request, Attempts: call.Attempts,
			Err: fmt.Errorf("the tool runs as task %s, last seen %s: %w", id, t.Status, err)}
	}
	base, _ := json.Marshal(struct {
		TaskID string `json:"taskId"`
	}{id}) // a Go string always marshals
	for polls := 0; ; polls++ {
		if polls > 0 || !t.terminal() {
			wait := defaultTaskPoll
			if t.PollIntervalMs != nil && *t.PollIntervalMs > 0 {
				wait = time.Duration(*t.PollIntervalMs) * time.Millisecond
			}
			timer := time.NewTimer(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				return nil, unknown(context.Cause(ctx))
			}
		}
		get, err := c.build(requestSpec{method: "tasks/get", base: base, name: id,
			version: call.Request.version, extensions: call.Request.extensions})
		if err != nil {
			return nil, err
		}
		resp, err := c.rounds(ctx, get)
		if err != nil {
			return nil, unknown(err)
		}
		var next taskState
		if err := json.Unmarshal(resp.Result, &next); err != nil || next.TaskID != id {
			return nil, unknown(&Error{Code: CodeProtocol, Request: get, Attempts: resp.Attempts,
				Err: fmt.Errorf("tasks/get answered for task %q with no task %s", next.TaskID, id)})
		}
		t = next
		if !t.terminal() {
			continue
		}
		switch t.Status {
		case "completed":
			if len(t.Result) == 0 {
				return nil, &Error{Code: CodeProtocol, Request: get, Attempts: resp.Attempts,
					Err: fmt.Errorf("task %s completed without a result", id)}
			}
			return &Response{Request: call.Request, Result: t.Result, Attempts: call.Attempts, Replayed: call.Replayed}, nil
		case "failed":
			if t.Error == nil {
				return nil, &Error{Code: CodeProtocol, Request: get, Attempts: resp.Attempts,
					Err: fmt.Errorf("task %s failed without an error", id)}
			}
			return nil, &Error{Code: CodeServerError, Request: call.Request, Attempts: call.Attempts,
				Err: fmt.Errorf("task %s failed: %w", id, t.Error)}
		}
		msg := ""
		if t.StatusMessage != "" {
			msg = ": " + t.StatusMessage
		}
		return nil, &Error{Code: CodeServerError, Request: call.Request, Attempts: call.Attempts,
			Err: fmt.Errorf("task %s was cancelled%s", id, msg)}
	}
}

// answerTaskInputs answers, when a tasks/get shows its task waiting for input, the requests the
// client has handlers for and has not answered yet, with one tasks/update. A request the client
// has no handler for is left to the caller (package tasks offers Update). When a handler or the
// update fails, its requests may be put to the handlers again by a later poll.
func (c *Client) answerTaskInputs(ctx context.Context, get *Request, result json.RawMessage) error {
	var t taskState
	if json.Unmarshal(result, &t) != nil || t.TaskID == "" {
		return nil // the caller's decoding says what is wrong with it
	}
	if t.terminal() {
		c.taskInputs.forget(t.TaskID)
		return nil
	}
	if t.Status != "input_required" || len(t.InputRequests) == 0 {
		return nil
	}
	candidates := make([]string, 0, len(t.InputRequests))
	for key, raw := range t.InputRequests {
		if in, err := inputRequestOf(raw); err == nil && c.answers(in.Method) {
			candidates = append(candidates, key)
		}
	}
	keys := c.taskInputs.claim(t.TaskID, candidates)
	if len(keys) == 0 {
		return nil
	}
	answered := false
	defer func() {
		if !answered {
			c.taskInputs.release(t.TaskID, keys)
		}
	}()
	responses := make(map[string]json.RawMessage, len(keys))
	for _, key := range keys {
		b, err := c.answerInput(ctx, get, key, t.InputRequests[key])
		if err != nil {
			return err
		}
		responses[key] = b
	}
	base, _ := json.Marshal(struct {
		TaskID         string                     `json:"taskId"`
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}{t.TaskID, responses}) // raw values that marshalled once
	update, err := c.build(requestSpec{method: "tasks/update", base: base, name: t.TaskID,
		version: get.version, extensions: get.extensions})
	if err != nil {
		return err
	}
	if _, err := c.rounds(ctx, update); err != nil {
		return err
	}
	answered = true
	return nil
}

// maxTasksRemembered bounds the tasks whose answered input requests the client remembers; the
// task remembered longest is forgotten first (at worst, its requests are put to the handlers
// once more and the server ignores the second answers).
const maxTasksRemembered = 1024

// taskInputs remembers, by task, the keys of the input requests the client answered or is
// answering: a poll that shows them again before the server took the answers in must not put
// them to the handlers (a person, often) twice, and two polls at once must not both answer.
type taskInputs struct {
	mu sync.Mutex
	// held is nil until a poll claims a key: most clients never follow a task. guarded by mu.
	held *taskInputsHeld
}

type taskInputsHeld struct {
	keys  map[string]map[string]bool // task id → keys answered or being answered
	order []string                   // task ids, oldest first
}

// claim returns the keys among candidates no poll has answered or is answering, now claimed.
func (ti *taskInputs) claim(taskID string, candidates []string) []string {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	var done map[string]bool
	if ti.held != nil {
		done = ti.held.keys[taskID]
	}
	var fresh []string
	for _, key := range candidates {
		if !done[key] {
			fresh = append(fresh, key)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	if ti.held == nil {
		ti.held = &taskInputsHeld{keys: make(map[string]map[string]bool)}
	}
	h := ti.held
	if done == nil {
		if len(h.order) >= maxTasksRemembered {
			delete(h.keys, h.order[0])
			h.order = h.order[1:]
		}
		done = make(map[string]bool, len(fresh))
		h.keys[taskID] = done
		h.order = append(h.order, taskID)
	}
	for _, key := range fresh {
		done[key] = true
	}
	return fresh
}

// release lets keys be answered again: their answers did not reach the server.
func (ti *taskInputs) release(taskID string, keys []string) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	if ti.held == nil {
		return
	}
	for _, key := range keys {
		delete(ti.held.keys[taskID], key)
	}
}

// forget drops what the client remembers of a task that ended.
func (ti *taskInputs) forget(taskID string) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	h := ti.held
	if h == nil {
		return
	}
	if _, ok := h.keys[taskID]; !ok {
		return
	}
	delete(h.keys, taskID)
	for i, id := range h.order {
		if id == taskID {
			h.order = append(h.order[:i], h.order[i+1:]...)
			break
		}
	}
}
