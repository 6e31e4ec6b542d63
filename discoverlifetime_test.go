package mcpclient_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// taskTool makes an mcptest server that has it declare the tasks extension (tasksExtensionID).
var taskTool = mcpclient.Tool{Name: "render", Execution: &mcpclient.ToolExecution{TaskSupport: "optional"}}

func declaresTasks(caps mcpclient.ServerCapabilities) bool {
	_, ok := caps.Extensions[tasksExtensionID]
	return ok
}

// A server/discover answered with a lifetime (ttlMs) holds until it is past; then the next
// request, or Session, asks server/discover again before it goes out, and the client takes the
// capabilities the server declares now. Within the lifetime nothing is asked again.
func TestDiscoverIsAskedAgainPastItsLifetime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 50 * time.Millisecond
		srv := mcptest.NewTestServer(t,
			mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728),
			mcptest.WithCacheHints(ttl, "public"),
			mcptest.WithTool(mcpclient.Tool{Name: "lookup"}, nil))
		var sent sentCounter
		cl := connect(t, sent.transport(srv))
		ctx := context.Background()

		init := cl.InitializeResult()
		if init.TTLMs == nil || *init.TTLMs != ttl.Milliseconds() || init.CacheScope != "public" {
			t.Fatalf("discover lifetime %v %q, want %d ms public", init.TTLMs, init.CacheScope, ttl.Milliseconds())
		}
		if declaresTasks(init.Capabilities) {
			t.Fatal("the server declares tasks before it has a tool for them")
		}
		srv.AddTool(taskTool, nil) // from now on server/discover declares the tasks extension

		time.Sleep(ttl / 2)
		before := sent.total()
		if _, err := cl.ListToolsPage(ctx, ""); err != nil {
			t.Fatal(err)
		}
		got, err := cl.Session(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if sent := sent.since(before); !slices.Equal(sent, []string{"tools/list"}) {
			t.Errorf("within the lifetime the client sent %v, want the listing alone", sent)
		}
		if declaresTasks(got.Capabilities) {
			t.Error("within the lifetime Session gives capabilities the client was never told")
		}

		time.Sleep(ttl)
		before = sent.total()
		if _, err := cl.ListToolsPage(ctx, ""); err != nil {
			t.Fatal(err)
		}
		if sent := sent.since(before); !slices.Equal(sent, []string{"server/discover", "tools/list"}) {
			t.Errorf("past the lifetime the client sent %v, want server/discover before the listing", sent)
		}
		if !declaresTasks(cl.ServerCapabilities()) {
			t.Error("past the lifetime the client still holds the old capabilities")
		}

		// Session asks too, once the answer it would give is past its lifetime.
		time.Sleep(ttl)
		before = sent.total()
		got, err = cl.Session(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if sent := sent.since(before); !slices.Equal(sent, []string{"server/discover"}) {
			t.Errorf("Session past the lifetime sent %v, want server/discover", sent)
		}
		if got.TTLMs == nil || *got.TTLMs != ttl.Milliseconds() || !declaresTasks(got.Capabilities) {
			t.Errorf("Session gave %+v", got)
		}
	})
}

