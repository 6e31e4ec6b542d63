package mcpclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/receipts"
	"github.com/northstar-mcp/mcpclient/transport"
)

// lossyProxy forwards requests to next and loses the answer to the first tools/call it sees
// after the handler ran, as a proxy whose connection to the client breaks at the worst moment.
func lossyProxy(next http.Handler) http.Handler {
	var lost atomic.Bool
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if lost.Load() || r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		if strings.Contains(rec.Body.String(), `"content"`) && lost.CompareAndSwap(false, true) {
			panic(http.ErrAbortHandler) // the tool ran; its answer never reaches the client
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	})
}

// TestMiddlewareGivesAServerWithoutReceiptsThem: a server that keeps no receipts (mcptest in
// ModeNone stands for any SDK's server), wrapped by receipts.HTTP behind a proxy that loses the
// answer of a call after the tool ran: the client resends the same bytes under the same id, the
// middleware answers from the receipt, and the tool runs once. Without the middleware the same
// call ends ErrOutcomeUnknown.
func TestMiddlewareGivesAServerWithoutReceiptsThem(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		versions   []string
		sse        bool
		middleware bool
	}{
		{"session revision", []string{mcpclient.ProtocolVersion20251125}, false, true},
		{"session revision, SSE", []string{mcpclient.ProtocolVersion20251125}, true, true},
		{"stateless revision", []string{mcpclient.ProtocolVersion20260728, mcpclient.ProtocolVersion20251125}, false, true},
		{"stateless revision, SSE", []string{mcpclient.ProtocolVersion20260728, mcpclient.ProtocolVersion20251125}, true, true},
		{"session revision, no middleware", []string{mcpclient.ProtocolVersion20251125}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int32
			opts := []mcptest.Option{mcptest.WithMode(mcptest.ModeNone), mcptest.WithProtocolVersions(c.versions...),
				mcptest.WithTool(unsafeTool, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
					runs.Add(1)
					return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("reserved")}}, nil
				})}
			if c.sse {
				opts = append(opts, mcptest.WithSSEResponses(time.Millisecond))
			}
			inner := mcptest.NewUnstartedHTTPServer(opts...)
			defer inner.Close()
			var h http.Handler = inner
			if c.middleware {
				h = receipts.HTTP(inner, receipts.Options{})
			}
			front := httptest.NewServer(lossyProxy(h))
			defer front.Close()
			cl := connect(t, &transport.HTTP{URL: front.URL}, mcpclient.WithRetryPolicy(mcptest.FastRetryPolicy()))
			caps := cl.ServerCapabilities()
			if _, ok := caps.RequestReceipts(); ok != c.middleware {
				t.Fatalf("receipts declared: %v", ok)
			}
			ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
			defer cancel()
			var resp mcpclient.Response
			res, err := cl.CallTool(ctx, unsafeTool.Name, nil, mcpclient.WithResponse(&resp))
			switch {
			case !c.middleware && !errors.Is(err, mcpclient.ErrOutcomeUnknown):
				t.Errorf("without the middleware: %v, want ErrOutcomeUnknown", err)
			case c.middleware && (err != nil || res.Text() != "reserved" || !resp.Replayed):
				t.Errorf("with the middleware: %v %v (replayed %v)", res, err, resp.Replayed)
			}
			if n := runs.Load(); n != 1 {
				t.Errorf("the tool ran %d times, want once", n)
			}
		})
	}
}
