package mcptest_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/receipts"
	"github.com/northstar-mcp/mcpclient/transport"
)

// A backend is one way a client reaches an mcptest server.
type backend struct {
	name string
	// status: the transport carries HTTP status codes (Streamable HTTP, either revision).
	status bool
	start  func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, transport.Transport)
}

// transportOnly hands out one transport, for NewClient.
type transportOnly struct{ tr transport.Transport }

func (d transportOnly) Transport() transport.Transport { return d.tr }

var statelessRevision = mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728, mcpclient.ProtocolVersion20251125)

// backends are every transport mcptest serves, in the session revisions and the stateless one.
var backends = []backend{
	{"memory", false, func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, transport.Transport) {
		s := mcptest.NewTestServer(t, opts...)
		return s, s.Transport()
	}},
	{"stream", false, func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, transport.Transport) {
		s := mcptest.NewTestServer(t, opts...)
		tr, _ := serveOverPipes(t, context.Background(), s)
		return s, tr
	}},
	{"http-json", true, func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, transport.Transport) {
		h := mcptest.NewTestHTTPServer(t, opts...)
		return h.Server, h.Transport()
	}},
	{"http-sse", true, func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, transport.Transport) {
		h := mcptest.NewTestHTTPServer(t, append(opts, mcptest.WithSSEResponses(time.Millisecond))...)
		return h.Server, h.Transport()
	}},
	{"legacy-sse", false, func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, transport.Transport) {
		h := mcptest.NewTestHTTPServer(t, opts...)
		return h.Server, h.SSETransport()
	}},
	{"stateless-memory", false, func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, transport.Transport) {
		s := mcptest.NewTestServer(t, append([]mcptest.Option{statelessRevision}, opts...)...)
		return s, s.Transport()
	}},
	{"stateless-stream", false, func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, transport.Transport) {
		s := mcptest.NewTestServer(t, append([]mcptest.Option{statelessRevision}, opts...)...)
		tr, _ := serveOverPipes(t, context.Background(), s)
		return s, tr
	}},
	{"stateless-http-json", true, func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, transport.Transport) {
		h := mcptest.NewTestHTTPServer(t, append([]mcptest.Option{statelessRevision}, opts...)...)
		return h.Server, h.Transport()
	}},
	{"stateless-http-sse", true, func(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, transport.Transport) {
		h := mcptest.NewTestHTTPServer(t, append([]mcptest.Option{statelessRevision, mcptest.WithSSEResponses(time.Millisecond)}, opts...)...)
		return h.Server, h.Transport()
	}},
}

// conflictMarker is the error.data.code with which the receipt rules refuse for kind.
func conflictMarker(kind mcptest.FaultKind) string {
	if kind == mcptest.RefuseIDReused {
		return receipts.CodeIDReused
	}
	return receipts.CodeInFlight
}

// conflictSentinel is the client's error for the refusal of kind.
func conflictSentinel(kind mcptest.FaultKind) error {
	if kind == mcptest.RefuseIDReused {
		return mcpclient.ErrRequestIDReused
	}
	return mcpclient.ErrRequestInFlight
}

// checkRefusal checks the end of a call refused for its id by a fault of kind: the server's
// refusal is in err's chain as the receipt rules word it, the tool did not run, and the request
// was sent sends times under its id. It returns the refused request's ledger entry.
func checkRefusal(t *testing.T, c *mcpclient.Client, srv *mcptest.Server, kind mcptest.FaultKind, err error, sends int) mcpclient.Entry {
	t.Helper()
	var e *mcpclient.Error
	if !errors.As(err, &e) || e.Request == nil {
		t.Fatalf("error %v names no request", err)
	}
	var rpc *mcpclient.RPCError
	if !errors.As(err, &rpc) || rpc.Code != receipts.RPCInvalidRequest || !strings.Contains(string(rpc.Data), `"code":"`+conflictMarker(kind)+`"`) {
		t.Errorf("error %v: want the receipt rules' -32600 %s refusal", err, conflictMarker(kind))
	}
	if n := srv.Executions("echo"); n != 0 {
		t.Errorf("the tool ran %d times", n)
	}
	if n := len(srv.Received(e.Request.ID())); n != sends {
		t.Errorf("the request was received %d times, want %d", n, sends)
	}
	entry, _ := c.Ledger().Lookup(e.Request.ID())
	return entry
}

