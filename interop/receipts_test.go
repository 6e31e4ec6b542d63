package interop_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/receipts"
	"github.com/northstar-mcp/mcpclient/transport"
)

// receiptsEnv names the file to which the receipts tests append their rows (see run.sh).
const receiptsEnv = "MCPCLIENT_INTEROP_RECEIPTS"

// Timing of the receipts tests: one attempt of the client waits attemptTimeout for an answer (for
// its headers, and then between messages); a slow run of the tool takes slowRun; a caller whose
// deadline passes mid-handler gives the call callerDeadline.
const (
	attemptTimeout = 500 * time.Millisecond
	slowRun        = 1200 * time.Millisecond
	callerDeadline = 300 * time.Millisecond
	callTimeout    = 20 * time.Second
)

// A clientSetup is who calls the server, and whether the server is wrapped by receipts.HTTP.
type clientSetup string

const (
	setupReceipts clientSetup = "mcpclient + receipts.HTTP"
	setupPlain    clientSetup = "mcpclient, no middleware"
	setupNaive    clientSetup = "naive retry, no middleware"
)

var clientSetups = []clientSetup{setupReceipts, setupPlain, setupNaive}

// A callOutcome is what one call ended with, and how often the tool ran for it.
type callOutcome struct {
	fault    fault
	runs     int
	answered bool
	// cancelled: answered with the tool's error, its run cancelled by the client's
	// notifications/cancelled after the caller's deadline.
	cancelled bool
	replayed  bool
	wireError bool // answered with a JSON-RPC error
	unknown   bool // ErrOutcomeUnknown
	err       error
}

// A tally sums the outcomes of the calls of one row.
type tally struct {
	calls, executions, maxRuns, doubled, unknown, failed, replayed, cancelled int
}

func (t *tally) add(o callOutcome) {
	t.calls++
	t.executions += o.runs
	t.maxRuns = max(t.maxRuns, o.runs)
	if o.runs > 1 {
		t.doubled++
	}
	switch {
	case o.unknown:
		t.unknown++
	case !o.answered:
		t.failed++
	}
	if o.replayed {
		t.replayed++
	}
	if o.cancelled {
		t.cancelled++
	}
}

var receiptsMu sync.Mutex

