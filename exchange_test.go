package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// onCalls runs h for the exchanges of tools/call requests and passes the others on untouched.
func onCalls(h func(next mcpclient.Handler, ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error)) mcpclient.Interceptor {
	return func(next mcpclient.Handler) mcpclient.Handler {
		return func(ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
			if x.Request.Method() != "tools/call" {
				return next(ctx, x)
			}
			return h(next, ctx, x)
		}
	}
}

// An interceptor that puts another request in the exchange cannot get it sent: the exchange
// sends only the request it was made for, and refuses before anything leaves.
func TestInterceptorCannotSwapTheRequest(t *testing.T) {
	t.Parallel()
	var k counter
	srv := mcptest.NewTestServer(t, mcptest.WithTool(unsafeTool, k.tool))
	var other *mcpclient.Request
	swap := onCalls(func(next mcpclient.Handler, ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
		x.Request = other
		return next(ctx, x)
	})
	c := mcptest.NewClient(t, srv, mcpclient.WithInterceptors(swap), noWait)
	ctx := testCtx(t)
	other = callReq(t, c, "reserve", map[string]int{"n": 2})
	req := callReq(t, c, "reserve", map[string]int{"n": 1})
	awaitHandshake(t, srv)
	frames := srv.FramesReceived()
	_, err := c.Do(ctx, req)
	if mcpclient.CodeOf(err) != mcpclient.CodeRefused || !errors.Is(err, mcpclient.ErrExchangeRequestChanged) {
		t.Fatalf("Do with the request swapped: %v, want CodeRefused with ErrExchangeRequestChanged", err)
	}
	if n := srv.FramesReceived() - frames; n != 0 || k.runs != 0 || len(srv.Received(other.ID())) != 0 {
		t.Errorf("the swapped request went out: %d frames, %d runs", n, k.runs)
	}
	if e, _ := c.Ledger().Lookup(req.ID()); e.State != mcpclient.StateFailed || e.Attempts != 0 {
		t.Errorf("ledger entry %+v, want failed, never sent", e)
	}
	if _, known := c.Ledger().Lookup(other.ID()); known {
		t.Errorf("the request put in the exchange was recorded")
	}
}

// next sends at most once per exchange: a "retry once" interceptor calling it again after an
// uncertain attempt, or a hedging one calling it from two goroutines at once, gets a refusal
// for the second call, and nothing more goes out. The loop counts the one send.
func TestInterceptorNextSendsOnce(t *testing.T) {
	t.Parallel()
	t.Run("again after an uncertain attempt", func(t *testing.T) {
		t.Parallel()
		var k counter
		srv := mcptest.NewTestServer(t, mcptest.WithMode(mcptest.ModeNone), mcptest.WithTool(unsafeTool, k.tool))
		var second error
		retryOnce := onCalls(func(next mcpclient.Handler, ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
			resp, err := next(ctx, x)
			if err != nil {
				resp, err = next(ctx, x)
				second = err
			}
			return resp, err
		})
		c := mcptest.NewClient(t, srv, mcpclient.WithInterceptors(retryOnce), noWait)
		srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "reserve"})
		req := callReq(t, c, "reserve", nil)
		_, err := c.Do(testCtx(t), req)
		if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || asError(t, err).Attempts != 1 {
			t.Fatalf("Do: %v, want ErrOutcomeUnknown after 1 attempt", err)
		}
		if !errors.Is(second, mcpclient.ErrExchangeSent) {
			t.Errorf("the second next: %v, want ErrExchangeSent", second)
		}
		if k.runs != 1 || len(srv.Received(req.ID())) != 1 {
			t.Errorf("%d runs, %d frames, want the request sent and run once", k.runs, len(srv.Received(req.ID())))
		}
		if e, _ := c.Ledger().Lookup(req.ID()); e.State != mcpclient.StateUncertain || e.Attempts != 1 {
			t.Errorf("ledger entry %+v, want uncertain after 1 attempt", e)
		}
	})
	t.Run("twice at once", func(t *testing.T) {
		t.Parallel()
		var k counter
		srv := mcptest.NewTestServer(t, mcptest.WithMode(mcptest.ModeNone), mcptest.WithTool(unsafeTool, k.tool))
		var refusals int
		hedge := onCalls(func(next mcpclient.Handler, ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
			type reply struct {
				resp *mcpclient.Response
				err  error
			}
			replies := make(chan reply, 2)
			for range 2 {
				go func() {
					resp, err := next(ctx, x)
					replies <- reply{resp, err}
				}()
			}
			var answer reply
			for range 2 {
				r := <-replies
				switch {
				case errors.Is(r.err, mcpclient.ErrExchangeSent):
					refusals++
				default:
					answer = r
				}
			}
			return answer.resp, answer.err
		})
		c := mcptest.NewClient(t, srv, mcpclient.WithInterceptors(hedge), noWait)
		req := callReq(t, c, "reserve", nil)
		if _, err := c.Do(testCtx(t), req); err != nil {
			t.Fatal(err)
		}
		if refusals != 1 || k.runs != 1 || len(srv.Received(req.ID())) != 1 {
			t.Errorf("%d refusals, %d runs, %d frames: want one send, one refusal", refusals, k.runs, len(srv.Received(req.ID())))
		}
	})
}

