package tasks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/goleak"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// noWait retries at once, for tests about what is retried rather than when.
var noWait = mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{
	NewBackOff: func() backoff.BackOff { return &backoff.ZeroBackOff{} },
})

// testCtx is a context that bounds a test that hangs.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// recv returns the next value from ch, failing the test if none comes in time.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func newRequest(t *testing.T, c *mcpclient.Client, method string, params any, opts ...mcpclient.CallOption) *mcpclient.Request {
	t.Helper()
	req, err := c.NewRequest(method, params, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// textResult is a tool result of one text block.
func textResult(s string) *mcpclient.CallToolResult {
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(s)}}
}

// rpcError returns the *RPCError in err's chain, failing the test if there is none or if err is
// not a server error.
func rpcError(t *testing.T, err error) *mcpclient.RPCError {
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

// A backend is a way of serving mcptest's server to the client.
type backend struct {
	name  string
	start func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, mcptest.Dialer)
}

type legacyDialer struct{ h *mcptest.HTTPServer }

func (d legacyDialer) Transport() transport.Transport { return d.h.SSETransport() }

// backends serve in memory, then over HTTP: Streamable HTTP with JSON and with SSE answers, and
// the legacy HTTP+SSE transport.
var backends = []backend{
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

// networkBackends are the backends that serve over HTTP.
var networkBackends = backends[1:]
