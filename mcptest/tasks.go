package mcptest

// Tasks (MCP 2025-11-25, experimental), the server side.
//
// A tool registered with Execution.TaskSupport "optional" or "required" (a field of the
// mcpclient.Tool given to WithTool or AddTool) may be called as a task: a tools/call whose params
// carry "task" creates one, runs the tool in the background and answers at once with
// tasks.CreateResult. Any such tool makes the server declare capabilities.tasks (list, cancel and
// requests.tools.call) and serve tasks/get, tasks/result, tasks/list and tasks/cancel. Without
// one the server declares nothing and, as the protocol asks, runs a tools/call carrying "task"
// as a plain call.
//
// The task-creating tools/call is a tools/call like any other for the server's mode: with
// receipts, a resend under the same id with the same content gets the same tasks.CreateResult and
// creates no second task, and faults match it as they match any call of the tool
// (DropAfterExecution creates the task and loses the answer).
//
// Tasks belong to the server, not to a session: any client may read, list or cancel any task,
// as on a server without authorization (task ids are random UUIDs). A restart forgets them, and
// cancels those running. A task's tool runs under a context that tasks/cancel, Close and Restart
// end; what the tool sends its client (ToolCall.Progress, ToolCall.Request, RequestInput) goes
// to the session that created the task by the session's own way (its connection, its legacy
// stream, or its Streamable HTTP GET stream), since the request's own answer is long sent.
// Status changes are sent the same way as notifications/tasks/status.
//
// The stateless revisions serve tasks through the tasks extension instead (tasks_ext.go). The
// two kinds share the store of the epoch, but each is served only by the methods of the
// revisions that created it: their shapes and their rules for a tool's own error differ.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/internal/metakeys"
	"github.com/northstar-mcp/mcpclient/tasks"
)

// DefaultTaskPollInterval is the pollInterval a server suggests for its tasks unless
// WithTaskPollInterval says otherwise.
const DefaultTaskPollInterval = 100 * time.Millisecond

// DefaultMaxTasks bounds the tasks a server holds unless WithMaxTasks says otherwise.
const DefaultMaxTasks = 1024

// WithTaskPollInterval sets the pollInterval the server suggests in its tasks. Default
// DefaultTaskPollInterval; d <= 0 keeps the default.
func WithTaskPollInterval(d time.Duration) Option {
	return optionFunc(func(s *Server) {
		if d > 0 {
			s.taskPoll = d
		}
	})
}

// WithMaxTasks bounds the tasks the server holds. A full store refuses new tasks (JSON-RPC
// -32000, data.code "MCP_TASKS_FULL") and evicts only terminal tasks whose ttl has run out.
// Default DefaultMaxTasks.
func WithMaxTasks(n int) Option {
	return optionFunc(func(s *Server) {
		if n > 0 {
			s.maxTasks = n
		}
	})
}

// A task is one task of an epoch. Its fields are guarded by Server.mu; id, tool, ep, session,
// created, ttl, done and cancel are set at creation.
type task struct {
	id      string
	tool    string
	ep      *epoch
	session string // the session that created it, where status notifications go
	// ext: created through the tasks extension of a stateless revision (see tasks_ext.go),
	// whose methods alone serve it, in their own shape.
	ext     bool
	created time.Time
	ttl     *int64 // milliseconds; nil: kept without limit

	status  tasks.Status
	message string
	updated time.Time
	reply   answer                  // the call's answer, once terminal
	done    chan struct{}           // closed when the task turns terminal
	cancel  context.CancelCauseFunc // ends the tool's context

	// The input a task of the extension asks its client for (see tasks_input.go): the requests
	// it waits on, by key, as tasks/get shows them; every key it ever asked, since the extension
	// keeps a key to one request over the task's life; and how many it asked, which numbers the
	// keys it names itself.
	inputs map[string]*pendingInput
	keys   map[string]bool
	asked  int
}

func (t *task) terminalLocked() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// wireLocked is the task as the protocol shows it.
func (t *task) wireLocked(poll time.Duration) *tasks.Task {
	ms := poll.Milliseconds()
	w := &tasks.Task{
		TaskID:        t.id,
		Status:        t.status,
		StatusMessage: t.message,
		CreatedAt:     t.created.UTC().Format(time.RFC3339Nano),
		LastUpdatedAt: t.updated.UTC().Format(time.RFC3339Nano),
		PollInterval:  &ms,
	}
	if t.ttl != nil {
		ttl := *t.ttl
		w.TTL = &ttl
	}
	return w
}

