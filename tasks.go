package mcpclient

// Tasks (MCP 2025-11-25, experimental): the client as the requestor of task-augmented
// tools/call.
//
// A task-augmented tools/call (CallToolTask) is answered at once with a Task, the server's
// handle on work that goes on in the background; the client polls it (GetTask, AwaitTask),
// fetches its result (TaskResult), lists (ListTasks) or cancels (CancelTask) it. The request
// that creates a task is a tools/call like any other: its id, ledger entry and retry rules are
// CallTool's, and a server that keeps receipts answers a resend under the same id with the same
// Task, without creating a second one. The task requests themselves are read-only (tasks/get,
// tasks/list, tasks/result) or idempotent (tasks/cancel), so that re-issuing one after an
// uncertain attempt does no harm.
//
// A tool whose listing says execution.taskSupport "required" must be called with CallToolTask:
// CallTool sends it as a plain request, which such a server refuses with JSON-RPC -32601
// (CallTool then returns CodeServerError with that *RPCError). Tools that declare "forbidden",
// or nothing, cannot be called as tasks; CallToolTask refuses them locally.
//
// Tasks are in revision 2025-11-25 only: on a 2026-07-28 session the task methods are refused
// before sending (ErrMethodRemoved).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/northstar-mcp/mcpclient/internal/metakeys"
)

// TaskStatus is the state of a task.
type TaskStatus string

// The task statuses. A task starts working; it may go to input_required and back; it ends in
// one of the terminal statuses completed, failed or cancelled and never leaves it.
const (
	// TaskWorking: the request is being processed.
	TaskWorking TaskStatus = "working"
	// TaskInputRequired: the server waits for the client's answer to a request of its own
	// (elicitation, sampling, ...), which reaches the client's handlers.
	TaskInputRequired TaskStatus = "input_required"
	// TaskCompleted: the request completed; TaskResult returns its result.
	TaskCompleted TaskStatus = "completed"
	// TaskFailed: the request failed, with a JSON-RPC error or, for a tool, an isError result.
	TaskFailed TaskStatus = "failed"
	// TaskCancelled: the task was cancelled before it completed.
	TaskCancelled TaskStatus = "cancelled"
)

// The values of ToolExecution.TaskSupport.
const (
	// TaskSupportRequired: the tool must be called as a task (CallToolTask).
	TaskSupportRequired = "required"
	// TaskSupportOptional: the tool may be called as a task or as a plain request.
	TaskSupportOptional = "optional"
	// TaskSupportForbidden (also meant by an absent value): the tool cannot be a task.
	TaskSupportForbidden = "forbidden"
)

// DefaultTaskPollInterval is how long AwaitTask waits between two tasks/get when the server
// suggests no pollInterval, unless WithTaskPollInterval says otherwise.
const DefaultTaskPollInterval = time.Second

// Task is the state of a task, as tasks/get, tasks/cancel, tasks/list, the answer to a
// task-augmented request and notifications/tasks/status carry it.
type Task struct {
	// TaskID is the server's id of the task.
	TaskID string `json:"taskId"`
	// Status is the task's state.
	Status TaskStatus `json:"status"`
	// StatusMessage describes the state for people: a failure's diagnosis, say.
	StatusMessage string `json:"statusMessage,omitempty"`
	// CreatedAt and LastUpdatedAt are ISO 8601 timestamps; see CreatedTime and
	// LastUpdatedTime.
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTL is how long, in milliseconds from its creation, the server keeps the task; nil means
	// without limit. See TTLDuration.
	TTL *int64 `json:"ttl"`
	// PollInterval is the server's suggested interval between two tasks/get, in milliseconds;
	// nil when it suggests none. See PollIntervalDuration.
	PollInterval *int64 `json:"pollInterval,omitempty"`
	// Meta is the _meta of the message that carried the task, if any.
	Meta json.RawMessage `json:"_meta,omitempty"`
}

// Terminal reports whether the task has ended: completed, failed or cancelled.
func (t *Task) Terminal() bool {
	switch t.Status {
	case TaskCompleted, TaskFailed, TaskCancelled:
		return true
	}
	return false
}

