package mcpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// seen is one exchange as an interceptor saw it.
type seen struct {
	method, name string
	id           mcpclient.ID
	attempt      int
	handshake    bool
	supersedes   mcpclient.ID
}

// exchangeLog records what an interceptor and the attempt hook see.
type exchangeLog struct {
	mu        sync.Mutex
	exchanges []seen
	events    []mcpclient.AttemptEvent
}

func (l *exchangeLog) interceptor(next mcpclient.Handler) mcpclient.Handler {
	return func(ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
		l.mu.Lock()
		l.exchanges = append(l.exchanges, seen{x.Request.Method(), x.Request.Name(), x.Request.ID(), x.Attempt, x.Handshake, x.Request.Supersedes()})
		l.mu.Unlock()
		return next(ctx, x)
	}
}

func (l *exchangeLog) hook(_ context.Context, ev mcpclient.AttemptEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
}

func (l *exchangeLog) options() []mcpclient.Option {
	return []mcpclient.Option{mcpclient.WithInterceptors(l.interceptor), mcpclient.WithAttemptHook(l.hook)}
}

// since returns what was seen from the marks on, the exchanges and the events.
func (l *exchangeLog) since(x, e int) ([]seen, []mcpclient.AttemptEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.exchanges[x:]), slices.Clone(l.events[e:])
}

func (l *exchangeLog) mark() (int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.exchanges), len(l.events)
}

