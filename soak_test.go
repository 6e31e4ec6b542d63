package mcpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// The soak: a Streamable HTTP mcptest server with random faults on a share of
// the tools/call requests, many concurrent callers of a mutation tool on one client. CI runs the
// short soak; -soak.calls=10000 runs the full one.
var (
	soakCalls     = flag.Int("soak.calls", 1000, "tools/call requests per server mode in TestSoak (the full soak: 10000)")
	soakSeed      = flag.Uint64("soak.seed", 1, "seed of TestSoak's random faults (mode i uses seed+i)")
	soakKindsFlag = flag.String("soak.kinds", "", "comma-separated fault kinds TestSoak injects (default: all six)")
)

const (
	soakCallers     = 64
	soakFaultRate   = 0.10
	soakCallTimeout = 10 * time.Second
	// soakHeapSlack bounds how far the live heap after the soak may stay above the one before.
	soakHeapSlack = 8 << 20
)

var soakKinds = []mcptest.FaultKind{
	mcptest.DropBeforeExecution, // a reset before the tool runs
	mcptest.DropAfterExecution,  // a reset after it ran
	mcptest.Fail,                // 503 with Retry-After
	mcptest.Delay,               // a slow reply
	mcptest.BreakStream,         // the SSE answer breaks after an event id, resumed by GET
	mcptest.ExpireSession,       // 404 on the session
}

// TestSoak runs the soak against a server keeping receipts, one refusing ids in flight with
// 409, and one keeping nothing. In each it checks that every call ends in a result or an
// *mcpclient.Error, that no id runs twice, that no id carries two bodies, that every
// ErrOutcomeUnknown names an id that ran at most once, that the ledger agrees with each outcome,
// and that goroutines and heap come back to where they were.
func TestSoak(t *testing.T) {
	modes := []struct {
		name string
		opts []mcptest.Option
	}{
		{"receipts", nil},
		{"in-flight-409", []mcptest.Option{mcptest.WithMode(mcptest.ModeInFlightRefusal), mcptest.WithInFlightStatus(http.StatusConflict)}},
		{"no-receipts", []mcptest.Option{mcptest.WithMode(mcptest.ModeNone)}},
	}
	kinds := soakKinds
	if *soakKindsFlag != "" {
		kinds = nil
		for _, name := range strings.Split(*soakKindsFlag, ",") {
			i := slices.IndexFunc(soakKinds, func(k mcptest.FaultKind) bool { return k.String() == strings.TrimSpace(name) })
			if i < 0 {
				t.Fatalf("-soak.kinds: unknown kind %q", name)
			}
			kinds = append(kinds, soakKinds[i])
		}
	}
	for i, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			soak(t, m.name, *soakSeed+uint64(i), *soakCalls, kinds, m.opts)
		})
	}
}

// soakTool is the mutation under test: it records every execution per id, with the arguments
// it saw, and answers with a text derived from them.
type soakTool struct {
	mu     sync.Mutex
	runs   map[string]int
	bodies map[string][]string
}

func (k *soakTool) run(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	k.mu.Lock()
	k.runs[call.ID.JSON()]++
	k.bodies[call.ID.JSON()] = append(k.bodies[call.ID.JSON()], string(call.Arguments))
	k.mu.Unlock()
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("reserved " + string(call.Arguments))}}, nil
}

type soakArgs struct {
	Call  int    `json:"call"`
	Room  string `json:"room"`
	Guest string `json:"guest"`
}

// soakOutcome is how one call ended.
type soakOutcome struct {
	done bool // Do returned (or panicked)
	took time.Duration
	req  *mcpclient.Request
	args []byte // the arguments as sent
	resp *mcpclient.Response
	text string
	err  error
	// panicked is the value and stack of a panic on the caller's goroutine during Do.
	panicked string
}

