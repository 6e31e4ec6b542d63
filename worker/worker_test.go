package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/journal"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/worker"
)

// chargeServer serves a tool, charge, that counts its runs.
func chargeServer(t *testing.T, runs *atomic.Int32) *mcptest.Server {
	t.Helper()
	return mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "charge"}, func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		runs.Add(1)
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("charged")}}, nil
	}))
}

func openJournal(t *testing.T) *journal.File {
	t.Helper()
	j, err := journal.OpenFile(filepath.Join(t.TempDir(), "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// leaveUnresolved makes the charges of jobs as a process that dies mid-call leaves them: each
// ran on the server, its answer was lost, and the caller learned nothing more.
func leaveUnresolved(t *testing.T, srv *mcptest.Server, j mcpclient.Journal, jobs ...string) {
	t.Helper()
	c := mcptest.NewClient(t, srv, mcpclient.WithJournal(j), mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{Mode: mcpclient.RetryNever}))
	for _, job := range jobs {
		srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "charge"})
		_, err := c.CallTool(context.Background(), "charge", map[string]any{"job": job}, mcpclient.WithRequestID(mcpclient.IDFromKey("billing", job)))
		if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
			t.Fatalf("job %s: %v, want ErrOutcomeUnknown", job, err)
		}
	}
	if err := c.Detach(); err != nil {
		t.Fatal(err)
	}
}

// A pass resends what an earlier process left unresolved, under its id: the server answers
// from its receipt, and each charge ran once.
func TestPassResendsWhatAnEarlierProcessLeft(t *testing.T) {
	var runs atomic.Int32
	srv := chargeServer(t, &runs)
	j := openJournal(t)
	leaveUnresolved(t, srv, j, "a", "b")
	c := mcptest.NewClient(t, srv, mcpclient.WithJournal(j))
	var mu sync.Mutex
	seen := map[string]string{}
	s, err := worker.Pass(context.Background(), c, worker.WithHandler(func(ctx context.Context, job *worker.Job) error {
		mu.Lock()
		seen[job.Record.ID.String()] = job.Tool + " " + string(job.Arguments)
		mu.Unlock()
		if job.Err != nil {
			return fmt.Errorf("job %s: %w", job.Record.ID, job.Err)
		}
		resp, err := job.Resend(ctx)
		if err == nil && !resp.Replayed {
			return fmt.Errorf("job %s was answered by running it again", job.Record.ID)
		}
		return err
	}))
	if err != nil || s.Found != 2 || s.Handled != 2 {
		t.Fatalf("pass: %+v, %v; want 2 found and handled", s, err)
	}
	for _, job := range []string{"a", "b"} {
		id := mcpclient.IDFromKey("billing", job)
		if want := `charge {"job":"` + job + `"}`; seen[id.String()] != want {
			t.Errorf("job %s came to the handler as %q, want %q", job, seen[id.String()], want)
		}
		rec, ok, err := c.Journaled(context.Background(), id)
		if err != nil || !ok || rec.Unresolved() || rec.State != mcpclient.StateAnswered {
			t.Errorf("job %s after the pass: %+v, %v, %v; want it answered", job, rec, ok, err)
		}
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("the tool ran %d times for 2 jobs", n)
	}
	if s, err := worker.Pass(context.Background(), c); err != nil || s.Found != 0 {
		t.Fatalf("a second pass: %+v, %v; want nothing found", s, err)
	}
}

