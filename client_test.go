package mcpclient_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
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

func TestConnectNegotiatesAndDeclaresReceipts(t *testing.T) {
	srv := mcptest.NewTestServer(t, mcptest.WithMaxReceipts(7))
	c := mcptest.NewClient(t, srv)
	if got := c.ProtocolVersion(); got != mcpclient.LatestStatefulProtocolVersion {
		t.Errorf("protocol %q, want %q", got, mcpclient.LatestStatefulProtocolVersion)
	}
	if c.ServerInfo().Name != "mcptest" {
		t.Errorf("server info %+v", c.ServerInfo())
	}
	if scope := c.Receipts(); scope != mcpclient.ReceiptScopeProcess {
		t.Errorf("receipts %q, want process", scope)
	}
	caps := c.ServerCapabilities()
	r, ok := caps.RequestReceipts()
	if !ok || r.MaxReceipts != 7 {
		t.Errorf("declared receipts %+v %v", r, ok)
	}
}

func TestConnectAcceptsOlderRevision(t *testing.T) {
	for _, v := range []string{mcpclient.ProtocolVersion20250618, mcpclient.ProtocolVersion20250326, mcpclient.ProtocolVersion20241105} {
		t.Run(v, func(t *testing.T) {
			srv := mcptest.NewTestServer(t, mcptest.WithProtocolVersions(v))
			c := mcptest.NewClient(t, srv)
			if got := c.ProtocolVersion(); got != v {
				t.Fatalf("negotiated %q, want %q", got, v)
			}
		})
	}
}

func TestConnectRefusesUnknownRevision(t *testing.T) {
	srv := mcptest.NewTestServer(t, mcptest.WithProtocolVersions("1999-01-01"))
	c, err := mcpclient.Connect(context.Background(), srv.Transport())
	if err == nil {
		c.Close()
		t.Fatal("Connect succeeded against a server speaking only 1999-01-01")
	}
	if !errors.Is(err, mcpclient.ErrUnsupportedVersion) || mcpclient.CodeOf(err) != mcpclient.CodeUnsupportedVersion {
		t.Fatalf("error %v, want ErrUnsupportedVersion", err)
	}
	if !strings.Contains(err.Error(), "1999-01-01") {
		t.Errorf("error %q does not name the server's revision", err)
	}
}

// A pinned session revision against a server that speaks only the stateless revision: the
// server refuses initialize with -32022, and the client says so with the same typed error
// discovery gives, naming what the server speaks.
func TestPinnedOlderRevisionRefusedByAStatelessServer(t *testing.T) {
	only := mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728)
	for _, b := range []struct {
		name string
		tr   func() transport.Transport
	}{
		{"memory", func() transport.Transport { return mcptest.NewTestServer(t, only).Transport() }},
		{"http", func() transport.Transport {
			h := mcptest.NewHTTPServer(only)
			t.Cleanup(func() { h.Close() })
			return h.Transport()
		}},
	} {
		t.Run(b.name, func(t *testing.T) {
			c, err := mcpclient.Connect(context.Background(), b.tr(), mcpclient.WithProtocolVersion(mcpclient.ProtocolVersion20251125))
			if err == nil {
				c.Close()
				t.Fatal("Connect succeeded with a revision the server does not speak")
			}
			if !errors.Is(err, mcpclient.ErrUnsupportedVersion) || mcpclient.CodeOf(err) != mcpclient.CodeUnsupportedVersion {
				t.Fatalf("error %v (code %v), want ErrUnsupportedVersion", err, mcpclient.CodeOf(err))
			}
			if !strings.Contains(err.Error(), mcpclient.ProtocolVersion20260728) {
				t.Errorf("error %q does not name the server's revision", err)
			}
		})
	}
}

