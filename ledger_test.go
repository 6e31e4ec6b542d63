package mcpclient_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

func ledgerTool(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("ok " + string(call.Arguments))}}, nil
}

func TestLedgerEntryOfAnsweredRequest(t *testing.T) {
	ctx := context.Background()
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "t"}, ledgerTool))
	c := mcptest.NewClient(t, srv, noWait)

	cases := []struct {
		name     string
		drops    int // replies lost after execution before the answer gets through
		attempts int
	}{
		{"first attempt answered", 0, 1},
		{"answered after a lost reply", 1, 2},
		{"answered after two lost replies", 2, 3},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.drops > 0 {
				srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "t", Times: tc.drops})
			}
			req := callReq(t, c, "t", map[string]int{"n": i})
			if _, ok := c.Ledger().Lookup(req.ID()); ok {
				t.Fatal("NewRequest alone made a ledger entry")
			}
			resp, err := c.Do(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Attempts != tc.attempts {
				t.Errorf("Response.Attempts = %d, want %d", resp.Attempts, tc.attempts)
			}
			e, ok := c.Ledger().Lookup(req.ID())
			if !ok {
				t.Fatal("no ledger entry for an answered request")
			}
			if e.ID != req.ID() {
				t.Errorf("entry id %s, want %s", e.ID.JSON(), req.ID().JSON())
			}
			if e.State != mcpclient.StateAnswered {
				t.Errorf("state %v, want answered", e.State)
			}
			if e.Attempts != tc.attempts {
				t.Errorf("entry attempts %d, want %d", e.Attempts, tc.attempts)
			}
			if got := len(srv.Received(req.ID())); got != e.Attempts {
				t.Errorf("entry attempts %d, server received %d frames", e.Attempts, got)
			}
			if e.Method != "tools/call" {
				t.Errorf("method %q", e.Method)
			}
			if e.Fingerprint != req.Fingerprint() {
				t.Errorf("entry fingerprint %s, request's %s", e.Fingerprint, req.Fingerprint())
			}
			if sum := sha256.Sum256(req.Bytes()); mcpclient.Fingerprint(sum) != req.Fingerprint() {
				t.Errorf("Fingerprint %s is not the SHA-256 of Bytes (%x)", req.Fingerprint(), sum)
			}
			if len(e.Fingerprint.String()) != 64 {
				t.Errorf("Fingerprint.String() = %q, want 64 hex digits", e.Fingerprint.String())
			}
			if e.Created.IsZero() || e.Updated.Before(e.Created) {
				t.Errorf("created %v, updated %v", e.Created, e.Updated)
			}
			if !e.Supersedes.IsZero() || !e.SupersededBy.IsZero() {
				t.Errorf("supersedes %s, superseded by %s; want neither", e.Supersedes.JSON(), e.SupersededBy.JSON())
			}
		})
	}

	t.Run("fingerprints tell content apart", func(t *testing.T) {
		a, b := callReq(t, c, "t", map[string]int{"n": 1}), callReq(t, c, "t", map[string]int{"n": 2})
		if a.Fingerprint() == b.Fingerprint() {
			t.Fatal("two requests with different ids and params share a fingerprint")
		}
	})
}

