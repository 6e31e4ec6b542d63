package mcpclient_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// The tests here are about the one dial that concurrent calls share when the session is lost:
// that it ends on every path, a panic in the caller's code included, and that a call waiting
// for it stops for its own reasons only. Each runs in a synctest bubble, so a call that would
// wait to its deadline fails the test at once on the fake clock rather than hanging it.

var errHookBug = errors.New("a bug in the caller's interceptor or hook (test)")

// dialBubble runs f in a synctest bubble with a server (unsafe tool "t") and a client connected
// to it, both closed inside the bubble. dial, if not nil, wraps the server's transport; the
// client speaks a stateful revision, so that a session is opened by initialize alone.
func dialBubble(t *testing.T, dial func(srv *mcptest.Server) transport.Transport, opts []mcpclient.Option, f func(t *testing.T, srv *mcptest.Server, c *mcpclient.Client)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		srv := mcptest.NewServer(mcptest.WithLogger(mcptest.TestLogger(t)), mcptest.WithTool(mcpclient.Tool{Name: "t"}, boTool))
		defer srv.Close()
		tr := srv.Transport()
		if dial != nil {
			tr = dial(srv)
		}
		opts = append([]mcpclient.Option{mcpclient.WithLogger(mcptest.TestLogger(t)), noWait,
			mcpclient.WithProtocolVersion(mcpclient.LatestStatefulProtocolVersion)}, opts...)
		c, err := mcpclient.Connect(context.Background(), tr, opts...)
		if err != nil {
			t.Fatalf("Connect: %v", err)
		}
		defer c.Close()
		f(t, srv, c)
	})
}

// loseSession makes the server forget the client's session at the next call of "t": that call
// dials again.
func loseSession(srv *mcptest.Server) {
	srv.Inject(mcptest.Fault{Kind: mcptest.ExpireSession, Tool: "t"})
}

// callT calls "t" under a context that ends a minute later on the bubble's clock, and returns
// its error and the time it took.
func callT(c *mcpclient.Client) (error, time.Duration) {
	return callTCtx(context.Background(), c)
}

func callTCtx(ctx context.Context, c *mcpclient.Client) (error, time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	start := time.Now()
	_, err := c.CallTool(ctx, "t", map[string]int{"n": 1})
	return err, time.Since(start)
}

// panicOf runs f and returns what it panicked with, or nil.
func panicOf(f func()) (r any) {
	defer func() { r = recover() }()
	f()
	return nil
}

type callResult struct {
	err     error
	elapsed time.Duration
}

// goCallT calls "t" under ctx on a goroutine of its own.
func goCallT(ctx context.Context, c *mcpclient.Client) <-chan callResult {
	out := make(chan callResult, 1)
	go func() {
		err, elapsed := callTCtx(ctx, c)
		out <- callResult{err, elapsed}
	}()
	return out
}

// handshakes counts the initialize requests the interceptors see.
type handshakes struct{ n atomic.Int32 }

func (h *handshakes) intercept(next mcpclient.Handler) mcpclient.Handler {
	return func(ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
		if x.Handshake && x.Request.Method() == "initialize" {
			h.n.Add(1)
		}
		return next(ctx, x)
	}
}

// A handshake interceptor that panics takes down the call whose dial ran it, and only that:
// the next call dials again, at once.
func TestDialHandshakeInterceptorPanicLeavesClientUsable(t *testing.T) {
	var armed atomic.Bool
	panicky := func(next mcpclient.Handler) mcpclient.Handler {
		return func(ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
			if x.Handshake && armed.CompareAndSwap(true, false) {
				panic(errHookBug)
			}
			return next(ctx, x)
		}
	}
	dialBubble(t, nil, []mcpclient.Option{mcpclient.WithInterceptors(panicky)}, func(t *testing.T, srv *mcptest.Server, c *mcpclient.Client) {
		armed.Store(true)
		loseSession(srv)
		if r := panicOf(func() { callT(c) }); r != errHookBug {
			t.Fatalf("the call whose dial ran the interceptor recovered %v, want its panic", r)
		}
		if err, elapsed := callT(c); err != nil || elapsed != 0 {
			t.Fatalf("the next call: %v after %v, want a result at once", err, elapsed)
		}
	})
}

