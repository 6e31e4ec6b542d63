package mcptest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/receipts"
)

func TestMatchURITemplate(t *testing.T) {
	tests := []struct {
		template, uri string
		want          map[string]string // nil: no match
	}{
		{"file:///logs/{date}/{name}", "file:///logs/2026-01-02/app.log", map[string]string{"date": "2026-01-02", "name": "app.log"}},
		{"file:///logs/{date}/{name}", "file:///logs/2026-01-02", nil},
		{"file:///logs/{date}/{name}", "file:///logs/a/b/c", nil},
		{"db://{table}", "db://users", map[string]string{"table": "users"}},
		{"db://{table}", "db://", nil},
		{"db://{table}", "db://a%20b", map[string]string{"table": "a b"}},
		{"db://{table}", "db://a b", nil},
		{"db://{table}", "db://a?x", nil},
		{"db://{table}", "xdb://users", nil},
		{"db://{table}/rows", "db://users/rows", map[string]string{"table": "users"}},
		{"search?q={q}", "search?q=go", map[string]string{"q": "go"}},
		{"a.{x}.{y}", "a.b.c", map[string]string{"x": "b", "y": "c"}},
		{"{x}-{x}", "a-a", map[string]string{"x": "a"}},
		{"{x}-{x}", "a-b", nil},
		{"mem://fixed", "mem://fixed", map[string]string{}},
		{"mem://fixed", "mem://fixed2", nil},
		{"file:///{+path}", "file:///a/b", nil}, // beyond level 1
		{"api{?q}", "api?q=1", nil},
		{"{a,b}", "x,y", nil},
		{"broken{", "broken{", nil},
	}
	for _, tt := range tests {
		got, ok := mcptest.MatchURITemplate(tt.template, tt.uri)
		if ok != (tt.want != nil) || !maps.Equal(got, tt.want) {
			t.Errorf("MatchURITemplate(%q, %q) = %v, %v; want %v", tt.template, tt.uri, got, ok, tt.want)
		}
	}
}

// rpcResponse is a decoded response frame.
type rpcResponse struct {
	ID     json.RawMessage     `json:"id"`
	Method string              `json:"method"`
	Params json.RawMessage     `json:"params"`
	Result json.RawMessage     `json:"result"`
	Error  *mcpclient.RPCError `json:"error"`
}

func decode(t *testing.T, frame string) rpcResponse {
	t.Helper()
	var r rpcResponse
	if err := json.Unmarshal([]byte(frame), &r); err != nil {
		t.Fatalf("frame %s: %v", frame, err)
	}
	return r
}

func noContents(context.Context, string) ([]mcpclient.ResourceContents, error) { return nil, nil }

