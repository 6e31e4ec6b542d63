// Package receiptstest is the contract every receipts.Store must keep, as a test suite that a
// store's author runs against it:
//
//	func TestContract(t *testing.T) {
//		receiptstest.Run(t, func(t *testing.T) receipts.Store {
//			s := mystore.New(...) // empty, and for this test alone
//			t.Cleanup(s.Close)
//			return s
//		})
//	}
//
// newStore is called once per subtest, which run in parallel: each call must return an empty
// store that no other call shares (a table of its own, for a database). The suite covers what
// the middleware relies on: a claim is atomic under concurrency; leases fence every write after
// them; a lapsed receipt is never claimable again; a released one is unseen; a settled one
// replays its whole response (8 MiB among them, so the store must keep responses that large);
// Wait wakes on settle, release and lease expiry and honours its context; Prune forgets by
// retention; principals never meet.
//
// Leases are real: a store on a database keeps time by the database's clock, which a test
// cannot move. The suite therefore waits for leases of a few hundred milliseconds to lapse, and
// expects a store to wake a waiter within half a second of a settle or release; the whole suite
// takes a second or two.
package receiptstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient/receipts"
)

// Durations of the suite. A lease meant to lapse during a test is short; one meant to hold is
// long enough for any store to answer many times over.
const (
	shortLease = 300 * time.Millisecond
	longLease  = time.Minute
	// wakeBound is how soon after a settle or release a waiter must be woken.
	wakeBound = 500 * time.Millisecond
	// opTimeout bounds any one call of the store.
	opTimeout = 10 * time.Second
)

// Run runs the contract suite against the stores newStore makes.
func Run(t *testing.T, newStore func(t *testing.T) receipts.Store) {
	tests := []struct {
		name string
		f    func(*testing.T, receipts.Store)
	}{
		{"ClaimCreatesRunning", testClaimCreatesRunning},
		{"ClaimReturnsExistingUnchanged", testClaimReturnsExistingUnchanged},
		{"ClaimIsAtomic", testClaimIsAtomic},
		{"SettleKeepsResponse", testSettleKeepsResponse},
		{"SettleKeepsBigResponse", testSettleKeepsBigResponse},
		{"WrongTokenIsFenced", testWrongTokenIsFenced},
		{"RenewExtendsLease", testRenewExtendsLease},
		{"LapsedIsFencedAndNeverClaimedAgain", testLapsed},
		{"ReleaseForgets", testReleaseForgets},
		{"WaitWakesOnSettle", testWaitWakesOnSettle},
		{"WaitWakesOnRelease", testWaitWakesOnRelease},
		{"WaitWakesAtLeaseExpiry", testWaitWakesAtLeaseExpiry},
		{"WaitHonoursContext", testWaitHonoursContext},
		{"WaitReturnsForResolved", testWaitReturnsForResolved},
		{"Prune", testPrune},
		{"PrincipalsAreSeparate", testPrincipalsAreSeparate},
		{"Describe", testDescribe},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.f(t, newStore(t))
		})
	}
}

var (
	fpA = receipts.FingerprintOf([]byte(`{"jsonrpc":"2.0","id":"1","method":"tools/call","params":{"name":"a"}}`))
	fpB = receipts.FingerprintOf([]byte(`{"jsonrpc":"2.0","id":"1","method":"tools/call","params":{"name":"b"}}`))
)

func key(id string) receipts.Key { return receipts.Key{Principal: "alice", ID: id} }

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

func claim(t *testing.T, s receipts.Store, k receipts.Key, fp receipts.Fingerprint, ttl time.Duration) receipts.Lease {
	t.Helper()
	c, err := s.Claim(ctxFor(t), k, fp, ttl)
	if err != nil {
		t.Fatalf("Claim(%v): %v", k, err)
	}
	if !c.Claimed {
		t.Fatalf("Claim(%v) found a %v receipt, want a new claim", k, c.Receipt.State)
	}
	if c.Lease.Key != k || c.Lease.Token == "" {
		t.Fatalf("Claim(%v) gave lease %+v: want its key and a token", k, c.Lease)
	}
	return c.Lease
}

