package journal_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/journal"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// A process's call of a pinned id starts from what the journal holds of the id, as a call in the
// same process starts from what the ledger holds: the tests below run each sequence across two
// processes (a client and journal closed, then new ones on the same file) and want the outcome
// one process would give.

// earlierCall calls tool "book" with args under id, as a process that then exits, and returns the
// call's error.
func earlierCall(t *testing.T, srv *mcptest.HTTPServer, path string, args any, id mcpclient.ID, ctx context.Context, opts ...mcpclient.Option) error {
	t.Helper()
	j, err := journal.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	c, err := mcpclient.Connect(context.Background(), srv.Transport(), append([]mcpclient.Option{mcpclient.WithJournal(j)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.CallTool(ctx, "book", args, mcpclient.WithRequestID(id))
	return err
}

func counted(runs *atomic.Int32) mcptest.ToolFunc {
	return func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		runs.Add(1)
		return booked(ctx, call)
	}
}

var never = mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{Mode: mcpclient.RetryNever})

// An id left uncertain by an earlier process, whose every attempt in the next one is refused
// before it is read (503 with Retry-After), stays unknown: it ran, and the journal keeps it
// uncertain, for the next recovery to report again.
func TestUncertainIDStaysUncertainInALaterProcess(t *testing.T) {
	var runs atomic.Int32
	srv := mcptest.NewHTTPServer(mcptest.WithTool(echo, counted(&runs)), mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "book"}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "journal.db")
	id := mcpclient.StringID(uuid.NewString())
	args := map[string]any{"seat": "1"}
	if err := earlierCall(t, srv, path, args, id, context.Background(), never); !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("earlier process: %v, want ErrOutcomeUnknown", err)
	}
	srv.Server.Inject(mcptest.Fault{Kind: mcptest.Fail, Tool: "book", Times: -1, RetryAfter: time.Millisecond})
	j := openJournal(t, path)
	c := connectThrough(t, srv.Transport(), j, mcpclient.WithRetryPolicy(mcptest.FastRetryPolicy()))
	_, err := c.CallTool(context.Background(), "book", args, mcpclient.WithRequestID(id))
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("later process: %v, want ErrOutcomeUnknown: the request ran once already", err)
	}
	rec, ok, err := j.Lookup(context.Background(), id)
	if err != nil || !ok || rec.State != mcpclient.StateUncertain || !rec.Reached || rec.Open || !rec.Unresolved() {
		t.Fatalf("journal holds %+v (%v, %v), want it uncertain and reached", rec, ok, err)
	}
	var recovered int
	for r, err := range c.Recover(context.Background()) {
		if r.Record.ID == id && errors.Is(err, mcpclient.ErrOutcomeUnknown) {
			recovered++
		}
	}
	if recovered != 1 || runs.Load() != 1 {
		t.Fatalf("recovered %d times, ran %d times", recovered, runs.Load())
	}
}

// An id answered in an earlier process and re-read in the next, whose every attempt is refused
// before it is read, stays answered in the journal: a re-read that failed does not undo an
// answer.
func TestAnsweredIDStaysAnsweredWhenItsRereadIsNotDelivered(t *testing.T) {
	var runs atomic.Int32
	srv := mcptest.NewHTTPServer(mcptest.WithTool(echo, counted(&runs)))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "journal.db")
	id := mcpclient.StringID(uuid.NewString())
	args := map[string]any{"seat": "1"}
	if err := earlierCall(t, srv, path, args, id, context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.Server.Inject(mcptest.Fault{Kind: mcptest.Fail, Tool: "book", Times: -1, RetryAfter: time.Millisecond})
	j := openJournal(t, path)
	c := connectThrough(t, srv.Transport(), j, mcpclient.WithRetryPolicy(mcptest.FastRetryPolicy()))
	if _, err := c.CallTool(context.Background(), "book", args, mcpclient.WithRequestID(id)); !errors.Is(err, mcpclient.ErrNotDelivered) {
		t.Fatalf("later process: %v, want ErrNotDelivered", err)
	}
	rec, ok, err := j.Lookup(context.Background(), id)
	if err != nil || !ok || rec.State != mcpclient.StateAnswered || rec.Open {
		t.Fatalf("journal holds %+v (%v, %v), want it answered", rec, ok, err)
	}
	if runs.Load() != 1 {
		t.Fatalf("ran %d times", runs.Load())
	}
}

