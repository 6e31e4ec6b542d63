package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// featProgressTool reports n steps of progress, then answers with its progress token.
func featProgressTool(n int) mcptest.ToolFunc {
	return func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		for i := 1; i <= n; i++ {
			call.Progress(float64(i), float64(n), fmt.Sprintf("step %d", i))
		}
		return featText(string(call.ProgressToken)), nil
	}
}

func featWantSteps(n int) []mcpclient.Progress {
	var want []mcpclient.Progress
	for i := 1; i <= n; i++ {
		want = append(want, mcpclient.Progress{Progress: float64(i), Total: float64(n), Message: fmt.Sprintf("step %d", i)})
	}
	return want
}

// TestFeaturesProgress paces the tool by the client's handler, so that every report arrives
// before the answer however the server sends it (over HTTP with JSON answers, on the GET
// stream, which nothing orders with the POST's answer).
//
// The test stays out of the parallel phase: a call with progress over HTTP leaves a timer that
// fires after the call returns, and one firing as the next round of tests (-count) begins would
// be seen by a test that counts the process's goroutines.
func TestFeaturesProgress(t *testing.T) {
	featEach(t, func(t *testing.T, b featBackend) {
		seen := make(chan mcpclient.Progress, 8)
		_, d := b.start(t, mcptest.WithTool(mcpclient.Tool{Name: "steps"}, func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			for i := 1; i <= 5; i++ {
				call.Progress(float64(i), 5, fmt.Sprintf("step %d", i))
				select {
				case <-seen:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return featText(string(call.ProgressToken)), nil
		}))
		c := mcptest.NewClient(t, d)

		var mu sync.Mutex
		var got []mcpclient.Progress
		req, err := c.NewRequest("tools/call", mcpclient.CallToolParams{Name: "steps"}, mcpclient.WithProgress(func(p mcpclient.Progress) {
			mu.Lock()
			got = append(got, p)
			mu.Unlock()
			seen <- p
		}))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(testCtx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		// The token is the request's own id.
		if tok := text(t, resp); tok != req.ID().JSON() {
			t.Errorf("progress token %s, want the request id %s", tok, req.ID().JSON())
		}
		mu.Lock()
		defer mu.Unlock()
		if want := featWantSteps(5); !slices.Equal(got, want) {
			t.Errorf("progress %v, want %v", got, want)
		}
	})
}

// TestFeaturesProgressBeforeTheAnswer: reports sent on the answer's own channel before the
// answer all reach the handler, in order, by the time the call returns. Over HTTP with JSON
// answers they travel on the GET stream instead, with no order to the answer: not checked.
//
// The test stays out of the parallel phase: a call with progress over HTTP leaves a timer that
// fires after the call returns, and one firing as the next round of tests (-count) begins would
// be seen by a test that counts the process's goroutines.
func TestFeaturesProgressBeforeTheAnswer(t *testing.T) {
	featEach(t, func(t *testing.T, b featBackend) {
		if b.name == "http-json" {
			t.Skip("progress on the GET stream has no order to a JSON answer")
		}
		_, d := b.start(t, mcptest.WithTool(mcpclient.Tool{Name: "steps"}, featProgressTool(5)))
		c := mcptest.NewClient(t, d)
		for range 3 {
			var mu sync.Mutex
			var got []mcpclient.Progress
			_, err := c.CallTool(testCtx(t), "steps", nil, mcpclient.WithProgress(func(p mcpclient.Progress) {
				mu.Lock()
				got = append(got, p)
				mu.Unlock()
			}))
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			if want := featWantSteps(5); !slices.Equal(got, want) {
				t.Errorf("progress %v, want %v", got, want)
			}
			mu.Unlock()
		}
	})
}

func TestFeaturesProgressNotAskedNotSent(t *testing.T) {
	t.Parallel()
	featEach(t, func(t *testing.T, b featBackend) {
		_, d := b.start(t, mcptest.WithTool(mcpclient.Tool{Name: "steps"}, featProgressTool(3)))
		var mu sync.Mutex
		var stray []string
		c := mcptest.NewClient(t, d, mcpclient.WithNotificationHandler("notifications/progress", func(_ context.Context, _ string, params json.RawMessage) {
			mu.Lock()
			stray = append(stray, string(params))
			mu.Unlock()
		}))
		res, err := c.CallTool(testCtx(t), "steps", nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Text() != "" {
			t.Errorf("the tool saw a progress token %q in a call without WithProgress", res.Text())
		}
		// A ping after the call lets any stray report reach the handler on the connection.
		if err := c.Ping(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(stray) > 0 {
			t.Errorf("progress sent for a call that asked for none: %v", stray)
		}
	})
}

// featTicker reports progress every tick until it has done n (n < 0: forever) or ctx ends; it
// records whether ctx ended.
type featTicker struct {
	tick      time.Duration
	n         int
	cancelled chan struct{}
}

func (k *featTicker) tool(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	t := time.NewTicker(k.tick)
	defer t.Stop()
	for i := 1; k.n < 0 || i <= k.n; i++ {
		select {
		case <-ctx.Done():
			close(k.cancelled)
			return nil, ctx.Err()
		case <-t.C:
		}
		call.Progress(float64(i), 0, "")
	}
	return featText("done"), nil
}

func featAssertTimedOut(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, mcpclient.ErrCallTimeout) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Errorf("error %v: want ErrCallTimeout, context.DeadlineExceeded and ErrOutcomeUnknown", err)
	}
	asError(t, err)
}

func TestFeaturesProgressTimeoutsInMemory(t *testing.T) {
	tests := []struct {
		name      string
		tick      time.Duration
		steps     int // progress reports the tool sends before answering; < 0 forever
		idle, max time.Duration
		wantErr   bool
		elapsed   time.Duration
	}{
		{"progress keeps the call alive past idle", time.Second, 10, 2 * time.Second, 0, false, 10 * time.Second},
		{"silence ends it after idle", 5 * time.Second, 1, 2 * time.Second, 0, true, 2 * time.Second},
		{"max ends it despite progress", time.Second, -1, 2 * time.Second, 7 * time.Second, true, 7 * time.Second},
		{"max alone", time.Second, -1, 0, 3 * time.Second, true, 3 * time.Second},
		{"an answer before max", time.Second, 3, 0, 10 * time.Second, false, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k := &featTicker{tick: tt.tick, n: tt.steps, cancelled: make(chan struct{})}
				srv := mcptest.NewServer(mcptest.WithTool(mcpclient.Tool{Name: "slow"}, k.tool))
				defer srv.Close()
				c, err := mcpclient.Connect(context.Background(), srv.Transport())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				var mu sync.Mutex
				reports := 0
				start := time.Now()
				res, err := c.CallTool(context.Background(), "slow", nil, mcpclient.WithTimeouts(tt.idle, tt.max),
					mcpclient.WithProgress(func(mcpclient.Progress) { mu.Lock(); reports++; mu.Unlock() }))
				if d := time.Since(start); d != tt.elapsed {
					t.Errorf("the call took %v, want %v", d, tt.elapsed)
				}
				if !tt.wantErr {
					if err != nil || res.Text() != "done" {
						t.Fatalf("got %+v, %v", res, err)
					}
					mu.Lock()
					defer mu.Unlock()
					if reports != tt.steps {
						t.Errorf("%d reports, want %d", reports, tt.steps)
					}
					return
				}
				featAssertTimedOut(t, err)
				// The client told the server, and the tool's context ended.
				<-k.cancelled
				if n := srv.NotificationsReceived("notifications/cancelled"); n != 1 {
					t.Errorf("%d notifications/cancelled, want 1", n)
				}
			})
		})
	}
}

