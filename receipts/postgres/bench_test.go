package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/receipts"
	"github.com/northstar-mcp/mcpclient/receipts/postgres"
	"github.com/northstar-mcp/mcpclient/transport"
)

// BenchmarkCallTool measures what the middleware over this store adds to a tools/call: the
// client against an in-process server (mcptest in ModeNone over httptest), with and without
// receipts.HTTP over a Store on the test database, by one caller and by 64 at once. Besides the
// time per call it reports the latency of a call at the median and at the 99th percentile:
//
//	go test -run '^$' -bench CallTool -count 6 | benchstat -
func BenchmarkCallTool(b *testing.B) {
	for _, receipted := range []bool{false, true} {
		for _, callers := range []int{1, 64} {
			name := fmt.Sprintf("middleware=%v/callers=%d", receipted, callers)
			b.Run(name, func(b *testing.B) { benchCallTool(b, receipted, callers) })
		}
	}
}

func benchCallTool(b *testing.B, receipted bool, callers int) {
	echo := func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("done")}}, nil
	}
	inner := mcptest.NewUnstartedHTTPServer(mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728, mcpclient.ProtocolVersion20251125),
		mcptest.WithTool(bookTool, echo))
	defer inner.Close()
	var h http.Handler = inner
	if receipted {
		store := newStore(b, newPool(b), postgres.Options{Table: newTable(b)})
		h = receipts.HTTP(inner, receipts.Options{Store: store, Logger: slog.New(slog.DiscardHandler)})
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx := context.Background()
	cl, err := mcpclient.Connect(ctx, &transport.HTTP{URL: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	caps := cl.ServerCapabilities()
	if _, ok := caps.RequestReceipts(); ok != receipted {
		b.Fatalf("receipts declared: %v", ok)
	}

	latencies := make([][]time.Duration, callers)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for c := range callers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				start := time.Now()
				if _, err := cl.CallTool(ctx, bookTool.Name, bookArgs{N: c}); err != nil {
					b.Error(err)
					return
				}
				latencies[c] = append(latencies[c], time.Since(start))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(latencies...)
	if len(all) == 0 {
		return
	}
	slices.Sort(all)
	at := func(q float64) float64 { return float64(all[int(q*float64(len(all)-1))].Microseconds()) }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}
