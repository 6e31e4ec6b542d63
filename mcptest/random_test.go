package mcptest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// randomPattern sends n tools/call requests one after the other and returns, for each, 'F' for
// a refused request and '.' for an answer.
func randomPattern(t *testing.T, n int, rf mcptest.RandomFaults) (string, map[mcptest.FaultKind]int) {
	t.Helper()
	var runs int
	var mu sync.Mutex
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echo(&runs, &mu)),
		mcptest.WithRandomFaults(rf))
	r := dialRaw(t, srv)
	var b strings.Builder
	for i := range n {
		r.send(call(fmt.Sprint(i+1), `{}`))
		got := r.recv()
		switch {
		case strings.HasPrefix(got, "fail:not delivered:"):
			b.WriteByte('F')
		case strings.Contains(got, `"result"`):
			b.WriteByte('.')
		default:
			t.Fatalf("request %d: %s", i+1, got)
		}
	}
	return b.String(), srv.RandomFaultHits()
}

func TestRandomFaultsAreSeededAndKeepTheirRate(t *testing.T) {
	rf := mcptest.RandomFaults{Rate: 0.3, Seed: 42, Kinds: []mcptest.FaultKind{mcptest.Fail}, Tool: "echo"}
	a, hits := randomPattern(t, 400, rf)
	b, _ := randomPattern(t, 400, rf)
	if a != b {
		t.Errorf("the same seed gave other faults:\n%s\n%s", a, b)
	}
	failed := strings.Count(a, "F")
	if failed != hits[mcptest.Fail] || len(hits) != 1 {
		t.Errorf("%d refusals, hits %v", failed, hits)
	}
	if failed < 80 || failed > 160 { // 120 expected; this is over 4 standard deviations wide
		t.Errorf("%d of 400 requests hit at rate 0.3", failed)
	}
	rf.Seed = 43
	if c, _ := randomPattern(t, 400, rf); c == a {
		t.Error("another seed gave the same faults")
	}
}

func TestRandomFaultsSelectAndStop(t *testing.T) {
	var runs int
	var mu sync.Mutex
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echo(&runs, &mu)))
	r := dialRaw(t, srv)
	srv.InjectRandom(mcptest.RandomFaults{Rate: 1, Kinds: []mcptest.FaultKind{mcptest.Fail}, Tool: "other"})
	r.send(call("1", `{}`))
	if got := r.recv(); !strings.Contains(got, `"result"`) {
		t.Fatalf("a call of another tool was hit: %s", got)
	}
	r.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if got := r.recv(); !strings.Contains(got, `"result"`) {
		t.Fatalf("a ping was hit by faults for a tool: %s", got)
	}
	srv.InjectRandom(mcptest.RandomFaults{Rate: 1, Kinds: []mcptest.FaultKind{mcptest.Fail}})
	r.send(call("3", `{}`))
	if got := r.recv(); !strings.HasPrefix(got, "fail:not delivered:") {
		t.Fatalf("rate 1 did not hit: %s", got)
	}
	srv.ClearFaults()
	r.send(call("4", `{}`))
	if got := r.recv(); !strings.Contains(got, `"result"`) {
		t.Fatalf("hit after ClearFaults: %s", got)
	}
	if hits := srv.RandomFaultHits(); len(hits) != 0 {
		t.Errorf("hits %v after ClearFaults", hits)
	}
	srv.InjectRandom(mcptest.RandomFaults{Rate: 1, Kinds: []mcptest.FaultKind{mcptest.Fail}})
	srv.InjectRandom(mcptest.RandomFaults{}) // a zero rate stops them
	r.send(call("5", `{}`))
	if got := r.recv(); !strings.Contains(got, `"result"`) {
		t.Fatalf("hit after a zero rate: %s", got)
	}
}