// The test and its cases run alone: keeping a call alive takes progress reports well within the
// idle bound, which a machine busy with other tests cannot promise.
func TestFeaturesProgressTimeoutsOverHTTP(t *testing.T) {
	for _, b := range featBackends {
		if !b.overHTTP() {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			t.Run("progress keeps alive", func(t *testing.T) {
				k := &featTicker{tick: 20 * time.Millisecond, n: 25, cancelled: make(chan struct{})}
				_, d := b.start(t, mcptest.WithTool(mcpclient.Tool{Name: "slow"}, k.tool))
				c := mcptest.NewClient(t, d)
				res, err := c.CallTool(testCtx(t), "slow", nil, mcpclient.WithTimeouts(250*time.Millisecond, 0))
				if err != nil || res.Text() != "done" {
					t.Fatalf("got %+v, %v; want the answer after 500ms of progress", res, err)
				}
			})
			t.Run("max ends it", func(t *testing.T) {
				k := &featTicker{tick: 20 * time.Millisecond, n: -1, cancelled: make(chan struct{})}
				srv, d := b.start(t, mcptest.WithTool(mcpclient.Tool{Name: "slow"}, k.tool))
				c := mcptest.NewClient(t, d)
				_, err := c.CallTool(testCtx(t), "slow", nil, mcpclient.WithTimeouts(250*time.Millisecond, 400*time.Millisecond))
				featAssertTimedOut(t, err)
				if b.cancelsByClosingTheStream() {
					// The client closed the stream, which is the cancellation there; the request
					// opted into receipts, so it runs on for a resend to collect.
					assertRunsOn(t, k.cancelled)
					return
				}
				recv(t, k.cancelled, "the tool's context to end")
				if n := srv.NotificationsReceived("notifications/cancelled"); n != 1 {
					t.Errorf("%d notifications/cancelled, want 1", n)
				}
			})
		})
	}
}

