package mcptest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/receipts"
)

const rev = mcpclient.ProtocolVersion20260728

// statelessServer is an HTTPServer that speaks the stateless revision beside the session ones.
func statelessServer(t *testing.T, opts ...mcptest.Option) *mcptest.HTTPServer {
	t.Helper()
	opts = append([]mcptest.Option{mcptest.WithProtocolVersions(rev, mcpclient.ProtocolVersion20251125)}, opts...)
	return mcptest.NewTestHTTPServer(t, opts...)
}

// meta is the _meta a request of the stateless revision carries, with extra keys merged in.
func meta(extra map[string]any) map[string]any {
	m := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    rev,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "t", "version": "1"},
	}
	for k, v := range extra {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	return m
}

// headersFor are the standard headers of a stateless request, with overrides ("" removes).
func headersFor(method, name string, over map[string]string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("Mcp-Protocol-Version", rev)
	h.Set("Mcp-Method", method)
	if name != "" {
		h.Set("Mcp-Name", name)
	}
	for k, v := range over {
		h.Del(k)
		if v != "" {
			h.Set(k, v)
		}
	}
	return h
}

type rpcReply struct {
	Status int
	Header http.Header
	// Frames are the JSON-RPC messages of the body: one for JSON, each event's for SSE.
	Frames []map[string]json.RawMessage
}

func (r rpcReply) last() map[string]json.RawMessage {
	if len(r.Frames) == 0 {
		return nil
	}
	return r.Frames[len(r.Frames)-1]
}

func (r rpcReply) errorCode() int64 {
	var e struct {
		Code int64 `json:"code"`
	}
	json.Unmarshal(r.last()["error"], &e)
	return e.Code
}

func (r rpcReply) result(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	var res map[string]json.RawMessage
	if err := json.Unmarshal(r.last()["result"], &res); err != nil {
		t.Fatalf("no result in %d reply %v", r.Status, r.Frames)
	}
	return res
}

func post(t *testing.T, url string, h http.Header, body any) rpcReply {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(string(raw)))
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := rpcReply{Status: resp.StatusCode, Header: resp.Header}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && data != "" {
				var f map[string]json.RawMessage
				if err := json.Unmarshal([]byte(data), &f); err != nil {
					t.Fatalf("event %q: %v", data, err)
				}
				r.Frames = append(r.Frames, f)
			}
		}
		return r
	}
	b, _ := io.ReadAll(resp.Body)
	var f map[string]json.RawMessage
	if json.Unmarshal(b, &f) == nil {
		r.Frames = append(r.Frames, f)
	}
	return r
}

func request(id any, method string, params map[string]any) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}
}

func TestStatelessDiscover(t *testing.T) {
	srv := statelessServer(t, mcptest.WithServerInfo(mcpclient.Implementation{Name: "srv", Version: "9"}))
	r := post(t, srv.URL, headersFor("server/discover", "", nil), request(1, "server/discover", map[string]any{"_meta": meta(nil)}))
	if r.Status != http.StatusOK {
		t.Fatalf("status %d", r.Status)
	}
	var res struct {
		ResultType        string   `json:"resultType"`
		SupportedVersions []string `json:"supportedVersions"`
		TTL               *int64   `json:"ttlMs"`
		CacheScope        string   `json:"cacheScope"`
		Capabilities      struct {
			Tools struct {
				ListChanged bool `json:"listChanged"`
			} `json:"tools"`
			Extensions map[string]mcpclient.RequestReceipts `json:"extensions"`
		} `json:"capabilities"`
		Meta map[string]mcpclient.Implementation `json:"_meta"`
	}
	if err := json.Unmarshal(r.last()["result"], &res); err != nil {
		t.Fatal(err)
	}
	if res.ResultType != "complete" || res.TTL == nil || *res.TTL != 0 || res.CacheScope != "private" {
		t.Errorf("resultType %q ttlMs %v cacheScope %q", res.ResultType, res.TTL, res.CacheScope)
	}
	if strings.Join(res.SupportedVersions, ",") != rev+","+mcpclient.ProtocolVersion20251125 {
		t.Errorf("supportedVersions %v", res.SupportedVersions)
	}
	if !res.Capabilities.Tools.ListChanged {
		t.Error("tools.listChanged not declared: listeners hear of tool changes")
	}
	decl, ok := res.Capabilities.Extensions[receipts.ExtensionID]
	if !ok || decl.Scope != mcpclient.ReceiptScopeProcess || decl.Epoch != srv.ReceiptEpoch() {
		t.Errorf("receipts extension %+v (declared %v), epoch %q", decl, ok, srv.ReceiptEpoch())
	}
	if got := res.Meta["io.modelcontextprotocol/serverInfo"]; got.Name != "srv" || got.Version != "9" {
		t.Errorf("serverInfo %+v", got)
	}
}

