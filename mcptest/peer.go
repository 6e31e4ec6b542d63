package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
)

// Progress sends notifications/progress for the call to the client that made it, if its request
// carried a _meta.progressToken; otherwise it does nothing. total 0 means the total is unknown
// (it is left out). In memory the report goes on the call's connection; over Streamable HTTP on
// the call's SSE response stream when the server answers with SSE (WithSSEResponses), otherwise
// to the session's GET stream, where it is dropped if the client does not listen; over legacy
// HTTP+SSE on the session's stream. A report that cannot be sent is logged and dropped.
func (c *ToolCall) Progress(progress, total float64, message string) {
	out := c.outlet()
	if len(c.ProgressToken) == 0 || out == nil {
		return
	}
	params, _ := json.Marshal(struct {
		Token    json.RawMessage `json:"progressToken"`
		Progress float64         `json:"progress"`
		Total    float64         `json:"total,omitempty"`
		Message  string          `json:"message,omitempty"`
	}{c.ProgressToken, progress, total, message}) // plain values
	frame := jsonrpc.AppendRequest(nil, "", "notifications/progress", params)
	ctx, cancel := context.WithTimeout(c.srv.ctx, sendTimeout)
	defer cancel()
	if err := out.send(ctx, frame); err != nil {
		c.srv.log.Debug("mcptest: progress not sent", "id", c.ID.JSON(), "err", err)
	}
}

// Log sends a log record (notifications/message) to the client that made the call, by the way
// Progress describes, when the client's level admits it: in the session revisions, the level
// logging/setLevel set (every record until then); in the stateless revisions, the level the
// request's _meta asked for (none without one). logger may be empty; data is any JSON value.
func (c *ToolCall) Log(level mcpclient.LoggingLevel, logger string, data any) error {
	if _, ok := levelRank[level]; !ok {
		return fmt.Errorf("mcptest: unknown logging level %q", level)
	}
	out := c.outlet()
	if c.session == nil || out == nil || !c.session.admits(level) {
		return nil
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return err
	}
	params, _ := json.Marshal(mcpclient.LogMessage{Level: level, Logger: logger, Data: raw}) // marshalled parts
	ctx, cancel := context.WithTimeout(c.srv.ctx, sendTimeout)
	defer cancel()
	if err := out.send(ctx, jsonrpc.AppendRequest(nil, "", "notifications/message", params)); err != nil {
		c.srv.log.Debug("mcptest: log record not sent", "id", c.ID.JSON(), "err", err)
	}
	return nil
}

// sendTimeout bounds the sending of a notification to a client that does not read.
const sendTimeout = 5 * time.Second

// errNoClient fails a server request of a call that has no way back to its client.
var errNoClient = errors.New("mcptest: the call has no session to send requests on")

// errNoServerRequests fails a server request in a stateless revision of a call that has neither
// a multi round-trip request nor a task of the tasks extension to carry it.
var errNoServerRequests = errors.New("mcptest: the stateless revisions send no requests to the client")

// Request asks the client that made the call for input (sampling/createMessage,
// elicitation/create, roots/list, ...) and returns its answer: the result, or the client's
// JSON-RPC error as an *mcpclient.RPCError. params may be nil.
//
// In the session revisions it sends the request by the way Progress describes, and waits for
// the answer. If ctx ends first, the client is sent notifications/cancelled for the request and
// Request returns ctx's error; if the session's connection ends first, an error. Request ids
// are strings unique to the server ("mcptest-1", ...).
//
// In the stateless revisions, which forbid server requests, it is a request for input of a
// multi round-trip request, or of a task: see RequestAll, of which it is the one-request case.
func (c *ToolCall) Request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	res, err := c.RequestAll(ctx, InputRequest{Method: method, Params: params})
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// RequestAll asks the client that made the call for several inputs at once and returns the
// answers in the order of reqs. In the session revisions it sends them one after another as
// Request does, and fails with the first error; keys are not used.
//
// In the stateless revisions it sends nothing. The answers come from the request's
// inputResponses, or the earlier rounds' answers its requestState carries, by key (see
// InputRequest.Key). If any is missing, the call's run ends: RequestAll returns
// ErrInputRequired, the tool's ctx is cancelled with it as the cause, and the server answers
// input_required, asking for the missing ones all in one round, whatever the tool returns; the
// tool runs again from the start when the client sends the answers. So does a request the
// client's capabilities do not cover (ErrMissingClientCapability: the server refuses with
// -32021), or an answer that is no result of its method (-32602). A tool asks the things it
// can ask together in one RequestAll, to spare the client rounds.
//
// A call that runs as a task of the tasks extension asks in its own run instead: the task moves
// to input_required and tasks/get shows the requests, by key, until tasks/update has brought an
// answer to each; then RequestAll returns them, and the task is working again. The tool does
// not run again, and a key may be asked once in the task's life. RequestAll fails when ctx ends
// or the task does (tasks/cancel, Close, Restart); a request the capabilities of the request
// that created the task do not cover fails the task with -32021, and RequestAll with
// ErrMissingClientCapability, the tool's ctx cancelled with it as the cause.
func (c *ToolCall) RequestAll(ctx context.Context, reqs ...InputRequest) ([]json.RawMessage, error) {
	if len(reqs) == 0 {
		return []json.RawMessage{}, nil
	}
	if t := c.currentTask(); t != nil && t.ext {
		return c.srv.requestTaskInput(ctx, c, t, reqs)
	}
	out := c.outlet()
	switch {
	case c.input != nil:
		return c.input.request(reqs)
	case c.session == nil || out == nil:
		return nil, errNoClient
	case c.session.stateless:
		return nil, errNoServerRequests
	}
	return c.srv.requestEach(ctx, c.session, out, reqs)
}