// TTLDuration returns the task's time to live; limited is false when the server keeps it
// without limit.
func (t *Task) TTLDuration() (d time.Duration, limited bool) {
	if t.TTL == nil {
		return 0, false
	}
	return time.Duration(*t.TTL) * time.Millisecond, true
}

// PollIntervalDuration returns the server's suggested polling interval, or 0 when it
// suggests none.
func (t *Task) PollIntervalDuration() time.Duration {
	if t.PollInterval == nil || *t.PollInterval <= 0 {
		return 0
	}
	return time.Duration(*t.PollInterval) * time.Millisecond
}

// CreatedTime returns CreatedAt parsed as RFC 3339, or the zero time if it is not.
func (t *Task) CreatedTime() time.Time { return parseTaskTime(t.CreatedAt) }

// LastUpdatedTime returns LastUpdatedAt parsed as RFC 3339, or the zero time if it is not.
func (t *Task) LastUpdatedTime() time.Time { return parseTaskTime(t.LastUpdatedAt) }

func parseTaskTime(s string) time.Time {
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return tm
}

// validate checks what the client relies on: an id (want, if given) and a known status.
func (t *Task) validate(want string) error {
	switch {
	case t.TaskID == "":
		return errors.New("the task has no taskId")
	case want != "" && t.TaskID != want:
		return fmt.Errorf("asked for task %q, got task %q", want, t.TaskID)
	}
	switch t.Status {
	case TaskWorking, TaskInputRequired, TaskCompleted, TaskFailed, TaskCancelled:
		return nil
	}
	return fmt.Errorf("task %s has an unknown status %q", t.TaskID, t.Status)
}

// CreateTaskResult is the answer to a task-augmented request: the task it created. Decode a
// Response of such a request (made with Supersede, say) into it.
type CreateTaskResult struct {
	Task *Task           `json:"task"`
	Meta json.RawMessage `json:"_meta,omitempty"`
}

// ListTasksResult is one page of tasks/list.
type ListTasksResult struct {
	Tasks      []*Task `json:"tasks"`
	NextCursor string  `json:"nextCursor,omitempty"`
}

// TaskCapabilities is what a server's capabilities.tasks declares.
type TaskCapabilities struct {
	// List: the server serves tasks/list.
	List bool
	// Cancel: the server serves tasks/cancel.
	Cancel bool
	// ToolsCall: the server accepts task-augmented tools/call (tasks.requests.tools.call).
	ToolsCall bool
}

// TaskCapabilities returns what the server declares in capabilities.tasks; all false when it
// declares nothing (or nothing this client understands).
func (c *ServerCapabilities) TaskCapabilities() TaskCapabilities {
	var decl struct {
		List     json.RawMessage `json:"list"`
		Cancel   json.RawMessage `json:"cancel"`
		Requests struct {
			Tools struct {
				Call json.RawMessage `json:"call"`
			} `json:"tools"`
		} `json:"requests"`
	}
	if len(c.Tasks) == 0 || json.Unmarshal(c.Tasks, &decl) != nil {
		return TaskCapabilities{}
	}
	declared := func(raw json.RawMessage) bool {
		s := string(raw)
		return s != "" && s != "null" && s != "false"
	}
	return TaskCapabilities{List: declared(decl.List), Cancel: declared(decl.Cancel), ToolsCall: declared(decl.Requests.Tools.Call)}
}

// A TaskStatusHandler learns a task's new state from notifications/tasks/status. Servers need
// not send them: a caller waiting for a task polls it (AwaitTask does). It runs on the client's
// notification goroutine: it must not block, but it may call the client.
type TaskStatusHandler func(ctx context.Context, t *Task)

// taskStatusNotified hands a notifications/tasks/status to the caller's handler.
func (c *Client) taskStatusNotified(ctx context.Context, params json.RawMessage) {
	if c.cfg.taskStatus == nil {
		return
	}
	var t Task
	if err := json.Unmarshal(params, &t); err != nil {
		c.log.Debug("mcpclient: dropped a malformed notifications/tasks/status", "err", err)
		return
	}
	if err := t.validate(""); err != nil {
		c.log.Debug("mcpclient: dropped a notifications/tasks/status", "err", err)
		return
	}
	c.cfg.taskStatus(ctx, &t)
}

