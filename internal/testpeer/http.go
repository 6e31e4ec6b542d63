package testpeer

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// HTTPScript sees every request the server receives before the server answers it: a POST's
// JSON-RPC message, a GET, a DELETE (of a legacy server, the POSTs only). It runs on the request's
// own goroutine, so it may block until r.HTTP.Context() ends. It reports whether it answered the
// request; if not, the request gets the default answer (see the package doc, and [Stateless]
// and [Legacy]). A Streamable HTTP server answers a POST with a JSON body, a notification or an
// answer with 202, a GET with 405 and a DELETE with 200.
type HTTPScript func(r *Request) (handled bool)

// HTTP is a scripted MCP server over HTTP, closed at the end of the test.
type HTTP struct {
	*httptest.Server
	script HTTPScript
	opts   options
	frames chan string // the legacy stream's frames to send

	mu  sync.Mutex
	got []Received
}

// Received is a request as the server received it.
type Received struct {
	HTTPMethod string
	Header     http.Header // a copy
	Msg                    // the JSON-RPC message of a POST
}

// Request is a request in the hands of a script.
type Request struct {
	Received
	W    http.ResponseWriter
	HTTP *http.Request
}

// maxBody bounds the body of a POST the server reads.
const maxBody = 1 << 20

// NewHTTP returns a started server that runs script (nil: the defaults alone).
func NewHTTP(t testing.TB, script HTTPScript, opts ...Option) *HTTP {
	f := &HTTP{script: script, opts: newOptions(opts), frames: make(chan string, 64)}
	if f.opts.legacy && f.opts.init == InitResult {
		f.opts.init = strings.Replace(InitResult, "2025-11-25", "2024-11-05", 1)
	}
	f.Server = httptest.NewServer(f)
	t.Cleanup(f.Close)
	return f
}

// Requests returns the requests received so far, in order.
func (f *HTTP) Requests() []Received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Received(nil), f.got...)
}

// Count returns how many POSTs carried a message of method.
func (f *HTTP) Count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.got {
		if r.HTTPMethod == http.MethodPost && r.Method == method {
			n++
		}
	}
	return n
}

// ServeHTTP serves one request, for tests that put a server of their own in front.
func (f *HTTP) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	if f.opts.legacy {
		f.serveLegacy(w, hr)
		return
	}
	r, ok := f.receive(w, hr)
	if !ok {
		return
	}
	if f.opts.stateless && hr.Method == http.MethodPost {
		w.Header().Set("Mcp-Session-Id", StatelessSessionID)
	}
	if f.script != nil && f.script(r) {
		return
	}
	switch {
	case hr.Method == http.MethodDelete && !f.opts.stateless:
	case hr.Method != http.MethodPost:
		w.WriteHeader(http.StatusMethodNotAllowed)
	case f.opts.stateless && r.Method == "server/discover":
		r.Reply(http.StatusOK, `"result":`+StatelessDiscoverResult)
	case f.opts.stateless:
		r.Reply(http.StatusOK, `"result":{"resultType":"complete"}`)
	case !r.IsRequest():
		w.WriteHeader(http.StatusAccepted)
	default:
		if r.Method == "initialize" && f.opts.sessionID != "" {
			w.Header().Set("Mcp-Session-Id", f.opts.sessionID)
		}
		r.JSON(f.opts.answer(r.Msg))
	}
}

// receive reads and records a request; it answers 400 to a POST whose body is no JSON-RPC
// message.
func (f *HTTP) receive(w http.ResponseWriter, hr *http.Request) (*Request, bool) {
	r := &Request{W: w, HTTP: hr, Received: Received{HTTPMethod: hr.Method, Header: hr.Header.Clone()}}
	if hr.Method == http.MethodPost {
		if err := json.NewDecoder(io.LimitReader(hr.Body, maxBody)).Decode(&r.Msg); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return nil, false
		}
	}
	f.mu.Lock()
	f.got = append(f.got, r.Received)
	f.mu.Unlock()
	return r, true
}

func (f *HTTP) serveLegacy(w http.ResponseWriter, hr *http.Request) {
	switch {
	case hr.Method == http.MethodGet && hr.URL.Path == "/sse":
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: endpoint\ndata: /message?sessionId=%s\n\n", f.opts.legacySess)
		w.(http.Flusher).Flush()
		for {
			select {
			case frame := <-f.frames:
				fmt.Fprintf(w, "event: message\ndata: %s\n\n", frame)
				w.(http.Flusher).Flush()
			case <-hr.Context().Done():
				return
			}
		}
	case hr.Method == http.MethodPost && hr.URL.Path == "/message":
		if hr.URL.Query().Get("sessionId") != f.opts.legacySess {
			http.Error(w, "no such session", http.StatusNotFound)
			return
		}
		r, ok := f.receive(w, hr)
		if !ok || (f.script != nil && f.script(r)) {
			return
		}
		w.WriteHeader(http.StatusAccepted)
		if frame := f.opts.answer(r.Msg); frame != "" {
			f.frames <- frame
		}
	default:
		http.NotFound(w, hr)
	}
}

// JSON answers with frame as an application/json body.
func (r *Request) JSON(frame string) {
	r.W.Header().Set("Content-Type", "application/json")
	io.WriteString(r.W, frame)
}

// Answer answers the request's id with result, a JSON value, in a JSON body.
func (r *Request) Answer(result string) { r.JSON(Result(r.ID, result)) }

// Reply answers with status and, if the request has an id and member is not empty, a JSON body
// of the request's id and member (such as `"result":{}` or `"error":{...}`).
func (r *Request) Reply(status int, member string) {
	r.W.Header().Set("Content-Type", "application/json")
	r.W.WriteHeader(status)
	if r.ID != nil && member != "" {
		fmt.Fprintf(r.W, `{"jsonrpc":"2.0","id":%s,%s}`, r.ID, member)
	}
}

// SSE starts an SSE answer and returns a function writing one event of data, with an id if id
// is not empty.
func (r *Request) SSE() func(id, data string) {
	w := r.W
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	return func(id, data string) {
		if id != "" {
			fmt.Fprintf(w, "id: %s\n", id)
		}
		fmt.Fprintf(w, "data: %s\n\n", data)
		w.(http.Flusher).Flush()
	}
}

// HangUp resets the connection of a request the server has read: for the client, an uncertain
// outcome.
func (r *Request) HangUp() {
	if conn, _, err := http.NewResponseController(r.W).Hijack(); err == nil {
		conn.Close()
	}
}