func (s *Server) pollInterval() time.Duration {
	if s.taskPoll > 0 {
		return s.taskPoll
	}
	return DefaultTaskPollInterval
}

// Tasks returns the number of tasks the server holds.
func (s *Server) Tasks() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.epoch.tasks)
}

func taskSupportOf(tool mcpclient.Tool) string {
	if tool.Execution == nil {
		return ""
	}
	return tool.Execution.TaskSupport
}

func taskCapable(support string) bool {
	return support == tasks.SupportOptional || support == tasks.SupportRequired
}

// tasksDeclared reports whether any tool may run as a task, which makes the server declare
// capabilities.tasks.
func (s *Server) tasksDeclared() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tasksDeclaredLocked()
}

func (s *Server) tasksDeclaredLocked() bool {
	for _, te := range s.tools {
		if taskCapable(taskSupportOf(te.tool)) {
			return true
		}
	}
	return false
}

// declareTasks adds capabilities.tasks to an initialize answer when a tool may run as a task.
func (s *Server) declareTasks(a answer) answer {
	if a.isError || !s.tasksDeclared() {
		return a
	}
	var res map[string]json.RawMessage
	var caps map[string]json.RawMessage
	if json.Unmarshal(a.body, &res) != nil || json.Unmarshal(res["capabilities"], &caps) != nil {
		return a
	}
	if caps == nil {
		caps = map[string]json.RawMessage{}
	}
	caps["tasks"] = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)
	res["capabilities"], _ = json.Marshal(caps) // raw values marshal as they are
	return resultAnswer(res)
}

// toolsCall serves tools/call: as a task when the params carry "task" and the server declares
// tasks, else as a plain call, which a tool requiring tasks refuses.
func (s *Server) toolsCall(ctx context.Context, ep *epoch, m jsonrpc.Message, key string, st *sessionState, out outlet) answer {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Task      json.RawMessage `json:"task"`
		Meta      struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil || p.Name == "" {
		return s.callTool(ctx, ep, m, key, st, out, false) // which answers the bad params
	}
	augmented := len(p.Task) > 0 && string(p.Task) != "null"
	if !s.tasksDeclared() {
		return s.callTool(ctx, ep, m, key, st, out, false)
	}
	s.mu.Lock()
	var support string
	if te := s.tools[p.Name]; te != nil {
		support = taskSupportOf(te.tool)
	}
	s.mu.Unlock()
	switch {
	case augmented:
		var id mcpclient.ID
		json.Unmarshal([]byte(key), &id) // key came from a parsed id
		call := &ToolCall{ID: id, Name: p.Name, Arguments: p.Arguments, srv: s, session: st}
		if len(p.Meta.ProgressToken) > 0 && string(p.Meta.ProgressToken) != "null" {
			call.ProgressToken = p.Meta.ProgressToken
		}
		return s.createTask(ep, call, key, p.Task)
	case support == tasks.SupportRequired:
		return errorAnswer(mcpclient.RPCMethodNotFound, "tool "+p.Name+" requires task-augmented execution", nil)
	}
	return s.callTool(ctx, ep, m, key, st, out, false)
}

// createTask creates a task for call as the request's task param (meta) asks, starts the tool in
// the background and answers with the task.
func (s *Server) createTask(ep *epoch, call *ToolCall, key string, meta json.RawMessage) answer {
	var tm struct {
		TTL *float64 `json:"ttl"`
	}
	if err := json.Unmarshal(meta, &tm); err != nil {
		return errorAnswer(mcpclient.RPCInvalidParams, "task: "+err.Error(), nil)
	}
	if tm.TTL != nil && *tm.TTL < 0 {
		return errorAnswer(mcpclient.RPCInvalidParams, "task: negative ttl", nil)
	}
	var ttl *int64
	if tm.TTL != nil {
		ms := int64(*tm.TTL)
		ttl = &ms
	}
	return s.startTask(ep, call, key, ttl, false)
}

// startTask creates a task for call, kept ttl milliseconds (nil: without limit), starts the
// tool in the background and answers with the task: in the shape of the tasks extension if ext,
// else in that of 2025-11-25.
func (s *Server) startTask(ep *epoch, call *ToolCall, key string, ttl *int64, ext bool) answer {
	ctx, cancel := context.WithCancelCause(ep.ctx)
	t, created, refusal := s.registerTask(ep, call, ttl, ext, cancel)
	if refusal != nil {
		cancel(nil)
		return *refusal
	}
	// The request that creates the task is one the wait group counts: Close cannot be done
	// waiting yet.
	s.wg.Add(1)
	go s.runTask(ctx, t, call, key)
	return created
}