func TestSameRequestTwiceExecutesOnce(t *testing.T) {
	var k counter
	srv := mcptest.NewTestServer(t, mcptest.WithTool(unsafeTool, k.tool))
	c := mcptest.NewClient(t, srv)
	ctx := context.Background()

	req := callReq(t, c, "reserve", map[string]string{"room": "12"})
	first, err := c.Do(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Resend(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !replayOf(second, first) {
		t.Errorf("resend answered %s, first answer was %s", second.Result, first.Result)
	}
	if n := srv.ExecutionsOf("reserve", req.ID()); n != 1 {
		t.Errorf("executions %d, want 1", n)
	}
	assertFramesIdentical(t, srv.Received(req.ID()), 2)
}

func TestConcurrentDuplicateFromSecondConnectionWaits(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	var runs sync.Map
	slow := func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		started <- struct{}{}
		runs.Store(call.ID.JSON(), true)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("done once")}}, nil
	}
	srv := mcptest.NewTestServer(t, mcptest.WithTool(unsafeTool, slow))
	a := mcptest.NewClient(t, srv)
	b := mcptest.NewClient(t, srv)
	id := mcpclient.StringID("shared-id-1")
	args := map[string]string{"room": "7"}

	type out struct {
		res *mcpclient.CallToolResult
		err error
	}
	results := make(chan out, 2)
	for _, c := range []*mcpclient.Client{a, b} {
		go func() {
			res, err := c.CallTool(context.Background(), "reserve", args, mcpclient.WithRequestID(id))
			results <- out{res, err}
		}()
	}
	<-started // the first execution is running
	// Wait until the duplicate reached the server too, then let the first finish.
	waitFor(t, "the duplicate to reach the server", func() bool { return len(srv.Received(id)) == 2 })
	select {
	case <-started:
		t.Fatal("the duplicate executed")
	default:
	}
	close(release)
	for range 2 {
		o := <-results
		if o.err != nil {
			t.Fatalf("call failed: %v", o.err)
		}
		if o.res.Text() != "done once" {
			t.Errorf("result %q", o.res.Text())
		}
	}
	if n := srv.ExecutionsOf("reserve", id); n != 1 {
		t.Fatalf("executions %d, want 1", n)
	}
}

func TestChangedContentUnderOneIDIsRefusedByServer(t *testing.T) {
	var k counter
	srv := mcptest.NewTestServer(t, mcptest.WithTool(unsafeTool, k.tool))
	a := mcptest.NewClient(t, srv, noWait)
	b := mcptest.NewClient(t, srv, noWait)
	ctx := context.Background()
	id := mcpclient.StringID("pinned-42")

	if _, err := a.CallTool(ctx, "reserve", map[string]string{"room": "12"}, mcpclient.WithRequestID(id)); err != nil {
		t.Fatal(err)
	}
	framesBefore := framesAfterSync(t, b, srv)
	_, err := b.CallTool(ctx, "reserve", map[string]string{"room": "14"}, mcpclient.WithRequestID(id))
	if !errors.Is(err, mcpclient.ErrRequestIDReused) {
		t.Fatalf("error %v, want ErrRequestIDReused", err)
	}
	e := asError(t, err)
	if !mcpclient.IsWireError(err) || e.Attempts != 1 || e.Request.ID() != id || e.Request == nil {
		t.Errorf("error %+v: want a wire error after 1 attempt naming the id with its request", e)
	}
	var rpc *mcpclient.RPCError
	if !errors.As(err, &rpc) || !rpc.IDReused() {
		t.Errorf("no *RPCError flagged MCP_REQUEST_ID_REUSED in %v", err)
	}
	if k.runs != 1 || srv.Executions("reserve") != 1 {
		t.Errorf("runs %d, want 1", k.runs)
	}
	// No retry and no move to a new id: exactly one more frame reached the server.
	if got := srv.FramesReceived() - framesBefore; got != 1 {
		t.Errorf("the refused call sent %d frames, want 1", got)
	}
	if en, _ := b.Ledger().Lookup(id); en.State != mcpclient.StateConflict {
		t.Errorf("ledger state %s, want conflict", en.State)
	}
}

func TestChangedContentUnderOneIDIsRefusedLocally(t *testing.T) {
	var k counter
	srv := mcptest.NewTestServer(t, mcptest.WithTool(unsafeTool, k.tool))
	c := mcptest.NewClient(t, srv)
	ctx := context.Background()
	id := mcpclient.IntID(9)
	if _, err := c.CallTool(ctx, "reserve", map[string]string{"room": "1"}, mcpclient.WithRequestID(id)); err != nil {
		t.Fatal(err)
	}
	_, err := c.CallTool(ctx, "reserve", map[string]string{"room": "2"}, mcpclient.WithRequestID(id))
	if !errors.Is(err, mcpclient.ErrRequestIDReused) || mcpclient.IsWireError(err) {
		t.Fatalf("error %v: want a local ErrRequestIDReused", err)
	}
	if n := len(srv.Received(id)); n != 1 {
		t.Fatalf("server received %d frames under the id, want 1", n)
	}
}

