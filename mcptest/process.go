package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/internal/wait"
	"github.com/northstar-mcp/mcpclient/receipts"
	"github.com/northstar-mcp/mcpclient/transport"
)

// A verdict is how the server disposes of one request. Each transport delivers it its own way:
// the in-memory connection with replies and exchange failures, HTTP with status codes, resets
// and SSE streams.
type verdict struct {
	answer answer
	// refuse, if set, turns the request away before it is read: ErrUnavailable (HTTP 503) or
	// transport.ErrSessionNotFound (HTTP 404). Nothing ran.
	refuse     error
	retryAfter time.Duration
	// drop breaks the exchange: the client cannot tell whether the request ran.
	drop bool
	// breakStream asks an SSE response to break after its first event id, keeping the answer
	// for a resumption (HTTP only).
	breakStream bool
	// closeStream asks an SSE response to end cleanly after its first event id, keeping the
	// answer for a resumption (HTTP only).
	closeStream bool
	// inFlight marks answer as the refusal of an id still in flight.
	inFlight bool
	// status, if not 0, is the HTTP status of an answer given from a receipt without running
	// the request: a refusal (409, 503), or 200 for a replay or an outcome in doubt.
	status int
	// session is the session initialize opened.
	session string
}

// tracked is one request the server is running, for Close's report and for cancellation.
type tracked struct {
	ctx    context.Context
	cancel context.CancelFunc
	ep     *epoch
	// cancelledByClient: the client sent notifications/cancelled for the request, and so
	// awaits no response to it.
	cancelledByClient atomic.Bool
}

// unanswered reports whether the request's response must not be sent: its client cancelled it,
// and the protocol asks a receiver of the cancellation not to answer. A receipt of it is kept
// all the same, for a resend of the same id to read.
func (s *Server) unanswered(t *tracked, key string) bool {
	if !t.cancelledByClient.Load() {
		return false
	}
	s.log.Debug("mcptest: no response to a request its client cancelled", "id", key)
	return true
}

// track registers a request under key as running and records the frame that carried it. ok is
// false once the server is closed. The caller must call s.untrack(key, t) when done.
func (s *Server) track(session, key string, origin requestOrigin) (t *tracked, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	origin.frame = slices.Clone(origin.frame)
	s.received[key] = append(s.received[key], origin.frame)
	s.running[key]++
	t = &tracked{ep: s.epoch}
	t.ctx, t.cancel = context.WithCancel(context.WithValue(s.epoch.ctx, requestOriginKey{}, origin))
	s.cancels[session+"\x00"+key] = t
	s.wg.Add(1)
	return t, true
}

func (s *Server) untrack(session, key string, t *tracked) {
	t.cancel()
	s.mu.Lock()
	if s.cancels[session+"\x00"+key] == t {
		delete(s.cancels, session+"\x00"+key)
	}
	if s.running[key]--; s.running[key] <= 0 {
		delete(s.running, key)
	}
	s.mu.Unlock()
	s.wg.Done()
}