func TestRandomFaultsRefuseNonsense(t *testing.T) {
	for name, rf := range map[string]mcptest.RandomFaults{
		"rate above 1":  {Rate: 1.5, Kinds: []mcptest.FaultKind{mcptest.Fail}},
		"negative":      {Rate: -0.1, Kinds: []mcptest.FaultKind{mcptest.Fail}},
		"no kinds":      {Rate: 0.1},
		"unknown kind":  {Rate: 0.1, Kinds: []mcptest.FaultKind{0}},
		"past the last": {Rate: 0.1, Kinds: []mcptest.FaultKind{mcptest.RefuseIDReused + 1}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			mcptest.WithRandomFaults(rf)
		}()
	}
	if got := mcptest.CloseStream.String(); got != "CloseStream" {
		t.Errorf("String %q", got)
	}
}

// TestRandomFaultKindsOverHTTP checks that each kind takes its HTTP form: the first attempt is
// hit, the random faults are then stopped, and the client's view of the call shows the fault.
func TestRandomFaultKindsOverHTTP(t *testing.T) {
	for _, kind := range []mcptest.FaultKind{
		mcptest.DropBeforeExecution, mcptest.DropAfterExecution, mcptest.Fail,
		mcptest.Delay, mcptest.ExpireSession, mcptest.BreakStream, mcptest.CloseStream,
	} {
		t.Run(kind.String(), func(t *testing.T) {
			var runs int
			var mu sync.Mutex
			srv := mcptest.NewTestHTTPServer(t, mcptest.WithSSEResponses(time.Millisecond),
				mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echo(&runs, &mu)))
			var delays []time.Duration
			var causes []string
			var hits map[mcptest.FaultKind]int
			c := mcptest.NewClient(t, srv, mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{
				NewBackOff:     func() backoff.BackOff { return &backoff.ZeroBackOff{} },
				MaxServerDelay: 5 * time.Millisecond,
				OnRetry: func(_ int, cause error, d time.Duration) {
					hits = srv.RandomFaultHits() // before they are stopped, which forgets them
					srv.InjectRandom(mcptest.RandomFaults{})
					delays, causes = append(delays, d), append(causes, cause.Error())
				},
			}))
			session := c.SessionID()
			srv.InjectRandom(mcptest.RandomFaults{Rate: 1, Seed: 1, Kinds: []mcptest.FaultKind{kind}, Tool: "echo",
				Delay: 30 * time.Millisecond, RetryAfter: time.Second})
			req, err := c.NewRequest("tools/call", mcpclient.CallToolParams{Name: "echo", Arguments: map[string]int{"k": int(kind)}})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			resp, err := c.Do(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			wantAttempts, wantRuns := 2, 1
			switch kind {
			case mcptest.Delay, mcptest.BreakStream, mcptest.CloseStream:
				// None costs an attempt: a slow answer, a stream resumed by GET.
				wantAttempts = 1
				hits = srv.RandomFaultHits()
			}
			if len(hits) != 1 || hits[kind] != 1 {
				t.Errorf("hits %v", hits)
			}
			if resp.Attempts != wantAttempts || runs != wantRuns || len(srv.Received(req.ID())) != wantAttempts {
				t.Errorf("attempts %d, runs %d, frames %d; causes %q", resp.Attempts, runs, len(srv.Received(req.ID())), causes)
			}
			switch kind {
			case mcptest.Fail:
				if len(delays) != 1 || delays[0] != 5*time.Millisecond || !strings.Contains(causes[0], "503") {
					t.Errorf("waits %v, causes %q: want a 503 whose Retry-After is capped at 5ms", delays, causes)
				}
			case mcptest.ExpireSession:
				if c.SessionID() == session || !strings.Contains(causes[0], "404") {
					t.Errorf("session %q (was %q), causes %q", c.SessionID(), session, causes)
				}
			case mcptest.Delay:
				if took < 30*time.Millisecond {
					t.Errorf("answered after %v, before the delay", took)
				}
			}
		})
	}
}