func lookup(t *testing.T, s receipts.Store, k receipts.Key) (receipts.Receipt, bool) {
	t.Helper()
	r, err := s.Lookup(ctxFor(t), k)
	if errors.Is(err, receipts.ErrNotFound) {
		return receipts.Receipt{}, false
	}
	if err != nil {
		t.Fatalf("Lookup(%v): %v", k, err)
	}
	return r, true
}

func wantState(t *testing.T, s receipts.Store, k receipts.Key, want receipts.State) receipts.Receipt {
	t.Helper()
	r, ok := lookup(t, s, k)
	if !ok {
		t.Fatalf("Lookup(%v): no receipt, want %v", k, want)
	}
	if r.State != want {
		t.Fatalf("Lookup(%v): %v, want %v", k, r.State, want)
	}
	if r.Key != k {
		t.Fatalf("Lookup(%v) returned the receipt of %v", k, r.Key)
	}
	return r
}

func wantLeaseLost(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, receipts.ErrLeaseLost) {
		t.Errorf("%s = %v, want ErrLeaseLost", what, err)
	}
}

// waitLapsed sleeps until a lease of ttl claimed before start has surely ended.
func waitLapsed(start time.Time, ttl time.Duration) {
	time.Sleep(time.Until(start.Add(ttl + 100*time.Millisecond)))
}

func testClaimCreatesRunning(t *testing.T, s receipts.Store) {
	k := key("1")
	if _, ok := lookup(t, s, k); ok {
		t.Fatal("a new store has a receipt")
	}
	lease := claim(t, s, k, fpA, longLease)
	r := wantState(t, s, k, receipts.Running)
	if r.Fingerprint != fpA {
		t.Errorf("fingerprint %x, want %x", r.Fingerprint, fpA)
	}
	if r.ClaimedAt.IsZero() || !r.SettledAt.IsZero() || r.Response != nil {
		t.Errorf("running receipt %+v: want ClaimedAt, no SettledAt, no response", r)
	}
	if !lease.Expires.Equal(r.LeaseExpires) {
		t.Errorf("lease expires %v, receipt says %v", lease.Expires, r.LeaseExpires)
	}
	if d := r.LeaseExpires.Sub(r.ClaimedAt); d < longLease-time.Second || d > longLease+time.Second {
		t.Errorf("lease of %v after the claim, want about %v", d, longLease)
	}
}

func testClaimReturnsExistingUnchanged(t *testing.T, s receipts.Store) {
	k := key("1")
	lease := claim(t, s, k, fpA, longLease)
	before := wantState(t, s, k, receipts.Running)
	for _, fp := range []receipts.Fingerprint{fpA, fpB} {
		c, err := s.Claim(ctxFor(t), k, fp, 2*longLease)
		if err != nil {
			t.Fatal(err)
		}
		if c.Claimed || c.Receipt.State != receipts.Running || c.Receipt.Fingerprint != fpA ||
			!c.Receipt.LeaseExpires.Equal(before.LeaseExpires) || c.Lease.Token != "" {
			t.Fatalf("Claim of a running key = %+v, want the receipt as it was (%+v) and no lease", c, before)
		}
	}
	// The first lease still holds: the second claims took nothing.
	if _, err := s.Renew(ctxFor(t), lease, longLease); err != nil {
		t.Fatalf("Renew of the first lease after other claims: %v", err)
	}
}

func testClaimIsAtomic(t *testing.T, s receipts.Store) {
	const claimers = 24
	keys := []receipts.Key{key("a"), key("b"), key("c")}
	var wg sync.WaitGroup
	var claimed [3]atomic.Int32
	start := make(chan struct{})
	for i := range claimers {
		for j, k := range keys {
			wg.Go(func() {
				<-start
				fp := fpA
				if i%2 == 1 {
					fp = fpB
				}
				c, err := s.Claim(ctxFor(t), k, fp, longLease)
				switch {
				case err != nil:
					t.Error(err)
				case c.Claimed:
					claimed[j].Add(1)
				case c.Receipt.State != receipts.Running:
					t.Errorf("a losing claim found %v, want running", c.Receipt.State)
				}
			})
		}
	}
	close(start)
	wg.Wait()
	for j := range keys {
		if n := claimed[j].Load(); n != 1 {
			t.Errorf("%d of %d concurrent claims of %v succeeded, want exactly 1", n, claimers, keys[j])
		}
	}
}

