package mcpclient_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/internal/transporttest"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// A 429 or 503 with Retry-After is, by default, the server's refusal of a request it did not
// read: not delivered, and resent as it is after the delay. A policy that says a gateway may
// answer so after forwarding the request makes it uncertain: resent under the same id when the
// server keeps receipts, an unknown outcome for an unsafe request when it keeps none.
func TestRetryAfterRefusalOfAnUnsafeCall(t *testing.T) {
	const hint = 2 * time.Second
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		for _, tc := range []struct {
			name      string
			uncertain bool // RetryPolicy.RetryAfterIsUncertain
			receipts  bool
			wantErr   error // nil: answered after the delay, on a same-id resend
		}{
			{"default without receipts", false, false, nil},
			{"default with receipts", false, true, nil},
			{"uncertain without receipts", true, false, mcpclient.ErrOutcomeUnknown},
			{"uncertain with receipts", true, true, nil},
		} {
			t.Run(strconv.Itoa(status)+"/"+tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					mode := mcptest.ModeNone
					if tc.receipts {
						mode = mcptest.ModeReceipts
					}
					var k counter
					srv := mcptest.NewUnstartedHTTPServer(mcptest.WithLogger(mcptest.TestLogger(t)),
						mcptest.WithMode(mode), mcptest.WithTool(unsafeTool, k.tool))
					defer srv.Close()
					gw := &refusingGateway{next: srv, status: status, retryAfter: hint, refusals: 1}
					var mu sync.Mutex
					var outcomes []transport.Outcome // of the tools/call attempts
					c, err := mcpclient.Connect(context.Background(), &transport.HTTP{URL: "http://mcp.test/", Client: pipeHTTP(t, gw)},
						mcpclient.WithLogger(mcptest.TestLogger(t)),
						mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{RetryAfterIsUncertain: tc.uncertain}),
						mcpclient.WithAttemptHook(func(_ context.Context, ev mcpclient.AttemptEvent) {
							if ev.Method == "tools/call" {
								mu.Lock()
								outcomes = append(outcomes, ev.Outcome)
								mu.Unlock()
							}
						}))
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					req := callReq(t, c, "reserve", map[string]string{"room": "12"})
					start := time.Now()
					resp, err := c.Do(context.Background(), req)
					took := time.Since(start)
					frames := gw.calls()
					entry, _ := c.Ledger().Lookup(req.ID())
					mu.Lock()
					defer mu.Unlock()
					wantFirst := transport.NotDelivered
					if tc.uncertain {
						wantFirst = transport.Uncertain
					}
					if len(outcomes) == 0 || outcomes[0] != wantFirst {
						t.Errorf("attempt outcomes %v, want the first %v", outcomes, wantFirst)
					}
					if tc.wantErr != nil {
						if !errors.Is(err, tc.wantErr) {
							t.Fatalf("err %v, want %v", err, tc.wantErr)
						}
						if len(frames) != 1 || entry.State != mcpclient.StateUncertain {
							t.Fatalf("sent %d times, ledger %v; want once, uncertain", len(frames), entry.State)
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					if resp.Request.ID() != req.ID() || resp.Attempts != 2 {
						t.Errorf("answered under %s after %d attempts, want %s after 2", resp.Request.ID(), resp.Attempts, req.ID())
					}
					assertFramesIdentical(t, frames, 2)
					if took != hint {
						t.Errorf("the resend came after %v, want the server's %v", took, hint)
					}
					if k.runs != 1 || entry.State != mcpclient.StateAnswered {
						t.Errorf("ran %d times, ledger %v; want once, answered", k.runs, entry.State)
					}
				})
			})
		}
	}
}

// refusingGateway stands in front of an MCP server and answers its first tools/call requests
// itself, with a status and Retry-After, as a gateway or a load balancer may, before or after
// forwarding them; it keeps every tools/call body it sees.
type refusingGateway struct {
	next       http.Handler
	status     int
	retryAfter time.Duration
	refusals   int

	mu     sync.Mutex
	bodies [][]byte
}

func (g *refusingGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if msgs, err := jsonrpc.Decode(body); err == nil && len(msgs) == 1 && msgs[0].Method == "tools/call" {
		g.mu.Lock()
		g.bodies = append(g.bodies, body)
		refuse := g.refusals > 0
		g.refusals--
		g.mu.Unlock()
		if refuse {
			w.Header().Set("Retry-After", strconv.Itoa(int(g.retryAfter/time.Second)))
			http.Error(w, http.StatusText(g.status), g.status)
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

// calls returns the tools/call bodies the gateway saw.
func (g *refusingGateway) calls() [][]byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([][]byte(nil), g.bodies...)
}

// pipeHTTP serves h over in-memory connections (see transporttest.PipeHTTP).
func pipeHTTP(t *testing.T, h http.Handler) *http.Client { return transporttest.PipeHTTP(t, h) }
