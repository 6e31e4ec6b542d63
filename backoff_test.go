package mcpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// Every test here runs in a synctest bubble: the waits are on the bubble's fake clock, so a
// test of a 1h hint takes no time, and time.Since across a call is exactly the waits it made.

// boRecorder collects RetryPolicy.OnRetry reports.
type boRecorder struct {
	mu       sync.Mutex
	attempts []int
	causes   []error
	waits    []time.Duration
}

func (r *boRecorder) onRetry(attempt int, cause error, delay time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts = append(r.attempts, attempt)
	r.causes = append(r.causes, cause)
	r.waits = append(r.waits, delay)
}

// take returns the reports so far and forgets them.
func (r *boRecorder) take() (attempts []int, causes []error, waits []time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	attempts, causes, waits = r.attempts, r.causes, r.waits
	r.attempts, r.causes, r.waits = nil, nil, nil
	return
}

func boSum(ds []time.Duration) time.Duration {
	var s time.Duration
	for _, d := range ds {
		s += d
	}
	return s
}

func boTool(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("done " + string(call.Arguments))}}, nil
}

func boConstant(d time.Duration) func() backoff.BackOff {
	return func() backoff.BackOff { return backoff.NewConstantBackOff(d) }
}

// boBubble runs f in a synctest bubble with a server (tool "t") and a client made inside it, and
// closes both inside it.
func boBubble(t *testing.T, srvOpts []mcptest.Option, policy mcpclient.RetryPolicy, f func(t *testing.T, srv *mcptest.Server, c *mcpclient.Client)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		opts := append([]mcptest.Option{
			mcptest.WithLogger(mcptest.TestLogger(t)),
			mcptest.WithTool(mcpclient.Tool{Name: "t"}, boTool),
		}, srvOpts...)
		srv := mcptest.NewServer(opts...)
		defer srv.Close()
		c, err := mcpclient.Connect(context.Background(), srv.Transport(),
			mcpclient.WithLogger(mcptest.TestLogger(t)), mcpclient.WithRetryPolicy(policy))
		if err != nil {
			t.Fatalf("Connect: %v", err)
		}
		defer c.Close()
		f(t, srv, c)
	})
}

// boFrames checks that the server received exactly n frames under req's id, each req's bytes.
func boFrames(t *testing.T, srv *mcptest.Server, req *mcpclient.Request, n int) {
	t.Helper()
	got := srv.Received(req.ID())
	if len(got) != n {
		t.Fatalf("server received %d frames under %s, want %d", len(got), req.ID().JSON(), n)
	}
	for i, f := range got {
		if !bytes.Equal(f, req.Bytes()) {
			t.Fatalf("frame %d differs from the request's bytes:\n got %s\nwant %s", i, f, req.Bytes())
		}
	}
}

// boDo sends req and returns its outcome with the fake time it took.
func boDo(ctx context.Context, c *mcpclient.Client, req *mcpclient.Request) (*mcpclient.Response, error, time.Duration) {
	start := time.Now()
	resp, err := c.Do(ctx, req)
	return resp, err, time.Since(start)
}