func testSettleKeepsResponse(t *testing.T, s receipts.Store) {
	ctx := ctxFor(t)
	k := key("1")
	lease := claim(t, s, k, fpA, longLease)
	response := []byte(`{"jsonrpc":"2.0","id":"1","result":{"content":[]}}`)
	want := string(response)
	if err := s.Settle(ctx, lease, response); err != nil {
		t.Fatalf("Settle: %v", err)
	}
	copy(response, "XXXXXXXX") // the caller's buffer is its own again
	r := wantState(t, s, k, receipts.Settled)
	if string(r.Response) != want || r.Fingerprint != fpA {
		t.Fatalf("settled receipt has response %q and fingerprint %x, want %q and %x", r.Response, r.Fingerprint, want, fpA)
	}
	if r.SettledAt.IsZero() || r.SettledAt.Before(r.ClaimedAt) {
		t.Errorf("SettledAt %v, ClaimedAt %v", r.SettledAt, r.ClaimedAt)
	}
	c, err := s.Claim(ctx, k, fpA, longLease)
	if err != nil || c.Claimed || c.Receipt.State != receipts.Settled || string(c.Receipt.Response) != want {
		t.Fatalf("Claim of a settled key = %+v, %v; want the settled receipt and its response", c, err)
	}
	if v := receipts.Decide(c.Receipt, fpA); v != receipts.Replay {
		t.Errorf("Decide = %v, want replay", v)
	}
	wantLeaseLost(t, "a second Settle", s.Settle(ctx, lease, []byte(`{"other":true}`)))
	_, err = s.Renew(ctx, lease, longLease)
	wantLeaseLost(t, "Renew after Settle", err)
	wantLeaseLost(t, "Release after Settle", s.Release(ctx, lease))
	if r := wantState(t, s, k, receipts.Settled); string(r.Response) != want {
		t.Fatalf("after refused writes the response is %q, want %q", r.Response, want)
	}
}

func testSettleKeepsBigResponse(t *testing.T, s receipts.Store) {
	ctx := ctxFor(t)
	big := make([]byte, 8<<20)
	for i := range big {
		big[i] = byte('a' + i%26)
	}
	lease := claim(t, s, key("big"), fpA, longLease)
	if err := s.Settle(ctx, lease, big); err != nil {
		t.Fatalf("Settle of 8 MiB: %v", err)
	}
	r := wantState(t, s, key("big"), receipts.Settled)
	if !bytes.Equal(r.Response, big) {
		t.Fatalf("the 8 MiB response came back as %d other bytes", len(r.Response))
	}
}

func testWrongTokenIsFenced(t *testing.T, s receipts.Store) {
	ctx := ctxFor(t)
	k := key("1")
	lease := claim(t, s, k, fpA, longLease)
	for _, stale := range []receipts.Lease{
		{Key: k, Token: lease.Token + "x", Expires: lease.Expires},
		{Key: k, Token: "", Expires: lease.Expires},
		{Key: key("2"), Token: lease.Token, Expires: lease.Expires},
		{Key: receipts.Key{Principal: "bob", ID: "1"}, Token: lease.Token, Expires: lease.Expires},
	} {
		wantLeaseLost(t, fmt.Sprintf("Settle(%+v)", stale), s.Settle(ctx, stale, []byte(`{}`)))
		_, err := s.Renew(ctx, stale, longLease)
		wantLeaseLost(t, fmt.Sprintf("Renew(%+v)", stale), err)
		wantLeaseLost(t, fmt.Sprintf("Release(%+v)", stale), s.Release(ctx, stale))
	}
	if r := wantState(t, s, k, receipts.Running); !r.LeaseExpires.Equal(lease.Expires) {
		t.Fatalf("refused writes moved the lease to %v from %v", r.LeaseExpires, lease.Expires)
	}
	if err := s.Settle(ctx, lease, []byte(`{}`)); err != nil {
		t.Fatalf("Settle by the holder after refused writes: %v", err)
	}
}