func TestListsArePaginated(t *testing.T) {
	srv := mcptest.NewTestServer(t, mcptest.WithPageSize(2),
		mcptest.WithTool(mcpclient.Tool{Name: "t1"}, nil), mcptest.WithTool(mcpclient.Tool{Name: "t2"}, nil), mcptest.WithTool(mcpclient.Tool{Name: "t3"}, nil),
		mcptest.WithResource(mcpclient.Resource{URI: "r:1", Name: "1"}, noContents), mcptest.WithResource(mcpclient.Resource{URI: "r:2", Name: "2"}, noContents),
		mcptest.WithResource(mcpclient.Resource{URI: "r:3", Name: "3"}, noContents),
		mcptest.WithResourceTemplate(mcpclient.ResourceTemplate{URITemplate: "t:{1}", Name: "1"}, noContents),
		mcptest.WithResourceTemplate(mcpclient.ResourceTemplate{URITemplate: "t:{2}", Name: "2"}, noContents),
		mcptest.WithResourceTemplate(mcpclient.ResourceTemplate{URITemplate: "t:{3}", Name: "3"}, noContents),
		mcptest.WithPrompt(mcpclient.Prompt{Name: "p1"}, nil), mcptest.WithPrompt(mcpclient.Prompt{Name: "p2"}, nil),
		mcptest.WithPrompt(mcpclient.Prompt{Name: "p3"}, nil))
	r := dialRaw(t, srv)
	tests := []struct {
		method, field string
	}{
		{"tools/list", "tools"},
		{"resources/list", "resources"},
		{"resources/templates/list", "resourceTemplates"},
		{"prompts/list", "prompts"},
	}
	id := 0 // the session opted into receipts: each request has an id of its own
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			var sizes []int
			cursor := ""
			for range 5 {
				params := `{}`
				if cursor != "" {
					params = `{"cursor":"` + cursor + `"}`
				}
				id++
				r.send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"` + tt.method + `","params":` + params + `}`)
				resp := decode(t, r.recv())
				var page map[string]json.RawMessage
				if resp.Error != nil || json.Unmarshal(resp.Result, &page) != nil {
					t.Fatalf("answer %+v", resp)
				}
				var items []json.RawMessage
				json.Unmarshal(page[tt.field], &items)
				sizes = append(sizes, len(items))
				json.Unmarshal(page["nextCursor"], &cursor)
				if page["nextCursor"] == nil {
					break
				}
			}
			if len(sizes) != 2 || sizes[0] != 2 || sizes[1] != 1 {
				t.Errorf("page sizes %v, want [2 1]", sizes)
			}
			id++
			r.send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"` + tt.method + `","params":{"cursor":"bogus"}}`)
			if resp := decode(t, r.recv()); resp.Error == nil || resp.Error.Code != mcpclient.RPCInvalidParams {
				t.Errorf("bogus cursor answered %+v", resp)
			}
		})
	}
}

func TestCapabilitiesFollowRegistrations(t *testing.T) {
	complete := func(context.Context, mcpclient.CompletionReference, string, string, map[string]string) (*mcpclient.Completion, error) {
		return nil, nil
	}
	tests := []struct {
		name                            string
		opts                            []mcptest.Option
		resources, prompts, completions bool
	}{
		{"nothing", nil, false, false, false},
		{"resource", []mcptest.Option{mcptest.WithResource(mcpclient.Resource{URI: "a:"}, noContents)}, true, false, false},
		{"template", []mcptest.Option{mcptest.WithResourceTemplate(mcpclient.ResourceTemplate{URITemplate: "a:{x}"}, noContents)}, true, false, false},
		{"prompt", []mcptest.Option{mcptest.WithPrompt(mcpclient.Prompt{Name: "p"}, nil)}, false, true, false},
		{"completion", []mcptest.Option{mcptest.WithCompletion(complete)}, false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caps := initCaps(t, mcptest.NewTestServer(t, tt.opts...))
			if got := caps.Resources != nil && caps.Resources.Subscribe && caps.Resources.ListChanged; got != tt.resources {
				t.Errorf("resources %+v", caps.Resources)
			}
			if got := caps.Prompts != nil && caps.Prompts.ListChanged; got != tt.prompts {
				t.Errorf("prompts %+v", caps.Prompts)
			}
			if got := string(caps.Completions) == "{}"; got != tt.completions {
				t.Errorf("completions %s", caps.Completions)
			}
			if string(caps.Logging) != "{}" || caps.Tools == nil {
				t.Errorf("logging %s, tools %+v: always declared", caps.Logging, caps.Tools)
			}
		})
	}
}