// Interceptors and the attempt hook see every request the client sends, once per attempt: the
// handshake, a resend after a lost reply, a refusal with Retry-After, the new session after one
// expired, a re-issue under a new id, Resend and Supersede. Each event says how its attempt went
// and how long the client waits before the next.
func TestInterceptorsSeeEveryAttempt(t *testing.T) {
	t.Parallel()
	var log exchangeLog
	var k counter
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(unsafeTool, k.tool), mcptest.WithTool(readOnlyTool, k.tool))
	policy := mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{
		NewBackOff:     func() backoff.BackOff { return &backoff.ZeroBackOff{} },
		MaxServerDelay: 20 * time.Millisecond,
	})
	c := mcptest.NewClient(t, srv, append(log.options(), policy)...)
	ctx := testCtx(t)

	exchanges, events := log.since(0, 0)
	if len(exchanges) == 0 || !exchanges[len(exchanges)-1].handshake || exchanges[len(exchanges)-1].method != "initialize" {
		t.Fatalf("the handshake: %+v", exchanges)
	}
	for _, ev := range events {
		if !ev.Handshake || ev.Attempt != 1 {
			t.Errorf("a handshake event %+v", ev)
		}
	}

	t.Run("lost reply, resent under the same id", func(t *testing.T) {
		x0, e0 := log.mark()
		srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "reserve"})
		if _, err := c.CallTool(ctx, "reserve", map[string]int{"n": 1}); err != nil {
			t.Fatal(err)
		}
		exchanges, events := log.since(x0, e0)
		// Before the resend, the client confirms in a session of its own that the server
		// still declares the receipts' epoch: its initialize is seen as a handshake.
		exchanges = slices.DeleteFunc(exchanges, func(x seen) bool { return x.handshake && x.method == "initialize" })
		events = slices.DeleteFunc(events, func(ev mcpclient.AttemptEvent) bool { return ev.Handshake })
		if len(exchanges) != 2 || exchanges[0].id != exchanges[1].id || exchanges[0].attempt != 1 || exchanges[1].attempt != 2 || exchanges[1].name != "reserve" {
			t.Fatalf("exchanges %+v, want the same id twice", exchanges)
		}
		if len(events) != 2 || events[0].Outcome != transport.Uncertain || events[1].Outcome != transport.Answered ||
			events[0].Tool != "reserve" || events[0].ID != exchanges[0].id || events[0].SessionID == "" || events[1].Err != nil || events[1].Delay != 0 {
			t.Fatalf("events %+v", events)
		}
	})

	t.Run("503 with Retry-After", func(t *testing.T) {
		x0, e0 := log.mark()
		srv.Inject(mcptest.Fault{Kind: mcptest.Fail, Tool: "reserve", RetryAfter: time.Second})
		if _, err := c.CallTool(ctx, "reserve", map[string]int{"n": 2}); err != nil {
			t.Fatal(err)
		}
		exchanges, events := log.since(x0, e0)
		if len(exchanges) != 2 || len(events) != 2 {
			t.Fatalf("exchanges %+v, events %+v", exchanges, events)
		}
		if ev := events[0]; ev.Outcome != transport.NotDelivered || ev.HTTPStatus != http.StatusServiceUnavailable || ev.Delay != 20*time.Millisecond || ev.Err == nil {
			t.Errorf("the refused attempt: %+v, want not delivered, 503, the server's delay capped", ev)
		}
	})

	t.Run("expired session", func(t *testing.T) {
		x0, e0 := log.mark()
		srv.Inject(mcptest.Fault{Kind: mcptest.ExpireSession, Tool: "reserve"})
		if _, err := c.CallTool(ctx, "reserve", map[string]int{"n": 3}); err != nil {
			t.Fatal(err)
		}
		exchanges, _ := log.since(x0, e0)
		var methods []string
		for _, x := range exchanges {
			methods = append(methods, x.method)
		}
		if !slices.Contains(methods, "initialize") || methods[len(methods)-1] != "tools/call" {
			t.Errorf("exchanges %v, want a new session's handshake, then the call", methods)
		}
	})

	t.Run("Resend and Supersede", func(t *testing.T) {
		srv := mcptest.NewTestHTTPServer(t, mcptest.WithMode(mcptest.ModeNone), mcptest.WithTool(unsafeTool, k.tool), mcptest.WithTool(readOnlyTool, k.tool))
		c := mcptest.NewClient(t, srv, append(log.options(), noWait)...)
		if _, err := c.CachedTools(ctx); err != nil { // the listing that says lookup is read-only
			t.Fatal(err)
		}
		x0, e0 := log.mark()
		srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "lookup"})
		if _, err := c.CallTool(ctx, "lookup", nil); err != nil {
			t.Fatal(err)
		}
		exchanges, _ := log.since(x0, e0)
		if len(exchanges) != 2 || exchanges[0].id == exchanges[1].id || exchanges[1].supersedes != exchanges[0].id {
			t.Fatalf("a re-issue: %+v, want a new id replacing the first", exchanges)
		}

		srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "reserve"})
		req := callReq(t, c, "reserve", nil)
		_, err := c.Do(ctx, req)
		if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
			t.Fatalf("Do: %v", err)
		}
		x1, e1 := log.mark()
		if _, err := c.Resend(ctx, req); err != nil {
			t.Fatal(err)
		}
		next, err := c.Supersede(ctx, req, mcpclient.Inspection{Checked: "the booking", Found: "none"}, mcpclient.CallToolParams{Name: "reserve", Arguments: map[string]int{"n": 2}})
		if err != nil {
			t.Fatal(err)
		}
		exchanges, events := log.since(x1, e1)
		if len(exchanges) != 2 || exchanges[0].id != req.ID() || exchanges[1].id != next.Request.ID() || exchanges[1].supersedes != req.ID() {
			t.Fatalf("Resend and Supersede: %+v", exchanges)
		}
		if len(events) != 2 || events[0].Outcome != transport.Answered || events[1].Outcome != transport.Answered {
			t.Errorf("events %+v", events)
		}
	})
}

// Interceptors run in the order given, the first outermost, under the caller's context, and see
// what the server answered; the attempt hook hears of the attempt under the same context.
func TestInterceptorsOrderAndContext(t *testing.T) {
	t.Parallel()
	type key struct{}
	var mu sync.Mutex
	var trail []string
	named := func(name string) mcpclient.Interceptor {
		return func(next mcpclient.Handler) mcpclient.Handler {
			return func(ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
				if x.Request.Method() != "tools/call" {
					return next(ctx, x)
				}
				mu.Lock()
				trail = append(trail, name+" in "+fmt.Sprint(ctx.Value(key{})))
				mu.Unlock()
				resp, err := next(ctx, x)
				mu.Lock()
				trail = append(trail, name+" out "+string(resp.Result[:1]))
				mu.Unlock()
				return resp, err
			}
		}
	}
	srv := mcptest.NewTestServer(t, mcptest.WithTool(unsafeTool, (&counter{}).tool))
	hook := func(ctx context.Context, ev mcpclient.AttemptEvent) {
		if !ev.Handshake {
			mu.Lock()
			trail = append(trail, "hook in "+fmt.Sprint(ctx.Value(key{})))
			mu.Unlock()
		}
	}
	second := func(ctx context.Context, ev mcpclient.AttemptEvent) {
		if !ev.Handshake {
			mu.Lock()
			trail = append(trail, "second hook")
			mu.Unlock()
		}
	}
	c := mcptest.NewClient(t, srv, mcpclient.WithInterceptors(named("a"), named("b")), mcpclient.WithInterceptors(named("c")),
		mcpclient.WithAttemptHook(hook), mcpclient.WithAttemptHook(second))
	if _, err := c.CallTool(context.WithValue(testCtx(t), key{}, "ctx-value"), "reserve", nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"a in ctx-value", "b in ctx-value", "c in ctx-value", "c out {", "b out {", "a out {", "hook in ctx-value", "second hook"}
	if !slices.Equal(trail, want) {
		t.Errorf("trail %q, want %q", trail, want)
	}
}

