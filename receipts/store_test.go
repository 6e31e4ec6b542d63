package receipts_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient/receipts"
)

// fakeClock is a clock that moves only when a test says so.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var (
	fpA = receipts.FingerprintOf([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`))
	fpB = receipts.FingerprintOf([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call" }`))
)

func key(id string) receipts.Key { return receipts.Key{Principal: "alice", ID: id} }

func TestDecide(t *testing.T) {
	tests := []struct {
		name  string
		state receipts.State
		fp    receipts.Fingerprint
		want  receipts.Verdict
	}{
		{"settled, same bytes", receipts.Settled, fpA, receipts.Replay},
		{"running, same bytes", receipts.Running, fpA, receipts.Wait},
		{"lapsed, same bytes", receipts.Lapsed, fpA, receipts.InDoubt},
		{"unknown state, same bytes", receipts.State(99), fpA, receipts.InDoubt},
		{"settled, other bytes", receipts.Settled, fpB, receipts.Reused},
		{"running, other bytes", receipts.Running, fpB, receipts.Reused},
		{"lapsed, other bytes", receipts.Lapsed, fpB, receipts.Reused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := receipts.Receipt{Key: key("1"), Fingerprint: fpA, State: tt.state}
			if got := receipts.Decide(r, tt.fp); got != tt.want {
				t.Errorf("Decide = %v, want %v", got, tt.want)
			}
		})
	}
}

func mustClaim(t *testing.T, s receipts.Store, k receipts.Key, fp receipts.Fingerprint, ttl time.Duration) receipts.Lease {
	t.Helper()
	c, err := s.Claim(context.Background(), k, fp, ttl)
	if err != nil {
		t.Fatalf("Claim(%v): %v", k, err)
	}
	if !c.Claimed {
		t.Fatalf("Claim(%v) found %v, want a new claim", k, c.Receipt.State)
	}
	return c.Lease
}

func lookupState(t *testing.T, s receipts.Store, k receipts.Key) receipts.State {
	t.Helper()
	r, err := s.Lookup(context.Background(), k)
	if errors.Is(err, receipts.ErrNotFound) {
		return 0
	}
	if err != nil {
		t.Fatalf("Lookup(%v): %v", k, err)
	}
	return r.State
}

func TestMemoryStoreLifecycle(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	s := receipts.NewMemoryStore(receipts.MemoryOptions{Now: clock.Now})

	lease := mustClaim(t, s, key("1"), fpA, time.Minute)
	if lease.Token == "" || !lease.Expires.Equal(clock.Now().Add(time.Minute)) {
		t.Fatalf("lease = %+v, want a token expiring in a minute", lease)
	}
	again, err := s.Claim(ctx, key("1"), fpB, time.Minute)
	if err != nil || again.Claimed || again.Receipt.State != receipts.Running || again.Receipt.Fingerprint != fpA {
		t.Fatalf("second Claim = %+v, %v; want the running receipt of the first bytes", again, err)
	}

	response := []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	if err := s.Settle(ctx, lease, response); err != nil {
		t.Fatalf("Settle: %v", err)
	}
	copy(response, "XXXX") // the caller's buffer is its own again
	r, err := s.Lookup(ctx, key("1"))
	if err != nil || r.State != receipts.Settled || string(r.Response) != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Fatalf("Lookup after Settle = %+v, %v", r, err)
	}
	if !r.SettledAt.Equal(clock.Now()) {
		t.Errorf("SettledAt = %v, want %v", r.SettledAt, clock.Now())
	}
	if err := s.Settle(ctx, lease, response); !errors.Is(err, receipts.ErrLeaseLost) {
		t.Errorf("second Settle = %v, want ErrLeaseLost", err)
	}
	if err := s.Release(ctx, lease); !errors.Is(err, receipts.ErrLeaseLost) {
		t.Errorf("Release after Settle = %v, want ErrLeaseLost", err)
	}
	if _, err := s.Lookup(ctx, key("2")); !errors.Is(err, receipts.ErrNotFound) {
		t.Errorf("Lookup of an unseen key = %v, want ErrNotFound", err)
	}
}