// outlet is the call's way to its client now; nil when it has none.
func (c *ToolCall) outlet() outlet {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out
}

// currentTask is the task the call runs as now; nil while it runs as a plain call.
func (c *ToolCall) currentTask() *task {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.task
}

// Round returns the round of a multi round-trip request in the stateless revisions that the
// call runs in: 1 for a request without requestState, 2 for the request that answers the first
// input_required, and so on. It is 1 in the session revisions.
func (c *ToolCall) Round() int {
	if c.input == nil {
		return 1
	}
	return c.input.round
}

// ClientCapabilities returns the capabilities of the client that made the call: those it
// declared in initialize, or in the request's _meta in the stateless revisions.
func (c *ToolCall) ClientCapabilities() mcpclient.ClientCapabilities {
	return c.session.capabilities()
}

// requestEach sends each request to the session's client in turn (see ToolCall.Request).
func (s *Server) requestEach(ctx context.Context, st *sessionState, out outlet, reqs []InputRequest) ([]json.RawMessage, error) {
	answers := make([]json.RawMessage, 0, len(reqs))
	for _, r := range reqs {
		res, err := s.requestClient(ctx, st, out, r.Method, r.Params)
		if err != nil {
			return nil, err
		}
		answers = append(answers, res)
	}
	return answers, nil
}

// requestClient sends one request to the session's client on out and waits for its answer.
func (s *Server) requestClient(ctx context.Context, st *sessionState, out outlet, method string, params any) (json.RawMessage, error) {
	var raw []byte
	if params != nil {
		var err error
		if raw, err = json.Marshal(params); err != nil {
			return nil, fmt.Errorf("mcptest: params of %s: %w", method, err)
		}
		if string(raw) == "null" {
			raw = nil
		}
	}
	key := s.nextRequestKey()
	ch := st.await(key)
	defer st.forget(key)
	if err := out.send(ctx, jsonrpc.AppendRequest(nil, key, method, raw)); err != nil {
		return nil, fmt.Errorf("mcptest: sending %s: %w", method, err)
	}
	select {
	case a := <-ch:
		if a.isError {
			rpc := new(mcpclient.RPCError)
			if err := json.Unmarshal(a.body, rpc); err != nil {
				return nil, fmt.Errorf("mcptest: malformed error answer to %s: %s", method, a.body)
			}
			return nil, rpc
		}
		return json.RawMessage(a.body), nil
	case <-st.lost:
		return nil, errSessionLost
	case <-ctx.Done():
		params, _ := json.Marshal(struct {
			RequestID json.RawMessage `json:"requestId"`
			Reason    string          `json:"reason,omitempty"`
		}{json.RawMessage(key), context.Cause(ctx).Error()})
		sctx, cancel := context.WithTimeout(s.ctx, sendTimeout)
		defer cancel()
		if err := out.send(sctx, jsonrpc.AppendRequest(nil, "", "notifications/cancelled", params)); err != nil {
			s.log.Debug("mcptest: notifications/cancelled not sent", "id", key, "err", err)
		}
		return nil, ctx.Err()
	}
}

// nextRequestKey returns the JSON text of a fresh server request id.
func (s *Server) nextRequestKey() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requestSeq++
	return strconv.Quote("mcptest-" + strconv.Itoa(s.requestSeq))
}

// onResponse routes the client's answer to one of the server's requests to the session's
// ToolCall.Request awaiting it.
func (s *Server) onResponse(session string, m jsonrpc.Message) {
	var id mcpclient.ID
	st := s.sessionState(nil, session)
	if st == nil || json.Unmarshal(m.ID, &id) != nil {
		s.log.Debug("mcptest: dropped a response", "session", session, "id", string(m.ID))
		return
	}
	a := answer{body: m.Result}
	if m.Error != nil {
		a = answer{body: m.Error, isError: true}
	}
	if !st.resolve(id.JSON(), a) {
		s.log.Debug("mcptest: dropped a response nobody awaits", "id", id.JSON())
	}
}

// onNotification records a notification from a client and acts on notifications/cancelled.
func (s *Server) onNotification(session string, m jsonrpc.Message) {
	s.mu.Lock()
	s.notes[m.Method]++
	close(s.noteSignal)
	s.noteSignal = make(chan struct{})
	s.mu.Unlock()
	if m.Method == "notifications/cancelled" {
		s.cancelRequest(session, m.Params)
	}
}

// NotificationsReceived returns how many notifications named method the server received from
// all clients (notifications/initialized, notifications/cancelled,
// notifications/roots/list_changed, ...).
func (s *Server) NotificationsReceived(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notes[method]
}

// AwaitNotifications waits until the server has received n notifications named method, or ctx
// ends (its error is returned).
func (s *Server) AwaitNotifications(ctx context.Context, method string, n int) error {
	for {
		s.mu.Lock()
		got, signal := s.notes[method], s.noteSignal
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-signal:
		case <-ctx.Done():
			return fmt.Errorf("mcptest: %d of %d %s received: %w", got, n, method, ctx.Err())
		}
	}
}
