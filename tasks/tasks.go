// Package tasks is the client side of MCP tasks (revision 2025-11-25, experimental): the client
// as the requestor of task-augmented tools/call.
//
// A task-augmented tools/call ([CallTool]) is answered at once with a [Task], the server's handle
// on work that goes on in the background; the client polls it ([Get], [Await]), fetches its
// result ([Result]), lists ([List]) or cancels ([Cancel]) it. The request that creates a task is
// a tools/call like any other: its id, ledger entry and retry rules are those of
// [mcpclient.Client.CallTool], and a server that keeps receipts answers a resend under the same
// id with the same Task, without creating a second one. The task requests themselves are
// read-only (tasks/get, tasks/list, tasks/result) or idempotent (tasks/cancel), so that
// re-issuing one after an uncertain attempt does no harm.
//
// A tool whose listing says execution.taskSupport "required" must be called with [CallTool]:
// the client's CallTool sends it as a plain request, which such a server refuses with JSON-RPC
// -32601. Tools that declare "forbidden", or nothing, cannot be called as tasks; [CallTool]
// refuses them locally.
//
// Tasks are in revision 2025-11-25 only: on a 2026-07-28 session the task methods are refused
// before sending (mcpclient.ErrMethodRemoved).
//
// The package is built on the client's public API alone (NewRequest, Do, CachedTools, Session,
// notification handlers): an extension of the protocol can be written the same way outside this
// module. Its calls take a mcpclient.Caller: a *mcpclient.Client, or a plugin that decorates one.
package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/extcall"
	"github.com/northstar-mcp/mcpclient/internal/metakeys"
)

// Status is the state of a task.
type Status string

// The task statuses. A task starts working; it may go to input_required and back; it ends in
// one of the terminal statuses completed, failed or cancelled and never leaves it.
const (
	// Working: the request is being processed.
	Working Status = "working"
	// InputRequired: the server waits for the client's answer to a request of its own
	// (elicitation, sampling, ...), which reaches the client's handlers.
	InputRequired Status = "input_required"
	// Completed: the request completed; Result returns its result.
	Completed Status = "completed"
	// Failed: the request failed, with a JSON-RPC error or, for a tool, an isError result.
	Failed Status = "failed"
	// Cancelled: the task was cancelled before it completed.
	Cancelled Status = "cancelled"
)

// The values of mcpclient.ToolExecution.TaskSupport.
const (
	// SupportRequired: the tool must be called as a task (CallTool).
	SupportRequired = "required"
	// SupportOptional: the tool may be called as a task or as a plain request.
	SupportOptional = "optional"
	// SupportForbidden (also meant by an absent value): the tool cannot be a task.
	SupportForbidden = "forbidden"
)

// DefaultPollInterval is how long Await waits between two tasks/get when the server suggests
// no pollInterval, unless PollInterval says otherwise.
const DefaultPollInterval = time.Second

// Task is the state of a task, as tasks/get, tasks/cancel, tasks/list, the answer to a
// task-augmented request and notifications/tasks/status carry it.
type Task struct {
	// TaskID is the server's id of the task.
	TaskID string `json:"taskId"`
	// Status is the task's state.
	Status Status `json:"status"`
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
	case Completed, Failed, Cancelled:
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
func (t *Task) CreatedTime() time.Time { return parseTime(t.CreatedAt) }

// LastUpdatedTime returns LastUpdatedAt parsed as RFC 3339, or the zero time if it is not.
func (t *Task) LastUpdatedTime() time.Time { return parseTime(t.LastUpdatedAt) }

func parseTime(s string) time.Time {
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
	case Working, InputRequired, Completed, Failed, Cancelled:
		return nil
	}
	return fmt.Errorf("task %s has an unknown status %q", t.TaskID, t.Status)
}

// CreateResult is the answer to a task-augmented request: the task it created. Decode a
// Response of such a request (made with Supersede, say) into it.
type CreateResult struct {
	Task *Task           `json:"task"`
	Meta json.RawMessage `json:"_meta,omitempty"`
}

// ListResult is one page of tasks/list.
type ListResult struct {
	Tasks      []*Task `json:"tasks"`
	NextCursor string  `json:"nextCursor,omitempty"`
}

// Capabilities is what a server's capabilities.tasks declares.
type Capabilities struct {
	// List: the server serves tasks/list.
	List bool
	// Cancel: the server serves tasks/cancel.
	Cancel bool
	// ToolsCall: the server accepts task-augmented tools/call (tasks.requests.tools.call).
	ToolsCall bool
}

