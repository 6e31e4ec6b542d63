package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/internal/metakeys"
)

// postStateless serves a POST of a stateless revision: no session, each request saying in its
// _meta and headers all the server needs to know, answered with JSON, or with an SSE stream when
// the server sends something before the answer (progress, log records) or answers with SSE
// (WithSSEResponses). Faults, receipts and modes apply as in the session revisions, except that
// there is no session to expire and no stream to resume: a broken stream is answered again only
// through a receipt, to a resend under the same id.
func (h *HTTPServer) postStateless(w http.ResponseWriter, r *http.Request, m jsonrpc.Message, body []byte) {
	switch m.Kind() {
	case jsonrpc.KindNotification:
		h.onNotification("", m)
		w.WriteHeader(http.StatusAccepted)
		return
	case jsonrpc.KindResponse:
		// The server sends no requests in these revisions: there is nothing to answer.
		w.WriteHeader(http.StatusAccepted)
		return
	case jsonrpc.KindRequest:
	default:
		writeRPCError(w, http.StatusBadRequest, nil, mcpclient.RPCInvalidRequest, "not a JSON-RPC 2.0 message")
		return
	}
	var id mcpclient.ID
	if err := id.UnmarshalJSON(m.ID); err != nil {
		writeRPCError(w, http.StatusBadRequest, nil, mcpclient.RPCInvalidRequest, err.Error())
		return
	}
	rm, refusal := h.admitStateless(r, m)
	if refusal != nil {
		writeFrame(w, refusal.status, jsonrpc.AppendError(nil, m.ID, errorAnswer(refusal.code, refusal.message, refusal.data).body))
		return
	}
	if m.Method == "subscriptions/listen" {
		h.listen(w, r, m, rm)
		return
	}
	key, t, ok := h.start(w, r, "", m, body)
	if !ok {
		return
	}
	defer h.untrack("", key, t)

	st := statelessSession(rm)
	if !st.receiptsOptIn {
		// A client of these revisions cancels a request by closing its stream. A request that
		// opted into receipts runs on past a disconnect instead, so that a resend of its id
		// collects the real outcome.
		stop := context.AfterFunc(r.Context(), func() {
			t.cancelledByClient.Store(true)
			t.cancel()
		})
		defer stop()
	}
	stream := &statelessStream{w: w, sse: h.sse != nil}
	v := h.process(t.ctx, t.ep, "", m, key, stream, st)
	if h.refused(w, v) {
		return
	}
	switch {
	case v.drop:
		stream.abandon()
		panic(http.ErrAbortHandler)
	case h.refusedForItsID(w, m, v):
		return
	case h.unanswered(t, key):
		if !stream.abandon() {
			panic(http.ErrAbortHandler) // a JSON response has no way to end without the answer
		}
		return
	}
	if v.answer.replay {
		w.Header().Set("Mcp-Receipt-Replay", "1") // a replay sends nothing before its answer
	}
	if !stream.finish(reply(m, v.answer), statelessStatus(v.answer), v.breakStream) {
		panic(http.ErrAbortHandler)
	}
}

// A statelessStream is the response to one POST of a stateless revision: JSON, unless something
// is sent before the answer or the server answers with SSE, when it becomes an SSE stream. It
// opens only when there is something to send: these revisions resume nothing, so a stream opened
// early would gain nothing and would hide the status of an error (400 for a capability the
// request lacks, say). Its events carry no ids.
type statelessStream struct {
	w   http.ResponseWriter
	sse bool // answer with SSE (WithSSEResponses)

	mu      sync.Mutex
	started bool // the SSE stream is open
	closed  bool // the handler is done with the ResponseWriter, or is about to be
}

func (s *statelessStream) startLocked() {
	if s.started {
		return
	}
	s.started = true
	sseHeaders(s.w)
	s.w.WriteHeader(http.StatusOK)
	s.w.(http.Flusher).Flush()
}

func (s *statelessStream) prime() {}

func (s *statelessStream) send(_ context.Context, frame []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errStreamClosed
	}
	s.startLocked()
	writeEvent(s.w, "", 0, frame)
	return nil
}

// abandon ends the response without an answer; it reports whether an SSE stream was open,
// which can end so, where a JSON response cannot.
func (s *statelessStream) abandon() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return s.started
}

// finish writes the answer, with status if the response is still JSON. It reports false when
// the stream must break instead (breakStream, on an SSE stream).
func (s *statelessStream) finish(frame []byte, status int, breakStream bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if !s.started && (!s.sse || status != http.StatusOK) {
		writeFrame(s.w, status, frame)
		return true
	}
	s.startLocked()
	if breakStream {
		return false
	}
	writeEvent(s.w, "", 0, frame)
	return true
}

// A listener is an open subscriptions/listen stream: the notifications its client asked for and
// the server can send, and the frames on their way to it.
type listener struct {
	id      json.RawMessage // the listen request's id, the subscription's id
	filter  mcpclient.SubscriptionFilter
	taskIDs []string    // the tasks whose status changes it gets (the tasks extension)
	out     chan []byte // full, it drops: a client that does not read loses notifications
}

// listenerBacklog bounds the notifications waiting for one listener.
const listenerBacklog = 64