// TaskError is the cause of the *Error AwaitTask returns for a task that failed or was
// cancelled. errors.Is matches it with ErrTaskFailed or ErrTaskCancelled.
type TaskError struct {
	// Task is the task's final state.
	Task *Task
	// Result is the tool's own answer, an isError result, when tasks/result returned one.
	Result *CallToolResult
	// Err is the JSON-RPC error (*RPCError) tasks/result answered with, or why the result
	// could not be fetched; nil when Result is set.
	Err error
}

func (e *TaskError) sentinel() error {
	if e.Task != nil && e.Task.Status == TaskCancelled {
		return ErrTaskCancelled
	}
	return ErrTaskFailed
}

func (e *TaskError) Error() string {
	what := "failed"
	if e.sentinel() == ErrTaskCancelled {
		what = "was cancelled"
	}
	msg := "task " + e.Task.TaskID + " " + what
	if e.Task.StatusMessage != "" {
		msg += ": " + e.Task.StatusMessage
	}
	if e.Err != nil {
		msg += " (" + e.Err.Error() + ")"
	}
	return msg
}

// Unwrap returns ErrTaskFailed or ErrTaskCancelled, and Err.
func (e *TaskError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.sentinel()}
	}
	return []error{e.sentinel(), e.Err}
}

// checkTaskSupport refuses, locally, a task-augmented call the server does not allow: the
// protocol says a client MUST NOT send one. It lists the tools when the client has no listing.
func (c *Client) checkTaskSupport(ctx context.Context, name string) error {
	if _, err := c.liveSession(ctx); err != nil {
		return err
	}
	caps := c.ServerCapabilities()
	if !caps.TaskCapabilities().ToolsCall {
		return &Error{Code: CodeInvalidArgument, Err: fmt.Errorf("%w: the server does not declare capabilities.tasks.requests.tools.call (tool %s)", ErrTasksNotSupported, name)}
	}
	support, found, cached := c.tools.taskSupport(name)
	if !cached {
		if _, err := c.CachedTools(ctx); err != nil {
			return err
		}
		support, found, _ = c.tools.taskSupport(name)
	}
	switch {
	case !found:
		return &Error{Code: CodeInvalidArgument, Err: fmt.Errorf("%w: the server does not list tool %s", ErrTasksNotSupported, name)}
	case support == TaskSupportRequired || support == TaskSupportOptional:
		return nil
	case support == "":
		support = "absent, meaning forbidden"
	}
	return &Error{Code: CodeInvalidArgument, Err: fmt.Errorf("%w: tool %s declares execution.taskSupport %s", ErrTasksNotSupported, name, support)}
}

type taskMetadata struct {
	TTL *int64 `json:"ttl,omitempty"`
}

type callToolTaskParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Task      taskMetadata    `json:"task"`
}

type taskIDParams struct {
	TaskID string `json:"taskId"`
}

// checkedCreateTask decodes a CreateTaskResult and checks its task, so that c.call reports a
// malformed one as a protocol error naming the request.
type checkedCreateTask struct{ res CreateTaskResult }

func (ct *checkedCreateTask) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &ct.res); err != nil {
		return err
	}
	if ct.res.Task == nil {
		return errors.New("the answer carries no task: the server ran the tool as a plain request")
	}
	return ct.res.Task.validate("")
}

// checkedTask decodes a Task and checks it is the one asked for.
type checkedTask struct {
	want string
	task Task
}

func (ct *checkedTask) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &ct.task); err != nil {
		return err
	}
	return ct.task.validate(ct.want)
}

// checkedTaskList decodes one page of tasks/list and checks its tasks.
type checkedTaskList struct{ res ListTasksResult }