func testRenewExtendsLease(t *testing.T, s receipts.Store) {
	ctx := ctxFor(t)
	k := key("1")
	start := time.Now()
	lease := claim(t, s, k, fpA, shortLease)
	renewed, err := s.Renew(ctx, lease, longLease)
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if renewed.Token != lease.Token || renewed.Key != k || !renewed.Expires.After(lease.Expires) {
		t.Fatalf("renewed lease %+v from %+v: want the same token, expiring later", renewed, lease)
	}
	waitLapsed(start, shortLease) // past the first expiry, inside the renewed one
	if r := wantState(t, s, k, receipts.Running); !r.LeaseExpires.Equal(renewed.Expires) {
		t.Errorf("receipt's lease ends %v, the renewal said %v", r.LeaseExpires, renewed.Expires)
	}
	if err := s.Settle(ctx, renewed, []byte(`{}`)); err != nil {
		t.Fatalf("Settle under the renewed lease: %v", err)
	}
}

func testLapsed(t *testing.T, s receipts.Store) {
	ctx := ctxFor(t)
	k := key("1")
	start := time.Now()
	lease := claim(t, s, k, fpA, shortLease)
	waitLapsed(start, shortLease)
	r := wantState(t, s, k, receipts.Lapsed)
	if r.Response != nil || !r.SettledAt.IsZero() {
		t.Errorf("lapsed receipt %+v has a response or a settle time", r)
	}
	for _, fp := range []receipts.Fingerprint{fpA, fpB} {
		c, err := s.Claim(ctx, k, fp, longLease)
		if err != nil || c.Claimed || c.Receipt.State != receipts.Lapsed {
			t.Fatalf("Claim of a lapsed key = %+v, %v; want the lapsed receipt, never a new claim", c, err)
		}
	}
	if v := receipts.Decide(r, fpA); v != receipts.InDoubt {
		t.Errorf("Decide(lapsed) = %v, want in doubt", v)
	}
	// The holder that paused past its lease must not write: a resend may have been told the
	// outcome is unknown.
	wantLeaseLost(t, "Settle past the lease", s.Settle(ctx, lease, []byte(`{}`)))
	_, err := s.Renew(ctx, lease, longLease)
	wantLeaseLost(t, "Renew past the lease", err)
	wantLeaseLost(t, "Release past the lease", s.Release(ctx, lease))
	wantState(t, s, k, receipts.Lapsed)
}

func testReleaseForgets(t *testing.T, s receipts.Store) {
	ctx := ctxFor(t)
	k := key("1")
	lease := claim(t, s, k, fpA, longLease)
	if err := s.Release(ctx, lease); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if _, ok := lookup(t, s, k); ok {
		t.Fatal("a released receipt is still there")
	}
	wantLeaseLost(t, "a second Release", s.Release(ctx, lease))
	wantLeaseLost(t, "Settle after Release", s.Settle(ctx, lease, []byte(`{}`)))
	again := claim(t, s, k, fpB, longLease) // unseen again, whatever the bytes
	if again.Token == lease.Token {
		t.Errorf("the new claim has the released claim's token %q: a late holder would write it", again.Token)
	}
	wantLeaseLost(t, "Settle under the released claim's lease", s.Settle(ctx, lease, []byte(`{}`)))
	wantState(t, s, k, receipts.Running)
}