func TestFeatureRequestsAreChecked(t *testing.T) {
	srv := mcptest.NewTestServer(t,
		mcptest.WithResource(mcpclient.Resource{URI: "mem://a", Name: "a"}, func(_ context.Context, uri string) ([]mcpclient.ResourceContents, error) {
			return []mcpclient.ResourceContents{{URI: uri, Text: "A"}}, nil
		}),
		mcptest.WithResource(mcpclient.Resource{URI: "mem://panics", Name: "p"}, func(context.Context, string) ([]mcpclient.ResourceContents, error) {
			panic("bad resource")
		}),
		mcptest.WithPrompt(mcpclient.Prompt{Name: "p", Arguments: []mcpclient.PromptArgument{{Name: "x", Required: true}}},
			func(_ context.Context, args map[string]string) (*mcpclient.GetPromptResult, error) {
				return &mcpclient.GetPromptResult{Description: "x=" + args["x"]}, nil
			}))
	r := dialRaw(t, srv)
	tests := []struct {
		frame string
		want  string // a substring of the answer
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"mem://a"}}`, `"result":{"contents":[{"uri":"mem://a","text":"A"}]}`},
		{`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"mem://b"}}`, `"error":{"code":-32002,"message":"Resource not found","data":{"uri":"mem://b"}}`},
		{`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{}}`, `"code":-32602`},
		{`{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"mem://panics"}}`, `"code":-32603,"message":"resource mem://panics panicked: bad resource"`},
		{`{"jsonrpc":"2.0","id":5,"method":"resources/subscribe","params":{}}`, `"code":-32602`},
		{`{"jsonrpc":"2.0","id":6,"method":"resources/subscribe","params":{"uri":"mem://a"}}`, `"result":{}`},
		{`{"jsonrpc":"2.0","id":7,"method":"prompts/get","params":{"name":"q"}}`, `"code":-32602,"message":"unknown prompt: q"`},
		{`{"jsonrpc":"2.0","id":8,"method":"prompts/get","params":{"name":"p"}}`, `"code":-32602`},
		{`{"jsonrpc":"2.0","id":9,"method":"prompts/get","params":{"name":"p","arguments":{"x":"1"}}}`, `"result":{"description":"x=1","messages":[]}`},
		{`{"jsonrpc":"2.0","id":10,"method":"completion/complete","params":{}}`, `"code":-32601`},
		{`{"jsonrpc":"2.0","id":11,"method":"logging/setLevel","params":{"level":"loud"}}`, `"code":-32602`},
		{`{"jsonrpc":"2.0","id":12,"method":"logging/setLevel","params":{"level":"error"}}`, `"result":{}`},
	}
	for _, tt := range tests {
		r.send(tt.frame)
		if got := r.recv(); !strings.Contains(got, tt.want) {
			t.Errorf("%s\nanswered %s\nwant %s", tt.frame, got, tt.want)
		}
	}
	infos := srv.SessionInfos()
	if len(infos) != 1 || infos[0].LogLevel != mcpclient.LevelError || len(infos[0].Subscriptions) != 1 || infos[0].ClientInfo.Name != "raw" {
		t.Errorf("session %+v", infos)
	}
}

func TestCompletionArguments(t *testing.T) {
	type call struct {
		ref         mcpclient.CompletionReference
		name, value string
		known       map[string]string
	}
	calls := make(chan call, 2)
	srv := mcptest.NewTestServer(t, mcptest.WithCompletion(func(_ context.Context, ref mcpclient.CompletionReference, name, value string, known map[string]string) (*mcpclient.Completion, error) {
		calls <- call{ref, name, value, known}
		return &mcpclient.Completion{Values: []string{value + "1"}}, nil
	}))
	r := dialRaw(t, srv)
	r.send(`{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"v"},"context":{"arguments":{"b":"x"}}}}`)
	if got := r.recv(); !strings.Contains(got, `"result":{"completion":{"values":["v1"]}}`) {
		t.Errorf("answered %s", got)
	}
	c := <-calls
	if c.ref.Type != "ref/prompt" || c.ref.Name != "p" || c.name != "a" || c.value != "v" || c.known["b"] != "x" {
		t.Errorf("the func got %+v", c)
	}
	r.send(`{"jsonrpc":"2.0","id":2,"method":"completion/complete","params":{"ref":{"type":"ref/tool","name":"p"},"argument":{"name":"a","value":"v"}}}`)
	if got := r.recv(); !strings.Contains(got, `"code":-32602`) {
		t.Errorf("a bad ref answered %s", got)
	}
}

func TestLogAndResourceUpdatedReachTheirSessions(t *testing.T) {
	srv := mcptest.NewTestServer(t)
	quiet, loud := dialRaw(t, srv), dialRaw(t, srv)
	quiet.send(`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"error"}}`)
	quiet.recv()
	quiet.send(`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"mem://x"}}`)
	quiet.recv()

	srv.Log(mcpclient.LevelInfo, "svc", map[string]string{"msg": "hi"})
	srv.ResourceUpdated("mem://x")
	srv.Log(mcpclient.LevelCritical, "", "boom")
	if err := srv.Log("loud", "", nil); err == nil {
		t.Error("Log took an unknown level")
	}

	if got := quiet.recv(); got != `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"mem://x"}}` {
		t.Errorf("quiet got %s first", got)
	}
	if got := quiet.recv(); got != `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"critical","data":"boom"}}` {
		t.Errorf("quiet got %s", got)
	}
	// A session that never set a level gets everything.
	if got := loud.recv(); got != `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"svc","data":{"msg":"hi"}}}` {
		t.Errorf("loud got %s", got)
	}
	if got := loud.recv(); !strings.Contains(got, `"level":"critical"`) {
		t.Errorf("loud got %s", got)
	}
}

// serverRequestTool asks the client method with its arguments as params and answers with what
// came back: the result, or the error (isError).
func serverRequestTool(method string) mcptest.ToolFunc {
	return func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		res, err := call.Request(ctx, method, json.RawMessage(call.Arguments))
		if err != nil {
			var rpc *mcpclient.RPCError
			if errors.As(err, &rpc) {
				return nil, errors.New("rpc " + rpc.Error())
			}
			return nil, err
		}
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(string(res))}}, nil
	}
}

func TestToolCallRequestInMemory(t *testing.T) {
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "ask"}, serverRequestTool("x/question")))
	r := dialRaw(t, srv)

	r.send(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"ask","arguments":{"q":1}}}`)
	req := decode(t, r.recv())
	if req.Method != "x/question" || string(req.Params) != `{"q":1}` || string(req.ID) != `"mcptest-1"` {
		t.Fatalf("server request %+v", req)
	}
	r.send(`{"jsonrpc":"2.0","id":"mcptest-1","result":{"a":2}}`)
	if got := r.recv(); !strings.Contains(got, `"text":"{\"a\":2}"`) {
		t.Errorf("the tool got %s", got)
	}

	r.send(`{"jsonrpc":"2.0","id":"c2","method":"tools/call","params":{"name":"ask","arguments":{}}}`)
	req = decode(t, r.recv())
	r.send(`{"jsonrpc":"2.0","id":"unknown","result":{}}`) // dropped
	r.send(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":{"code":-1,"message":"User rejected"}}`)
	if got := r.recv(); !strings.Contains(got, `"isError":true`) || !strings.Contains(got, `rpc jsonrpc error -1: User rejected`) {
		t.Errorf("an error answer gave %s", got)
	}

	// The client cancels the call: the request is cancelled in turn.
	r.send(`{"jsonrpc":"2.0","id":"c3","method":"tools/call","params":{"name":"ask","arguments":{}}}`)
	req = decode(t, r.recv())
	r.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c3"}}`)
	cancelled := decode(t, r.recv())
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason"`
	}
	json.Unmarshal(cancelled.Params, &p)
	if cancelled.Method != "notifications/cancelled" || string(p.RequestID) != string(req.ID) || p.Reason == "" {
		t.Errorf("after the cancellation the client got %+v", cancelled)
	}
	// The cancelled call gets no answer (TestNoAnswerToACancelledRequest makes sure of it).
	r.send(`{"jsonrpc":"2.0","id":"p1","method":"ping"}`)
	if got := r.recv(); !strings.Contains(got, `"id":"p1"`) {
		t.Errorf("after the cancellation the client got %s, want the answer to its ping", got)
	}
	if n := srv.NotificationsReceived("notifications/cancelled"); n != 1 {
		t.Errorf("%d notifications/cancelled recorded", n)
	}
	if n := srv.NotificationsReceived("notifications/initialized"); n != 1 {
		t.Errorf("%d notifications/initialized recorded", n)
	}
}