// TestFeaturesCancellation cancels a call while its tool runs, as soon as the tool started: over
// HTTP the POST may still be waiting for its answer or its stream. The server must hear
// notifications/cancelled, and the tool's context must end.
func TestFeaturesCancellation(t *testing.T) {
	t.Parallel()
	featEach(t, func(t *testing.T, b featBackend) {
		started := make(chan struct{})
		stopped := make(chan error, 1)
		srv, d := b.start(t, mcptest.WithTool(mcpclient.Tool{Name: "wait"}, func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			close(started)
			<-ctx.Done()
			stopped <- ctx.Err()
			return nil, ctx.Err()
		}))
		c := mcptest.NewClient(t, d)
		ctx, cancel := context.WithCancel(testCtx(t))
		done := make(chan error, 1)
		go func() {
			_, err := c.CallTool(ctx, "wait", nil)
			done <- err
		}()
		recv(t, started, "the tool to start")
		cancel()
		err := recv(t, done, "the call to end")
		if !errors.Is(err, context.Canceled) || !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
			t.Errorf("error %v, want ErrOutcomeUnknown and context.Canceled", err)
		}
		asError(t, err)
		if b.cancelsByClosingTheStream() {
			// Closing the stream is the cancellation in the stateless revisions over HTTP, and the
			// request opted into receipts: the tool runs on, for a resend of its id to collect.
			if n := srv.NotificationsReceived("notifications/cancelled"); n != 0 {
				t.Errorf("%d notifications/cancelled in a stateless revision", n)
			}
			assertRunsOn(t, stopped)
			return
		}
		wait, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		if werr := srv.AwaitNotifications(wait, "notifications/cancelled", 1); werr != nil {
			t.Fatalf("the server was not told: %v (error of the call: %v)", werr, err)
		}
		if got := recv(t, stopped, "the tool's context to end"); !errors.Is(got, context.Canceled) {
			t.Errorf("the tool's context ended with %v", got)
		}
		// The client goes on.
		if err := c.Ping(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	})
}