// waitUntilResolved calls Wait until the receipt leaves Running or ctx ends; Wait may return
// early, and callers look again.
func waitUntilResolved(ctx context.Context, s receipts.Store, k receipts.Key) error {
	for {
		if err := s.Wait(ctx, k); err != nil {
			return err
		}
		r, err := s.Lookup(ctx, k)
		if errors.Is(err, receipts.ErrNotFound) || (err == nil && r.State != receipts.Running) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// waiting starts waitUntilResolved on k and returns what reports when it returned.
func waiting(t *testing.T, s receipts.Store, k receipts.Key, ctx context.Context) <-chan error {
	done, finished := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(finished)
		done <- waitUntilResolved(ctx, s, k)
	}()
	t.Cleanup(func() { <-finished })
	return done
}

func wantWoken(t *testing.T, done <-chan error, after time.Time, bound time.Duration, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait after %s: %v", what, err)
		}
		if d := time.Since(after); d > bound {
			t.Errorf("Wait returned %v after %s, want within %v", d, what, bound)
		}
	case <-time.After(opTimeout):
		t.Fatalf("Wait did not return %v after %s", opTimeout, what)
	}
}

func wantStillWaiting(t *testing.T, done <-chan error, d time.Duration) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("Wait returned (%v) while the receipt runs", err)
	case <-time.After(d):
	}
}

