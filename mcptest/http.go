package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/transport"
)

// HTTPServer serves a Server over Streamable HTTP from an httptest server, with the same
// receipts, modes and faults as in memory. Faults take their HTTP form: DropBeforeExecution and
// DropAfterExecution reset the connection, Fail answers 503 with Retry-After, ExpireSession
// answers 404, BreakStream cuts an SSE response after its first event id and replays the
// answer to a GET with Last-Event-ID, CloseStream ends it there cleanly, answer replayed the
// same way, and RefuseInFlight and RefuseIDReused answer 409 with the receipt rules' refusal.
type HTTPServer struct {
	*Server
	// URL is the MCP endpoint, set by Start.
	URL string
	ts  *httptest.Server

	recordMu sync.Mutex
	recorded []HTTPRequest // the last maxRecorded; guarded by recordMu
}

// An HTTPRequest is an HTTP request the server received, as a test asserts on it (the
// Authorization a plugin added, the headers a client sent with one request).
type HTTPRequest struct {
	// Method is the HTTP method: POST, GET or DELETE.
	Method string
	// RPCMethod and ID are the JSON-RPC method and request id a POST carried: "" and the zero
	// ID for a response, a GET, a DELETE or a body that is no JSON-RPC message; the zero ID for a
	// notification.
	RPCMethod string
	ID        mcpclient.ID
	// Header is a copy of the request's headers.
	Header http.Header
	// Refused is the status with which the server refused the request before the MCP server saw
	// it: 401 or 403 from a server made WithAuthorization, 403 for an Origin not allowed (see
	// ServeHTTP); 0 for a request it served.
	Refused int
}

// maxRecorded bounds the requests an HTTPServer remembers for Requests.
const maxRecorded = 10_000

// Requests returns the HTTP requests the server received, oldest first: the last 10,000, those
// of the legacy HTTP+SSE transport included.
func (h *HTTPServer) Requests() []HTTPRequest {
	h.recordMu.Lock()
	defer h.recordMu.Unlock()
	return slices.Clone(h.recorded)
}

// record remembers r, and the JSON-RPC message its body carried, if any.
func (h *HTTPServer) record(r *http.Request, m *jsonrpc.Message) {
	rec := HTTPRequest{Method: r.Method, Header: r.Header.Clone()}
	if m != nil {
		rec.RPCMethod = m.Method
		if m.Kind() == jsonrpc.KindRequest {
			json.Unmarshal(m.ID, &rec.ID)
		}
	}
	h.remember(rec)
}

func (h *HTTPServer) remember(rec HTTPRequest) {
	h.recordMu.Lock()
	defer h.recordMu.Unlock()
	if len(h.recorded) == maxRecorded {
		h.recorded = slices.Delete(h.recorded, 0, 1)
	}
	h.recorded = append(h.recorded, rec)
}

// maxRequestBody bounds a POST body.
const maxRequestBody = 4 << 20

// NewHTTPServer returns a started server.
func NewHTTPServer(opts ...Option) *HTTPServer {
	h := NewUnstartedHTTPServer(opts...)
	h.Start()
	return h
}

// NewUnstartedHTTPServer returns a server that is not listening yet, for setup that must come
// first; call Start.
func NewUnstartedHTTPServer(opts ...Option) *HTTPServer {
	h := &HTTPServer{Server: NewServer(opts...)}
	h.ts = httptest.NewUnstartedServer(h)
	return h
}

// Start starts listening on a loopback port.
func (h *HTTPServer) Start() {
	h.ts.Start()
	h.URL = h.ts.URL
}

// Transport returns a Streamable HTTP transport to this server.
func (h *HTTPServer) Transport() transport.Transport {
	return &transport.HTTP{URL: h.URL, Client: h.ts.Client()}
}

// Close stops the MCP server, then the HTTP server. It is idempotent.
func (h *HTTPServer) Close() error {
	h.Server.Close()
	h.ts.Close()
	return nil
}