// TestBackoffNotDeliveredResendsSameBytes: refused attempts are resent under the same id with the
// same bytes, after waits that DefaultBackOff's jitter bounds, and the fake clock agrees with the
// waits OnRetry reports.
func TestBackoffNotDeliveredResendsSameBytes(t *testing.T) {
	for _, mode := range []struct {
		name string
		mode mcptest.Mode
	}{{"receipts", mcptest.ModeReceipts}, {"no receipts", mcptest.ModeNone}} {
		t.Run(mode.name, func(t *testing.T) {
			rec := &boRecorder{}
			policy := mcpclient.RetryPolicy{OnRetry: rec.onRetry}
			boBubble(t, []mcptest.Option{mcptest.WithMode(mode.mode)}, policy, func(t *testing.T, srv *mcptest.Server, c *mcpclient.Client) {
				ctx := context.Background()
				firsts := map[time.Duration]bool{}
				const calls = 20
				for i := range calls {
					srv.Inject(mcptest.Fault{Kind: mcptest.Fail, Tool: "t", Times: 2})
					req := callReq(t, c, "t", map[string]int{"n": i})
					resp, err, elapsed := boDo(ctx, c, req)
					if err != nil {
						t.Fatalf("call %d: %v", i, err)
					}
					if resp.Attempts != 3 || resp.Request.ID() != req.ID() {
						t.Fatalf("call %d: answered by %s after %d attempts; want %s after 3", i, resp.Request.ID().JSON(), resp.Attempts, req.ID().JSON())
					}
					boFrames(t, srv, req, 3)
					if n := srv.ExecutionsOf("t", req.ID()); n != 1 {
						t.Fatalf("call %d: executed %d times, want 1 (on attempt 3)", i, n)
					}
					if e, _ := c.Ledger().Lookup(req.ID()); e.State != mcpclient.StateAnswered || e.Attempts != 3 {
						t.Fatalf("call %d: ledger %v after %d attempts, want answered after 3", i, e.State, e.Attempts)
					}

					attempts, causes, waits := rec.take()
					if fmt.Sprint(attempts) != "[1 2]" {
						t.Fatalf("call %d: OnRetry attempts %v, want [1 2]", i, attempts)
					}
					for j, cause := range causes {
						if !errors.Is(cause, mcptest.ErrUnavailable) || transport.OutcomeOf(cause) != transport.NotDelivered {
							t.Fatalf("call %d: OnRetry cause %d = %v, want the server's not-delivered refusal", i, j, cause)
						}
					}
					if elapsed != boSum(waits) {
						t.Fatalf("call %d took %v on the fake clock, but OnRetry reported waits %v (sum %v)", i, elapsed, waits, boSum(waits))
					}
					if w := waits[0]; w < 50*time.Millisecond || w > 150*time.Millisecond {
						t.Fatalf("call %d: first wait %v outside [50ms,150ms]", i, w)
					}
					if w := waits[1]; w < 100*time.Millisecond || w > 300*time.Millisecond {
						t.Fatalf("call %d: second wait %v outside [100ms,300ms]", i, w)
					}
					firsts[waits[0]] = true
				}
				if len(firsts) < 2 {
					t.Errorf("%d calls all waited %v first: no jitter", calls, firsts)
				}
			})
		})
	}
}

// TestBackoffWaits checks the wait before each resend: the policy's BackOff, replaced by a server
// hint capped at MaxServerDelay.
func TestBackoffWaits(t *testing.T) {
	cases := []struct {
		name      string
		faults    []mcptest.Fault
		backoff   func() backoff.BackOff
		maxServer time.Duration
		want      []time.Duration
	}{
		{
			name:    "constant backoff",
			faults:  []mcptest.Fault{{Kind: mcptest.Fail, Tool: "t", Times: 2}},
			backoff: boConstant(time.Second),
			want:    []time.Duration{time.Second, time.Second},
		},
		{
			name:    "server hint replaces the computed wait",
			faults:  []mcptest.Fault{{Kind: mcptest.Fail, Tool: "t", RetryAfter: 2 * time.Second}},
			backoff: boConstant(time.Second),
			want:    []time.Duration{2 * time.Second},
		},
		{
			name:   "server hint replaces the default backoff",
			faults: []mcptest.Fault{{Kind: mcptest.Fail, Tool: "t", RetryAfter: 2 * time.Second}},
			want:   []time.Duration{2 * time.Second},
		},
		{
			name:    "a shorter hint replaces it too",
			faults:  []mcptest.Fault{{Kind: mcptest.Fail, Tool: "t", RetryAfter: 10 * time.Millisecond}},
			backoff: boConstant(time.Second),
			want:    []time.Duration{10 * time.Millisecond},
		},
		{
			name: "a hint applies to its own attempt only",
			faults: []mcptest.Fault{
				{Kind: mcptest.Fail, Tool: "t", Times: 2},
				{Kind: mcptest.Fail, Tool: "t", RetryAfter: 2 * time.Second},
			},
			backoff: boConstant(time.Second),
			want:    []time.Duration{2 * time.Second, time.Second},
		},
		{
			name:      "hint above MaxServerDelay is capped",
			faults:    []mcptest.Fault{{Kind: mcptest.Fail, Tool: "t", RetryAfter: time.Hour}},
			backoff:   boConstant(time.Second),
			maxServer: 10 * time.Second,
			want:      []time.Duration{10 * time.Second},
		},
		{
			name:    "hint above the default MaxServerDelay is capped at 30s",
			faults:  []mcptest.Fault{{Kind: mcptest.Fail, Tool: "t", RetryAfter: time.Hour}},
			backoff: boConstant(time.Second),
			want:    []time.Duration{30 * time.Second},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &boRecorder{}
			policy := mcpclient.RetryPolicy{NewBackOff: tc.backoff, MaxServerDelay: tc.maxServer, OnRetry: rec.onRetry}
			boBubble(t, nil, policy, func(t *testing.T, srv *mcptest.Server, c *mcpclient.Client) {
				for _, f := range tc.faults {
					srv.Inject(f)
				}
				req := callReq(t, c, "t", map[string]int{"n": 1})
				resp, err, elapsed := boDo(context.Background(), c, req)
				if err != nil {
					t.Fatal(err)
				}
				_, _, waits := rec.take()
				if fmt.Sprint(waits) != fmt.Sprint(tc.want) {
					t.Fatalf("waits %v, want %v", waits, tc.want)
				}
				if elapsed != boSum(tc.want) {
					t.Fatalf("the call took %v on the fake clock, want %v", elapsed, boSum(tc.want))
				}
				if resp.Attempts != len(tc.want)+1 {
					t.Fatalf("attempts %d, want %d", resp.Attempts, len(tc.want)+1)
				}
				boFrames(t, srv, req, len(tc.want)+1)
			})
		})
	}
}