// A request whose resend could run it twice (the server restarted, and its receipts went with
// it) comes with ErrOutcomeUnknown, and the default handler leaves it for the program.
func TestPassLeavesWhatCouldRunTwice(t *testing.T) {
	var runs atomic.Int32
	srv := chargeServer(t, &runs)
	j := openJournal(t)
	leaveUnresolved(t, srv, j, "a")
	srv.Restart()
	c := mcptest.NewClient(t, srv, mcpclient.WithJournal(j))
	var reports []worker.Summary
	s, err := worker.Pass(context.Background(), c, worker.WithReport(func(s worker.Summary) { reports = append(reports, s) }))
	if err != nil || s.Found != 1 || s.Failed != 1 || s.Handled != 0 {
		t.Fatalf("pass: %+v, %v; want 1 found, left (failed)", s, err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times; the default handler must leave a request it could run twice", n)
	}
	if len(reports) != 1 || reports[0] != s {
		t.Fatalf("reported %+v, want the pass's summary once", reports)
	}
	rec, ok, err := c.Journaled(context.Background(), mcpclient.IDFromKey("billing", "a"))
	if err != nil || !ok || !rec.Unresolved() {
		t.Fatalf("the job after the pass: %+v, %v, %v; want it still unresolved", rec, ok, err)
	}
	var seen *worker.Job
	worker.Pass(context.Background(), c, worker.WithHandler(func(ctx context.Context, job *worker.Job) error {
		seen = job
		return nil
	}))
	if seen == nil || !errors.Is(seen.Err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("the handler saw %+v; want the job with ErrOutcomeUnknown", seen)
	}
}

// A handler's ErrRequestInFlight is another holder's claim: skipped, not failed.
func TestPassCountsAnotherHoldersClaimAsSkipped(t *testing.T) {
	var runs atomic.Int32
	srv := chargeServer(t, &runs)
	j := openJournal(t)
	leaveUnresolved(t, srv, j, "a", "b")
	c := mcptest.NewClient(t, srv, mcpclient.WithJournal(j))
	s, err := worker.Pass(context.Background(), c, worker.WithHandler(func(ctx context.Context, job *worker.Job) error {
		return fmt.Errorf("resending %s: %w", job.Record.ID, mcpclient.ErrRequestInFlight)
	}))
	if err != nil || s.Found != 2 || s.Skipped != 2 || s.Failed != 0 {
		t.Fatalf("pass: %+v, %v; want 2 skipped", s, err)
	}
}

// No more handlers run at once than the concurrency allows.
func TestPassBoundsConcurrency(t *testing.T) {
	var runs atomic.Int32
	srv := chargeServer(t, &runs)
	j := openJournal(t)
	jobs := make([]string, 9)
	for i := range jobs {
		jobs[i] = fmt.Sprint("job-", i)
	}
	leaveUnresolved(t, srv, j, jobs...)
	c := mcptest.NewClient(t, srv, mcpclient.WithJournal(j))
	var now, most atomic.Int32
	s, err := worker.Pass(context.Background(), c, worker.WithConcurrency(3), worker.WithHandler(func(ctx context.Context, job *worker.Job) error {
		n := now.Add(1)
		defer now.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(20 * time.Millisecond) // long beside the listing, so that handlers overlap
		return nil
	}))
	if err != nil || s.Handled != 9 {
		t.Fatalf("pass: %+v, %v", s, err)
	}
	if m := most.Load(); m != 3 {
		t.Fatalf("%d handlers ran at once, want 3", m)
	}
}

// Run passes at once, then every interval, and returns when its context ends, its handlers
// done.
func TestRunPassesEveryIntervalUntilTheContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int32
		srv := chargeServer(t, &runs)
		j := openJournal(t)
		c := mcptest.NewClient(t, srv, mcpclient.WithJournal(j))
		ctx, cancel := context.WithCancel(context.Background())
		reports := make(chan worker.Summary, 10)
		done := make(chan error, 1)
		go func() {
			done <- worker.Run(ctx, c, worker.WithInterval(time.Minute), worker.WithReport(func(s worker.Summary) { reports <- s }))
		}()
		synctest.Wait()
		if len(reports) != 1 {
			t.Fatalf("%d passes at the start, want 1", len(reports))
		}
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if len(reports) != 1 {
			t.Fatalf("%d passes before the interval, want 1", len(reports))
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if len(reports) != 2 {
			t.Fatalf("%d passes after the interval, want 2", len(reports))
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run ended with %v, want nil once its context ended", err)
		}
	})
}

// Options Run cannot use, and a client with no journal, end it at once.
func TestRunRefusesWhatItCannotUse(t *testing.T) {
	var runs atomic.Int32
	srv := chargeServer(t, &runs)
	c := mcptest.NewClient(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := worker.Run(ctx, c); err == nil || ctx.Err() != nil {
		t.Fatalf("Run of a client with no journal: %v; want an error at once", err)
	}
	j := openJournal(t)
	cj := mcptest.NewClient(t, srv, mcpclient.WithJournal(j))
	for _, opt := range []worker.Option{worker.WithConcurrency(0), worker.WithInterval(0), worker.WithHandler(nil), worker.WithLogger(nil)} {
		if err := worker.Run(ctx, cj, opt); err == nil {
			t.Errorf("Run accepted an option it cannot use")
		}
		if _, err := worker.Pass(ctx, cj, opt); err == nil {
			t.Errorf("Pass accepted an option it cannot use")
		}
	}
}

// A job's Arguments are the JSON object the call sent.
func TestJobArgumentsAreTheCallsArguments(t *testing.T) {
	var runs atomic.Int32
	srv := chargeServer(t, &runs)
	j := openJournal(t)
	leaveUnresolved(t, srv, j, "x")
	c := mcptest.NewClient(t, srv, mcpclient.WithJournal(j))
	var args map[string]any
	worker.Pass(context.Background(), c, worker.WithHandler(func(ctx context.Context, job *worker.Job) error {
		return json.Unmarshal(job.Arguments, &args)
	}))
	if args["job"] != "x" {
		t.Fatalf("arguments %v", args)
	}
}