func (cl *checkedTaskList) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &cl.res); err != nil {
		return err
	}
	for i, t := range cl.res.Tasks {
		if t == nil {
			return fmt.Errorf("task %d of the page is null", i)
		}
		if err := t.validate(""); err != nil {
			return err
		}
	}
	return nil
}

func taskIDArgument(method, taskID string) error {
	if taskID == "" {
		return &Error{Code: CodeInvalidArgument, Err: fmt.Errorf("%s needs a task id", method)}
	}
	return nil
}

// CallToolTask calls the tool name with args as a task (a task-augmented tools/call) and returns
// the task the server created, usually still working: follow it with AwaitTask, GetTask and
// TaskResult. ttl asks the server to keep the task that long after its creation (it may choose
// otherwise; see Task.TTL); 0 leaves it to the server.
//
// It refuses locally, with ErrTasksNotSupported (CodeInvalidArgument), a server whose
// capabilities lack tasks.requests.tools.call and a tool whose listed execution.taskSupport is
// not "required" or "optional"; it lists the tools first when the client holds no listing.
//
// The request is a tools/call like CallTool's, with the same id, ledger and retry rules: its id
// is a fresh UUID unless pinned, a server with receipts answers a resend under it with the task
// it already created, and after ErrOutcomeUnknown (no receipts, tool not safe to repeat) a task
// may or may not exist. Inspect before deciding: see TaskInspection.
func (c *Client) CallToolTask(ctx context.Context, name string, args any, ttl time.Duration, opts ...CallOption) (*Task, error) {
	if ttl < 0 {
		return nil, returned(&Error{Code: CodeInvalidArgument, Err: fmt.Errorf("negative task ttl %v", ttl)})
	}
	rawArgs, err := marshalParams(args)
	if err != nil {
		return nil, returned(&Error{Code: CodeInvalidArgument, Err: fmt.Errorf("arguments of tool %s: %w", name, err)})
	}
	if err := c.checkTaskSupport(ctx, name); err != nil {
		return nil, returned(err)
	}
	params := callToolTaskParams{Name: name, Arguments: rawArgs}
	if ttl > 0 {
		ms := max(ttl.Milliseconds(), 1) // a sub-millisecond ttl rounds up, not to "none"
		params.Task.TTL = &ms
	}
	var res checkedCreateTask
	if err := c.call(ctx, "tools/call", params, &res, opts...); err != nil {
		return nil, err
	}
	return res.res.Task, nil
}

// GetTask returns the task's current state (tasks/get). It is read-only: after an uncertain
// attempt it is re-issued under a new id.
func (c *Client) GetTask(ctx context.Context, taskID string, opts ...CallOption) (*Task, error) {
	t, _, err := c.getTask(ctx, taskID, opts)
	return t, err
}

// getTask is GetTask, returning the tasks/get response too.
func (c *Client) getTask(ctx context.Context, taskID string, opts []CallOption) (*Task, *Response, error) {
	if err := taskIDArgument("tasks/get", taskID); err != nil {
		return nil, nil, returned(err)
	}
	ct := checkedTask{want: taskID}
	resp, err := c.callResponse(ctx, "tasks/get", taskIDParams{taskID}, &ct, opts)
	if err != nil {
		return nil, nil, err
	}
	return &ct.task, resp, nil
}

// TaskResultRaw returns the raw result of the task's request (tasks/result): what the request
// would have returned without a task, a JSON-RPC error included (CodeServerError). The server
// holds the answer until the task is terminal; ctx bounds the wait. Read-only: re-issued under
// a new id after an uncertain attempt.
func (c *Client) TaskResultRaw(ctx context.Context, taskID string, opts ...CallOption) (*Response, error) {
	resp, err := c.taskPayload(ctx, taskID, opts)
	return resp, returned(err)
}

func (c *Client) taskPayload(ctx context.Context, taskID string, opts []CallOption) (*Response, error) {
	if err := taskIDArgument("tasks/result", taskID); err != nil {
		return nil, err
	}
	req, err := c.newRequest("tasks/result", taskIDParams{taskID}, opts)
	if err != nil {
		return nil, err
	}
	return c.do(ctx, req)
}

