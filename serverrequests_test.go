package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/receipts"
)

func TestFeaturesSampling(t *testing.T) {
	t.Parallel()
	featEach(t, func(t *testing.T, b featBackend) {
		if b.stateless() {
			t.Skip("a handler's error cannot travel back in the stateless revisions, whose input responses are results only: the client fails the call (TestStatelessInputRoundsAgainstMCPTest covers the rounds)")
		}
		_, d := b.start(t, mcptest.WithTool(featAskTool, featAsk))
		var mu sync.Mutex
		var seen []*mcpclient.CreateMessageParams
		c := mcptest.NewClient(t, d, mcpclient.WithSamplingHandler(func(_ context.Context, p *mcpclient.CreateMessageParams) (*mcpclient.CreateMessageResult, error) {
			mu.Lock()
			seen = append(seen, p)
			mu.Unlock()
			switch text := p.Messages[0].Content[0].Text; text {
			case "fail":
				return nil, errors.New("the model is down")
			case "refuse":
				return nil, &mcpclient.RPCError{Code: -1, Message: "User rejected sampling request"}
			case "panic":
				panic("handler bug")
			default:
				return &mcpclient.CreateMessageResult{Role: "assistant", Model: "test-model", StopReason: "endTurn",
					Content: mcpclient.SamplingContent{mcpclient.TextContent("echo: " + text)}}, nil
			}
		}))
		ask := func(text string) map[string]any {
			return map[string]any{
				"messages":     []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": text}}},
				"systemPrompt": "be brief",
				"maxTokens":    64,
			}
		}

		res, rpc := featAskClient(t, c, "sampling/createMessage", ask("hello"))
		if rpc != nil {
			t.Fatalf("sampling failed: %v", rpc)
		}
		var msg mcpclient.CreateMessageResult
		if err := json.Unmarshal(res, &msg); err != nil {
			t.Fatal(err)
		}
		if msg.Role != "assistant" || msg.Model != "test-model" || msg.StopReason != "endTurn" ||
			len(msg.Content) != 1 || msg.Content[0].Text != "echo: hello" {
			t.Errorf("sampling result %s", res)
		}
		// A single content block travels as an object, as 2025-06-18 servers expect.
		if !strings.Contains(string(res), `"content":{"type":"text"`) {
			t.Errorf("content not sent as one object: %s", res)
		}
		mu.Lock()
		if p := seen[0]; p.MaxTokens != 64 || p.SystemPrompt != "be brief" || p.Messages[0].Role != "user" {
			t.Errorf("the handler saw %+v", p)
		}
		mu.Unlock()

		for _, tc := range []struct {
			text string
			code int64
			msg  string
		}{
			{"fail", mcpclient.RPCInternalError, "the model is down"},
			{"refuse", -1, "User rejected sampling request"},
			{"panic", mcpclient.RPCInternalError, ""},
		} {
			_, rpc := featAskClient(t, c, "sampling/createMessage", ask(tc.text))
			if rpc == nil || rpc.Code != tc.code || !strings.Contains(rpc.Message, tc.msg) {
				t.Errorf("%s: error %v, want %d %q", tc.text, rpc, tc.code, tc.msg)
			}
		}
		// After a panicking handler the client keeps working, and so does its handler.
		if err := c.Ping(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		if _, rpc := featAskClient(t, c, "sampling/createMessage", ask("again")); rpc != nil {
			t.Errorf("sampling after a panic: %v", rpc)
		}
		// Malformed params are the server's mistake.
		_, rpc = featAskClient(t, c, "sampling/createMessage", map[string]any{"messages": "nope"})
		if rpc == nil || rpc.Code != mcpclient.RPCInvalidParams {
			t.Errorf("malformed params: %v, want -32602", rpc)
		}
	})
}

// featElicitSchema gives a default to one property of each kind, and none to email.
const featElicitSchema = `{"type":"object","properties":{
	"name":{"type":"string","default":"anonymous"},
	"age":{"type":"integer","default":42},
	"ratio":{"type":"number","default":0.5},
	"color":{"type":"string","enum":["red","green"],"default":"green"},
	"subscribe":{"type":"boolean","default":true},
	"email":{"type":"string"}
},"required":["email"]}`

func TestFeaturesElicitation(t *testing.T) {
	t.Parallel()
	featEach(t, func(t *testing.T, b featBackend) {
		if b.stateless() {
			t.Skip("the stateless revisions refuse with -32021 an elicitation mode the request's capabilities lack, and a handler's error cannot travel back: TestStatelessInputRoundsAgainstMCPTest and mcptest's input tests cover them")
		}
		_, d := b.start(t, mcptest.WithTool(featAskTool, featAsk))
		seen := make(chan *mcpclient.ElicitParams, 8)
		c := mcptest.NewClient(t, d, mcpclient.WithElicitationHandler(func(_ context.Context, p *mcpclient.ElicitParams) (*mcpclient.ElicitResult, error) {
			seen <- p
			switch {
			case p.Mode == mcpclient.ElicitModeURL:
				return &mcpclient.ElicitResult{Action: mcpclient.ElicitAccept}, nil
			case p.Message == "decline":
				return &mcpclient.ElicitResult{Action: mcpclient.ElicitDecline}, nil
			case p.Message == "cancel":
				return &mcpclient.ElicitResult{Action: mcpclient.ElicitCancel}, nil
			case p.Message == "all":
				return &mcpclient.ElicitResult{Action: mcpclient.ElicitAccept, Content: map[string]any{
					"name": "Ada", "age": 36, "ratio": 1.5, "color": "red", "subscribe": false, "email": "ada@example.com"}}, nil
			}
			return &mcpclient.ElicitResult{Action: mcpclient.ElicitAccept, Content: map[string]any{"name": "Ada", "email": "ada@example.com"}}, nil
		}))
		form := func(message string) map[string]any {
			return map[string]any{"message": message, "requestedSchema": json.RawMessage(featElicitSchema)}
		}
		type result struct {
			Action  string         `json:"action"`
			Content map[string]any `json:"content"`
		}
		elicit := func(params any) result {
			t.Helper()
			raw, rpc := featAskClient(t, c, "elicitation/create", params)
			if rpc != nil {
				t.Fatalf("elicitation failed: %v", rpc)
			}
			var r result
			if err := json.Unmarshal(raw, &r); err != nil {
				t.Fatal(err)
			}
			return r
		}

		// SEP-1034: the fields the user left out take the schema's defaults, with their JSON
		// types; fields without a default stay out.
		got := elicit(form("partial"))
		want := map[string]any{"name": "Ada", "email": "ada@example.com", "age": 42.0, "ratio": 0.5, "color": "green", "subscribe": true}
		if got.Action != "accept" || !reflect.DeepEqual(got.Content, want) {
			t.Errorf("partial form: %+v, want accept with %v", got, want)
		}
		if p := recv(t, seen, "the form request"); p.Message != "partial" || !strings.Contains(string(p.RequestedSchema), `"default":42`) {
			t.Errorf("the handler saw %+v", p)
		}
		// What the user gave is kept, falsy values included.
		got = elicit(form("all"))
		want = map[string]any{"name": "Ada", "email": "ada@example.com", "age": 36.0, "ratio": 1.5, "color": "red", "subscribe": false}
		if !reflect.DeepEqual(got.Content, want) {
			t.Errorf("full form: %v, want %v", got.Content, want)
		}
		recv(t, seen, "the full form request")

		for _, action := range []string{"decline", "cancel"} {
			got := elicit(form(action))
			if got.Action != action || got.Content != nil {
				t.Errorf("%s: %+v, want the action and no content", action, got)
			}
			recv(t, seen, "the "+action+" request")
		}

		// A form handler declares form mode only: a URL-mode request, or one in a mode of no
		// revision, is refused before it reaches the handler.
		for _, mode := range []string{"url", "telepathy"} {
			_, rpc := featAskClient(t, c, "elicitation/create",
				map[string]any{"mode": mode, "message": "sign in", "url": "https://example.com/auth?x=1", "elicitationId": "el-7"})
			if rpc == nil || rpc.Code != mcpclient.RPCInvalidParams {
				t.Errorf("%s mode without a handler for it: %v, want -32602", mode, rpc)
			}
		}
		select {
		case p := <-seen:
			t.Errorf("the form handler saw %+v", p)
		default:
		}
	})
}

// TestFeaturesURLElicitation: a URL-mode elicitation reaches the URL handler, parsed and with
// its host, only when a person can be sent to its URL safely: https, or http to this machine,
// with a host and without userinfo. Any other URL is refused as invalid params and never
// reaches the handler.
func TestFeaturesURLElicitation(t *testing.T) {
	t.Parallel()
	featEach(t, func(t *testing.T, b featBackend) {
		if b.stateless() {
			t.Skip("a handler's error cannot travel back in the stateless revisions, whose input responses are results only")
		}
		_, d := b.start(t, mcptest.WithTool(featAskTool, featAsk))
		seen := make(chan *mcpclient.URLElicitParams, 16)
		c := mcptest.NewClient(t, d, mcpclient.WithURLElicitationHandler(func(_ context.Context, p *mcpclient.URLElicitParams) (*mcpclient.ElicitResult, error) {
			seen <- p
			// Content has no place in a URL-mode answer: the client leaves it out.
			return &mcpclient.ElicitResult{Action: mcpclient.ElicitAccept, Content: map[string]any{"leak": "x"}}, nil
		}))
		ask := func(params map[string]any) (json.RawMessage, *mcpclient.RPCError) {
			t.Helper()
			return featAskClient(t, c, "elicitation/create", params)
		}
		urlRequest := func(u string) map[string]any {
			return map[string]any{"mode": "url", "message": "sign in", "url": u, "elicitationId": "el-7"}
		}

		for _, tc := range []struct{ url, want, host string }{
			{"https://example.com/auth?x=1", "https://example.com/auth?x=1", "example.com"},
			{"HTTPS://Accounts.Example.com:8443/a", "https://Accounts.Example.com:8443/a", "Accounts.Example.com"},
			{"http://localhost:3000/callback", "http://localhost:3000/callback", "localhost"},
			{"http://127.8.9.10/cb", "http://127.8.9.10/cb", "127.8.9.10"},
			{"http://[::1]:8080/cb", "http://[::1]:8080/cb", "::1"},
			{"https://xn--exmple-cua.example/", "https://xn--exmple-cua.example/", "xn--exmple-cua.example"},
		} {
			raw, rpc := ask(urlRequest(tc.url))
			if rpc != nil || string(raw) != `{"action":"accept"}` {
				t.Errorf("%s: %s, %v; want accept without content", tc.url, raw, rpc)
				continue
			}
			p := recv(t, seen, "the request for "+tc.url)
			if p.URL == nil || p.URL.String() != tc.want || p.Host != tc.host || p.Message != "sign in" || p.ElicitationID != "el-7" {
				t.Errorf("%s: the handler saw %+v, want URL %s and host %s", tc.url, p, tc.want, tc.host)
			}
		}

		for _, bad := range []string{
			"javascript:alert(document.cookie)",
			"file:///etc/passwd",
			"data:text/html,<script>alert(1)</script>",
			"ftp://example.com/",
			"https://accounts.example@evil.example/",
			"https://user:secret@evil.example/",
			"https://@evil.example/",
			"http://example.com/login",
			"http://localhost.evil.example/",
			"http://127.0.0.1.evil.example/",
			"https://\u0435xample.com/", // a Cyrillic е
			"https://ex%C3%A4mple.example/",
			"https:///no-host",
			"https:example.com",
			"//example.com/x",
			"https://exa mple.com/",
			"https://example.com/%zz",
			" https://example.com/",
			"",
		} {
			if _, rpc := ask(urlRequest(bad)); rpc == nil || rpc.Code != mcpclient.RPCInvalidParams {
				t.Errorf("%q: %v, want -32602", bad, rpc)
			}
		}
		if _, rpc := ask(map[string]any{"mode": "url", "message": "no url", "elicitationId": "el-8"}); rpc == nil || rpc.Code != mcpclient.RPCInvalidParams {
			t.Errorf("no url: %v, want -32602", rpc)
		}
		// A URL handler alone declares URL mode only.
		if _, rpc := ask(map[string]any{"message": "a form", "requestedSchema": json.RawMessage(`{"type":"object"}`)}); rpc == nil || rpc.Code != mcpclient.RPCInvalidParams {
			t.Errorf("form mode without a form handler: %v, want -32602", rpc)
		}
		select {
		case p := <-seen:
			t.Errorf("a refused request reached the handler: %+v", p)
		default:
		}
	})
}

func TestFeaturesElicitationHandlerErrors(t *testing.T) {
	srv := mcptest.NewTestServer(t, mcptest.WithTool(featAskTool, featAsk))
	c := mcptest.NewClient(t, srv, mcpclient.WithElicitationHandler(func(_ context.Context, p *mcpclient.ElicitParams) (*mcpclient.ElicitResult, error) {
		if p.Message == "nil" {
			return nil, nil
		}
		return nil, errors.New("no user at the keyboard")
	}))
	for msg, want := range map[string]string{"nil": "no result", "err": "no user at the keyboard"} {
		_, rpc := featAskClient(t, c, "elicitation/create", map[string]any{"message": msg, "requestedSchema": json.RawMessage(`{"type":"object"}`)})
		if rpc == nil || rpc.Code != mcpclient.RPCInternalError || !strings.Contains(rpc.Message, want) {
			t.Errorf("%s: %v, want -32603 with %q", msg, rpc, want)
		}
	}
}

func TestFeaturesRoots(t *testing.T) {
	t.Parallel()
	featEach(t, func(t *testing.T, b featBackend) {
		srv, d := b.start(t, mcptest.WithTool(featAskTool, featAsk))
		c := mcptest.NewClient(t, d, mcpclient.WithRoots(mcpclient.Root{URI: "file:///work", Name: "work"}))
		type roots struct {
			Roots []mcpclient.Root `json:"roots"`
		}
		list := func() []mcpclient.Root {
			t.Helper()
			raw, rpc := featAskClient(t, c, "roots/list", nil)
			if rpc != nil {
				t.Fatalf("roots/list: %v", rpc)
			}
			var r roots
			if err := json.Unmarshal(raw, &r); err != nil {
				t.Fatal(err)
			}
			return r.Roots
		}
		if got := list(); len(got) != 1 || got[0].URI != "file:///work" || got[0].Name != "work" {
			t.Errorf("roots %+v", got)
		}

		if err := c.SetRoots(testCtx(t), mcpclient.Root{URI: "file:///a"}, mcpclient.Root{URI: "file:///b", Name: "b"}); err != nil {
			t.Fatal(err)
		}
		// A stateless client has no session to tell: the next round asks afresh.
		if !b.stateless() {
			if err := srv.AwaitNotifications(testCtx(t), "notifications/roots/list_changed", 1); err != nil {
				t.Fatal(err)
			}
		}
		got := list()
		if len(got) != 2 || got[0].URI != "file:///a" || got[1].URI != "file:///b" || got[1].Name != "b" {
			t.Errorf("roots after SetRoots %+v", got)
		}
		// An empty list is a list.
		if err := c.SetRoots(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		raw, _ := featAskClient(t, c, "roots/list", nil)
		if string(raw) != `{"roots":[]}` {
			t.Errorf("no roots answered %s", raw)
		}
	})
}

func TestFeaturesSetRootsWithoutCapability(t *testing.T) {
	srv := mcptest.NewTestServer(t, mcptest.WithTool(featAskTool, featAsk))
	c := mcptest.NewClient(t, srv, mcpclient.WithRequestHandler("x/listen", func(context.Context, json.RawMessage) (any, error) { return struct{}{}, nil }))
	err := c.SetRoots(testCtx(t), mcpclient.Root{URI: "file:///x"})
	if mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument {
		t.Errorf("SetRoots without WithRoots: %v, want CodeInvalidArgument", err)
	}
	asError(t, err)
	if _, rpc := featAskClient(t, c, "roots/list", nil); rpc == nil || rpc.Code != mcpclient.RPCMethodNotFound {
		t.Errorf("roots/list without WithRoots: %v, want -32601", rpc)
	}
	if n := srv.NotificationsReceived("notifications/roots/list_changed"); n != 0 {
		t.Errorf("%d list_changed sent", n)
	}
}

func TestFeaturesCustomServerRequests(t *testing.T) {
	t.Parallel()
	featEach(t, func(t *testing.T, b featBackend) {
		if b.stateless() {
			t.Skip("the stateless revisions ask for input only with sampling, elicitation and roots: there are no custom server requests")
		}
		_, d := b.start(t, mcptest.WithTool(featAskTool, featAsk))
		c := mcptest.NewClient(t, d,
			mcpclient.WithRequestHandler("x/echo", func(_ context.Context, params json.RawMessage) (any, error) {
				return map[string]json.RawMessage{"echo": params}, nil
			}),
			mcpclient.WithRequestHandler("x/array", func(context.Context, json.RawMessage) (any, error) {
				return []int{1}, nil // not an object
			}),
			// A typed option wins over WithRequestHandler for its method.
			mcpclient.WithRequestHandler("roots/list", func(context.Context, json.RawMessage) (any, error) {
				return map[string]string{"from": "generic"}, nil
			}),
			mcpclient.WithRoots())

		raw, rpc := featAskClient(t, c, "x/echo", map[string]int{"n": 7})
		if rpc != nil || string(raw) != `{"echo":{"n":7}}` {
			t.Errorf("x/echo: %s, %v", raw, rpc)
		}
		if _, rpc := featAskClient(t, c, "x/array", nil); rpc == nil || rpc.Code != mcpclient.RPCInternalError {
			t.Errorf("a handler answering no object: %v, want -32603", rpc)
		}
		if raw, rpc := featAskClient(t, c, "roots/list", nil); rpc != nil || string(raw) != `{"roots":[]}` {
			t.Errorf("roots/list: %s, %v; want the typed answer", raw, rpc)
		}
		for _, method := range []string{"x/unknown", "sampling/createMessage", "elicitation/create"} {
			if _, rpc := featAskClient(t, c, method, nil); rpc == nil || rpc.Code != mcpclient.RPCMethodNotFound {
				t.Errorf("%s: %v, want -32601", method, rpc)
			}
		}
		if raw, rpc := featAskClient(t, c, "ping", nil); rpc != nil || string(raw) != "{}" {
			t.Errorf("ping: %s, %v", raw, rpc)
		}
	})
}

// TestFeaturesServerCancelsItsRequest has the server give up on a sampling request: the client's
// handler sees its context end.
func TestFeaturesServerCancelsItsRequest(t *testing.T) {
	t.Parallel()
	featEach(t, func(t *testing.T, b featBackend) {
		if b.stateless() {
			t.Skip("a stateless server cancels nothing it asked: it simply never reads the answer of a round it abandons")
		}
		handling := make(chan struct{})
		handlerDone := make(chan error, 1)
		toolErr := make(chan error, 1)
		_, d := b.start(t, mcptest.WithTool(mcpclient.Tool{Name: "impatient"}, func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			ctx, cancel := context.WithCancel(ctx)
			go func() {
				<-handling
				cancel()
			}()
			_, err := call.Request(ctx, "sampling/createMessage", map[string]any{"messages": []any{}, "maxTokens": 1})
			toolErr <- err
			return featText("gave up"), nil
		}))
		c := mcptest.NewClient(t, d, mcpclient.WithSamplingHandler(func(ctx context.Context, _ *mcpclient.CreateMessageParams) (*mcpclient.CreateMessageResult, error) {
			close(handling)
			<-ctx.Done()
			handlerDone <- ctx.Err()
			return nil, ctx.Err()
		}))
		res, err := c.CallTool(testCtx(t), "impatient", nil)
		if err != nil || res.Text() != "gave up" {
			t.Fatalf("got %+v, %v", res, err)
		}
		if err := recv(t, toolErr, "the tool's request to end"); !errors.Is(err, context.Canceled) {
			t.Errorf("Request returned %v, want context.Canceled", err)
		}
		if err := recv(t, handlerDone, "the handler's context to end"); !errors.Is(err, context.Canceled) {
			t.Errorf("the handler's context ended with %v", err)
		}
		if err := c.Ping(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestFeaturesClientCapabilities(t *testing.T) {
	t.Parallel()
	noop := func(context.Context, json.RawMessage) (any, error) { return struct{}{}, nil }
	tests := []struct {
		name string
		opts []mcpclient.Option
		want string // the capabilities as the server received them
	}{
		{"none", nil, `{}`},
		{"roots", []mcpclient.Option{mcpclient.WithRoots()}, `{"roots":{"listChanged":true}}`},
		{"sampling", []mcpclient.Option{mcpclient.WithSamplingHandler(func(context.Context, *mcpclient.CreateMessageParams) (*mcpclient.CreateMessageResult, error) {
			return nil, nil
		})}, `{"sampling":{}}`},
		{"elicitation", []mcpclient.Option{mcpclient.WithElicitationHandler(func(context.Context, *mcpclient.ElicitParams) (*mcpclient.ElicitResult, error) {
			return nil, nil
		})}, `{"elicitation":{"form":{}}}`},
		{"url elicitation", []mcpclient.Option{mcpclient.WithURLElicitationHandler(func(context.Context, *mcpclient.URLElicitParams) (*mcpclient.ElicitResult, error) {
			return nil, nil
		})}, `{"elicitation":{"url":{}}}`},
		{"handlers declare nothing", []mcpclient.Option{
			mcpclient.WithRequestHandler("x/y", noop),
			mcpclient.WithLogHandler(func(context.Context, *mcpclient.LogMessage) {}),
			mcpclient.WithResourceUpdatedHandler(func(context.Context, string) {}),
		}, `{}`},
		{"extensions", []mcpclient.Option{
			mcpclient.WithExtension("io.modelcontextprotocol/skills", nil),
			mcpclient.WithExtension("io.example/x", map[string]int{"level": 1}),
			mcpclient.WithExtension("io.example/y", map[string]int{"replaced": 1}),
			mcpclient.WithExtension("io.example/y", struct{}{}),
		}, `{"extensions":{"io.example/x":{"level":1},"io.example/y":{},"io.modelcontextprotocol/skills":{}}}`},
		{"all", []mcpclient.Option{
			mcpclient.WithRoots(mcpclient.Root{URI: "file:///"}),
			mcpclient.WithSamplingHandler(func(context.Context, *mcpclient.CreateMessageParams) (*mcpclient.CreateMessageResult, error) {
				return nil, nil
			}),
			mcpclient.WithElicitationHandler(func(context.Context, *mcpclient.ElicitParams) (*mcpclient.ElicitResult, error) {
				return nil, nil
			}),
			mcpclient.WithURLElicitationHandler(func(context.Context, *mcpclient.URLElicitParams) (*mcpclient.ElicitResult, error) {
				return nil, nil
			}),
		}, `{"roots":{"listChanged":true},"sampling":{},"elicitation":{"form":{},"url":{}}}`},
	}
	featEach(t, func(t *testing.T, b featBackend) {
		if b.stateless() {
			t.Skip("no session records what a stateless client declares: each request carries it (TestStatelessExtensionsDeclared)")
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				srv, d := b.start(t)
				opts := append([]mcpclient.Option{mcpclient.WithClientInfo(mcpclient.Implementation{Name: "feat", Version: "9"})}, tt.opts...)
				c := mcptest.NewClient(t, d, opts...)
				infos := srv.SessionInfos()
				if len(infos) != 1 {
					t.Fatalf("%d sessions", len(infos))
				}
				// Every session opts into receipts; the rest is what the options declared.
				caps := infos[0].ClientCapabilities
				if _, ok := caps.Extensions[receipts.ExtensionID]; !ok {
					t.Errorf("the session did not opt into receipts: %+v", caps.Extensions)
				}
				caps.Extensions = maps.Clone(caps.Extensions)
				delete(caps.Extensions, receipts.ExtensionID)
				if len(caps.Extensions) == 0 {
					caps.Extensions = nil
				}
				got, _ := json.Marshal(caps)
				if string(got) != tt.want {
					t.Errorf("capabilities %s, want %s", got, tt.want)
				}
				if infos[0].ClientInfo.Name != "feat" || infos[0].ClientInfo.Version != "9" {
					t.Errorf("clientInfo %+v", infos[0].ClientInfo)
				}
				if infos[0].ProtocolVersion != c.ProtocolVersion() {
					t.Errorf("the server negotiated %q, the client %q", infos[0].ProtocolVersion, c.ProtocolVersion())
				}
				if sid := c.SessionID(); sid != "" && sid != infos[0].ID {
					t.Errorf("session %q, the client has %q", infos[0].ID, sid)
				}
			})
		}
	})
}

// TestFeaturesServerRequestAfterConnectionLoss: a server request whose client went away ends
// with an error instead of waiting forever.
func TestFeaturesServerRequestAfterConnectionLoss(t *testing.T) {
	requested := make(chan struct{})
	toolErr := make(chan error, 1)
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "orphan"}, func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		_, err := call.Request(context.WithoutCancel(ctx), "x/slow", nil)
		toolErr <- err
		return nil, err
	}))
	c, err := mcpclient.Connect(context.Background(), srv.Transport(),
		mcpclient.WithRequestHandler("x/slow", func(ctx context.Context, _ json.RawMessage) (any, error) {
			close(requested)
			<-ctx.Done()
			return nil, ctx.Err()
		}))
	if err != nil {
		t.Fatal(err)
	}
	go c.CallTool(context.Background(), "orphan", nil)
	recv(t, requested, "the server's request")
	c.Close()
	if err := recv(t, toolErr, "the request to fail"); err == nil {
		t.Error("Request succeeded without a client")
	}
}

