package journal_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/journal"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var echo = mcpclient.Tool{Name: "book", InputSchema: []byte(`{"type":"object"}`)}

func booked(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("booked " + string(call.Arguments))}}, nil
}

func openJournal(t *testing.T, path string, opts ...journal.Option) *journal.File {
	t.Helper()
	j, err := journal.OpenFile(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// connectThrough connects a client to tr with j as its journal, closed after t (before j, which
// openJournal's cleanup closes).
func connectThrough(t *testing.T, tr transport.Transport, j mcpclient.Journal, opts ...mcpclient.Option) *mcpclient.Client {
	t.Helper()
	c, err := mcpclient.Connect(context.Background(), tr, append([]mcpclient.Option{mcpclient.WithJournal(j)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// callInAnEarlierProcess calls tool "book" with args under id through the journal at path, as a
// process that then exits: its client and journal are closed before it returns.
func callInAnEarlierProcess(t *testing.T, srv *mcptest.HTTPServer, path string, args any, id mcpclient.ID) {
	t.Helper()
	j, err := journal.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	c, err := mcpclient.Connect(ctx, srv.Transport(), mcpclient.WithJournal(j))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CallTool(ctx, "book", args, mcpclient.WithRequestID(id)); err != nil {
		t.Fatal(err)
	}
}

// watched wraps t so that every request it sends is first looked up in j: fail says what was
// missing.
func watched(t transport.Transport, j *journal.File, missing *atomic.Int32) transport.Transport {
	return transport.DialFunc(func(ctx context.Context, r transport.Receiver) (transport.Conn, error) {
		conn, err := t.Connect(ctx, r)
		if err != nil {
			return nil, err
		}
		return &watchedConn{Conn: conn, j: j, missing: missing}, nil
	})
}

type watchedConn struct {
	transport.Conn
	j       *journal.File
	missing *atomic.Int32
}

func (c *watchedConn) Send(ctx context.Context, msg *transport.Message) error {
	if msg.Method == "tools/call" {
		var id mcpclient.ID
		if err := id.UnmarshalJSON([]byte(msg.ID)); err != nil {
			return err
		}
		if rec, ok, err := c.j.Lookup(ctx, id); err != nil || !ok || string(rec.Frame) != string(msg.Frame) {
			c.missing.Add(1)
		}
	}
	return c.Conn.Send(ctx, msg)
}

// Every tools/call is in the journal, with its exact bytes, before its first byte is sent, and
// settles there as answered.
func TestRecordedBeforeSent(t *testing.T) {
	srv := mcptest.NewHTTPServer(mcptest.WithTool(echo, booked))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "journal.db")
	j := openJournal(t, path)
	var missing atomic.Int32
	ctx := context.Background()
	c := connectThrough(t, watched(srv.Transport(), j, &missing), j, mcpclient.WithServerIdentity(srv.URL))
	req, err := c.NewRequest("tools/call", map[string]any{"name": "book", "arguments": map[string]any{"seat": "12A"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n := missing.Load(); n != 0 {
		t.Fatalf("%d sends went out before the journal held their bytes", n)
	}
	// The answer's state is written with the next write: Close writes what is queued.
	j.Close()
	j = openJournal(t, path)
	rec, ok, err := j.Lookup(ctx, req.ID())
	if err != nil || !ok {
		t.Fatalf("lookup after reopening: %v, %v", ok, err)
	}
	if rec.State != mcpclient.StateAnswered || rec.Attempts != 1 || rec.Fingerprint != req.Fingerprint() || rec.Server != srv.URL {
		t.Fatalf("record %+v", rec)
	}
	if rec.Receipts.Scope != mcpclient.ReceiptScopeProcess {
		t.Fatalf("receipts %v, want the server's process scope", rec.Receipts)
	}
}

// Concurrent callers share writes: 64 calls cost fewer syncs than one per change.
func TestGroupCommit(t *testing.T) {
	srv := mcptest.NewHTTPServer(mcptest.WithTool(echo, booked))
	defer srv.Close()
	j := openJournal(t, filepath.Join(t.TempDir(), "journal.db"))
	ctx := context.Background()
	c := connectThrough(t, srv.Transport(), j)
	before := j.Stats().Commits
	const callers = 64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-start
			if _, err := c.CallTool(ctx, "book", map[string]any{"n": i}); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	j.Close()
	st := j.Stats()
	// Without group commit each call takes two writes: its record, then its answer.
	if n := st.Commits - before; n >= 2*callers {
		t.Fatalf("%d writes for %d calls", n, callers)
	}
	if st.Requests != callers {
		t.Fatalf("%d requests recorded, want %d", st.Requests, callers)
	}
	t.Logf("%d writes for %d calls", st.Commits-before, callers)
}

// A pinned id used with other content in an earlier process is refused before anything is sent.
func TestReuseRefusedAcrossRestart(t *testing.T) {
	srv := mcptest.NewHTTPServer(mcptest.WithTool(echo, booked))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "journal.db")
	ctx := context.Background()
	id := mcpclient.StringID(uuid.NewString())
	callInAnEarlierProcess(t, srv, path, map[string]any{"seat": "1"}, id)
	j := openJournal(t, path)
	c := connectThrough(t, srv.Transport(), j)
	_, err := c.CallTool(ctx, "book", map[string]any{"seat": "2"}, mcpclient.WithRequestID(id))
	if !errors.Is(err, mcpclient.ErrRequestIDReused) {
		t.Fatalf("err = %v, want ErrRequestIDReused", err)
	}
	if n := srv.Executions("book"); n != 1 {
		t.Fatalf("%d executions, want 1", n)
	}
	if len(srv.Received(id)) != 1 {
		t.Fatalf("the server received the id %d times", len(srv.Received(id)))
	}
}

// A journal whose every request is unresolved refuses a new one, and never drops one of them.
func TestFullJournalRefuses(t *testing.T) {
	srv := mcptest.NewHTTPServer(mcptest.WithTool(echo, booked), mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "book", Times: 2}))
	defer srv.Close()
	j := openJournal(t, filepath.Join(t.TempDir(), "journal.db"), journal.WithCapacity(2))
	ctx := context.Background()
	c := connectThrough(t, srv.Transport(), j, mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{Mode: mcpclient.RetryNever}))
	var unknown []*mcpclient.Request
	for i := range 2 {
		_, err := c.CallTool(ctx, "book", map[string]any{"n": i})
		var e *mcpclient.Error
		if !errors.As(err, &e) || e.Code != mcpclient.CodeOutcomeUnknown {
			t.Fatalf("call %d: %v, want an unknown outcome", i, err)
		}
		unknown = append(unknown, e.Request)
	}
	_, err := c.CallTool(ctx, "book", map[string]any{"n": 3})
	if !errors.Is(err, mcpclient.ErrLedgerFull) {
		t.Fatalf("err = %v, want ErrLedgerFull", err)
	}
	if n := srv.Executions("book"); n != 2 {
		t.Fatalf("%d executions: the refused call was sent", n)
	}
	for _, req := range unknown {
		if rec, ok, _ := j.Lookup(ctx, req.ID()); !ok || rec.State != mcpclient.StateUncertain {
			t.Fatalf("unresolved request %s: %+v, %v", req.ID(), rec, ok)
		}
	}
	// Forgetting one makes room.
	if err := c.Ledger().Forget(unknown[0].ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CallTool(ctx, "book", map[string]any{"n": 4}); err != nil {
		t.Fatal(err)
	}
}

// Settled requests are pruned after the retention; unresolved ones stay however old.
func TestRetention(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		srv := mcptest.NewServer(mcptest.WithTool(echo, booked), mcptest.WithMode(mcptest.ModeNone),
			mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "book"}))
		defer srv.Close()
		j, err := journal.OpenFile(filepath.Join(dir, "journal.db"), journal.WithRetention(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		ctx := context.Background()
		c, err := mcpclient.Connect(ctx, srv.Transport(), mcpclient.WithJournal(j), mcpclient.WithServerIdentity("mem"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = c.CallTool(ctx, "book", map[string]any{"n": "lost"})
		var e *mcpclient.Error
		if !errors.As(err, &e) || e.Code != mcpclient.CodeOutcomeUnknown {
			t.Fatalf("%v, want an unknown outcome", err)
		}
		lost := e.Request.ID()
		answered, err := c.NewRequest("tools/call", map[string]any{"name": "book"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Do(ctx, answered); err != nil {
			t.Fatal(err)
		}
		time.Sleep(59 * time.Minute)
		c.Ping(ctx)
		if _, err := c.CallTool(ctx, "book", nil); err != nil { // a write, which prunes
			t.Fatal(err)
		}
		if _, ok, _ := j.Lookup(ctx, answered.ID()); !ok {
			t.Fatal("pruned before the retention")
		}
		time.Sleep(2 * time.Minute)
		if _, err := c.CallTool(ctx, "book", nil); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if _, ok, _ := j.Lookup(ctx, answered.ID()); ok {
			t.Fatal("kept after the retention")
		}
		if rec, ok, _ := j.Lookup(ctx, lost); !ok || rec.State != mcpclient.StateUncertain {
			t.Fatalf("the unresolved request: %+v, %v", rec, ok)
		}
	})
}

// A second process cannot open a journal file one holds.
func TestLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	openJournal(t, path)
	_, err := journal.OpenFile(path, journal.WithLockTimeout(50*time.Millisecond))
	if !errors.Is(err, journal.ErrLocked) {
		t.Fatalf("err = %v, want ErrLocked", err)
	}
}

// A pinned id answered in an earlier process is not sent again by a later one once the server
// restarted: no receipt of it is left, and the tool would run twice. The call is refused with
// the journal's record of the answer, nothing is sent, and the journal keeps it answered.
func TestAnsweredIDIsNotRerunAfterAServerRestart(t *testing.T) {
	srv := mcptest.NewHTTPServer(mcptest.WithTool(echo, booked))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "journal.db")
	ctx := context.Background()
	id := mcpclient.StringID(uuid.NewString())
	args := map[string]any{"seat": "1"}
	callInAnEarlierProcess(t, srv, path, args, id)
	before := srv.Server.ReceiptEpoch()
	srv.Server.Restart()
	received := len(srv.Server.Received(id))
	j := openJournal(t, path)
	c := connectThrough(t, srv.Transport(), j)
	_, err := c.CallTool(ctx, "book", args, mcpclient.WithRequestID(id))
	var answered *mcpclient.AnsweredError
	if !errors.Is(err, mcpclient.ErrAlreadyAnswered) || !errors.As(err, &answered) {
		t.Fatalf("err = %v, want ErrAlreadyAnswered with the record", err)
	}
	if answered.Record.ID != id || answered.Record.State != mcpclient.StateAnswered || answered.Record.Receipts.Epoch != before ||
		answered.Now.Epoch != srv.Server.ReceiptEpoch() {
		t.Fatalf("record %+v, now %v", answered.Record, answered.Now)
	}
	if n := len(srv.Server.Received(id)) - received; n != 0 {
		t.Fatalf("the restarted server received the request %d more times", n)
	}
	rec, ok, err := j.Lookup(ctx, id)
	if err != nil || !ok || rec.State != mcpclient.StateAnswered || rec.Open || rec.Receipts.Epoch != before {
		t.Fatalf("journal holds %+v (%v, %v), want it answered under the first epoch", rec, ok, err)
	}
}

// The same pinned id sent again while the server keeps its receipts re-reads the answer: the
// server answers from the receipt, and the tool does not run again.
func TestAnsweredIDIsReadBackUnderTheSameReceipts(t *testing.T) {
	var runs atomic.Int32
	srv := mcptest.NewHTTPServer(mcptest.WithTool(echo, func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		runs.Add(1)
		return booked(ctx, call)
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "journal.db")
	ctx := context.Background()
	id := mcpclient.StringID(uuid.NewString())
	args := map[string]any{"seat": "1"}
	callInAnEarlierProcess(t, srv, path, args, id)
	j := openJournal(t, path)
	c := connectThrough(t, srv.Transport(), j)
	if _, err := c.CallTool(ctx, "book", args, mcpclient.WithRequestID(id)); err != nil {
		t.Fatal(err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times", n)
	}
	if rec, ok, _ := j.Lookup(ctx, id); !ok || rec.State != mcpclient.StateAnswered || rec.Attempts != 2 {
		t.Fatalf("journal holds %+v", rec)
	}
}