func TestLedgerRequestBytesAreACopy(t *testing.T) {
	ctx := context.Background()
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "t"}, ledgerTool))
	c := mcptest.NewClient(t, srv)

	req := callReq(t, c, "t", map[string]int{"n": 7})
	orig := req.Bytes()
	fp := req.Fingerprint()
	params := req.Params()

	scribble := req.Bytes()
	for i := range scribble {
		scribble[i] = 'X'
	}
	p := req.Params()
	for i := range p {
		p[i] = 'Y'
	}
	if !bytes.Equal(req.Bytes(), orig) {
		t.Fatalf("mutating Bytes() changed the request: %s", req.Bytes())
	}
	if !bytes.Equal(req.Params(), params) {
		t.Fatalf("mutating Params() changed the request: %s", req.Params())
	}
	if req.Fingerprint() != fp || req.Fingerprint() != sha256.Sum256(orig) {
		t.Fatal("fingerprint changed after mutating a copy of the bytes")
	}
	if _, err := c.Do(ctx, req); err != nil {
		t.Fatal(err)
	}
	got := srv.Received(req.ID())
	if len(got) != 1 || !bytes.Equal(got[0], orig) {
		t.Fatalf("server received %q, want the original bytes %q", got, orig)
	}
	if e, _ := c.Ledger().Lookup(req.ID()); e.Fingerprint != fp {
		t.Fatal("ledger fingerprint differs from the request's")
	}

	// The caller's params are serialized once: changing them afterwards changes nothing.
	raw := json.RawMessage(`{"name":"t","arguments":{"n":1}}`)
	args := map[string]int{"n": 2}
	fromRaw, err := c.NewRequest("tools/call", raw)
	if err != nil {
		t.Fatal(err)
	}
	fromMap, err := c.NewRequest("tools/call", mcpclient.CallToolParams{Name: "t", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	rawBytes, mapBytes := fromRaw.Bytes(), fromMap.Bytes()
	copy(raw[len(raw)-3:], "9}}")
	args["n"] = 9
	if !bytes.Equal(fromRaw.Bytes(), rawBytes) || !bytes.Equal(fromMap.Bytes(), mapBytes) {
		t.Fatalf("requests changed with the caller's params:\n%s\n%s", fromRaw.Bytes(), fromMap.Bytes())
	}
	for _, r := range []*mcpclient.Request{fromRaw, fromMap} {
		if _, err := c.Do(ctx, r); err != nil {
			t.Fatal(err)
		}
		if got := srv.Received(r.ID()); len(got) != 1 || !bytes.Equal(got[0], r.Bytes()) || bytes.Contains(got[0], []byte(`"n":9`)) {
			t.Fatalf("server received %q for %s", got, r.Bytes())
		}
	}
}

func TestLedgerEvictsOldestResolved(t *testing.T) {
	ctx := context.Background()
	const capacity = 4
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "t"}, ledgerTool))
	c := mcptest.NewClient(t, srv, mcpclient.WithLedgerCapacity(capacity))

	if got := c.Ledger().Cap(); got != capacity {
		t.Fatalf("Cap() = %d, want %d", got, capacity)
	}
	// The session's initialize stays out of the ledger.
	if got := c.Ledger().Len(); got != 0 {
		t.Fatalf("after Connect, Len() = %d, want 0", got)
	}

	var reqs []*mcpclient.Request
	send := func(n int) {
		t.Helper()
		req := callReq(t, c, "t", map[string]int{"n": n})
		if _, err := c.Do(ctx, req); err != nil {
			t.Fatalf("request %d: %v", n, err)
		}
		reqs = append(reqs, req)
	}
	for i := range capacity {
		send(i)
	}
	if got := c.Ledger().Len(); got != capacity {
		t.Fatalf("Len() = %d, want %d", got, capacity)
	}
	for i, r := range reqs {
		if _, ok := c.Ledger().Lookup(r.ID()); !ok {
			t.Fatalf("request %d missing before the ledger was full", i)
		}
	}

	// Each further request evicts the oldest resolved entry, in the order they were answered.
	for i := capacity; i < 3*capacity; i++ {
		send(i)
		if got := c.Ledger().Len(); got != capacity {
			t.Fatalf("after request %d: Len() = %d, want %d", i, got, capacity)
		}
		oldestKept := len(reqs) - capacity
		for j, r := range reqs {
			_, ok := c.Ledger().Lookup(r.ID())
			if want := j >= oldestKept; ok != want {
				t.Fatalf("after request %d: request %d present = %v, want %v", i, j, ok, want)
			}
		}
	}

	t.Run("a resend makes an entry the newest", func(t *testing.T) {
		oldest, next := reqs[len(reqs)-capacity], reqs[len(reqs)-capacity+1]
		if _, err := c.Do(ctx, oldest); err != nil {
			t.Fatal(err)
		}
		send(1000)
		if _, ok := c.Ledger().Lookup(oldest.ID()); !ok {
			t.Fatal("the entry resolved most recently (by a resend) was evicted")
		}
		if _, ok := c.Ledger().Lookup(next.ID()); ok {
			t.Fatal("the oldest resolved entry was kept")
		}
	})
}

