package mcpclient_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// A lostSessionCase is a tools/call of an unsafe tool whose first attempt loses its reply after
// the tool ran (uncertain), whose second finds its session expired (not delivered), and whose
// third would go out on a new session.
type lostSessionCase struct {
	name   string
	opts   []mcptest.Option
	client []mcpclient.Option
	// restart restarts the server after the first attempt.
	restart bool
	// survives: the receipt of the first attempt outlived the session, and the new session's
	// epoch says so.
	survives bool
}

var lostSessionCases = []lostSessionCase{
	{name: "same epoch", survives: true},
	{name: "server restarted", restart: true},
	{name: "no epoch", opts: []mcptest.Option{mcptest.WithoutReceiptEpoch()}},
	// Receipts asserted by the caller name no process: the server may have restarted. (This
	// one keeps none, and would run the request again.)
	{name: "asserted", opts: []mcptest.Option{mcptest.WithMode(mcptest.ModeNone)},
		client: []mcpclient.Option{mcpclient.WithReceipts(mcpclient.ReceiptScopeProcess)}},
}

// A dialerFor starts a server with opts, closed by the test's cleanup.
type dialerFor func(t *testing.T, opts ...mcptest.Option) (mcptest.Dialer, *mcptest.Server)

func inMemory(t *testing.T, opts ...mcptest.Option) (mcptest.Dialer, *mcptest.Server) {
	srv := mcptest.NewTestServer(t, opts...)
	return srv, srv
}

func overHTTP(t *testing.T, opts ...mcptest.Option) (mcptest.Dialer, *mcptest.Server) {
	h := mcptest.NewTestHTTPServer(t, opts...)
	return h, h.Server
}

// run runs tc on a server dial starts. sessionsOutliveRestarts: the transport has sessions a
// server may keep across its restarts (Streamable HTTP), so the client confirms the epoch before
// a resend on the same session, and finds a restart before the session's expiry would tell it.
func (tc lostSessionCase) run(t *testing.T, dial dialerFor, newBackOff func() backoff.BackOff, sessionsOutliveRestarts bool) {
	var k counter
	d, srv := dial(t, append([]mcptest.Option{
		mcptest.WithTool(unsafeTool, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "reserve"}),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.ExpireSession, Tool: "reserve", After: 1}),
	}, tc.opts...)...)
	epoch := srv.ReceiptEpoch()
	var restart sync.Once
	retries := 0
	c := connect(t, d.Transport(), append([]mcpclient.Option{mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{
		NewBackOff: newBackOff,
		OnRetry: func(int, error, time.Duration) {
			retries++
			if tc.restart {
				restart.Do(srv.Restart)
			}
		},
	})}, tc.client...)...)
	req := callReq(t, c, "reserve", map[string]string{"room": "12"})
	resp, err := c.Do(context.Background(), req)
	if tc.restart == (srv.ReceiptEpoch() == epoch) {
		t.Fatalf("epoch %q, %q before: a restart, and only a restart, changes it", srv.ReceiptEpoch(), epoch)
	}
	if k.runs != 1 || srv.ExecutionsOf("reserve", req.ID()) != 1 {
		t.Errorf("runs %d, want 1", k.runs)
	}
	attempts := 2
	if tc.restart && sessionsOutliveRestarts {
		attempts = 1 // the epoch read before the resend tells the restart
	}
	if retries != attempts {
		t.Errorf("%d waits before a resend, want %d", retries, attempts)
	}
	entry, _ := c.Ledger().Lookup(req.ID())
	if !tc.survives {
		if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, mcpclient.ErrSessionLost) {
			t.Fatalf("%v, want ErrOutcomeUnknown caused by ErrSessionLost", err)
		}
		if e := asError(t, err); e.Request != req || e.Attempts != attempts {
			t.Errorf("the error names %s after %d attempts, want %s after %d", e.Request.ID(), e.Attempts, req.ID(), attempts)
		}
		// Nothing was sent on the new session.
		assertFramesIdentical(t, srv.Received(req.ID()), attempts)
		if entry.State != mcpclient.StateUncertain {
			t.Errorf("ledger state %s, want uncertain", entry.State)
		}
		if err := c.Ping(context.Background()); err != nil {
			t.Errorf("ping on the new session: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("the receipt survived the session, yet: %v", err)
	}
	if resp.Request != req || resp.Attempts != 3 {
		t.Errorf("answered %s after %d attempts, want %s after 3", resp.Request.ID(), resp.Attempts, req.ID())
	}
	// The third attempt, on the new session, is the same bytes under the same id: the receipt's
	// answer is the first run's.
	assertFramesIdentical(t, srv.Received(req.ID()), 3)
	if got, want := text(t, resp), `run 1 with {"room":"12"}`; got != want {
		t.Errorf("answer %q, want the first run's %q", got, want)
	}
	if entry.State != mcpclient.StateAnswered {
		t.Errorf("ledger state %s, want answered", entry.State)
	}
}

func TestLostSessionAfterUncertainAttempt(t *testing.T) {
	for _, tc := range lostSessionCases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tc.run(t, inMemory, func() backoff.BackOff { return backoff.NewConstantBackOff(time.Second) }, false)
			})
		})
	}
}

func TestHTTPLostSessionAfterUncertainAttempt(t *testing.T) {
	t.Parallel()
	for _, tc := range lostSessionCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, overHTTP, func() backoff.BackOff { return &backoff.ZeroBackOff{} }, true)
		})
	}
}
