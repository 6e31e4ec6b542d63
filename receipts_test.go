package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/receipts"
	"github.com/northstar-mcp/mcpclient/transport"
)

func TestRequestReceiptsDeclaration(t *testing.T) {
	cases := []struct {
		decl string
		want mcpclient.RequestReceipts
		ok   bool
	}{
		{`{"scope":"process","maxReceipts":5,"epoch":"e1"}`, mcpclient.RequestReceipts{Scope: mcpclient.ReceiptScopeProcess, MaxReceipts: 5, Epoch: "e1"}, true},
		{`{"scope":"process"}`, mcpclient.RequestReceipts{Scope: mcpclient.ReceiptScopeProcess}, true},
		{`{"scope":"session","epoch":"e1"}`, mcpclient.RequestReceipts{Scope: mcpclient.ReceiptScopeSession, Epoch: "e1"}, true},
		// An epoch that is no string names no process: the scope is still declared.
		{`{"scope":"process","epoch":42}`, mcpclient.RequestReceipts{Scope: mcpclient.ReceiptScopeProcess}, true},
		{`{"scope":"process","epoch":{"id":"e1"}}`, mcpclient.RequestReceipts{Scope: mcpclient.ReceiptScopeProcess}, true},
		{`{"scope":"process","epoch":null}`, mcpclient.RequestReceipts{Scope: mcpclient.ReceiptScopeProcess}, true},
		{`{"scope":"forever","epoch":"e1"}`, mcpclient.RequestReceipts{}, false},
		{`{"scope":"process","maxReceipts":"many"}`, mcpclient.RequestReceipts{}, false},
		{`"process"`, mcpclient.RequestReceipts{}, false},
		{`{"scope":"store","epoch":"db1","retentionMs":3600000,"disconnect":"cancel"}`,
			mcpclient.RequestReceipts{Scope: mcpclient.ReceiptScopeStore, Epoch: "db1", RetentionMs: 3600000, Disconnect: "cancel"}, true},
	}
	for _, tc := range cases {
		caps := mcpclient.ServerCapabilities{Extensions: map[string]json.RawMessage{receipts.ExtensionID: json.RawMessage(tc.decl)}}
		got, ok := caps.RequestReceipts()
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %+v %v, want %+v %v", tc.decl, got, ok, tc.want, tc.ok)
		}
	}
	var none mcpclient.ServerCapabilities
	if got, ok := none.RequestReceipts(); ok || got != (mcpclient.RequestReceipts{}) {
		t.Errorf("no declaration: %+v %v", got, ok)
	}
	// The experimental key the extension replaced is not read: a server must declare the
	// extension.
	old := mcpclient.ServerCapabilities{Experimental: map[string]json.RawMessage{"requestReceipts": json.RawMessage(`{"scope":"process","epoch":"e1"}`)}}
	if got, ok := old.RequestReceipts(); ok {
		t.Errorf("the experimental key read as a declaration: %+v", got)
	}
}

// The declaration reads straight off the capabilities a Client returns, as Skills does: callers
// write c.ServerCapabilities().RequestReceipts().
func TestRequestReceiptsOfTheClientsCapabilities(t *testing.T) {
	t.Parallel()
	c := mcptest.NewClient(t, mcptest.NewServer())
	if decl, ok := c.ServerCapabilities().RequestReceipts(); !ok || decl.Scope == "" {
		t.Errorf("RequestReceipts() = %+v, %v; mcptest declares receipts", decl, ok)
	}
}

