package events_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/events"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/internal/transporttest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// The revisions the HTTP tests run in: the stateless one, where each request carries the
// client's capabilities in its _meta and server/discover tells the server's, and the session
// one, where initialize does both once.
var httpRevisions = []struct {
	name      string
	stateless bool
}{
	{"stateless", true},
	{"session", false},
}

// The _meta key under which a request of the stateless revision carries the client's
// capabilities, spelled out so that the test pins the wire rather than the client's constant.
const clientCapabilitiesMeta = "io.modelcontextprotocol/clientCapabilities"

// httpSessionID is the Mcp-Session-Id the session revision's server hands out.
const httpSessionID = "events-session-1"

// httpPeer is a scripted events server over Streamable HTTP, speaking the stateless revision
// (2026-07-28) or the session one (2025-11-25). It answers discovery, the handshake and
// events/list (two pages, one type each, each offering mode); serve answers the other requests
// (n: how many requests of the same method and event name came before) and reports whether it
// did; what it leaves is refused with -32601.
type httpPeer struct {
	stateless bool
	settings  string // the extension's settings in the server's capabilities; "" declares none
	mode      events.DeliveryMode
	serve     func(r *testpeer.Request, n int) bool

	mu     sync.Mutex
	got    []httpReceived
	hungUp map[string]time.Time // events/stream ids whose response the client closed, and when
}

// httpReceived is one request the server got, and when (in the bubble's time).
type httpReceived struct {
	testpeer.Received
	at time.Time
}

func (p *httpPeer) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	r := &testpeer.Request{W: w, HTTP: hr, Received: testpeer.Received{HTTPMethod: hr.Method, Header: hr.Header.Clone()}}
	if hr.Method == http.MethodPost {
		if err := json.NewDecoder(hr.Body).Decode(&r.Msg); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
	}
	p.mu.Lock()
	n := 0
	for _, g := range p.got {
		if g.HTTPMethod == hr.Method && g.Method == r.Method && string(g.Param("name")) == string(r.Param("name")) {
			n++
		}
	}
	p.got = append(p.got, httpReceived{r.Received, time.Now()})
	p.mu.Unlock()
	switch {
	case hr.Method == http.MethodDelete && !p.stateless:
	case hr.Method != http.MethodPost:
		w.WriteHeader(http.StatusMethodNotAllowed)
	case r.Method == "server/discover" && p.stateless:
		r.Answer(`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":` + p.capabilities() +
			`,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"events","version":"0"}}}`)
	case r.Method == "initialize" && !p.stateless:
		w.Header().Set("Mcp-Session-Id", httpSessionID)
		r.Answer(`{"protocolVersion":"2025-11-25","capabilities":` + p.capabilities() + `,"serverInfo":{"name":"events","version":"0"}}`)
	case r.Method == "events/list":
		page := `{"events":[` + descriptor(replayType, p.mode) + `],"nextCursor":"page-2"}`
		if string(r.Param("cursor")) == `"page-2"` {
			page = `{"events":[` + descriptor(cursorlessType, p.mode) + `]}`
		}
		p.answer(r, page)
	case p.serve != nil && p.serve(r, n):
	case r.IsNotification() && p.stateless:
		w.WriteHeader(http.StatusOK)
	case r.IsNotification():
		w.WriteHeader(http.StatusAccepted)
	default:
		r.JSON(testpeer.NoMethod(r.ID))
	}
}

func (p *httpPeer) capabilities() string {
	if p.settings == "" {
		return `{"tools":{}}`
	}
	return `{"tools":{},"extensions":{"` + events.ExtensionID + `":` + p.settings + `}}`
}

// answer answers r with result, a JSON object, in a JSON body; in the stateless revision the
// result says it is complete, as that revision's results do.
func (p *httpPeer) answer(r *testpeer.Request, result string) {
	r.Answer(p.complete(result))
}

func (p *httpPeer) complete(result string) string {
	if !p.stateless {
		return result
	}
	if rest := strings.TrimSpace(strings.TrimPrefix(result, "{")); rest != "}" {
		return `{"resultType":"complete",` + rest
	}
	return `{"resultType":"complete"}`
}

// stream answers r with an SSE stream and returns the function that sends one notification of
// the extension (method without its "notifications/events/" prefix) on it, params a JSON object
// to which it adds the _meta naming the stream. awaitHangUp waits until the client closes the
// stream and records when it did.
func (p *httpPeer) stream(r *testpeer.Request) (send func(method, params string), awaitHangUp func()) {
	write := r.SSE()
	id := string(r.ID)
	meta := `"_meta":{"` + events.SubscriptionIDMeta + `":` + id + `}`
	send = func(method, params string) {
		params = strings.TrimSuffix(strings.TrimSpace(params), "}")
		if params != "{" {
			params += ","
		}
		write("", `{"jsonrpc":"2.0","method":"notifications/events/`+method+`","params":`+params+meta+`}}`)
	}
	awaitHangUp = func() {
		<-r.HTTP.Context().Done()
		p.mu.Lock()
		if p.hungUp == nil {
			p.hungUp = make(map[string]time.Time)
		}
		p.hungUp[id] = time.Now()
		p.mu.Unlock()
	}
	return send, awaitHangUp
}

