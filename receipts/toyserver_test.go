package receipts_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/northstar-mcp/mcpclient/internal/sse"
	"github.com/northstar-mcp/mcpclient/receipts"
)

// A toyServer is a small Streamable HTTP MCP handler: it answers initialize, server/discover
// and tools/call, in JSON or in an event stream (a progress notification before the response),
// with sessions (stateful) or without (the 2026-07-28 revision), and counts the tool runs.
type toyServer struct {
	sse      bool
	stateful bool

	executions atomic.Int64
	// gate, if not nil, holds the tool "slow" until it is closed; started gets a value when
	// "slow" begins.
	gate    chan struct{}
	started chan struct{}
	// reject makes the next tools/call fail with 401 before it runs.
	reject atomic.Bool
	// refuseWith, if set, makes the next tools/call fail before it runs with this status and a
	// JSON-RPC error body, and with Retry-After when retryAfter is set.
	refuseWith atomic.Int64
	retryAfter atomic.Bool
	// cancelled counts "slow" runs that saw their context end.
	cancelled atomic.Int64

	mu       sync.Mutex
	sessions map[string]bool
}

func newToyServer(sseMode, stateful bool) *toyServer {
	return &toyServer{sse: sseMode, stateful: stateful, sessions: map[string]bool{}, started: make(chan struct{}, 16)}
}

func (s *toyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		if r.Method == http.MethodDelete {
			s.mu.Lock()
			delete(s.sessions, r.Header.Get("Mcp-Session-Id"))
			s.mu.Unlock()
			return
		}
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		http.Error(w, "parse error", http.StatusBadRequest)
		return
	}
	if msg.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if s.stateful && msg.Method != "initialize" {
		s.mu.Lock()
		known := s.sessions[r.Header.Get("Mcp-Session-Id")]
		s.mu.Unlock()
		if !known {
			http.Error(w, "unknown session", http.StatusNotFound)
			return
		}
	}
	switch msg.Method {
	case "initialize":
		if s.stateful {
			sid := rand.Text()
			s.mu.Lock()
			s.sessions[sid] = true
			s.mu.Unlock()
			w.Header().Set("Mcp-Session-Id", sid)
		}
		s.answer(w, msg.ID, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"extensions":{"io.example/other":{"n":1.0}}},"serverInfo":{"name":"toy","version":"1"}}`)
	case "server/discover":
		s.answer(w, msg.ID, `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"toy","version":"1"}}}`)
	case "tools/call":
		if s.reject.CompareAndSwap(true, false) {
			http.Error(w, "invalid token", http.StatusUnauthorized)
			return
		}
		if status := s.refuseWith.Swap(0); status != 0 {
			if s.retryAfter.Load() {
				w.Header().Set("Retry-After", "1")
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(int(status))
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"refused before it ran"}}`, msg.ID)
			return
		}
		s.toolsCall(w, r, msg.ID, msg.Params.Name)
	default:
		s.answer(w, msg.ID, `{}`)
	}
}

func (s *toyServer) toolsCall(w http.ResponseWriter, r *http.Request, id json.RawMessage, tool string) {
	n := s.executions.Add(1)
	switch tool {
	case "slow":
		s.started <- struct{}{}
		select {
		case <-s.gate:
		case <-r.Context().Done():
			s.cancelled.Add(1)
			return // as SDKs do: a cancelled request gets no response
		}
	case "crash":
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	case "panic":
		panic("the tool panicked")
	case "large":
		s.answer(w, id, fmt.Sprintf(`{"content":[{"type":"text","text":%q}]}`, strings.Repeat("x", 64<<10)))
		return
	case "linger": // answers, then keeps its stream open a while
		s.answer(w, id, fmt.Sprintf(`{"content":[{"type":"text","text":"run %d"}]}`, n))
		s.started <- struct{}{}
		<-s.gate
		return
	case "silent":
		w.WriteHeader(http.StatusOK)
		return
	}
	s.answer(w, id, fmt.Sprintf(`{"content":[{"type":"text","text":"run %d"}]}`, n))
}

// answer writes the response to id: a JSON body, or an event stream whose response event
// follows a progress notification.
func (s *toyServer) answer(w http.ResponseWriter, id json.RawMessage, result string) {
	resp := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
	if !s.sse {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, resp)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, progressEvent)
	w.(http.Flusher).Flush()
	io.WriteString(w, "id: 2\r\nevent: message\r\ndata: "+resp+"\r\n\r\n")
	w.(http.Flusher).Flush()
}

const progressEvent = "id: 1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n"

// A mode is one way a server speaks: JSON or events, with or without sessions.
type mode struct {
	name          string
	sse, stateful bool
}

var modes = []mode{
	{"json stateless", false, false},
	{"sse stateless", true, false},
	{"json stateful", false, true},
	{"sse stateful", true, true},
}

// A toyClient sends requests to a handler: with a session it opened (stateful) and opted in
// through initialize, or with per-request _meta (stateless).
type toyClient struct {
	t        *testing.T
	h        http.Handler
	stateful bool
	session  string
	header   http.Header // added to every request
	optIn    bool
}