// TestBackoffMaxAttempts: MaxAttempts bounds the sends of a call that is never delivered, hints
// included, and the call ends with ErrNotDelivered and a failed ledger entry.
func TestBackoffMaxAttempts(t *testing.T) {
	cases := []struct {
		name        string
		maxAttempts int
		retryAfter  time.Duration
		want        int
	}{
		{"three", 3, 0, 3},
		{"one", 1, 0, 1},
		{"default", 0, 0, mcpclient.DefaultMaxAttempts},
		{"hints do not add attempts", 2, time.Second, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &boRecorder{}
			policy := mcpclient.RetryPolicy{MaxAttempts: tc.maxAttempts, NewBackOff: boConstant(time.Second), OnRetry: rec.onRetry}
			boBubble(t, nil, policy, func(t *testing.T, srv *mcptest.Server, c *mcpclient.Client) {
				srv.Inject(mcptest.Fault{Kind: mcptest.Fail, Tool: "t", Times: -1, RetryAfter: tc.retryAfter})
				req := callReq(t, c, "t", map[string]int{"n": 1})
				resp, err, elapsed := boDo(context.Background(), c, req)
				if resp != nil || !errors.Is(err, mcpclient.ErrNotDelivered) {
					t.Fatalf("Do = %v, %v; want ErrNotDelivered", resp, err)
				}
				if mcpclient.IsWireError(err) {
					t.Errorf("IsWireError = true for a refusal that never reached the server's handler")
				}
				e := asError(t, err)
				if e.Attempts != tc.want || e.Request.ID() != req.ID() || e.Request != req {
					t.Fatalf("error: attempts %d, id %s, request %p; want %d, %s, %p", e.Attempts, e.Request.ID().JSON(), e.Request, tc.want, req.ID().JSON(), req)
				}
				if !errors.Is(err, mcptest.ErrUnavailable) {
					t.Errorf("error %v does not carry the last cause", err)
				}
				boFrames(t, srv, req, tc.want)
				entry, ok := c.Ledger().Lookup(req.ID())
				if !ok || entry.State != mcpclient.StateFailed || entry.Attempts != tc.want {
					t.Fatalf("ledger entry %+v, want failed after %d attempts", entry, tc.want)
				}
				attempts, _, waits := rec.take()
				if len(waits) != tc.want-1 {
					t.Fatalf("OnRetry called %d times (attempts %v), want %d", len(waits), attempts, tc.want-1)
				}
				if elapsed != boSum(waits) {
					t.Fatalf("the call took %v, waits were %v", elapsed, waits)
				}
			})
		})
	}
}