// checkNextCallRuns checks that a fault that refused a call is used up: the next call runs.
func checkNextCallRuns(t *testing.T, c *mcpclient.Client, srv *mcptest.Server) {
	t.Helper()
	res, err := c.CallTool(context.Background(), "echo", map[string]int{"n": 2})
	if err != nil || res.Text() != `{"n":2}` {
		t.Fatalf("the call after the refusal: %v, %v", res, err)
	}
	if n := srv.Executions("echo"); n != 1 {
		t.Errorf("the tool ran %d times after the refusal, want 1", n)
	}
}

// One line of setup makes the server refuse the next call of a tool as a server keeping
// receipts refuses an id still running or used for other content, over every transport; the
// tool does not run, and the fault is used up. Where the transport has HTTP status codes the
// refusal comes with 409, from which the client tells a conflict whatever the body; the reused
// id's marker tells it everywhere.
func TestConflictFaultsThroughTheClient(t *testing.T) {
	for _, kind := range []mcptest.FaultKind{mcptest.RefuseInFlight, mcptest.RefuseIDReused} {
		for _, b := range backends {
			t.Run(kind.String()+"/"+b.name, func(t *testing.T) {
				var runs int
				var mu sync.Mutex
				srv, tr := b.start(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echo(&runs, &mu)),
					mcptest.WithFault(mcptest.Fault{Kind: kind, Tool: "echo"}))
				c := mcptest.NewClient(t, transportOnly{tr})
				_, err := c.CallTool(context.Background(), "echo", map[string]int{"n": 1})
				entry := checkRefusal(t, c, srv, kind, err, 1)
				var status *transport.StatusError
				if b.status && (!errors.As(err, &status) || status.StatusCode != 409) {
					t.Errorf("error %v: want HTTP 409", err)
				}
				if b.status || kind == mcptest.RefuseIDReused {
					if !errors.Is(err, conflictSentinel(kind)) || entry.State != mcpclient.StateConflict {
						t.Errorf("error %v, state %v: want %v in conflict", err, entry.State, conflictSentinel(kind))
					}
				}
				checkNextCallRuns(t, c, srv)
			})
		}
	}
}

// The in-flight refusal answers, as a server keeping receipts gives it, a resend of a request
// whose first delivery is still running. A transport without status codes carries no 409: the
// client tells the refusal from its -32600 to a resend, and ends the call in conflict without
// sending the id again or re-issuing the request. A byte stream cannot say that the first
// exchange broke: the call ends by its timeout, and the caller resends.
func TestRefuseInFlightAnswersAResend(t *testing.T) {
	faults := []mcptest.Option{
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropBeforeExecution, Tool: "echo"}),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.RefuseInFlight, Tool: "echo", After: 1}),
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			byStream := strings.HasSuffix(b.name, "stream")
			run := func(t *testing.T) {
				var runs int
				var mu sync.Mutex
				srv, tr := b.start(t, append(faults, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echo(&runs, &mu)))...)
				c := mcptest.NewClient(t, transportOnly{tr})
				var err error
				if byStream {
					_, err = c.CallTool(context.Background(), "echo", map[string]int{"n": 1}, mcpclient.WithTimeouts(time.Second, 0))
					var e *mcpclient.Error
					if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.As(err, &e) {
						t.Fatalf("a dropped request over a byte stream: %v, want ErrOutcomeUnknown", err)
					}
					_, err = c.Resend(context.Background(), e.Request)
				} else {
					_, err = c.CallTool(context.Background(), "echo", map[string]int{"n": 1})
				}
				entry := checkRefusal(t, c, srv, mcptest.RefuseInFlight, err, 2)
				if !errors.Is(err, mcpclient.ErrRequestInFlight) || entry.State != mcpclient.StateConflict {
					t.Errorf("error %v, state %v: want ErrRequestInFlight in conflict", err, entry.State)
				}
				checkNextCallRuns(t, c, srv)
			}
			if byStream {
				synctest.Test(t, run) // the call's timeout passes in the bubble's time
			} else {
				run(t)
			}
		})
	}
}