func TestMemoryStoreFencing(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	s := receipts.NewMemoryStore(receipts.MemoryOptions{Now: clock.Now})
	lease := mustClaim(t, s, key("1"), fpA, time.Minute)

	stale := lease
	stale.Token = "not-the-holder"
	if err := s.Settle(ctx, stale, []byte(`{}`)); !errors.Is(err, receipts.ErrLeaseLost) {
		t.Errorf("Settle with another token = %v, want ErrLeaseLost", err)
	}
	if _, err := s.Renew(ctx, stale, time.Minute); !errors.Is(err, receipts.ErrLeaseLost) {
		t.Errorf("Renew with another token = %v, want ErrLeaseLost", err)
	}
	if err := s.Release(ctx, stale); !errors.Is(err, receipts.ErrLeaseLost) {
		t.Errorf("Release with another token = %v, want ErrLeaseLost", err)
	}

	clock.Advance(50 * time.Second)
	renewed, err := s.Renew(ctx, lease, time.Minute)
	if err != nil || !renewed.Expires.Equal(clock.Now().Add(time.Minute)) {
		t.Fatalf("Renew = %+v, %v; want a lease to a minute from now", renewed, err)
	}
	clock.Advance(50 * time.Second) // past the first expiry, inside the renewed one
	if got := lookupState(t, s, key("1")); got != receipts.Running {
		t.Fatalf("state inside the renewed lease = %v, want running", got)
	}

	clock.Advance(10 * time.Second) // the renewed lease ends: the holder died
	if got := lookupState(t, s, key("1")); got != receipts.Lapsed {
		t.Fatalf("state past the lease = %v, want lapsed", got)
	}
	if err := s.Settle(ctx, renewed, []byte(`{}`)); !errors.Is(err, receipts.ErrLeaseLost) {
		t.Errorf("Settle past the lease = %v, want ErrLeaseLost", err)
	}
	if _, err := s.Renew(ctx, renewed, time.Minute); !errors.Is(err, receipts.ErrLeaseLost) {
		t.Errorf("Renew past the lease = %v, want ErrLeaseLost", err)
	}
	c, err := s.Claim(ctx, key("1"), fpA, time.Minute)
	if err != nil || c.Claimed || c.Receipt.State != receipts.Lapsed {
		t.Fatalf("Claim of a lapsed key = %+v, %v; want the lapsed receipt, never a new claim", c, err)
	}
	if v := receipts.Decide(c.Receipt, fpA); v != receipts.InDoubt {
		t.Errorf("Decide(lapsed) = %v, want in doubt", v)
	}
}

func TestMemoryStoreRelease(t *testing.T) {
	ctx := context.Background()
	s := receipts.NewMemoryStore(receipts.MemoryOptions{})
	lease := mustClaim(t, s, key("1"), fpA, time.Minute)
	if err := s.Release(ctx, lease); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if got := lookupState(t, s, key("1")); got != 0 {
		t.Fatalf("state after Release = %v, want no receipt", got)
	}
	mustClaim(t, s, key("1"), fpB, time.Minute) // unseen again, whatever the bytes
}