// TestReplayedAnswerIsMarked: an answer the server read from its receipt of an earlier send is
// marked as a replay on the Response and on the attempt that got it; a first answer is not.
func TestReplayedAnswerIsMarked(t *testing.T) {
	t.Parallel()
	for _, b := range []struct {
		name  string
		start func(t *testing.T, opts ...mcptest.Option) mcptest.Dialer
	}{
		{"memory", func(t *testing.T, opts ...mcptest.Option) mcptest.Dialer { return mcptest.NewTestServer(t, opts...) }},
		{"http", func(t *testing.T, opts ...mcptest.Option) mcptest.Dialer {
			return mcptest.NewTestHTTPServer(t, opts...)
		}},
		{"stateless", func(t *testing.T, opts ...mcptest.Option) mcptest.Dialer {
			return mcptest.NewTestHTTPServer(t, append([]mcptest.Option{statelessRevisions}, opts...)...)
		}},
	} {
		t.Run(b.name, func(t *testing.T) {
			var k counter
			d := b.start(t, mcptest.WithTool(unsafeTool, k.tool))
			var mu sync.Mutex
			var replays []bool
			c := mcptest.NewClient(t, d, mcpclient.WithAttemptHook(func(_ context.Context, ev mcpclient.AttemptEvent) {
				if !ev.Handshake {
					mu.Lock()
					replays = append(replays, ev.Replayed)
					mu.Unlock()
				}
			}))
			var first mcpclient.Response
			if _, err := c.CallTool(testCtx(t), unsafeTool.Name, nil, mcpclient.WithResponse(&first)); err != nil {
				t.Fatal(err)
			}
			if first.Replayed {
				t.Error("a first answer is marked as a replay")
			}
			d.(interface{ Inject(mcptest.Fault) }).Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: unsafeTool.Name})
			var resp mcpclient.Response
			res, err := c.CallTool(testCtx(t), unsafeTool.Name, nil, mcpclient.WithResponse(&resp))
			if err != nil || res.Text() == "" {
				t.Fatalf("call after a lost answer: %v %v", res, err)
			}
			if !resp.Replayed || resp.Attempts != 2 || k.runs != 2 {
				t.Errorf("replayed %v, attempts %d, runs %d: want the resend answered from the receipt", resp.Replayed, resp.Attempts, k.runs)
			}
			mu.Lock()
			defer mu.Unlock()
			// One attempt for the first call, two for the second: its lost answer, then the replay.
			if len(replays) != 3 || replays[0] || replays[1] || !replays[2] {
				t.Errorf("attempt events marked %v, want only the last as a replay", replays)
			}
		})
	}
}

// TestReceiptInDoubtIsAnUnknownOutcome: a server that holds the request's receipt but cannot say
// how it ended (its holder died mid-run) answers MCP_RECEIPT_IN_DOUBT: the outcome is unknown for
// good, and nothing is sent again.
func TestReceiptInDoubtIsAnUnknownOutcome(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	s := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		switch r.Method {
		case "server/discover":
			r.Answer(`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"extensions":{"` +
				receipts.ExtensionID + `":{"scope":"store","epoch":"db1"}}}}`)
			return true
		case "tools/call":
			calls.Add(1)
			r.Reply(http.StatusOK, `"error":{"code":-31000,"message":"the receipt is in doubt","data":{"code":"MCP_RECEIPT_IN_DOUBT"}}`)
			return true
		}
		return false
	}, testpeer.Stateless())
	c := connect(t, &transport.HTTP{URL: s.URL})
	var resp mcpclient.Response
	_, err := c.CallTool(testCtx(t), unsafeTool.Name, nil, mcpclient.WithResponse(&resp))
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || mcpclient.CodeOf(err) != mcpclient.CodeOutcomeUnknown {
		t.Fatalf("call: %v, want ErrOutcomeUnknown", err)
	}
	var rpc *mcpclient.RPCError
	if !errors.As(err, &rpc) || !rpc.ReceiptInDoubt() {
		t.Errorf("error %v does not carry the server's answer", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("sent %d times, want once", n)
	}
	if e, _ := c.Ledger().Lookup(asError(t, err).Request.ID()); e.State != mcpclient.StateUncertain {
		t.Errorf("ledger state %v, want uncertain", e.State)
	}
}

// TestRequestsCarryTheReceiptsOptInHeader: over HTTP every request opts into receipts in a
// header too, for a server or middleware that cannot see the session's initialize; a resend
// carries it as it is part of the frozen request.
func TestRequestsCarryTheReceiptsOptInHeader(t *testing.T) {
	t.Parallel()
	for _, stateless := range []bool{false, true} {
		var opts []testpeer.Option
		if stateless {
			opts = append(opts, testpeer.Stateless())
		}
		var mu sync.Mutex
		seen := map[string]string{}
		s := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
			mu.Lock()
			seen[r.Method] = r.HTTP.Header.Get("Mcp-Request-Receipts")
			mu.Unlock()
			if r.Method == "tools/list" {
				r.Answer(`{"tools":[]}`)
				return true
			}
			return false
		}, opts...)
		c := connect(t, &transport.HTTP{URL: s.URL})
		if _, err := c.ListToolsPage(testCtx(t), ""); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if got := seen["tools/list"]; got != "1" {
			t.Errorf("stateless=%v: tools/list carried Mcp-Request-Receipts %q, want 1", stateless, got)
		}
		mu.Unlock()
	}
}
