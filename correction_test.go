package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// uncertainCall leaves a reserve call with an unknown outcome: no receipts, reply dropped.
func uncertainCall(t *testing.T, opts ...mcptest.Option) (*mcptest.Server, *mcpclient.Client, *mcpclient.Request) {
	t.Helper()
	var k counter
	opts = append([]mcptest.Option{
		mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithTool(unsafeTool, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "reserve"}),
	}, opts...)
	srv := mcptest.NewTestServer(t, opts...)
	c := mcptest.NewClient(t, srv, noWait)
	_, err := c.CallTool(context.Background(), "reserve", map[string]string{"room": "12"})
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("setup: %v, want ErrOutcomeUnknown", err)
	}
	return srv, c, asError(t, err).Request
}

func TestSupersedeWithoutInspectionIsRefused(t *testing.T) {
	srv, c, lost := uncertainCall(t)
	frames := framesAfterSync(t, c, srv)
	for _, insp := range []mcpclient.Inspection{{}, {Checked: "bookings"}, {Found: "none"}} {
		_, err := c.Supersede(context.Background(), lost, insp, nil)
		if !errors.Is(err, mcpclient.ErrInspectionRequired) || mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument {
			t.Errorf("inspection %+v: error %v, want ErrInspectionRequired", insp, err)
		}
	}
	assertNothingSuperseded(t, srv, c, lost, frames)
}

// assertNothingSuperseded checks what a refused Supersede of lost leaves: nothing more sent than
// frames, and lost's ledger entry linked to no successor.
func assertNothingSuperseded(t *testing.T, srv *mcptest.Server, c *mcpclient.Client, lost *mcpclient.Request, frames int) {
	t.Helper()
	if srv.FramesReceived() != frames {
		t.Error("a refused Supersede sent something")
	}
	if en, _ := c.Ledger().Lookup(lost.ID()); !en.SupersededBy.IsZero() {
		t.Errorf("ledger marks the request superseded: %+v", en)
	}
}