// ledgerUncertain returns a server whose tool "x" runs and then loses every reply, and which keeps
// no receipts: every call of the non-idempotent "x" ends in ErrOutcomeUnknown, uncertain.
func ledgerUncertain(t *testing.T) *mcptest.Server {
	srv := mcptest.NewTestServer(t, mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithTool(mcpclient.Tool{Name: "x"}, ledgerTool),
		mcptest.WithTool(mcpclient.Tool{Name: "ok"}, ledgerTool))
	srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "x", Times: -1})
	return srv
}

func ledgerDoUncertain(t *testing.T, c *mcpclient.Client, n int) *mcpclient.Request {
	t.Helper()
	req := callReq(t, c, "x", map[string]int{"n": n})
	_, err := c.Do(context.Background(), req)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("call %d: err = %v, want ErrOutcomeUnknown", n, err)
	}
	e, ok := c.Ledger().Lookup(req.ID())
	if !ok || e.State != mcpclient.StateUncertain {
		t.Fatalf("call %d: entry %+v (present %v), want uncertain", n, e, ok)
	}
	return req
}

func TestLedgerFullOfUnresolvedRefusesNewRequests(t *testing.T) {
	ctx := context.Background()
	const capacity = 3
	srv := ledgerUncertain(t)
	c := mcptest.NewClient(t, srv, mcpclient.WithLedgerCapacity(capacity))

	// capacity uncertain calls fill the ledger (the session's initialize takes no room).
	var uncertain []*mcpclient.Request
	for i := range capacity {
		uncertain = append(uncertain, ledgerDoUncertain(t, c, i))
	}
	if got := c.Ledger().Len(); got != capacity {
		t.Fatalf("Len() = %d, want %d", got, capacity)
	}

	checkKept := func(t *testing.T) {
		t.Helper()
		for i, r := range uncertain {
			e, ok := c.Ledger().Lookup(r.ID())
			if !ok {
				t.Fatalf("uncertain entry %d was evicted", i)
			}
			if e.State != mcpclient.StateUncertain || e.Fingerprint != r.Fingerprint() {
				t.Fatalf("uncertain entry %d changed: %+v", i, e)
			}
		}
	}

	for _, tool := range []string{"x", "ok"} {
		t.Run("new request for "+tool+" is refused", func(t *testing.T) {
			req := callReq(t, c, tool, map[string]int{"n": 100})
			_, err := c.Do(ctx, req)
			if !errors.Is(err, mcpclient.ErrLedgerFull) {
				t.Fatalf("err = %v, want ErrLedgerFull", err)
			}
			if mcpclient.CodeOf(err) != mcpclient.CodeLedgerFull {
				t.Errorf("CodeOf = %v, want %v", mcpclient.CodeOf(err), mcpclient.CodeLedgerFull)
			}
			if mcpclient.IsWireError(err) {
				t.Errorf("IsWireError = true for a local refusal")
			}
			var e *mcpclient.Error
			if !errors.As(err, &e) || e.Request.ID() != req.ID() || e.Request == nil {
				t.Errorf("error %v does not name the refused request %s", err, req.ID().JSON())
			}
			if got := srv.Received(req.ID()); len(got) != 0 {
				t.Errorf("the refused request reached the server %d times", len(got))
			}
			if _, ok := c.Ledger().Lookup(req.ID()); ok {
				t.Error("the refused request has a ledger entry")
			}
			if got := c.Ledger().Len(); got != capacity {
				t.Errorf("Len() = %d, want %d", got, capacity)
			}
			checkKept(t)
		})
	}

	t.Run("CallTool and Ping are refused too", func(t *testing.T) {
		if _, err := c.CallTool(ctx, "ok", nil); !errors.Is(err, mcpclient.ErrLedgerFull) {
			t.Errorf("CallTool: %v, want ErrLedgerFull", err)
		}
		if err := c.Ping(ctx); !errors.Is(err, mcpclient.ErrLedgerFull) {
			t.Errorf("Ping: %v, want ErrLedgerFull", err)
		}
		checkKept(t)
	})

	t.Run("a supersede is refused, and the entry it would replace stays", func(t *testing.T) {
		srv := ledgerUncertain(t)
		c := mcptest.NewClient(t, srv, mcpclient.WithLedgerCapacity(2))
		u0, u1 := ledgerDoUncertain(t, c, 0), ledgerDoUncertain(t, c, 1)
		insp := mcpclient.Inspection{Checked: "the x log", Found: "n=0 absent"}
		_, err := c.Supersede(ctx, u0, insp, mcpclient.CallToolParams{Name: "ok"})
		if !errors.Is(err, mcpclient.ErrLedgerFull) {
			t.Fatalf("Supersede with a ledger full of uncertain entries: %v, want ErrLedgerFull", err)
		}
		for i, u := range []*mcpclient.Request{u0, u1} {
			if e, ok := c.Ledger().Lookup(u.ID()); !ok || e.State != mcpclient.StateUncertain || !e.SupersededBy.IsZero() {
				t.Errorf("uncertain entry %d: %+v, present %v; want it kept, unlinked", i, e, ok)
			}
		}
		// The entry a refused Supersede named is still unresolved: a new request cannot evict it.
		if _, err := c.Do(ctx, callReq(t, c, "ok", map[string]int{"n": 7})); !errors.Is(err, mcpclient.ErrLedgerFull) {
			t.Fatalf("a new request after the refused Supersede: %v, want ErrLedgerFull", err)
		}
		if _, ok := c.Ledger().Lookup(u0.ID()); !ok {
			t.Fatal("the refused Supersede left its predecessor evictable")
		}

		// The caller resolved u1 and says so: that makes the room.
		if err := c.Ledger().Forget(u1.ID()); err != nil {
			t.Fatalf("Forget: %v", err)
		}
		if _, ok := c.Ledger().Lookup(u1.ID()); ok {
			t.Fatal("Forget kept the entry")
		}
		resp, err := c.Supersede(ctx, u0, insp, mcpclient.CallToolParams{Name: "ok"})
		if err != nil {
			t.Fatalf("Supersede after Forget: %v", err)
		}
		if e, ok := c.Ledger().Lookup(u0.ID()); !ok || e.SupersededBy != resp.Request.ID() {
			t.Errorf("the superseded entry %+v (present %v)", e, ok)
		}
		if e, _ := c.Ledger().Lookup(resp.Request.ID()); e.Supersedes != u0.ID() {
			t.Errorf("new entry %+v does not name its predecessor", e)
		}
	})

	t.Run("a resend of a held entry is not a new entry", func(t *testing.T) {
		_, err := c.Do(ctx, uncertain[0])
		if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
			t.Fatalf("resend: %v, want ErrOutcomeUnknown (the fault still drops every reply)", err)
		}
		checkKept(t)
		if e, _ := c.Ledger().Lookup(uncertain[0].ID()); e.Attempts != 2 {
			t.Errorf("attempts after a resend = %d, want 2", e.Attempts)
		}
	})
}