// TestBackoffRetryNever: RetryNever sends once, whatever the outcome.
func TestBackoffRetryNever(t *testing.T) {
	cases := []struct {
		name  string
		fault mcptest.Fault
		want  error
		state mcpclient.State
	}{
		{"not delivered", mcptest.Fault{Kind: mcptest.Fail, Tool: "t", Times: -1}, mcpclient.ErrNotDelivered, mcpclient.StateFailed},
		{"uncertain", mcptest.Fault{Kind: mcptest.DropBeforeExecution, Tool: "t", Times: -1}, mcpclient.ErrOutcomeUnknown, mcpclient.StateUncertain},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &boRecorder{}
			policy := mcpclient.RetryPolicy{Mode: mcpclient.RetryNever, NewBackOff: boConstant(time.Second), OnRetry: rec.onRetry}
			boBubble(t, nil, policy, func(t *testing.T, srv *mcptest.Server, c *mcpclient.Client) {
				srv.Inject(tc.fault)
				req := callReq(t, c, "t", map[string]int{"n": 1})
				_, err, elapsed := boDo(context.Background(), c, req)
				if !errors.Is(err, tc.want) {
					t.Fatalf("err = %v, want %v", err, tc.want)
				}
				if e := asError(t, err); e.Attempts != 1 || e.Request.ID() != req.ID() {
					t.Fatalf("error names %s after %d attempts, want %s after 1", e.Request.ID().JSON(), e.Attempts, req.ID().JSON())
				}
				boFrames(t, srv, req, 1)
				if attempts, _, _ := rec.take(); len(attempts) != 0 {
					t.Fatalf("OnRetry called for attempts %v", attempts)
				}
				if elapsed != 0 {
					t.Fatalf("the call waited %v", elapsed)
				}
				if e, _ := c.Ledger().Lookup(req.ID()); e.State != tc.state || e.Attempts != 1 {
					t.Fatalf("ledger %v after %d attempts, want %v after 1", e.State, e.Attempts, tc.state)
				}
			})
		})
	}
}

// TestBackoffContextDeadline: the caller's deadline ends the loop during a wait, at the deadline,
// with an error that names the request.
func TestBackoffContextDeadline(t *testing.T) {
	cases := []struct {
		name  string
		fault mcptest.Fault
		want  error
		state mcpclient.State
	}{
		{"not delivered", mcptest.Fault{Kind: mcptest.Fail, Tool: "t", Times: -1}, mcpclient.ErrNotDelivered, mcpclient.StateFailed},
		{"uncertain with receipts", mcptest.Fault{Kind: mcptest.DropBeforeExecution, Tool: "t", Times: -1}, mcpclient.ErrOutcomeUnknown, mcpclient.StateUncertain},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &boRecorder{}
			policy := mcpclient.RetryPolicy{MaxAttempts: 10, NewBackOff: boConstant(time.Second), OnRetry: rec.onRetry}
			boBubble(t, nil, policy, func(t *testing.T, srv *mcptest.Server, c *mcpclient.Client) {
				srv.Inject(tc.fault)
				ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
				defer cancel()
				req := callReq(t, c, "t", map[string]int{"n": 1})
				_, err, elapsed := boDo(ctx, c, req)
				if elapsed != 2500*time.Millisecond {
					t.Errorf("the call ended after %v, want at the deadline (2.5s)", elapsed)
				}
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("err = %v, want context.DeadlineExceeded in the chain", err)
				}
				if !errors.Is(err, tc.want) {
					t.Fatalf("err = %v, want %v", err, tc.want)
				}
				e := asError(t, err)
				if e.Request.ID() != req.ID() || e.Request == nil || e.Request.ID() != req.ID() {
					t.Fatalf("error names %s (request %v), want %s", e.Request.ID().JSON(), e.Request, req.ID().JSON())
				}
				// Sends at 0s, 1s and 2s; the deadline falls in the wait after the third.
				if e.Attempts != 3 {
					t.Errorf("attempts %d, want 3", e.Attempts)
				}
				boFrames(t, srv, req, 3)
				if _, _, waits := rec.take(); len(waits) != 3 {
					t.Errorf("OnRetry reported waits %v, want 3", waits)
				}
				if entry, _ := c.Ledger().Lookup(req.ID()); entry.State != tc.state {
					t.Errorf("ledger state %v, want %v", entry.State, tc.state)
				}
			})
		})
	}
}

// boSeq is a BackOff that waits 1s, 2s, 3s… from its last Reset.
type boSeq struct{ n int }

func (b *boSeq) NextBackOff() time.Duration { b.n++; return time.Duration(b.n) * time.Second }
func (b *boSeq) Reset()                     { b.n = 0 }

