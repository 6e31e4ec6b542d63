package mcpclient_test

// Regressions found by running the client against servers nobody here wrote (interop/).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

func TestCallToolWithoutArgumentsOmitsThem(t *testing.T) {
	var k counter
	srv := mcptest.NewTestServer(t, mcptest.WithTool(unsafeTool, k.tool))
	c := mcptest.NewClient(t, srv)
	req := callReq(t, c, "reserve", nil)
	if strings.Contains(string(req.Bytes()), "arguments") {
		t.Fatalf("frame %s", req.Bytes())
	}
	if _, err := c.CallTool(context.Background(), "reserve", nil); err != nil {
		t.Fatal(err)
	}
}

// A TypeScript SDK server refuses an unknown session with 400 and -32000, not 404.
func TestHTTPSessionRefusedWith400IsALostSession(t *testing.T) {
	var mu sync.Mutex
	sessions, inits := map[string]bool{}, 0
	srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == "initialize":
			inits++
			sid := fmt.Sprint("s", inits)
			sessions[sid] = true
			r.W.Header().Set("Mcp-Session-Id", sid)
			r.Answer(testpeer.InitResult)
		case !sessions[r.Header.Get("Mcp-Session-Id")]:
			r.W.Header().Set("Content-Type", "application/json")
			r.W.WriteHeader(http.StatusBadRequest)
			io.WriteString(r.W, `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`)
		case r.ID == nil:
			return false
		default:
			delete(sessions, "s1") // the first session expires after its first request
			r.Answer(`{}`)
		}
		return true
	})
	c, err := mcpclient.Connect(context.Background(), &transport.HTTP{URL: srv.URL}, noWait)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("after the session expired: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if inits != 2 {
		t.Errorf("%d initialize requests, want 2", inits)
	}
}

func TestHTTPTimeoutKeepsItsCause(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(unsafeTool, func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &mcpclient.CallToolResult{}, nil
	}))
	c := mcptest.NewClient(t, srv)
	_, err := c.CallTool(context.Background(), "reserve", nil, mcpclient.WithTimeouts(0, 50*time.Millisecond))
	if !errors.Is(err, mcpclient.ErrCallTimeout) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("error %v: want the timeout as the cause of an unknown outcome", err)
	}
}

func TestProgressReachesCallAndNotificationHandler(t *testing.T) {
	srv := mcptest.NewTestServer(t, mcptest.WithTool(unsafeTool, func(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		call.Progress(1, 2, "half")
		return &mcpclient.CallToolResult{}, nil
	}))
	seen := make(chan string, 1)
	c := mcptest.NewClient(t, srv, mcpclient.WithNotificationHandler("notifications/progress",
		func(_ context.Context, method string, _ json.RawMessage) { seen <- method }))
	var reports []mcpclient.Progress
	if _, err := c.CallTool(context.Background(), "reserve", nil, mcpclient.WithProgress(func(p mcpclient.Progress) { reports = append(reports, p) })); err != nil {
		t.Fatal(err)
	}
	if len(reports) != 1 || <-seen != "notifications/progress" {
		t.Fatalf("call saw %v", reports)
	}
}

func TestConnectRefusedAfterInitializeIsDefinite(t *testing.T) {
	srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		if r.Method == "initialize" {
			r.Answer(testpeer.InitResult)
			return true
		}
		r.W.Header().Set("Content-Type", "application/json")
		r.W.WriteHeader(http.StatusBadRequest)
		io.WriteString(r.W, `{"jsonrpc":"2.0","error":{"code":-32600,"message":"Bad Request: Unsupported protocol version"},"id":null}`)
		return true
	})
	_, err := mcpclient.Connect(context.Background(), &transport.HTTP{URL: srv.URL}, noWait)
	if mcpclient.CodeOf(err) != mcpclient.CodeServerError {
		t.Fatalf("error %v, want the server's refusal, not a delivery failure", err)
	}
	if posts := len(srv.Requests()); posts != 3 { // server/discover, initialize, notifications/initialized: no second try
		t.Errorf("%d POSTs", posts)
	}
}
