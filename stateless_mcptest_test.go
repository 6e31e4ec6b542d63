package mcpclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// statelessMCPTest is an mcptest HTTP server speaking the stateless revision beside the newest
// session one, with the unsafe tool counting its runs.
func statelessMCPTest(t *testing.T, opts ...mcptest.Option) *mcptest.HTTPServer {
	t.Helper()
	opts = append([]mcptest.Option{
		mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728, mcpclient.ProtocolVersion20251125),
		mcptest.WithTool(unsafeTool, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("reserved")}}, nil
		}),
	}, opts...)
	return mcptest.NewTestHTTPServer(t, opts...)
}

// TestStatelessAgainstMCPTest: the client negotiates the stateless revision with mcptest, and a
// call whose answer was lost after it ran is resent under the same id and answered from the
// receipt the request opted into: it runs once.
func TestStatelessAgainstMCPTest(t *testing.T) {
	t.Parallel()
	for _, sse := range []bool{false, true} {
		t.Run(map[bool]string{false: "JSON", true: "SSE"}[sse], func(t *testing.T) {
			t.Parallel()
			var opts []mcptest.Option
			if sse {
				opts = append(opts, mcptest.WithSSEResponses(time.Millisecond))
			}
			srv := statelessMCPTest(t, opts...)
			c := mcptest.NewClient(t, srv, mcpclient.WithRetryPolicy(mcptest.FastRetryPolicy()))
			if got := c.ProtocolVersion(); got != mcpclient.ProtocolVersion20260728 {
				t.Fatalf("negotiated %s, want the stateless revision", got)
			}
			if srv.Sessions() != 0 {
				t.Errorf("%d sessions opened in a stateless revision", srv.Sessions())
			}
			srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: unsafeTool.Name})
			res, err := c.CallTool(testCtx(t), unsafeTool.Name, nil)
			if err != nil || res.Text() != "reserved" {
				t.Fatalf("call: %v %v", res, err)
			}
			if got := srv.Executions(unsafeTool.Name); got != 1 {
				t.Errorf("the tool ran %d times, want once", got)
			}
		})
	}
}

// TestStatelessAgainstMCPTestWithoutReceipts: against a server that keeps no receipts, the lost
// answer of an unsafe call stays unknown; nothing runs twice.
func TestStatelessAgainstMCPTestWithoutReceipts(t *testing.T) {
	t.Parallel()
	srv := statelessMCPTest(t, mcptest.WithMode(mcptest.ModeNone))
	c := mcptest.NewClient(t, srv, mcpclient.WithRetryPolicy(mcptest.FastRetryPolicy()))
	srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: unsafeTool.Name})
	_, err := c.CallTool(testCtx(t), unsafeTool.Name, nil)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("call: %v, want ErrOutcomeUnknown", err)
	}
	if got := srv.Executions(unsafeTool.Name); got != 1 {
		t.Errorf("the tool ran %d times, want once", got)
	}
}