// TestBackoffFreshPerRequest: every call gets its own BackOff, so each starts at the first wait
// of the sequence and concurrent calls do not advance each other's.
func TestBackoffFreshPerRequest(t *testing.T) {
	var mu sync.Mutex
	made := 0
	newBackOff := func() backoff.BackOff {
		mu.Lock()
		made++
		mu.Unlock()
		return &boSeq{}
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return made
	}

	t.Run("consecutive", func(t *testing.T) {
		rec := &boRecorder{}
		boBubble(t, nil, mcpclient.RetryPolicy{NewBackOff: newBackOff, OnRetry: rec.onRetry}, func(t *testing.T, srv *mcptest.Server, c *mcpclient.Client) {
			for i := range 3 {
				before := count()
				srv.Inject(mcptest.Fault{Kind: mcptest.Fail, Tool: "t", Times: 2})
				_, err, elapsed := boDo(context.Background(), c, callReq(t, c, "t", map[string]int{"n": i}))
				if err != nil {
					t.Fatal(err)
				}
				if n := count() - before; n != 1 {
					t.Fatalf("call %d made %d BackOffs, want 1", i, n)
				}
				_, _, waits := rec.take()
				if want := []time.Duration{time.Second, 2 * time.Second}; fmt.Sprint(waits) != fmt.Sprint(want) || elapsed != 3*time.Second {
					t.Fatalf("call %d waited %v (%v in all), want %v", i, waits, elapsed, want)
				}
			}
		})
	})

	t.Run("concurrent", func(t *testing.T) {
		rec := &boRecorder{}
		boBubble(t, nil, mcpclient.RetryPolicy{NewBackOff: newBackOff, OnRetry: rec.onRetry}, func(t *testing.T, srv *mcptest.Server, c *mcpclient.Client) {
			before := count()
			srv.Inject(mcptest.Fault{Kind: mcptest.Fail, Tool: "t", Times: 2}) // the first attempt of each
			var wg sync.WaitGroup
			errs := make([]error, 2)
			elapsed := make([]time.Duration, 2)
			for i := range 2 {
				req := callReq(t, c, "t", map[string]int{"n": i})
				wg.Go(func() { _, errs[i], elapsed[i] = boDo(context.Background(), c, req) })
			}
			wg.Wait()
			for i := range 2 {
				if errs[i] != nil {
					t.Fatalf("call %d: %v", i, errs[i])
				}
				if elapsed[i] != time.Second {
					t.Errorf("call %d took %v, want 1s", i, elapsed[i])
				}
			}
			if n := count() - before; n != 2 {
				t.Fatalf("two calls made %d BackOffs, want 2", n)
			}
			if _, _, waits := rec.take(); fmt.Sprint(waits) != fmt.Sprint([]time.Duration{time.Second, time.Second}) {
				t.Fatalf("waits %v, want [1s 1s]", waits)
			}
		})
	})
}

// TestBackoffDefaultSequence: DefaultBackOff doubles from 100ms with ±50% jitter, never stops by
// itself, and starts over after Reset.
func TestBackoffDefaultSequence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for range 200 {
			b := mcpclient.DefaultBackOff()
			for round := range 2 {
				interval := 100 * time.Millisecond
				for i := range 10 {
					d := b.NextBackOff()
					if d == backoff.Stop {
						t.Fatalf("round %d wait %d: Stop", round, i)
					}
					if lo, hi := interval/2, interval*3/2; d < lo || d > hi {
						t.Fatalf("round %d wait %d = %v, outside [%v,%v]", round, i, d, lo, hi)
					}
					interval = min(2*interval, 5*time.Second)
				}
				time.Sleep(time.Hour) // no elapsed-time limit
				if d := b.NextBackOff(); d == backoff.Stop {
					t.Fatal("Stop after an hour")
				}
				b.Reset()
			}
		}
	})
}