func TestStatelessRefusals(t *testing.T) {
	srv := statelessServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echoArgs))
	for _, c := range []struct {
		name   string
		method string
		params map[string]any
		over   map[string]string
		mcpNm  string
		status int
		code   int64
	}{
		{name: "missing _meta", method: "tools/list", params: map[string]any{}, status: 400, code: -32602},
		{name: "missing protocolVersion", method: "tools/list", params: map[string]any{"_meta": meta(map[string]any{"io.modelcontextprotocol/protocolVersion": nil})}, status: 400, code: -32602},
		{name: "missing clientCapabilities", method: "tools/list", params: map[string]any{"_meta": meta(map[string]any{"io.modelcontextprotocol/clientCapabilities": nil})}, status: 400, code: -32602},
		{name: "unknown logLevel", method: "tools/list", params: map[string]any{"_meta": meta(map[string]any{"io.modelcontextprotocol/logLevel": "loud"})}, status: 400, code: -32602},
		{name: "clientInfo optional", method: "tools/list", params: map[string]any{"_meta": meta(map[string]any{"io.modelcontextprotocol/clientInfo": nil})}, status: 200},
		{name: "unsupported revision", method: "tools/list", params: map[string]any{"_meta": meta(map[string]any{"io.modelcontextprotocol/protocolVersion": "2099-01-01"})}, over: map[string]string{"Mcp-Protocol-Version": "2099-01-01"}, status: 400, code: -32022},
		{name: "revision header differs", method: "tools/list", params: map[string]any{"_meta": meta(map[string]any{"io.modelcontextprotocol/protocolVersion": "2099-01-01"})}, status: 400, code: -32020},
		{name: "no revision header", method: "tools/list", params: map[string]any{"_meta": meta(nil)}, over: map[string]string{"Mcp-Protocol-Version": ""}, status: 400, code: -32020},
		{name: "no Mcp-Method", method: "tools/list", params: map[string]any{"_meta": meta(nil)}, over: map[string]string{"Mcp-Method": ""}, status: 400, code: -32020},
		{name: "other Mcp-Method", method: "tools/list", params: map[string]any{"_meta": meta(nil)}, over: map[string]string{"Mcp-Method": "prompts/list"}, status: 400, code: -32020},
		{name: "Mcp-Method case", method: "tools/list", params: map[string]any{"_meta": meta(nil)}, over: map[string]string{"Mcp-Method": "TOOLS/LIST"}, status: 400, code: -32020},
		{name: "Mcp-Method padded", method: "tools/list", params: map[string]any{"_meta": meta(nil)}, over: map[string]string{"Mcp-Method": "  tools/list "}, status: 200},
		{name: "no Mcp-Name", method: "tools/call", params: map[string]any{"name": "echo", "_meta": meta(nil)}, status: 400, code: -32020},
		{name: "other Mcp-Name", method: "tools/call", mcpNm: "other", params: map[string]any{"name": "echo", "_meta": meta(nil)}, status: 400, code: -32020},
		{name: "Mcp-Name padded", method: "tools/call", mcpNm: "  echo  ", params: map[string]any{"name": "echo", "_meta": meta(nil)}, status: 200},
		{name: "Mcp-Name in Base64", method: "tools/call", mcpNm: "=?base64?ZWNobw==?=", params: map[string]any{"name": "echo", "_meta": meta(nil)}, status: 200},
		{name: "initialize is gone", method: "initialize", params: map[string]any{"_meta": meta(nil)}, status: 404, code: -32601},
		{name: "ping is gone", method: "ping", params: map[string]any{"_meta": meta(nil)}, status: 404, code: -32601},
		{name: "logging/setLevel is gone", method: "logging/setLevel", params: map[string]any{"level": "info", "_meta": meta(nil)}, status: 404, code: -32601},
		{name: "resources/subscribe is gone", method: "resources/subscribe", params: map[string]any{"uri": "x:", "_meta": meta(nil)}, status: 404, code: -32601},
		{name: "unknown method", method: "unknown/method", params: map[string]any{"_meta": meta(nil)}, status: 404, code: -32601},
		{name: "undeclared prompts", method: "prompts/list", params: map[string]any{"_meta": meta(nil)}, status: 404, code: -32601},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := post(t, srv.URL, headersFor(c.method, c.mcpNm, c.over), request(77, c.method, c.params))
			if r.Status != c.status || r.errorCode() != c.code {
				t.Fatalf("status %d code %d, want %d %d: %s", r.Status, r.errorCode(), c.status, c.code, r.last()["error"])
			}
			if c.code != 0 && string(r.last()["id"]) != "77" {
				t.Errorf("error answer carries id %s, want the request's", r.last()["id"])
			}
		})
	}
	t.Run("unsupported revision lists the supported ones", func(t *testing.T) {
		r := post(t, srv.URL, headersFor("tools/list", "", map[string]string{"Mcp-Protocol-Version": "2099-01-01"}),
			request(1, "tools/list", map[string]any{"_meta": meta(map[string]any{"io.modelcontextprotocol/protocolVersion": "2099-01-01"})}))
		var e struct {
			Data struct {
				Supported []string `json:"supported"`
				Requested string   `json:"requested"`
			} `json:"data"`
		}
		json.Unmarshal(r.last()["error"], &e)
		if e.Data.Requested != "2099-01-01" || len(e.Data.Supported) != 2 || e.Data.Supported[0] != rev {
			t.Errorf("data %+v", e.Data)
		}
	})
}

