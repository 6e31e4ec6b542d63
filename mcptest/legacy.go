package mcptest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/google/uuid"

	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/transport"
)

// The legacy HTTP+SSE endpoints (MCP 2024-11-05) of an HTTPServer.
const (
	legacyStreamPath  = "/sse"
	legacyMessagePath = "/message"
)

// A legacySession is one HTTP+SSE stream: the transport session, which carries one MCP session.
// When the stream ends, the session does.
type legacySession struct {
	outbox chan []byte
	done   chan struct{} // closed to end the stream, by a Drop fault
	once   sync.Once

	mu      sync.Mutex
	session string // the MCP session initialize opened; guarded by mu
}

func (l *legacySession) end() { l.once.Do(func() { close(l.done) }) }

var errLegacyStreamEnded = errors.New("mcptest: the HTTP+SSE stream ended")

// send is the session's outlet: its stream carries everything the server sends.
func (l *legacySession) send(ctx context.Context, frame []byte) error {
	select {
	case l.outbox <- frame:
		return nil
	case <-l.done:
		return errLegacyStreamEnded
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SSETransport returns a legacy HTTP+SSE transport to this server.
func (h *HTTPServer) SSETransport() transport.Transport {
	return &transport.SSE{URL: h.URL + legacyStreamPath, Client: h.ts.Client()}
}

// legacyStream serves GET /sse: the endpoint event, then every answer of the session.
func (h *HTTPServer) legacyStream(w http.ResponseWriter, r *http.Request) {
	id := uuid.NewString()
	ls := &legacySession{outbox: make(chan []byte, 64), done: make(chan struct{})}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		http.Error(w, "server closed", http.StatusServiceUnavailable)
		return
	}
	if h.legacy == nil {
		h.legacy = make(map[string]*legacySession)
	}
	h.legacy[id] = ls
	ep := h.epoch
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.legacy, id)
		h.mu.Unlock()
		ls.mu.Lock()
		session := ls.session
		ls.mu.Unlock()
		if st := h.sessionState(nil, session); st != nil {
			st.lose() // its pending server requests will get no answer
		}
	}()

	sseHeaders(w)
	w.WriteHeader(http.StatusOK)
	writeNamedEvent(w, "endpoint", []byte(legacyMessagePath+"?sessionId="+id))
	for {
		select {
		case frame := <-ls.outbox:
			writeNamedEvent(w, "message", frame)
		case <-ls.done:
			panic(http.ErrAbortHandler) // a dropped stream: the session is lost
		case <-r.Context().Done():
			return
		case <-ep.ctx.Done(): // closed or restarted: the stream, and the session, end
			return
		}
	}
}

// legacyPost serves POST /message: it handles the message and sends the answer over the
// session's stream.
func (h *HTTPServer) legacyPost(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	ls := h.legacy[r.URL.Query().Get("sessionId")]
	h.mu.Unlock()
	if ls == nil {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
	if err != nil {
		return
	}
	h.countFrame()
	msgs, err := jsonrpc.Decode(body)
	if err != nil || len(msgs) != 1 || len(body) > maxRequestBody {
		h.record(r, nil)
		http.Error(w, "a POST carries one JSON-RPC message", http.StatusBadRequest)
		return
	}
	m := msgs[0]
	h.record(r, &m)
	ls.mu.Lock()
	session := ls.session
	ls.mu.Unlock()
	switch m.Kind() {
	case jsonrpc.KindNotification:
		h.onNotification(session, m)
		w.WriteHeader(http.StatusAccepted)
		return
	case jsonrpc.KindResponse:
		h.onResponse(session, m)
		w.WriteHeader(http.StatusAccepted)
		return
	case jsonrpc.KindRequest:
	default:
		http.Error(w, "not a JSON-RPC 2.0 message", http.StatusBadRequest)
		return
	}
	key, t, ok := h.start(w, r, session, m, body)
	if !ok {
		return
	}
	defer h.untrack(session, key, t)
	out := &legacyRequest{ls: ls, w: w}
	v := h.process(t.ctx, t.ep, session, m, key, out, nil)
	if h.refused(w, v) {
		return
	}
	if v.drop {
		out.accept()
		ls.end()
		return
	}
	if v.session != "" {
		ls.mu.Lock()
		ls.session = v.session
		ls.mu.Unlock()
		if st := h.sessionState(t.ep, v.session); st != nil {
			st.attach(outletFunc(ls.send))
		}
	}
	out.accept()
	if h.unanswered(t, key) {
		return
	}
	select {
	case ls.outbox <- reply(m, v.answer):
	case <-ls.done:
	case <-t.ctx.Done():
	}
}

// legacyRequest is the outlet of one POST: the session's stream, and the POST's 202, written as
// soon as the request is admitted so that the client can go on (and cancel it) while it runs.
type legacyRequest struct {
	ls       *legacySession
	w        http.ResponseWriter
	accepted bool // only the handler's goroutine touches it
}

func (r *legacyRequest) send(ctx context.Context, frame []byte) error { return r.ls.send(ctx, frame) }

// prime answers 202 before the request runs. The response is complete at its headers, and its
// connection is not reused, since the handler keeps it until the request is done.
func (r *legacyRequest) prime() {
	if r.accepted {
		return
	}
	r.w.Header().Set("Content-Length", "0")
	r.w.Header().Set("Connection", "close")
	r.accept()
	r.w.(http.Flusher).Flush()
}

// accept answers 202, once.
func (r *legacyRequest) accept() {
	if !r.accepted {
		r.accepted = true
		r.w.WriteHeader(http.StatusAccepted)
	}
}

// writeNamedEvent writes one SSE event of a given type and flushes it.
func writeNamedEvent(w http.ResponseWriter, event string, data []byte) {
	b := append([]byte("event: "+event+"\ndata: "), data...)
	b = append(b, "\n\n"...)
	w.Write(b)
	w.(http.Flusher).Flush()
}