func TestDefaultClassify(t *testing.T) {
	rpc := func(code int64, msg, data string) *mcpclient.RPCError {
		e := &mcpclient.RPCError{Code: code, Message: msg}
		if data != "" {
			e.Data = json.RawMessage(data)
		}
		return e
	}
	cases := []struct {
		name   string
		err    error
		resent bool
		want   transport.Outcome
	}{
		{"nil", nil, false, transport.Answered},
		{"nil after a resend", nil, true, transport.Answered},

		{"reused in data.code", rpc(-32600, "bad", `{"code":"MCP_REQUEST_ID_REUSED"}`), false, transport.Conflict},
		{"reused in data.reason", rpc(-32000, "bad", `{"reason":"MCP_REQUEST_ID_REUSED"}`), false, transport.Conflict},
		{"reused in the message", rpc(-32000, "MCP_REQUEST_ID_REUSED: other content", ""), false, transport.Conflict},
		{"reused mid-message", rpc(-32603, "refused (MCP_REQUEST_ID_REUSED)", ""), true, transport.Conflict},
		{"reused, wrapped", fmt.Errorf("exchange: %w", rpc(-32600, "x", `{"code":"MCP_REQUEST_ID_REUSED"}`)), false, transport.Conflict},
		{"marker as a number code is not the marker", rpc(-32000, "bad", `{"code":-32600}`), false, transport.Answered},
		{"other data.code", rpc(-32000, "bad", `{"code":"MCP_RECEIPTS_FULL"}`), false, transport.Answered},
		{"data not an object", rpc(-32000, "bad", `"MCP_REQUEST_ID"`), false, transport.Answered},

		{"invalid request after a resend", rpc(mcpclient.RPCInvalidRequest, "request id already in flight", ""), true, transport.Conflict},
		{"invalid request on a first send", rpc(mcpclient.RPCInvalidRequest, "request id already in flight", ""), false, transport.Answered},
		{"invalid request after a resend, wrapped", fmt.Errorf("x: %w", rpc(mcpclient.RPCInvalidRequest, "", "")), true, transport.Conflict},

		{"method not found", rpc(mcpclient.RPCMethodNotFound, "no", ""), false, transport.Answered},
		{"method not found after a resend", rpc(mcpclient.RPCMethodNotFound, "no", ""), true, transport.Answered},
		{"internal error after a resend", rpc(mcpclient.RPCInternalError, "boom", ""), true, transport.Answered},
		{"server-defined error", rpc(-32000, "receipt store full", `{"code":"MCP_RECEIPTS_FULL"}`), true, transport.Answered},

		{"transport not delivered", &transport.Error{Outcome: transport.NotDelivered, Err: errors.New("dial refused")}, false, transport.NotDelivered},
		{"transport not delivered after a resend", &transport.Error{Outcome: transport.NotDelivered}, true, transport.NotDelivered},
		{"transport not delivered, wrapped", fmt.Errorf("x: %w", &transport.Error{Outcome: transport.NotDelivered}), false, transport.NotDelivered},
		{"transport not delivered by a cancelled context", &transport.Error{Outcome: transport.NotDelivered, Err: context.Canceled}, false, transport.NotDelivered},
		{"transport uncertain", &transport.Error{Outcome: transport.Uncertain}, false, transport.Uncertain},
		{"transport conflict (HTTP 409)", &transport.Error{Outcome: transport.Conflict}, false, transport.Conflict},
		{"transport error without an outcome", &transport.Error{Err: errors.New("?")}, false, transport.Uncertain},

		{"plain error", errors.New("connection reset by peer"), false, transport.Uncertain},
		{"plain error after a resend", errors.New("EOF"), true, transport.Uncertain},
		{"context canceled", context.Canceled, false, transport.Uncertain},
		{"context deadline", context.DeadlineExceeded, false, transport.Uncertain},
		{"wrapped context canceled", fmt.Errorf("waiting: %w", context.Canceled), true, transport.Uncertain},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := mcpclient.DefaultClassify(tc.err, tc.resent); got != tc.want {
				t.Errorf("DefaultClassify(%v, resent=%v) = %v, want %v", tc.err, tc.resent, got, tc.want)
			}
		})
	}

	t.Run("is the default policy's", func(t *testing.T) {
		p := mcpclient.DefaultRetryPolicy()
		for _, tc := range cases {
			if got := p.Classify(tc.err, tc.resent); got != tc.want {
				t.Errorf("%s: DefaultRetryPolicy().Classify = %v, want %v", tc.name, got, tc.want)
			}
		}
		if p.Mode != mcpclient.RetryAuto || p.MaxAttempts != mcpclient.DefaultMaxAttempts || p.MaxServerDelay != 30*time.Second || p.NewBackOff == nil {
			t.Errorf("DefaultRetryPolicy() = %+v", p)
		}
	})
}