// ServeHTTP serves the MCP endpoint.
//
// Served on a loopback address, it refuses with 403 a request whose Host or Origin names
// another host: a web page whose name an attacker rebinds to 127.0.0.1 must not reach a local
// server through the user's browser.
func (h *HTTPServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.localRequest(r) {
		h.remember(HTTPRequest{Method: r.Method, Header: r.Header.Clone(), Refused: http.StatusForbidden})
		http.Error(w, "Forbidden: the Host or Origin of the request names another host", http.StatusForbidden)
		return
	}
	if h.Server.auth.guard(h, w, r) {
		return
	}
	switch {
	case r.URL.Path == legacyStreamPath && r.Method == http.MethodGet:
		h.record(r, nil)
		h.legacyStream(w, r)
		return
	case r.URL.Path == legacyMessagePath && r.Method == http.MethodPost:
		h.legacyPost(w, r)
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.post(w, r)
	case http.MethodGet:
		h.record(r, nil)
		h.get(w, r)
	case http.MethodDelete:
		h.record(r, nil)
		h.delete(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (h *HTTPServer) post(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
	if err != nil {
		return
	}
	h.countFrame()
	if len(body) > maxRequestBody {
		http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
		return
	}
	msgs, err := jsonrpc.Decode(body)
	if err != nil || len(msgs) != 1 {
		h.record(r, nil)
		writeRPCError(w, http.StatusBadRequest, nil, mcpclient.RPCParseError, "a POST carries exactly one JSON-RPC message")
		return
	}
	m := msgs[0]
	h.record(r, &m)
	session := r.Header.Get("Mcp-Session-Id")
	if h.routesStateless(r, session, m) {
		h.postStateless(w, r, m, body)
		return
	}
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && !slices.Contains(h.versions, v) {
		writeRPCError(w, http.StatusBadRequest, nil, mcpclient.RPCInvalidRequest, "unsupported MCP-Protocol-Version "+strconv.Quote(v))
		return
	}
	switch m.Kind() {
	case jsonrpc.KindNotification, jsonrpc.KindResponse:
		if !h.checkSession(w, session) {
			return
		}
		if m.Kind() == jsonrpc.KindResponse {
			h.onResponse(session, m)
		} else {
			h.onNotification(session, m)
		}
		w.WriteHeader(http.StatusAccepted)
		return
	case jsonrpc.KindRequest:
	default:
		writeRPCError(w, http.StatusBadRequest, nil, mcpclient.RPCInvalidRequest, "not a JSON-RPC 2.0 message")
		return
	}
	if m.Method != "initialize" && session == "" {
		writeRPCError(w, http.StatusBadRequest, m.ID, mcpclient.RPCInvalidRequest, "missing Mcp-Session-Id")
		return
	}
	key, t, ok := h.start(w, r, session, m, body)
	if !ok {
		return
	}
	defer h.untrack(session, key, t)

	// What the server sends while the request runs (progress, its own requests) goes on the
	// request's SSE stream, which opens once the request is admitted, or else to the session's
	// GET stream.
	var sw *sseResponse
	var out outlet = h.sessionOutlet(t.ep, session)
	if h.sse != nil {
		sw = &sseResponse{w: w, ep: t.ep, srv: h.Server, session: session, retry: *h.sse}
		out = sw
	}
	defer sw.close()
	v := h.process(t.ctx, t.ep, session, m, key, out, nil)
	if h.refused(w, v) {
		return
	}
	switch {
	case v.drop:
		// Resets the connection; an SSE stream already open breaks, and its events are
		// forgotten: a resumption finds nothing.
		sw.abandon()
		panic(http.ErrAbortHandler)
	case h.refusedForItsID(w, m, v):
		return
	case h.unanswered(t, key):
		if sw == nil {
			// A JSON response has no way to end without the answer but a reset.
			panic(http.ErrAbortHandler)
		}
		sw.abandon() // the stream ends without it
		return
	}
	if v.session != "" {
		session = v.session
		w.Header().Set("Mcp-Session-Id", session)
	}
	if v.answer.replay {
		w.Header().Set("Mcp-Receipt-Replay", "1")
	}
	frame := reply(m, v.answer)
	if sw == nil {
		writeFrame(w, http.StatusOK, frame)
		return
	}
	if !sw.finish(session, frame, v.breakStream, v.closeStream) {
		// Restarted meanwhile, or a BreakStream fault: the answer, if stored, waits for a
		// resumption.
		panic(http.ErrAbortHandler)
	}
}

// sessionOutlet sends to the session's GET stream.
func (s *Server) sessionOutlet(ep *epoch, session string) outletFunc {
	return func(ctx context.Context, frame []byte) error {
		st := s.sessionState(ep, session)
		if st == nil {
			return errSessionLost
		}
		return st.send(ctx, frame)
	}
}

// An sseResponse is the SSE stream answering one POST. It opens (status, headers, a priming
// event with the retry: hint) once the request is admitted, before it runs (see outlet.prime),
// or with the answer for a request that never got that far (initialize).
type sseResponse struct {
	w       http.ResponseWriter
	srv     *Server
	ep      *epoch
	session string
	retry   time.Duration

	mu      sync.Mutex
	started bool
	closed  bool // the handler returned: the ResponseWriter is no longer ours
	st      *sessionState
	stream  string
}

var errStreamClosed = errors.New("mcptest: the request's SSE stream has ended")

func (r *sseResponse) startLocked() error {
	if r.started {
		return nil
	}
	st := r.srv.sessionState(r.ep, r.session)
	if st == nil {
		return errSessionLost
	}
	r.st, r.stream, r.started = st, st.events.newStream(), true
	sseHeaders(r.w)
	r.w.WriteHeader(http.StatusOK)
	writeEvent(r.w, st.events.add(r.stream, nil), r.retry, nil)
	return nil
}

func (r *sseResponse) prime() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.startLocked()
	}
}

// abandon ends the stream without an answer and forgets its events; nil-safe.
func (r *sseResponse) abandon() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.started {
		r.st.events.forget(r.stream)
	}
}

