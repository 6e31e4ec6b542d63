package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/bench/echoserver"
	"github.com/northstar-mcp/mcpclient/receipts"
)

// BenchmarkReceipts: the latency receipts.HTTP adds to a tools/call (our client, the 1 KiB echo
// over stateful Streamable HTTP with JSON answers) in front of the go-sdk echo server, against the
// same server unwrapped (middleware=none), at 1 and 64 callers sharing one session. Besides
// ns/op, p50-ns and p99-ns are percentiles of the time one call takes.
//
// Unlike the other HTTP benchmarks, the server runs in the benchmark's process, new for every
// run: each run's receipts start from an empty MemoryStore, sized to keep them all (by default it
// holds 1024 receipts of a day's retention, and refuses new requests once full). The server's CPU
// is therefore in every figure, with and without the middleware alike.
func BenchmarkReceipts(b *testing.B) {
	args := echoArgs{echoserver.Text(1 << 10)}
	for _, middleware := range []string{"none", "receipts"} {
		for _, callers := range []int{1, 64} {
			b.Run(fmt.Sprintf("middleware=%s/callers=%d", middleware, callers), func(b *testing.B) {
				warm := 2 * callers
				srv := echoserver.New()
				var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
					&mcp.StreamableHTTPOptions{JSONResponse: true})
				if middleware == "receipts" {
					store := receipts.NewMemoryStore(receipts.MemoryOptions{MaxReceipts: b.N + warm, MaxBytes: int64(b.N+warm) << 12})
					h = receipts.HTTP(h, receipts.Options{Store: store})
				}
				hs := httptest.NewServer(h)
				defer hs.Close()
				hc, closeIdle := pooledClient(nil)
				defer closeIdle()
				ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
				defer cancel()
				c, err := mcpclient.Connect(ctx, oursHTTP(hs.URL, hc))
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				if _, ok := c.ServerCapabilities().RequestReceipts(); ok != (middleware == "receipts") {
					b.Fatalf("receipts declared: %v", ok)
				}
				call := func() error {
					res, err := c.CallTool(context.Background(), "echo", args)
					if err == nil && res.Text() != args.Text {
						err = fmt.Errorf("echo of %d bytes returned %d", len(args.Text), len(res.Text()))
					}
					return err
				}
				var wg sync.WaitGroup
				for range callers { // warm up the pool
					wg.Go(func() {
						for range warm / callers {
							if err := call(); err != nil {
								b.Error(err)
							}
						}
					})
				}
				wg.Wait()
				if b.Failed() {
					b.FailNow()
				}
				latencies := make([]time.Duration, b.N)
				runtime.GC()
				b.ReportAllocs()
				b.ResetTimer()
				var next atomic.Int64
				for range callers {
					wg.Go(func() {
						for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
							start := time.Now()
							if err := call(); err != nil {
								b.Error(err)
								return
							}
							latencies[i] = time.Since(start)
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				slices.Sort(latencies)
				b.ReportMetric(float64(percentile(latencies, 50)), "p50-ns")
				b.ReportMetric(float64(percentile(latencies, 99)), "p99-ns")
			})
		}
	}
}

// percentile returns the p-th percentile of sorted (nearest rank).
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (len(sorted)*p + 99) / 100 // ceil(n·p/100), from 1
	return sorted[max(rank, 1)-1]
}
