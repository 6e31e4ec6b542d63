package mcpclient_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/receipts"
)

// retentionCase is a tools/call whose first answer is lost after the server held it for
// answerLost, from a server that declares it keeps receipts for 100 ms.
type retentionCase struct {
	name       string
	answerLost time.Duration
	idempotent bool
	// lapsed: the retention ran out before the resend could go, so the receipt may be gone.
	lapsed bool
}

const declaredRetention = 100 * time.Millisecond

var retentionCases = []retentionCase{
	{name: "unsafe, lapsed", answerLost: 3 * declaredRetention, lapsed: true},
	{name: "unsafe, within", answerLost: declaredRetention / 2},
	{name: "idempotent, lapsed", answerLost: 3 * declaredRetention, idempotent: true, lapsed: true},
	{name: "idempotent, within", answerLost: declaredRetention / 2, idempotent: true},
}

// TestOwnResendHonoursDeclaredRetention: after a lost answer, the client resends the same id
// only while less than the retention the server declares has passed since the request was first
// sent; past it the receipt may have been pruned and the resend would run the request again, so
// a request not safe to repeat ends with ErrOutcomeUnknown after its one delivery, and one safe to
// repeat is re-issued under a new id.
func TestOwnResendHonoursDeclaredRetention(t *testing.T) {
	revisions := []struct {
		name    string
		version string
	}{{"session", mcpclient.ProtocolVersion20251125}, {"stateless", mcpclient.ProtocolVersion20260728}}
	for _, rev := range revisions {
		for _, tc := range retentionCases {
			t.Run(rev.name+"/"+tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { tc.run(t, rev.version) })
			})
		}
	}
}

func (tc retentionCase) run(t *testing.T, version string) {
	var k counter
	// The server declares receipts and keeps none, so that every delivery runs: what the test
	// counts is what the client sends.
	srv := mcptest.NewTestServer(t,
		mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithProtocolVersions(version),
		mcptest.WithExtension(receipts.ExtensionID, map[string]any{
			"scope": "process", "epoch": "e1", "retentionMs": declaredRetention.Milliseconds()}),
		mcptest.WithTool(unsafeTool, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.Delay, Tool: unsafeTool.Name, Delay: tc.answerLost}),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: unsafeTool.Name}))
	c := connect(t, srv.Transport())
	if d, ok := c.ServerCapabilities().RequestReceipts(); !ok || d.RetentionMs != declaredRetention.Milliseconds() {
		t.Fatalf("declaration %+v %v, want a retention of %v", d, ok, declaredRetention)
	}
	var opts []mcpclient.CallOption
	if tc.idempotent {
		opts = append(opts, mcpclient.WithIdempotent())
	}
	req := callReq(t, c, unsafeTool.Name, map[string]string{"room": "12"}, opts...)
	resp, err := c.Do(context.Background(), req)
	sameID := srv.Received(req.ID())

	switch {
	case !tc.lapsed:
		if err != nil {
			t.Fatalf("Do: %v", err)
		}
		if resp.Request.ID() != req.ID() {
			t.Errorf("answered under %s, want the resend under the same id %s", resp.Request.ID().JSON(), req.ID().JSON())
		}
		assertFramesIdentical(t, sameID, 2)
	case !tc.idempotent:
		if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
			t.Fatalf("Do: %v, %v; want ErrOutcomeUnknown", resp, err)
		}
		if errors.Is(err, mcpclient.ErrSessionLost) {
			t.Errorf("error %v blames a lost session; the retention ran out", err)
		}
		if len(sameID) != 1 {
			t.Errorf("%d deliveries under %s, want 1: the resend went out after the retention", len(sameID), req.ID().JSON())
		}
		if n := srv.ExecutionsOf(unsafeTool.Name, req.ID()); n != 1 {
			t.Errorf("executed %d times, want 1", n)
		}
		if e, _ := c.Ledger().Lookup(req.ID()); e.State != mcpclient.StateUncertain || !e.SupersededBy.IsZero() {
			t.Errorf("ledger %v superseded by %s, want uncertain and not superseded", e.State, e.SupersededBy.JSON())
		}
	default:
		if err != nil {
			t.Fatalf("Do: %v", err)
		}
		next := resp.Request.ID()
		if next == req.ID() {
			t.Fatalf("answered under the original id %s, want a re-issue under a new one", next.JSON())
		}
		if len(sameID) != 1 {
			t.Errorf("%d deliveries under %s, want 1 before the re-issue", len(sameID), req.ID().JSON())
		}
		if n := len(srv.Received(next)); n != 1 {
			t.Errorf("%d deliveries of the re-issue, want 1", n)
		}
		old, _ := c.Ledger().Lookup(req.ID())
		nu, _ := c.Ledger().Lookup(next)
		if old.SupersededBy != next || nu.Supersedes != req.ID() || nu.State != mcpclient.StateAnswered {
			t.Errorf("ledger: original superseded by %s, re-issue supersedes %s in state %v; want them linked, the re-issue answered",
				old.SupersededBy.JSON(), nu.Supersedes.JSON(), nu.State)
		}
	}
}
