package mcptest

// The tasks extension (io.modelcontextprotocol/tasks) of the stateless revisions, the server
// side.
//
// The tools that may run as tasks are those of tasks.go: Execution.TaskSupport "optional" or
// "required". Any such tool makes server/discover declare the extension, and the server serve
// tasks/get, tasks/update and tasks/cancel; it never declares the capabilities.tasks of
// 2025-11-25 there, nor serves tasks/result or tasks/list.
//
// A request opts in by naming the extension in the client capabilities of its _meta, and only
// that request: capabilities are per request. The server decides which calls become tasks, and
// it makes one of every call of a task tool that opted in: the answer is a CreateTaskResult,
// resultType "task", with the task's fields at the top level. A call that did not opt in runs as
// a plain call, unless its tool requires a task: then it is refused with -32021 naming the
// extension. The task param of 2025-11-25 means nothing here.
//
// tasks/get answers the task with, once it ended, the tool's result (completed, an isError
// result included) or the JSON-RPC error that failed it (failed; see ProtocolError), and while
// its tool waits for input, the requests it waits on (input_required, inputRequests).
// tasks/update delivers the client's answers to them (tasks_input.go) and acknowledges with an
// empty result; tasks/cancel acknowledges likewise, for a task that already ended too. Requests
// of these methods that did not opt in are refused with -32021.
//
// A subscriptions/listen whose filter names taskIds gets notifications/tasks for those of them
// the server holds (its acknowledgement lists them): each change of status or of the requests
// for input carries the task as tasks/get would answer it. Naming taskIds without opting in is
// refused with -32021.
//
// The task-creating tools/call is a tools/call like any other for receipts (when it opts in to
// them) and faults. A task of the extension sends its client nothing while it runs but its
// requests for input: progress and log records have no way to it.

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/tasks"
)

// tasksExtension is the identifier of the tasks extension.
const tasksExtension = "io.modelcontextprotocol/tasks"

// WithTaskTTL sets how long the server keeps a task it creates through the tasks extension of
// the stateless revisions, from its creation (the task's ttlMs; a running task stays until it
// ends): there the server alone decides it. d is rounded down to milliseconds, and d < 1ms keeps
// tasks without limit (ttlMs null), as the default does. The tasks of 2025-11-25 keep the ttl
// their requester asked for.
func WithTaskTTL(d time.Duration) Option {
	return optionFunc(func(s *Server) { s.taskTTL = d })
}

// extensionTaskTTL is the ttl, in milliseconds, of a task created through the extension; nil
// for none.
func (s *Server) extensionTaskTTL() *int64 {
	ms := s.taskTTL.Milliseconds()
	if ms <= 0 {
		return nil
	}
	return &ms
}

// optedIntoTasks reports whether a request of a stateless revision named the tasks extension
// among its client capabilities.
func optedIntoTasks(st *sessionState) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	_, ok := st.caps.Extensions[tasksExtension]
	return ok
}

// missingTasksCapability refuses what needs the client to have opted into the tasks extension.
func missingTasksCapability(what string) answer {
	return errorAnswer(rpcMissingRequiredClientCapability, "Missing required client capability: "+what+" needs the "+tasksExtension+" extension",
		map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{tasksExtension: struct{}{}}}})
}

// withTasksExtension returns extensions, a map the caller may not modify, with the tasks
// extension declared.
func withTasksExtension(extensions map[string]json.RawMessage) map[string]json.RawMessage {
	out := maps.Clone(extensions)
	if out == nil {
		out = make(map[string]json.RawMessage, 1)
	}
	out[tasksExtension] = json.RawMessage(`{}`)
	return out
}

// A detailedTask is a task of the extension as tasks/get and notifications/tasks carry it: with
// the tool's result once completed, the error that failed it once failed.
type detailedTask struct {
	TaskID        string       `json:"taskId"`
	Status        tasks.Status `json:"status"`
	StatusMessage string       `json:"statusMessage,omitempty"`
	CreatedAt     string       `json:"createdAt"`
	LastUpdatedAt string       `json:"lastUpdatedAt"`
	// TTLMs is null when the task is kept without limit.
	TTLMs          *int64 `json:"ttlMs"`
	PollIntervalMs int64  `json:"pollIntervalMs"`
	// InputRequests are the requests for input the task waits on, while input_required.
	InputRequests map[string]wireRequest     `json:"inputRequests,omitempty"`
	Result        json.RawMessage            `json:"result,omitempty"`
	Error         json.RawMessage            `json:"error,omitempty"`
	Meta          map[string]json.RawMessage `json:"_meta,omitempty"`
}

// createTaskResult answers a tools/call that created a task: the task at the top level.
type createTaskResult struct {
	ResultType string `json:"resultType"`
	detailedTask
}

func (t *task) detailedLocked(poll time.Duration) detailedTask {
	d := detailedTask{
		TaskID:        t.id,
		Status:        t.status,
		StatusMessage: t.message,
		CreatedAt:     t.created.UTC().Format(time.RFC3339Nano),
		LastUpdatedAt: t.updated.UTC().Format(time.RFC3339Nano),
		// Whole milliseconds, at least one: the extension has no zero interval.
		PollIntervalMs: max(poll.Milliseconds(), 1),
		InputRequests:  t.inputRequestsLocked(),
	}
	if t.ttl != nil {
		ttl := *t.ttl
		d.TTLMs = &ttl
	}
	switch t.status {
	case tasks.Completed:
		d.Result = t.reply.body
	case tasks.Failed:
		d.Error = t.reply.body
	}
	return d
}

