package postgres_test

import (
	"context"
	"fmt"
	"iter"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/journal"
	"github.com/northstar-mcp/mcpclient/journal/postgres"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// BenchmarkCalls measures tool calls a second against an mcptest server over HTTP on loopback,
// made by 1, 4 and 8 workers at once. A worker is a goroutine with a Client of its own, one call
// at a time; with the postgres journal each worker also has a Journal of its own (its own pool
// and lease name), as a worker process would. For comparison: no journal, and the File journal
// (one file, shared by the goroutines, since a file is one process's).
//
// Reported per call: the time Claim took (the synchronous commit a request waits for before it
// is sent), the time Settle took, and for the postgres journal the WAL syncs the server made.
func BenchmarkCalls(b *testing.B) {
	for _, kind := range []string{"none", "file", "postgres"} {
		for _, workers := range []int{1, 4, 8} {
			b.Run(fmt.Sprintf("journal=%s/workers=%d", kind, workers), func(b *testing.B) {
				if kind == "postgres" {
					needDB(b)
				}
				benchCalls(b, kind, workers)
			})
		}
	}
}

func benchCalls(b *testing.B, kind string, workers int) {
	// A server for each run, whose receipts hold every call the run makes.
	srv := mcptest.NewHTTPServer(mcptest.WithMaxReceipts(b.N+workers),
		mcptest.WithTool(mcpclient.Tool{Name: "book", InputSchema: []byte(`{"type":"object"}`)},
			func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
				return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("booked")}}, nil
			}))
	defer srv.Close()
	ctx := context.Background()
	var stats timings
	journals := make([]mcpclient.Journal, workers)
	switch kind {
	case "file":
		f, err := journal.OpenFile(filepath.Join(b.TempDir(), "journal.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		for i := range journals {
			journals[i] = &timedJournal{Journal: f, t: &stats}
		}
	case "postgres":
		table := newTable(b)
		for i := range journals {
			j := open(b, table, postgres.WithWorker(fmt.Sprint("w", i)))
			journals[i] = &timedJournal{Journal: j, t: &stats}
		}
	}
	clients := make([]*mcpclient.Client, workers)
	for i := range clients {
		opts := []mcpclient.Option{mcpclient.WithServerIdentity(srv.URL)}
		if journals[i] != nil {
			opts = append(opts, mcpclient.WithJournal(journals[i]))
		}
		c, err := mcpclient.Connect(ctx, srv.Transport(), opts...)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		clients[i] = c
	}
	syncs := walSyncs(b, kind)
	var left atomic.Int64
	left.Store(int64(b.N))
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if _, err := c.CallTool(ctx, "book", map[string]any{"seat": "12A"}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
	if kind != "none" {
		b.ReportMetric(float64(stats.claim.Load())/float64(b.N)/1e3, "claim-µs")
		b.ReportMetric(float64(stats.settle.Load())/float64(b.N)/1e3, "settle-µs")
	}
	if kind == "postgres" {
		b.ReportMetric(float64(walSyncs(b, kind)-syncs)/float64(b.N), "walsyncs/call")
	}
}

// walSyncs returns the WAL syncs the database server made so far.
func walSyncs(b *testing.B, kind string) int64 {
	if kind != "postgres" {
		return 0
	}
	var n int64
	if err := newPool(b).QueryRow(context.Background(), "SELECT wal_sync FROM pg_stat_wal").Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// timings add up the time spent in a journal's calls, in nanoseconds.
type timings struct{ claim, settle atomic.Int64 }

type timedJournal struct {
	mcpclient.Journal
	t *timings
}

func (j *timedJournal) Claim(ctx context.Context, rec mcpclient.JournalRecord) (mcpclient.JournalClaim, error) {
	start := time.Now()
	c, err := j.Journal.Claim(ctx, rec)
	j.t.claim.Add(int64(time.Since(start)))
	if err != nil {
		return nil, err
	}
	return &timedClaim{JournalClaim: c, t: j.t}, nil
}

func (j *timedJournal) Unresolved(ctx context.Context, server string) iter.Seq2[mcpclient.JournalRecord, error] {
	return j.Journal.Unresolved(ctx, server)
}

type timedClaim struct {
	mcpclient.JournalClaim
	t *timings
}

func (c *timedClaim) Settle(state mcpclient.State, reached bool, sent int) {
	start := time.Now()
	c.JournalClaim.Settle(state, reached, sent)
	c.t.settle.Add(int64(time.Since(start)))
}