// A conflict fault answers with the very refusal of the receipt rules (receipts.ErrorResponse,
// which the receipts middleware sends too), under 409 over HTTP, whatever the server's mode and
// whether or not the request opted in; it claims no receipt, so that a resend of the id runs.
func TestConflictFaultsSendTheReceiptRefusal(t *testing.T) {
	for _, c := range []struct {
		kind    mcptest.FaultKind
		verdict receipts.Verdict
	}{{mcptest.RefuseInFlight, receipts.InFlight}, {mcptest.RefuseIDReused, receipts.Reused}} {
		want, _ := receipts.ErrorResponse(c.verdict, `"b"`)
		t.Run(c.kind.String()+"/memory", func(t *testing.T) {
			var runs int
			var mu sync.Mutex
			srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echo(&runs, &mu)))
			r := dialRaw(t, srv)
			srv.Inject(mcptest.Fault{Kind: c.kind, Tool: "echo"})
			r.send(call(`"b"`, `{}`))
			if got := r.recv(); got != string(want) || runs != 0 {
				t.Fatalf("runs %d, answer\n%s\nwant\n%s", runs, got, want)
			}
			r.send(call(`"b"`, `{}`))
			if got := r.recv(); !strings.Contains(got, `"result"`) || strings.Contains(got, receipts.ReplayMetaKey) || runs != 1 {
				t.Fatalf("the resend: runs %d, %s; want it run", runs, got)
			}
		})
		for _, mode := range []struct {
			name string
			mode mcptest.Mode
		}{{"receipts", mcptest.ModeReceipts}, {"in-flight-refusal", mcptest.ModeInFlightRefusal}, {"none", mcptest.ModeNone}} {
			t.Run(c.kind.String()+"/http/mode-"+mode.name, func(t *testing.T) {
				var runs int
				var mu sync.Mutex
				srv := mcptest.NewTestHTTPServer(t, mcptest.WithMode(mode.mode),
					mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echo(&runs, &mu)),
					mcptest.WithFault(mcptest.Fault{Kind: c.kind, Tool: "echo"}))
				w := openWire(t, srv)
				resp := w.post(call(`"b"`, `{}`), receipts.HeaderOptIn, "1")
				if got := strings.TrimSpace(w.read(resp)); resp.StatusCode != http.StatusConflict || got != string(want) || runs != 0 {
					t.Fatalf("runs %d, answer %d\n%s\nwant 409\n%s", runs, resp.StatusCode, got, want)
				}
				resp = w.post(call(`"b"`, `{}`), receipts.HeaderOptIn, "1")
				if got := w.read(resp); resp.StatusCode != http.StatusOK || !strings.Contains(got, `"result"`) || runs != 1 {
					t.Fatalf("the resend: runs %d, %d %s; want it run", runs, resp.StatusCode, got)
				}
			})
		}
	}
}

// RandomFaults draw the conflict kinds as they draw the others, and count their hits.
func TestRandomConflictFaults(t *testing.T) {
	for _, kind := range []mcptest.FaultKind{mcptest.RefuseInFlight, mcptest.RefuseIDReused} {
		t.Run(kind.String(), func(t *testing.T) {
			var runs int
			var mu sync.Mutex
			srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echo(&runs, &mu)))
			c := mcptest.NewClient(t, srv)
			srv.InjectRandom(mcptest.RandomFaults{Rate: 1, Kinds: []mcptest.FaultKind{kind}, Tool: "echo"})
			_, err := c.CallTool(context.Background(), "echo", map[string]int{"n": 1})
			if entry := checkRefusal(t, c, srv.Server, kind, err, 1); !errors.Is(err, conflictSentinel(kind)) || entry.State != mcpclient.StateConflict {
				t.Errorf("error %v, state %v: want %v in conflict", err, entry.State, conflictSentinel(kind))
			}
			if hits := srv.RandomFaultHits(); len(hits) != 1 || hits[kind] != 1 {
				t.Errorf("hits %v, want one %v", hits, kind)
			}
		})
	}
}