// An id an earlier process sent, still running at a server that refuses an id in flight (400
// with -32600, as the Go SDK does), is refused as in flight when the next process sends it: the
// refusal is the server recognizing the id, not the answer of a first send.
func TestIDStillRunningIsInFlightInALaterProcess(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	srv := mcptest.NewHTTPServer(mcptest.WithMode(mcptest.ModeInFlightRefusal), mcptest.WithInFlightStatus(400),
		mcptest.WithTool(echo, func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			started <- struct{}{}
			<-release
			return booked(ctx, call)
		}))
	defer srv.Close()
	defer close(release) // before the server closes, which waits for the tool
	path := filepath.Join(t.TempDir(), "journal.db")
	id := mcpclient.StringID(uuid.NewString())
	args := map[string]any{"seat": "1"}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	if err := earlierCall(t, srv, path, args, id, ctx, never); !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("earlier process: %v, want ErrOutcomeUnknown", err)
	}
	j := openJournal(t, path)
	c := connectThrough(t, srv.Transport(), j, never)
	if _, err := c.CallTool(context.Background(), "book", args, mcpclient.WithRequestID(id)); !errors.Is(err, mcpclient.ErrRequestInFlight) {
		t.Fatalf("later process: %v, want ErrRequestInFlight", err)
	}
	if rec, _, _ := j.Lookup(context.Background(), id); rec.State != mcpclient.StateConflict || !rec.Unresolved() {
		t.Fatalf("journal holds %+v, want it in conflict, unresolved", rec)
	}
}

// recoverOne returns the one request the client recovers.
func recoverOne(t *testing.T, c *mcpclient.Client) *mcpclient.Request {
	t.Helper()
	var got *mcpclient.Request
	for r, err := range c.Recover(context.Background()) {
		if r.Request == nil {
			t.Fatalf("recovered %+v: %v", r.Record, err)
		}
		if got != nil {
			t.Fatalf("recovered %v and %v", got.ID(), r.Request.ID())
		}
		got = r.Request
	}
	if got == nil {
		t.Fatal("nothing recovered")
	}
	return got
}

// A recovered request is superseded once: a second Supersede of it, and a Resend of it, are
// refused with ErrAlreadySuperseded naming the replacement, nothing is sent, and the journal
// keeps its link to the first replacement.
func TestRecoveredRequestIsSupersededOnce(t *testing.T) {
	var runs atomic.Int32
	srv := mcptest.NewHTTPServer(mcptest.WithTool(echo, counted(&runs)), mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "book"}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "journal.db")
	id := mcpclient.StringID(uuid.NewString())
	if err := earlierCall(t, srv, path, map[string]any{"seat": "1"}, id, context.Background(), never); !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("earlier process: %v", err)
	}
	j := openJournal(t, path)
	c := connectThrough(t, srv.Transport(), j, never)
	ctx := context.Background()
	lost := recoverOne(t, c)
	insp := mcpclient.Inspection{Checked: "bookings", Found: "none for seat 1"}
	first, err := c.SupersedeToolCall(ctx, lost, insp, map[string]any{"seat": "2"})
	if err != nil {
		t.Fatal(err)
	}
	_ = first
	rec, _, _ := j.Lookup(ctx, id)
	replacement := rec.SupersededBy
	if replacement.IsZero() {
		t.Fatalf("journal holds %+v, want it superseded", rec)
	}
	ranBefore := runs.Load()
	if _, err := c.SupersedeToolCall(ctx, lost, insp, map[string]any{"seat": "3"}); !errors.Is(err, mcpclient.ErrAlreadySuperseded) {
		t.Fatalf("second Supersede: %v, want ErrAlreadySuperseded", err)
	}
	if _, err := c.Resend(ctx, lost); !errors.Is(err, mcpclient.ErrAlreadySuperseded) {
		t.Fatalf("Resend of the superseded request: %v, want ErrAlreadySuperseded", err)
	}
	if runs.Load() != ranBefore {
		t.Fatalf("the refused calls ran the tool %d more times", runs.Load()-ranBefore)
	}
	if rec, _, _ := j.Lookup(ctx, id); rec.SupersededBy != replacement {
		t.Fatalf("the journal's link moved from %v to %v", replacement, rec.SupersededBy)
	}
}

