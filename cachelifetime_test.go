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
// the lifetime, CachedTools lists again once it is past, and a tool's idempotentHint counts
// only while its listing is fresh, for past it the tool may have changed and a re-issue could
// run an unsafe tool twice.
func TestToolListingLifetime(t *testing.T) {
	const ttl = time.Minute
	lookup := mcpclient.Tool{Name: "lookup", Annotations: &mcpclient.ToolAnnotations{IdempotentHint: boolPtr(true)}}
	for _, c := range []struct {
		name  string
		after time.Duration // between the listing and the call
		stale bool
	}{{"fresh", ttl / 2, false}, {"stale", ttl + time.Second, true}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var k counter
				srv := mcptest.NewTestServer(t,
					mcptest.WithMode(mcptest.ModeNone),
					mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728),
					mcptest.WithCacheHints(ttl, "private"),
					mcptest.WithTool(lookup, k.tool),
					mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: lookup.Name}))
				cl := connect(t, srv.Transport())
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
				frames := srv.FramesReceived() // nothing but a listing goes out meanwhile
				time.Sleep(c.after)
				if _, err := cl.CachedTools(ctx); err != nil {
					t.Fatal(err)
				}
				relisted := srv.FramesReceived() - frames
				if relisted != 0 != c.stale {
					t.Errorf("CachedTools listed %d times after %v, want a listing only when stale", relisted, c.after)
				}
				if c.stale {
					time.Sleep(c.after) // the listing CachedTools just made goes stale too
				}

				_, err = cl.CallTool(ctx, lookup.Name, nil)
				switch {
				case c.stale && !errors.Is(err, mcpclient.ErrOutcomeUnknown):
					t.Errorf("with a stale idempotentHint: %v, want ErrOutcomeUnknown (no re-issue)", err)
				case !c.stale && err != nil:
					t.Errorf("with a fresh idempotentHint: %v, want the re-issue's answer", err)
				}
				want := 2 // the lost call and its re-issue
				if c.stale {
					want = 1
				}
				if k.runs != want {
					t.Errorf("the tool ran %d times, want %d", k.runs, want)
				}
			})
		})
	}
}