// TestServerRequestsOverTheLimitHoldNothingUp fills every slot for server requests with
// elicitations waiting for a person. One request more is refused at once as busy, and what the
// server sends after it is not held up: notifications reach their handlers, a cancellation ends
// the handler it names, a ping is answered, all before any handler returns by itself.
func TestServerRequestsOverTheLimitHoldNothingUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		limit := mcpclient.MaxServerRequestsForTest
		var mu sync.Mutex
		answers := map[string]testpeer.Msg{} // the client's answers to server requests, by id
		server := make(chan *testpeer.Conn, 1)
		srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
			switch {
			case m.Method == "notifications/initialized":
				server <- p
			case m.Method == "" && m.ID != nil:
				mu.Lock()
				answers[string(m.ID)] = m
				mu.Unlock()
			}
			return false
		})
		started := make(chan string, limit+1)
		cancelled := make(chan string, limit+1)
		release := make(chan struct{})
		var logs, progress, listChanged atomic.Int32
		c, err := mcpclient.Connect(context.Background(), srv.Transport(), noWait,
			mcpclient.WithElicitationHandler(func(ctx context.Context, p *mcpclient.ElicitParams) (*mcpclient.ElicitResult, error) {
				started <- p.Message
				select {
				case <-release:
					return &mcpclient.ElicitResult{Action: mcpclient.ElicitDecline}, nil
				case <-ctx.Done():
					cancelled <- p.Message
					return nil, ctx.Err()
				}
			}),
			mcpclient.WithLogHandler(func(context.Context, *mcpclient.LogMessage) { logs.Add(1) }),
			mcpclient.WithNotificationHandler("notifications/progress", func(context.Context, string, json.RawMessage) { progress.Add(1) }),
			mcpclient.WithNotificationHandler("notifications/tools/list_changed", func(context.Context, string, json.RawMessage) { listChanged.Add(1) }))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		p := <-server
		elicit := func(id string) string {
			return `{"jsonrpc":"2.0","id":"` + id + `","method":"elicitation/create","params":{"message":"` + id + `","requestedSchema":{"type":"object"}}}`
		}
		for i := 1; i <= limit; i++ {
			p.Send(elicit(fmt.Sprintf("e%d", i)))
		}
		synctest.Wait()
		if len(started) != limit {
			t.Fatalf("%d handlers started, want %d", len(started), limit)
		}
		for range limit {
			<-started
		}

		over := fmt.Sprintf("e%d", limit+1)
		for _, frame := range []string{
			elicit(over),
			`{"jsonrpc":"2.0","id":"ping-1","method":"ping"}`,
			`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"still here"}}`,
			`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"nobody","progress":1}}`,
			`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"e1"}}`,
		} {
			p.Send(frame)
		}
		synctest.Wait() // every handler is still waiting for its person

		if logs.Load() != 1 || progress.Load() != 1 || listChanged.Load() != 1 {
			t.Errorf("behind busy handlers: %d log, %d progress, %d list_changed notifications handled, want 1 each",
				logs.Load(), progress.Load(), listChanged.Load())
		}
		select {
		case id := <-cancelled:
			if id != "e1" {
				t.Errorf("the cancellation of e1 ended %s", id)
			}
		default:
			t.Error("the cancellation of e1 did not reach its handler")
		}
		mu.Lock()
		if a, ok := answers[`"ping-1"`]; !ok || string(a.Result) != "{}" {
			t.Errorf("ping behind busy handlers: answer %+v (%v), want {}", a, ok)
		}
		var busy mcpclient.RPCError
		if a, ok := answers[`"`+over+`"`]; !ok || json.Unmarshal(a.Error, &busy) != nil ||
			busy.Code != mcpclient.RPCInternalError || !strings.Contains(busy.Message, "busy") {
			t.Errorf("request %s over the limit: answer %+v (%v), want -32603 saying the client is busy", over, a, ok)
		}
		if len(started) != 0 {
			t.Errorf("the request over the limit reached the handler")
		}
		mu.Unlock()

		close(release)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if _, ok := answers[`"e1"`]; ok {
			t.Error("the cancelled request was answered")
		}
		for i := 2; i <= limit; i++ {
			if a := answers[fmt.Sprintf(`"e%d"`, i)]; !strings.Contains(string(a.Result), `"decline"`) {
				t.Errorf("e%d answered %+v, want its handler's decline", i, a)
			}
		}
	})
}
