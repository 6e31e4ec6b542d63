package mcpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// gateway fronts an MCP server and refuses, with 401, every HTTP request that refuse picks,
// recording each refusal as "HTTP-method JSON-RPC-method".
type gateway struct {
	mu      sync.Mutex
	refused []string
}

func (g *gateway) serve(t *testing.T, next http.Handler, refuse func(r *http.Request, rpcMethod string) bool) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			Method string `json:"method"`
		}
		if r.Body != nil {
			body, _ := io.ReadAll(r.Body)
			json.Unmarshal(body, &m)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		if refuse(r, m.Method) {
			g.mu.Lock()
			g.refused = append(g.refused, strings.TrimSpace(r.Method+" "+m.Method))
			g.mu.Unlock()
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (g *gateway) refusals() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.refused...)
}

// Behind a gateway that checks every message for a header an interceptor adds, a session works:
// notifications/initialized, the GET stream, the answer to a server request, a notification the
// caller sends and the DELETE at Close carry the handshake's exchange headers, and the
// notifications/cancelled of a call, and the resumption of its broken response stream, carry
// that call's.
func TestInterceptorHeadersReachEveryMessage(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	slow := func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	askRoots := func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		if _, err := call.Request(ctx, "roots/list", nil); err != nil {
			return nil, err
		}
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("asked")}}, nil
	}
	var k counter
	h := mcptest.NewTestHTTPServer(t, mcptest.WithTool(mcpclient.Tool{Name: "slow"}, slow), mcptest.WithTool(mcpclient.Tool{Name: "ask"}, askRoots),
		mcptest.WithTool(unsafeTool, k.tool), mcptest.WithSSEResponses(time.Millisecond))
	var g gateway
	url := g.serve(t, h, func(r *http.Request, _ string) bool { return r.Header.Get("X-Token") == "" })
	token := func(next mcpclient.Handler) mcpclient.Handler {
		return func(ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
			v := "session"
			if !x.Handshake {
				v = "call " + x.Request.Name()
			}
			x.Header.Set("X-Token", v)
			return next(ctx, x)
		}
	}
	ctx := testCtx(t)
	c, err := mcpclient.Connect(ctx, &transport.HTTP{URL: url}, mcpclient.WithInterceptors(token), mcpclient.WithRoots(),
		mcpclient.WithLogger(mcptest.TestLogger(t)), noWait)
	if err != nil {
		t.Fatalf("Connect behind the gateway: %v", err)
	}
	defer c.Close()
	if res, err := c.CallTool(ctx, "ask", nil); err != nil || res.Text() != "asked" {
		t.Fatalf("a call answering a server request: %+v, %v", res, err)
	}
	h.Inject(mcptest.Fault{Kind: mcptest.BreakStream, Tool: "reserve"})
	var resp mcpclient.Response
	if _, err := c.CallTool(ctx, "reserve", nil, mcpclient.WithResponse(&resp)); err != nil || resp.Attempts != 1 {
		t.Fatalf("a call whose response stream broke: %d attempts, %v; want it resumed", resp.Attempts, err)
	}
	if err := c.SetRoots(ctx, mcpclient.Root{URI: "file:///tmp"}); err != nil {
		t.Fatalf("SetRoots: %v", err)
	}
	callCtx, cancel := context.WithCancel(ctx)
	go func() {
		<-started
		cancel()
	}()
	if _, err := c.CallTool(callCtx, "slow", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled call: %v", err)
	}
	waitFor(t, "notifications/cancelled", func() bool { return sent(h, "POST", "notifications/cancelled") != nil })
	c.Close()

	if r := g.refusals(); len(r) != 0 {
		t.Errorf("the gateway refused %q", r)
	}
	resumed := false
	for _, r := range h.Requests() {
		if r.Method == "GET" && r.Header.Get("Last-Event-ID") != "" {
			resumed = true
			if got := r.Header.Get("X-Token"); got != "call reserve" {
				t.Errorf("the resumption of a response stream carried X-Token %q, want the call's", got)
			}
		}
	}
	if !resumed {
		t.Errorf("no response stream was resumed")
	}
	for _, want := range []struct{ method, rpc, token string }{
		{"POST", "initialize", "session"},
		{"POST", "notifications/initialized", "session"},
		{"GET", "", "session"},
		{"POST", "", "session"}, // the answer to roots/list
		{"POST", "notifications/roots/list_changed", "session"},
		{"POST", "notifications/cancelled", "call slow"},
		{"DELETE", "", "session"},
	} {
		r := sent(h, want.method, want.rpc)
		switch {
		case r == nil:
			t.Errorf("no %s %s reached the server", want.method, want.rpc)
		case r.Header.Get("X-Token") != want.token:
			t.Errorf("%s %s carried X-Token %q, want %q", want.method, want.rpc, r.Header.Get("X-Token"), want.token)
		}
	}
}

// sent returns the last request h received with HTTP method and JSON-RPC method rpc, or nil; a
// GET is the standalone stream's, not a resumption.
func sent(h *mcptest.HTTPServer, method, rpc string) *mcptest.HTTPRequest {
	reqs := h.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Method == method && reqs[i].RPCMethod == rpc && reqs[i].Header.Get("Last-Event-ID") == "" {
			return &reqs[i]
		}
	}
	return nil
}

// A gateway that refuses a message of the handshake fails Connect with an error that names it.
func TestConnectNamesTheRefusedMessage(t *testing.T) {
	t.Parallel()
	for _, method := range []string{"server/discover", "initialize", "notifications/initialized"} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			h := mcptest.NewTestHTTPServer(t)
			var g gateway
			url := g.serve(t, h, func(_ *http.Request, rpc string) bool { return rpc == method })
			_, err := mcpclient.Connect(testCtx(t), &transport.HTTP{URL: url}, mcpclient.WithLogger(mcptest.TestLogger(t)), noWait)
			if err == nil || !strings.Contains(err.Error(), method+":") || mcpclient.CodeOf(err) != mcpclient.CodeUnauthorized {
				t.Fatalf("Connect: %v, want CodeUnauthorized naming %s", err, method)
			}
		})
	}
}