// cancelRequest handles notifications/cancelled.
func (s *Server) cancelRequest(session string, params json.RawMessage) {
	var p struct {
		RequestID mcpclient.ID `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	s.mu.Lock()
	t := s.cancels[session+"\x00"+p.RequestID.JSON()]
	s.mu.Unlock()
	if t != nil {
		t.cancelledByClient.Store(true)
		t.cancel()
	}
}

// process runs one request through the faults that match it, the session check, the server's
// mode and the method itself.
// out is the way back to the client while the request runs (progress, server requests).
// stateless, if set, is the request's own state in a stateless revision, which has no session
// to check.
func (s *Server) process(ctx context.Context, ep *epoch, session string, m jsonrpc.Message, key string, out outlet, stateless *sessionState) verdict {
	plan := s.takeFaults(m.Method, toolName(m))
	if plan.fail {
		return verdict{refuse: ErrUnavailable, retryAfter: plan.retryAfter}
	}
	if plan.expire {
		s.expireSession(ep, session)
	}
	if plan.delay > 0 && !wait.For(ctx, plan.delay) {
		return verdict{drop: true}
	}
	if plan.dropBefore {
		return verdict{drop: true}
	}
	if stateless == nil && m.Method != "initialize" && !s.sessionLive(ep, session) {
		return verdict{refuse: transport.ErrSessionNotFound}
	}
	var receipt admission
	var receipted bool
	switch {
	case plan.refusal != 0:
		// Refused as the receipt rules refuse, whatever the mode: nothing is claimed, so that
		// a resend of the id runs.
		receipt, receipted = receiptRefusal(plan.refusal, key), true
	case s.mode == ModeInFlightRefusal && m.Method != "initialize":
		if !s.claimInFlight(ep, key) {
			return verdict{inFlight: true, answer: errorAnswer(mcpclient.RPCInvalidRequest, "request id already in flight", nil)}
		}
		defer s.releaseInFlight(ep, key)
	default:
		receipt, receipted = s.admitReceipt(ctx, ep, session, stateless, m, key)
	}
	var v verdict
	switch {
	case receipted && receipt.answer != nil:
		// Answered from the receipt, before anything runs or any stream opens, so that the
		// answer can carry its own status and replay header.
		v.answer, v.status = *receipt.answer, receipt.status
	default:
		if out != nil && m.Method != "initialize" {
			out.prime()
		}
		settled := false
		if receipted {
			defer func() {
				if !settled { // the server panicked: the request may have run
					receipt.hold.SettleInDoubt(context.WithoutCancel(ctx), "the server panicked running the request")
				}
			}()
		}
		switch {
		case stateless != nil:
			v.answer = s.dispatchStateless(ctx, ep, stateless, m, key, out)
		default:
			v.answer, v.session = s.dispatch(ctx, ep, session, m, key, out)
		}
		if receipted {
			s.concludeReceipt(ctx, receipt.hold, m, key, v.answer, stateless != nil)
			settled = true
		}
	}
	s.mu.Lock()
	restarted := s.epoch != ep
	s.mu.Unlock()
	v.drop = plan.dropAfter || restarted
	v.breakStream = plan.breakStream
	v.closeStream = plan.closeStream
	return v
}

// dispatch runs a request of a session revision; opened is the session initialize opened.
func (s *Server) dispatch(ctx context.Context, ep *epoch, session string, m jsonrpc.Message, key string, out outlet) (a answer, opened string) {
	switch m.Method {
	case "initialize":
		a, opened = s.initialize(ep, m)
		a = s.declareTasks(a)
	case "ping":
		a = answer{body: []byte("{}")}
	case "tools/list":
		a = s.listTools(m)
	case "tools/call":
		a = s.toolsCall(ctx, ep, m, key, s.sessionState(ep, session), out)
	case "tasks/get", "tasks/result", "tasks/list", "tasks/cancel":
		a = s.taskMethod(ctx, ep, m)
	case "resources/list":
		a = s.listResources(m)
	case "resources/templates/list":
		a = s.listResourceTemplates(m)
	case "resources/read":
		a = s.readResource(ctx, m, RPCResourceNotFound)
	case "resources/subscribe", "resources/unsubscribe":
		a = s.subscribe(s.sessionState(ep, session), m)
	case "prompts/list":
		a = s.listPrompts(m)
	case "prompts/get":
		a = s.getPrompt(ctx, m, s.sessionState(ep, session), out)
	case "completion/complete":
		a = s.complete(ctx, m)
	case "logging/setLevel":
		a = s.setLogLevel(s.sessionState(ep, session), m)
	default:
		a = s.callMethod(ctx, m)
	}
	return a, opened
}

func (s *Server) sessionLive(ep *epoch, session string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return session != "" && ep.sessions[session] != nil && s.epoch == ep
}

func (s *Server) expireSession(ep *epoch, session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(ep.sessions, session)
}

// initialize opens a session and negotiates the revision.
func (s *Server) initialize(ep *epoch, m jsonrpc.Message) (answer, string) {
	var p struct {
		ProtocolVersion string                       `json:"protocolVersion"`
		Capabilities    mcpclient.ClientCapabilities `json:"capabilities"`
		ClientInfo      mcpclient.Implementation     `json:"clientInfo"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return errorAnswer(mcpclient.RPCInvalidParams, "initialize params: "+err.Error(), nil), ""
	}
	// initialize negotiates among the revisions with sessions; a server that speaks none of them
	// refuses it as the stateless revisions refuse a revision they do not speak.
	var version string
	for _, v := range s.versions {
		if sessionRevision(v) && (version == "" || v == p.ProtocolVersion) {
			version = v
		}
	}
	if version == "" {
		return errorAnswer(rpcUnsupportedProtocolVersion, "Unsupported protocol version "+p.ProtocolVersion,
			map[string]any{"supported": s.discoverVersions(), "requested": p.ProtocolVersion}), ""
	}
	caps := s.capabilities(ep, false)
	sid := uuid.NewString()
	s.mu.Lock()
	s.sessionSeq++
	st := newSessionState(sid, s.sessionSeq)
	st.version, st.client, st.caps = version, p.ClientInfo, p.Capabilities
	_, st.receiptsOptIn = p.Capabilities.Extensions[receipts.ExtensionID]
	ep.sessions[sid] = st
	s.mu.Unlock()
	return resultAnswer(mcpclient.InitializeResult{ProtocolVersion: version, Capabilities: caps, ServerInfo: s.info}), sid
}