// send writes a message of the server's on the stream, as an event kept for resumption.
func (r *sseResponse) send(_ context.Context, frame []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errStreamClosed
	}
	if err := r.startLocked(); err != nil {
		return err
	}
	writeEvent(r.w, r.st.events.add(r.stream, frame), 0, frame)
	return nil
}

// finish writes the answer and ends the stream. It reports false when the stream must break
// instead: the session is gone, or breakStream asks for it after storing the answer.
// closeStream stores the answer and ends the stream without it.
func (r *sseResponse) finish(session string, frame []byte, breakStream, closeStream bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	r.session = session // initialize opened it
	if r.startLocked() != nil {
		return false
	}
	id := r.st.events.add(r.stream, frame)
	if breakStream {
		return false
	}
	if closeStream {
		return true
	}
	writeEvent(r.w, id, 0, frame)
	return true
}

// close ends the stream for late senders; nil-safe.
func (r *sseResponse) close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}

// start registers a request as running, under its id. ok is false when an error answer was
// written instead.
func (h *HTTPServer) start(w http.ResponseWriter, r *http.Request, session string, m jsonrpc.Message, body []byte) (key string, t *tracked, ok bool) {
	var id mcpclient.ID
	if err := id.UnmarshalJSON(m.ID); err != nil {
		writeRPCError(w, http.StatusBadRequest, nil, mcpclient.RPCInvalidRequest, err.Error())
		return "", nil, false
	}
	key = id.JSON()
	if t, ok = h.track(session, key, httpOrigin(r, body)); !ok {
		// Turned away unread: Retry-After is how a client tells that from a gateway's 503.
		w.Header().Set("Retry-After", "0")
		http.Error(w, "server closed", http.StatusServiceUnavailable)
	}
	return key, t, ok
}

// refuse answers a request turned away before it was read: 503 with Retry-After (0 when the
// fault names no delay: the header is what tells a client the server itself refused the request
// unread, where a gateway's 503 may follow its execution), or 404 for a session the server does
// not know.
// refused answers a request the server refused, and reports whether it was.
func (h *HTTPServer) refused(w http.ResponseWriter, v verdict) bool {
	if v.refuse == nil {
		return false
	}
	h.refuse(w, v)
	return true
}

// refusedForItsID answers a request refused for its id without running it, with the refusal's
// own status: an id in flight (ModeInFlightRefusal), or a receipt's refusal (reused, in flight,
// a full store, which says when to come back as it claimed nothing). It reports whether v was
// such a refusal.
func (h *HTTPServer) refusedForItsID(w http.ResponseWriter, m jsonrpc.Message, v verdict) bool {
	switch {
	case v.inFlight:
		writeFrame(w, h.inFlightStatus, reply(m, v.answer))
	case v.status >= 300:
		if v.status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		writeFrame(w, v.status, reply(m, v.answer))
	default:
		return false
	}
	return true
}