// CapabilitiesOf returns what caps declares in capabilities.tasks; all false when it declares
// nothing (or nothing this package understands).
func CapabilitiesOf(caps mcpclient.ServerCapabilities) Capabilities {
	var decl struct {
		List     json.RawMessage `json:"list"`
		Cancel   json.RawMessage `json:"cancel"`
		Requests struct {
			Tools struct {
				Call json.RawMessage `json:"call"`
			} `json:"tools"`
		} `json:"requests"`
	}
	if len(caps.Tasks) == 0 || json.Unmarshal(caps.Tasks, &decl) != nil {
		return Capabilities{}
	}
	declared := func(raw json.RawMessage) bool {
		s := string(raw)
		return s != "" && s != "null" && s != "false"
	}
	return Capabilities{List: declared(decl.List), Cancel: declared(decl.Cancel), ToolsCall: declared(decl.Requests.Tools.Call)}
}

// A StatusHandler learns a task's new state from notifications/tasks/status. Servers need not
// send them: a caller waiting for a task polls it (Await does). It runs on the client's
// notification goroutine: it must not block, but it may call the client.
type StatusHandler func(ctx context.Context, t *Task)

// WithStatusHandler has the client hand notifications/tasks/status to h (over Streamable HTTP,
// the client then opens the session's GET stream, where servers send them). A malformed
// notification is dropped. Default: dropped.
func WithStatusHandler(h StatusHandler) mcpclient.Option {
	return mcpclient.WithNotificationHandler("notifications/tasks/status", func(ctx context.Context, _ string, params json.RawMessage) {
		var t Task
		if json.Unmarshal(params, &t) != nil || t.validate("") != nil {
			return
		}
		h(ctx, &t)
	})
}

// Errors of this package; the *mcpclient.Error that carries them says CodeInvalidArgument (a
// call refused before sending) or CodeServerError (a task that did not complete).
var (
	// ErrNotSupported: CallTool refused, before sending, a tool the server does not allow to
	// run as a task (its capabilities lack tasks.requests.tools.call, or the tool is not
	// listed, or its execution.taskSupport is neither "required" nor "optional").
	ErrNotSupported = errors.New("tasks: task-augmented execution not supported")
	// ErrFailed: Await found the task failed; the *Error in the chain holds it.
	ErrFailed = errors.New("tasks: task failed")
	// ErrCancelled: Await found the task cancelled; the *Error in the chain holds it.
	ErrCancelled = errors.New("tasks: task cancelled")
)

// Error is the cause of the *mcpclient.Error Await returns for a task that failed or was
// cancelled. errors.Is matches it with ErrFailed or ErrCancelled.
type Error struct {
	// Task is the task's final state.
	Task *Task
	// Result is the tool's own answer, an isError result, when tasks/result returned one.
	Result *mcpclient.CallToolResult
	// Err is the JSON-RPC error (*mcpclient.RPCError) tasks/result answered with, or why the
	// result could not be fetched; nil when Result is set.
	Err error
}

func (e *Error) sentinel() error {
	if e.Task != nil && e.Task.Status == Cancelled {
		return ErrCancelled
	}
	return ErrFailed
}

func (e *Error) Error() string {
	what := "failed"
	if e.sentinel() == ErrCancelled {
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

// Unwrap returns ErrFailed or ErrCancelled, and Err.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.sentinel()}
	}
	return []error{e.sentinel(), e.Err}
}

func refused(format string, args ...any) error {
	return &mcpclient.Error{Code: mcpclient.CodeInvalidArgument, Err: fmt.Errorf(format, args...)}
}

// checkSupport refuses, locally, a task-augmented call the server does not allow: the protocol
// says a client MUST NOT send one. It lists the tools when the client holds no listing.
func checkSupport(ctx context.Context, c mcpclient.Caller, name string) error {
	init, err := c.Session(ctx)
	if err != nil {
		return err
	}
	if !CapabilitiesOf(init.Capabilities).ToolsCall {
		return refused("%w: the server does not declare capabilities.tasks.requests.tools.call (tool %s)", ErrNotSupported, name)
	}
	tools, err := c.CachedTools(ctx)
	if err != nil {
		return err
	}
	for _, t := range tools {
		if t.Name != name {
			continue
		}
		support := ""
		if t.Execution != nil {
			support = t.Execution.TaskSupport
		}
		switch support {
		case SupportRequired, SupportOptional:
			return nil
		case "":
			support = "absent, meaning forbidden"
		}
		return refused("%w: tool %s declares execution.taskSupport %s", ErrNotSupported, name, support)
	}
	return refused("%w: the server does not list tool %s", ErrNotSupported, name)
}