func TestMemoryStoreCapacity(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	s := receipts.NewMemoryStore(receipts.MemoryOptions{MaxReceipts: 2, Retention: time.Hour, Now: clock.Now})

	a := mustClaim(t, s, key("a"), fpA, time.Minute)
	mustClaim(t, s, key("b"), fpA, time.Minute)
	if _, err := s.Claim(ctx, key("c"), fpA, time.Minute); !errors.Is(err, receipts.ErrFull) {
		t.Fatalf("Claim with two running receipts = %v, want ErrFull", err)
	}
	// A lookup of a known key is no new claim: it is answered when full.
	if c, err := s.Claim(ctx, key("b"), fpA, time.Minute); err != nil || c.Claimed {
		t.Fatalf("Claim of a known key when full = %+v, %v", c, err)
	}

	if err := s.Settle(ctx, a, []byte(`{"result":"a"}`)); err != nil {
		t.Fatal(err)
	}
	// Within its retention a settled receipt is kept: a client may still resend its id.
	if _, err := s.Claim(ctx, key("c"), fpA, time.Minute); !errors.Is(err, receipts.ErrFull) {
		t.Fatalf("Claim with a receipt settled within its retention = %v, want ErrFull", err)
	}
	clock.Advance(time.Hour)
	mustClaim(t, s, key("c"), fpA, time.Minute) // room made by forgetting a, past its retention
	if got := lookupState(t, s, key("a")); got != 0 {
		t.Errorf("a = %v, want forgotten to make room", got)
	}
	if got := lookupState(t, s, key("b")); got != receipts.Lapsed {
		t.Errorf("b = %v, want still held, lapsed: an unresolved receipt is never evicted", got)
	}

	// Lapsed receipts are unresolved too (b's lease lapsed with the hour; c's now).
	clock.Advance(2 * time.Minute)
	if _, err := s.Claim(ctx, key("d"), fpA, time.Minute); !errors.Is(err, receipts.ErrFull) {
		t.Fatalf("Claim with two lapsed receipts = %v, want ErrFull", err)
	}
	if s.Len() != 2 {
		t.Errorf("Len = %d, want 2", s.Len())
	}
}

func TestMemoryStoreBytes(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	s := receipts.NewMemoryStore(receipts.MemoryOptions{MaxBytes: 4096, Retention: time.Hour, Now: clock.Now})

	a := mustClaim(t, s, key("a"), fpA, time.Minute)
	if err := s.Settle(ctx, a, bytes.Repeat([]byte("x"), 5000)); !errors.Is(err, receipts.ErrTooLarge) {
		t.Fatalf("Settle of a response over MaxBytes = %v, want ErrTooLarge", err)
	}
	if got := lookupState(t, s, key("a")); got != receipts.Running {
		t.Fatalf("after a refused Settle: %v, want still running", got)
	}
	if err := s.Settle(ctx, a, bytes.Repeat([]byte("x"), 3000)); err != nil {
		t.Fatalf("Settle: %v", err)
	}
	b := mustClaim(t, s, key("b"), fpA, time.Minute)
	if err := s.Settle(ctx, b, bytes.Repeat([]byte("y"), 3000)); !errors.Is(err, receipts.ErrTooLarge) {
		t.Fatalf("Settle of b while a is within its retention = %v, want ErrTooLarge", err)
	}
	clock.Advance(time.Hour)
	b = mustClaim(t, s, key("b2"), fpA, time.Minute)
	if err := s.Settle(ctx, b, bytes.Repeat([]byte("y"), 3000)); err != nil {
		t.Fatalf("Settle of b2 past a's retention: %v", err)
	}
	if got := lookupState(t, s, key("a")); got != 0 {
		t.Errorf("a = %v, want forgotten to make room for b's response", got)
	}
}

func TestMemoryStorePrune(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	s := receipts.NewMemoryStore(receipts.MemoryOptions{Now: clock.Now})

	old := mustClaim(t, s, key("old"), fpA, time.Minute)
	s.Settle(ctx, old, []byte(`{}`))
	mustClaim(t, s, key("lapsed"), fpA, time.Minute)
	clock.Advance(time.Hour)
	young := mustClaim(t, s, key("young"), fpA, 2*time.Hour)
	s.Settle(ctx, young, []byte(`{}`))
	running := mustClaim(t, s, key("running"), fpA, 2*time.Hour)

	clock.Advance(30 * time.Minute) // old settled 90 min ago, lapsed expired 89 min ago, young 30 min ago
	n, err := s.Prune(ctx, time.Hour)
	if err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want 2", n, err)
	}
	for k, want := range map[string]receipts.State{"old": 0, "lapsed": 0, "young": receipts.Settled, "running": receipts.Running} {
		if got := lookupState(t, s, key(k)); got != want {
			t.Errorf("%s after Prune = %v, want %v", k, got, want)
		}
	}
	mustClaim(t, s, key("old"), fpB, time.Minute) // a pruned id counts as unseen
	_ = running
}