// soakStats is what a soak leaves behind: figures only, so that the heap can be measured once
// the server, the client and the outcomes are gone.
type soakStats struct {
	calls, ok   int
	codes       map[mcpclient.Code]int
	sessionLost int // errors with ErrSessionLost in their chain
	hits        map[mcptest.FaultKind]int
	attempts    int
	maxExec     int
	twice       int // ids executed more than once
	changed     int // ids whose frames differ
	unknownBad  int // ErrOutcomeUnknown on an id executed more than once
	sessions    int // initialize requests served
	panics      int // calls whose Do panicked
	canceled    int // errors with context.Canceled in their chain, though no caller cancels
	overran     int // calls that returned more than a second after their deadline
	took        time.Duration
	slowest     time.Duration // the longest call
}

func soak(t *testing.T, mode string, seed uint64, calls int, kinds []mcptest.FaultKind, opts []mcptest.Option) {
	goroutines0, heap0 := soakBaseline()
	st := runSoak(t, seed, calls, kinds, opts)
	goroutines1 := soakGoroutinesSettle(goroutines0)
	_, heap1 := soakBaseline()

	var codes []string
	for _, c := range slices.Sorted(maps.Keys(st.codes)) {
		codes = append(codes, fmt.Sprintf("%s %d", c, st.codes[c]))
	}
	var hits []string
	hitTotal := 0
	for _, k := range kinds {
		hits = append(hits, fmt.Sprintf("%s %d", k, st.hits[k]))
		hitTotal += st.hits[k]
	}
	typed := 0
	for _, n := range st.codes {
		typed += n
	}
	errs := fmt.Sprintf("%d typed errors", typed)
	if len(codes) > 0 {
		errs += fmt.Sprintf(" (%s; %d after a lost session, %d citing context.Canceled)", strings.Join(codes, ", "), st.sessionLost, st.canceled)
	}
	line := fmt.Sprintf("soak %s: %d calls, %d ok, %s, "+
		"faults injected %d (%s), attempts %d, sessions %d, max executions per id %d, executed twice %d, "+
		"changed bodies %d, panics %d, goroutines %d->%d, heap %.1f->%.1f MiB, slowest call %v (%d past deadline+1s), %.1fs, seed %d",
		mode, st.calls, st.ok, errs,
		hitTotal, strings.Join(hits, ", "), st.attempts, st.sessions, st.maxExec, st.twice,
		st.changed, st.panics, goroutines0, goroutines1, soakMiB(heap0), soakMiB(heap1), st.slowest.Round(time.Millisecond), st.overran, st.took.Seconds(), seed)
	t.Log(line)
	fmt.Println(line)

	if st.twice != 0 || st.maxExec > 1 {
		t.Errorf("%d ids executed more than once (max %d)", st.twice, st.maxExec)
	}
	if st.changed != 0 {
		t.Errorf("%d ids carried more than one body", st.changed)
	}
	if st.unknownBad != 0 {
		t.Errorf("%d ErrOutcomeUnknown name an id executed more than once", st.unknownBad)
	}
	if hitTotal == 0 && calls >= 100 {
		t.Errorf("no fault injected")
	}
	// The standalone GET stream, the server's handlers and the idle pooled connections all end
	// with Close and CloseIdleConnections: no slack is needed, only time to wind down.
	if goroutines1 > goroutines0 {
		t.Errorf("goroutines %d after the soak, %d before:\n%s", goroutines1, goroutines0, soakStacks())
	}
	if heap1 > heap0+soakHeapSlack {
		t.Errorf("live heap %.1f MiB after the soak, %.1f MiB before (bound +%d MiB)", soakMiB(heap1), soakMiB(heap0), soakHeapSlack>>20)
	}
}

func soakMiB(b uint64) float64 { return float64(b) / (1 << 20) }

// soakBaseline returns the goroutine count and the live heap after a GC.
func soakBaseline() (int, uint64) {
	runtime.GC()
	runtime.GC() // the first may leave finalizer-held objects for the second
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return runtime.NumGoroutine(), ms.HeapAlloc
}