func TestFullReceiptStoreRefusesNewIDsAndKeepsOld(t *testing.T) {
	var k counter
	srv := mcptest.NewTestServer(t, mcptest.WithTool(unsafeTool, k.tool), mcptest.WithMaxReceipts(2))
	c := mcptest.NewClient(t, srv)
	ctx := context.Background()

	kept := callReq(t, c, "reserve", map[string]int{"n": 1})
	first, err := c.Do(ctx, kept)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CallTool(ctx, "reserve", map[string]int{"n": 2}); err != nil {
		t.Fatal(err)
	}
	_, err = c.CallTool(ctx, "reserve", map[string]int{"n": 3})
	if mcpclient.CodeOf(err) != mcpclient.CodeServerError || !mcpclient.IsWireError(err) {
		t.Fatalf("third id: %v, want a server error", err)
	}
	var rpc *mcpclient.RPCError
	if !errors.As(err, &rpc) || !bytes.Contains(rpc.Data, []byte("MCP_RECEIPTS_FULL")) {
		t.Errorf("refusal %v does not say the store is full", err)
	}
	if k.runs != 2 {
		t.Errorf("runs %d, want 2: a refused id must not execute", k.runs)
	}
	again, err := c.Resend(ctx, kept)
	if err != nil {
		t.Fatal(err)
	}
	if !replayOf(again, first) || srv.ExecutionsOf("reserve", kept.ID()) != 1 {
		t.Errorf("the old receipt was not kept: %s vs %s", again.Result, first.Result)
	}
}

func TestExecuteErrorIsRetained(t *testing.T) {
	runs := 0
	failing := func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		runs++
		return nil, fmt.Errorf("room taken (run %d)", runs)
	}
	srv := mcptest.NewTestServer(t,
		mcptest.WithTool(unsafeTool, failing),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "reserve"}))
	c := mcptest.NewClient(t, srv, noWait)

	req := callReq(t, c, "reserve", nil)
	resp, err := c.Do(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var res mcpclient.CallToolResult
	if err := resp.Decode(&res); err != nil {
		t.Fatal(err)
	}
	if !res.IsError || res.Text() != "room taken (run 1)" {
		t.Errorf("result %+v, want the first run's error", res)
	}
	if runs != 1 || resp.Attempts != 2 {
		t.Errorf("runs %d attempts %d, want 1 and 2", runs, resp.Attempts)
	}
}

func TestToolErrorResultIsNotRetried(t *testing.T) {
	runs := 0
	failing := func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		runs++
		return nil, errors.New("nope")
	}
	srv := mcptest.NewTestServer(t, mcptest.WithTool(unsafeTool, failing))
	c := mcptest.NewClient(t, srv, noWait)
	res, err := c.CallTool(context.Background(), "reserve", nil)
	if err != nil || !res.IsError {
		t.Fatalf("got %+v, %v; want an isError result", res, err)
	}
	if runs != 1 {
		t.Errorf("runs %d, want 1", runs)
	}
}

func TestDropAfterExecutionResendsSameBytes(t *testing.T) {
	var k counter
	srv := mcptest.NewTestServer(t,
		mcptest.WithTool(unsafeTool, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "reserve"}))
	var retries []error
	c := mcptest.NewClient(t, srv, mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{
		NewBackOff: func() backoff.BackOff { return &backoff.ZeroBackOff{} },
		OnRetry:    func(_ int, cause error, _ time.Duration) { retries = append(retries, cause) },
	}))

	req := callReq(t, c, "reserve", map[string]string{"room": "12"})
	resp, err := c.Do(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Request != req || resp.Attempts != 2 {
		t.Errorf("answered request %v after %d attempts; want the original after 2", resp.Request.ID(), resp.Attempts)
	}
	if got := text(t, resp); !strings.HasPrefix(got, "run 1 ") {
		t.Errorf("result %q is not the first run's", got)
	}
	if k.runs != 1 {
		t.Errorf("runs %d, want 1", k.runs)
	}
	assertFramesIdentical(t, srv.Received(req.ID()), 2)
	if !bytes.Equal(srv.Received(req.ID())[0], req.Bytes()) {
		t.Error("the server did not receive the request's frozen bytes")
	}
	if len(retries) != 1 || transport.OutcomeOf(retries[0]) != transport.Uncertain {
		t.Errorf("OnRetry saw %v, want one uncertain cause", retries)
	}
	en, _ := c.Ledger().Lookup(req.ID())
	if en.State != mcpclient.StateAnswered || en.Attempts != 2 {
		t.Errorf("ledger %+v, want answered after 2 attempts", en)
	}
}