func (s *Server) listTools(m jsonrpc.Message) answer {
	return listAnswer(s, m, func() []string { return s.toolOrder },
		func(name string) mcpclient.Tool { return s.tools[name].tool },
		func(tools []*mcpclient.Tool, next string) any {
			return mcpclient.ListToolsResult{Tools: tools, NextCursor: next}
		})
}

// listAnswer answers a paginated list request: the page of order that the request's cursor
// starts, each entry turned into its item while s.mu is held, and result wraps them.
func listAnswer[K, V any](s *Server, m jsonrpc.Message, order func() []K, item func(K) V, result func(items []*V, next string) any) answer {
	cursor, bad := cursorOf(m)
	if bad != nil {
		return *bad
	}
	s.mu.Lock()
	keys, next, ok := page(order(), cursor, s.pageSize)
	items := make([]*V, 0, len(keys))
	for _, k := range keys {
		v := item(k)
		items = append(items, &v)
	}
	s.mu.Unlock()
	if !ok {
		return errorAnswer(mcpclient.RPCInvalidParams, "invalid cursor", nil)
	}
	return resultAnswer(result(items, next))
}

// cursorOf reads the cursor of a paginated list request; bad is the error answer to params that
// are no object.
func cursorOf(m jsonrpc.Message) (cursor string, bad *answer) {
	var p struct {
		Cursor string `json:"cursor"`
	}
	if len(m.Params) > 0 {
		if err := json.Unmarshal(m.Params, &p); err != nil {
			a := errorAnswer(mcpclient.RPCInvalidParams, m.Method+" params: "+err.Error(), nil)
			return "", &a
		}
	}
	return p.Cursor, nil
}

// page returns the page of items that cursor (an offset, "" for the first page) starts, size
// items long (all when size <= 0), and the cursor of the next page. ok is false for a cursor
// that is no offset.
func page[T any](items []T, cursor string, size int) (out []T, next string, ok bool) {
	start := 0
	if cursor != "" {
		n, err := strconv.Atoi(cursor)
		if err != nil || n < 0 {
			return nil, "", false
		}
		start = min(n, len(items))
	}
	end := len(items)
	if size > 0 && start+size < end {
		end = start + size
	}
	if end < len(items) {
		next = strconv.Itoa(end)
	}
	return items[start:end], next, true
}