type metadata struct {
	TTL *int64 `json:"ttl,omitempty"`
}

type callToolParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Task      metadata        `json:"task"`
}

type idParams struct {
	TaskID string `json:"taskId"`
}

type cursorParams struct {
	Cursor string `json:"cursor,omitempty"`
}

// checkedCreate decodes a CreateResult and checks its task.
type checkedCreate struct{ res CreateResult }

func (ct *checkedCreate) UnmarshalJSON(b []byte) error {
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

// checkedList decodes one page of tasks/list and checks its tasks.
type checkedList struct{ res ListResult }

func (cl *checkedList) UnmarshalJSON(b []byte) error {
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

func idArgument(method, taskID string) error {
	if taskID == "" {
		return refused("%s needs a task id", method)
	}
	return nil
}

// CallTool calls the tool name with args as a task (a task-augmented tools/call) and returns the
// task the server created, usually still working: follow it with Await, Get and Result. ttl asks
// the server to keep the task that long after its creation (it may choose otherwise; see
// Task.TTL); 0 leaves it to the server. args may be nil, a json.RawMessage, or anything
// encoding/json marshals to an object.
//
// It refuses locally, with ErrNotSupported (CodeInvalidArgument), a server whose capabilities
// lack tasks.requests.tools.call and a tool whose listed execution.taskSupport is not
// "required" or "optional"; it lists the tools first when the client holds no listing.
//
// The request is a tools/call like the client's CallTool, with the same id, ledger and retry
// rules: its id is a fresh UUID unless pinned, a server with receipts answers a resend under it
// with the task it already created, and after ErrOutcomeUnknown (no receipts, tool not safe to
// repeat) a task may or may not exist. Inspect before deciding: see Inspection.
func CallTool(ctx context.Context, c mcpclient.Caller, name string, args any, ttl time.Duration, opts ...mcpclient.CallOption) (*Task, error) {
	if ttl < 0 {
		return nil, refused("negative task ttl %v", ttl)
	}
	rawArgs, err := marshalArguments(args)
	if err != nil {
		return nil, refused("arguments of tool %s: %w", name, err)
	}
	if err := checkSupport(ctx, c, name); err != nil {
		return nil, err
	}
	params := callToolParams{Name: name, Arguments: rawArgs}
	if ttl > 0 {
		ms := max(ttl.Milliseconds(), 1) // a sub-millisecond ttl rounds up, not to "none"
		params.Task.TTL = &ms
	}
	var res checkedCreate
	if _, err := extcall.Call(ctx, c, "tools/call", params, &res, opts); err != nil {
		return nil, err
	}
	return res.res.Task, nil
}

func marshalArguments(args any) (json.RawMessage, error) {
	if args == nil {
		return nil, nil
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	switch {
	case string(raw) == "null":
		return nil, nil
	case raw[0] != '{':
		return nil, errors.New("must be a JSON object")
	}
	return raw, nil
}

// Get returns the task's current state (tasks/get). It is read-only: after an uncertain attempt
// it is re-issued under a new id.
func Get(ctx context.Context, c mcpclient.Caller, taskID string, opts ...mcpclient.CallOption) (*Task, error) {
	t, _, err := get(ctx, c, taskID, opts)
	return t, err
}

// get is Get, returning the tasks/get response too.
func get(ctx context.Context, c mcpclient.Caller, taskID string, opts []mcpclient.CallOption) (*Task, *mcpclient.Response, error) {
	if err := idArgument("tasks/get", taskID); err != nil {
		return nil, nil, err
	}
	ct := checkedTask{want: taskID}
	resp, err := extcall.Call(ctx, c, "tasks/get", idParams{taskID}, &ct, opts)
	if err != nil {
		return nil, nil, err
	}
	return &ct.task, resp, nil
}

// ResultRaw returns the raw result of the task's request (tasks/result): what the request would
// have returned without a task, a JSON-RPC error included (CodeServerError). The server holds
// the answer until the task is terminal; ctx bounds the wait. Read-only: re-issued under a new
// id after an uncertain attempt.
func ResultRaw(ctx context.Context, c mcpclient.Caller, taskID string, opts ...mcpclient.CallOption) (*mcpclient.Response, error) {
	if err := idArgument("tasks/result", taskID); err != nil {
		return nil, err
	}
	return extcall.Call(ctx, c, "tasks/result", idParams{taskID}, nil, opts)
}

// Result returns the tool result of a task made by CallTool (tasks/result), waiting for the task
// to be terminal; ctx bounds the wait. As with the client's CallTool, an isError result is the
// tool's answer and is returned as a result; a JSON-RPC error is CodeServerError. Unlike
// CallTool it does not check structuredContent against the tool's outputSchema, since a task
// does not name its tool. Await polls first and turns a failed task into an error.
func Result(ctx context.Context, c mcpclient.Caller, taskID string, opts ...mcpclient.CallOption) (*mcpclient.CallToolResult, error) {
	resp, err := ResultRaw(ctx, c, taskID, opts...)
	if err != nil {
		return nil, err
	}
	return decodeResult(resp, taskID)
}

func decodeResult(resp *mcpclient.Response, taskID string) (*mcpclient.CallToolResult, error) {
	var res mcpclient.CallToolResult
	err := resp.Decode(&res)
	if err == nil && len(res.Meta) > 0 {
		var meta map[string]json.RawMessage
		var rel idParams
		if json.Unmarshal(res.Meta, &meta) == nil && meta[metakeys.RelatedTask] != nil &&
			json.Unmarshal(meta[metakeys.RelatedTask], &rel) == nil && rel.TaskID != taskID {
			err = fmt.Errorf("the result belongs to task %q", rel.TaskID)
		}
	}
	if err != nil {
		return nil, &mcpclient.Error{Code: mcpclient.CodeProtocol, Request: resp.Request, Attempts: resp.Attempts,
			Err: fmt.Errorf("decoding the tasks/result result of task %s: %w", taskID, err)}
	}
	return &res, nil
}

// Cancel asks the server to cancel the task (tasks/cancel) and returns its state, cancelled. A
// server refuses (CodeServerError, -32602) to cancel a task already terminal. The request is
// idempotent: after an uncertain attempt it is re-issued, and should the re-issue find the task
// cancelled already (by the first attempt), Cancel returns that state rather than the refusal.
func Cancel(ctx context.Context, c mcpclient.Caller, taskID string, opts ...mcpclient.CallOption) (*Task, error) {
	if err := idArgument("tasks/cancel", taskID); err != nil {
		return nil, err
	}
	ct := checkedTask{want: taskID}
	_, err := extcall.Call(ctx, c, "tasks/cancel", idParams{taskID}, &ct, opts)
	if err == nil {
		return &ct.task, nil
	}
	var e *mcpclient.Error
	var rpc *mcpclient.RPCError
	if errors.As(err, &e) && e.Attempts > 1 && errors.As(err, &rpc) && rpc.Code == mcpclient.RPCInvalidParams {
		if t, gerr := Get(ctx, c, taskID); gerr == nil && t.Status == Cancelled {
			return t, nil
		}
	}
	return nil, err
}

// ListPage returns one page of tasks/list, starting at cursor ("" for the first page).
func ListPage(ctx context.Context, c mcpclient.Caller, cursor string, opts ...mcpclient.CallOption) (*ListResult, error) {
	var res checkedList
	if _, err := extcall.Call(ctx, c, "tasks/list", cursorParams{cursor}, &res, opts); err != nil {
		return nil, err
	}
	return &res.res, nil
}

// List iterates over every task the server lists, fetching pages as needed; it yields the first
// error and stops. mcpclient.Collect gathers them.
func List(ctx context.Context, c mcpclient.Caller) iter.Seq2[*Task, error] {
	return mcpclient.Paginate(ctx, func(ctx context.Context, cursor string) ([]*Task, string, error) {
		page, err := ListPage(ctx, c, cursor)
		if err != nil {
			return nil, "", err
		}
		return page.Tasks, page.NextCursor, nil
	})
}

// An AwaitOption configures Await.
type AwaitOption func(*awaitConfig)

type awaitConfig struct {
	poll time.Duration
}

// PollInterval sets how long Await waits between two tasks/get when the server suggests no
// pollInterval. Default DefaultPollInterval; d <= 0 keeps the default.
func PollInterval(d time.Duration) AwaitOption {
	return func(c *awaitConfig) {
		if d > 0 {
			c.poll = d
		}
	}
}

// Await waits for a task made by CallTool to end and returns its tool result.
//
// It polls tasks/get, waiting between polls the task's pollInterval (or, when the server
// suggests none, PollInterval's, DefaultPollInterval by default), until the task is terminal,
// then fetches the result with tasks/result. While the task is input_required the server's own
// requests (elicitation, sampling, ...) reach the client's handlers, and Await keeps polling.
//
// A completed task returns its result. A failed or cancelled one returns an *mcpclient.Error
// (CodeServerError) whose chain holds an *Error naming the task, with its final state and the
// tool's isError result or the JSON-RPC error of tasks/result; errors.Is matches ErrFailed or
// ErrCancelled. If ctx ends, the error is CodeOutcomeUnknown: the task goes on at the server,
// and Await may be called again.
//
// Await knows the task by its id only, not by the request that created it (which another
// client, or an earlier process, may have sent), so its errors name a request of its own: the
// tasks/get or tasks/result that failed, or, when ctx ends between two polls, the last
// tasks/get, whose answer is the task's last known state (the message gives that state and the
// task id).
func Await(ctx context.Context, c mcpclient.Caller, taskID string, opts ...AwaitOption) (*mcpclient.CallToolResult, error) {
	if err := idArgument("Await", taskID); err != nil {
		return nil, err
	}
	cfg := awaitConfig{poll: DefaultPollInterval}
	for _, o := range opts {
		o(&cfg)
	}
	var t *Task
	for {
		var (
			poll *mcpclient.Response
			err  error
		)
		if t, poll, err = get(ctx, c, taskID, nil); err != nil {
			return nil, err
		}
		if t.Terminal() {
			break
		}
		wait := t.PollIntervalDuration()
		if wait <= 0 {
			wait = cfg.poll
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, &mcpclient.Error{Code: mcpclient.CodeOutcomeUnknown, Request: poll.Request, Attempts: poll.Attempts,
				Err: fmt.Errorf("waiting for task %s, last %s: %w", taskID, t.Status, context.Cause(ctx))}
		}
	}

	resp, err := ResultRaw(ctx, c, taskID)
	if t.Status == Completed {
		if err != nil {
			return nil, err
		}
		return decodeResult(resp, taskID)
	}
	te := &Error{Task: t}
	if err != nil {
		// The task's failure is known from tasks/get; the result's error says how it failed, or
		// why that could not be read.
		te.Err = err
		var e *mcpclient.Error
		if errors.As(err, &e) {
			if e.Code == mcpclient.CodeServerError {
				te.Err = e.Err
			}
			return nil, &mcpclient.Error{Code: mcpclient.CodeServerError, Request: e.Request, Attempts: e.Attempts, Err: te}
		}
		return nil, &mcpclient.Error{Code: mcpclient.CodeServerError, Err: te}
	}
	res, err := decodeResult(resp, taskID)
	if err != nil {
		return nil, err
	}
	te.Result = res
	return nil, &mcpclient.Error{Code: mcpclient.CodeServerError, Request: resp.Request, Attempts: resp.Attempts, Err: te}
}

// Inspection records a look at a task the server kept (its state from Get, List, Cancel or a
// status notification) as the mcpclient.Inspection that Supersede requires: tasks are a source
// of state to inspect before replacing an uncertain request. A nil task gives an empty
// Inspection, which Supersede refuses.
//
// The intended flow: CallTool ended with ErrOutcomeUnknown (the answer was lost, and the server
// keeps no receipts or the session that held them is gone), so a task may or may not exist. Do
// not send the call again blindly. Look for the task the request would have created, with Get if
// its id is known, else with List (a task created after the call started):
//   - a task found working, input_required or completed means the request ran: follow that task
//     (Await) and send nothing new;
//   - a task found failed or cancelled, when the work must still be done, or done otherwise, is
//     the evidence for c.Supersede(ctx, e.Request, tasks.Inspection(t), newParams): the new
//     tools/call (a new id, decoded into a CreateResult) records in the ledger and in
//     _meta.supersedes which request it replaces and what the caller saw;
//   - no task found is evidence too, recorded in an Inspection of your own ("tasks/list",
//     "no task created since ...").
func Inspection(t *Task) mcpclient.Inspection {
	if t == nil {
		return mcpclient.Inspection{}
	}
	found := "status " + string(t.Status)
	if t.StatusMessage != "" {
		found += " (" + t.StatusMessage + ")"
	}
	found += ", created " + t.CreatedAt + ", last updated " + t.LastUpdatedAt
	return mcpclient.Inspection{Checked: "tasks/get " + t.TaskID, Found: found}
}