// recordReceipts logs one row of the receipts table and appends it to $receiptsEnv: server, mode,
// fault, setup, calls, executions, most runs of one call, calls run more than once, unknown
// outcomes, other failures, replayed answers, answers that are the tool's cancellation.
func recordReceipts(t *testing.T, srv receiptsServer, faultName string, su clientSetup, tl tally) {
	t.Helper()
	t.Logf("RECEIPTS %s | %s | %s | %s | calls %d, executions %d, most runs of a call %d, run twice %d, unknown %d, failed %d, replayed %d, cancelled %d",
		srv.sdk, srv.mode, faultName, su, tl.calls, tl.executions, tl.maxRuns, tl.doubled, tl.unknown, tl.failed, tl.replayed, tl.cancelled)
	path := os.Getenv(receiptsEnv)
	if path == "" {
		return
	}
	row := strings.Join([]string{srv.sdk, srv.mode, faultName, string(su)}, "\t") +
		fmt.Sprintf("\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d", tl.calls, tl.executions, tl.maxRuns, tl.doubled, tl.unknown, tl.failed, tl.replayed, tl.cancelled)
	receiptsMu.Lock()
	defer receiptsMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("receipts file: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintln(f, row)
}

// A scenario is a run of calls against one server in one setup: plan gives each call's fault.
type scenario struct {
	srv     receiptsServer
	setup   clientSetup
	callers int
	calls   int // per caller
	plan    func(call int) fault
}

// run makes the scenario's calls, numbered from 1, and returns their outcomes once the server is
// idle (no request in the proxy, no run of the tool going on).
func (sc scenario) run(t *testing.T) []callOutcome {
	t.Helper()
	b := &bookings{delay: func(call, run int) time.Duration {
		if run == 1 && sc.plan(call).delayed() {
			return slowRun
		}
		return 0
	}}
	h, closeServer := sc.srv.new(b)
	if sc.setup == setupReceipts {
		h = receipts.HTTP(h, receipts.Options{})
	}
	proxy := newFaultProxy(h, sc.plan)
	hs := httptest.NewServer(proxy)
	t.Cleanup(closeServer)
	t.Cleanup(hs.Close)
	pool := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(pool.CloseIdleConnections)
	hc := &http.Client{Transport: pool}

	var callOnce func(call int) callOutcome
	if sc.setup == setupNaive {
		nc := &naiveClient{hc: hc, url: hs.URL, attemptTimeout: attemptTimeout, maxAttempts: 6}
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if err := nc.connect(ctx); err != nil {
			t.Fatalf("naive client: %v", err)
		}
		callOnce = func(call int) callOutcome { return naiveCall(nc, call, sc.plan(call)) }
	} else {
		cl := connectForReceipts(t, sc, hs.URL, hc)
		callOnce = func(call int) callOutcome { return mcpclientCall(cl, call, sc.plan(call), sc.setup == setupReceipts) }
	}

	outcomes := make([]callOutcome, sc.callers*sc.calls+1)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range sc.callers {
		wg.Go(func() {
			for range sc.calls {
				call := int(next.Add(1))
				outcomes[call] = callOnce(call)
			}
		})
	}
	wg.Wait()
	if !waitFor(10*time.Second, func() bool { return proxy.inflight.Load() == 0 && b.active.Load() == 0 }) {
		t.Errorf("the server is still busy 10s after the last call returned")
	}
	// The answers that went through untouched show that the server answered as its mode says.
	// A replay comes as JSON, since the client accepts JSON.
	types := proxy.answerTypesSeen()
	if sse := strings.HasSuffix(sc.srv.mode, "sse"); sse && types["text/event-stream"] == 0 || !sse && types["text/event-stream"] > 0 {
		t.Errorf("answers to tools/call by media type: %v; the mode is %s", types, sc.srv.mode)
	}
	for call := 1; call < len(outcomes); call++ {
		outcomes[call].runs = b.runsOf(call)
		if outcomes[call].answered && outcomes[call].runs == 0 {
			t.Errorf("call %d answered, but the tool never ran for it", call)
		}
	}
	return outcomes[1:]
}

func connectForReceipts(t *testing.T, sc scenario, url string, hc *http.Client) *mcpclient.Client {
	t.Helper()
	tr := &transport.HTTP{URL: url, Client: hc, ResponseHeaderTimeout: attemptTimeout, ResponseIdleTimeout: attemptTimeout}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	cl, err := mcpclient.Connect(ctx, tr,
		mcpclient.WithProtocolVersion(mcpclient.ProtocolVersion20251125),
		mcpclient.WithLogger(mcptest.TestLogger(t)),
		mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{MaxAttempts: 6,
			NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(20 * time.Millisecond) }}))
	if err != nil {
		t.Fatalf("Connect: %s", errorChain(err))
	}
	t.Cleanup(func() { cl.Close() })
	if got := cl.ProtocolVersion(); got != mcpclient.ProtocolVersion20251125 {
		t.Errorf("negotiated %q, want %q", got, mcpclient.ProtocolVersion20251125)
	}
	decl, declared := cl.ServerCapabilities().RequestReceipts()
	switch {
	case sc.setup == setupReceipts && (!declared || decl.Scope != mcpclient.ReceiptScopeProcess || decl.Epoch == "" ||
		decl.RetentionMs != receipts.DefaultRetention.Milliseconds() || decl.Disconnect != string(receipts.DisconnectContinue)):
		t.Errorf("RequestReceipts() = %+v, %v; want the middleware's declaration (process scope, an epoch, a day's retention, continue)", decl, declared)
	case sc.setup != setupReceipts && declared:
		t.Errorf("RequestReceipts() = %+v; the server alone declares none", decl)
	}
	if want := map[bool]mcpclient.ReceiptScope{true: mcpclient.ReceiptScopeProcess}[sc.setup == setupReceipts]; cl.Receipts() != want {
		t.Errorf("Receipts() = %q, want %q", cl.Receipts(), want)
	}
	return cl
}