func TestLedgerSupersededEntryBecomesEvictable(t *testing.T) {
	ctx := context.Background()
	const capacity = 3
	srv := ledgerUncertain(t)
	c := mcptest.NewClient(t, srv, mcpclient.WithLedgerCapacity(capacity))

	// Two uncertain entries; the third slot is free.
	u0 := ledgerDoUncertain(t, c, 0)
	u1 := ledgerDoUncertain(t, c, 1)

	// The caller inspects, then supersedes u0 with a request to the tool that answers.
	inspection := mcpclient.Inspection{Checked: "the x log", Found: "no trace of n=0"}
	resp, err := c.Supersede(ctx, u0, inspection, mcpclient.CallToolParams{Name: "ok", Arguments: map[string]int{"n": 0}})
	if err != nil {
		t.Fatalf("Supersede: %v", err)
	}
	s0 := resp.Request
	if s0.Supersedes() != u0.ID() {
		t.Fatalf("new request supersedes %s, want %s", s0.Supersedes().JSON(), u0.ID().JSON())
	}
	old, ok := c.Ledger().Lookup(u0.ID())
	if !ok {
		t.Fatal("the superseded entry left the ledger at once")
	}
	if old.SupersededBy != s0.ID() || old.State != mcpclient.StateUncertain {
		t.Fatalf("superseded entry: %+v", old)
	}
	if e, _ := c.Ledger().Lookup(s0.ID()); e.Supersedes != u0.ID() || e.Reason == "" || e.State != mcpclient.StateAnswered {
		t.Fatalf("superseding entry: %+v", e)
	}
	// The supersede took the free slot.
	if got := c.Ledger().Len(); got != capacity {
		t.Fatalf("Len() = %d, want %d", got, capacity)
	}

	// Resolved, oldest first: u0 (superseded), then s0 (answered). u1 stays throughout.
	u2 := ledgerDoUncertain(t, c, 2)
	if _, ok := c.Ledger().Lookup(u0.ID()); ok {
		t.Fatal("the superseded entry was not evicted first")
	}
	if _, ok := c.Ledger().Lookup(s0.ID()); !ok {
		t.Fatal("the superseding entry was evicted before the superseded one")
	}
	u3 := ledgerDoUncertain(t, c, 3)
	if _, ok := c.Ledger().Lookup(s0.ID()); ok {
		t.Fatal("the answered entry was kept while the ledger was full")
	}
	for i, r := range []*mcpclient.Request{u1, u2, u3} {
		if e, ok := c.Ledger().Lookup(r.ID()); !ok || e.State != mcpclient.StateUncertain {
			t.Fatalf("uncertain entry %d: %+v, present %v", i, e, ok)
		}
	}
	// Now every entry is unresolved.
	_, err = c.Do(ctx, callReq(t, c, "ok", map[string]int{"n": 9}))
	if !errors.Is(err, mcpclient.ErrLedgerFull) {
		t.Fatalf("err = %v, want ErrLedgerFull", err)
	}
}

