// Package tasks is the client side of MCP tasks: the client as the requestor of tools/call
// answered with a task, the server's handle on work that goes on in the background. It speaks
// both forms behind one API:
//
//   - the tasks extension (io.modelcontextprotocol/tasks, [Extension]) of the stateless
//     revisions (2026-07-28 and later): a tools/call that declares the extension may be answered
//     with a task, at the server's discretion; tasks/get shows the task, with its result or error
//     inlined once it ended and the requests for input it waits on; tasks/update answers them;
//     tasks/cancel asks to stop it. There is no tasks/list and no tasks/result.
//   - the experimental tasks of revision 2025-11-25: a task-augmented tools/call (the task
//     param) answered with {"task": ...}, tasks/get, tasks/result, tasks/list and tasks/cancel.
//
// [CallTool] makes the call and returns the [Task] (on the extension, the tool's result in a
// completed Task without an id when the server answered at once); [Await] follows a task to its
// end and returns the tool's result; [Get], [Update] and [Cancel] are the single steps. A task
// that waits for input gets the client's answers, from the handlers it was configured with
// (elicitation, sampling, roots), on each tasks/get that shows the requests: Get and Await need
// do nothing more; a request no handler answers is the caller's, with [Update].
//
// The request that creates a task is a tools/call like any other: its id, ledger entry and retry
// rules are those of [mcpclient.Client.CallTool], and a server that keeps receipts answers a
// resend under the same id with the same task, without creating a second one. That matters most
// on the extension, which has no tasks/list: a CreateTaskResult lost on the way strands its task
// where the server keeps no receipts for the call (the call ends with ErrOutcomeUnknown, and only
// the server's own means, a listing of its jobs, say, can find the task). The task requests
// themselves are read-only (tasks/get, tasks/list, tasks/result) or idempotent (tasks/update,
// tasks/cancel), so that re-issuing one after an uncertain attempt does no harm.
//
// A client that only wants the tool's result does not need this package on the extension:
// c.CallTool(ctx, name, args, mcpclient.WithExtension(tasks.Extension, nil)) follows a task the
// server makes to its end.
//
// The package is built on the client's public API (NewRequest, Do, CachedTools, Session,
// notification handlers); its calls take a mcpclient.Caller: a *mcpclient.Client, or a plugin
// that decorates one.
package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
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

// Extension is the identifier of the tasks extension of the stateless revisions.
const Extension = "io.modelcontextprotocol/tasks"

// DefaultPollInterval is how long Await waits between two tasks/get when the server suggests
// no pollInterval, unless PollInterval says otherwise.
const DefaultPollInterval = time.Second

// Task is the state of a task, as tasks/get, tasks/cancel, tasks/list, the answer to a
// task-augmented request and the status notifications carry it, in either form: the extension's
// ttlMs and pollIntervalMs are read into TTL and PollInterval.
type Task struct {
	// TaskID is the server's id of the task; "" for the Task CallTool returns when a server of
	// the extension answered the call at once, without a task.
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
	// InputRequests are, on the extension, the requests the task waits on while input_required,
	// by key: the server's requests (elicitation/create, sampling/createMessage, roots/list) as
	// {"method", "params"}. The client answers those it has handlers for; see Update.
	InputRequests map[string]json.RawMessage `json:"inputRequests,omitempty"`
	// Result is, on the extension, the tool's result of a completed task (see ToolResult).
	Result json.RawMessage `json:"result,omitempty"`
	// Error is, on the extension, the JSON-RPC error that failed a failed task.
	Error *mcpclient.RPCError `json:"error,omitempty"`
	// Meta is the _meta of the message that carried the task, if any.
	Meta json.RawMessage `json:"_meta,omitempty"`
}