// soakGoroutinesSettle waits up to 5s for the goroutine count to come back to want and returns
// the last count.
func soakGoroutinesSettle(want int) int {
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func soakStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// runSoak serves, calls and checks; everything it allocates is unreachable once it returns.
func runSoak(t *testing.T, seed uint64, calls int, kinds []mcptest.FaultKind, opts []mcptest.Option) soakStats {
	tool := &soakTool{runs: make(map[string]int), bodies: make(map[string][]string)}
	srv := mcptest.NewHTTPServer(append(slices.Clone(opts),
		mcptest.WithSSEResponses(2*time.Millisecond), // BreakStream needs SSE answers; resume after 2ms
		mcptest.WithMaxReceipts(calls+64),            // the store must not fill: it would refuse ids
		mcptest.WithTool(mcpclient.Tool{Name: "reserve"}, tool.run),
		mcptest.WithRandomFaults(mcptest.RandomFaults{
			Rate: soakFaultRate, Seed: seed, Kinds: kinds, Tool: "reserve",
			Delay:      10 * time.Millisecond,
			RetryAfter: time.Second, // Retry-After: 1, capped by the client's MaxServerDelay
		}))...)
	defer srv.Close()

	rt := http.DefaultTransport.(*http.Transport).Clone()
	rt.MaxIdleConnsPerHost = 2 * soakCallers
	defer rt.CloseIdleConnections()
	var inits atomic.Int64
	hc := &http.Client{Transport: soakCountInits(rt, &inits)}
	c, err := mcpclient.Connect(context.Background(), &transport.HTTP{URL: srv.URL, Client: hc},
		mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{
			MaxAttempts:    8,
			NewBackOff:     func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) },
			MaxServerDelay: 3 * time.Millisecond,
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// The callers.
	outcomes := make([]soakOutcome, calls)
	var next atomic.Int64
	var wg sync.WaitGroup
	var pmu sync.Mutex
	var problems []string
	problem := func(format string, args ...any) {
		pmu.Lock()
		problems = append(problems, fmt.Sprintf(format, args...))
		pmu.Unlock()
	}
	// inflight holds the start of each call under way, for the watchdog.
	var imu sync.Mutex
	inflight := make(map[int]time.Time)
	start := time.Now()
	for range soakCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= calls {
					return
				}
				imu.Lock()
				inflight[i] = time.Now()
				imu.Unlock()
				outcomes[i] = soakCall(c, i)
				imu.Lock()
				delete(inflight, i)
				imu.Unlock()
				if msg := soakLedgerCheck(c, &outcomes[i]); msg != "" {
					problem("call %d: ledger: %s", i, msg)
				}
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	// Every call has a deadline: one still under way well after it hangs.
	const grace = 30 * time.Second
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for waiting := true; waiting; {
		select {
		case <-finished:
			waiting = false
		case <-tick.C:
			var hung []int
			imu.Lock()
			for i, at := range inflight {
				if time.Since(at) > soakCallTimeout+grace {
					hung = append(hung, i)
				}
			}
			imu.Unlock()
			if len(hung) > 0 {
				slices.Sort(hung)
				t.Fatalf("calls %v did not end %v after their deadline\n%s", hung, grace, soakStacks())
			}
		}
	}
	took := time.Since(start)

	st := soakStats{calls: calls, codes: make(map[mcpclient.Code]int), hits: srv.RandomFaultHits(), took: took}
	for i := range outcomes {
		o := &outcomes[i]
		if !o.done || o.req == nil {
			problem("call %d never made or never ended: %v", i, o.err)
			continue
		}
		id := o.req.ID()
		exec := srv.ExecutionsOf("reserve", id)
		tool.mu.Lock()
		runs, bodies := tool.runs[id.JSON()], slices.Clone(tool.bodies[id.JSON()])
		tool.mu.Unlock()
		frames := srv.Received(id)
		detail := func() string { return soakDetail(i, o, exec, frames) }
		st.slowest = max(st.slowest, o.took)
		if o.took > soakCallTimeout+time.Second {
			st.overran++
		}

		if exec != runs {
			problem("mcptest counted %d executions, the tool %d: %s", exec, runs, detail())
		}
		st.maxExec = max(st.maxExec, exec)
		if exec > 1 {
			st.twice++
			problem("executed %d times: %s", exec, detail())
		}
		for _, b := range bodies {
			if b != string(o.args) {
				problem("the tool ran with arguments %s: %s", b, detail())
			}
		}
		for _, f := range frames[min(1, len(frames)):] {
			if !bytes.Equal(f, frames[0]) {
				st.changed++
				problem("frames differ under one id: %s", detail())
				break
			}
		}
		if len(frames) > 0 && !bytes.Contains(frames[0], o.args) {
			problem("the frame does not carry the call's arguments: %s", detail())
		}

		switch {
		case o.panicked != "":
			st.panics++
			problem("Do panicked: %s: %s", o.panicked, detail())
		case o.err == nil && o.resp == nil:
			problem("neither result nor error: %s", detail())
		case o.err == nil:
			st.ok++
			st.attempts += o.resp.Attempts
			if want := "reserved " + string(o.args); o.text != want {
				problem("result %q, want %q: %s", o.text, want, detail())
			}
			if exec != 1 {
				problem("answered, but executed %d times: %s", exec, detail())
			}
			if len(frames) > o.resp.Attempts {
				problem("%d frames for %d attempts: %s", len(frames), o.resp.Attempts, detail())
			}
		default:
			var e *mcpclient.Error
			if !errors.As(o.err, &e) || e.Code == 0 {
				problem("untyped error %T: %s", o.err, detail())
				continue
			}
			if st.codes[e.Code]++; st.codes[e.Code] == 1 {
				t.Logf("first %s: %s", e.Code, detail())
			}
			st.attempts += e.Attempts
			if errors.Is(o.err, mcpclient.ErrSessionLost) {
				st.sessionLost++
			}
			if errors.Is(o.err, context.Canceled) {
				st.canceled++
			}
			if e.Request.ID() != id || e.Request != o.req {
				problem("the error names %s, not the call's request: %s", e.Request.ID().JSON(), detail())
			}
			if len(frames) > e.Attempts {
				problem("%d frames for %d attempts: %s", len(frames), e.Attempts, detail())
			}
			switch e.Code {
			case mcpclient.CodeOutcomeUnknown:
				if exec > 1 {
					st.unknownBad++
				}
			case mcpclient.CodeNotDelivered:
				if exec != 0 {
					problem("not delivered, but executed %d times: %s", exec, detail())
				}
			}
		}
	}
	st.sessions = int(inits.Load())
	for i, p := range problems {
		if i == 20 {
			t.Errorf("... and %d more problems", len(problems)-i)
			break
		}
		t.Error(p)
	}
	if err := c.Close(); err != nil {
		t.Errorf("closing the client: %v", err)
	}
	srv.Close()
	rt.CloseIdleConnections()
	return st
}

// soakCall makes call i: distinct arguments, its own deadline. A panic on the caller's
// goroutine is recovered and recorded, so that the soak reports the call it happened in.
func soakCall(c *mcpclient.Client, i int) (o soakOutcome) {
	args := soakArgs{Call: i, Room: fmt.Sprintf("room-%d", i%97), Guest: fmt.Sprintf("guest-%d", i*7919%10007)}
	raw, _ := json.Marshal(args)
	req, err := c.NewRequest("tools/call", mcpclient.CallToolParams{Name: "reserve", Arguments: json.RawMessage(raw)})
	if err != nil {
		return soakOutcome{done: true, args: raw, err: err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), soakCallTimeout)
	defer cancel()
	start := time.Now()
	o = soakOutcome{req: req, args: raw}
	defer func() {
		if p := recover(); p != nil {
			o.done, o.took, o.panicked = true, time.Since(start), fmt.Sprintf("%v\n%s", p, debug.Stack())
		}
	}()
	resp, err := c.Do(ctx, req)
	o = soakOutcome{done: true, took: time.Since(start), req: req, args: raw, resp: resp, err: err}
	if err == nil {
		var res mcpclient.CallToolResult
		if derr := resp.Decode(&res); derr != nil {
			o.text = "undecodable: " + derr.Error()
		} else {
			o.text = res.Text()
		}
	}
	return o
}

// soakLedgerCheck compares the ledger's entry for the call's id with how the call ended.
func soakLedgerCheck(c *mcpclient.Client, o *soakOutcome) string {
	if o.req == nil {
		return fmt.Sprintf("no request: %v", o.err)
	}
	if o.panicked != "" {
		return "" // reported with the outcomes
	}
	e, ok := c.Ledger().Lookup(o.req.ID())
	if !ok {
		return "no entry for " + o.req.ID().JSON()
	}
	if e.Fingerprint != o.req.Fingerprint() {
		return fmt.Sprintf("fingerprint %x, the request's %x", e.Fingerprint, o.req.Fingerprint())
	}
	var want []mcpclient.State
	attempts := 0
	var me *mcpclient.Error
	switch {
	case o.err == nil:
		want, attempts = []mcpclient.State{mcpclient.StateAnswered}, o.resp.Attempts
	case errors.As(o.err, &me):
		attempts = me.Attempts
		switch me.Code {
		case mcpclient.CodeOutcomeUnknown:
			want = []mcpclient.State{mcpclient.StateUncertain}
		case mcpclient.CodeNotDelivered, mcpclient.CodeServerError:
			want = []mcpclient.State{mcpclient.StateFailed}
		case mcpclient.CodeRequestInFlight, mcpclient.CodeRequestIDReused:
			want = []mcpclient.State{mcpclient.StateConflict}
		case mcpclient.CodeProtocol:
			want = []mcpclient.State{mcpclient.StateFailed, mcpclient.StateUncertain}
		default:
			return fmt.Sprintf("unexpected code %s: %v", me.Code, o.err)
		}
	default:
		return fmt.Sprintf("untyped error %T", o.err)
	}
	if !slices.Contains(want, e.State) {
		return fmt.Sprintf("state %s, want %v, after %v", e.State, want, o.err)
	}
	if e.Attempts != attempts {
		return fmt.Sprintf("%d attempts recorded, the call reports %d (%v)", e.Attempts, attempts, o.err)
	}
	return ""
}

// soakDetail describes call i for a failure report: its id, error chain, the server's count of
// executions and the frames it received under the id.
func soakDetail(i int, o *soakOutcome, exec int, frames [][]byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "call %d id %s", i, o.req.ID().JSON())
	if o.resp != nil {
		fmt.Fprintf(&b, ", answered after %d attempts: %q", o.resp.Attempts, o.text)
	}
	if o.err != nil {
		fmt.Fprintf(&b, ", error %v, chain %s", o.err, soakErrorChain(o.err))
	}
	fmt.Fprintf(&b, ", executions %d, %d frames received", exec, len(frames))
	for j, f := range frames {
		fmt.Fprintf(&b, "\n\tframe %d: %s", j, f)
	}
	return b.String()
}

// soakErrorChain lists the types of err's chain, joined errors in brackets.
func soakErrorChain(err error) string {
	var parts []string
	for err != nil {
		parts = append(parts, reflect.TypeOf(err).String())
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			var inner []string
			for _, e := range u.Unwrap() {
				inner = append(inner, soakErrorChain(e))
			}
			parts = append(parts, "["+strings.Join(inner, " | ")+"]")
			err = nil
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		default:
			err = nil
		}
	}
	return strings.Join(parts, " > ")
}

// soakCountInits counts the initialize requests, one per session the client opened.
func soakCountInits(rt http.RoundTripper, n *atomic.Int64) http.RoundTripper {
	return soakRoundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodPost && req.Header.Get("Mcp-Session-Id") == "" && req.Header.Get("Mcp-Method") == "" {
			n.Add(1)
		}
		return rt.RoundTrip(req)
	})
}

type soakRoundTripFunc func(*http.Request) (*http.Response, error)

func (f soakRoundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