// mcpclientCall calls the tool for call. When the caller's deadline passed and the outcome is
// unknown, a caller of a server that keeps receipts collects the outcome with Resend: the same
// request, the same id.
func mcpclientCall(cl *mcpclient.Client, call int, f fault, recover bool) callOutcome {
	out := callOutcome{fault: f}
	timeout := callTimeout
	if f == faultCallerLeaves {
		timeout = callerDeadline
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var resp mcpclient.Response
	res, err := cl.CallTool(ctx, reserveTool, reserveArgs{Call: call}, mcpclient.WithResponse(&resp))
	var e *mcpclient.Error
	if f == faultCallerLeaves && recover && errors.Is(err, mcpclient.ErrOutcomeUnknown) && errors.As(err, &e) && e.Request != nil {
		rctx, rcancel := context.WithTimeout(context.Background(), callTimeout)
		defer rcancel()
		var r *mcpclient.Response
		if r, err = cl.Resend(rctx, e.Request); err == nil {
			resp = *r
			res = new(mcpclient.CallToolResult)
			err = r.Decode(res)
		}
	}
	switch {
	case err == nil && res.Text() == fmt.Sprintf("booked %d", call):
		out.answered, out.replayed = true, resp.Replayed
	case err == nil && res.IsError && f == faultCallerLeaves && strings.Contains(res.Text(), "cancelled"):
		// The client told the server it no longer waited (notifications/cancelled), and the
		// server cancelled the run: that error is the call's outcome, kept in the receipt.
		out.answered, out.cancelled, out.replayed = true, true, resp.Replayed
	case err == nil:
		out.err = fmt.Errorf("result %q", res.Text())
	case mcpclient.IsWireError(err) && f == faultCallerLeaves && strings.Contains(err.Error(), "cancelled"):
		// The same, from a server that answers a tool's error with a JSON-RPC error, which
		// carries no replay mark.
		out.answered, out.cancelled, out.wireError = true, true, true
	default:
		out.err = err
		out.unknown = errors.Is(err, mcpclient.ErrOutcomeUnknown)
	}
	return out
}

// naiveCall calls the tool for call with the naive client; a caller whose deadline passed calls
// again, as a user would.
func naiveCall(nc *naiveClient, call int, f fault) callOutcome {
	out := callOutcome{fault: f}
	timeout := callTimeout
	if f == faultCallerLeaves {
		timeout = callerDeadline
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	text, err := nc.call(ctx, call)
	if err != nil && f == faultCallerLeaves {
		rctx, rcancel := context.WithTimeout(context.Background(), callTimeout)
		defer rcancel()
		text, err = nc.call(rctx, call)
	}
	switch {
	case err == nil && text == fmt.Sprintf("booked %d", call):
		out.answered = true
	case err == nil:
		out.err = fmt.Errorf("result %q", text)
	default:
		out.err = err
	}
	return out
}

// checkOutcomes checks what each setup promises: with receipts.HTTP every call answered and run
// exactly once, the answer of a call that ran before its answer was lost a replay; with this
// client alone, no call run twice (an answer lost is an unknown outcome); a naive retry runs a
// call twice when its answer was lost after the tool ran.
//
// Under load, a slow call's answer may not be lost: mcp-go's stateful server sends the
// notifications of a session's calls on any of its open streams, and those of other calls keep
// the slow call's stream from falling silent for the attempt timeout. underLoad allows that.
func checkOutcomes(t *testing.T, su clientSetup, outcomes []callOutcome, underLoad bool) {
	t.Helper()
	for i, o := range outcomes {
		call := i + 1
		lost := o.fault.ranBeforeLoss() && !(underLoad && o.fault == faultSlow)
		switch su {
		case setupReceipts:
			if !o.answered || o.runs != 1 {
				t.Errorf("call %d (%s): answered %v, ran %d times, error %s; want answered, run once", call, o.fault, o.answered, o.runs, errorChain(o.err))
			}
			if o.answered && lost && !o.replayed && !o.wireError {
				t.Errorf("call %d (%s): answered without the replay mark; the answer can only have come from the receipt", call, o.fault)
			}
		case setupPlain:
			if o.runs > 1 {
				t.Errorf("call %d (%s): ran %d times", call, o.fault, o.runs)
			}
			if o.replayed {
				t.Errorf("call %d (%s): an answer marked as a replay from a server without receipts", call, o.fault)
			}
			if lost && o.answered {
				t.Errorf("call %d (%s): answered, though its answer was lost and the server keeps no receipts", call, o.fault)
			}
		case setupNaive:
			if !underLoad && lost && o.runs < 2 {
				t.Errorf("call %d (%s): ran %d times; a naive retry after a lost answer runs it again", call, o.fault, o.runs)
			}
		}
	}
}

// TestReceiptsUnderFaults drives the client against go-sdk and mcp-go servers, wrapped by
// receipts.HTTP or not, through a proxy that breaks the first delivery of each call with each
// fault, and compares with a naive client that re-sends under a fresh id. Every fault is given
// to two calls made at the same time.
func TestReceiptsUnderFaults(t *testing.T) {
	for _, srv := range receiptsServers {
		t.Run(srv.name(), func(t *testing.T) {
			t.Parallel()
			for _, su := range clientSetups {
				t.Run(string(su), func(t *testing.T) {
					plan := func(call int) fault { return allFaults[(call-1)%len(allFaults)] }
					sc := scenario{srv: srv, setup: su, callers: 2 * len(allFaults), calls: 1, plan: plan}
					outcomes := sc.run(t)
					checkOutcomes(t, su, outcomes, false)
					byFault := make(map[fault]*tally)
					for _, o := range outcomes {
						if byFault[o.fault] == nil {
							byFault[o.fault] = new(tally)
						}
						byFault[o.fault].add(o)
					}
					for _, f := range allFaults {
						recordReceipts(t, srv, string(f), su, *byFault[f])
					}
				})
			}
		})
	}
}

// loadCallers and loadCalls size the load run: loadCallers goroutines share one client, each
// making loadCalls calls in turn.
const (
	loadCallers = 32
	loadCalls   = 4
)

// TestReceiptsUnderLoad runs 32 concurrent callers sharing one client against each server, every
// call's first delivery broken by a fault drawn at random (none for half of them), and counts the
// executions of each call.
func TestReceiptsUnderLoad(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("fault seed %d", seed)
	faultName := fmt.Sprintf("random faults, %d callers", loadCallers)
	for _, srv := range receiptsServers {
		t.Run(srv.name(), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, uint64(len(srv.name()))))
			plan := make([]fault, loadCallers*loadCalls+1)
			for i := range plan {
				if rng.IntN(2) == 0 {
					plan[i] = faultNone
				} else {
					plan[i] = allFaults[1+rng.IntN(len(allFaults)-1)]
				}
			}
			for _, su := range clientSetups {
				t.Run(string(su), func(t *testing.T) {
					sc := scenario{srv: srv, setup: su, callers: loadCallers, calls: loadCalls,
						plan: func(call int) fault { return plan[call] }}
					outcomes := sc.run(t)
					checkOutcomes(t, su, outcomes, true)
					var tl tally
					for _, o := range outcomes {
						tl.add(o)
					}
					recordReceipts(t, srv, faultName, su, tl)
				})
			}
		})
	}
}