// newClient opens a client of h in mode m, opted into receipts or not.
func newClient(t *testing.T, h http.Handler, m mode, optIn bool) *toyClient {
	c := &toyClient{t: t, h: h, stateful: m.stateful, header: http.Header{}, optIn: optIn}
	if optIn {
		c.header.Set(receipts.HeaderOptIn, "1") // a client sends it with every opted-in request
	}
	if m.stateful {
		resp := c.post(initializeBody(optIn))
		c.session = resp.Header.Get("Mcp-Session-Id")
		if c.session == "" {
			t.Fatalf("initialize gave no session: %d %s", resp.StatusCode, resp.Body)
		}
	}
	return c
}

func initializeBody(optIn bool) string {
	ext := ""
	if optIn {
		ext = `"extensions":{"io.github.northstar-mcp/request-receipts":{}}`
	}
	return `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{` + ext + `},"clientInfo":{"name":"t","version":"1"}}}`
}

// callBody is a tools/call of tool under id, as the client's mode sends it.
func (c *toyClient) callBody(id, tool string) string {
	if c.stateful {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, tool)
	}
	ext := ""
	if c.optIn {
		ext = `"extensions":{"io.github.northstar-mcp/request-receipts":{}}`
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{%s}}}}`, id, tool, ext)
}

// A reply is what a handler answered.
type reply struct {
	StatusCode int
	Header     http.Header
	Body       string
}

func (c *toyClient) post(body string) reply {
	return c.postContext(context.Background(), body)
}

func (c *toyClient) postContext(ctx context.Context, body string) reply {
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		r.Header.Set("Mcp-Session-Id", c.session)
	}
	for k, v := range c.header {
		r.Header[k] = v
	}
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, r)
	return reply{StatusCode: rec.Code, Header: rec.Header(), Body: rec.Body.String()}
}

func (c *toyClient) call(id, tool string) reply { return c.post(c.callBody(id, tool)) }

// rpc is a JSON-RPC response as the tests read it.
type rpc struct {
	ID     json.RawMessage `json:"id"`
	Result *struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Meta map[string]any `json:"_meta"`
	} `json:"result"`
	Error *struct {
		Code int `json:"code"`
		Data *struct {
			Code string `json:"code"`
		} `json:"data"`
	} `json:"error"`
}

// message returns the JSON-RPC response in a reply: its JSON body, or the event of its stream
// that carries one.
func (r reply) message(t *testing.T) (rpc, string) {
	t.Helper()
	raw := r.Body
	if strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
		raw = ""
		events := sse.NewReader(strings.NewReader(r.Body), 0)
		for {
			ev, err := events.Next()
			if err != nil {
				break
			}
			if bytes.Contains(ev.Data, []byte(`"result"`)) || bytes.Contains(ev.Data, []byte(`"error"`)) {
				raw = string(ev.Data)
			}
		}
	}
	var m rpc
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("no JSON-RPC response in %d %q: %v", r.StatusCode, r.Body, err)
	}
	return m, raw
}

// text returns the text of a tools/call result.
func (r reply) text(t *testing.T) string {
	t.Helper()
	m, raw := r.message(t)
	if m.Result == nil || len(m.Result.Content) == 0 {
		t.Fatalf("no tool result in %d %s", r.StatusCode, raw)
	}
	return m.Result.Content[0].Text
}

// marker returns the error.data.code of an error reply.
func (r reply) marker(t *testing.T) (int, string) {
	t.Helper()
	m, raw := r.message(t)
	if m.Error == nil || m.Error.Data == nil {
		t.Fatalf("no error with data in %d %s", r.StatusCode, raw)
	}
	return m.Error.Code, m.Error.Data.Code
}

// replayed reports whether a reply is marked as a replay, in its header and (for a result) its
// _meta.
func (r reply) replayed(t *testing.T) bool {
	t.Helper()
	m, _ := r.message(t)
	header := r.Header.Get(receipts.HeaderReplay) == "1"
	if m.Result != nil {
		flag, _ := m.Result.Meta[receipts.ReplayMetaKey].(bool)
		if flag != header {
			t.Fatalf("replay header %v, _meta flag %v: want both or neither", header, flag)
		}
	}
	return header
}

// A netClient sends requests over a real connection, so that it can disconnect.
type netClient struct {
	*toyClient
	ts *httptest.Server
}

func newNetClient(t *testing.T, ts *httptest.Server, m mode) *netClient {
	c := &netClient{toyClient: &toyClient{t: t, stateful: m.stateful, header: http.Header{receipts.HeaderOptIn: {"1"}}, optIn: true}, ts: ts}
	if m.stateful {
		resp, err := c.postContext(context.Background(), initializeBody(true))
		if err != nil {
			t.Fatal(err)
		}
		c.session = resp.Header.Get("Mcp-Session-Id")
	}
	return c
}

func (c *netClient) postContext(ctx context.Context, body string) (reply, error) {
	r, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.ts.URL, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		r.Header.Set("Mcp-Session-Id", c.session)
	}
	for k, v := range c.header {
		r.Header[k] = v
	}
	resp, err := c.ts.Client().Do(r)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{StatusCode: resp.StatusCode, Header: resp.Header, Body: string(b)}, nil
}