// An answer to server/discover without a lifetime, or with ttlMs 0, is not asked again by
// requests or by Session, however long the client lives: 0 would otherwise cost a discover per
// request, and each request carries its revision and capabilities for the server to judge.
func TestDiscoverWithoutLifetimeIsNotAskedAgain(t *testing.T) {
	for _, c := range []struct {
		name     string
		discover string
	}{
		{"absent", `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}}}`},
		{"zero", `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"private"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				discovers := 0
				peer := testpeer.NewPipe(t, func(conn *testpeer.Conn, m testpeer.Msg) bool {
					switch m.Method {
					case "server/discover":
						mu.Lock()
						discovers++
						mu.Unlock()
						conn.Send(testpeer.Result(m.ID, c.discover))
						return true
					case "tools/call":
						conn.Send(testpeer.Result(m.ID, `{"resultType":"complete","content":[{"type":"text","text":"ok"}]}`))
						return true
					}
					return false
				})
				cl := connect(t, peer.Transport())
				ctx := context.Background()
				for range 3 {
					time.Sleep(time.Hour)
					if _, err := cl.CallTool(ctx, "lookup", nil); err != nil {
						t.Fatal(err)
					}
					if _, err := cl.Session(ctx); err != nil {
						t.Fatal(err)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				if discovers != 1 {
					t.Errorf("server/discover asked %d times, want once, when the session opened", discovers)
				}
			})
		})
	}
}

// Callers that find the answer to server/discover stale at the same time share one
// server/discover, and all go on with its answer.
func TestStaleDiscoverIsAskedOnceForConcurrentCallers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 50 * time.Millisecond
		srv := mcptest.NewTestServer(t,
			mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728),
			mcptest.WithCacheHints(ttl, "public"),
			mcptest.WithTool(mcpclient.Tool{Name: "lookup"}, nil))
		var sent sentCounter
		cl := connect(t, sent.transport(srv))
		ctx := context.Background()
		srv.AddTool(taskTool, nil)
		time.Sleep(ttl)

		// The server/discover is held until every caller has come, so that they overlap.
		release := make(chan struct{})
		sent.setDiscover(func(*transport.Message) (bool, error) {
			<-release
			return true, nil
		})
		const callers = 5
		errs := make(chan error, callers)
		for i := range callers {
			go func() {
				var err error
				if i%2 == 0 {
					_, err = cl.ListToolsPage(ctx, "")
				} else {
					var got mcpclient.InitializeResult
					if got, err = cl.Session(ctx); err == nil && !declaresTasks(got.Capabilities) {
						err = errors.New("Session gave the capabilities of the stale answer")
					}
				}
				errs <- err
			}()
		}
		synctest.Wait()
		if n := sent.count("server/discover"); n != 2 {
			t.Errorf("%d callers of a stale session sent %d server/discover in all, want one more than at the start", callers, n)
		}
		close(release)
		for range callers {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		if n := sent.count("server/discover"); n != 2 {
			t.Errorf("server/discover sent %d times in all, want 2", n)
		}
		if !declaresTasks(cl.ServerCapabilities()) {
			t.Error("the client holds the old capabilities")
		}
	})
}

var errServerDown = &transport.Error{Outcome: transport.NotDelivered, Err: errors.New("connection refused")}

// A server/discover that fails past the lifetime leaves the client with the stale answer, as the
// spec allows: Session returns it and the request goes out, to meet the server as it is now. The
// answer stays stale, so the next request asks again.
func TestStaleDiscoverThatFailsLeavesTheStaleAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 50 * time.Millisecond
		srv := mcptest.NewTestServer(t,
			mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728),
			mcptest.WithCacheHints(ttl, "public"),
			mcptest.WithTool(mcpclient.Tool{Name: "lookup"}, nil))
		var sent sentCounter
		cl := connect(t, sent.transport(srv))
		ctx := context.Background()
		srv.AddTool(taskTool, nil)
		time.Sleep(ttl)

		sent.setDiscover(func(*transport.Message) (bool, error) { return false, errServerDown })
		got, err := cl.Session(ctx)
		if err != nil {
			t.Fatalf("Session with server/discover failing: %v, want the stale answer", err)
		}
		if declaresTasks(got.Capabilities) {
			t.Error("Session gave capabilities the server never answered")
		}
		before := sent.total()
		if _, err := cl.CallTool(ctx, "lookup", nil); err != nil {
			t.Fatalf("a call with server/discover failing: %v", err)
		}
		if sent := sent.since(before); !slices.Equal(sent, []string{"server/discover", "tools/call"}) {
			t.Errorf("the call sent %v, want a server/discover tried again before it", sent)
		}

		sent.setDiscover(nil)
		if _, err := cl.CallTool(ctx, "lookup", nil); err != nil {
			t.Fatal(err)
		}
		if !declaresTasks(cl.ServerCapabilities()) {
			t.Error("once server/discover answers again the client still holds the stale answer")
		}
	})
}

// A same-id resend that relies on receipts reads the receipt binding from a server/discover
// asked for that attempt. When the session's answer went stale meanwhile, that one
// server/discover serves both; when it fails, the stale answer does not stand in for it: the
// resend is not sent.
func TestResendAfterTheDiscoverLifetime(t *testing.T) {
	for _, down := range []bool{false, true} {
		t.Run(fmt.Sprintf("discover fails=%v", down), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const ttl = 50 * time.Millisecond
				srv := mcptest.NewTestServer(t,
					mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728),
					mcptest.WithCacheHints(ttl, "public"),
					mcptest.WithTool(unsafeTool, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
						time.Sleep(ttl) // the answer to server/discover goes stale while the tool runs
						return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("reserved")}}, nil
					}))
				var sent sentCounter
				cl := connect(t, sent.transport(srv), mcpclient.WithRetryPolicy(mcptest.FastRetryPolicy()))
				if cl.Receipts() != mcpclient.ReceiptScopeProcess {
					t.Fatalf("receipts %q, want process", cl.Receipts())
				}
				ctx := context.Background()
				if down {
					sent.setDiscover(func(*transport.Message) (bool, error) { return false, errServerDown })
				}
				before := sent.total()
				srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: unsafeTool.Name})
				_, err := cl.CallTool(ctx, unsafeTool.Name, nil)
				if got := srv.Executions(unsafeTool.Name); got != 1 {
					t.Errorf("the tool ran %d times, want once", got)
				}
				out := sent.since(before)
				if down {
					if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
						t.Fatalf("call: %v, want ErrOutcomeUnknown", err)
					}
					if n := sent.count("tools/call"); n != 1 {
						t.Errorf("tools/call sent %d times (%v), want no resend without a fresh server/discover", n, out)
					}
					return
				}
				if err != nil {
					t.Fatalf("call: %v, want the receipt's answer", err)
				}
				// One server/discover before the resend, for both its reasons: the answer is
				// stale, and the resend must confirm the epoch.
				want := []string{"tools/call", "server/discover", "tools/call"}
				if !slices.Equal(out, want) {
					t.Errorf("the call sent %v, want %v", out, want)
				}
			})
		})
	}
}

// An answer past its lifetime that declares another receipt binding (the server restarted,
// with a new epoch) retires the session: the next request goes out on a new one, which knows the
// binding, and the requests of the old one keep what they went out under.
func TestStaleDiscoverWithAnotherEpochOpensANewSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 50 * time.Millisecond
		srv := mcptest.NewTestServer(t,
			mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728),
			mcptest.WithCacheHints(ttl, "public"),
			mcptest.WithTool(mcpclient.Tool{Name: "lookup"}, nil))
		var sent sentCounter
		cl := connect(t, sent.transport(srv))
		ctx := context.Background()
		epoch := func() string {
			r, _ := cl.ServerCapabilities().RequestReceipts()
			return r.Epoch
		}
		first := epoch()
		if first == "" || first != srv.ReceiptEpoch() {
			t.Fatalf("the client holds epoch %q, the server declares %q", first, srv.ReceiptEpoch())
		}
		srv.Restart()
		time.Sleep(ttl / 2)
		if _, err := cl.CallTool(ctx, "lookup", nil); err != nil {
			t.Fatal(err)
		}
		if epoch() != first {
			t.Fatal("within the lifetime the client learned of the restart without asking")
		}
		time.Sleep(ttl)
		before := sent.total()
		res, err := cl.CallTool(ctx, "lookup", nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := epoch(); got == first || got != srv.ReceiptEpoch() {
			t.Errorf("past the lifetime the client holds epoch %q; the server declares %q (was %q)", got, srv.ReceiptEpoch(), first)
		}
		want := []string{"server/discover", "server/discover", "tools/call"} // the stale session's, the new session's
		if out := sent.since(before); !slices.Equal(out, want) {
			t.Errorf("the call sent %v, want %v", out, want)
		}
		if res.Text() == "" {
			t.Error("no answer")
		}
	})
}