func TestToolCallProgressInMemory(t *testing.T) {
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "work"}, func(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		call.Progress(1, 2, "half")
		call.Progress(2, 0, "")
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(string(call.ProgressToken))}}, nil
	}))
	r := dialRaw(t, srv)
	r.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"work","_meta":{"progressToken":"tok"}}}`)
	for _, want := range []string{
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tok","progress":1,"total":2,"message":"half"}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tok","progress":2}}`,
	} {
		if got := r.recv(); got != want {
			t.Errorf("got %s\nwant %s", got, want)
		}
	}
	if got := r.recv(); !strings.Contains(got, `"text":"\"tok\""`) {
		t.Errorf("answer %s", got)
	}
	// Without a token, no reports.
	r.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"work"}}`)
	if got := r.recv(); !strings.Contains(got, `"id":2,"result"`) {
		t.Errorf("got %s, want the answer alone", got)
	}
}

func TestAwaitNotifications(t *testing.T) {
	srv := mcptest.NewTestServer(t)
	r := dialRaw(t, srv)
	done := make(chan error, 1)
	go func() { done <- srv.AwaitNotifications(context.Background(), "notifications/roots/list_changed", 2) }()
	r.send(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	r.send(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := srv.AwaitNotifications(ctx, "notifications/other", 1); !errors.Is(err, context.Canceled) {
		t.Errorf("AwaitNotifications with a dead context: %v", err)
	}
}

// httpRaw drives an HTTPServer by hand.
type httpRaw struct {
	t       *testing.T
	client  *http.Client
	url     string
	session string
}

func (h *httpRaw) post(body string) *http.Response {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if h.session != "" {
		req.Header.Set("Mcp-Session-Id", h.session)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func dialHTTPRaw(t *testing.T, srv *mcptest.HTTPServer) *httpRaw {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	h := &httpRaw{t: t, client: &http.Client{Transport: tr}, url: srv.URL}
	resp := h.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"raw","version":"0"}}}`)
	io.Copy(io.Discard, resp.Body)
	h.session = resp.Header.Get("Mcp-Session-Id")
	if h.session == "" {
		t.Fatal("no session id")
	}
	return h
}

