package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/northstar-mcp/mcpclient/receipts"
	"github.com/northstar-mcp/mcpclient/receipts/postgres"
)

var fp = receipts.FingerprintOf([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`))

func key(id string) receipts.Key { return receipts.Key{Principal: "alice", ID: id} }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustClaim(t *testing.T, s receipts.Store, k receipts.Key, ttl time.Duration) receipts.Lease {
	t.Helper()
	c, err := s.Claim(testCtx(t), k, fp, ttl)
	if err != nil || !c.Claimed {
		t.Fatalf("Claim(%v) = %+v, %v; want a new claim", k, c, err)
	}
	return c.Lease
}

func state(t *testing.T, s receipts.Store, k receipts.Key) receipts.State {
	t.Helper()
	r, err := s.Lookup(testCtx(t), k)
	if errors.Is(err, receipts.ErrNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return r.State
}

// rowCount is what the table holds, counted, and what its counts say it holds.
func rowCount(t *testing.T, pool *pgxpool.Pool, table string) (rows, counted int64) {
	t.Helper()
	ctx := testCtx(t)
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT sum(n) FROM `+table+`_counts`).Scan(&counted); err != nil {
		t.Fatal(err)
	}
	return rows, counted
}

// Two pools stand for two server processes: racing claims of the same keys, one per key wins,
// and each sees what the other settled.
func TestTwoPoolsRaceOnSameKeys(t *testing.T) {
	table := newTable(t)
	stores := []*postgres.Store{
		newStore(t, newPool(t), postgres.Options{Table: table}),
		newStore(t, newPool(t), postgres.Options{Table: table}),
	}
	const keys, perStore = 20, 8
	var wins [keys]atomic.Int32
	leases := make(chan struct {
		s     *postgres.Store
		lease receipts.Lease
	}, keys*2)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, s := range stores {
		for range perStore {
			wg.Go(func() {
				<-start
				for i := range keys {
					c, err := s.Claim(testCtx(t), key(fmt.Sprint(i)), fp, time.Minute)
					if err != nil {
						t.Error(err)
						return
					}
					if c.Claimed {
						wins[i].Add(1)
						leases <- struct {
							s     *postgres.Store
							lease receipts.Lease
						}{s, c.Lease}
					}
				}
			})
		}
	}
	close(start)
	wg.Wait()
	close(leases)
	for i := range keys {
		if n := wins[i].Load(); n != 1 {
			t.Errorf("key %d claimed %d times across two pools, want once", i, n)
		}
	}
	for l := range leases {
		if err := l.s.Settle(testCtx(t), l.lease, []byte(`"`+l.lease.Key.ID+`"`)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range keys {
		for _, s := range stores {
			r, err := s.Lookup(testCtx(t), key(fmt.Sprint(i)))
			if err != nil || r.State != receipts.Settled || string(r.Response) != fmt.Sprintf(`"%d"`, i) {
				t.Fatalf("key %d: %+v, %v", i, r, err)
			}
		}
	}
}

// The capacity is counted across processes: concurrent claims from three pools never leave more
// than MaxReceipts receipts, and a full table refuses rather than forget an unresolved receipt
// or one within its retention.
func TestCapacityAcrossPools(t *testing.T) {
	table := newTable(t)
	const max = 10
	pools := []*pgxpool.Pool{newPool(t), newPool(t), newPool(t)}
	var stores []*postgres.Store
	for _, p := range pools {
		stores = append(stores, newStore(t, p, postgres.Options{Table: table, MaxReceipts: max, Retention: time.Hour}))
	}
	var claimed, full atomic.Int32
	var mu sync.Mutex
	var leases []receipts.Lease
	var wg sync.WaitGroup
	start := make(chan struct{})
	for si, s := range stores {
		for g := range 8 {
			wg.Go(func() {
				<-start
				c, err := s.Claim(testCtx(t), key(fmt.Sprintf("%d-%d", si, g)), fp, time.Minute)
				switch {
				case errors.Is(err, receipts.ErrFull):
					full.Add(1)
				case err != nil:
					t.Error(err)
				case c.Claimed:
					claimed.Add(1)
					mu.Lock()
					leases = append(leases, c.Lease)
					mu.Unlock()
				}
			})
		}
	}
	close(start)
	wg.Wait()
	if claimed.Load() != max || full.Load() != 24-max {
		t.Fatalf("%d claimed, %d refused as full; want %d and %d", claimed.Load(), full.Load(), max, 24-max)
	}
	if rows, counted := rowCount(t, pools[0], table); rows != max || counted != max {
		t.Fatalf("table holds %d rows, its counts say %d; want %d", rows, counted, max)
	}
	// A known key is answered when full.
	if c, err := stores[1].Claim(testCtx(t), leases[0].Key, fp, time.Minute); err != nil || c.Claimed {
		t.Fatalf("Claim of a known key when full = %+v, %v", c, err)
	}
	// Settled within retention: still full.
	for _, l := range leases[:3] {
		if err := stores[0].Settle(testCtx(t), l, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stores[2].Claim(testCtx(t), key("new"), fp, time.Minute); !errors.Is(err, receipts.ErrFull) {
		t.Fatalf("Claim with receipts settled within retention = %v, want ErrFull", err)
	}
	// A store whose retention has passed for the settled ones makes room by deleting the oldest.
	short := newStore(t, pools[2], postgres.Options{Table: table, MaxReceipts: max, Retention: 50 * time.Millisecond})
	time.Sleep(100 * time.Millisecond)
	mustClaim(t, short, key("new"), time.Minute)
	if got := state(t, short, leases[0].Key); got != 0 {
		t.Errorf("the oldest settled receipt is %v, want deleted to make room", got)
	}
	for _, l := range leases[1:3] {
		if got := state(t, short, l.Key); got != receipts.Settled {
			t.Errorf("%v is %v, want kept: one deletion made the room", l.Key, got)
		}
	}
	for _, l := range leases[3:] {
		if got := state(t, short, l.Key); got != receipts.Running {
			t.Errorf("%v is %v, want still running: an unresolved receipt is never evicted", l.Key, got)
		}
	}
	// Room comes from settled receipts only: with them gone, the running ones are never touched.
	mustClaim(t, short, key("new2"), time.Minute)
	mustClaim(t, short, key("new3"), time.Minute)
	if _, err := short.Claim(testCtx(t), key("new4"), fp, time.Minute); !errors.Is(err, receipts.ErrFull) {
		t.Fatalf("Claim with only unresolved receipts = %v, want ErrFull", err)
	}
	if rows, counted := rowCount(t, pools[0], table); rows != max || counted != max {
		t.Fatalf("table holds %d rows, its counts say %d; want %d", rows, counted, max)
	}
	// A release frees a place at once.
	if err := stores[0].Release(testCtx(t), leases[len(leases)-1]); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, stores[1], key("new4"), time.Minute)
}

// Lapsed receipts are unresolved too: they fill the table until pruned, never evicted.
func TestCapacityKeepsLapsed(t *testing.T) {
	table := newTable(t)
	s := newStore(t, newPool(t), postgres.Options{Table: table, MaxReceipts: 2, Retention: 10 * time.Millisecond})
	mustClaim(t, s, key("a"), 50*time.Millisecond)
	mustClaim(t, s, key("b"), 50*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	if _, err := s.Claim(testCtx(t), key("c"), fp, time.Minute); !errors.Is(err, receipts.ErrFull) {
		t.Fatalf("Claim with two lapsed receipts = %v, want ErrFull", err)
	}
	if n, err := s.Prune(testCtx(t), 10*time.Millisecond); err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want 2", n, err)
	}
	mustClaim(t, s, key("c"), time.Minute)
}

// The epoch is the store's: a new Store on the same table (a restarted process) declares the
// same one; it changes only when the store starts empty.
func TestEpochIsTheStores(t *testing.T) {
	table := newTable(t)
	describe := func(s *postgres.Store) receipts.Description {
		t.Helper()
		d, err := s.Describe(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	pool := newPool(t)
	first := describe(newStore(t, pool, postgres.Options{Table: table, MaxReceipts: 7}))
	if first.Scope != receipts.ScopeStore || first.Epoch == "" || first.MaxReceipts != 7 {
		t.Fatalf("Describe = %+v", first)
	}
	restarted := newStore(t, newPool(t), postgres.Options{Table: table})
	if d := describe(restarted); d.Epoch != first.Epoch {
		t.Fatalf("a new Store on the same table declares epoch %q, want %q", d.Epoch, first.Epoch)
	}
	mustClaim(t, restarted, key("1"), time.Minute)
	if _, err := pool.Exec(testCtx(t), `TRUNCATE `+table); err != nil {
		t.Fatal(err)
	}
	truncated := describe(restarted)
	if truncated.Epoch == first.Epoch {
		t.Fatal("a truncated store kept its epoch")
	}
	if rows, counted := rowCount(t, pool, table); rows != 0 || counted != 0 {
		t.Fatalf("after TRUNCATE: %d rows, counted %d", rows, counted)
	}
	dropTable(t, table)
	recreated := describe(newStore(t, pool, postgres.Options{Table: table}))
	if recreated.Epoch == first.Epoch || recreated.Epoch == truncated.Epoch {
		t.Fatal("a recreated store kept an old epoch")
	}
}

// Processes starting together all create the schema, or find it made, and share one epoch.
func TestConcurrentNew(t *testing.T) {
	table := newTable(t)
	const n = 6
	epochs := make(chan string, n)
	var wg sync.WaitGroup
	for range n {
		pool := newPool(t)
		wg.Go(func() {
			s, err := postgres.New(testCtx(t), pool, postgres.Options{Table: table})
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			d, err := s.Describe(testCtx(t))
			if err != nil {
				t.Error(err)
				return
			}
			epochs <- d.Epoch
		})
	}
	wg.Wait()
	close(epochs)
	seen := map[string]bool{}
	for e := range epochs {
		seen[e] = true
	}
	if len(seen) != 1 {
		t.Fatalf("%d epochs among %d processes starting together, want 1", len(seen), n)
	}
}

// A table that is not a store's is refused, and a bad name too.
func TestSchemaChecks(t *testing.T) {
	table := newTable(t)
	pool := newPool(t)
	if _, err := pool.Exec(testCtx(t), `CREATE TABLE `+table+` (x int)`); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.New(testCtx(t), pool, postgres.Options{Table: table}); !errors.Is(err, postgres.ErrSchema) {
		t.Fatalf("New on another table = %v, want ErrSchema", err)
	}
	if _, err := postgres.New(testCtx(t), pool, postgres.Options{Table: "a.b.c"}); err == nil {
		t.Fatal("New with a three-part name succeeded")
	}
	// Schema's statements, applied by a migration tool, make a table New accepts as it is.
	other := newTable(t)
	stmts, err := postgres.Schema(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(testCtx(t), stmts); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, pool, postgres.Options{Table: other})
	mustClaim(t, s, key("1"), time.Minute)
}

// A schema-qualified table keeps its objects in its schema.
func TestSchemaQualifiedTable(t *testing.T) {
	pool := newPool(t)
	if _, err := pool.Exec(testCtx(t), `CREATE SCHEMA IF NOT EXISTS mcp`); err != nil {
		t.Fatal(err)
	}
	table := "mcp." + newTable(t)
	t.Cleanup(func() { dropTable(t, table) })
	s := newStore(t, pool, postgres.Options{Table: table})
	l := mustClaim(t, s, key("1"), time.Minute)
	if err := s.Settle(testCtx(t), l, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(testCtx(t), `SELECT count(*) FROM `+table).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%s holds %d rows, %v", table, n, err)
	}
}

// A response over MaxResponseBytes is refused and leaves the receipt running.
func TestTooLarge(t *testing.T) {
	s := newStore(t, newPool(t), postgres.Options{Table: newTable(t), MaxResponseBytes: 1024})
	l := mustClaim(t, s, key("1"), time.Minute)
	if err := s.Settle(testCtx(t), l, bytes.Repeat([]byte("x"), 1025)); !errors.Is(err, receipts.ErrTooLarge) {
		t.Fatalf("Settle of 1025 bytes = %v, want ErrTooLarge", err)
	}
	if got := state(t, s, key("1")); got != receipts.Running {
		t.Fatalf("after a refused Settle: %v, want running", got)
	}
	if err := s.Settle(testCtx(t), l, bytes.Repeat([]byte("x"), 1024)); err != nil {
		t.Fatalf("Settle of 1024 bytes: %v", err)
	}
}

// The database's clock is what counts: processes whose sessions keep time in zones a day apart
// agree on the instant a lease ends, and on when it has lapsed.
func TestDatabaseClock(t *testing.T) {
	table := newTable(t)
	zoned := func(zone string) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(dbURL)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.RuntimeParams["TimeZone"] = zone
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return pool
	}
	east, west := zoned("Pacific/Kiritimati"), zoned("Etc/GMT+12") // UTC+14 and UTC-12
	a := newStore(t, east, postgres.Options{Table: table})
	b := newStore(t, west, postgres.Options{Table: table})
	var dbNow time.Time
	if err := east.QueryRow(testCtx(t), `SELECT clock_timestamp()`).Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	l := mustClaim(t, a, key("1"), 400*time.Millisecond)
	if d := l.Expires.Sub(dbNow); d < 400*time.Millisecond || d > 2*time.Second {
		t.Fatalf("the lease ends %v after the database's clock read before the claim, want 400ms and a little", d)
	}
	r, err := b.Lookup(testCtx(t), key("1"))
	if err != nil || r.State != receipts.Running || !r.LeaseExpires.Equal(l.Expires) {
		t.Fatalf("the other zone sees %+v, %v; want running, lease ending at %v", r, err, l.Expires)
	}
	// Wait by the database's clock until just past the end, then both see it lapsed.
	for {
		var past bool
		if err := west.QueryRow(testCtx(t), `SELECT clock_timestamp() > $1`, l.Expires).Scan(&past); err != nil {
			t.Fatal(err)
		}
		if past {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if state(t, a, key("1")) != receipts.Lapsed || state(t, b, key("1")) != receipts.Lapsed {
		t.Fatal("past its end by the database's clock, the lease is not lapsed for both")
	}
}

// A holder paused past its lease (a GC pause, a stalled host) cannot settle once another process
// learned the outcome is in doubt: what the resend was told stays true.
func TestPausedHolderCannotSettle(t *testing.T) {
	table := newTable(t)
	holder := newStore(t, newPool(t), postgres.Options{Table: table})
	other := newStore(t, newPool(t), postgres.Options{Table: table})
	l := mustClaim(t, holder, key("1"), 300*time.Millisecond)
	time.Sleep(400 * time.Millisecond) // the pause
	c, err := other.Claim(testCtx(t), key("1"), fp, time.Minute)
	if err != nil || c.Claimed || receipts.Decide(c.Receipt, fp) != receipts.InDoubt {
		t.Fatalf("the resend's Claim = %+v, %v; want the lapsed receipt, in doubt", c, err)
	}
	if err := holder.Settle(testCtx(t), l, []byte(`{"late":true}`)); !errors.Is(err, receipts.ErrLeaseLost) {
		t.Fatalf("the paused holder's Settle = %v, want ErrLeaseLost", err)
	}
	if _, err := holder.Renew(testCtx(t), l, time.Minute); !errors.Is(err, receipts.ErrLeaseLost) {
		t.Fatalf("the paused holder's Renew = %v, want ErrLeaseLost", err)
	}
	if got := state(t, other, key("1")); got != receipts.Lapsed {
		t.Fatalf("after the late writes: %v, want still lapsed", got)
	}
}

// A waiter in one process wakes when another process settles or releases.
func TestWaitAcrossPools(t *testing.T) {
	table := newTable(t)
	holder := newStore(t, newPool(t), postgres.Options{Table: table})
	waiter := newStore(t, newPool(t), postgres.Options{Table: table, PollInterval: time.Minute})
	for _, release := range []bool{false, true} {
		k := key(fmt.Sprint(release))
		l := mustClaim(t, holder, k, time.Minute)
		done := make(chan time.Time, 1)
		go func() {
			for waiter.Wait(testCtx(t), k) == nil {
				if state(t, waiter, k) != receipts.Running {
					break
				}
			}
			done <- time.Now()
		}()
		time.Sleep(200 * time.Millisecond)
		at := time.Now()
		var err error
		if release {
			err = holder.Release(testCtx(t), l)
		} else {
			err = holder.Settle(testCtx(t), l, []byte(`{}`))
		}
		if err != nil {
			t.Fatal(err)
		}
		select {
		case woke := <-done:
			if d := woke.Sub(at); d > 500*time.Millisecond {
				t.Errorf("release %v: the waiter woke %v after, want within 500ms", release, d)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("release %v: the waiter never woke", release)
		}
	}
}

// Keys that a careless encoding would confuse stay apart, in claims and in notifications.
func TestKeysStayApart(t *testing.T) {
	s := newStore(t, newPool(t), postgres.Options{Table: newTable(t)})
	keys := []receipts.Key{{Principal: "a", ID: "b:c"}, {Principal: "a:b", ID: "c"}, {Principal: "", ID: "ab:c"}, {Principal: "1:a", ID: `"1"`}}
	var leases []receipts.Lease
	for _, k := range keys {
		leases = append(leases, mustClaim(t, s, k, time.Minute)) // each a claim of its own
	}
	if err := s.Settle(testCtx(t), leases[0], []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys[1:] {
		if got := state(t, s, k); got != receipts.Running {
			t.Errorf("%+v is %v after another key settled", k, got)
		}
	}
}
