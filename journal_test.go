package mcpclient_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// scriptedJournal is a Journal in memory whose claims can be refused or lost, to see what the
// client makes of a journal that fails.
type scriptedJournal struct {
	mu     sync.Mutex
	refuse error // returned by the next Claim
	// refuseForget is returned by every Forget while set.
	refuseForget error
	lose         bool // claims are lost as soon as they are made
	records      map[string]mcpclient.JournalRecord
	rebinds      map[string][]mcpclient.ReceiptBinding
	settled      map[string]mcpclient.State
}

func newScriptedJournal() *scriptedJournal {
	return &scriptedJournal{records: map[string]mcpclient.JournalRecord{}, settled: map[string]mcpclient.State{},
		rebinds: map[string][]mcpclient.ReceiptBinding{}}
}

func (j *scriptedJournal) Claim(ctx context.Context, rec mcpclient.JournalRecord) (mcpclient.JournalClaim, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.refuse; err != nil {
		j.refuse = nil
		return nil, err
	}
	prior, known := j.records[rec.ID.JSON()]
	if known {
		// Kept as it was, as a journal keeps a known id's state and the receipts of its last
		// send; only opened.
		open := prior
		open.Open = true
		j.records[rec.ID.JSON()] = open
	} else {
		j.records[rec.ID.JSON()] = rec
	}
	lost := make(chan struct{})
	if j.lose {
		close(lost)
	}
	return &scriptedClaim{j: j, key: rec.ID.JSON(), lost: lost, prior: prior, known: known}, nil
}

func (j *scriptedJournal) Unresolved(ctx context.Context, server string) iter.Seq2[mcpclient.JournalRecord, error] {
	return func(yield func(mcpclient.JournalRecord, error) bool) {}
}

func (j *scriptedJournal) Forget(ctx context.Context, id mcpclient.ID) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.refuseForget != nil {
		return j.refuseForget
	}
	delete(j.records, id.JSON())
	return nil
}

type scriptedClaim struct {
	j     *scriptedJournal
	key   string
	lost  chan struct{}
	prior mcpclient.JournalRecord
	known bool
}

func (c *scriptedClaim) Prior() (mcpclient.JournalRecord, bool) { return c.prior, c.known }

func (c *scriptedClaim) Rebind(ctx context.Context, b mcpclient.ReceiptBinding) error {
	c.j.mu.Lock()
	defer c.j.mu.Unlock()
	c.j.rebinds[c.key] = append(c.j.rebinds[c.key], b)
	rec := c.j.records[c.key]
	rec.Receipts = b
	c.j.records[c.key] = rec
	return nil
}

func (c *scriptedClaim) Settle(state mcpclient.State, reached bool, sent int) {
	c.j.mu.Lock()
	defer c.j.mu.Unlock()
	c.j.settled[c.key] = state
	rec := c.j.records[c.key]
	rec.State, rec.Reached, rec.Open = state, rec.Reached || reached, false
	c.j.records[c.key] = rec
}

func (c *scriptedClaim) Lost() <-chan struct{} { return c.lost }

// A request the journal does not record is not sent, and the error says why; the ledger is left
// as it was, so that the same request can go once the journal takes it.
func TestJournalRefusalSendsNothing(t *testing.T) {
	var k counter
	srv := mcptest.NewServer(mcptest.WithTool(mcpclient.Tool{Name: "book"}, k.tool))
	defer srv.Close()
	j := newScriptedJournal()
	c := connect(t, srv.Transport(), mcpclient.WithJournal(j))
	ctx := testCtx(t)
	for _, tc := range []struct {
		refusal error
		want    error
	}{
		{errors.New("disk full"), mcpclient.ErrJournal},
		{mcpclient.ErrLedgerFull, mcpclient.ErrLedgerFull},
		{mcpclient.ErrRequestInFlight, mcpclient.ErrRequestInFlight},
	} {
		req := callReq(t, c, "book", nil)
		j.refuse = tc.refusal
		runs := k.runs
		_, err := c.Do(ctx, req)
		if !errors.Is(err, tc.want) || asError(t, err).Request != req {
			t.Fatalf("refused with %v: err = %v, want %v naming the request", tc.refusal, err, tc.want)
		}
		if k.runs != runs || len(srv.Received(req.ID())) != 0 {
			t.Fatalf("refused with %v: the request was sent", tc.refusal)
		}
		if _, ok := c.Ledger().Lookup(req.ID()); ok {
			t.Fatalf("refused with %v: the ledger keeps a request that was never sent", tc.refusal)
		}
		if _, err := c.Do(ctx, req); err != nil {
			t.Fatalf("once the journal takes it: %v", err)
		}
		if j.settled[req.ID().JSON()] != mcpclient.StateAnswered {
			t.Fatalf("settled %v", j.settled[req.ID().JSON()])
		}
	}
}