// An interceptor that returns an error without calling next refuses the request: nothing is
// sent, the call ends at once with CodeRefused and the interceptor's error, and the ledger holds
// the id as failed. After an attempt whose outcome is unknown, a refusal of the resend leaves the
// outcome unknown. A refused handshake fails Connect, without dialing again.
func TestInterceptorRefusal(t *testing.T) {
	t.Parallel()
	errDenied := errors.New("policy: tool reserve is denied")
	var refuse sync.Map // method or tool -> the attempt from which it is refused
	var calls int
	var mu sync.Mutex
	policy := func(next mcpclient.Handler) mcpclient.Handler {
		return func(ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
			mu.Lock()
			calls++
			mu.Unlock()
			for _, k := range []string{x.Request.Method(), x.Request.Name()} {
				if from, ok := refuse.Load(k); ok && x.Attempt >= from.(int) {
					return nil, errDenied
				}
			}
			return next(ctx, x)
		}
	}
	var k counter
	srv := mcptest.NewTestServer(t, mcptest.WithMode(mcptest.ModeNone), mcptest.WithTool(unsafeTool, k.tool), mcptest.WithTool(readOnlyTool, k.tool))
	c := mcptest.NewClient(t, srv, mcpclient.WithInterceptors(policy), noWait)
	ctx := testCtx(t)
	if _, err := c.CachedTools(ctx); err != nil { // the listing that says lookup is read-only
		t.Fatal(err)
	}

	refuse.Store("reserve", 1)
	frames := srv.FramesReceived()
	req := callReq(t, c, "reserve", nil)
	_, err := c.Do(ctx, req)
	if mcpclient.CodeOf(err) != mcpclient.CodeRefused || !errors.Is(err, mcpclient.ErrRefused) || !errors.Is(err, errDenied) {
		t.Fatalf("a refused call: %v, want CodeRefused with the interceptor's error", err)
	}
	if srv.FramesReceived() != frames || k.runs != 0 || asError(t, err).Attempts != 0 {
		t.Errorf("a refused request was sent: %d frames, %d runs, %d attempts", srv.FramesReceived()-frames, k.runs, asError(t, err).Attempts)
	}
	if e, _ := c.Ledger().Lookup(req.ID()); e.State != mcpclient.StateFailed || e.Attempts != 0 {
		t.Errorf("ledger entry %+v, want failed, never sent", e)
	}
	refuse.Delete("reserve")

	// The lost reply leaves lookup's outcome unknown; its re-issue is refused.
	refuse.Store("lookup", 2)
	srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "lookup"})
	_, err = c.CallTool(ctx, "lookup", nil)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, mcpclient.ErrRefused) || !errors.Is(err, errDenied) {
		t.Fatalf("a refused resend after a lost reply: %v, want ErrOutcomeUnknown caused by the refusal", err)
	}

	refuse.Store("initialize", 1)
	mu.Lock()
	calls = 0
	mu.Unlock()
	_, err = mcpclient.Connect(ctx, srv.Transport(), mcpclient.WithInterceptors(policy), mcpclient.WithProtocolVersion(mcpclient.LatestStatefulProtocolVersion))
	if mcpclient.CodeOf(err) != mcpclient.CodeRefused || !errors.Is(err, errDenied) || calls != 1 {
		t.Errorf("Connect with initialize refused: %v after %d exchanges, want CodeRefused at once", err, calls)
	}
}