func TestNoReceiptsUnsafeToolGivesOutcomeUnknown(t *testing.T) {
	var k counter
	srv := mcptest.NewTestServer(t,
		mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithTool(unsafeTool, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "reserve"}))
	c := mcptest.NewClient(t, srv, noWait)
	if c.Receipts() != "" {
		t.Fatal("the client believes in receipts the server did not declare")
	}

	req := callReq(t, c, "reserve", map[string]string{"room": "12"})
	_, err := c.Do(context.Background(), req)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("error %v, want ErrOutcomeUnknown", err)
	}
	e := asError(t, err)
	if e.Attempts != 1 || e.Request != req || e.Request.ID() != req.ID() {
		t.Errorf("error %+v: want the request's handle after 1 attempt", e)
	}
	if k.runs != 1 || len(srv.Received(req.ID())) != 1 {
		t.Errorf("runs %d, frames %d; want 1 and 1", k.runs, len(srv.Received(req.ID())))
	}
	if en, _ := c.Ledger().Lookup(req.ID()); en.State != mcpclient.StateUncertain {
		t.Errorf("ledger state %s, want uncertain", en.State)
	}
}

func TestNoReceiptsReadOnlyToolIsReissuedUnderNewID(t *testing.T) {
	var k counter
	srv := mcptest.NewTestServer(t,
		mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithTool(readOnlyTool, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "lookup"}))
	c := mcptest.NewClient(t, srv, noWait)
	ctx := context.Background()
	if _, err := c.CachedTools(ctx); err != nil { // learn the hints
		t.Fatal(err)
	}

	req := callReq(t, c, "lookup", map[string]string{"q": "x"})
	resp, err := c.Do(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Request.ID() == req.ID() {
		t.Fatal("re-issued under the same id")
	}
	if !bytes.Equal(resp.Request.Params(), req.Params()) {
		t.Errorf("re-issue changed the params: %s vs %s", resp.Request.Params(), req.Params())
	}
	if resp.Attempts != 2 || k.runs != 2 {
		t.Errorf("attempts %d runs %d, want 2 and 2", resp.Attempts, k.runs)
	}
	old, _ := c.Ledger().Lookup(req.ID())
	nu, _ := c.Ledger().Lookup(resp.Request.ID())
	if old.SupersededBy != resp.Request.ID() || nu.Supersedes != req.ID() || nu.State != mcpclient.StateAnswered {
		t.Errorf("ledger old %+v new %+v", old, nu)
	}
}

func TestIdempotentCallOptionAllowsReissue(t *testing.T) {
	var k counter
	srv := mcptest.NewTestServer(t,
		mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithTool(unsafeTool, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropBeforeExecution, Tool: "reserve"}))
	c := mcptest.NewClient(t, srv, noWait)
	res, err := c.CallTool(context.Background(), "reserve", nil, mcpclient.WithIdempotent())
	if err != nil {
		t.Fatal(err)
	}
	if k.runs != 1 || res.Text() == "" {
		t.Errorf("runs %d result %q", k.runs, res.Text())
	}
}