// grant returns what of the filter the server can deliver: list changes of the features it has,
// and updates of resources when it has resources.
func (s *Server) grant(asked mcpclient.SubscriptionFilter) mcpclient.SubscriptionFilter {
	s.mu.Lock()
	defer s.mu.Unlock()
	resources := s.hasResourcesLocked()
	g := mcpclient.SubscriptionFilter{
		ToolsListChanged:     asked.ToolsListChanged,
		PromptsListChanged:   asked.PromptsListChanged && len(s.prompts) > 0,
		ResourcesListChanged: asked.ResourcesListChanged && resources,
	}
	if resources {
		g.ResourceSubscriptions = slices.Clone(asked.ResourceSubscriptions)
	}
	return g
}

// listen serves subscriptions/listen over HTTP, its stream the POST's SSE response, which
// ends when the client goes away.
func (h *HTTPServer) listen(w http.ResponseWriter, r *http.Request, m jsonrpc.Message, rm requestMeta) {
	filter, taskIDs, bad := h.listenRequest(m, rm)
	if bad != nil {
		writeFrame(w, http.StatusBadRequest, jsonrpc.AppendError(nil, m.ID, bad.body))
		return
	}
	started := false
	err := h.serveListen(r.Context(), m.ID, filter, taskIDs, func(frame []byte) error {
		if !started {
			started = true
			sseHeaders(w)
			w.WriteHeader(http.StatusOK)
		}
		writeEvent(w, "", 0, frame)
		return nil
	})
	if errors.Is(err, errServerClosed) && !started {
		http.Error(w, "server closed", http.StatusServiceUnavailable)
	}
}

// listenRequest reads the notifications a subscriptions/listen request asks for, and the tasks
// whose status it may follow (the tasks extension).
func (s *Server) listenRequest(m jsonrpc.Message, rm requestMeta) (filter mcpclient.SubscriptionFilter, taskIDs []string, bad *answer) {
	var p struct {
		Notifications *mcpclient.SubscriptionFilter `json:"notifications"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil || p.Notifications == nil {
		a := errorAnswer(mcpclient.RPCInvalidParams, "subscriptions/listen needs params with notifications", nil)
		return filter, nil, &a
	}
	taskIDs, bad = s.grantTasks(m.Params, rm)
	return *p.Notifications, taskIDs, bad
}

// serveListen runs one subscription: the acknowledgement first, naming what the server grants,
// then each notification the filter admits, tagged with the subscription's id (the listen
// request's), until ctx ends or the server restarts; a server that closes ends the subscription
// with a result. send writes one frame to the client; it is called from this goroutine alone.
func (s *Server) serveListen(ctx context.Context, id json.RawMessage, asked mcpclient.SubscriptionFilter, taskIDs []string, send func(frame []byte) error) error {
	l := &listener{id: id, filter: s.grant(asked), taskIDs: taskIDs, out: make(chan []byte, listenerBacklog)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errServerClosed
	}
	ep := s.epoch
	s.listeners[l] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
		s.wg.Done()
	}()

	granted := l.filter
	granted.TaskIDs = l.taskIDs
	ack, _ := json.Marshal(struct {
		Notifications mcpclient.SubscriptionFilter `json:"notifications"`
		Meta          map[string]json.RawMessage   `json:"_meta"`
	}{granted, subscriptionMeta(l.id)}) // plain values
	if err := send(jsonrpc.AppendRequest(nil, "", "notifications/subscriptions/acknowledged", ack)); err != nil {
		return err
	}
	for {
		select {
		case frame := <-l.out:
			if err := send(frame); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		case <-ep.ctx.Done():
			if s.ctx.Err() == nil {
				return nil // restarted: the stream breaks, as a restarted process's would
			}
			end, _ := json.Marshal(struct {
				ResultType string                     `json:"resultType"`
				Meta       map[string]json.RawMessage `json:"_meta"`
			}{"complete", subscriptionMeta(l.id)})
			return send(jsonrpc.AppendResult(nil, l.id, end))
		}
	}
}

func subscriptionMeta(id json.RawMessage) map[string]json.RawMessage {
	return map[string]json.RawMessage{metakeys.SubscriptionID: id}
}

// notifyListeners sends a notification to the listen streams whose filter admits it: a list
// change to those that asked for that list, a resource update (uri set) to those that asked for
// that resource. params is nil or a JSON object.
func (s *Server) notifyListeners(method string, params json.RawMessage, uri string) {
	admits := func(f mcpclient.SubscriptionFilter) bool {
		switch method {
		case "notifications/tools/list_changed":
			return f.ToolsListChanged
		case "notifications/prompts/list_changed":
			return f.PromptsListChanged
		case "notifications/resources/list_changed":
			return f.ResourcesListChanged
		case "notifications/resources/updated":
			return slices.Contains(f.ResourceSubscriptions, uri)
		}
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for l := range s.listeners {
		if !admits(l.filter) {
			continue
		}
		fields := map[string]json.RawMessage{}
		if len(params) > 0 && json.Unmarshal(params, &fields) != nil {
			continue
		}
		meta := map[string]json.RawMessage{}
		if raw, ok := fields["_meta"]; ok {
			json.Unmarshal(raw, &meta) // a _meta that is no object is replaced
		}
		meta[metakeys.SubscriptionID] = l.id
		fields["_meta"], _ = json.Marshal(meta)
		tagged, _ := json.Marshal(fields) // raw values marshal as they are
		select {
		case l.out <- jsonrpc.AppendRequest(nil, "", method, tagged):
		default:
			s.log.Debug("mcptest: notification dropped for a listener that does not read", "method", method)
		}
	}
}