// A request one client resends cannot be superseded through another client sharing the File
// meanwhile: the replacement would run beside the resend.
func TestSupersedeOfARequestAnotherClientHoldsIsRefused(t *testing.T) {
	release := make(chan struct{})
	resending := make(chan struct{})
	var runs atomic.Int32
	srv := mcptest.NewHTTPServer(mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "book"}),
		mcptest.WithTool(echo, func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			if runs.Add(1) == 2 { // the resend
				close(resending)
				<-release
			}
			return booked(ctx, call)
		}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "journal.db")
	id := mcpclient.StringID(uuid.NewString())
	ctx := context.Background()
	if err := earlierCall(t, srv, path, map[string]any{"seat": "1"}, id, ctx, never); !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("earlier process: %v", err)
	}
	j := openJournal(t, path)
	a := connectThrough(t, srv.Transport(), j, never)
	b := connectThrough(t, srv.Transport(), j, never)
	fromA, fromB := recoverOne(t, a), recoverOne(t, b)
	done := make(chan error, 1)
	go func() {
		_, err := a.Resend(ctx, fromA)
		done <- err
	}()
	<-resending
	insp := mcpclient.Inspection{Checked: "bookings", Found: "none for seat 1"}
	_, err := b.SupersedeToolCall(ctx, fromB, insp, map[string]any{"seat": "2"})
	close(release)
	if !errors.Is(err, mcpclient.ErrRequestInFlight) {
		t.Fatalf("Supersede while another client resends it: %v, want ErrRequestInFlight", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the resend: %v", err)
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("the tool ran %d times, want 2 (the first call and the resend the caller chose)", n)
	}
}

// Recover run while this process's calls come and go reports none of them: a call answered
// while the journal was read is no earlier process's request to recover.
func TestRecoverReportsNoLiveCallOfThisProcess(t *testing.T) {
	srv := mcptest.NewHTTPServer(mcptest.WithTool(echo, booked))
	defer srv.Close()
	j := openJournal(t, filepath.Join(t.TempDir(), "journal.db"))
	c := connectThrough(t, srv.Transport(), j)
	ctx := context.Background()
	stop := make(chan struct{})
	calls := make(chan error, 4)
	var answered atomic.Int32
	for range 4 {
		go func() {
			for {
				select {
				case <-stop:
					calls <- nil
					return
				default:
				}
				if _, err := c.CallTool(ctx, "book", map[string]any{"seat": uuid.NewString()}); err != nil {
					calls <- err
					return
				}
				answered.Add(1)
			}
		}()
	}
	var reported []mcpclient.ID
	for answered.Load() < 400 {
		for r, err := range c.Recover(ctx) {
			reported = append(reported, r.Record.ID)
			t.Logf("recovered %v: %v", r.Record.ID, err)
		}
	}
	close(stop)
	for range 4 {
		if err := <-calls; err != nil {
			t.Fatal(err)
		}
	}
	if len(reported) != 0 {
		t.Fatalf("Recover reported %d calls of this process, %v first", len(reported), reported[0])
	}
}