func TestInFlightRefusalIsHardSignal(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{}, 4)
	blocking := func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &mcpclient.CallToolResult{}, nil
	}
	srv := mcptest.NewTestServer(t, mcptest.WithMode(mcptest.ModeInFlightRefusal), mcptest.WithTool(unsafeTool, blocking))
	// The first tools/call reaches the server but the client sees its exchange break, while
	// the server keeps running it; the client resends (RetryAlways) once the tool runs.
	var once sync.Once
	tr := &transport.Memory{Accept: srv.Accept, BeforeSend: func(msg *transport.Message) (bool, error) {
		var err error
		if msg.Method == "tools/call" {
			once.Do(func() { err = &transport.Error{Outcome: transport.Uncertain, ID: msg.ID, Err: errors.New("reset")} })
		}
		return true, err
	}}
	c, err := mcpclient.Connect(context.Background(), tr, mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{
		Mode:       mcpclient.RetryAlways,
		NewBackOff: func() backoff.BackOff { return &backoff.ZeroBackOff{} },
		OnRetry:    func(int, error, time.Duration) { <-started },
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	req := callReq(t, c, "reserve", nil)
	_, err = c.Do(context.Background(), req)
	if !errors.Is(err, mcpclient.ErrRequestInFlight) {
		t.Fatalf("error %v, want ErrRequestInFlight", err)
	}
	e := asError(t, err)
	if e.Attempts != 2 || e.Request != req || !mcpclient.IsWireError(err) {
		t.Errorf("error %+v: want the server's refusal on the 2nd attempt", e)
	}
	if n := len(srv.Received(req.ID())); n != 2 {
		t.Errorf("server received %d frames, want 2 (no retry after the refusal)", n)
	}
	if srv.Executions("reserve") != 1 {
		t.Errorf("executions %d, want 1", srv.Executions("reserve"))
	}
	if en, _ := c.Ledger().Lookup(req.ID()); en.State != mcpclient.StateConflict {
		t.Errorf("ledger state %s, want conflict", en.State)
	}
}

// The attempts of a safe request may run out right after an uncertain attempt: the error then
// names the request last sent, and no id that never left the client takes a ledger entry.
func TestReissueOutOfAttemptsNamesTheLastRequestSent(t *testing.T) {
	srv := mcptest.NewTestServer(t,
		mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithTool(unsafeTool, (&counter{}).tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "reserve", Times: -1}))
	c := mcptest.NewClient(t, srv, mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{
		MaxAttempts: 2,
		NewBackOff:  func() backoff.BackOff { return &backoff.ZeroBackOff{} },
	}))
	req := callReq(t, c, "reserve", nil, mcpclient.WithIdempotent())
	_, err := c.Do(context.Background(), req)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("err %v, want ErrOutcomeUnknown", err)
	}
	e := asError(t, err)
	if e.Request.ID() == req.ID() || len(srv.Received(e.Request.ID())) != 1 {
		t.Fatalf("the error names %v, received %d times; want the re-issue, sent once", e.Request.ID(), len(srv.Received(e.Request.ID())))
	}
	if c.Ledger().Len() != 2 {
		t.Errorf("%d ledger entries, want the original and its one re-issue", c.Ledger().Len())
	}
	orig, _ := c.Ledger().Lookup(req.ID())
	last, _ := c.Ledger().Lookup(e.Request.ID())
	if orig.SupersededBy != e.Request.ID() || last.State != mcpclient.StateUncertain || !last.SupersededBy.IsZero() {
		t.Errorf("ledger: original %+v, last %+v", orig, last)
	}
}

func TestConnectRefusedAfterInitializeIsDefinite(t *testing.T) {
	t.Parallel()
	srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		if r.Method == "initialize" {
			r.Answer(testpeer.InitResult)
			return true
		}
		r.W.Header().Set("Content-Type", "application/json")
		r.W.WriteHeader(http.StatusBadRequest)
		io.WriteString(r.W, `{"jsonrpc":"2.0","error":{"code":-32600,"message":"Bad Request: Unsupported protocol version"},"id":null}`)
		return true
	})
	_, err := mcpclient.Connect(context.Background(), &transport.HTTP{URL: srv.URL}, noWait)
	if mcpclient.CodeOf(err) != mcpclient.CodeServerError {
		t.Fatalf("error %v, want the server's refusal, not a delivery failure", err)
	}
	if posts := len(srv.Requests()); posts != 3 { // server/discover, initialize, notifications/initialized: no second try
		t.Errorf("%d POSTs", posts)
	}
}
