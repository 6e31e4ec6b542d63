package mcpclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

func TestLegacySSECallsAndNotDeliveredResends(t *testing.T) {
	t.Parallel()
	var k counter
	srv := mcptest.NewTestHTTPServer(t,
		mcptest.WithTool(unsafeTool, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.Fail, Tool: "reserve", RetryAfter: time.Millisecond}))
	c := connect(t, srv.SSETransport())
	req := callReq(t, c, "reserve", map[string]int{"n": 1})
	resp, err := c.Do(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Attempts != 2 || k.runs != 1 {
		t.Errorf("attempts %d runs %d, want 2 and 1", resp.Attempts, k.runs)
	}
	assertFramesIdentical(t, srv.Received(req.ID()), 2)
}

func TestLegacySSEDroppedStreamLosesTheSession(t *testing.T) {
	t.Parallel()
	var k counter
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithoutReceiptEpoch(),
		mcptest.WithTool(unsafeTool, k.tool),
		mcptest.WithTool(readOnlyTool, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Method: "tools/call", Times: 2}))
	c := connect(t, srv.SSETransport())
	if _, err := c.CachedTools(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Receipts are declared without an epoch: for all the client knows, they lived in the
	// session the dropped stream ended.
	_, err := c.CallTool(context.Background(), "reserve", nil)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, mcpclient.ErrSessionLost) {
		t.Fatalf("unsafe call: %v, want ErrOutcomeUnknown from the lost session", err)
	}
	res, err := c.CallTool(context.Background(), "lookup", nil)
	if err != nil || res.Text() == "" {
		t.Fatalf("safe call after a dropped stream: %v", err)
	}
	// lookup ran once: its resend on the new session met the server's process-wide receipt.
	// The client could not know that receipt survived, which is why it gave up on reserve.
	if k.runs != 2 {
		t.Errorf("runs %d, want 2", k.runs)
	}
}

// With an epoch, the new session shows that the receipts outlived the dropped stream's session.
func TestLegacySSEDroppedStreamWithTheSameEpochReadsTheReceipt(t *testing.T) {
	t.Parallel()
	var k counter
	srv := mcptest.NewTestHTTPServer(t,
		mcptest.WithTool(unsafeTool, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "reserve"}))
	c := connect(t, srv.SSETransport())
	req := callReq(t, c, "reserve", nil)
	resp, err := c.Do(context.Background(), req)
	if err != nil {
		t.Fatalf("unsafe call after a dropped stream, same epoch: %v", err)
	}
	if resp.Attempts != 2 || k.runs != 1 {
		t.Errorf("attempts %d runs %d, want 2 and 1", resp.Attempts, k.runs)
	}
	assertFramesIdentical(t, srv.Received(req.ID()), 2)
}

func TestLegacySSESessionExpiryReconnects(t *testing.T) {
	t.Parallel()
	var k counter
	srv := mcptest.NewTestHTTPServer(t,
		mcptest.WithTool(unsafeTool, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.ExpireSession, Tool: "reserve"}))
	c := connect(t, srv.SSETransport())
	resp, err := c.Do(context.Background(), callReq(t, c, "reserve", nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Attempts != 2 || k.runs != 1 {
		t.Errorf("attempts %d runs %d", resp.Attempts, k.runs)
	}
}

func TestLegacySSELargeToolResultArrivesWhole(t *testing.T) {
	t.Parallel()
	want := largeImage()
	srv := mcptest.NewTestHTTPServer(t, largeImageTool(want))
	wantLargeImage(t, connect(t, srv.SSETransport()), want)
}