func TestSupersedeRecordsTheOldIDOnWireAndInLedger(t *testing.T) {
	srv, c, lost := uncertainCall(t)
	insp := mcpclient.Inspection{Checked: "GET /bookings?room=12", Found: "no booking"}
	resp, err := c.Supersede(context.Background(), lost, insp,
		mcpclient.CallToolParams{Name: "reserve", Arguments: map[string]string{"room": "14"}, Meta: json.RawMessage(`{"trace":"t1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	next := resp.Request
	if next.ID() == lost.ID() || next.Supersedes() != lost.ID() {
		t.Fatalf("new request %v supersedes %v; old %v", next.ID(), next.Supersedes(), lost.ID())
	}
	wire := sentToolCall(t, srv, next.ID())
	if wire.Params.Meta["supersedes"] != lost.ID().String() || wire.Params.Meta["trace"] != "t1" {
		t.Errorf("wire _meta %v, want supersedes %q and the caller's trace kept", wire.Params.Meta, lost.ID())
	}
	if wire.Params.Arguments["room"] != "14" {
		t.Errorf("wire arguments %v", wire.Params.Arguments)
	}
	old, ok := c.Ledger().Lookup(lost.ID())
	if !ok || old.State != mcpclient.StateUncertain || old.SupersededBy != next.ID() {
		t.Errorf("old entry %+v (present %v), want uncertain and superseded by the new id", old, ok)
	}
	nu, _ := c.Ledger().Lookup(next.ID())
	if nu.Supersedes != lost.ID() || nu.Reason != insp.String() || nu.State != mcpclient.StateAnswered {
		t.Errorf("new entry %+v", nu)
	}
}

func TestSupersedeNilParamsKeepsContent(t *testing.T) {
	srv, c, lost := uncertainCall(t)
	resp, err := c.Supersede(context.Background(), lost, mcpclient.Inspection{Checked: "bookings", Found: "none for room 12"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var p, q map[string]json.RawMessage
	json.Unmarshal(lost.Params(), &p)
	json.Unmarshal(resp.Request.Params(), &q)
	if string(p["arguments"]) != string(q["arguments"]) || string(p["name"]) != string(q["name"]) {
		t.Errorf("params changed: %s -> %s", lost.Params(), resp.Request.Params())
	}
	if srv.Executions("reserve") != 2 {
		t.Errorf("executions %d: the superseding request is a new request and runs", srv.Executions("reserve"))
	}
}

func TestSupersedeRefusesForeignAndPendingRequests(t *testing.T) {
	_, c, lost := uncertainCall(t)
	other := mcptest.NewClient(t, mcptest.NewTestServer(t))
	insp := mcpclient.Inspection{Checked: "x", Found: "y"}
	if _, err := other.Supersede(context.Background(), lost, insp, nil); mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument {
		t.Errorf("foreign request: %v, want CodeInvalidArgument", err)
	}
	if _, err := other.Resend(context.Background(), lost); mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument {
		t.Errorf("foreign resend: %v, want CodeInvalidArgument", err)
	}

	// A request still in flight cannot be superseded.
	release := make(chan struct{})
	started := make(chan struct{})
	srv := mcptest.NewTestServer(t, mcptest.WithTool(unsafeTool, func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		close(started)
		<-release
		return &mcpclient.CallToolResult{}, nil
	}))
	c2 := mcptest.NewClient(t, srv)
	req := callReq(t, c2, "reserve", nil)
	done := make(chan error, 1)
	go func() { _, err := c2.Do(context.Background(), req); done <- err }()
	<-started
	_, err := c2.Supersede(context.Background(), req, insp, nil)
	close(release)
	if !errors.Is(err, mcpclient.ErrRequestInFlight) || mcpclient.IsWireError(err) {
		t.Errorf("supersede in flight: %v, want a local ErrRequestInFlight", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_ = c
}

func TestResendAfterOutcomeUnknownReadsTheReceipt(t *testing.T) {
	// Receipts kept, but every attempt's reply lost: the client gives up; a later Resend reads
	// the receipt without running the tool again.
	var k counter
	srv := mcptest.NewTestServer(t,
		mcptest.WithTool(unsafeTool, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "reserve", Times: mcpclient.DefaultMaxAttempts}))
	c := mcptest.NewClient(t, srv, noWait)
	req := callReq(t, c, "reserve", nil)
	_, err := c.Do(context.Background(), req)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || asError(t, err).Attempts != mcpclient.DefaultMaxAttempts {
		t.Fatalf("error %v, want ErrOutcomeUnknown after %d attempts", err, mcpclient.DefaultMaxAttempts)
	}
	resp, err := c.Resend(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if k.runs != 1 || resp.Request != req {
		t.Errorf("runs %d, want 1", k.runs)
	}
	assertFramesIdentical(t, srv.Received(req.ID()), mcpclient.DefaultMaxAttempts+1)
	if en, _ := c.Ledger().Lookup(req.ID()); en.State != mcpclient.StateAnswered || en.Attempts != mcpclient.DefaultMaxAttempts+1 {
		t.Errorf("ledger %+v", en)
	}
}

func TestResendWhileInFlightWaitsForTheFirst(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	srv := mcptest.NewTestServer(t, mcptest.WithTool(unsafeTool, func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		close(started)
		<-release
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("ok")}}, nil
	}))
	joined := make(chan mcpclient.ID, 1)
	c := mcptest.NewClient(t, srv, mcpclient.WithJoinHookForTest(func(id mcpclient.ID) { joined <- id }))
	req := callReq(t, c, "reserve", nil)
	first := make(chan *mcpclient.Response, 1)
	go func() {
		resp, err := c.Do(context.Background(), req)
		if err != nil {
			t.Error(err)
		}
		first <- resp
	}()
	<-started
	second := make(chan *mcpclient.Response, 1)
	go func() {
		resp, err := c.Resend(context.Background(), req)
		if err != nil {
			t.Error(err)
		}
		second <- resp
	}()
	if id := recv(t, joined, "the resend to join"); id != req.ID() {
		t.Fatalf("a caller joined %v, want %v", id, req.ID())
	}
	close(release)
	a, b := <-first, <-second
	if a == nil || b == nil || string(a.Result) != string(b.Result) {
		t.Fatalf("results differ: %v / %v", a, b)
	}
	if n := len(srv.Received(req.ID())); n != 1 {
		t.Errorf("server received %d frames, want 1: the resend joined the attempt in flight", n)
	}
	if srv.Executions("reserve") != 1 {
		t.Errorf("executions %d, want 1", srv.Executions("reserve"))
	}
}

// The check that the superseded request is not in flight and the start of the superseding one
// are one step: a Resend of the old request that starts in between is not run beside it.
func TestSupersedeRacingAResendIsRefused(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 4)
	var running, most atomic.Int32
	srv := mcptest.NewTestServer(t, mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithTool(unsafeTool, func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			n := running.Add(1)
			defer running.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			if n == 1 { // a second execution beside it is the failure: it must not block
				started <- struct{}{}
				<-release
			}
			return &mcpclient.CallToolResult{}, nil
		}),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "reserve"}))
	// The Resend starts after Supersede looked at the old request, before it is sent.
	var c *mcpclient.Client
	var lost *mcpclient.Request
	resent := make(chan error, 1)
	racing := false
	c = mcptest.NewClient(t, srv, noWait, mcpclient.WithSupersedeHookForTest(func() {
		if racing {
			go func() { _, err := c.Resend(context.Background(), lost); resent <- err }()
			<-started
		}
	}))
	lost = callReq(t, c, "reserve", nil)
	go func() { <-started; release <- struct{}{} }()
	if _, err := c.Do(context.Background(), lost); !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("setup: %v", err)
	}

	racing = true
	_, err := c.Supersede(context.Background(), lost, mcpclient.Inspection{Checked: "bookings", Found: "none"}, nil)
	close(release)
	if !errors.Is(err, mcpclient.ErrRequestInFlight) || mcpclient.IsWireError(err) {
		t.Errorf("Supersede racing a Resend: %v, want a local ErrRequestInFlight", err)
	}
	if err := <-resent; err != nil {
		t.Errorf("the Resend: %v", err)
	}
	if most.Load() != 1 {
		t.Errorf("%d executions ran at once for one operation", most.Load())
	}
	if e, _ := c.Ledger().Lookup(lost.ID()); !e.SupersededBy.IsZero() {
		t.Errorf("the old entry is linked to a refused Supersede: %+v", e)
	}
}

// A request replaced once is replaced again through its replacement: two live replacements of
// one operation is what Supersede exists to prevent.
func TestSupersedeOfAnAlreadySupersededRequestIsRefused(t *testing.T) {
	srv, c, lost := uncertainCall(t)
	insp := mcpclient.Inspection{Checked: "bookings", Found: "none for room 12"}
	resp, err := c.Supersede(context.Background(), lost, insp, nil)
	if err != nil {
		t.Fatal(err)
	}
	frames := srv.FramesReceived()
	_, err = c.Supersede(context.Background(), lost, insp, nil)
	if !errors.Is(err, mcpclient.ErrAlreadySuperseded) || !strings.Contains(err.Error(), resp.Request.ID().String()) {
		t.Errorf("second Supersede: %v, want ErrAlreadySuperseded naming %v", err, resp.Request.ID())
	}
	if srv.FramesReceived() != frames {
		t.Error("the refused Supersede sent something")
	}
}

// A tools/call without a tool name is refused before sending: the usual way to get one is to
// pass a tool's arguments where the call's params belong.
func TestToolCallWithoutANameIsRefusedLocally(t *testing.T) {
	srv, c, lost := uncertainCall(t)
	frames := srv.FramesReceived()
	insp := mcpclient.Inspection{Checked: "bookings", Found: "none for room 12"}
	_, err := c.Supersede(context.Background(), lost, insp, map[string]string{"room": "14"})
	if mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument {
		t.Errorf("Supersede with arguments for params: %v, want CodeInvalidArgument", err)
	}
	if _, err := c.NewRequest("tools/call", map[string]string{"room": "14"}); mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument {
		t.Errorf("NewRequest without a tool name: %v, want CodeInvalidArgument", err)
	}
	assertNothingSuperseded(t, srv, c, lost, frames)
}

// SupersedeToolCall replaces a tool call's arguments and keeps its tool.
func TestSupersedeToolCallKeepsTheTool(t *testing.T) {
	srv, c, lost := uncertainCall(t)
	insp := mcpclient.Inspection{Checked: "GET /bookings?room=12", Found: "no booking"}
	res, err := c.SupersedeToolCall(context.Background(), lost, insp, map[string]string{"room": "14"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Text(), `"room":"14"`) {
		t.Errorf("result %q", res.Text())
	}
	old, _ := c.Ledger().Lookup(lost.ID())
	if old.SupersededBy.IsZero() {
		t.Fatalf("the old entry %+v names no successor", old)
	}
	wire := sentToolCall(t, srv, old.SupersededBy)
	if wire.Params.Name != "reserve" || wire.Params.Arguments["room"] != "14" || wire.Params.Meta["supersedes"] != lost.ID().String() {
		t.Errorf("wire params %+v", wire.Params)
	}
}

func TestSupersedeToolCallRefusesOtherMethods(t *testing.T) {
	srv := mcptest.NewTestServer(t)
	c := mcptest.NewClient(t, srv)
	req, err := c.NewRequest("ping", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	_, err = c.SupersedeToolCall(context.Background(), req, mcpclient.Inspection{Checked: "x", Found: "y"}, nil)
	if mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument {
		t.Errorf("SupersedeToolCall of a ping: %v, want CodeInvalidArgument", err)
	}
}

// wireToolCall is a tools/call as the server received it.
type wireToolCall struct {
	Params struct {
		Name      string            `json:"name"`
		Arguments map[string]string `json:"arguments"`
		Meta      map[string]any    `json:"_meta"`
	} `json:"params"`
}

// sentToolCall returns the one tools/call the server received under id.
func sentToolCall(t *testing.T, srv *mcptest.Server, id mcpclient.ID) wireToolCall {
	t.Helper()
	frames := srv.Received(id)
	if len(frames) != 1 {
		t.Fatalf("server received %d frames under %v, want 1", len(frames), id)
	}
	var wire wireToolCall
	if err := json.Unmarshal(frames[0], &wire); err != nil {
		t.Fatal(err)
	}
	return wire
}