func TestLedgerStateString(t *testing.T) {
	cases := []struct {
		s    mcpclient.State
		want string
	}{
		{mcpclient.StatePending, "pending"},
		{mcpclient.StateUncertain, "uncertain"},
		{mcpclient.StateAnswered, "answered"},
		{mcpclient.StateFailed, "failed"},
		{mcpclient.StateConflict, "conflict"},
		{mcpclient.State(0), "State(0)"},
		{mcpclient.State(-1), "State(-1)"},
		{mcpclient.StateConflict + 1, fmt.Sprintf("State(%d)", int(mcpclient.StateConflict)+1)},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			if got := tc.s.String(); got != tc.want {
				t.Errorf("State(%d).String() = %q, want %q", int(tc.s), got, tc.want)
			}
			if got := fmt.Sprint(tc.s); got != tc.want {
				t.Errorf("fmt.Sprint = %q, want %q", got, tc.want)
			}
		})
		if seen[tc.want] {
			t.Errorf("duplicate name %q", tc.want)
		}
		seen[tc.want] = true
	}
}

// TestLedgerResendKeepsTheHistoryOfItsID: a Resend continues the history of its id. An earlier
// attempt may have reached the server, so a resend that is not delivered cannot make the request
// "failed", and a refusal of the id as in flight is the hard signal, not a server error.
func TestLedgerResendKeepsTheHistoryOfItsID(t *testing.T) {
	ctx := context.Background()

	t.Run("a resend not delivered leaves an uncertain entry uncertain", func(t *testing.T) {
		srv := ledgerUncertain(t) // x runs, then its reply is lost
		c := mcptest.NewClient(t, srv, noWait)
		req := ledgerDoUncertain(t, c, 0)
		if n := srv.ExecutionsOf("x", req.ID()); n != 1 {
			t.Fatalf("x ran %d times, want 1", n)
		}
		srv.ClearFaults()
		srv.Inject(mcptest.Fault{Kind: mcptest.Fail, Tool: "x", Times: -1})

		_, err := c.Resend(ctx, req)
		if errors.Is(err, mcpclient.ErrNotDelivered) || !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
			t.Errorf("Resend = %v; want ErrOutcomeUnknown: the first attempt ran, so the request is not 'not delivered'", err)
		}
		if e, _ := c.Ledger().Lookup(req.ID()); e.State != mcpclient.StateUncertain {
			t.Errorf("entry state %v after an undelivered resend, want uncertain (x ran %d times)", e.State, srv.ExecutionsOf("x", req.ID()))
		}
	})

	t.Run("a resend refused as in flight is a conflict", func(t *testing.T) {
		started, release := make(chan struct{}, 1), make(chan struct{})
		defer close(release)
		srv := mcptest.NewTestServer(t, mcptest.WithMode(mcptest.ModeInFlightRefusal),
			mcptest.WithTool(mcpclient.Tool{Name: "slow"}, func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
				started <- struct{}{}
				<-release // deaf to the client's notifications/cancelled: it keeps the id in flight
				return &mcpclient.CallToolResult{}, nil
			}))
		c := mcptest.NewClient(t, srv)
		req := callReq(t, c, "slow", map[string]int{"n": 0})

		// The caller gives up while the tool runs: uncertain.
		cctx, cancel := context.WithCancel(ctx)
		go func() { <-started; cancel() }()
		if _, err := c.Do(cctx, req); !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
			t.Fatalf("Do = %v, want ErrOutcomeUnknown", err)
		}
		// Still running on the server: the resend of the same id is refused with -32600.
		_, err := c.Resend(ctx, req)
		if !errors.Is(err, mcpclient.ErrRequestInFlight) {
			t.Errorf("Resend while the request runs = %v (code %v); want ErrRequestInFlight", err, mcpclient.CodeOf(err))
		}
		if e, _ := c.Ledger().Lookup(req.ID()); e.State != mcpclient.StateConflict && e.State != mcpclient.StateUncertain {
			t.Errorf("entry state %v, want conflict (or still uncertain): the request is running", e.State)
		}
	})

	t.Run("a full ledger does not stop a resend from reconnecting", func(t *testing.T) {
		const capacity = 2
		srv := ledgerUncertain(t)
		c := mcptest.NewClient(t, srv, noWait, mcpclient.WithLedgerCapacity(capacity))
		reqs := []*mcpclient.Request{ledgerDoUncertain(t, c, 0), ledgerDoUncertain(t, c, 1)}
		if n := c.Ledger().Len(); n != capacity {
			t.Fatalf("Len() = %d, want %d", n, capacity)
		}
		// The connection's session is lost. Re-reading a held request needs no new ledger entry.
		srv.ClearFaults()
		srv.Restart()
		before := len(srv.Received(reqs[0].ID()))

		_, err := c.Resend(ctx, reqs[0])
		if errors.Is(err, mcpclient.ErrLedgerFull) {
			t.Errorf("Resend of a held entry = %v; the session handshake should not need room in the caller's ledger", err)
		}
		if got := len(srv.Received(reqs[0].ID())); got <= before {
			t.Errorf("the resend never reached the restarted server (frames %d -> %d)", before, got)
		}
		if e, _ := c.Ledger().Lookup(reqs[0].ID()); e.State == mcpclient.StateFailed {
			t.Errorf("entry state failed after the resend, though x ran %d times", srv.ExecutionsOf("x", reqs[0].ID()))
		}
	})
}

