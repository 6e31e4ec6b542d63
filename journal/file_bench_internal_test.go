//go:build unix

package journal

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/northstar-mcp/mcpclient"
)

// BenchmarkFile: Claim and Settle of new requests of a 1 KiB frame, from 1 and 64 goroutines,
// without a server: the file journal's own cost. Besides ns/op, cpu-ns/op is the process's CPU
// time per request (the writer's, the callers' and the kernel's for the syncs), syncs/op the
// synced writes and pages/op the pages written per request; claim-p50-ms, claim-p99-ms and
// claim-max-ms are how long a Claim waited, which a checkpoint under way lengthens.
func BenchmarkFile(b *testing.B) {
	frame := []byte(`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"echo","arguments":{"text":"` +
		strings.Repeat("a", 1024) + `"}}}`)
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			j, err := OpenFile(filepath.Join(b.TempDir(), "journal.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			waits := make([]time.Duration, b.N)
			call := func(i int64) error {
				now := time.Now()
				c, err := j.Claim(context.Background(), mcpclient.JournalRecord{ID: mcpclient.StringID(uuid.NewString()),
					Method: "tools/call", Frame: frame, Server: "http://127.0.0.1:8080/json", State: mcpclient.StatePending,
					Open: true, Created: now, Updated: now, Receipts: mcpclient.ReceiptBinding{Scope: mcpclient.ReceiptScopeProcess, Epoch: "e"}})
				if err != nil {
					return err
				}
				waits[i] = time.Since(now)
				c.Settle(mcpclient.StateAnswered, true, 1)
				return nil
			}
			db0, commits0 := j.db.Stats(), j.commits.Load()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			var next atomic.Int64
			var wg sync.WaitGroup
			for range callers {
				wg.Go(func() {
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						if err := call(i - 1); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			cpu := cpuTime() - cpu0
			b.StopTimer()
			db1 := j.db.Stats()
			tx := db1.TxStats.Sub(&db0.TxStats)
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(j.commits.Load()-commits0)/float64(b.N), "syncs/op")
			b.ReportMetric(float64(tx.GetWrite())/float64(b.N), "pages/op")
			slices.Sort(waits)
			quantile := func(q float64) float64 {
				return float64(waits[int(q*float64(len(waits)-1))].Microseconds()) / 1000
			}
			b.ReportMetric(quantile(0.5), "claim-p50-ms")
			b.ReportMetric(quantile(0.99), "claim-p99-ms")
			b.ReportMetric(quantile(1), "claim-max-ms")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
