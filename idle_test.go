package mcpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// clientGoroutines counts the goroutines running code of the client or its transports, not of
// mcptest's server in the same process or of net/http's connection pool.
func clientGoroutines(t *testing.T) int {
	t.Helper()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 2); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range strings.Split(buf.String(), "\n\n") {
		if strings.Contains(g, "northstar-mcp/mcpclient.(*") || strings.Contains(g, "northstar-mcp/mcpclient/transport.(*httpConn)") {
			n++
		}
	}
	return n
}

// An idle session over Streamable HTTP keeps no goroutine: answers reach their callers on the
// goroutines that read them, and the dispatcher runs only while there is something to dispatch.
func TestHTTPIdleSessionKeepsNoGoroutine(t *testing.T) {
	bothResponseKinds(t, func(t *testing.T, opts ...mcptest.Option) {
		srv := mcptest.NewTestHTTPServer(t, append(opts, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, nil))...)
		c, _ := httpClient(t, srv)
		if _, err := c.CallTool(context.Background(), "echo", map[string]any{"x": 1}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "no client goroutine", func() bool { return clientGoroutines(t) == 0 })
	})
}

// A notification handler asks for the GET stream, and so for the goroutine that reads it; the
// dispatcher that runs the handler ends when it has run it.
func TestHTTPListeningSessionKeepsOnlyItsStreamReader(t *testing.T) {
	srv := mcptest.NewTestHTTPServer(t)
	got := make(chan struct{}, 16)
	c, _ := httpClient(t, srv, mcpclient.WithNotificationHandler("notifications/tools/list_changed",
		func(context.Context, string, json.RawMessage) { got <- struct{}{} }))
	_ = c
	for delivered := false; !delivered; {
		srv.Notify("notifications/tools/list_changed", nil)
		select {
		case <-got:
			delivered = true
		case <-time.After(10 * time.Millisecond):
		}
	}
	waitFor(t, "the GET stream's reader alone", func() bool { return clientGoroutines(t) == 1 })
}