// The same for an attempt hook that panics on a handshake attempt, once the server answered
// initialize: the connection that dial opened is closed, not left to Close.
func TestDialAttemptHookPanicLeavesClientUsable(t *testing.T) {
	var armed atomic.Bool
	hook := func(ctx context.Context, ev mcpclient.AttemptEvent) {
		if ev.Handshake && armed.CompareAndSwap(true, false) {
			panic(errHookBug)
		}
	}
	var conns openConns
	dialBubble(t, conns.transport, []mcpclient.Option{mcpclient.WithAttemptHook(hook)}, func(t *testing.T, srv *mcptest.Server, c *mcpclient.Client) {
		armed.Store(true)
		loseSession(srv)
		if r := panicOf(func() { callT(c) }); r != errHookBug {
			t.Fatalf("the call whose dial ran the hook recovered %v, want its panic", r)
		}
		synctest.Wait()
		if n := conns.n.Load(); n != 0 {
			t.Errorf("%d connections open after the dial panicked, want none", n)
		}
		if err, elapsed := callT(c); err != nil || elapsed != 0 {
			t.Fatalf("the next call: %v after %v, want a result at once", err, elapsed)
		}
	})
}

// openConns counts the connections to the server whose pipe is still open.
type openConns struct{ n atomic.Int32 }

func (o *openConns) transport(srv *mcptest.Server) transport.Transport {
	return &transport.Memory{Accept: func(sc *transport.MemoryConn) error {
		if err := srv.Accept(sc); err != nil {
			return err
		}
		o.n.Add(1)
		go func() {
			<-sc.Done()
			o.n.Add(-1)
		}()
		return nil
	}}
}

// Calls waiting for a dial that panics are not left waiting, nor panicked on behalf of the call
// that dialed: they dial again, once for all of them, and have their results.
func TestDialPanicReleasesWaitersToDialAgain(t *testing.T) {
	var armed atomic.Bool
	var release chan struct{} // made in the bubble, for a receive there to block durably
	panicky := func(next mcpclient.Handler) mcpclient.Handler {
		return func(ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
			if x.Handshake && armed.CompareAndSwap(true, false) {
				<-release
				panic(errHookBug)
			}
			return next(ctx, x)
		}
	}
	var hs handshakes
	opts := []mcpclient.Option{mcpclient.WithInterceptors(hs.intercept, panicky)}
	dialBubble(t, nil, opts, func(t *testing.T, srv *mcptest.Server, c *mcpclient.Client) {
		release = make(chan struct{})
		armed.Store(true)
		loseSession(srv)
		panicked := make(chan any, 1)
		go func() { panicked <- panicOf(func() { callT(c) }) }()
		synctest.Wait() // the dial is held in the interceptor
		var waiters []<-chan callResult
		for range 3 {
			waiters = append(waiters, goCallT(context.Background(), c))
		}
		synctest.Wait() // the calls wait for the dial
		close(release)
		if r := <-panicked; r != errHookBug {
			t.Fatalf("the call whose dial ran the interceptor recovered %v, want its panic", r)
		}
		for i, w := range waiters {
			if r := <-w; r.err != nil || r.elapsed != 0 {
				t.Errorf("waiter %d: %v after %v, want a result at once", i, r.err, r.elapsed)
			}
		}
		if n := hs.n.Load(); n != 3 {
			t.Errorf("%d initialize requests, want 3: Connect's, the one that panicked, and one for the waiters", n)
		}
	})
}

