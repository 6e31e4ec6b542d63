package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/transport"
)

// A conn is the server side of one in-memory connection.
type conn struct {
	srv *Server
	mc  *transport.MemoryConn

	mu      sync.Mutex
	session string                        // set by initialize; guarded by mu
	cancels map[string]context.CancelFunc // running request id -> cancel; guarded by mu
}

// errDropped is the cause of an exchange a Drop fault or a restart broke.
var errDropped = errors.New("mcptest: connection reset (injected fault)")

func (c *conn) serve() {
	s := c.srv
	defer s.wg.Done()
	defer func() {
		c.mc.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	for {
		frame, err := c.mc.Receive(s.ctx)
		if err != nil {
			return
		}
		c.onFrame(frame)
	}
}

func (c *conn) onFrame(frame []byte) {
	s := c.srv
	s.mu.Lock()
	s.framesTotal++
	s.mu.Unlock()
	msgs, err := jsonrpc.Decode(frame)
	if err != nil {
		c.replyError(jsonrpc.Message{}, mcpclient.RPCParseError, err.Error(), nil)
		return
	}
	for _, m := range msgs {
		switch m.Kind() {
		case jsonrpc.KindRequest:
			var id mcpclient.ID
			if err := json.Unmarshal(m.ID, &id); err != nil {
				c.replyError(jsonrpc.Message{}, mcpclient.RPCInvalidRequest, err.Error(), nil)
				continue
			}
			c.start(m, id, frame)
		case jsonrpc.KindNotification:
			c.onNotification(m)
		case jsonrpc.KindResponse:
			// The server sends no requests, so there is nothing to match an answer to.
		default:
			c.replyError(m, mcpclient.RPCInvalidRequest, "not a JSON-RPC 2.0 request", nil)
		}
	}
}

// start runs a request on its own goroutine, so that a slow tool holds up nothing else.
func (c *conn) start(m jsonrpc.Message, id mcpclient.ID, frame []byte) {
	s := c.srv
	key := id.JSON()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.received[key] = append(s.received[key], slices.Clone(frame))
	s.running[key]++
	ep := s.epoch
	s.wg.Add(1)
	s.mu.Unlock()

	ctx, cancel := context.WithCancel(ep.ctx)
	c.mu.Lock()
	if c.cancels == nil {
		c.cancels = make(map[string]context.CancelFunc)
	}
	c.cancels[key] = cancel
	c.mu.Unlock()

	go func() {
		defer s.wg.Done()
		defer func() {
			cancel()
			c.mu.Lock()
			delete(c.cancels, key)
			c.mu.Unlock()
			s.mu.Lock()
			if s.running[key]--; s.running[key] <= 0 {
				delete(s.running, key)
			}
			s.mu.Unlock()
		}()
		c.handle(ctx, ep, m, key)
	}()
}

func (c *conn) onNotification(m jsonrpc.Message) {
	if m.Method != "notifications/cancelled" {
		return
	}
	var p struct {
		RequestID mcpclient.ID `json:"requestId"`
	}
	if json.Unmarshal(m.Params, &p) != nil {
		return
	}
	c.mu.Lock()
	cancel := c.cancels[p.RequestID.JSON()]
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// handle answers one request, with the faults that match it.
func (c *conn) handle(ctx context.Context, ep *epoch, m jsonrpc.Message, key string) {
	s := c.srv
	plan := s.takeFaults(m.Method, toolName(m))
	if plan.fail {
		c.failExchange(key, transport.NotDelivered, ErrUnavailable, plan.retryAfter)
		return
	}
	if plan.delay > 0 && !sleep(ctx, plan.delay) {
		c.failExchange(key, transport.Uncertain, ctx.Err(), 0)
		return
	}
	if plan.dropBefore {
		c.failExchange(key, transport.Uncertain, errDropped, 0)
		return
	}
	if m.Method != "initialize" && !c.sessionLive(ep) {
		c.failExchange(key, transport.NotDelivered, transport.ErrSessionNotFound, 0)
		return
	}
	if s.mode == ModeInFlightRefusal && m.Method != "initialize" {
		if !s.claimInFlight(ep, key) {
			c.replyError(m, mcpclient.RPCInvalidRequest, "request id already in flight", nil)
			return
		}
		defer s.releaseInFlight(ep, key)
	}

	a := c.answer(ctx, ep, m, key)
	s.mu.Lock()
	restarted := s.epoch != ep
	s.mu.Unlock()
	if plan.dropAfter || restarted {
		c.failExchange(key, transport.Uncertain, errDropped, 0)
		return
	}
	c.reply(m, a)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (c *conn) sessionLive(ep *epoch) bool {
	c.mu.Lock()
	sid := c.session
	c.mu.Unlock()
	s := c.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	return sid != "" && ep.sessions[sid] && s.epoch == ep
}

func (c *conn) answer(ctx context.Context, ep *epoch, m jsonrpc.Message, key string) answer {
	switch m.Method {
	case "initialize":
		return c.initialize(ep, m)
	case "ping":
		return answer{body: []byte("{}")}
	case "tools/list":
		return c.srv.listTools(m)
	case "tools/call":
		return c.srv.callTool(ctx, ep, m, key)
	}
	return errorAnswer(mcpclient.RPCMethodNotFound, "method not found: "+m.Method, nil)
}

func (c *conn) initialize(ep *epoch, m jsonrpc.Message) answer {
	s := c.srv
	var p mcpclient.InitializeParams
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return errorAnswer(mcpclient.RPCInvalidParams, "initialize params: "+err.Error(), nil)
	}
	version := s.versions[0]
	if slices.Contains(s.versions, p.ProtocolVersion) {
		version = p.ProtocolVersion
	}
	caps := mcpclient.ServerCapabilities{Tools: &mcpclient.ListChangedCapability{}}
	if s.mode == ModeReceipts {
		decl, _ := json.Marshal(mcpclient.RequestReceipts{Scope: mcpclient.ReceiptScopeProcess, MaxReceipts: s.maxReceipts})
		caps.Experimental = map[string]json.RawMessage{mcpclient.RequestReceiptsKey: decl}
	}
	sid := uuid.NewString()
	s.mu.Lock()
	ep.sessions[sid] = true
	s.mu.Unlock()
	c.mu.Lock()
	c.session = sid
	c.mu.Unlock()
	return resultAnswer(mcpclient.InitializeResult{ProtocolVersion: version, Capabilities: caps, ServerInfo: s.info})
}

func (s *Server) listTools(m jsonrpc.Message) answer {
	var p mcpclient.ListToolsParams
	if len(m.Params) > 0 {
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return errorAnswer(mcpclient.RPCInvalidParams, "tools/list params: "+err.Error(), nil)
		}
	}
	start := 0
	if p.Cursor != "" {
		n, err := strconv.Atoi(p.Cursor)
		if err != nil || n < 0 {
			return errorAnswer(mcpclient.RPCInvalidParams, "invalid cursor", nil)
		}
		start = n
	}
	s.mu.Lock()
	names := s.toolOrder
	end := len(names)
	if s.pageSize > 0 && start+s.pageSize < end {
		end = start + s.pageSize
	}
	res := mcpclient.ListToolsResult{Tools: []*mcpclient.Tool{}}
	for _, name := range names[min(start, len(names)):end] {
		t := s.tools[name].tool
		res.Tools = append(res.Tools, &t)
	}
	if end < len(names) {
		res.NextCursor = strconv.Itoa(end)
	}
	s.mu.Unlock()
	return resultAnswer(res)
}

// callTool runs tools/call under the server's mode: with receipts, the same id and content get
// the one reply and the tool runs once; other content under a known id is refused.
func (s *Server) callTool(ctx context.Context, ep *epoch, m jsonrpc.Message, key string) answer {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil || p.Name == "" {
		return errorAnswer(mcpclient.RPCInvalidParams, "tools/call needs params with a name", nil)
	}
	if s.mode != ModeReceipts {
		return s.execute(ctx, p.Name, p.Arguments, key)
	}
	fp, err := fingerprint(m.Method, m.Params)
	if err != nil {
		return errorAnswer(mcpclient.RPCInvalidParams, err.Error(), nil)
	}
	r, fresh, full := s.claimReceipt(ep, key, fp)
	switch {
	case full:
		return errorAnswer(-32000, "receipt store full: new request ids are refused",
			map[string]any{"code": "MCP_RECEIPTS_FULL", "maxReceipts": s.maxReceipts})
	case !fresh && r.fp != fp:
		return errorAnswer(mcpclient.RPCInvalidRequest, mcpclient.ReusedIDMarker+": request id already used with different content",
			map[string]any{"code": mcpclient.ReusedIDMarker})
	case !fresh:
		select {
		case <-r.done:
			return r.reply
		case <-ctx.Done():
			return errorAnswer(mcpclient.RPCInternalError, "cancelled while waiting for the original request", nil)
		}
	}
	r.reply = s.execute(ctx, p.Name, p.Arguments, key)
	close(r.done)
	return r.reply
}

func (s *Server) execute(ctx context.Context, name string, args json.RawMessage, key string) answer {
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
	var id mcpclient.ID
	json.Unmarshal([]byte(key), &id) // key came from a parsed id
	res, err := runTool(ctx, te.fn, &ToolCall{ID: id, Name: name, Arguments: args})
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

func (c *conn) reply(m jsonrpc.Message, a answer) {
	var frame []byte
	if a.isError {
		frame = jsonrpc.AppendError(nil, m.ID, a.body)
	} else {
		frame = jsonrpc.AppendResult(nil, m.ID, a.body)
	}
	if err := c.mc.Send(c.srv.ctx, &transport.Message{Frame: frame}); err != nil {
		c.srv.log.Debug("mcptest: reply not sent", "err", err)
	}
}

func (c *conn) replyError(m jsonrpc.Message, code int64, message string, data any) {
	c.reply(m, errorAnswer(code, message, data))
}

func (c *conn) failExchange(key string, outcome transport.Outcome, cause error, retryAfter time.Duration) {
	err := c.mc.FailExchange(c.srv.ctx, &transport.Error{Outcome: outcome, ID: key, RetryAfter: retryAfter, Err: cause})
	if err != nil {
		c.srv.log.Debug("mcptest: exchange failure not reported", "err", err)
	}
}