// registerTask creates a task for call in ep, whose tool's context cancel ends, and returns it
// with the answer that tells of it, or the refusal of a call that cannot have one. A task of
// 2025-11-25 sends what its tool sends to the session that created it; a task of the extension
// sends its client nothing but its requests for input.
func (s *Server) registerTask(ep *epoch, call *ToolCall, ttl *int64, ext bool, cancel context.CancelCauseFunc) (t *task, created answer, refusal *answer) {
	refuse := func(a answer) (*task, answer, *answer) { return nil, answer{}, &a }
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	te := s.tools[call.Name]
	switch {
	case te == nil:
		return refuse(errorAnswer(mcpclient.RPCInvalidParams, "unknown tool: "+call.Name, nil))
	case !taskCapable(taskSupportOf(te.tool)):
		return refuse(errorAnswer(mcpclient.RPCMethodNotFound, "tool "+call.Name+" does not support task-augmented execution", nil))
	case s.closed:
		return refuse(errorAnswer(mcpclient.RPCInternalError, "server closed", nil))
	}
	if ep.tasks == nil {
		ep.tasks = make(map[string]*task)
	}
	s.purgeExpiredLocked(ep, now)
	if limit := s.maxTasksLocked(); len(ep.tasks) >= limit {
		return refuse(errorAnswer(-32000, "task store full: new tasks are refused",
			map[string]any{"code": "MCP_TASKS_FULL", "maxTasks": limit}))
	}
	t = &task{
		id:      uuid.NewString(),
		tool:    call.Name,
		ep:      ep,
		created: now,
		updated: now,
		status:  tasks.Working,
		done:    make(chan struct{}),
		cancel:  cancel,
		ext:     ext,
		ttl:     ttl,
	}
	if call.input != nil {
		// A call that becomes a task midway: the task goes on numbering its requests for input
		// from where its multi round-trip request left off, and keeps the keys that one asked.
		t.asked, t.keys = call.input.keysAsked()
	}
	call.mu.Lock()
	if call.session != nil && !ext {
		t.session = call.session.id
		call.out = outletFunc(call.session.send)
	}
	if ext {
		call.out = nil // the request's answer is sent: nothing the tool sends has a way to its client
	}
	call.task = t
	call.mu.Unlock()
	ep.tasks[t.id] = t
	ep.taskOrder = append(ep.taskOrder, t.id)
	if ext {
		return t, resultAnswer(createTaskResult{ResultType: "task", detailedTask: t.detailedLocked(s.pollInterval())}), nil
	}
	return t, resultAnswer(tasks.CreateResult{Task: t.wireLocked(s.pollInterval())}), nil
}

func (s *Server) maxTasksLocked() int {
	if s.maxTasks > 0 {
		return s.maxTasks
	}
	return DefaultMaxTasks
}

// purgeExpiredLocked forgets the terminal tasks whose ttl has run out. Running tasks stay until
// they end, however old.
func (s *Server) purgeExpiredLocked(ep *epoch, now time.Time) {
	kept := ep.taskOrder[:0]
	for _, id := range ep.taskOrder {
		t := ep.tasks[id]
		if t.ttl != nil && t.terminalLocked() && now.Sub(t.created) >= time.Duration(*t.ttl)*time.Millisecond {
			delete(ep.tasks, id)
			continue
		}
		kept = append(kept, id)
	}
	clear(ep.taskOrder[len(kept):])
	ep.taskOrder = kept
}

// runTask runs a task's tool and records its outcome, unless the task was cancelled first.
func (s *Server) runTask(ctx context.Context, t *task, call *ToolCall, key string) {
	defer s.wg.Done()
	defer t.cancel(nil)
	s.finishTask(t, s.execute(ctx, call, key))
}