// statelessToolsCall serves tools/call in a stateless revision: as a task when the tool may run
// as one and the request opted into the extension (from the start, or from when the tool says so
// for the tools of WithDeferredTask), else as a plain call, which a tool requiring a task
// refuses.
func (s *Server) statelessToolsCall(ctx context.Context, ep *epoch, st *sessionState, m jsonrpc.Message, key string, out outlet) answer {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil || p.Name == "" {
		return s.callTool(ctx, ep, m, key, st, out, false) // which answers the bad params
	}
	s.mu.Lock()
	var support string
	if te := s.tools[p.Name]; te != nil {
		support = taskSupportOf(te.tool)
	}
	deferred := s.deferredTasks[p.Name]
	s.mu.Unlock()
	switch {
	case !taskCapable(support):
	case optedIntoTasks(st) && deferred:
		return s.callTool(ctx, ep, m, key, st, out, true)
	case optedIntoTasks(st):
		var id mcpclient.ID
		json.Unmarshal([]byte(key), &id) // key came from a parsed id
		call := &ToolCall{ID: id, Name: p.Name, Arguments: p.Arguments, srv: s, session: st}
		return s.startTask(ep, call, key, s.extensionTaskTTL(), true)
	case support == tasks.SupportRequired:
		return missingTasksCapability("tool " + p.Name)
	}
	return s.callTool(ctx, ep, m, key, st, out, false)
}

// extensionTaskMethod serves tasks/get, tasks/update and tasks/cancel of the extension.
func (s *Server) extensionTaskMethod(ep *epoch, st *sessionState, m jsonrpc.Message) answer {
	if !optedIntoTasks(st) {
		return missingTasksCapability(m.Method)
	}
	var p struct {
		TaskID         string          `json:"taskId"`
		InputResponses json.RawMessage `json:"inputResponses"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil || p.TaskID == "" {
		return errorAnswer(mcpclient.RPCInvalidParams, m.Method+" needs params with a taskId", nil)
	}
	var responses map[string]json.RawMessage
	if m.Method == "tasks/update" && (json.Unmarshal(p.InputResponses, &responses) != nil || responses == nil) {
		return errorAnswer(mcpclient.RPCInvalidParams, "tasks/update needs inputResponses, an object", nil)
	}
	s.mu.Lock()
	s.purgeExpiredLocked(ep, time.Now())
	t := ep.tasks[p.TaskID]
	if t == nil || !t.ext {
		s.mu.Unlock()
		return errTaskNotFound
	}
	switch m.Method {
	case "tasks/get":
		d := t.detailedLocked(s.pollInterval())
		s.mu.Unlock()
		return resultAnswer(d)
	case "tasks/update":
		delivered, refusal := s.answerInputsLocked(t, responses)
		if delivered {
			s.taskNoteLocked(t) // a task of the extension: its listeners hear of it now
		}
		s.mu.Unlock()
		if refusal != nil {
			return *refusal
		}
		return answer{body: []byte(`{}`)}
	}
	cancelled := s.cancelLocked(t)
	if cancelled {
		s.taskNoteLocked(t)
	}
	s.mu.Unlock()
	if cancelled {
		t.cancel(nil) // the tool's context; whatever it returns now, the task stays cancelled
	}
	return answer{body: []byte(`{}`)}
}

// grantTasks returns the tasks whose notifications/tasks a subscriptions/listen gets: those of
// its taskIds the server holds. A refusal answers a request that names tasks without opting into
// the extension. A server without task tools knows nothing of taskIds.
func (s *Server) grantTasks(params json.RawMessage, rm requestMeta) (granted []string, refusal *answer) {
	var p struct {
		Notifications mcpclient.SubscriptionFilter `json:"notifications"`
	}
	json.Unmarshal(params, &p) // listen checked the params
	if len(p.Notifications.TaskIDs) == 0 || !s.tasksDeclared() {
		return nil, nil
	}
	if _, ok := rm.caps.Extensions[tasksExtension]; !ok {
		a := missingTasksCapability("task status notifications")
		return nil, &a
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range p.Notifications.TaskIDs {
		if t := s.epoch.tasks[id]; t != nil && t.ext && !slices.Contains(granted, id) {
			granted = append(granted, id)
		}
	}
	return granted, nil
}

// notifyTaskListenersLocked sends notifications/tasks, the task d, to the listeners granted it.
func (s *Server) notifyTaskListenersLocked(taskID string, d detailedTask) {
	for l := range s.listeners {
		if !slices.Contains(l.taskIDs, taskID) {
			continue
		}
		d.Meta = subscriptionMeta(l.id)
		params, _ := json.Marshal(d) // plain fields
		select {
		case l.out <- jsonrpc.AppendRequest(nil, "", "notifications/tasks", params):
		default:
			s.log.Debug("mcptest: notification dropped for a listener that does not read", "method", "notifications/tasks")
		}
	}
}
