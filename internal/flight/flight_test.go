package flight_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"

	"github.com/northstar-mcp/mcpclient/internal/flight"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type result struct {
	v   int
	err error
}

// do runs g.Do for key on a goroutine of its own; its result arrives on the channel.
func do(ctx context.Context, g *flight.Group[string, int], stop func() <-chan struct{}, fn func() (int, error)) <-chan result {
	out := make(chan result, 1)
	go func() {
		v, err := g.Do(ctx, stop, "k", fn)
		out <- result{v, err}
	}()
	return out
}

// blockingCall is an fn that counts its runs and returns v once released.
type blockingCall struct {
	runs    atomic.Int32
	release chan struct{}
}

func newBlockingCall() *blockingCall { return &blockingCall{release: make(chan struct{})} }

func (b *blockingCall) fn(v int, err error) func() (int, error) {
	return func() (int, error) {
		b.runs.Add(1)
		<-b.release
		return v, err
	}
}

func TestWaitersShareOneCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g flight.Group[string, int]
		b := newBlockingCall()
		boom := errors.New("boom")
		var outs []<-chan result
		for range 4 {
			outs = append(outs, do(t.Context(), &g, nil, b.fn(7, boom)))
			synctest.Wait()
		}
		close(b.release)
		for _, out := range outs {
			if r := <-out; r.v != 7 || r.err != boom {
				t.Errorf("got (%d, %v), want (7, boom)", r.v, r.err)
			}
		}
		if n := b.runs.Load(); n != 1 {
			t.Errorf("fn ran %d times, want once", n)
		}
	})
}

// The key is free again once a call ended: the next caller runs fn anew.
func TestKeyFreedAfterReturn(t *testing.T) {
	var g flight.Group[string, int]
	runs := 0
	for i := range 3 {
		v, err := g.Do(t.Context(), nil, "k", func() (int, error) { runs++; return i, nil })
		if v != i || err != nil {
			t.Fatalf("call %d: got (%d, %v)", i, v, err)
		}
	}
	if runs != 3 {
		t.Errorf("fn ran %d times, want 3", runs)
	}
}

func TestPanicReachesItsGoroutineAndReleasesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g flight.Group[string, int]
		release := make(chan struct{})
		recovered := make(chan any, 1)
		go func() {
			defer func() { recovered <- recover() }()
			g.Do(t.Context(), nil, "k", func() (int, error) {
				<-release
				panic("interceptor bug")
			})
		}()
		synctest.Wait()
		waiter := do(t.Context(), &g, nil, func() (int, error) { return 0, errors.New("a waiter must not run fn") })
		synctest.Wait()
		close(release)
		if r := <-recovered; r != "interceptor bug" {
			t.Errorf("the goroutine that ran fn recovered %v, want its own panic", r)
		}
		if r := <-waiter; !errors.Is(r.err, flight.ErrPanicked) {
			t.Errorf("the waiter got (%d, %v), want ErrPanicked", r.v, r.err)
		}
		if v, err := g.Do(t.Context(), nil, "k", func() (int, error) { return 1, nil }); v != 1 || err != nil {
			t.Errorf("after the panic, Do got (%d, %v), want fn run anew", v, err)
		}
	})
}

func TestGoexitReleasesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g flight.Group[string, int]
		release := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			g.Do(t.Context(), nil, "k", func() (int, error) {
				<-release
				runtime.Goexit()
				return 0, nil
			})
			t.Error("Do returned after runtime.Goexit")
		})
		synctest.Wait()
		waiter := do(t.Context(), &g, nil, func() (int, error) { return 0, errors.New("a waiter must not run fn") })
		synctest.Wait()
		close(release)
		wg.Wait()
		if r := <-waiter; !errors.Is(r.err, flight.ErrPanicked) {
			t.Errorf("the waiter got (%d, %v), want ErrPanicked", r.v, r.err)
		}
		if v, err := g.Do(t.Context(), nil, "k", func() (int, error) { return 1, nil }); v != 1 || err != nil {
			t.Errorf("after the Goexit, Do got (%d, %v), want fn run anew", v, err)
		}
	})
}

func TestWaiterReturnsOnItsOwnContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g flight.Group[string, int]
		b := newBlockingCall()
		leader := do(t.Context(), &g, nil, b.fn(7, nil))
		synctest.Wait()
		ctx, cancel := context.WithCancel(t.Context())
		waiter := do(ctx, &g, nil, b.fn(0, nil))
		synctest.Wait()
		cancel()
		if r := <-waiter; r.err != context.Canceled {
			t.Errorf("the cancelled waiter got (%d, %v), want its own context.Canceled", r.v, r.err)
		}
		close(b.release)
		if r := <-leader; r.v != 7 || r.err != nil {
			t.Errorf("the leader got (%d, %v), want (7, nil)", r.v, r.err)
		}
	})
}

func TestStopReleasesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g flight.Group[string, int]
		b := newBlockingCall()
		stopCh := make(chan struct{})
		stops := 0
		stop := func() <-chan struct{} { stops++; return stopCh }
		leader := do(t.Context(), &g, stop, b.fn(7, nil))
		synctest.Wait()
		if stops != 0 {
			t.Errorf("the caller running fn asked for its stop channel")
		}
		waiter := do(t.Context(), &g, stop, b.fn(0, nil))
		synctest.Wait()
		close(stopCh)
		if r := <-waiter; !errors.Is(r.err, flight.ErrStopped) {
			t.Errorf("the stopped waiter got (%d, %v), want ErrStopped", r.v, r.err)
		}
		close(b.release)
		if r := <-leader; r.v != 7 || r.err != nil {
			t.Errorf("the leader got (%d, %v), want (7, nil)", r.v, r.err)
		}
	})
}

// A call that failed because its caller's context ended is no answer for a waiter, whose own
// context is live: the waiter runs fn itself.
func TestLeaderCancellationIsNotSharedWithWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g flight.Group[string, int]
		leaderCtx, cancelLeader := context.WithCancel(t.Context())
		leader := do(leaderCtx, &g, nil, func() (int, error) {
			<-leaderCtx.Done()
			return 0, leaderCtx.Err()
		})
		synctest.Wait()
		runs := 0
		waiter := do(t.Context(), &g, nil, func() (int, error) { runs++; return 8, nil })
		synctest.Wait()
		cancelLeader()
		if r := <-leader; r.err != context.Canceled {
			t.Errorf("the leader got (%d, %v), want its own context.Canceled", r.v, r.err)
		}
		if r := <-waiter; r.v != 8 || r.err != nil || runs != 1 {
			t.Errorf("the waiter got (%d, %v) after %d runs of its fn, want (8, nil) from its own run", r.v, r.err, runs)
		}
	})
}

// A leader whose context ended but whose fn succeeded shares the result.
func TestLeaderResultSharedDespiteItsCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g flight.Group[string, int]
		leaderCtx, cancelLeader := context.WithCancel(t.Context())
		b := newBlockingCall()
		leader := do(leaderCtx, &g, nil, b.fn(7, nil))
		synctest.Wait()
		waiter := do(t.Context(), &g, nil, b.fn(0, nil))
		synctest.Wait()
		cancelLeader()
		close(b.release)
		for _, out := range []<-chan result{leader, waiter} {
			if r := <-out; r.v != 7 || r.err != nil {
				t.Errorf("got (%d, %v), want (7, nil)", r.v, r.err)
			}
		}
		if n := b.runs.Load(); n != 1 {
			t.Errorf("fn ran %d times, want once", n)
		}
	})
}

func TestKeysAreIndependent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g flight.Group[string, int]
		b := newBlockingCall()
		held := do(t.Context(), &g, nil, b.fn(7, nil))
		synctest.Wait()
		if v, err := g.Do(t.Context(), nil, "other", func() (int, error) { return 9, nil }); v != 9 || err != nil {
			t.Errorf("another key got (%d, %v), want (9, nil)", v, err)
		}
		close(b.release)
		<-held
	})
}

// Calls for several keys run at once, and each key's waiters find their own call whichever
// ended first: the key whose call started first among them included.
func TestManyKeysRunningShareTheirOwnCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g flight.Group[string, int]
		calls := map[string]*blockingCall{"a": newBlockingCall(), "b": newBlockingCall(), "c": newBlockingCall()}
		start := func(key string, v int) <-chan result {
			out := make(chan result, 1)
			go func() {
				v, err := g.Do(t.Context(), nil, key, calls[key].fn(v, nil))
				out <- result{v, err}
			}()
			synctest.Wait()
			return out
		}
		a, b, c := start("a", 1), start("b", 2), start("c", 3)
		close(calls["a"].release)
		if r := <-a; r.v != 1 {
			t.Errorf("a: got %d, want 1", r.v)
		}
		// With a's call over, b and c still run: their callers must wait for them.
		b2, c2 := start("b", 20), start("c", 30)
		d := start("a", 10) // a's key is free: a new call
		close(calls["c"].release)
		close(calls["b"].release)
		for name, out := range map[string][]<-chan result{"b": {b, b2}, "c": {c, c2}} {
			want := map[string]int{"b": 2, "c": 3}[name]
			for _, o := range out {
				if r := <-o; r.v != want || r.err != nil {
					t.Errorf("%s: got (%d, %v), want (%d, nil)", name, r.v, r.err, want)
				}
			}
		}
		if r := <-d; r.v != 10 {
			t.Errorf("a again: got %d, want 10", r.v)
		}
		for key, bc := range calls {
			want := int32(1)
			if key == "a" {
				want = 2
			}
			if n := bc.runs.Load(); n != want {
				t.Errorf("%s ran %d times, want %d", key, n, want)
			}
		}
	})
}