func echoArgs(_ context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(string(c.Arguments))}}, nil
}

func TestStatelessParamHeaders(t *testing.T) {
	tool := mcpclient.Tool{Name: "reserve", InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)}
	srv := statelessServer(t, mcptest.WithTool(tool, echoArgs))
	for _, c := range []struct {
		header string
		status int
	}{
		{"Hello", 200},
		{"=?base64?SGVsbG8=?=", 200},
		{"", 400},
		{"hello", 400},
		{"=?base64?SGVsbG8?=", 400},
		{"=?base64?SGVs!!!bG8=?=", 400},
	} {
		r := post(t, srv.URL, headersFor("tools/call", "reserve", map[string]string{"Mcp-Param-Region": c.header}),
			request(1, "tools/call", map[string]any{"name": "reserve", "arguments": map[string]any{"region": "Hello"}, "_meta": meta(nil)}))
		if r.Status != c.status || (c.status == 400 && r.errorCode() != -32020) {
			t.Errorf("Mcp-Param-Region %q: status %d code %d, want %d", c.header, r.Status, r.errorCode(), c.status)
		}
	}
}

func TestStatelessResultTypeAndCacheHints(t *testing.T) {
	srv := statelessServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echoArgs), mcptest.WithCacheHints(90*time.Second, "public"),
		mcptest.WithResource(mcpclient.Resource{URI: "test://a", Name: "a"}, func(context.Context, string) ([]mcpclient.ResourceContents, error) {
			return []mcpclient.ResourceContents{{URI: "test://a", Text: "a"}}, nil
		}))
	for _, c := range []struct {
		method, name string
		params       map[string]any
		cached       bool
	}{
		{"tools/list", "", map[string]any{}, true},
		{"resources/list", "", map[string]any{}, true},
		{"resources/templates/list", "", map[string]any{}, true},
		{"resources/read", "test://a", map[string]any{"uri": "test://a"}, true},
		{"tools/call", "echo", map[string]any{"name": "echo"}, false},
	} {
		c.params["_meta"] = meta(nil)
		r := post(t, srv.URL, headersFor(c.method, c.name, nil), request(1, c.method, c.params))
		res := r.result(t)
		if string(res["resultType"]) != `"complete"` {
			t.Errorf("%s: resultType %s", c.method, res["resultType"])
		}
		_, hasTTL := res["ttlMs"]
		if c.cached && (string(res["ttlMs"]) != "90000" || string(res["cacheScope"]) != `"public"`) || !c.cached && hasTTL {
			t.Errorf("%s: ttlMs %s cacheScope %s", c.method, res["ttlMs"], res["cacheScope"])
		}
	}
	r := post(t, srv.URL, headersFor("resources/read", "test://none", nil), request(5, "resources/read", map[string]any{"uri": "test://none", "_meta": meta(nil)}))
	var e struct {
		Code int64             `json:"code"`
		Data map[string]string `json:"data"`
	}
	json.Unmarshal(r.last()["error"], &e)
	if e.Code != -32602 || e.Data["uri"] != "test://none" {
		t.Errorf("unknown resource: %s", r.last()["error"])
	}
}

