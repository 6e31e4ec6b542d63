package mcptest_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// Faults sequenced over the attempts of one call: the first attempt is refused with a long
// Retry-After, the second loses its reply after the tool ran, the third reads the receipt. The
// client of NewClient does not wait the server's delay, so the test takes no real time.
func TestFaultsSequencedOverAttempts(t *testing.T) {
	t.Parallel()
	runs := 0
	h := mcptest.NewTestHTTPServer(t, mcptest.WithTool(mcpclient.Tool{Name: "book"},
		func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			runs++
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("booked")}}, nil
		}))
	h.Inject(mcptest.Fault{Kind: mcptest.Fail, Tool: "book", RetryAfter: 30 * time.Second})
	h.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "book", After: 1})
	var outcomes []transport.Outcome
	c := mcptest.NewClient(t, h, mcpclient.WithAttemptHook(func(_ context.Context, ev mcpclient.AttemptEvent) {
		if !ev.Handshake {
			outcomes = append(outcomes, ev.Outcome)
		}
	}))
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, "book", nil)
	if err != nil || res.Text() != "booked" {
		t.Fatalf("%v, %v", res, err)
	}
	want := []transport.Outcome{transport.NotDelivered, transport.Uncertain, transport.Answered}
	if len(outcomes) != 3 || outcomes[0] != want[0] || outcomes[1] != want[1] || outcomes[2] != want[2] || runs != 1 {
		t.Errorf("attempts %v and %d runs, want %v and one run", outcomes, runs, want)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the call took %v: NewClient's client waited the server's delay", d)
	}
}

// The HTTP server records the headers of each request, for tests of what a plugin adds.
func TestHTTPServerRecordsRequests(t *testing.T) {
	t.Parallel()
	h := mcptest.NewTestHTTPServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"},
		func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			return &mcpclient.CallToolResult{}, nil
		}))
	auth := func(next mcpclient.Handler) mcpclient.Handler {
		return func(ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
			x.Header.Set("Authorization", "Bearer t")
			return next(ctx, x)
		}
	}
	c := mcptest.NewClient(t, h, mcpclient.WithInterceptors(auth))
	var resp mcpclient.Response
	if _, err := c.CallTool(context.Background(), "echo", nil, mcpclient.WithResponse(&resp)); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, r := range h.Requests() {
		if r.Method == http.MethodPost && r.RPCMethod == "tools/call" && r.ID == resp.Request.ID() {
			found = true
			if r.Header.Get("Authorization") != "Bearer t" || r.Header.Get("Mcp-Session-Id") == "" {
				t.Errorf("headers %v", r.Header)
			}
		}
	}
	if !found {
		t.Fatalf("the tools/call is not among %+v", h.Requests())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	reqs := h.Requests()
	if last := reqs[len(reqs)-1]; last.Method != http.MethodDelete {
		t.Errorf("the last request %+v, want the session's DELETE", last)
	}
}
