package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// featBackend is one way to reach an mcptest server: in memory, Streamable HTTP answering with
// JSON or with SSE, or legacy HTTP+SSE.
type featBackend struct {
	name  string
	start func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, mcptest.Dialer)
}

// legacyDialer reaches an HTTPServer by its HTTP+SSE endpoints.
type legacyDialer struct{ h *mcptest.HTTPServer }

func (d legacyDialer) Transport() transport.Transport { return d.h.SSETransport() }

var featBackends = []featBackend{
	{"memory", func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, mcptest.Dialer) {
		s := mcptest.NewTestServer(t, opts...)
		return s, s
	}},
	{"http-json", func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, mcptest.Dialer) {
		h := mcptest.NewTestHTTPServer(t, opts...)
		return h.Server, h
	}},
	{"http-sse", func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, mcptest.Dialer) {
		h := mcptest.NewTestHTTPServer(t, append(opts, mcptest.WithSSEResponses(10*time.Millisecond))...)
		return h.Server, h
	}},
	{"legacy-sse", func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, mcptest.Dialer) {
		h := mcptest.NewTestHTTPServer(t, opts...)
		return h.Server, legacyDialer{h}
	}},
}

// featEach runs f against every backend.
func featEach(t *testing.T, f func(t *testing.T, b featBackend)) {
	for _, b := range featBackends {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

// featCtx bounds a test's calls so that a broken test fails rather than hangs.
func featCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// featRecv returns the next value from ch, failing the test if none comes in time.
func featRecv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// featRPCError returns the *RPCError in err's chain, failing the test if there is none or if
// err is not a server error.
func featRPCError(t *testing.T, err error) *mcpclient.RPCError {
	t.Helper()
	var rpc *mcpclient.RPCError
	if !errors.As(err, &rpc) {
		t.Fatalf("error %v carries no *RPCError", err)
	}
	if mcpclient.CodeOf(err) != mcpclient.CodeServerError {
		t.Errorf("error %v has code %v, want %v", err, mcpclient.CodeOf(err), mcpclient.CodeServerError)
	}
	return rpc
}

// featText is a tool result of one text block.
func featText(s string) *mcpclient.CallToolResult {
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(s)}}
}

// featAsk is a tool that sends the server request its arguments name to the calling client and
// answers with the client's result, or with the client's error as an isError result whose
// structuredContent is the error object.
func featAsk(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	var a struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(call.Arguments, &a); err != nil {
		return nil, err
	}
	var params any
	if len(a.Params) > 0 {
		params = a.Params
	}
	res, err := call.Request(ctx, a.Method, params)
	var rpc *mcpclient.RPCError
	switch {
	case errors.As(err, &rpc):
		body, _ := json.Marshal(rpc)
		return &mcpclient.CallToolResult{IsError: true, StructuredContent: body,
			Content: []mcpclient.Content{mcpclient.TextContent(rpc.Error())}}, nil
	case err != nil:
		return nil, err
	}
	return &mcpclient.CallToolResult{StructuredContent: res, Content: []mcpclient.Content{mcpclient.TextContent(string(res))}}, nil
}

var featAskTool = mcpclient.Tool{Name: "ask"}

// featAskClient has the server ask the client method with params through the ask tool. It
// returns the client's result, or its error object.
func featAskClient(t *testing.T, c *mcpclient.Client, method string, params any) (json.RawMessage, *mcpclient.RPCError) {
	t.Helper()
	res, err := c.CallTool(featCtx(t), "ask", map[string]any{"method": method, "params": params})
	if err != nil {
		t.Fatalf("ask %s: %v", method, err)
	}
	if res.IsError {
		var rpc mcpclient.RPCError
		if err := json.Unmarshal(res.StructuredContent, &rpc); err != nil {
			t.Fatalf("ask %s: %s", method, res.Text())
		}
		return nil, &rpc
	}
	return res.StructuredContent, nil
}