// events reads the data of an SSE stream's events, skipping those without data.
func events(body io.Reader) <-chan string {
	ch := make(chan string, 16)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && data != "" {
				ch <- data
			}
		}
	}()
	return ch
}

func next(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
		return ""
	}
}

func TestToolCallRequestOverHTTP(t *testing.T) {
	tool := func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		call.Progress(1, 0, "asking")
		return serverRequestTool("sampling/createMessage")(ctx, call)
	}
	t.Run("sse: on the response stream", func(t *testing.T) {
		srv := mcptest.NewTestHTTPServer(t, mcptest.WithSSEResponses(0), mcptest.WithTool(mcpclient.Tool{Name: "ask"}, tool))
		h := dialHTTPRaw(t, srv)
		if caps := srv.SessionInfos()[0].ClientCapabilities; string(caps.Sampling) != "{}" {
			t.Errorf("capabilities %+v", caps)
		}
		resp := h.post(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"ask","arguments":{"n":1},"_meta":{"progressToken":7}}}`)
		evs := events(resp.Body)
		if got := next(t, evs); !strings.Contains(got, `"method":"notifications/progress","params":{"progressToken":7,"progress":1`) {
			t.Errorf("first event %s", got)
		}
		req := decode(t, next(t, evs))
		if req.Method != "sampling/createMessage" || string(req.Params) != `{"n":1}` {
			t.Fatalf("request %+v", req)
		}
		answer := h.post(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"ok":true}}`)
		if answer.StatusCode != http.StatusAccepted {
			t.Errorf("the answer's POST got %d", answer.StatusCode)
		}
		if got := next(t, evs); !strings.Contains(got, `"id":"c1","result"`) || !strings.Contains(got, `{\"ok\":true}`) {
			t.Errorf("answer %s", got)
		}
	})
	t.Run("json: on the GET stream", func(t *testing.T) {
		srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(mcpclient.Tool{Name: "ask"}, tool))
		h := dialHTTPRaw(t, srv)
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("Mcp-Session-Id", h.session)
		req.Header.Set("Accept", "text/event-stream")
		get, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer get.Body.Close()
		evs := events(get.Body)
		answered := make(chan *http.Response, 1)
		go func() {
			answered <- h.post(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"ask","arguments":{},"_meta":{"progressToken":"p"}}}`)
		}()
		if got := next(t, evs); !strings.Contains(got, `"progressToken":"p"`) {
			t.Errorf("first event %s", got)
		}
		sreq := decode(t, next(t, evs))
		h.post(`{"jsonrpc":"2.0","id":` + string(sreq.ID) + `,"error":{"code":-1,"message":"no"}}`)
		resp := <-answered
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), `rpc jsonrpc error -1: no`) {
			t.Errorf("answer %s", body)
		}
		// An answer on an unknown session is refused.
		h.session = "nope"
		if resp := h.post(`{"jsonrpc":"2.0","id":"mcptest-9","result":{}}`); resp.StatusCode != http.StatusNotFound {
			t.Errorf("an answer for an unknown session got %d", resp.StatusCode)
		}
	})
}

// TestMethodsAndExtensions: a method registered with WithMethod is answered with what its func
// returns, its RPCError passed through and other errors as internal errors; a built-in method
// keeps its handling; and the extensions declared with WithExtension are in the capabilities.
func TestMethodsAndExtensions(t *testing.T) {
	srv := mcptest.NewTestServer(t,
		mcptest.WithExtension("io.example/x", map[string]bool{"flag": true}),
		mcptest.WithExtension("io.example/none", nil),
		mcptest.WithMethod("x/echo", func(_ context.Context, params json.RawMessage) (any, error) {
			return map[string]json.RawMessage{"params": params}, nil
		}),
		mcptest.WithMethod("x/refuse", func(context.Context, json.RawMessage) (any, error) {
			return nil, &mcpclient.RPCError{Code: mcpclient.RPCInvalidParams, Message: "no such thing"}
		}),
		mcptest.WithMethod("x/fail", func(context.Context, json.RawMessage) (any, error) {
			return nil, errors.New("disk on fire")
		}),
		mcptest.WithMethod("x/panic", func(context.Context, json.RawMessage) (any, error) { panic("boom") }),
		mcptest.WithMethod("ping", func(context.Context, json.RawMessage) (any, error) {
			t.Error("the built-in ping was overridden")
			return nil, nil
		}))
	c := mcptest.NewClient(t, srv)
	ctx := context.Background()
	ext := c.ServerCapabilities().Extensions
	if _, optIn := ext[receipts.ExtensionID]; string(ext["io.example/x"]) != `{"flag":true}` || string(ext["io.example/none"]) != `{}` || !optIn || len(ext) != 3 {
		t.Errorf("extensions %s", ext)
	}
	do := func(method, params string) (string, error) {
		req, err := c.NewRequest(method, json.RawMessage(params))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(ctx, req)
		if err != nil {
			return "", err
		}
		return string(resp.Result), nil
	}
	if got, err := do("x/echo", `{"a":[1, 2]}`); err != nil || got != `{"params":{"a":[1,2]}}` {
		t.Errorf("x/echo: %s %v", got, err)
	}
	for method, code := range map[string]int64{"x/refuse": mcpclient.RPCInvalidParams, "x/fail": mcpclient.RPCInternalError,
		"x/panic": mcpclient.RPCInternalError, "x/unknown": mcpclient.RPCMethodNotFound} {
		_, err := do(method, `{}`)
		var rpc *mcpclient.RPCError
		if !errors.As(err, &rpc) || rpc.Code != code {
			t.Errorf("%s: %v, want JSON-RPC %d", method, err, code)
		}
	}
	if err := c.Ping(ctx); err != nil {
		t.Error(err)
	}
}
