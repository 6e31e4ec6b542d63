package postgres_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/journal/postgres"
)

// record returns a request under id whose bytes are content.
func record(id, content string) mcpclient.JournalRecord {
	frame := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"book","arguments":{"c":%q}}}`, id, content))
	return mcpclient.JournalRecord{ID: mcpclient.StringID(id), Method: "tools/call", Frame: frame,
		Fingerprint: sha256.Sum256(frame), Server: "srv", State: mcpclient.StatePending,
		Receipts: mcpclient.ReceiptBinding{Scope: mcpclient.ReceiptScopeProcess, Epoch: "e1"}}
}

func claim(t *testing.T, j *postgres.Journal, rec mcpclient.JournalRecord) mcpclient.JournalClaim {
	t.Helper()
	c, err := j.Claim(context.Background(), rec)
	if err != nil {
		t.Fatalf("claim %s: %v", rec.ID, err)
	}
	return c
}

// awaitSettles waits for the settles j is writing.
func awaitSettles(t *testing.T, j *postgres.Journal) {
	t.Helper()
	if err := postgres.AwaitSettles(j); err != nil {
		t.Fatal(err)
	}
}

func lookup(t *testing.T, j *postgres.Journal, id string) (mcpclient.JournalRecord, bool) {
	t.Helper()
	rec, ok, err := j.Lookup(context.Background(), mcpclient.StringID(id))
	if err != nil {
		t.Fatal(err)
	}
	return rec, ok
}

func unresolved(t *testing.T, j *postgres.Journal, server string) []string {
	t.Helper()
	var ids []string
	for rec, err := range j.Unresolved(context.Background(), server) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.ID.String())
	}
	return ids
}

func execSQL(t *testing.T, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

// A new request is in the table, whole, when Claim returns; Settle records its outcome and its
// sends and releases it.
func TestClaimNew(t *testing.T) {
	j := open(t, newTable(t))
	rec := record("a", "1")
	rec.Header = http.Header{"Mcp-Method": {"tools/call"}}
	rec.Version, rec.Idempotent = "2026-06-30", true
	rec.Supersedes, rec.Reason = mcpclient.IntID(7), "checked the seat; found it free"
	c := claim(t, j, rec)
	if prior, known := c.Prior(); known || !prior.ID.IsZero() {
		t.Fatalf("a new request has a prior record: %+v", prior)
	}
	got, ok := lookup(t, j, "a")
	if !ok || got.State != mcpclient.StatePending || !got.Open || got.Reached || string(got.Frame) != string(rec.Frame) || got.Fingerprint != rec.Fingerprint ||
		got.Header.Get("Mcp-Method") != "tools/call" || got.Version != rec.Version || !got.Idempotent ||
		got.Receipts != rec.Receipts || got.Supersedes != rec.Supersedes || got.Reason != rec.Reason || got.Server != "srv" {
		t.Fatalf("recorded %+v, want %+v", got, rec)
	}
	if err := c.Rebind(context.Background(), mcpclient.ReceiptBinding{Scope: mcpclient.ReceiptScopeProcess, Epoch: "e2"}); err != nil {
		t.Fatal(err)
	}
	c.Settle(mcpclient.StateAnswered, true, 2)
	got, _ = lookup(t, j, "a")
	if got.State != mcpclient.StateAnswered || !got.Reached || got.Open || got.Attempts != 2 || got.Receipts.Epoch != "e2" {
		t.Fatalf("settled %+v", got)
	}
	select {
	case <-c.Lost():
		t.Fatal("a settled claim lost")
	default:
	}
}

// A known id with the same content is claimed again: it only takes the lease, keeping its state,
// whether it reached the server, its receipts and its sends, which a Settle adds to; with other
// content it is refused.
func TestClaimKnown(t *testing.T) {
	j := open(t, newTable(t))
	claim(t, j, record("a", "1")).Settle(mcpclient.StateAnswered, true, 1)
	again := record("a", "1")
	again.Receipts.Epoch = "e9"
	c := claim(t, j, again)
	got, _ := lookup(t, j, "a")
	if got.State != mcpclient.StateAnswered || !got.Reached || !got.Open || got.Attempts != 1 || got.Receipts.Epoch != "e1" {
		t.Fatalf("claimed again: %+v", got)
	}
	c.Settle(mcpclient.StateAnswered, false, 1) // a re-read that did not reach the server
	if got, _ := lookup(t, j, "a"); got.Attempts != 2 || !got.Reached || got.Open {
		t.Fatalf("settled again: %+v", got)
	}
	_, err := j.Claim(context.Background(), record("a", "2"))
	if !errors.Is(err, mcpclient.ErrRequestIDReused) {
		t.Fatalf("err = %v, want ErrRequestIDReused", err)
	}
	if got, _ := lookup(t, j, "a"); got.State != mcpclient.StateAnswered {
		t.Fatalf("the refusal changed the record: %+v", got)
	}
}

// A held id is refused to another claim, of this worker or another, until it is released.
func TestInFlightAcrossWorkers(t *testing.T) {
	table := newTable(t)
	a, b := open(t, table, postgres.WithWorker("a")), open(t, table, postgres.WithWorker("b"))
	c := claim(t, a, record("x", "1"))
	for _, j := range []*postgres.Journal{a, b} {
		if _, err := j.Claim(context.Background(), record("x", "1")); !errors.Is(err, mcpclient.ErrRequestInFlight) {
			t.Fatalf("%s: err = %v, want ErrRequestInFlight", j.Worker(), err)
		}
	}
	if ids := unresolved(t, b, "srv"); len(ids) != 0 {
		t.Fatalf("unresolved lists the held request: %v", ids)
	}
	c.Settle(mcpclient.StateUncertain, true, 1)
	awaitSettles(t, a)
	if ids := unresolved(t, b, "srv"); len(ids) != 1 {
		t.Fatalf("unresolved %v, want the released request", ids)
	}
	claim(t, b, record("x", "1")).Settle(mcpclient.StateAnswered, true, 1)
}

// Of many workers claiming one new id at once, one holds it.
func TestConcurrentClaimsOneWinner(t *testing.T) {
	table := newTable(t)
	var js []*postgres.Journal
	for i := range 6 {
		js = append(js, open(t, table, postgres.WithWorker(fmt.Sprint("w", i))))
	}
	for round := range 10 {
		id := fmt.Sprint("r", round)
		var won, refused atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, j := range js {
			wg.Go(func() {
				<-start
				c, err := j.Claim(context.Background(), record(id, "1"))
				switch {
				case err == nil:
					won.Add(1)
					time.Sleep(20 * time.Millisecond) // still held while the others try
					c.Settle(mcpclient.StatePending, false, 0)
				case errors.Is(err, mcpclient.ErrRequestInFlight):
					refused.Add(1)
				default:
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
		// A loser may come after the winner settled, and win in turn: what must never be is
		// two holding it at once, which the overlapping sleep would show as two wins with no
		// refusal between.
		if won.Load() == 0 || won.Load()+refused.Load() != int32(len(js)) {
			t.Fatalf("round %d: %d won, %d refused", round, won.Load(), refused.Load())
		}
	}
}

// A lease that is not renewed lapses, by the database's clock, and then another worker claims
// the request; the first holder's late Settle does not overwrite the second's.
func TestLeaseExpiry(t *testing.T) {
	table := newTable(t)
	pool := newPool(t)
	a, err := postgres.Open(context.Background(), pool, postgres.WithTable(table), postgres.WithLease(400*time.Millisecond), postgres.WithWorker("a"))
	if err != nil {
		t.Fatal(err)
	}
	b := open(t, table, postgres.WithWorker("b"))
	ca := claim(t, a, record("x", "1"))
	a.Close() // as a worker that dies: nothing renews the lease
	select {
	case <-ca.Lost():
	case <-time.After(time.Second):
		t.Fatal("Close did not close Lost")
	}
	start := time.Now()
	if _, err := b.Claim(context.Background(), record("x", "1")); !errors.Is(err, mcpclient.ErrRequestInFlight) {
		t.Fatalf("claimed while the lease was live: %v", err)
	}
	if !waitFor(2*time.Second, func() bool { return len(unresolved(t, b, "srv")) == 1 }) {
		t.Fatal("the lapsed request is not listed")
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("listed after %v, before the lease lapsed", d)
	}
	cb := claim(t, b, record("x", "1"))
	if prior, _ := cb.Prior(); !prior.Open || prior.State != mcpclient.StatePending {
		t.Fatalf("the lapsed claim's record: %+v, want open and pending", prior)
	}
	ca.Settle(mcpclient.StateAnswered, true, 1)
	if got, _ := lookup(t, a, "x"); got.State != mcpclient.StatePending || !got.Open {
		t.Fatalf("the lapsed claim's Settle wrote over the new holder's: %+v", got)
	}
	cb.Settle(mcpclient.StateAnswered, true, 1)
	if got, _ := lookup(t, b, "x"); got.State != mcpclient.StateAnswered {
		t.Fatalf("%+v", got)
	}
}

// A claim renews its lease for as long as it is held.
func TestLeaseRenewed(t *testing.T) {
	table := newTable(t)
	a := open(t, table, postgres.WithLease(300*time.Millisecond))
	b := open(t, table)
	c := claim(t, a, record("x", "1"))
	for range 10 {
		time.Sleep(100 * time.Millisecond)
		if _, err := b.Claim(context.Background(), record("x", "1")); !errors.Is(err, mcpclient.ErrRequestInFlight) {
			t.Fatalf("claimed a renewed lease: %v", err)
		}
	}
	select {
	case <-c.Lost():
		t.Fatal("lost while renewing")
	default:
	}
	c.Settle(mcpclient.StateAnswered, true, 1)
}

// A claim whose lease another took closes Lost, and a Rebind fails.
func TestLostWhenTaken(t *testing.T) {
	table := newTable(t)
	j := open(t, table, postgres.WithLease(300*time.Millisecond))
	c := claim(t, j, record("x", "1"))
	execSQL(t, "UPDATE "+table+" SET lease_token = 'thief' WHERE id = $1", `"x"`)
	select {
	case <-c.Lost():
	case <-time.After(time.Second):
		t.Fatal("Lost not closed")
	}
	if err := c.Rebind(context.Background(), mcpclient.ReceiptBinding{}); !errors.Is(err, postgres.ErrLeaseLost) {
		t.Fatalf("Rebind: %v, want ErrLeaseLost", err)
	}
	c.Settle(mcpclient.StateAnswered, true, 1)
	if got, _ := lookup(t, j, "x"); got.State != mcpclient.StatePending {
		t.Fatalf("a lost claim settled another's: %+v", got)
	}
}

// A claim whose renewal does not get through in time closes Lost before the database would let
// another worker take the id.
func TestLostWhenRenewalLate(t *testing.T) {
	table := newTable(t)
	const lease = 400 * time.Millisecond
	j := open(t, table, postgres.WithLease(lease))
	c := claim(t, j, record("x", "1"))
	claimed := time.Now()
	// A transaction holding the row keeps every renewal waiting.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+table+" WHERE id = $1 FOR UPDATE", `"x"`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Lost():
		if d := time.Since(claimed); d >= lease {
			t.Fatalf("lost after %v, not before the lease of %v ran out", d, lease)
		}
	case <-time.After(2 * lease):
		t.Fatal("Lost not closed")
	}
	tx.Rollback(ctx)
	c.Settle(mcpclient.StateUncertain, true, 1)
}

// A full table makes room by dropping the oldest settled request, never an unresolved one, nor
// the one being superseded; when all are unresolved it refuses.
func TestCapacity(t *testing.T) {
	j := open(t, newTable(t), postgres.WithCapacity(3))
	for _, id := range []string{"a", "b", "c"} {
		claim(t, j, record(id, "1")).Settle(mcpclient.StateUncertain, true, 1)
	}
	if _, err := j.Claim(context.Background(), record("d", "1")); !errors.Is(err, mcpclient.ErrLedgerFull) {
		t.Fatalf("err = %v, want ErrLedgerFull", err)
	}
	claim(t, j, record("b", "1")).Settle(mcpclient.StateAnswered, true, 1)
	claim(t, j, record("d", "1")).Settle(mcpclient.StateAnswered, true, 1)
	if _, ok := lookup(t, j, "b"); ok {
		t.Fatal("the settled request was kept in a full table")
	}
	for _, id := range []string{"a", "c", "d"} {
		if _, ok := lookup(t, j, id); !ok {
			t.Fatalf("%s dropped", id)
		}
	}
	// e supersedes a, settled and oldest-but-one; d, the only other settled one, makes room.
	e := record("e", "1")
	e.Supersedes = mcpclient.StringID("a")
	claim(t, j, e).Settle(mcpclient.StateUncertain, true, 1)
	if _, ok := lookup(t, j, "d"); ok {
		t.Fatal("d kept")
	}
	if got, ok := lookup(t, j, "a"); !ok || got.SupersededBy != mcpclient.StringID("e") {
		t.Fatalf("the superseded request: %+v, %v", got, ok)
	}
	// a is the last settled one, and stays as e's predecessor only while something else can go.
	if _, err := j.Claim(context.Background(), record("f", "1")); err != nil {
		t.Fatal(err) // takes a's place: it is settled (superseded) and not the one being superseded now
	}
	if _, err := j.Claim(context.Background(), record("g", "1")); !errors.Is(err, mcpclient.ErrLedgerFull) {
		t.Fatalf("err = %v, want ErrLedgerFull", err)
	}
	if err := j.Forget(context.Background(), mcpclient.StringID("c")); err != nil {
		t.Fatal(err)
	}
	claim(t, j, record("g", "1")).Settle(mcpclient.StateAnswered, true, 1)
	st, err := j.Stats(context.Background())
	if err != nil || st.Held != 3 {
		t.Fatalf("held %d, %v; want 3", st.Held, err)
	}
}

// Workers filling a table at once never hold more than its capacity between them.
func TestCapacityConcurrent(t *testing.T) {
	table := newTable(t)
	const capacity = 20
	var js []*postgres.Journal
	for range 4 {
		js = append(js, open(t, table, postgres.WithCapacity(capacity)))
	}
	var ok, full atomic.Int32
	var wg sync.WaitGroup
	for w, j := range js {
		for g := range 8 {
			wg.Go(func() {
				for i := range 3 {
					c, err := j.Claim(context.Background(), record(fmt.Sprint(w, "-", g, "-", i), "1"))
					switch {
					case err == nil:
						ok.Add(1)
						c.Settle(mcpclient.StateUncertain, true, 1)
					case errors.Is(err, mcpclient.ErrLedgerFull):
						full.Add(1)
					default:
						t.Error(err)
					}
				}
			})
		}
	}
	wg.Wait()
	st, err := js[0].Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if ok.Load() != capacity || full.Load() != 4*8*3-capacity || st.Held != capacity || rows != capacity {
		t.Fatalf("%d recorded, %d refused, %d held, %d rows; want %d recorded", ok.Load(), full.Load(), st.Held, rows, capacity)
	}
}

// Settled requests are pruned after the retention; unresolved ones stay however old.
func TestRetention(t *testing.T) {
	j := open(t, newTable(t), postgres.WithRetention(300*time.Millisecond))
	claim(t, j, record("answered", "1")).Settle(mcpclient.StateAnswered, true, 1)
	claim(t, j, record("lost", "1")).Settle(mcpclient.StateUncertain, true, 1)
	// Settles are written in the background: a Lookup waits for this Journal's own, so the
	// retention is measured from their writing, however slow the machine.
	lookup(t, j, "answered")
	lookup(t, j, "lost")
	if n, err := j.Prune(context.Background()); err != nil || n != 0 {
		t.Fatalf("pruned %d, %v before the retention", n, err)
	}
	time.Sleep(400 * time.Millisecond)
	// The Journal prunes in the background too (every half retention), and a Prune that finds
	// the background one under way leaves the work to it: either may have, or be about to.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := j.Prune(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, ok := lookup(t, j, "answered"); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("kept after the retention")
		}
	}
	if got, ok := lookup(t, j, "lost"); !ok || got.State != mcpclient.StateUncertain {
		t.Fatalf("the unresolved request: %+v, %v", got, ok)
	}
}

// Unresolved lists a server's pending, uncertain and open requests that are not superseded and
// that no live claim holds (see TestPredicatesMatchGo for every combination).
func TestUnresolved(t *testing.T) {
	j := open(t, newTable(t))
	claim(t, j, record("answered", "1")).Settle(mcpclient.StateAnswered, true, 1)
	claim(t, j, record("failed", "1")).Settle(mcpclient.StateFailed, true, 1)
	claim(t, j, record("uncertain", "1")).Settle(mcpclient.StateUncertain, true, 1)
	claim(t, j, record("old", "1")).Settle(mcpclient.StateUncertain, true, 1)
	next := record("new", "1")
	next.Supersedes = mcpclient.StringID("old")
	claim(t, j, next).Settle(mcpclient.StateAnswered, true, 1)
	held := claim(t, j, record("held", "1"))
	other := record("other", "1")
	other.Server = "another"
	claim(t, j, other).Settle(mcpclient.StateUncertain, true, 1)
	if ids := unresolved(t, j, "srv"); len(ids) != 1 || ids[0] != "uncertain" {
		t.Fatalf("unresolved %v, want [uncertain]", ids)
	}
	held.Settle(mcpclient.StatePending, false, 0) // released with no outcome: for another to take up
	if ids := unresolved(t, j, "srv"); len(ids) != 2 {
		t.Fatalf("unresolved %v, want uncertain and held", ids)
	}
}

// Forget deletes a request unless a live claim holds it.
func TestForget(t *testing.T) {
	j := open(t, newTable(t))
	claim(t, j, record("a", "1")).Settle(mcpclient.StateUncertain, true, 1)
	c := claim(t, j, record("b", "1"))
	ctx := context.Background()
	if err := j.Forget(ctx, mcpclient.StringID("a")); err != nil {
		t.Fatal(err)
	}
	if _, ok := lookup(t, j, "a"); ok {
		t.Fatal("not forgotten")
	}
	if err := j.Forget(ctx, mcpclient.StringID("b")); !errors.Is(err, mcpclient.ErrRequestInFlight) {
		t.Fatalf("err = %v, want ErrRequestInFlight", err)
	}
	if err := j.Forget(ctx, mcpclient.StringID("nothing")); err != nil {
		t.Fatal(err)
	}
	c.Settle(mcpclient.StateAnswered, true, 1)
	if st, _ := j.Stats(ctx); st.Held != 1 {
		t.Fatalf("held %d, want 1", st.Held)
	}
}

// Open refuses a table that is not a journal's, and one that WithoutMigration finds missing.
func TestSchema(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	if _, err := postgres.Connect(ctx, dbURL, postgres.WithTable(table), postgres.WithoutMigration()); !errors.Is(err, postgres.ErrSchema) {
		t.Fatalf("missing table: %v, want ErrSchema", err)
	}
	execSQL(t, "CREATE TABLE "+table+" (id int)")
	if _, err := postgres.Connect(ctx, dbURL, postgres.WithTable(table)); !errors.Is(err, postgres.ErrSchema) {
		t.Fatalf("foreign table: %v, want ErrSchema", err)
	}
	if _, err := postgres.Connect(ctx, dbURL, postgres.WithTable("a.b.c")); err == nil {
		t.Fatal("a three-part name accepted")
	}
}

// Workers starting together create the table once, and all open it.
func TestConcurrentMigration(t *testing.T) {
	table := newTable(t)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			j, err := postgres.Connect(context.Background(), dbURL, postgres.WithTable(table))
			if err != nil {
				t.Error(err)
				return
			}
			j.Close()
		})
	}
	wg.Wait()
}

// A claim is durable when Claim returns, even on connections whose commits are asynchronous,
// and survives the database's crash; a settle may be lost with it, and leaves the request
// unresolved.
func TestClaimSurvivesCrash(t *testing.T) {
	if db == nil {
		t.Skip("crashes only a database the tests started")
	}
	table := newTable(t)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var setting string
	if err := pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&setting); err != nil || setting != "off" {
		t.Fatalf("synchronous_commit %q, %v", setting, err)
	}
	async, err := postgres.Open(ctx, pool, postgres.WithTable(table), postgres.WithLease(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		c := claim(t, async, record(fmt.Sprint(i), "1"))
		if i%2 == 0 {
			c.Settle(mcpclient.StateAnswered, true, 1)
		}
	}
	if err := db.Crash(); err != nil {
		t.Fatal(err)
	}
	async.Close()
	j := open(t, table)
	for i := range n {
		rec, ok := lookup(t, j, fmt.Sprint(i))
		if !ok {
			t.Fatalf("request %d lost in the crash", i)
		}
		if i%2 == 1 && rec.State != mcpclient.StatePending {
			t.Fatalf("request %d: %+v", i, rec)
		}
	}
}

// A claim that took a good part of its lease to make (waiting for a row another transaction
// held) renews before it is returned, so that its first send does not go out on the last of the
// lease; one whose lease lapsed meanwhile is returned lost, so that nothing is sent.
func TestSlowClaim(t *testing.T) {
	table := newTable(t)
	const lease = 600 * time.Millisecond
	j := open(t, table, postgres.WithLease(lease))
	ctx := context.Background()
	pool := newPool(t)
	for _, held := range []time.Duration{lease / 2, lease + lease/2} {
		id := fmt.Sprint("held-", held)
		claim(t, j, record(id, "1")).Settle(mcpclient.StateUncertain, true, 1)
		awaitSettles(t, j)
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "SELECT 1 FROM "+table+" WHERE id = $1 FOR UPDATE", `"`+id+`"`); err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(held, func() { tx.Rollback(ctx) })
		c := claim(t, j, record(id, "1"))
		lost := false
		select {
		case <-c.Lost():
			lost = true
		default:
		}
		var left time.Duration
		if err := pool.QueryRow(ctx, "SELECT (extract(epoch FROM lease_expires - now()) * 1e9)::bigint FROM "+table+" WHERE id = $1", `"`+id+`"`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		switch {
		case held < lease && (lost || left < lease/2):
			t.Errorf("held %v: lost %v, %v of the lease left when Claim returned", held, lost, left)
		case held > lease && !lost:
			t.Errorf("held %v, past the lease: the claim was returned live", held)
		}
		c.Settle(mcpclient.StateAnswered, true, 1)
	}
}

// A request whose id the server refused is unresolved; a row that does not decode is reported
// by its id, and the others still come.
func TestUnresolvedConflictAndCorruptRow(t *testing.T) {
	table := newTable(t)
	j := open(t, table)
	claim(t, j, record("refused", "1")).Settle(mcpclient.StateConflict, true, 1)
	claim(t, j, record("broken", "1")).Settle(mcpclient.StateUncertain, true, 1)
	claim(t, j, record("uncertain", "1")).Settle(mcpclient.StateUncertain, true, 1)
	awaitSettles(t, j)
	execSQL(t, "UPDATE "+table+" SET fingerprint = '\\x00' WHERE id = $1", mcpclient.StringID("broken").JSON())
	var ids, corrupt []string
	for rec, err := range j.Unresolved(context.Background(), "srv") {
		switch {
		case err == nil:
			ids = append(ids, rec.ID.String())
		case errors.Is(err, postgres.ErrCorrupt):
			corrupt = append(corrupt, rec.ID.String())
		default:
			t.Fatal(err)
		}
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"refused", "uncertain"}) || !slices.Equal(corrupt, []string{"broken"}) {
		t.Fatalf("unresolved %v, corrupt %v", ids, corrupt)
	}
}

// A claim returns the record as it stood: none for a new request; for a known one, every column,
// its state and the receipts of its last send among them, whatever the new claim's record says.
func TestClaimPrior(t *testing.T) {
	j := open(t, newTable(t))
	rec := record("a", "1")
	rec.Header = http.Header{"Mcp-Method": {"tools/call"}}
	rec.Version, rec.Idempotent = "2026-06-30", true
	rec.Supersedes, rec.Reason = mcpclient.IntID(7), "checked first"
	first := claim(t, j, rec)
	if _, known := first.Prior(); known {
		t.Fatal("a new request has a prior record")
	}
	sent := mcpclient.ReceiptBinding{Scope: mcpclient.ReceiptScopeProcess, Epoch: "e2"}
	if err := first.Rebind(context.Background(), sent); err != nil {
		t.Fatal(err)
	}
	first.Settle(mcpclient.StateUncertain, true, 1)
	again := record("a", "1")
	again.Receipts.Epoch = "e3"
	prior, known := claim(t, j, again).Prior()
	if !known || prior.ID != rec.ID || prior.Server != rec.Server || prior.Method != rec.Method ||
		string(prior.Frame) != string(rec.Frame) || prior.Fingerprint != rec.Fingerprint ||
		prior.Header.Get("Mcp-Method") != "tools/call" || prior.Version != rec.Version || !prior.Idempotent ||
		prior.Supersedes != rec.Supersedes || prior.Reason != rec.Reason || !prior.SupersededBy.IsZero() ||
		prior.Receipts != sent || prior.State != mcpclient.StateUncertain || !prior.Reached || prior.Open ||
		prior.Attempts != 1 || prior.Created.IsZero() || prior.Updated.Before(prior.Created) {
		t.Fatalf("known request: %+v, %v", prior, known)
	}
}

// A holder that is gone leaves its request open: the next claim's prior says so, with the state
// the request had.
func TestClaimPriorOfDeadHolder(t *testing.T) {
	table := newTable(t)
	j := open(t, table)
	claim(t, j, record("a", "1")).Settle(mcpclient.StateAnswered, true, 1)
	dead := open(t, table, postgres.WithWorker("dead"))
	claim(t, dead, record("a", "1")) // a re-read under way when the worker dies
	dead.Close()
	execSQL(t, "UPDATE "+table+" SET lease_expires = now() - interval '1 second' WHERE id = $1", `"a"`)
	if ids := unresolved(t, j, "srv"); !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("unresolved %v: the answered request left open is not listed", ids)
	}
	prior, known := claim(t, j, record("a", "1")).Prior()
	if !known || !prior.Open || prior.State != mcpclient.StateAnswered || !prior.Reached || prior.Attempts != 1 {
		t.Fatalf("prior %+v, want answered and open", prior)
	}
}