// TaskResult returns the tool result of a task made by CallToolTask (tasks/result), waiting
// for the task to be terminal; ctx bounds the wait. As with CallTool, an isError result is the
// tool's answer and is returned as a result; a JSON-RPC error is CodeServerError. Unlike
// CallTool it does not check structuredContent against the tool's outputSchema, since a task
// does not name its tool. AwaitTask polls first and turns a failed task into an error.
func (c *Client) TaskResult(ctx context.Context, taskID string, opts ...CallOption) (*CallToolResult, error) {
	resp, err := c.taskPayload(ctx, taskID, opts)
	if err != nil {
		return nil, returned(err)
	}
	res, err := decodeTaskResult(resp, taskID)
	return res, returned(err)
}

func decodeTaskResult(resp *Response, taskID string) (*CallToolResult, error) {
	var res CallToolResult
	err := resp.Decode(&res)
	if err == nil && len(res.Meta) > 0 {
		var meta map[string]json.RawMessage
		var rel taskIDParams
		if json.Unmarshal(res.Meta, &meta) == nil && meta[metakeys.RelatedTask] != nil &&
			json.Unmarshal(meta[metakeys.RelatedTask], &rel) == nil && rel.TaskID != taskID {
			err = fmt.Errorf("the result belongs to task %q", rel.TaskID)
		}
	}
	if err != nil {
		return nil, &Error{Code: CodeProtocol, Request: resp.Request, Attempts: resp.Attempts,
			Err: fmt.Errorf("decoding the tasks/result result of task %s: %w", taskID, err)}
	}
	return &res, nil
}

// CancelTask asks the server to cancel the task (tasks/cancel) and returns its state, cancelled.
// A server refuses (CodeServerError, -32602) to cancel a task already terminal. The request is
// idempotent: after an uncertain attempt it is re-issued, and should the re-issue find the task
// cancelled already (by the first attempt), CancelTask returns that state rather than the
// refusal.
func (c *Client) CancelTask(ctx context.Context, taskID string, opts ...CallOption) (*Task, error) {
	if err := taskIDArgument("tasks/cancel", taskID); err != nil {
		return nil, returned(err)
	}
	ct := checkedTask{want: taskID}
	err := c.call(ctx, "tasks/cancel", taskIDParams{taskID}, &ct, opts...)
	if err == nil {
		return &ct.task, nil
	}
	var e *Error
	var rpc *RPCError
	if errors.As(err, &e) && e.Attempts > 1 && errors.As(err, &rpc) && rpc.Code == RPCInvalidParams {
		if t, gerr := c.GetTask(ctx, taskID); gerr == nil && t.Status == TaskCancelled {
			return t, nil
		}
	}
	return nil, err
}

// ListTasksPage returns one page of tasks/list, starting at cursor ("" for the first page).
func (c *Client) ListTasksPage(ctx context.Context, cursor string, opts ...CallOption) (*ListTasksResult, error) {
	var res checkedTaskList
	if err := c.call(ctx, "tasks/list", cursorParams{cursor}, &res, opts...); err != nil {
		return nil, err
	}
	return &res.res, nil
}

// Tasks iterates over every task the server lists, fetching pages as needed; it yields the
// first error and stops.
func (c *Client) Tasks(ctx context.Context) iter.Seq2[*Task, error] {
	return paginate(ctx, func(ctx context.Context, cursor string) ([]*Task, string, error) {
		page, err := c.ListTasksPage(ctx, cursor)
		if err != nil {
			return nil, "", err
		}
		return page.Tasks, page.NextCursor, nil
	}, nil)
}