// errBoDialRefused is the cause of a dial a boFlakyDial transport refuses.
var errBoDialRefused = errors.New("dial refused (test)")

// boFlakyDial returns a transport to srv whose dials fail when fail says so, given the dial's
// number (1 for the first), and a function reporting how many dials were made.
func boFlakyDial(srv *mcptest.Server, fail func(n int) bool) (transport.Transport, func() int) {
	var mu sync.Mutex
	dials := 0
	tr := transport.DialFunc(func(ctx context.Context, r transport.Receiver) (transport.Conn, error) {
		mu.Lock()
		dials++
		n := dials
		mu.Unlock()
		if fail(n) {
			return nil, &transport.Error{Outcome: transport.NotDelivered, Err: errBoDialRefused}
		}
		return srv.Transport().Connect(ctx, r)
	})
	return tr, func() int {
		mu.Lock()
		defer mu.Unlock()
		return dials
	}
}

// TestBackoffConnectRetriesReportToOnRetry: Connect's failed dials are retried under the policy
// and reported to OnRetry as a call's attempts are, numbered from 1, with the waits the fake
// clock sees; when they run out, the error counts the dials. As for a call, a Connect settled by
// its first dial asks the policy for no BackOff, and one that needs more asks for one.
func TestBackoffConnectRetriesReportToOnRetry(t *testing.T) {
	for _, tc := range []struct {
		name        string
		failures    int
		maxAttempts int
		wantErr     bool
	}{
		{"succeeds on the first dial", 0, 4, false},
		{"succeeds on the third dial", 2, 4, false},
		{"out of attempts", 10, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := mcptest.NewServer(mcptest.WithLogger(mcptest.TestLogger(t)), mcptest.WithTool(mcpclient.Tool{Name: "t"}, boTool))
				defer srv.Close()
				tr, dials := boFlakyDial(srv, func(n int) bool { return n <= tc.failures })
				rec := &boRecorder{}
				made := 0
				newBackOff := func() backoff.BackOff { made++; return boConstant(time.Second)() }
				policy := mcpclient.RetryPolicy{MaxAttempts: tc.maxAttempts, NewBackOff: newBackOff, OnRetry: rec.onRetry}
				start := time.Now()
				c, err := mcpclient.Connect(context.Background(), tr, mcpclient.WithLogger(mcptest.TestLogger(t)), mcpclient.WithRetryPolicy(policy),
					mcpclient.WithProtocolVersion(mcpclient.LatestStatefulProtocolVersion)) // no probe: one dial a session
				elapsed := time.Since(start)
				if c != nil {
					defer c.Close()
				}
				wantDials := min(tc.failures+1, tc.maxAttempts)
				if n := dials(); n != wantDials {
					t.Fatalf("Connect dialed %d times, want %d", n, wantDials)
				}
				if tc.wantErr {
					if !errors.Is(err, mcpclient.ErrNotDelivered) || !errors.Is(err, errBoDialRefused) {
						t.Fatalf("Connect = %v, want ErrNotDelivered caused by the refused dial", err)
					}
					if e := asError(t, err); e.Attempts != wantDials {
						t.Errorf("error counts %d attempts, want %d", e.Attempts, wantDials)
					}
				} else if err != nil {
					t.Fatalf("Connect: %v", err)
				}
				attempts, causes, waits := rec.take()
				if want := fmt.Sprint(seq(1, wantDials-1)); fmt.Sprint(attempts) != want {
					t.Fatalf("OnRetry attempts %v, want %s", attempts, want)
				}
				for i, cause := range causes {
					if !errors.Is(cause, errBoDialRefused) {
						t.Errorf("OnRetry cause %d = %v, want the refused dial", i, cause)
					}
				}
				if elapsed != boSum(waits) || elapsed != time.Duration(wantDials-1)*time.Second {
					t.Errorf("Connect took %v on the fake clock; OnRetry reported waits %v", elapsed, waits)
				}
				if wantMade := min(tc.failures, 1); made != wantMade {
					t.Errorf("Connect made %d BackOffs, want %d", made, wantMade)
				}
			})
		})
	}
}

