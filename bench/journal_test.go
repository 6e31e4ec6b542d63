package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/bench/echoserver"
	"github.com/northstar-mcp/mcpclient/journal"
)

// BenchmarkJournal: our client's tools/call (the 1 KiB echo, over Streamable HTTP with JSON
// answers, to the echo server in its child process) with the ledger in memory only
// (store=memory) and written through the bbolt file journal (store=file), at 1, 8 and 64
// callers. Besides ns/op and cpu-ns/op, latency-ns/call is the mean time one call takes, and
// syncs/call the journal's synced writes per call: each caller waits for its request's record to
// be synced before sending, and group commit lets concurrent callers share a sync.
//
// The journal file is in the benchmark's temporary directory: its sync cost is that file
// system's.
func BenchmarkJournal(b *testing.B) {
	args := echoArgs{echoserver.Text(1 << 10)}
	for _, store := range []string{"memory", "file"} {
		for _, callers := range callerCounts {
			b.Run(fmt.Sprintf("store=%s/callers=%d", store, callers), func(b *testing.B) {
				hc, closeIdle := pooledClient(nil)
				defer closeIdle()
				ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
				defer cancel()
				opts := []mcpclient.Option{}
				var j *journal.File
				if store == "file" {
					var err error
					if j, err = journal.OpenFile(filepath.Join(b.TempDir(), "journal.db")); err != nil {
						b.Fatal(err)
					}
					defer j.Close()
					opts = append(opts, mcpclient.WithJournal(j))
				}
				c, err := mcpclient.Connect(ctx, oursHTTP(serverURL+"/json", hc), opts...)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				call := func() error {
					_, err := c.CallTool(context.Background(), "echo", args)
					return err
				}
				for range 2 * callers { // warm up the pool
					if err := call(); err != nil {
						b.Fatal(err)
					}
				}
				var syncs0 int64
				if j != nil {
					syncs0 = j.Stats().Commits
				}
				runtime.GC()
				b.ReportAllocs()
				b.ResetTimer()
				cpu0, t0 := cpuTime(), time.Now()
				var next, latency atomic.Int64
				var wg sync.WaitGroup
				for range callers {
					wg.Go(func() {
						for next.Add(1) <= int64(b.N) {
							start := time.Now()
							if err := call(); err != nil {
								b.Error(err)
								return
							}
							latency.Add(int64(time.Since(start)))
						}
					})
				}
				wg.Wait()
				elapsed, cpu := time.Since(t0), cpuTime()-cpu0
				b.StopTimer()
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
				b.ReportMetric(float64(latency.Load())/float64(b.N), "latency-ns/call")
				if j != nil {
					// Settles still queued are written at Close, outside the timed loop: they
					// ride on the syncs counted here in a steady state.
					b.ReportMetric(float64(j.Stats().Commits-syncs0)/float64(b.N), "syncs/call")
				}
			})
		}
	}
}