// AwaitTask waits for a task made by CallToolTask to end and returns its tool result.
//
// It polls tasks/get, waiting between polls the task's pollInterval (or, when the server
// suggests none, WithTaskPollInterval's, DefaultTaskPollInterval by default), until the task is
// terminal, then fetches the result with tasks/result. While the task is input_required the
// server's own requests (elicitation, sampling, ...) reach the client's handlers, and AwaitTask
// keeps polling.
//
// A completed task returns its result. A failed or cancelled one returns an *Error
// (CodeServerError) whose chain holds a *TaskError naming the task, with its final state and
// the tool's isError result or the JSON-RPC error of tasks/result; errors.Is matches
// ErrTaskFailed or ErrTaskCancelled. If ctx ends, the error is CodeOutcomeUnknown: the task goes
// on at the server, and AwaitTask may be called again.
//
// AwaitTask knows the task by its id only, not by the request that created it (which another
// client, or an earlier process, may have sent), so its errors name a request of its own: the
// tasks/get or tasks/result that failed, or, when ctx ends between two polls, the last tasks/get,
// whose answer is the task's last known state (the message gives that state and the task id).
func (c *Client) AwaitTask(ctx context.Context, taskID string) (*CallToolResult, error) {
	if err := taskIDArgument("AwaitTask", taskID); err != nil {
		return nil, returned(err)
	}
	var t *Task
	for {
		var (
			poll *Response
			err  error
		)
		if t, poll, err = c.getTask(ctx, taskID, nil); err != nil {
			return nil, err
		}
		if t.Terminal() {
			break
		}
		wait := t.PollIntervalDuration()
		if wait <= 0 {
			wait = c.cfg.taskPoll
		}
		if wait <= 0 {
			wait = DefaultTaskPollInterval
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, returned(&Error{Code: CodeOutcomeUnknown, Request: poll.Request, Attempts: poll.Attempts,
				Err: fmt.Errorf("waiting for task %s, last %s: %w", taskID, t.Status, context.Cause(ctx))})
		}
	}

	resp, err := c.taskPayload(ctx, taskID, nil)
	if t.Status == TaskCompleted {
		if err != nil {
			return nil, returned(err)
		}
		res, err := decodeTaskResult(resp, taskID)
		return res, returned(err)
	}
	te := &TaskError{Task: t}
	if err != nil {
		// The task's failure is known from tasks/get; the result's error says how it failed, or
		// why that could not be read.
		te.Err = err
		var e *Error
		if errors.As(err, &e) {
			if e.Code == CodeServerError {
				te.Err = e.Err
			}
			return nil, returned(&Error{Code: CodeServerError, Request: e.Request, Attempts: e.Attempts, Err: te})
		}
		return nil, returned(&Error{Code: CodeServerError, Err: te})
	}
	res, err := decodeTaskResult(resp, taskID)
	if err != nil {
		return nil, returned(err)
	}
	te.Result = res
	return nil, returned(&Error{Code: CodeServerError, Request: resp.Request, Attempts: resp.Attempts, Err: te})
}

// TaskInspection records a look at a task the server kept (its state from GetTask, ListTasks,
// CancelTask or a status notification) as the Inspection that Supersede requires: tasks are a
// source of state to inspect before replacing an uncertain request. A nil task gives an empty
// Inspection, which Supersede refuses.
//
// The intended flow: CallToolTask ended with ErrOutcomeUnknown (the answer was lost, and the
// server keeps no receipts or the session that held them is gone), so a task may or may not
// exist. Do not send the call again blindly. Look for the task the request would have created,
// with GetTask if its id is known, else with ListTasks (a task created after the call started):
//   - a task found working, input_required or completed means the request ran: follow that task
//     (AwaitTask) and send nothing new;
//   - a task found failed or cancelled, when the work must still be done, or done otherwise, is
//     the evidence for c.Supersede(ctx, e.Request, TaskInspection(t), newParams): the new
//     tools/call (a new id, decoded into a CreateTaskResult) records in the ledger and in
//     _meta.supersedes which request it replaces and what the caller saw;
//   - no task found is evidence too, recorded in an Inspection of your own ("tasks/list",
//     "no task created since ...").
func TaskInspection(t *Task) Inspection {
	if t == nil {
		return Inspection{}
	}
	found := "status " + string(t.Status)
	if t.StatusMessage != "" {
		found += " (" + t.StatusMessage + ")"
	}
	found += ", created " + t.CreatedAt + ", last updated " + t.LastUpdatedAt
	return Inspection{Checked: "tasks/get " + t.TaskID, Found: found}
}