func TestStatelessLogsOnlyWhenAsked(t *testing.T) {
	srv := statelessServer(t, mcptest.WithTool(mcpclient.Tool{Name: "chatty"}, func(_ context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		c.Log(mcpclient.LevelDebug, "t", "debug record")
		c.Log(mcpclient.LevelWarning, "t", "warning record")
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("done")}}, nil
	}))
	for _, c := range []struct {
		level string // "" asks for none
		want  int
	}{{"", 0}, {"debug", 2}, {"warning", 1}, {"error", 0}} {
		m := meta(nil)
		if c.level != "" {
			m["io.modelcontextprotocol/logLevel"] = c.level
		}
		r := post(t, srv.URL, headersFor("tools/call", "chatty", nil), request(1, "tools/call", map[string]any{"name": "chatty", "_meta": m}))
		logs := 0
		for _, f := range r.Frames {
			if string(f["method"]) == `"notifications/message"` {
				logs++
			}
		}
		if logs != c.want || r.last()["result"] == nil {
			t.Errorf("logLevel %q: %d log records, want %d; frames %v", c.level, logs, c.want, r.Frames)
		}
	}
}

func TestStatelessReceiptsOnlyForRequestsThatOptIn(t *testing.T) {
	var runs atomic.Int32
	srv := statelessServer(t, mcptest.WithTool(mcpclient.Tool{Name: "charge"}, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(fmt.Sprint(runs.Add(1)))}}, nil
	}))
	optIn := meta(map[string]any{"io.modelcontextprotocol/clientCapabilities": map[string]any{
		"extensions": map[string]any{receipts.ExtensionID: map[string]any{}}}})
	call := func(id string, m map[string]any, args map[string]any) rpcReply {
		return post(t, srv.URL, headersFor("tools/call", "charge", nil), request(id, "tools/call", map[string]any{"name": "charge", "arguments": args, "_meta": m}))
	}
	call("plain", meta(nil), nil)
	call("plain", meta(nil), nil)
	if got := srv.Executions("charge"); got != 2 {
		t.Fatalf("a request that did not opt in ran %d times for two sends, want 2: ids are reused", got)
	}
	first, again := call("opted", optIn, nil), call("opted", optIn, nil)
	if got := srv.Executions("charge"); got != 3 {
		t.Fatalf("an opted-in request ran %d times in all, want once more", got)
	}
	if !sameAnswer(string(again.last()["result"]), string(first.last()["result"])) {
		t.Errorf("resend answered %s, the first %s", again.last()["result"], first.last()["result"])
	}
	reused := call("opted", optIn, map[string]any{"x": 1})
	if reused.errorCode() != mcpclient.RPCInvalidRequest || !strings.Contains(string(reused.last()["error"]), receipts.CodeIDReused) {
		t.Errorf("other content under an opted-in id: %s", reused.last()["error"])
	}
}