// A timeout interceptor that runs next on a goroutine and returns before that goroutine called
// it: nothing was sent, the call is refused, and the late next is refused too, so the request
// never goes out after the call said it did not.
func TestInterceptorReturningBeforeNext(t *testing.T) {
	t.Parallel()
	var k counter
	srv := mcptest.NewTestServer(t, mcptest.WithMode(mcptest.ModeNone), mcptest.WithTool(unsafeTool, k.tool))
	errTimedOut := errors.New("interceptor: timed out")
	gate := make(chan struct{})
	late := make(chan error, 1)
	var wg sync.WaitGroup
	timeout := onCalls(func(next mcpclient.Handler, ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
		wg.Go(func() {
			<-gate
			_, err := next(context.WithoutCancel(ctx), x)
			late <- err
		})
		return nil, errTimedOut
	})
	c := mcptest.NewClient(t, srv, mcpclient.WithInterceptors(timeout), noWait)
	req := callReq(t, c, "reserve", nil)
	_, err := c.Do(testCtx(t), req)
	close(gate)
	wg.Wait()
	if mcpclient.CodeOf(err) != mcpclient.CodeRefused || !errors.Is(err, errTimedOut) {
		t.Errorf("Do: %v, want CodeRefused with the interceptor's error", err)
	}
	if err := <-late; !errors.Is(err, mcpclient.ErrExchangeSent) {
		t.Errorf("the late next: %v, want ErrExchangeSent", err)
	}
	if k.runs != 0 || len(srv.Received(req.ID())) != 0 {
		t.Errorf("a refused request went out after the call ended: %d runs", k.runs)
	}
}