// stuckDials wraps the server's transport: the dials for which stuck says so (n is 1 for the
// first) wait until their context ends.
func stuckDials(stuck func(n int) bool) func(srv *mcptest.Server) transport.Transport {
	return func(srv *mcptest.Server) transport.Transport {
		var mu sync.Mutex
		dials := 0
		return transport.DialFunc(func(ctx context.Context, r transport.Receiver) (transport.Conn, error) {
			mu.Lock()
			dials++
			n := dials
			mu.Unlock()
			if stuck(n) {
				<-ctx.Done()
				return nil, &transport.Error{Outcome: transport.NotDelivered, Err: ctx.Err()}
			}
			return srv.Transport().Connect(ctx, r)
		})
	}
}

// Close releases the calls waiting for a dial that does not end, with ErrClosed.
func TestDialWaitersReleasedByClose(t *testing.T) {
	dialBubble(t, stuckDials(func(n int) bool { return n == 2 }), nil, func(t *testing.T, srv *mcptest.Server, c *mcpclient.Client) {
		loseSession(srv)
		leaderCtx, cancelLeader := context.WithCancel(context.Background())
		defer cancelLeader()
		leader := goCallT(leaderCtx, c)
		synctest.Wait() // the dial is stuck
		var waiters []<-chan callResult
		for range 2 {
			waiters = append(waiters, goCallT(context.Background(), c))
		}
		synctest.Wait() // the calls wait for the dial
		closed := make(chan struct{})
		go func() { c.Close(); close(closed) }()
		for i, w := range waiters {
			if r := <-w; !errors.Is(r.err, mcpclient.ErrClosed) || r.elapsed != 0 {
				t.Errorf("waiter %d: %v after %v, want ErrClosed at once", i, r.err, r.elapsed)
			}
		}
		cancelLeader()
		if r := <-leader; r.err == nil {
			t.Errorf("the call whose dial was stuck succeeded")
		}
		<-closed
	})
}

// A call waiting for a dial stops when its own context ends, with its own context's error; the
// dial goes on for the call that runs it.
func TestDialWaiterEndsWithItsOwnContext(t *testing.T) {
	dialBubble(t, stuckDials(func(n int) bool { return n == 2 }), nil, func(t *testing.T, srv *mcptest.Server, c *mcpclient.Client) {
		loseSession(srv)
		leaderCtx, cancelLeader := context.WithCancel(context.Background())
		defer cancelLeader()
		leader := goCallT(leaderCtx, c)
		synctest.Wait() // the dial is stuck
		waiterCtx, cancelWaiter := context.WithCancel(context.Background())
		waiter := goCallT(waiterCtx, c)
		synctest.Wait() // the call waits for the dial
		cancelWaiter()
		if r := <-waiter; !errors.Is(r.err, context.Canceled) || r.elapsed != 0 {
			t.Errorf("the cancelled waiter: %v after %v, want context.Canceled at once", r.err, r.elapsed)
		}
		select {
		case r := <-leader:
			t.Fatalf("the dialing call ended with its waiter: %v", r.err)
		default:
		}
		cancelLeader()
		<-leader
	})
}

// A call waiting for a dial that failed because the dialing call's own context ended does not
// take that cancellation for its own: it dials again, and has its result.
func TestDialWaiterDoesNotInheritTheDialersCancellation(t *testing.T) {
	dialBubble(t, stuckDials(func(n int) bool { return n == 2 }), nil, func(t *testing.T, srv *mcptest.Server, c *mcpclient.Client) {
		loseSession(srv)
		leaderCtx, cancelLeader := context.WithCancel(context.Background())
		leader := goCallT(leaderCtx, c)
		synctest.Wait() // the dial is stuck
		waiter := goCallT(context.Background(), c)
		synctest.Wait() // the call waits for the dial
		cancelLeader()
		if r := <-leader; !errors.Is(r.err, context.Canceled) {
			t.Errorf("the dialing call: %v, want context.Canceled", r.err)
		}
		if r := <-waiter; r.err != nil || r.elapsed != 0 {
			t.Errorf("the waiter: %v after %v, want a result at once", r.err, r.elapsed)
		}
	})
}
