package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/journal/postgres"
	"github.com/northstar-mcp/mcpclient/mcptest"
	workerkit "github.com/northstar-mcp/mcpclient/worker"
)

// Two workers sharing the journal run their recovery passes at once over what a dead worker
// left: each request is resent by one of them, or answered from the receipt to both, and none
// runs a second time; what one holds when the other reaches it is skipped, not failed.
func TestWorkerPassesShareTheJournal(t *testing.T) {
	table := newTable(t)
	var runs atomic.Int32
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "charge"}, func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		runs.Add(1)
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("charged")}}, nil
	}))
	const jobs = 24
	dead := mcptest.NewClient(t, srv, mcpclient.WithJournal(open(t, table, postgres.WithWorker("dead"))),
		mcpclient.WithServerIdentity("billing"), mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{Mode: mcpclient.RetryNever}))
	for i := range jobs {
		srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "charge"})
		_, err := dead.CallTool(context.Background(), "charge", map[string]any{"job": i},
			mcpclient.WithRequestID(mcpclient.IDFromKey("billing", fmt.Sprint("job-", i))))
		if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
			t.Fatalf("job %d: %v, want ErrOutcomeUnknown", i, err)
		}
	}
	dead.Detach()

	var wg sync.WaitGroup
	sums := make([]workerkit.Summary, 2)
	for w := range sums {
		c := mcptest.NewClient(t, srv, mcpclient.WithJournal(open(t, table, postgres.WithWorker(fmt.Sprint("w", w)))),
			mcpclient.WithServerIdentity("billing"))
		wg.Go(func() {
			var err error
			if sums[w], err = workerkit.Pass(context.Background(), c, workerkit.WithConcurrency(4)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	var found, done int
	for _, s := range sums {
		if s.Failed != 0 {
			t.Errorf("a worker's pass failed %d: %+v", s.Failed, s)
		}
		found += s.Found
		done += s.Handled + s.Skipped
	}
	t.Logf("passes: %+v", sums)
	if found < jobs || done != found {
		t.Fatalf("the passes found %d and handled or skipped %d of %d requests", found, done, jobs)
	}
	if n := runs.Load(); n != jobs {
		t.Fatalf("the tool ran %d times for %d jobs", n, jobs)
	}
	j := open(t, table)
	for i := range jobs {
		rec, ok, err := j.Lookup(context.Background(), mcpclient.IDFromKey("billing", fmt.Sprint("job-", i)))
		if err != nil || !ok || rec.State != mcpclient.StateAnswered || rec.Open {
			t.Errorf("job %d: %+v, %v, %v; want it answered", i, rec, ok, err)
		}
	}
}