// Headers an interceptor adds reach the server with that exchange, chosen from the caller's
// context; they cannot displace the protocol's own (the session id) or those that name a
// stateless request. HeaderFunc and a custom RoundTripper see the caller's context values too.
func TestInterceptorHeadersAndCallerContext(t *testing.T) {
	t.Parallel()
	type user struct{}
	auth := func(next mcpclient.Handler) mcpclient.Handler {
		return func(ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
			if u, ok := ctx.Value(user{}).(string); ok {
				x.Header.Set("Authorization", "Bearer token-of-"+u)
			}
			x.Header.Set("Mcp-Session-Id", "forged")
			x.Header.Set("Mcp-Method", "forged")
			return next(ctx, x)
		}
	}
	var mu sync.Mutex
	var roundTripped, headerFunc []string
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if u, ok := r.Context().Value(user{}).(string); ok {
			mu.Lock()
			roundTripped = append(roundTripped, u)
			mu.Unlock()
		}
		return http.DefaultTransport.RoundTrip(r)
	})
	for _, stateless := range []bool{false, true} {
		t.Run(fmt.Sprintf("stateless=%v", stateless), func(t *testing.T) {
			var opts []testpeer.Option
			if stateless {
				opts = append(opts, testpeer.Stateless())
			}
			peer := testpeer.NewHTTP(t, nil, opts...)
			tr := &transport.HTTP{URL: peer.URL, Client: &http.Client{Transport: rt}, HeaderFunc: func(ctx context.Context, h http.Header) error {
				if u, ok := ctx.Value(user{}).(string); ok {
					mu.Lock()
					headerFunc = append(headerFunc, u)
					mu.Unlock()
				}
				return nil
			}}
			c := connect(t, tr, mcpclient.WithInterceptors(auth))
			for _, u := range []string{"ann", "bob"} {
				if _, err := c.CallTool(context.WithValue(testCtx(t), user{}, u), "echo", nil); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			for _, r := range peer.Requests() {
				if r.Method != "tools/call" {
					continue
				}
				got = append(got, r.Header.Get("Authorization"))
				if sid := r.Header.Get("Mcp-Session-Id"); !stateless && sid == "forged" {
					t.Errorf("an interceptor displaced the session id")
				}
				if stateless && r.Header.Get("Mcp-Method") != "tools/call" {
					t.Errorf("an interceptor displaced Mcp-Method: %q", r.Header.Get("Mcp-Method"))
				}
			}
			if want := []string{"Bearer token-of-ann", "Bearer token-of-bob"}; !slices.Equal(got, want) {
				t.Errorf("Authorization per call: %q, want %q", got, want)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(roundTripped, ",") != "ann,bob,ann,bob" || strings.Join(headerFunc, ",") != "ann,bob,ann,bob" {
		t.Errorf("caller's context values: RoundTripper %q, HeaderFunc %q", roundTripped, headerFunc)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// In a stateless revision, each round of a multi round-trip request is an exchange of its own,
// under its own id.
func TestInterceptorsSeeEachRound(t *testing.T) {
	t.Parallel()
	var log exchangeLog
	var mu sync.Mutex
	n := 0
	s := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		if r.Method != "tools/call" {
			return false
		}
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			r.Reply(200, result(`{"resultType":"input_required","inputRequests":{"r":{"method":"roots/list"}}}`))
			return true
		}
		r.Reply(200, result(`{"content":[{"type":"text","text":"done"}]}`))
		return true
	}, testpeer.Stateless())
	c := connect(t, &transport.HTTP{URL: s.URL}, append(log.options(), mcpclient.WithRoots())...)
	x0, e0 := log.mark()
	if _, err := c.CallTool(testCtx(t), "ask", nil); err != nil {
		t.Fatal(err)
	}
	exchanges, events := log.since(x0, e0)
	if len(exchanges) != 2 || exchanges[0].id == exchanges[1].id || exchanges[1].supersedes != exchanges[0].id || len(events) != 2 {
		t.Errorf("rounds %+v, events %d: want two exchanges, the second replacing the first", exchanges, len(events))
	}
}

// WithResponse gives a typed call's id and attempts; WithMeta puts a member in the request's
// _meta, part of its bytes: a resend carries it alike.
func TestWithResponseAndWithMeta(t *testing.T) {
	t.Parallel()
	var k counter
	srv := mcptest.NewTestServer(t, mcptest.WithTool(unsafeTool, k.tool))
	c := mcptest.NewClient(t, srv, noWait)
	ctx := testCtx(t)
	srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "reserve"})
	var resp mcpclient.Response
	trace := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	if _, err := c.CallTool(ctx, "reserve", nil, mcpclient.WithResponse(&resp), mcpclient.WithMeta("trace", trace)); err != nil {
		t.Fatal(err)
	}
	if resp.Request == nil || resp.Attempts != 2 || len(resp.Result) == 0 {
		t.Fatalf("WithResponse: %+v, want the request, sent twice, and its result", resp)
	}
	frames := srv.Received(resp.Request.ID())
	if len(frames) != 2 || !bytes.Equal(frames[0], frames[1]) || !bytes.Equal(frames[0], resp.Request.Bytes()) {
		t.Fatalf("the resend's bytes differ: %q", frames)
	}
	var sent struct {
		Params struct {
			Meta map[string]map[string]string `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal(frames[0], &sent); err != nil || sent.Params.Meta["trace"]["traceparent"] != trace["traceparent"] {
		t.Errorf("_meta sent: %s", frames[0])
	}
	if e, _ := c.Ledger().Lookup(resp.Request.ID()); e.State != mcpclient.StateAnswered || e.Attempts != 2 {
		t.Errorf("ledger %+v", e)
	}

	for _, opt := range []mcpclient.CallOption{
		mcpclient.WithMeta("progressToken", 1),
		mcpclient.WithMeta("io.modelcontextprotocol/protocolVersion", "x"),
		mcpclient.WithMeta("bad", func() {}),
	} {
		if _, err := c.CallTool(ctx, "reserve", nil, opt); mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument {
			t.Errorf("WithMeta refused nothing: %v", err)
		}
	}
}

// An interceptor that returns neither a response nor an error is a broken one: if it never let
// the request through, nothing ran and the call is refused; if it did, the server's answer is
// what the ledger records, and the caller gets the interceptor's failure to pass it on.
func TestInterceptorReturningNothing(t *testing.T) {
	t.Parallel()
	for _, passOn := range []bool{false, true} {
		t.Run(fmt.Sprintf("next called=%v", passOn), func(t *testing.T) {
			var k counter
			srv := mcptest.NewTestServer(t, mcptest.WithMode(mcptest.ModeNone), mcptest.WithTool(unsafeTool, k.tool))
			broken := func(next mcpclient.Handler) mcpclient.Handler {
				return func(ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
					if x.Request.Method() != "tools/call" {
						return next(ctx, x)
					}
					if passOn {
						next(ctx, x)
					}
					return nil, nil
				}
			}
			c := mcptest.NewClient(t, srv, mcpclient.WithInterceptors(broken))
			_, err := c.CallTool(testCtx(t), "reserve", nil)
			switch {
			case !passOn && (mcpclient.CodeOf(err) != mcpclient.CodeRefused || k.runs != 0):
				t.Errorf("%v after %d runs, want CodeRefused and nothing run", err, k.runs)
			case passOn && (mcpclient.CodeOf(err) != mcpclient.CodeServerError || k.runs != 1):
				t.Errorf("%v after %d runs, want CodeServerError after one run", err, k.runs)
			}
			if e := asError(t, err); passOn {
				if entry, _ := c.Ledger().Lookup(e.Request.ID()); entry.State != mcpclient.StateAnswered {
					t.Errorf("ledger entry %+v, want answered", entry)
				}
			}
		})
	}
}

// Over the legacy HTTP+SSE transport too, an interceptor's headers go with the POST of their
// exchange.
func TestInterceptorHeadersOverLegacySSE(t *testing.T) {
	t.Parallel()
	h := mcptest.NewTestHTTPServer(t, mcptest.WithTool(unsafeTool, (&counter{}).tool))
	auth := func(next mcpclient.Handler) mcpclient.Handler {
		return func(ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
			x.Header.Set("Authorization", fmt.Sprintf("Bearer attempt-%d", x.Attempt))
			return next(ctx, x)
		}
	}
	c := mcptest.NewClient(t, legacyDialer{h}, mcpclient.WithInterceptors(auth))
	var resp mcpclient.Response
	if _, err := c.CallTool(testCtx(t), "reserve", nil, mcpclient.WithResponse(&resp)); err != nil {
		t.Fatal(err)
	}
	for _, r := range h.Requests() {
		if r.RPCMethod == "tools/call" && r.ID == resp.Request.ID() {
			if got := r.Header.Get("Authorization"); got != "Bearer attempt-1" {
				t.Errorf("Authorization %q", got)
			}
			return
		}
	}
	t.Fatalf("no tools/call among %+v", h.Requests())
}