// UnmarshalJSON reads a task in either form: the extension names its lifetime and interval
// ttlMs and pollIntervalMs, revision 2025-11-25 ttl and pollInterval.
func (t *Task) UnmarshalJSON(b []byte) error {
	type plain Task
	var w struct {
		plain
		TTLMs          *int64 `json:"ttlMs"`
		PollIntervalMs *int64 `json:"pollIntervalMs"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.TTL == nil {
		w.TTL = w.TTLMs
	}
	if w.PollInterval == nil {
		w.PollInterval = w.PollIntervalMs
	}
	*t = Task(w.plain)
	return nil
}

// ToolResult returns the tool's result a task of the extension ended with: its Result when
// completed (an isError result included, the tool's own answer), an *mcpclient.Error
// (CodeServerError) whose chain holds an *Error (ErrFailed, with the JSON-RPC error) when failed,
// or one with ErrCancelled when cancelled. A task that has not ended, or a task of 2025-11-25
// (whose result only tasks/result gives), has none: CodeInvalidArgument.
func (t *Task) ToolResult() (*mcpclient.CallToolResult, error) {
	switch {
	case t.Status == Completed && len(t.Result) > 0:
		var res mcpclient.CallToolResult
		if err := json.Unmarshal(t.Result, &res); err != nil {
			return nil, &mcpclient.Error{Code: mcpclient.CodeProtocol, Err: fmt.Errorf("decoding the result of task %s: %w", t.TaskID, err)}
		}
		return &res, nil
	case t.Status == Failed && t.Error != nil:
		return nil, &mcpclient.Error{Code: mcpclient.CodeServerError, Err: &Error{Task: t, Err: t.Error}}
	case t.Status == Cancelled:
		return nil, &mcpclient.Error{Code: mcpclient.CodeServerError, Err: &Error{Task: t}}
	}
	return nil, refused("task %s (%s) carries no result", t.TaskID, t.Status)
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

// CapabilitiesOf returns what caps declares: the tasks extension (tools/call and tasks/cancel,
// no listing), or capabilities.tasks of 2025-11-25; all false when it declares neither (or
// nothing this package understands).
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
	if _, ok := caps.Extensions[Extension]; ok {
		// The extension serves tasks/cancel, never tasks/list, and makes tasks of tools/call.
		return Capabilities{Cancel: true, ToolsCall: true}
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

// A StatusHandler learns a task's new state from a status notification: the extension's
// notifications/tasks (each a full task, result or error included once it ended, which a
// subscriptions/listen naming the task's id asks for) or notifications/tasks/status of
// 2025-11-25. Servers need not send them: a caller waiting for a task polls it (Await does). It
// runs on the client's notification goroutine: it must not block, but it may call the client.
type StatusHandler func(ctx context.Context, t *Task)

// WithStatusHandler has the client hand status notifications of either form to h (over
// Streamable HTTP in 2025-11-25, the client then opens the session's GET stream, where servers
// send them). A malformed notification is dropped. Default: dropped.
func WithStatusHandler(h StatusHandler) mcpclient.Option {
	handle := func(ctx context.Context, _ string, params json.RawMessage) {
		var t Task
		if json.Unmarshal(params, &t) != nil || t.validate("") != nil {
			return
		}
		h(ctx, &t)
	}
	return mcpclient.WithOptions(
		mcpclient.WithNotificationHandler("notifications/tasks/status", handle),
		mcpclient.WithNotificationHandler("notifications/tasks", handle),
	)
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
	// ErrInputRequired: Await found the task waiting for input the client has no handler for
	// (the capability the request asks for is not among those the client declares); the
	// *Error in the chain holds the task and its InputRequests. Answer them with Update, or
	// Cancel the task.
	ErrInputRequired = errors.New("tasks: task waits for input the client cannot give")
)

// Error is the cause of the *mcpclient.Error Await returns for a task that failed, was cancelled,
// or waits for input the client cannot give. errors.Is matches it with ErrFailed, ErrCancelled
// or ErrInputRequired.
type Error struct {
	// Task is the task's final state.
	Task *Task
	// Result is the tool's own answer, an isError result, when tasks/result returned one.
	Result *mcpclient.CallToolResult
	// Err is the JSON-RPC error (*mcpclient.RPCError) that failed the task (inlined by the
	// extension, answered by tasks/result in 2025-11-25), or why the result could not be
	// fetched; nil when Result is set.
	Err error
}

func (e *Error) sentinel() error {
	switch {
	case e.Task != nil && e.Task.Status == Cancelled:
		return ErrCancelled
	case e.Task != nil && e.Task.Status == InputRequired:
		return ErrInputRequired
	}
	return ErrFailed
}

func (e *Error) Error() string {
	what := "failed"
	switch e.sentinel() {
	case ErrCancelled:
		what = "was cancelled"
	case ErrInputRequired:
		what = "waits for input the client has no handler for"
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

// onExtension reports whether the session speaks a stateless revision, where tasks are the
// extension's.
func onExtension(init mcpclient.InitializeResult) bool {
	return init.ProtocolVersion >= mcpclient.ProtocolVersion20260728 // revisions are dates
}

// declared is the CallOption by which a request declares the extension: for itself alone, so
// that the client's other calls are answered as they expect.
var declared = mcpclient.WithExtension(Extension, nil)

// session returns the live session's settlement, and the options that make a request of
// method speak the form of tasks it uses.
func session(ctx context.Context, c mcpclient.Caller, opts []mcpclient.CallOption) (mcpclient.InitializeResult, []mcpclient.CallOption, error) {
	init, err := c.Session(ctx)
	if err != nil || !onExtension(init) {
		return init, opts, err
	}
	return init, append(opts[:len(opts):len(opts)], declared), nil
}

// checkSupport refuses, locally, a task-augmented call the server does not allow: the protocol
// says a client MUST NOT send one. It lists the tools when the client holds no listing. On the
// extension the server alone decides which calls become tasks: it need only declare it.
func checkSupport(ctx context.Context, c mcpclient.Caller, init mcpclient.InitializeResult, name string) error {
	if onExtension(init) {
		if _, ok := init.Capabilities.Extensions[Extension]; !ok {
			return refused("%w: the server does not declare the %s extension (tool %s)", ErrNotSupported, Extension, name)
		}
		return nil
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

// plainCallParams is a tools/call of the extension, which asks for no task: the declaration does.
type plainCallParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
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

// extensionAnswer decodes the answer to a tools/call of the extension: a task (resultType
// "task", its fields at the top level), or the tool's result when the server made no task.
type extensionAnswer struct{ task Task }

func (ea *extensionAnswer) UnmarshalJSON(b []byte) error {
	var kind struct {
		ResultType string `json:"resultType"`
	}
	if err := json.Unmarshal(b, &kind); err != nil {
		return err
	}
	if kind.ResultType != "task" {
		var res mcpclient.CallToolResult
		if err := json.Unmarshal(b, &res); err != nil {
			return err
		}
		ea.task = Task{Status: Completed, Result: append(json.RawMessage(nil), b...)}
		return nil
	}
	if err := json.Unmarshal(b, &ea.task); err != nil {
		return err
	}
	return ea.task.validate("")
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

// CallTool calls the tool name with args as a task and returns the task the server created,
// usually still working: follow it with Await, Get and, in 2025-11-25, Result. args may be nil,
// a json.RawMessage, or anything encoding/json marshals to an object.
//
// On the extension (2026-07-28 and later) the call declares the extension for itself alone, and
// the server decides whether to make a task of it: when it answers at once, CallTool returns a
// completed Task without a TaskID whose Result holds the answer (see ToolResult). The server
// alone sets a task's ttl there, so ttl is not sent. It refuses locally, with ErrNotSupported
// (CodeInvalidArgument), a server that does not declare the extension.
//
// In 2025-11-25, ttl asks the server to keep the task that long after its creation (it may
// choose otherwise; see Task.TTL); 0 leaves it to the server. It refuses locally, with
// ErrNotSupported, a server whose capabilities lack tasks.requests.tools.call and a tool whose
// listed execution.taskSupport is not "required" or "optional"; it lists the tools first when
// the client holds no listing.
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
	init, opts, err := session(ctx, c, opts)
	if err != nil {
		return nil, err
	}
	if err := checkSupport(ctx, c, init, name); err != nil {
		return nil, err
	}
	if onExtension(init) {
		var res extensionAnswer
		if _, err := extcall.Call(ctx, c, "tools/call", plainCallParams{Name: name, Arguments: rawArgs}, &res, opts); err != nil {
			return nil, err
		}
		return &res.task, nil
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
// it is re-issued under a new id. On the extension the state carries the task's result or error
// once it ended, and while it is input_required the requests it waits on, which the client has
// answered with its handlers, where it has them, before Get returns (the state shown is the one
// from before those answers).
func Get(ctx context.Context, c mcpclient.Caller, taskID string, opts ...mcpclient.CallOption) (*Task, error) {
	t, _, err := get(ctx, c, taskID, opts)
	return t, err
}

// get is Get, returning the tasks/get response too.
func get(ctx context.Context, c mcpclient.Caller, taskID string, opts []mcpclient.CallOption) (*Task, *mcpclient.Response, error) {
	if err := idArgument("tasks/get", taskID); err != nil {
		return nil, nil, err
	}
	_, opts, err := session(ctx, c, opts)
	if err != nil {
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

// Update answers requests for input that a task of the extension waits on (tasks/update):
// responses by the keys of its InputRequests, each the result its request asks for (an
// mcpclient.ElicitResult, an mcpclient.CreateMessageResult, {"roots": [...]}). The client answers
// the requests it has handlers for by itself, on each tasks/get that shows them; Update is for
// the others. The server takes the answers to keys still outstanding and ignores the rest, so
// Update is safe to repeat; it refuses (-32602) an answer that is no result of its request.
// Revision 2025-11-25 has no tasks/update: there it is refused with ErrNotSupported.
func Update(ctx context.Context, c mcpclient.Caller, taskID string, responses map[string]any, opts ...mcpclient.CallOption) error {
	if err := idArgument("tasks/update", taskID); err != nil {
		return err
	}
	if len(responses) == 0 {
		return refused("tasks/update of task %s needs at least one response", taskID)
	}
	init, opts, err := session(ctx, c, opts)
	if err != nil {
		return err
	}
	if !onExtension(init) {
		return refused("%w: tasks/update is the %s extension's, not in %s", ErrNotSupported, Extension, init.ProtocolVersion)
	}
	_, err = extcall.Call(ctx, c, "tasks/update", updateParams{TaskID: taskID, InputResponses: responses}, nil, opts)
	return err
}

type updateParams struct {
	TaskID         string         `json:"taskId"`
	InputResponses map[string]any `json:"inputResponses"`
}

// Cancel asks the server to cancel the task (tasks/cancel) and returns its state.
//
// On the extension the server acknowledges at once, and stops the work when and if it can:
// Cancel then reads the task (tasks/get), which may still be working, or have ended otherwise
// if the work finished first; Await tells how it ended.
//
// In 2025-11-25 the answer is the task, cancelled, and a server refuses (CodeServerError,
// -32602) to cancel a task already terminal. The request is idempotent: after an uncertain
// attempt it is re-issued, and should the re-issue find the task cancelled already (by the first
// attempt), Cancel returns that state rather than the refusal.
func Cancel(ctx context.Context, c mcpclient.Caller, taskID string, opts ...mcpclient.CallOption) (*Task, error) {
	if err := idArgument("tasks/cancel", taskID); err != nil {
		return nil, err
	}
	init, extOpts, err := session(ctx, c, opts)
	if err != nil {
		return nil, err
	}
	if onExtension(init) {
		if _, err := extcall.Call(ctx, c, "tasks/cancel", idParams{taskID}, nil, extOpts); err != nil {
			return nil, err
		}
		return Get(ctx, c, taskID)
	}
	ct := checkedTask{want: taskID}
	_, err = extcall.Call(ctx, c, "tasks/cancel", idParams{taskID}, &ct, opts)
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
// suggests none, PollInterval's, DefaultPollInterval by default), until the task is terminal.
// On the extension the last poll carries the result or the error; in 2025-11-25 Await then
// fetches the result with tasks/result. While the task is input_required the client answers its
// requests with its handlers (on the extension, through tasks/update on the poll that shows
// them; in 2025-11-25, as the server's own requests), and Await keeps polling; a request for a
// capability the client does not declare ends Await with ErrInputRequired, for the caller to
// answer with Update or to Cancel.
//
// A completed task returns its result (an isError result included: the tool's answer). A failed
// or cancelled one returns an *mcpclient.Error (CodeServerError) whose chain holds an *Error
// naming the task, with its final state and the JSON-RPC error (or, in 2025-11-25, the tool's
// isError result that tasks/result gave); errors.Is matches ErrFailed or ErrCancelled. If ctx
// ends, the error is CodeOutcomeUnknown: the task goes on at the server, and Await may be called
// again.
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
		if t.Terminal() && (len(t.Result) > 0 || t.Error != nil || t.Status == Cancelled) {
			res, err := t.ToolResult() // the extension inlines how the task ended
			var e *mcpclient.Error
			if errors.As(err, &e) {
				e.Request, e.Attempts = poll.Request, poll.Attempts
			}
			return res, err
		}
		if t.Terminal() {
			break
		}
		if t.Status == InputRequired {
			if unanswerable := cannotAnswer(t, poll.Request); len(unanswerable) > 0 {
				return nil, &mcpclient.Error{Code: mcpclient.CodeServerError, Request: poll.Request, Attempts: poll.Attempts,
					Err: &Error{Task: t, Err: fmt.Errorf("no handler declared for %v", unanswerable)}}
			}
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

// capabilityOf names the client capability each request for input needs.
var capabilityOf = map[string]string{
	"elicitation/create":     "elicitation",
	"sampling/createMessage": "sampling",
	"roots/list":             "roots",
}

// cannotAnswer returns the methods of t's requests for input that need a capability poll (the
// request that showed them) does not declare: the client has no handler for them, and waiting
// would wait forever.
func cannotAnswer(t *Task, poll *mcpclient.Request) []string {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	json.Unmarshal(poll.Params(), &p) // the client wrote them
	var declared map[string]json.RawMessage
	json.Unmarshal(p.Meta["io.modelcontextprotocol/clientCapabilities"], &declared)
	var missing []string
	for _, raw := range t.InputRequests {
		var in struct {
			Method string `json:"method"`
		}
		json.Unmarshal(raw, &in)
		if _, ok := declared[capabilityOf[in.Method]]; !ok && !slices.Contains(missing, in.Method) {
			missing = append(missing, in.Method)
		}
	}
	slices.Sort(missing)
	return missing
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