// callTool runs tools/call (receipts, where the request has them, are process's). deferTask
// lets the call become a task of the tasks extension midway (see ToolCall.StartTask).
func (s *Server) callTool(ctx context.Context, ep *epoch, m jsonrpc.Message, key string, st *sessionState, out outlet, deferTask bool) answer {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil || p.Name == "" {
		return errorAnswer(mcpclient.RPCInvalidParams, "tools/call needs params with a name", nil)
	}
	var id mcpclient.ID
	json.Unmarshal([]byte(key), &id) // key came from a parsed id
	call := &ToolCall{ID: id, Name: p.Name, Arguments: p.Arguments, srv: s, session: st, out: out}
	if len(p.Meta.ProgressToken) > 0 && string(p.Meta.ProgressToken) != "null" {
		call.ProgressToken = p.Meta.ProgressToken
	}
	if st != nil && st.stateless {
		in, bad := s.openInputs(st, bindingOf(m.Method, p.Name, p.Arguments), m.Params)
		if bad != nil {
			return *bad
		}
		call.input = in
	}
	if deferTask {
		return s.executeDeferringTask(ctx, ep, call, key)
	}
	return s.execute(ctx, call, key)
}

func (s *Server) execute(ctx context.Context, call *ToolCall, key string) answer {
	name := call.Name
	s.mu.Lock()
	te := s.tools[name]
	if te != nil {
		s.executions[name]++
		s.executedBy[execKey{name, key}]++
	}
	s.mu.Unlock()
	if te == nil {
		return errorAnswer(mcpclient.RPCInvalidParams, "unknown tool: "+name, nil)
	}
	return runInputs(ctx, call.input, func(ctx context.Context) answer {
		res, err := runTool(ctx, te.fn, call)
		var pe *protocolError
		if errors.As(err, &pe) {
			return errorAnswer(pe.code, pe.message, pe.data)
		}
		if err != nil {
			res = &mcpclient.CallToolResult{IsError: true, Content: []mcpclient.Content{mcpclient.TextContent(err.Error())}}
		}
		if res == nil {
			res = &mcpclient.CallToolResult{}
		}
		if res.Content == nil {
			res.Content = []mcpclient.Content{}
		}
		return resultAnswer(res)
	})
}

// ProtocolError returns an error with which a ToolFunc fails its call with a JSON-RPC error
// (code, message, and data unless nil) instead of a result with isError set: a failure of the
// protocol rather than of the tool, such as a backend that is gone. A task-augmented call fails
// its task with it.
func ProtocolError(code int64, message string, data any) error {
	return &protocolError{code: code, message: message, data: data}
}

type protocolError struct {
	code    int64
	message string
	data    any
}

func (e *protocolError) Error() string {
	return fmt.Sprintf("mcptest: JSON-RPC error %d: %s", e.code, e.message)
}

func runTool(ctx context.Context, fn ToolFunc, call *ToolCall) (res *mcpclient.CallToolResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, fmt.Errorf("tool %s panicked: %v", call.Name, p)
		}
	}()
	return fn(ctx, call)
}

func toolName(m jsonrpc.Message) string {
	if m.Method != "tools/call" {
		return ""
	}
	var p struct {
		Name string `json:"name"`
	}
	json.Unmarshal(m.Params, &p) // an unnamed call matches only faults for every tool
	return p.Name
}

func resultAnswer(v any) answer {
	body, err := json.Marshal(v)
	if err != nil {
		return errorAnswer(mcpclient.RPCInternalError, "marshaling the result: "+err.Error(), nil)
	}
	return answer{body: body}
}

func errorAnswer(code int64, message string, data any) answer {
	e := struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data,omitempty"`
	}{code, message, data}
	body, _ := json.Marshal(e) // built from plain values
	return answer{body: body, isError: true}
}

// claimInFlight marks key as in flight; false means it already is.
func (s *Server) claimInFlight(ep *epoch, key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ep.inFlight[key] {
		return false
	}
	ep.inFlight[key] = true
	return true
}

func (s *Server) releaseInFlight(ep *epoch, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(ep.inFlight, key)
}