// A timeout interceptor that returns while its goroutine's next is sending leaves the attempt
// uncertain. The resend under the same id waits until that first sending ended, then reads the
// server's receipt: the tool runs once. Without receipts, the call ends ErrOutcomeUnknown.
func TestInterceptorReturningWhileSending(t *testing.T) {
	for _, mode := range []mcptest.Mode{mcptest.ModeReceipts, mcptest.ModeNone} {
		t.Run(map[mcptest.Mode]string{mcptest.ModeReceipts: "receipts", mcptest.ModeNone: "none"}[mode], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				started, release := make(chan struct{}), make(chan struct{})
				var once sync.Once
				var runs int
				var mu sync.Mutex
				blocking := func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
					mu.Lock()
					runs++
					mu.Unlock()
					once.Do(func() { close(started) })
					<-release
					return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("done")}}, nil
				}
				srv := mcptest.NewTestServer(t, mcptest.WithMode(mode), mcptest.WithTool(unsafeTool, blocking))
				errTimedOut := errors.New("interceptor: timed out")
				late := make(chan error, 1)
				var wg sync.WaitGroup
				defer wg.Wait()
				var releaseOnce sync.Once
				unblock := func() { releaseOnce.Do(func() { close(release) }) }
				defer unblock() // before waiting for the goroutine, on every path
				timeout := onCalls(func(next mcpclient.Handler, ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
					if x.Attempt > 1 {
						return next(ctx, x)
					}
					wg.Go(func() {
						_, err := next(context.WithoutCancel(ctx), x)
						late <- err
					})
					<-started // the request is on the wire
					return nil, errTimedOut
				})
				c := mcptest.NewClient(t, srv, mcpclient.WithInterceptors(timeout), noWait)
				defer c.Close()
				req := callReq(t, c, "reserve", nil)
				type outcome struct {
					resp *mcpclient.Response
					err  error
				}
				ended := make(chan outcome, 1)
				go func() {
					resp, err := c.Do(context.Background(), req)
					ended <- outcome{resp, err}
				}()
				synctest.Wait()
				if mode == mcptest.ModeNone {
					o := <-ended
					if !errors.Is(o.err, mcpclient.ErrOutcomeUnknown) || !errors.Is(o.err, errTimedOut) || asError(t, o.err).Attempts != 1 {
						t.Errorf("Do: %v, want ErrOutcomeUnknown after 1 attempt, with the interceptor's error", o.err)
					}
					unblock()
					if err := <-late; err != nil {
						t.Errorf("the sending next: %v", err)
					}
					if e, _ := c.Ledger().Lookup(req.ID()); e.State != mcpclient.StateUncertain || e.Attempts != 1 {
						t.Errorf("ledger entry %+v, want uncertain after 1 attempt", e)
					}
					return
				}
				select {
				case o := <-ended:
					t.Fatalf("the call ended while its first sending was still under way: %v", o.err)
				default:
				}
				if n := len(srv.Received(req.ID())); n != 1 {
					t.Fatalf("%d frames before the first sending ended, want 1", n)
				}
				unblock()
				o := <-ended
				if o.err != nil {
					t.Fatalf("Do: %v", o.err)
				}
				if err := <-late; err != nil {
					t.Errorf("the sending next: %v", err)
				}
				frames := srv.Received(req.ID())
				assertFramesIdentical(t, frames, 2)
				if runs != 1 || o.resp.Attempts != 2 {
					t.Errorf("%d runs, %d attempts, want 1 run of 2 attempts", runs, o.resp.Attempts)
				}
			})
		})
	}
}

// Whichever comes first, the goroutine's next or the interceptor's return, the call's outcome
// agrees with what was sent: refused and never run, or uncertain. Run with -race.
func TestInterceptorRacingItsNext(t *testing.T) {
	t.Parallel()
	var k counter
	srv := mcptest.NewTestServer(t, mcptest.WithMode(mcptest.ModeNone), mcptest.WithTool(unsafeTool, k.tool))
	var wg sync.WaitGroup
	sent := make(chan error, 20)
	race := onCalls(func(next mcpclient.Handler, ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
		wg.Go(func() {
			_, err := next(context.WithoutCancel(ctx), x)
			sent <- err
		})
		return nil, errors.New("interceptor: gave up")
	})
	c := mcptest.NewClient(t, srv, mcpclient.WithInterceptors(race), noWait)
	for range 10 {
		before := k.runs
		req := callReq(t, c, "reserve", nil)
		_, err := c.Do(testCtx(t), req)
		wg.Wait()
		nextErr := <-sent
		k.mu.Lock()
		ran := k.runs - before
		k.mu.Unlock()
		switch mcpclient.CodeOf(err) {
		case mcpclient.CodeRefused:
			if ran != 0 || !errors.Is(nextErr, mcpclient.ErrExchangeSent) {
				t.Errorf("refused, yet run %d times (next: %v)", ran, nextErr)
			}
		case mcpclient.CodeOutcomeUnknown:
		default:
			t.Errorf("Do: %v, want refused or unknown", err)
		}
	}
}