// TestBackoffReconnectsCountAsAttempts: within a call, a failed reconnection is an attempt, as
// MaxAttempts counts it: OnRetry numbers it after the sends before it, once, and the response
// still counts only the sends.
func TestBackoffReconnectsCountAsAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := mcptest.NewServer(mcptest.WithLogger(mcptest.TestLogger(t)), mcptest.WithTool(mcpclient.Tool{Name: "t"}, boTool))
		defer srv.Close()
		// The first dial opens the session; the two after it, for the call, fail.
		tr, dials := boFlakyDial(srv, func(n int) bool { return n == 2 || n == 3 })
		rec := &boRecorder{}
		policy := mcpclient.RetryPolicy{MaxAttempts: 5, NewBackOff: boConstant(time.Second), OnRetry: rec.onRetry}
		c, err := mcpclient.Connect(context.Background(), tr, mcpclient.WithLogger(mcptest.TestLogger(t)), mcpclient.WithRetryPolicy(policy),
			mcpclient.WithProtocolVersion(mcpclient.LatestStatefulProtocolVersion)) // no probe: one dial a session
		if err != nil {
			t.Fatalf("Connect: %v", err)
		}
		defer c.Close()
		srv.Inject(mcptest.Fault{Kind: mcptest.ExpireSession, Tool: "t"})
		req := callReq(t, c, "t", map[string]int{"n": 1})
		resp, err, elapsed := boDo(context.Background(), c, req)
		if err != nil {
			t.Fatalf("Do: %v", err)
		}
		if resp.Attempts != 2 {
			t.Errorf("response after %d attempts, want 2 sends", resp.Attempts)
		}
		if n := dials(); n != 4 {
			t.Errorf("%d dials, want 4", n)
		}
		attempts, causes, waits := rec.take()
		if fmt.Sprint(attempts) != "[1 2 3]" {
			t.Fatalf("OnRetry attempts %v, want [1 2 3]", attempts)
		}
		if !errors.Is(causes[0], transport.ErrSessionNotFound) || !errors.Is(causes[1], errBoDialRefused) || !errors.Is(causes[2], errBoDialRefused) {
			t.Errorf("OnRetry causes %v, want the expired session, then the refused dials", causes)
		}
		if elapsed != boSum(waits) || elapsed != 3*time.Second {
			t.Errorf("the call took %v on the fake clock; OnRetry reported waits %v", elapsed, waits)
		}
	})
}

// seq returns the integers from lo to hi.
func seq(lo, hi int) []int {
	var s []int
	for i := lo; i <= hi; i++ {
		s = append(s, i)
	}
	return s
}

// Close ends a call waiting between attempts at once, and its error says why once.
func TestBackoffWaitEndsAtClose(t *testing.T) {
	cases := []struct {
		name  string
		fault mcptest.Fault
		want  error
	}{
		{"not delivered", mcptest.Fault{Kind: mcptest.Fail, Tool: "t", Times: -1, RetryAfter: 5 * time.Second}, mcpclient.ErrClosed},
		{"uncertain with receipts", mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "t", Times: -1}, mcpclient.ErrOutcomeUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			policy := mcpclient.RetryPolicy{NewBackOff: boConstant(5 * time.Second)}
			boBubble(t, nil, policy, func(t *testing.T, srv *mcptest.Server, c *mcpclient.Client) {
				srv.Inject(tc.fault)
				req := callReq(t, c, "t", map[string]int{"n": 1})
				done := make(chan error, 1)
				go func() { _, err := c.Do(context.Background(), req); done <- err }()
				synctest.Wait() // the call sleeps in its first wait
				closed := time.Now()
				c.Close()
				err := <-done
				if waited := time.Since(closed); waited != 0 {
					t.Errorf("the call ended %v after Close", waited)
				}
				if !errors.Is(err, tc.want) || !errors.Is(err, mcpclient.ErrClosed) {
					t.Fatalf("err %v, want %v caused by ErrClosed", err, tc.want)
				}
				if e := asError(t, err); e.Request.ID() != req.ID() || e.Attempts != 1 {
					t.Errorf("error names %v after %d attempts", e.Request.ID(), e.Attempts)
				}
				if n := strings.Count(err.Error(), "client closed"); n != 1 {
					t.Errorf("the error names its cause %d times: %v", n, err)
				}
			})
		})
	}
}