// finishTask records the outcome of a task's tool, a, unless the task already ended.
func (s *Server) finishTask(t *task, a answer) {
	status, message := tasks.Completed, ""
	if a.isError {
		status = tasks.Failed
		var e mcpclient.RPCError
		json.Unmarshal(a.body, &e) // our own error object
		message = e.Message
	} else if !t.ext {
		// In 2025-11-25 a tool's own error fails its task; the extension keeps failed for
		// errors of the protocol, and completes the task with the isError result.
		var res mcpclient.CallToolResult
		if json.Unmarshal(a.body, &res) == nil && res.IsError {
			status, message = tasks.Failed, res.Text()
		}
	}
	s.settleTask(t, status, message, a)
}

// settleTask moves a task to a terminal status with its answer, unless it already is terminal
// (cancelled).
func (s *Server) settleTask(t *task, status tasks.Status, message string, a answer) {
	s.mu.Lock()
	settled := s.settleLocked(t, status, message, a)
	var note *tasks.Task
	if settled {
		note = s.taskNoteLocked(t)
	}
	s.mu.Unlock()
	if settled {
		s.notifyTaskStatus(t, note)
	}
}

// settleLocked moves a task to a terminal status; false if it already was terminal.
func (s *Server) settleLocked(t *task, status tasks.Status, message string, a answer) bool {
	if t.terminalLocked() {
		return false
	}
	t.status, t.message, t.updated, t.reply = status, message, time.Now(), a
	t.inputs = nil // an ended task waits on nothing
	close(t.done)
	return true
}

// moveTask moves a task from one non-terminal status to another; false if it was not in from.
func (s *Server) moveTask(t *task, from, to tasks.Status, message string) bool {
	s.mu.Lock()
	if t.status != from || t.terminalLocked() {
		s.mu.Unlock()
		return false
	}
	t.status, t.message, t.updated = to, message, time.Now()
	note := s.taskNoteLocked(t)
	s.mu.Unlock()
	s.notifyTaskStatus(t, note)
	return true
}

// taskNoteLocked announces a change of a task's state. A task of the extension is announced at
// once to the listeners that asked for it, under the lock, so that they hear of its changes in
// the order they happened (a listener's queue takes a notification without waiting, or drops
// it), and the note is nil. For any other task the note is the task now, which notifyTaskStatus
// sends once s.mu is released.
func (s *Server) taskNoteLocked(t *task) *tasks.Task {
	if t.ext {
		s.notifyTaskListenersLocked(t.id, t.detailedLocked(s.pollInterval()))
		return nil
	}
	return t.wireLocked(s.pollInterval())
}

// notifyTaskStatus sends a task's note (from taskNoteLocked), if any, with
// notifications/tasks/status to the session that created the task, if it is still there.
func (s *Server) notifyTaskStatus(t *task, note *tasks.Task) {
	if note == nil {
		return
	}
	st := s.sessionState(t.ep, t.session)
	if st == nil {
		return
	}
	params, _ := json.Marshal(note) // plain fields
	ctx, cancel := context.WithTimeout(s.ctx, sendTimeout)
	defer cancel()
	if err := st.notify(ctx, jsonrpc.AppendRequest(nil, "", "notifications/tasks/status", params)); err != nil {
		s.log.Debug("mcptest: notifications/tasks/status not sent", "task", t.id, "err", err)
	}
}