func TestStatelessListen(t *testing.T) {
	srv := statelessServer(t,
		mcptest.WithPrompt(mcpclient.Prompt{Name: "p"}, nil),
		mcptest.WithResource(mcpclient.Resource{URI: "test://r", Name: "r"}, nil))
	type stream struct {
		frames chan map[string]json.RawMessage
		cancel context.CancelFunc
	}
	open := func(id int, filter map[string]any) stream {
		body, _ := json.Marshal(request(id, "subscriptions/listen", map[string]any{"_meta": meta(nil), "notifications": filter}))
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(string(body)))
		req.Header = headersFor("subscriptions/listen", "", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		s := stream{frames: make(chan map[string]json.RawMessage, 16), cancel: cancel}
		go func() {
			defer resp.Body.Close()
			defer close(s.frames)
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					var f map[string]json.RawMessage
					json.Unmarshal([]byte(data), &f)
					s.frames <- f
				}
			}
		}()
		t.Cleanup(cancel)
		return s
	}
	next := func(s stream) map[string]json.RawMessage {
		t.Helper()
		select {
		case f := <-s.frames:
			return f
		case <-time.After(5 * time.Second):
			t.Fatal("no frame on the listen stream")
			return nil
		}
	}
	tools := open(1, map[string]any{"toolsListChanged": true, "resourceSubscriptions": []string{"test://r"}})
	prompts := open(2, map[string]any{"promptsListChanged": true})
	ack := next(tools)
	if string(ack["method"]) != `"notifications/subscriptions/acknowledged"` || !strings.Contains(string(ack["params"]), `"io.modelcontextprotocol/subscriptionId":1`) ||
		!strings.Contains(string(ack["params"]), `"toolsListChanged":true`) {
		t.Fatalf("first frame %v", ack)
	}
	next(prompts)

	srv.AddTool(mcpclient.Tool{Name: "late"}, echoArgs)
	srv.ResourceUpdated("test://other")
	srv.ResourceUpdated("test://r")
	srv.PromptListChanged()
	if f := next(tools); string(f["method"]) != `"notifications/tools/list_changed"` || !strings.Contains(string(f["params"]), `"io.modelcontextprotocol/subscriptionId":1`) {
		t.Errorf("tools listener got %v", f)
	}
	if f := next(tools); string(f["method"]) != `"notifications/resources/updated"` || !strings.Contains(string(f["params"]), `"uri":"test://r"`) {
		t.Errorf("tools listener got %v, want the update of the resource it asked for", f)
	}
	if f := next(prompts); string(f["method"]) != `"notifications/prompts/list_changed"` || !strings.Contains(string(f["params"]), `"io.modelcontextprotocol/subscriptionId":2`) {
		t.Errorf("prompts listener got %v, want only the prompt change", f)
	}

	srv.Close()
	end := next(tools)
	if string(end["id"]) != "1" || !strings.Contains(string(end["result"]), `"resultType":"complete"`) {
		t.Errorf("a closing server ends the subscription with %v", end)
	}
}

func TestLoopbackServerRefusesOtherHosts(t *testing.T) {
	srv := mcptest.NewTestHTTPServer(t)
	allowing := mcptest.NewTestHTTPServer(t, mcptest.WithAllowedHosts("mcp.example.test"))
	init := request(1, "initialize", map[string]any{"protocolVersion": mcpclient.ProtocolVersion20251125, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}})
	for _, c := range []struct {
		name         string
		srv          *mcptest.HTTPServer
		host, origin string
		status       int
	}{
		{"rebound host", srv, "evil.example.com", "", http.StatusForbidden},
		{"rebound origin", srv, "", "http://evil.example.com", http.StatusForbidden},
		{"localhost", srv, "localhost", "http://localhost:3000", http.StatusOK},
		{"IPv6 loopback", srv, "[::1]:8080", "", http.StatusOK},
		{"allowed name", allowing, "mcp.example.test:443", "", http.StatusOK},
		{"other name", allowing, "other.example.test", "", http.StatusForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			body, _ := json.Marshal(init)
			req, _ := http.NewRequest(http.MethodPost, c.srv.URL, strings.NewReader(string(body)))
			req.Header = headersFor("initialize", "", map[string]string{"Mcp-Protocol-Version": "", "Mcp-Method": "", "Origin": c.origin})
			if c.host != "" {
				req.Host = c.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Errorf("status %d, want %d", resp.StatusCode, c.status)
			}
		})
	}
}