func TestMemoryStorePrincipals(t *testing.T) {
	s := receipts.NewMemoryStore(receipts.MemoryOptions{})
	mustClaim(t, s, receipts.Key{Principal: "alice", ID: "1"}, fpA, time.Minute)
	mustClaim(t, s, receipts.Key{Principal: "bob", ID: "1"}, fpA, time.Minute)
}

func TestMemoryStoreClaimIsAtomic(t *testing.T) {
	s := receipts.NewMemoryStore(receipts.MemoryOptions{})
	var claimed atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			c, err := s.Claim(context.Background(), key("1"), fpA, time.Minute)
			if err != nil {
				t.Error(err)
			}
			if c.Claimed {
				claimed.Add(1)
			}
		})
	}
	wg.Wait()
	if claimed.Load() != 1 {
		t.Fatalf("%d claims of one key succeeded, want 1", claimed.Load())
	}
}

func TestMemoryStoreWait(t *testing.T) {
	t.Run("settled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := receipts.NewMemoryStore(receipts.MemoryOptions{})
			lease := mustClaim(t, s, key("1"), fpA, time.Minute)
			returned := make(chan error)
			go func() { returned <- s.Wait(context.Background(), key("1")) }()
			synctest.Wait()
			select {
			case err := <-returned:
				t.Fatalf("Wait returned %v while the receipt runs", err)
			default:
			}
			time.Sleep(10 * time.Second)
			s.Settle(context.Background(), lease, []byte(`{}`))
			if err := <-returned; err != nil {
				t.Fatalf("Wait = %v", err)
			}
		})
	})
	t.Run("released", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := receipts.NewMemoryStore(receipts.MemoryOptions{})
			lease := mustClaim(t, s, key("1"), fpA, time.Minute)
			returned := make(chan error)
			go func() { returned <- s.Wait(context.Background(), key("1")) }()
			synctest.Wait()
			s.Release(context.Background(), lease)
			if err := <-returned; err != nil {
				t.Fatalf("Wait = %v", err)
			}
		})
	})
	t.Run("lapsed, after renewals", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := receipts.NewMemoryStore(receipts.MemoryOptions{})
			start := time.Now()
			lease := mustClaim(t, s, key("1"), fpA, time.Minute)
			returned := make(chan time.Time)
			go func() {
				s.Wait(context.Background(), key("1"))
				returned <- time.Now()
			}()
			time.Sleep(50 * time.Second)
			if _, err := s.Renew(context.Background(), lease, time.Minute); err != nil {
				t.Fatal(err)
			}
			at := <-returned
			if got := at.Sub(start); got != 110*time.Second {
				t.Fatalf("Wait returned after %v, want 110s: at the end of the renewed lease", got)
			}
			if got := lookupState(t, s, key("1")); got != receipts.Lapsed {
				t.Fatalf("state = %v, want lapsed", got)
			}
		})
	})
	t.Run("context", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := receipts.NewMemoryStore(receipts.MemoryOptions{})
			mustClaim(t, s, key("1"), fpA, time.Hour)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if err := s.Wait(ctx, key("1")); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Wait = %v, want the context's deadline", err)
			}
		})
	})
	t.Run("unseen", func(t *testing.T) {
		s := receipts.NewMemoryStore(receipts.MemoryOptions{})
		if err := s.Wait(context.Background(), key("1")); err != nil {
			t.Fatalf("Wait for no receipt = %v, want nil at once", err)
		}
	})
}

func TestMemoryStoreDescribe(t *testing.T) {
	a := receipts.NewMemoryStore(receipts.MemoryOptions{MaxReceipts: 7})
	b := receipts.NewMemoryStore(receipts.MemoryOptions{})
	da, _ := a.Describe(context.Background())
	db, _ := b.Describe(context.Background())
	if da.Scope != receipts.ScopeProcess || da.MaxReceipts != 7 || db.MaxReceipts != receipts.DefaultMaxReceipts {
		t.Errorf("Describe = %+v, %+v", da, db)
	}
	if da.Epoch == "" || da.Epoch == db.Epoch {
		t.Errorf("epochs %q and %q: want each store its own", da.Epoch, db.Epoch)
	}
}
