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

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/receipts"
	"github.com/northstar-mcp/mcpclient/receipts/postgres"
	"github.com/northstar-mcp/mcpclient/transport"
)

// BenchmarkCallTool measures what the middleware over this store adds to a tools/call: the
// client against an in-process server (mcptest in ModeNone over httptest), with and without
// receipts.HTTP over a Store on the test database, by one caller and by 64 at once. The store's
// pool has pgxpool's default size (conns=0) or the 32 connections a server expecting that many
// requests at once would give it. Besides the time per call it reports the latency of a call at
// the median and at the 99th percentile:
//
//	go test -run '^$' -bench CallTool -count 6 | benchstat -
func BenchmarkCallTool(b *testing.B) {
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("middleware=false/callers=%d", callers), func(b *testing.B) { benchCallTool(b, false, 0, callers) })
	}
	for _, conns := range []int32{0, 32} {
		for _, callers := range []int{1, 64} {
			name := fmt.Sprintf("middleware=true/conns=%d/callers=%d", conns, callers)
			b.Run(name, func(b *testing.B) { benchCallTool(b, true, conns, callers) })
		}
	}
}

func benchCallTool(b *testing.B, receipted bool, conns int32, callers int) {
	echo := func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("done")}}, nil
	}
	inner := mcptest.NewUnstartedHTTPServer(mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728, mcpclient.ProtocolVersion20251125),
		mcptest.WithTool(bookTool, echo))
	defer inner.Close()
	var h http.Handler = inner
	if receipted {
		pool := newPool(b)
		if conns > 0 {
			cfg, err := pgxpool.ParseConfig(dbURL)
			if err != nil {
				b.Fatal(err)
			}
			cfg.MaxConns = conns
			if pool, err = pgxpool.NewWithConfig(context.Background(), cfg); err != nil {
				b.Fatal(err)
			}
			defer pool.Close()
		}
		store := newStore(b, pool, postgres.Options{Table: newTable(b)})
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