// taskMethod serves tasks/get, tasks/result, tasks/list and tasks/cancel.
func (s *Server) taskMethod(ctx context.Context, ep *epoch, m jsonrpc.Message) answer {
	if !s.tasksDeclared() {
		return errorAnswer(mcpclient.RPCMethodNotFound, "method not found: "+m.Method, nil)
	}
	if m.Method == "tasks/list" {
		return s.listTasks(ep, m)
	}
	var p struct {
		TaskID string `json:"taskId"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil || p.TaskID == "" {
		return errorAnswer(mcpclient.RPCInvalidParams, m.Method+" needs params with a taskId", nil)
	}
	s.mu.Lock()
	s.purgeExpiredLocked(ep, time.Now())
	t := ep.tasks[p.TaskID]
	if t == nil || t.ext {
		s.mu.Unlock()
		return errTaskNotFound
	}
	switch m.Method {
	case "tasks/get":
		w := t.wireLocked(s.pollInterval())
		s.mu.Unlock()
		return resultAnswer(w)
	case "tasks/cancel":
		status := t.status
		if !s.cancelLocked(t) {
			s.mu.Unlock()
			return errorAnswer(mcpclient.RPCInvalidParams, fmt.Sprintf("Cannot cancel task: already in terminal status '%s'", status), nil)
		}
		w, note := t.wireLocked(s.pollInterval()), s.taskNoteLocked(t)
		s.mu.Unlock()
		t.cancel(nil) // the tool's context; whatever it returns now, the task stays cancelled
		s.notifyTaskStatus(t, note)
		return resultAnswer(w)
	}
	// tasks/result waits for the task to end.
	s.mu.Unlock()
	select {
	case <-t.done:
	case <-ctx.Done():
		return errorAnswer(mcpclient.RPCInternalError, "cancelled while waiting for task "+t.id, nil)
	}
	return withRelatedTask(t.reply, t.id)
}

// errTaskNotFound answers a task request for a task the server does not hold.
var errTaskNotFound = errorAnswer(mcpclient.RPCInvalidParams, "Failed to retrieve task: Task not found", nil)

// cancelLocked moves a task to cancelled; false if it already was terminal.
func (s *Server) cancelLocked(t *task) bool {
	return s.settleLocked(t, tasks.Cancelled, "The task was cancelled by request.",
		errorAnswer(mcpclient.RPCInternalError, "task "+t.id+" was cancelled", nil))
}

// withRelatedTask adds _meta["io.modelcontextprotocol/related-task"] to a result answer.
func withRelatedTask(a answer, taskID string) answer {
	if a.isError {
		return a
	}
	var res map[string]json.RawMessage
	if json.Unmarshal(a.body, &res) != nil {
		return a
	}
	meta := map[string]any{}
	if raw := res["_meta"]; raw != nil {
		json.Unmarshal(raw, &meta) // a result's _meta is an object
	}
	meta[metakeys.RelatedTask] = map[string]string{"taskId": taskID}
	res["_meta"], _ = json.Marshal(meta)
	return resultAnswer(res)
}

func (s *Server) listTasks(ep *epoch, m jsonrpc.Message) answer {
	cursor, bad := cursorOf(m)
	if bad != nil {
		return *bad
	}
	s.mu.Lock()
	s.purgeExpiredLocked(ep, time.Now())
	listed := make([]string, 0, len(ep.taskOrder))
	for _, id := range ep.taskOrder {
		if !ep.tasks[id].ext {
			listed = append(listed, id)
		}
	}
	ids, next, ok := page(listed, cursor, s.pageSize)
	res := tasks.ListResult{Tasks: []*tasks.Task{}, NextCursor: next}
	for _, id := range ids {
		res.Tasks = append(res.Tasks, ep.tasks[id].wireLocked(s.pollInterval()))
	}
	s.mu.Unlock()
	if !ok {
		return errorAnswer(mcpclient.RPCInvalidParams, "invalid cursor", nil)
	}
	return resultAnswer(res)
}

// TaskID returns the id of the task the call runs as, or "" for a plain tools/call.
func (c *ToolCall) TaskID() string {
	t := c.currentTask()
	if t == nil {
		return ""
	}
	return t.id
}

// RequestInput is Request for a call that may run as a task. For a task of 2025-11-25 it tags
// the request's _meta with io.modelcontextprotocol/related-task, and moves the task to
// input_required while it waits for the client's answer and back to working after (each move
// sends notifications/tasks/status). params must marshal to a JSON object, or be nil. For a plain
// call, and for a task of the tasks extension, whose requests tasks/get shows, it is Request.
func (c *ToolCall) RequestInput(ctx context.Context, method string, params any) (json.RawMessage, error) {
	t := c.currentTask()
	if t == nil || t.ext {
		return c.Request(ctx, method, params)
	}
	fields := map[string]json.RawMessage{}
	if params != nil {
		raw, err := json.Marshal(params)
		if err != nil {
			return nil, fmt.Errorf("mcptest: params of %s: %w", method, err)
		}
		if string(raw) != "null" {
			if err := json.Unmarshal(raw, &fields); err != nil {
				return nil, fmt.Errorf("mcptest: params of %s must be a JSON object: %w", method, err)
			}
		}
	}
	meta := map[string]any{}
	if raw := fields["_meta"]; raw != nil {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, fmt.Errorf("mcptest: params._meta of %s must be a JSON object: %w", method, err)
		}
	}
	meta[metakeys.RelatedTask] = map[string]string{"taskId": t.id}
	fields["_meta"], _ = json.Marshal(meta)
	if c.srv.moveTask(t, tasks.Working, tasks.InputRequired, "waiting for "+method) {
		defer c.srv.moveTask(t, tasks.InputRequired, tasks.Working, "")
	}
	return c.Request(ctx, method, fields)
}