// A safe request re-issued after an uncertain attempt needs a ledger entry for its new id. When
// the ledger has no room for it, the original must stay as it is, unresolved: it may have run,
// and forgetting it would let other content take its id.
func TestLedgerFullDuringAutomaticReissueKeepsTheOriginal(t *testing.T) {
	ctx := context.Background()
	srv := ledgerUncertain(t)
	srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "ok"})
	c := mcptest.NewClient(t, srv, mcpclient.WithLedgerCapacity(2), noWait)
	u0 := ledgerDoUncertain(t, c, 0)

	req, err := c.NewRequest("tools/call", mcpclient.CallToolParams{Name: "ok", Arguments: map[string]int{"n": 1}}, mcpclient.WithIdempotent())
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Do(ctx, req)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, mcpclient.ErrLedgerFull) {
		t.Fatalf("err %v, want ErrOutcomeUnknown caused by the ledger's refusal of the re-issue", err)
	}
	var e *mcpclient.Error
	if !errors.As(err, &e) || e.Request.ID() != req.ID() || e.Request != req {
		t.Errorf("the error names %v, want the original %v", e.Request.ID(), req.ID())
	}
	entry, ok := c.Ledger().Lookup(req.ID())
	if !ok || entry.State != mcpclient.StateUncertain || !entry.SupersededBy.IsZero() {
		t.Fatalf("original entry %+v (present %v), want uncertain and not superseded", entry, ok)
	}
	// Unresolved, it is never evicted: a new request is refused instead.
	if _, err := c.Do(ctx, callReq(t, c, "ok", map[string]int{"n": 2})); !errors.Is(err, mcpclient.ErrLedgerFull) {
		t.Fatalf("new request: %v, want ErrLedgerFull", err)
	}
	for _, r := range []*mcpclient.Request{u0, req} {
		if _, ok := c.Ledger().Lookup(r.ID()); !ok {
			t.Fatalf("entry %v was evicted", r.ID())
		}
	}
	// And its id still denotes its content.
	other, err := c.NewRequest("tools/call", mcpclient.CallToolParams{Name: "ok", Arguments: map[string]int{"n": 99}}, mcpclient.WithRequestID(req.ID()))
	if !errors.Is(err, mcpclient.ErrRequestIDReused) {
		t.Fatalf("other content under the original's id: %v (request %v), want ErrRequestIDReused", err, other)
	}
}

func TestLedgerForget(t *testing.T) {
	ctx := context.Background()
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "slow"}, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		started <- struct{}{}
		<-release
		return &mcpclient.CallToolResult{}, nil
	}))
	c := mcptest.NewClient(t, srv)
	req := callReq(t, c, "slow", map[string]int{"n": 1})
	done := make(chan error, 1)
	go func() { _, err := c.Do(ctx, req); done <- err }()
	<-started
	if err := c.Ledger().Forget(req.ID()); !errors.Is(err, mcpclient.ErrRequestInFlight) {
		t.Errorf("Forget of a request in flight: %v, want ErrRequestInFlight", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := c.Ledger().Forget(req.ID()); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if _, ok := c.Ledger().Lookup(req.ID()); ok || c.Ledger().Len() != 0 {
		t.Errorf("the entry is still there (%d entries)", c.Ledger().Len())
	}
	if err := c.Ledger().Forget(req.ID()); err != nil {
		t.Errorf("Forget of an unknown id: %v, want nil", err)
	}
}