// finish ends an SSE answer with the result of the request r, a JSON object.
func (p *httpPeer) finish(r *testpeer.Request, result string) {
	data := testpeer.Result(r.ID, p.complete(result))
	r.W.Write([]byte("data: " + data + "\n\n"))
	r.W.(http.Flusher).Flush()
}

// requests returns the POSTs of method for the event type name ("" for any), in order.
func (p *httpPeer) requests(method, name string) []httpReceived {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []httpReceived
	for _, r := range p.got {
		if r.HTTPMethod == http.MethodPost && r.Method == method && (name == "" || string(r.Param("name")) == `"`+name+`"`) {
			out = append(out, r)
		}
	}
	return out
}

// eventsRequests returns every events/* POST, in order.
func (p *httpPeer) eventsRequests() []httpReceived {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []httpReceived
	for _, r := range p.got {
		if r.HTTPMethod == http.MethodPost && strings.HasPrefix(r.Method, "events/") {
			out = append(out, r)
		}
	}
	return out
}

// hangUpOf returns when the client closed the response of the events/stream r, if it did.
func (p *httpPeer) hangUpOf(r httpReceived) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.hungUp[string(r.ID)]
	return at, ok
}

// httpCursorOf returns the cursor a request carried, absent read as null.
func httpCursorOf(r httpReceived) string {
	if c := r.Param("cursor"); c != nil {
		return string(c)
	}
	return "null"
}

// checkWire checks what every events/* request carried besides its params. In the stateless
// revision: the extension among the client capabilities of its own _meta, the revision in _meta
// and header, Mcp-Method naming the method, no Mcp-Name (the base protocol asks for one on
// tools/call, prompts/get and resources/read only) and no session id. In the session revision:
// the session id and the revision header, and the extension among the capabilities initialize
// declared.
func checkWire(t *testing.T, p *httpPeer) {
	t.Helper()
	reqs := p.eventsRequests()
	if len(reqs) == 0 {
		t.Error("no events/* request to check")
	}
	if !p.stateless {
		inits := p.requests("initialize", "")
		if len(inits) != 1 {
			t.Fatalf("%d initialize requests, want 1", len(inits))
		}
		var caps struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		}
		json.Unmarshal(inits[0].Param("capabilities"), &caps)
		if ext, ok := caps.Extensions[events.ExtensionID]; !ok || string(ext) != "{}" {
			t.Errorf("initialize declared capabilities %s, want the extension with {}", inits[0].Param("capabilities"))
		}
	}
	for _, r := range reqs {
		if !p.stateless {
			if got := r.Header.Get("Mcp-Session-Id"); got != httpSessionID {
				t.Errorf("%s %s: Mcp-Session-Id %q, want %q", r.Method, r.ID, got, httpSessionID)
			}
			if got := r.Header.Get("Mcp-Protocol-Version"); got != "2025-11-25" {
				t.Errorf("%s %s: MCP-Protocol-Version %q", r.Method, r.ID, got)
			}
			continue
		}
		meta := r.Meta()
		var caps struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		}
		if err := json.Unmarshal(meta[clientCapabilitiesMeta], &caps); err != nil {
			t.Errorf("%s %s: _meta client capabilities %s: %v", r.Method, r.ID, meta[clientCapabilitiesMeta], err)
			continue
		}
		if ext, ok := caps.Extensions[events.ExtensionID]; !ok || string(ext) != "{}" {
			t.Errorf("%s %s: _meta client capabilities %s do not declare the extension", r.Method, r.ID, meta[clientCapabilitiesMeta])
		}
		if got := string(meta["io.modelcontextprotocol/protocolVersion"]); got != `"2026-07-28"` {
			t.Errorf("%s %s: _meta protocolVersion %s", r.Method, r.ID, got)
		}
		if got := r.Header.Values("Mcp-Method"); len(got) != 1 || got[0] != r.Method {
			t.Errorf("%s %s: Mcp-Method %q", r.Method, r.ID, got)
		}
		if got := r.Header.Get("Mcp-Protocol-Version"); got != "2026-07-28" {
			t.Errorf("%s %s: MCP-Protocol-Version %q", r.Method, r.ID, got)
		}
		if got := r.Header.Values("Mcp-Name"); len(got) != 0 {
			t.Errorf("%s %s: Mcp-Name %q, which the base protocol does not ask of this method", r.Method, r.ID, got)
		}
		if got := r.Header.Get("Mcp-Session-Id"); got != "" {
			t.Errorf("%s %s: Mcp-Session-Id %q in the stateless revision", r.Method, r.ID, got)
		}
	}
}

// connectHTTP connects a client to p over in-memory connections, and checks the revision it
// settled on.
func connectHTTP(t *testing.T, p *httpPeer, opts ...mcpclient.Option) *mcpclient.Client {
	t.Helper()
	tr := &transport.HTTP{URL: "http://events.test/mcp", Client: pipeHTTP(t, p)}
	c, err := mcpclient.Connect(context.Background(), tr, opts...)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	want := "2025-11-25"
	if p.stateless {
		want = mcpclient.ProtocolVersion20260728
	}
	if got := c.ProtocolVersion(); got != want {
		t.Fatalf("the client settled on %q, want %q", got, want)
	}
	return c
}

// pipeHTTP serves h over in-memory connections (see transporttest.PipeHTTP).
func pipeHTTP(t *testing.T, h http.Handler) *http.Client { return transporttest.PipeHTTP(t, h) }