// An interceptor that answers without calling next (a cache) gives the caller its answer, and
// the id is recorded as never sent.
func TestInterceptorAnsweringByItself(t *testing.T) {
	t.Parallel()
	var k counter
	srv := mcptest.NewTestServer(t, mcptest.WithTool(unsafeTool, k.tool))
	cache := onCalls(func(mcpclient.Handler, context.Context, *mcpclient.Exchange) (*mcpclient.Response, error) {
		return &mcpclient.Response{Result: json.RawMessage(`{"content":[{"type":"text","text":"cached"}]}`)}, nil
	})
	c := mcptest.NewClient(t, srv, mcpclient.WithInterceptors(cache))
	awaitHandshake(t, srv)
	frames := srv.FramesReceived()
	var resp mcpclient.Response
	res, err := c.CallTool(testCtx(t), "reserve", nil, mcpclient.WithResponse(&resp))
	if err != nil || res.Text() != "cached" {
		t.Fatalf("CallTool: %+v, %v, want the cached answer", res, err)
	}
	if srv.FramesReceived() != frames || k.runs != 0 || resp.Attempts != 0 {
		t.Errorf("%d frames, %d runs, %d attempts: want nothing sent", srv.FramesReceived()-frames, k.runs, resp.Attempts)
	}
	if e, _ := c.Ledger().Lookup(resp.Request.ID()); e.State != mcpclient.StateFailed || e.Attempts != 0 {
		t.Errorf("ledger entry %+v, want never sent", e)
	}
}

// What the id's state and the retries follow is the wire: an interceptor that makes up an answer
// after a lost reply cannot hide that the request may have run, and one that turns the server's
// answer into an error cannot make it look lost and resent.
func TestInterceptorCannotOverrideTheWire(t *testing.T) {
	t.Parallel()
	t.Run("made-up answer after a lost reply", func(t *testing.T) {
		t.Parallel()
		var k counter
		srv := mcptest.NewTestServer(t, mcptest.WithMode(mcptest.ModeNone), mcptest.WithTool(unsafeTool, k.tool))
		fallback := onCalls(func(next mcpclient.Handler, ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
			if resp, err := next(ctx, x); err == nil {
				return resp, nil
			}
			return &mcpclient.Response{Result: json.RawMessage(`{"content":[]}`)}, nil
		})
		c := mcptest.NewClient(t, srv, mcpclient.WithInterceptors(fallback), noWait)
		srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "reserve"})
		req := callReq(t, c, "reserve", nil)
		_, err := c.Do(testCtx(t), req)
		if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
			t.Errorf("Do: %v, want ErrOutcomeUnknown", err)
		}
		if e, _ := c.Ledger().Lookup(req.ID()); e.State != mcpclient.StateUncertain || e.Attempts != 1 || k.runs != 1 {
			t.Errorf("ledger entry %+v after %d runs, want uncertain after 1 attempt", e, k.runs)
		}
	})
	t.Run("answer turned into an error", func(t *testing.T) {
		t.Parallel()
		var k counter
		srv := mcptest.NewTestServer(t, mcptest.WithTool(unsafeTool, k.tool))
		errRejected := errors.New("interceptor: result rejected")
		reject := onCalls(func(next mcpclient.Handler, ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
			if _, err := next(ctx, x); err != nil {
				return nil, err
			}
			return nil, errRejected
		})
		c := mcptest.NewClient(t, srv, mcpclient.WithInterceptors(reject), noWait)
		req := callReq(t, c, "reserve", nil)
		_, err := c.Do(testCtx(t), req)
		if mcpclient.CodeOf(err) != mcpclient.CodeServerError || !errors.Is(err, errRejected) || asError(t, err).Attempts != 1 {
			t.Errorf("Do: %v, want CodeServerError with the interceptor's error after 1 attempt", err)
		}
		if e, _ := c.Ledger().Lookup(req.ID()); e.State != mcpclient.StateAnswered || e.Attempts != 1 || k.runs != 1 {
			t.Errorf("ledger entry %+v after %d runs, want answered after 1 attempt", e, k.runs)
		}
	})
}