// A claim that lapses before the send (another worker may own the id now) stops the attempt.
func TestJournalLostClaimSendsNothing(t *testing.T) {
	var k counter
	srv := mcptest.NewServer(mcptest.WithTool(mcpclient.Tool{Name: "book"}, k.tool))
	defer srv.Close()
	j := newScriptedJournal()
	j.lose = true
	c := connect(t, srv.Transport(), mcpclient.WithJournal(j))
	req := callReq(t, c, "book", nil)
	_, err := c.Do(testCtx(t), req)
	if !errors.Is(err, mcpclient.ErrJournal) || k.runs != 0 {
		t.Fatalf("err = %v, %d runs", err, k.runs)
	}
}

// The receipts a request goes out under are in its record; a send under other receipts than
// those recorded (a new session with another scope) is recorded first.
func TestJournalRebindsOnNewReceipts(t *testing.T) {
	var k counter
	srv := mcptest.NewServer(mcptest.WithTool(mcpclient.Tool{Name: "book"}, k.tool))
	defer srv.Close()
	j := newScriptedJournal()
	c := connect(t, srv.Transport(), mcpclient.WithJournal(j), noWait)
	req := callReq(t, c, "book", nil)
	if _, err := c.Do(testCtx(t), req); err != nil {
		t.Fatal(err)
	}
	rec := j.records[req.ID().JSON()]
	if rec.Receipts.Scope != mcpclient.ReceiptScopeProcess || string(rec.Frame) != string(req.Bytes()) || len(j.rebinds) != 0 {
		t.Fatalf("record %+v, rebinds %v", rec, j.rebinds)
	}
	// The session expires before the next call's first send: the new session is asked for
	// anew, and its receipts are the same, so nothing more is written.
	srv.Inject(mcptest.Fault{Kind: mcptest.ExpireSession, Tool: "book"})
	if _, err := c.CallTool(testCtx(t), "book", nil); err != nil {
		t.Fatal(err)
	}
	if len(j.rebinds) != 0 {
		t.Fatalf("rebinds %v for unchanged receipts", j.rebinds)
	}
}

// A Supersede the journal refuses leaves the request it was to replace as it was: unresolved,
// replaced by nothing, and free to be superseded once the journal takes the replacement.
func TestJournalRefusedSupersedeKeepsTheOriginal(t *testing.T) {
	var k counter
	srv := mcptest.NewServer(mcptest.WithTool(mcpclient.Tool{Name: "book"}, k.tool), mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "book"}))
	defer srv.Close()
	j := newScriptedJournal()
	c := connect(t, srv.Transport(), mcpclient.WithJournal(j))
	ctx := testCtx(t)
	_, err := c.CallTool(ctx, "book", map[string]any{"room": 12})
	lost := asError(t, err).Request
	insp := mcpclient.Inspection{Checked: "bookings", Found: "none for room 12"}
	j.refuse = errors.New("disk full")
	if _, err := c.SupersedeToolCall(ctx, lost, insp, map[string]any{"room": 14}); !errors.Is(err, mcpclient.ErrJournal) {
		t.Fatalf("err = %v, want ErrJournal", err)
	}
	if e, _ := c.Ledger().Lookup(lost.ID()); e.State != mcpclient.StateUncertain || !e.SupersededBy.IsZero() {
		t.Fatalf("the original after a refused Supersede: %+v", e)
	}
	if _, err := c.SupersedeToolCall(ctx, lost, insp, map[string]any{"room": 14}); err != nil {
		t.Fatal(err)
	}
	if k.runs != 2 {
		t.Fatalf("%d runs, want 2", k.runs)
	}
}