// A safe request re-issued under a new id asks for progress under that id: reports of the first
// execution, which may still run, and of the new one must not mix.
func TestFeaturesProgressOfAReissueHasItsOwnToken(t *testing.T) {
	var mu sync.Mutex
	var tokens []string
	srv := mcptest.NewTestServer(t, mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithTool(mcpclient.Tool{Name: "lookup"}, func(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			mu.Lock()
			tokens = append(tokens, string(call.ProgressToken))
			mu.Unlock()
			call.Progress(1, 0, string(call.ProgressToken))
			return featText(string(call.ProgressToken)), nil
		}),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "lookup"}))
	c := mcptest.NewClient(t, srv, noWait)
	reports := make(chan string, 4)
	req, err := c.NewRequest("tools/call", mcpclient.CallToolParams{Name: "lookup"}, mcpclient.WithIdempotent(),
		mcpclient.WithProgress(func(p mcpclient.Progress) { reports <- p.Message }))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Request.ID() == req.ID() {
		t.Fatal("the request was not re-issued")
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{req.ID().JSON(), resp.Request.ID().JSON()}
	if !slices.Equal(tokens, want) {
		t.Errorf("progress tokens the server saw %v, want each request's own id %v", tokens, want)
	}
	if tok := text(t, resp); tok != resp.Request.ID().JSON() {
		t.Errorf("the answering execution ran under token %s, want the re-issue's id", tok)
	}
	// The report of the answering execution reached the handler before the answer.
	var last string
	for len(reports) > 0 {
		last = <-reports
	}
	if last != resp.Request.ID().JSON() {
		t.Errorf("last report %q, want the re-issue's", last)
	}
}

func TestProgressReachesCallAndNotificationHandler(t *testing.T) {
	srv := mcptest.NewTestServer(t, mcptest.WithTool(unsafeTool, func(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		call.Progress(1, 2, "half")
		return &mcpclient.CallToolResult{}, nil
	}))
	seen := make(chan string, 1)
	c := mcptest.NewClient(t, srv, mcpclient.WithNotificationHandler("notifications/progress",
		func(_ context.Context, method string, _ json.RawMessage) { seen <- method }))
	var reports []mcpclient.Progress
	if _, err := c.CallTool(context.Background(), "reserve", nil, mcpclient.WithProgress(func(p mcpclient.Progress) { reports = append(reports, p) })); err != nil {
		t.Fatal(err)
	}
	if len(reports) != 1 || <-seen != "notifications/progress" {
		t.Fatalf("call saw %v", reports)
	}
}

// A call's timeout that ends it while the client waits to resume a broken response stream (the
// server asked for a long retry delay) is named as the timeout, as anywhere else; here the server
// keeps no receipts, so the call ends with that attempt.
func TestTimeoutWhileAwaitingAStreamResumption(t *testing.T) {
	t.Parallel()
	h := mcptest.NewTestHTTPServer(t, mcptest.WithSSEResponses(10*time.Second), mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithTool(mcpclient.Tool{Name: "slow"}, func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			return &mcpclient.CallToolResult{}, nil
		}))
	for _, kind := range []mcptest.FaultKind{mcptest.BreakStream, mcptest.DropAfterExecution} {
		h.Inject(mcptest.Fault{Kind: kind, Tool: "slow"})
		c := mcptest.NewClient(t, h)
		start := time.Now()
		_, err := c.CallTool(testCtx(t), "slow", nil, mcpclient.WithTimeouts(300*time.Millisecond, 0))
		featAssertTimedOut(t, err)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the call took %v: the timeout did not end the wait", d)
		}
	}
}

// assertRunsOn fails the test if ended receives within a short while: the server's handler was
// cancelled although it should run on.
func assertRunsOn[T any](t *testing.T, ended <-chan T) {
	t.Helper()
	select {
	case v := <-ended:
		t.Errorf("the tool's context ended (%v) although the request opted into receipts", v)
	case <-time.After(100 * time.Millisecond):
	}
}
