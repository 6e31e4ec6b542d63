package mcpclient_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// A listing of the stateless revision says how long it stays fresh (ttlMs): the client shows
// the lifetime, CachedTools lists again once it is past, and a tool's idempotentHint decides a
// re-issue only while its listing is fresh. Past it the client asks a fresh listing before it
// re-issues, for the tool may have changed: one that no longer says idempotent is not re-issued.
func TestToolListingLifetime(t *testing.T) {
	const ttl = time.Minute
	lookup := mcpclient.Tool{Name: "lookup", Annotations: &mcpclient.ToolAnnotations{IdempotentHint: boolPtr(true)}}
	for _, c := range []struct {
		name      string
		after     time.Duration // between the listing and the call
		nowUnsafe bool          // the server lists the tool without its hint meanwhile
		relists   int           // listings the call makes
		reissued  bool
	}{
		{"fresh", ttl / 2, false, 0, true},
		{"stale, still idempotent", ttl + time.Second, false, 1, true},
		{"stale, no longer idempotent", ttl + time.Second, true, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var k counter
				var sent sentCounter
				srv := mcptest.NewTestServer(t,
					mcptest.WithMode(mcptest.ModeNone),
					mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728),
					mcptest.WithCacheHints(ttl, "private"),
					mcptest.WithTool(lookup, k.tool))
				cl := connect(t, sent.transport(srv))
				ctx := context.Background()

				page, err := cl.ListToolsPage(ctx, "")
				if err != nil {
					t.Fatal(err)
				}
				if page.TTLMs == nil || *page.TTLMs != ttl.Milliseconds() || page.CacheScope != "private" {
					t.Fatalf("listing lifetime %v %q, want %d ms private", page.TTLMs, page.CacheScope, ttl.Milliseconds())
				}
				if _, err := cl.CachedTools(ctx); err != nil {
					t.Fatal(err)
				}
				time.Sleep(c.after)
				listings := sent.count("tools/list")
				if c.nowUnsafe {
					srv.AddTool(mcpclient.Tool{Name: lookup.Name}, k.tool)
				}
				srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: lookup.Name})
				resp, err := cl.Do(ctx, callReq(t, cl, lookup.Name, nil))
				switch {
				case c.reissued && err != nil:
					t.Fatalf("Do: %v, want the re-issue's answer", err)
				case !c.reissued && !errors.Is(err, mcpclient.ErrOutcomeUnknown):
					t.Fatalf("Do: %v, %v; want ErrOutcomeUnknown (no re-issue)", resp, err)
				}
				want := 1
				if c.reissued {
					want = 2 // the lost call and its re-issue
				}
				if k.runs != want {
					t.Errorf("the tool ran %d times, want %d", k.runs, want)
				}
				if got := sent.count("tools/list") - listings; got != c.relists {
					t.Errorf("the call listed the tools %d times, want %d", got, c.relists)
				}
			})
		})
	}
}

// CachedTools answers from a listing while it is fresh and lists again once it is stale.
func TestCachedToolsExpireWithTheListing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Minute
		srv := mcptest.NewTestServer(t,
			mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728),
			mcptest.WithCacheHints(ttl, "public"),
			mcptest.WithTool(mcpclient.Tool{Name: "lookup"}, nil))
		var sent sentCounter
		cl := connect(t, sent.transport(srv))
		ctx := context.Background()
		listings := func() int {
			before := sent.count("tools/list")
			if _, err := cl.CachedTools(ctx); err != nil {
				t.Fatal(err)
			}
			return sent.count("tools/list") - before
		}
		if n := listings(); n != 1 {
			t.Fatalf("first CachedTools listed %d times, want 1", n)
		}
		time.Sleep(ttl / 2)
		if n := listings(); n != 0 {
			t.Errorf("CachedTools within the lifetime listed %d times, want 0", n)
		}
		time.Sleep(ttl)
		if n := listings(); n != 1 {
			t.Errorf("CachedTools past the lifetime listed %d times, want 1", n)
		}
	})
}