func (h *HTTPServer) refuse(w http.ResponseWriter, v verdict) {
	if !errors.Is(v.refuse, ErrUnavailable) {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(v.retryAfter.Seconds()))))
	http.Error(w, v.refuse.Error(), http.StatusServiceUnavailable)
}

func (h *HTTPServer) checkSession(w http.ResponseWriter, session string) bool {
	if session == "" {
		http.Error(w, "missing Mcp-Session-Id", http.StatusBadRequest)
		return false
	}
	if h.sessionState(nil, session) == nil {
		http.Error(w, "session not found", http.StatusNotFound)
		return false
	}
	return true
}

// sessionState returns the state of a live session of ep (nil: the current epoch), or nil.
func (s *Server) sessionState(ep *epoch, session string) *sessionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ep == nil {
		ep = s.epoch
	}
	if s.epoch != ep {
		return nil
	}
	return ep.sessions[session]
}

// get serves the standalone stream, or replays a broken one after Last-Event-ID.
func (h *HTTPServer) get(w http.ResponseWriter, r *http.Request) {
	session := r.Header.Get("Mcp-Session-Id")
	if !h.checkSession(w, session) {
		return
	}
	h.mu.Lock()
	ep := h.epoch
	h.mu.Unlock()
	st := h.sessionState(ep, session)
	if st == nil {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		events, ok := st.events.after(last)
		if !ok {
			http.Error(w, "unknown Last-Event-ID", http.StatusBadRequest)
			return
		}
		sseHeaders(w)
		w.WriteHeader(http.StatusOK)
		for _, ev := range events {
			writeEvent(w, ev.id, 0, ev.data)
		}
		return
	}
	sseHeaders(w)
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	for {
		select {
		case frame := <-st.outbox:
			writeEvent(w, "", 0, frame)
		case <-r.Context().Done():
			return
		case <-ep.ctx.Done(): // closed or restarted
			return
		}
	}
}

func (h *HTTPServer) delete(w http.ResponseWriter, r *http.Request) {
	session := r.Header.Get("Mcp-Session-Id")
	if !h.checkSession(w, session) {
		return
	}
	h.mu.Lock()
	st := h.epoch.sessions[session]
	delete(h.epoch.sessions, session)
	h.mu.Unlock()
	if st != nil {
		st.lose()
	}
	w.WriteHeader(http.StatusOK)
}

func reply(m jsonrpc.Message, a answer) []byte {
	if a.isError {
		return jsonrpc.AppendError(nil, m.ID, a.body)
	}
	return jsonrpc.AppendResult(nil, m.ID, a.body)
}

func writeFrame(w http.ResponseWriter, status int, frame []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(frame)
}

func writeRPCError(w http.ResponseWriter, status int, id []byte, code int64, message string) {
	writeFrame(w, status, jsonrpc.AppendError(nil, id, errorAnswer(code, message, nil).body))
}

func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
}

// writeEvent writes one SSE event and flushes it. A nil data makes a priming event.
func writeEvent(w http.ResponseWriter, id string, retry time.Duration, data []byte) {
	var b []byte
	if id != "" {
		b = fmt.Appendf(b, "id: %s\n", id)
	}
	if retry > 0 {
		b = fmt.Appendf(b, "retry: %d\n", retry.Milliseconds())
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	w.Write(b)
	w.(http.Flusher).Flush()
}

// localRequest reports whether a request may reach a server listening on a loopback address:
// its Host, and its Origin if it has one, name a loopback host or one WithAllowedHosts allows.
// A server on another address takes every request.
func (h *HTTPServer) localRequest(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || !loopbackAddr(local.String()) {
		return true
	}
	if !h.hostAllowed(r.Host) {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && h.hostAllowed(u.Host)
}

func (h *HTTPServer) hostAllowed(hostport string) bool {
	if loopbackHost(hostport) {
		return true
	}
	host := hostport
	if name, _, err := net.SplitHostPort(hostport); err == nil {
		host = name
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.allowedHosts["*"] || h.allowedHosts[strings.ToLower(host)]
}

// loopbackAddr reports whether host:port is on a loopback IP.
func loopbackAddr(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackHost reports whether a Host header (host, host:port, [v6]:port) names localhost or a
// loopback IP.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