// A known id claimed again keeps the receipts of its last send in the journal; the first send
// of the new attempt loop records its own, whatever the session at hand declares.
func TestJournalResendRecordsItsReceipts(t *testing.T) {
	var k counter
	srv := mcptest.NewServer(mcptest.WithTool(mcpclient.Tool{Name: "book"}, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "book"}))
	defer srv.Close()
	j := newScriptedJournal()
	c := connect(t, srv.Transport(), mcpclient.WithJournal(j), mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{Mode: mcpclient.RetryNever}))
	ctx := testCtx(t)
	req := callReq(t, c, "book", nil)
	if _, err := c.Do(ctx, req); !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("err = %v, want ErrOutcomeUnknown", err)
	}
	srv.Restart()
	c.Ping(ctx)                         // the session is found gone, and the client sends nothing more on it
	if err := c.Ping(ctx); err != nil { // the client meets the new epoch
		t.Fatal(err)
	}
	// The caller inspected, found nothing, and re-sends the same bytes: its decision.
	if _, err := c.Resend(ctx, req); err != nil {
		t.Fatal(err)
	}
	if r := j.rebinds[req.ID().JSON()]; len(r) != 1 || r[0].Epoch != srv.ReceiptEpoch() {
		t.Fatalf("rebinds %v, want the new epoch %q recorded once", r, srv.ReceiptEpoch())
	}
}

func TestJournalRecordUnresolved(t *testing.T) {
	for state, want := range map[mcpclient.State]bool{
		mcpclient.StatePending: true, mcpclient.StateUncertain: true, mcpclient.StateConflict: true,
		mcpclient.StateAnswered: false, mcpclient.StateFailed: false,
	} {
		rec := mcpclient.JournalRecord{State: state}
		if rec.Unresolved() != want {
			t.Errorf("%v: unresolved %v", state, !want)
		}
		rec.SupersededBy = mcpclient.StringID("next")
		if rec.Unresolved() {
			t.Errorf("%v superseded: unresolved", state)
		}
	}
}

// Forget asks the journal first: an id the journal will not forget (another worker holds it)
// stays guarded in the ledger too, its bytes still bound to its id.
func TestLedgerForgetKeepsWhatTheJournalKeeps(t *testing.T) {
	var k counter
	srv := mcptest.NewServer(mcptest.WithTool(mcpclient.Tool{Name: "book"}, k.tool), mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "book"}))
	defer srv.Close()
	j := newScriptedJournal()
	c := connect(t, srv.Transport(), mcpclient.WithJournal(j))
	_, err := c.CallTool(testCtx(t), "book", map[string]any{"room": 12})
	lost := asError(t, err).Request
	j.refuseForget = fmt.Errorf("%w: another worker holds it", mcpclient.ErrRequestInFlight)
	if err := c.Ledger().Forget(lost.ID()); !errors.Is(err, mcpclient.ErrRequestInFlight) {
		t.Fatalf("Forget refused by the journal: %v, want ErrRequestInFlight", err)
	}
	if e, ok := c.Ledger().Lookup(lost.ID()); !ok || e.State != mcpclient.StateUncertain {
		t.Fatalf("the ledger after the journal's refusal: %+v, %v", e, ok)
	}
	j.refuseForget = nil
	if err := c.Ledger().Forget(lost.ID()); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Ledger().Lookup(lost.ID()); ok {
		t.Fatal("forgotten, yet in the ledger")
	}
}