func TestSessionRevisionsBesideTheStatelessOne(t *testing.T) {
	srv := statelessServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echoArgs))
	c := mcptest.NewClient(t, srv, mcpclient.WithProtocolVersion(mcpclient.ProtocolVersion20251125))
	if got := c.ProtocolVersion(); got != mcpclient.ProtocolVersion20251125 {
		t.Fatalf("negotiated %s", got)
	}
	if _, err := c.CallTool(context.Background(), "echo", nil); err != nil {
		t.Fatal(err)
	}
	if srv.Sessions() != 1 {
		t.Errorf("%d sessions, want the one initialize opened", srv.Sessions())
	}
}

// TestStatelessDisconnectCancelsUnlessOptedIntoReceipts: closing the response stream is how a
// client of the stateless revisions cancels; a request that opted into receipts runs on, for a
// resend of its id to collect.
func TestStatelessDisconnectCancelsUnlessOptedIntoReceipts(t *testing.T) {
	for _, optIn := range []bool{false, true} {
		t.Run(fmt.Sprint("optIn=", optIn), func(t *testing.T) {
			started := make(chan struct{}, 1)
			ended := make(chan error, 1)
			release := make(chan struct{})
			srv := statelessServer(t, mcptest.WithTool(mcpclient.Tool{Name: "wait"}, func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
				started <- struct{}{}
				select {
				case <-ctx.Done():
					ended <- ctx.Err()
				case <-release:
					ended <- nil
				}
				return &mcpclient.CallToolResult{}, nil
			}))
			defer close(release)
			m := meta(nil)
			if optIn {
				m = meta(map[string]any{"io.modelcontextprotocol/clientCapabilities": map[string]any{
					"extensions": map[string]any{receipts.ExtensionID: map[string]any{}}}})
			}
			body, _ := json.Marshal(request("c1", "tools/call", map[string]any{"name": "wait", "_meta": m}))
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(string(body)))
			req.Header = headersFor("tools/call", "wait", nil)
			done := make(chan struct{})
			go func() {
				defer close(done)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
			<-started
			cancel()
			<-done
			select {
			case err := <-ended:
				if optIn {
					t.Fatalf("an opted-in request was cancelled by the disconnect: %v", err)
				}
			case <-time.After(200 * time.Millisecond):
				if !optIn {
					t.Fatal("the disconnect did not cancel the request")
				}
			}
		})
	}
}

// TestStatelessSSEKeepsTheErrorStatus: a server answering with SSE opens a stream only when it
// has something to send, so a request refused while it runs still gets its HTTP status.
func TestStatelessSSEKeepsTheErrorStatus(t *testing.T) {
	srv := statelessServer(t, mcptest.WithSSEResponses(time.Millisecond),
		mcptest.WithTool(mcpclient.Tool{Name: "ask"}, func(ctx context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			_, err := c.Request(ctx, "sampling/createMessage", map[string]any{"messages": []any{}, "maxTokens": 1})
			return nil, err
		}),
		mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echoArgs))
	r := post(t, srv.URL, headersFor("tools/call", "ask", nil), request(1, "tools/call", map[string]any{"name": "ask", "_meta": meta(nil)}))
	if r.Status != http.StatusBadRequest || r.errorCode() != -32021 {
		t.Errorf("a capability the request lacks: status %d code %d, want 400 -32021", r.Status, r.errorCode())
	}
	r = post(t, srv.URL, headersFor("tools/call", "echo", nil), request(2, "tools/call", map[string]any{"name": "echo", "_meta": meta(nil)}))
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") || r.last()["result"] == nil {
		t.Errorf("an answer: status %d, %s, %v; want it on an SSE stream", r.Status, r.Header.Get("Content-Type"), r.Frames)
	}
}
