package mcptest_test

import (
	"context"
	"sync"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/receipts"
	"github.com/northstar-mcp/mcpclient/transport"
)

// declaredEpoch returns the epoch a new session finds in the server's receipt declaration.
func declaredEpoch(t *testing.T, srv mcptest.Dialer) string {
	t.Helper()
	c := mcptest.NewClient(t, srv)
	caps := c.ServerCapabilities()
	r, ok := caps.RequestReceipts()
	if !ok || r.Scope != mcpclient.ReceiptScopeProcess {
		t.Fatalf("receipts declared %+v %v, want scope process", r, ok)
	}
	return r.Epoch
}

func TestReceiptEpochIsNewAtEveryRestart(t *testing.T) {
	srv := mcptest.NewTestServer(t)
	first := srv.ReceiptEpoch()
	if first == "" {
		t.Fatal("a server keeping receipts for its process has no epoch")
	}
	if got := declaredEpoch(t, srv); got != first {
		t.Errorf("declared epoch %q, ReceiptEpoch %q", got, first)
	}
	if got := declaredEpoch(t, srv); got != first {
		t.Errorf("a second session found epoch %q, the first %q", got, first)
	}
	srv.Restart()
	second := srv.ReceiptEpoch()
	if second == "" || second == first {
		t.Fatalf("epoch %q after a restart, %q before", second, first)
	}
	if got := declaredEpoch(t, srv); got != second {
		t.Errorf("declared epoch %q after the restart, want %q", got, second)
	}
	if other := mcptest.NewTestServer(t).ReceiptEpoch(); other == first || other == second {
		t.Errorf("two servers share epoch %q", other)
	}
}

// mcptest declares its receipts as a server behind the receipts middleware does, with the
// middleware's defaults, since the same code keeps them.
func TestReceiptDeclarationIsTheMiddlewares(t *testing.T) {
	srv := mcptest.NewTestServer(t, mcptest.WithMaxReceipts(9))
	caps := mcptest.NewClient(t, srv).ServerCapabilities()
	r, _ := caps.RequestReceipts()
	want := mcpclient.RequestReceipts{
		Scope: mcpclient.ReceiptScopeProcess, MaxReceipts: 9, Epoch: srv.ReceiptEpoch(),
		RetentionMs: receipts.DefaultRetention.Milliseconds(), Disconnect: string(receipts.DisconnectContinue),
	}
	if r != want {
		t.Errorf("declared %+v, want %+v", r, want)
	}
}

func TestWithoutReceiptEpochDeclaresReceiptsWithoutOne(t *testing.T) {
	srv := mcptest.NewTestServer(t, mcptest.WithoutReceiptEpoch())
	if got := srv.ReceiptEpoch(); got != "" {
		t.Errorf("ReceiptEpoch %q, want none", got)
	}
	if got := declaredEpoch(t, srv); got != "" {
		t.Errorf("declared epoch %q, want none", got)
	}
	srv.Restart()
	if got := srv.ReceiptEpoch(); got != "" {
		t.Errorf("ReceiptEpoch %q after a restart, want none", got)
	}
	for _, m := range []mcptest.Mode{mcptest.ModeInFlightRefusal, mcptest.ModeNone} {
		if got := mcptest.NewTestServer(t, mcptest.WithMode(m)).ReceiptEpoch(); got != "" {
			t.Errorf("mode %d keeps no receipts but has epoch %q", m, got)
		}
	}
}

// Receipts are the process's: a session's expiry does not take them, and the epoch stays.
func TestReceiptsOutliveAnExpiredSession(t *testing.T) {
	var runs int
	var mu sync.Mutex
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echo(&runs, &mu)))
	epoch := srv.ReceiptEpoch()
	r := dialRaw(t, srv)
	r.send(call(`1`, `{"v":1}`))
	first := r.recv()
	srv.Inject(mcptest.Fault{Kind: mcptest.ExpireSession})
	r.send(call(`1`, `{"v":1}`))
	if got := r.recv(); got != "fail:not delivered:1:"+transport.ErrSessionNotFound.Error() {
		t.Fatalf("on the expired session: %s", got)
	}
	if srv.Sessions() != 0 {
		t.Fatalf("%d sessions after the expiry", srv.Sessions())
	}
	r2 := dialRaw(t, srv)
	r2.send(call(`1`, `{"v":1}`))
	if got := r2.recv(); !sameAnswer(got, first) {
		t.Errorf("the receipt answered %s on a new session, first answer %s", got, first)
	}
	if runs != 1 || srv.ReceiptEpoch() != epoch {
		t.Errorf("runs %d, epoch %q (was %q): want 1 and unchanged", runs, srv.ReceiptEpoch(), epoch)
	}
}

// A session deleted over HTTP (the client's Close) leaves the receipts to the next session;
// a restart does not.
func TestReceiptsOutliveADeletedSessionButNotARestart(t *testing.T) {
	t.Parallel()
	var runs int
	var mu sync.Mutex
	h := mcptest.NewTestHTTPServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echo(&runs, &mu)))
	id := mcpclient.StringID("reserve-1")
	callOnce := func() string {
		c := mcptest.NewClient(t, h)
		defer c.Close() // DELETE: the session ends
		req, err := c.NewRequest("tools/call", mcpclient.CallToolParams{Name: "echo", Arguments: map[string]int{"v": 1}}, mcpclient.WithRequestID(id))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return string(resp.Result)
	}
	epoch := h.ReceiptEpoch()
	first := callOnce()
	if h.Sessions() != 0 {
		t.Fatalf("%d sessions after the client closed", h.Sessions())
	}
	if got := callOnce(); !sameAnswer(got, first) || runs != 1 {
		t.Errorf("after the session's deletion: runs %d, answer %s (first %s)", runs, got, first)
	}
	if h.ReceiptEpoch() != epoch {
		t.Errorf("epoch %q after a session's deletion, was %q", h.ReceiptEpoch(), epoch)
	}
	h.Restart()
	if got := callOnce(); runs != 2 || got == "" {
		t.Errorf("after a restart: runs %d, answer %q; want a second run", runs, got)
	}
}