func testWaitWakesOnSettle(t *testing.T, s receipts.Store) {
	k := key("1")
	lease := claim(t, s, k, fpA, longLease)
	done := waiting(t, s, k, ctxFor(t))
	wantStillWaiting(t, done, 200*time.Millisecond)
	settled := time.Now()
	if err := s.Settle(ctxFor(t), lease, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	wantWoken(t, done, settled, wakeBound, "Settle")
}

func testWaitWakesOnRelease(t *testing.T, s receipts.Store) {
	k := key("1")
	lease := claim(t, s, k, fpA, longLease)
	done := waiting(t, s, k, ctxFor(t))
	wantStillWaiting(t, done, 200*time.Millisecond)
	released := time.Now()
	if err := s.Release(ctxFor(t), lease); err != nil {
		t.Fatal(err)
	}
	wantWoken(t, done, released, wakeBound, "Release")
}

func testWaitWakesAtLeaseExpiry(t *testing.T, s receipts.Store) {
	k := key("1")
	start := time.Now()
	lease := claim(t, s, k, fpA, shortLease)
	// A renewal moves the end: the waiter must not return at the first one.
	renewedAt := time.Now()
	if _, err := s.Renew(ctxFor(t), lease, 2*shortLease); err != nil {
		t.Fatal(err)
	}
	done := waiting(t, s, k, ctxFor(t))
	wantStillWaiting(t, done, time.Until(start.Add(shortLease+100*time.Millisecond)))
	wantWoken(t, done, renewedAt.Add(2*shortLease), wakeBound, "the lease's end")
	if d := time.Since(renewedAt); d < 2*shortLease-50*time.Millisecond {
		t.Errorf("the waiter saw the receipt resolved %v after the renewal, before its renewed lease ended", d)
	}
	wantState(t, s, k, receipts.Lapsed)
}

func testWaitHonoursContext(t *testing.T, s receipts.Store) {
	k := key("1")
	claim(t, s, k, fpA, longLease)
	ctx, cancel := context.WithTimeout(ctxFor(t), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := waitUntilResolved(ctx, s, k)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 300*time.Millisecond+wakeBound {
		t.Errorf("Wait returned %v after a deadline of 300ms", d)
	}
	cancelled, cancelNow := context.WithCancel(ctxFor(t))
	cancelNow()
	if err := s.Wait(cancelled, k); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with a cancelled context = %v, want context.Canceled", err)
	}
}

func testWaitReturnsForResolved(t *testing.T, s receipts.Store) {
	ctx := ctxFor(t)
	if err := s.Wait(ctx, key("unseen")); err != nil {
		t.Errorf("Wait for no receipt = %v, want nil at once", err)
	}
	lease := claim(t, s, key("settled"), fpA, longLease)
	if err := s.Settle(ctx, lease, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Wait(ctx, key("settled")); err != nil {
		t.Errorf("Wait for a settled receipt = %v, want nil at once", err)
	}
	if d := time.Since(start); d > wakeBound {
		t.Errorf("Wait for a settled receipt took %v", d)
	}
}

func testPrune(t *testing.T, s receipts.Store) {
	ctx := ctxFor(t)
	start := time.Now()
	old := claim(t, s, key("old"), fpA, longLease)
	if err := s.Settle(ctx, old, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	claim(t, s, key("lapsed"), fpA, 100*time.Millisecond)
	claim(t, s, key("running"), fpA, longLease)
	if n, err := s.Prune(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("Prune(1h) = %d, %v; want nothing pruned", n, err)
	}
	time.Sleep(time.Until(start.Add(400 * time.Millisecond)))
	young := claim(t, s, key("young"), fpA, longLease)
	if err := s.Settle(ctx, young, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	// old settled and lapsed's lease ended 300ms or more ago; young settled just now.
	n, err := s.Prune(ctx, 200*time.Millisecond)
	if err != nil || n != 2 {
		t.Fatalf("Prune(200ms) = %d, %v; want 2", n, err)
	}
	for id, want := range map[string]receipts.State{"old": 0, "lapsed": 0, "young": receipts.Settled, "running": receipts.Running} {
		r, ok := lookup(t, s, key(id))
		if got := r.State; !ok && want != 0 || ok && got != want {
			t.Errorf("%s after Prune: %v (found %v), want %v", id, got, ok, want)
		}
	}
	claim(t, s, key("old"), fpB, longLease) // a pruned id counts as unseen
	claim(t, s, key("lapsed"), fpB, longLease)
}

func testPrincipalsAreSeparate(t *testing.T, s receipts.Store) {
	ctx := ctxFor(t)
	alice, bob := receipts.Key{Principal: "alice", ID: "1"}, receipts.Key{Principal: "bob", ID: "1"}
	la := claim(t, s, alice, fpA, longLease)
	if _, ok := lookup(t, s, bob); ok {
		t.Fatal("bob sees alice's receipt")
	}
	lb := claim(t, s, bob, fpB, longLease)
	if err := s.Settle(ctx, la, []byte(`"alice"`)); err != nil {
		t.Fatal(err)
	}
	if r := wantState(t, s, bob, receipts.Running); r.Fingerprint != fpB {
		t.Errorf("bob's receipt has fingerprint %x", r.Fingerprint)
	}
	wantLeaseLost(t, "Settle of bob's receipt with alice's key", s.Settle(ctx, receipts.Lease{Key: alice, Token: lb.Token}, []byte(`"bob"`)))
	if err := s.Settle(ctx, lb, []byte(`"bob"`)); err != nil {
		t.Fatal(err)
	}
	if r := wantState(t, s, alice, receipts.Settled); string(r.Response) != `"alice"` {
		t.Errorf("alice's response is %s", r.Response)
	}
	if r := wantState(t, s, bob, receipts.Settled); string(r.Response) != `"bob"` {
		t.Errorf("bob's response is %s", r.Response)
	}
	// A principal that differs only where a careless store would join the parts.
	odd := receipts.Key{Principal: "alice1", ID: ""}
	claim(t, s, odd, fpA, longLease)
	wantState(t, s, alice, receipts.Settled)
}

func testDescribe(t *testing.T, s receipts.Store) {
	ctx := ctxFor(t)
	d, err := s.Describe(ctx)
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	switch d.Scope {
	case receipts.ScopeSession, receipts.ScopeProcess, receipts.ScopeStore:
	default:
		t.Fatalf("scope %q", d.Scope)
	}
	if d.Scope != receipts.ScopeSession && (d.Epoch == "" || len(d.Epoch) > 128) {
		t.Errorf("scope %s with epoch %q: want a non-empty epoch of at most 128 characters", d.Scope, d.Epoch)
	}
	if d.MaxReceipts < 0 {
		t.Errorf("MaxReceipts %d", d.MaxReceipts)
	}
	lease := claim(t, s, key("1"), fpA, longLease)
	s.Settle(ctx, lease, []byte(`{}`))
	again, err := s.Describe(ctx)
	if err != nil || again != d {
		t.Errorf("Describe changed with use: %+v then %+v, %v", d, again, err)
	}
}
