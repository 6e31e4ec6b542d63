package mcpotel_test

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"slices"
	"strconv"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	mcpotel "github.com/northstar-mcp/mcpclient/otel"
)

// A tool call is one CLIENT span, child of the caller's, named after the tool, with the
// attributes the conventions list; its one attempt is an event; and the request carries the
// span's context in params._meta.
func TestCallToolSpan(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t, mcpotel.WithSessionID())
	srv := mcptest.NewTestHTTPServer(t, greetTool)
	c := mcptest.NewClient(t, srv, mcpotel.AttemptHook())
	caller := mcpotel.Wrap(c, tel.opts...)

	ctx, parent := tel.tp.Tracer("test").Start(testCtx(t), "agent step")
	res, err := caller.CallTool(ctx, "greet", map[string]string{"who": "ada"})
	parent.End()
	if err != nil || res.Text() != "hello" {
		t.Fatalf("%v, %v", res, err)
	}

	s := tel.span(t, "tools/call greet")
	if s.SpanKind != trace.SpanKindClient || s.Parent.SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("kind %v, parent %v: want a CLIENT span under the caller's", s.SpanKind, s.Parent.SpanID())
	}
	if s.Status.Code != codes.Unset {
		t.Errorf("status %v, want unset", s.Status)
	}
	got := attrs(s.Attributes)
	wantAttrs(t, "span", got, map[attribute.Key]string{
		"mcp.method.name":       "tools/call",
		"gen_ai.tool.name":      "greet",
		"gen_ai.operation.name": "execute_tool",
		"mcp.session.id":        c.SessionID(),
		"mcp.protocol.version":  c.ProtocolVersion(),
		"error.type":            "",
	})
	if c.SessionID() == "" || c.ProtocolVersion() == "" {
		t.Fatalf("session %q, revision %q: the HTTP server names both", c.SessionID(), c.ProtocolVersion())
	}
	id := requestID(t, s)

	events := attemptEvents(s)
	if len(events) != 1 {
		t.Fatalf("events %v, want one attempt", events)
	}
	wantAttrs(t, "attempt", events[0], map[attribute.Key]string{
		"mcpclient.attempt.number":    "1",
		"mcpclient.attempt.outcome":   "answered",
		"mcpclient.attempt.handshake": "false",
		"mcpclient.attempt.delay":     "0",
		"jsonrpc.request.id":          id.String(),
		"mcp.session.id":              c.SessionID(),
	})

	frames := srv.Received(id)
	if len(frames) != 1 {
		t.Fatalf("%d frames under the span's id %v, want 1", len(frames), id)
	}
	sc, meta := metaContext(t, frames[0])
	sameSpan(t, "params._meta", sc, s.SpanContext)
	if meta["traceparent"] == "" {
		t.Errorf("_meta %v has no traceparent", meta)
	}
}

// A reply lost after the tool ran, then read again from the server's receipt: one span, two
// attempt events, and the resend's bytes, trace context included, identical to the first's.
func TestResendCarriesIdenticalBytes(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	srv := mcptest.NewTestHTTPServer(t, greetTool)
	c := mcptest.NewClient(t, srv, mcpotel.AttemptHook())
	caller := mcpotel.Wrap(c, tel.opts...)

	srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "greet"})
	if _, err := caller.CallTool(testCtx(t), "greet", nil); err != nil {
		t.Fatal(err)
	}
	s := tel.span(t, "tools/call greet")
	id := requestID(t, s)
	// Before the resend the client reads the server's receipt epoch again, in a session of its
	// own: its initialize is a handshake event of the span.
	events := slices.DeleteFunc(attemptEvents(s), func(ev map[attribute.Key]string) bool {
		return ev["mcpclient.attempt.handshake"] == "true"
	})
	if len(events) != 2 {
		t.Fatalf("events %v, want two attempts", events)
	}
	wantAttrs(t, "first attempt", events[0], map[attribute.Key]string{
		"mcpclient.attempt.number": "1", "mcpclient.attempt.outcome": "uncertain", "jsonrpc.request.id": id.String()})
	wantAttrs(t, "second attempt", events[1], map[attribute.Key]string{
		"mcpclient.attempt.number": "2", "mcpclient.attempt.outcome": "answered", "jsonrpc.request.id": id.String(),
		"mcpclient.attempt.delay": "0"})
	if events[0][mcpotel.AttemptErrorKey] == "" {
		t.Errorf("the lost reply's event has no error: %v", events[0])
	}

	frames := srv.Received(id)
	if len(frames) != 2 || !bytes.Equal(frames[0], frames[1]) {
		t.Fatalf("frames under %v:\n%s\nwant two identical", id, bytes.Join(frames, []byte("\n")))
	}
	sc, _ := metaContext(t, frames[1])
	sameSpan(t, "the resend's _meta", sc, s.SpanContext)
	if n := srv.Executions("greet"); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
}

// error.type: the JSON-RPC code of a server's error (with rpc.response.status_code and the
// error's message as the status), tool_error for a result with isError, the client's Code
// otherwise; the span's status is ERROR in each case.
func TestErrorType(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	srv := mcptest.NewTestHTTPServer(t, greetTool, brokenTool)
	c := mcptest.NewClient(t, srv, mcpotel.AttemptHook())
	caller := mcpotel.Wrap(c, tel.opts...)
	ctx := testCtx(t)

	t.Run("JSON-RPC error", func(t *testing.T) {
		_, err := caller.CallTool(ctx, "missing", nil)
		if mcpclient.CodeOf(err) != mcpclient.CodeServerError {
			t.Fatalf("err %v, want a server error", err)
		}
		s := tel.span(t, "tools/call missing")
		code := strconv.Itoa(mcpclient.RPCInvalidParams)
		wantAttrs(t, "span", attrs(s.Attributes), map[attribute.Key]string{
			"error.type": code, "rpc.response.status_code": code})
		if s.Status.Code != codes.Error || s.Status.Description != "unknown tool: missing" {
			t.Errorf("status %+v, want ERROR with the JSON-RPC message", s.Status)
		}
		requestID(t, s) // named by the error's request
	})

	t.Run("tool error", func(t *testing.T) {
		res, err := caller.CallTool(ctx, "broken", nil)
		if err != nil || !res.IsError {
			t.Fatalf("%v, %v: want a result with isError", res, err)
		}
		s := tel.span(t, "tools/call broken")
		wantAttrs(t, "span", attrs(s.Attributes), map[attribute.Key]string{"error.type": "tool_error", "rpc.response.status_code": ""})
		if s.Status.Code != codes.Error {
			t.Errorf("status %+v, want ERROR", s.Status)
		}
	})

	t.Run("not delivered", func(t *testing.T) {
		srv.Inject(mcptest.Fault{Kind: mcptest.Fail, Tool: "greet", Times: -1})
		defer srv.ClearFaults()
		_, err := caller.CallTool(ctx, "greet", nil)
		if mcpclient.CodeOf(err) != mcpclient.CodeNotDelivered {
			t.Fatalf("err %v, want not delivered", err)
		}
		s := tel.span(t, "tools/call greet")
		wantAttrs(t, "span", attrs(s.Attributes), map[attribute.Key]string{"error.type": "not_delivered"})
		if s.Status.Code != codes.Error || s.Status.Description != err.Error() {
			t.Errorf("status %+v, want ERROR with the error", s.Status)
		}
		events := attemptEvents(s)
		if len(events) != mcpclient.DefaultMaxAttempts {
			t.Fatalf("%d attempt events, want %d", len(events), mcpclient.DefaultMaxAttempts)
		}
		for i, ev := range events {
			wantAttrs(t, "attempt", ev, map[attribute.Key]string{
				"mcpclient.attempt.number":  strconv.Itoa(i + 1),
				"mcpclient.attempt.outcome": "not delivered",
				"http.response.status_code": "503",
			})
		}
	})
}

// The duration of every call is measured with the conventions' name, unit, buckets and
// attributes, and without the ids that would make a series per request; the session's when the
// wrapper closes, once.
func TestMetrics(t *testing.T) {
	t.Parallel()
	srv := mcptest.NewTestHTTPServer(t, greetTool)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(u.Host)
	portNum, _ := strconv.Atoi(port)
	network := []attribute.KeyValue{semconv.NetworkTransportTCP, semconv.NetworkProtocolName("http"), semconv.ServerAddress(host), semconv.ServerPort(portNum)}
	tel := newTelemetry(t, mcpotel.WithAttributes(network...))
	c := mcptest.NewClient(t, srv, mcpotel.AttemptHook())
	caller := mcpotel.Wrap(c, tel.opts...)
	ctx := testCtx(t)

	if _, err := caller.CallTool(ctx, "greet", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := caller.CallTool(ctx, "missing", nil); err == nil {
		t.Fatal("calling a missing tool succeeded")
	}
	if _, ok := tel.metric(t, "mcp.client.session.duration"); ok {
		t.Error("a session duration before Close")
	}

	m, h := tel.histogram(t, "mcp.client.operation.duration")
	if m.Unit != "s" {
		t.Errorf("unit %q, want s", m.Unit)
	}
	wantNetwork := map[attribute.Key]string{"network.transport": "tcp", "network.protocol.name": "http", "server.address": host, "server.port": port}
	var ok, failed int
	for _, dp := range h.DataPoints {
		got := attrs(dp.Attributes.ToSlice())
		if !slices.Equal(dp.Bounds, []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}) {
			t.Errorf("bounds %v, want the conventions' advice", dp.Bounds)
		}
		for _, k := range []attribute.Key{"jsonrpc.request.id", "mcp.session.id"} {
			if _, has := got[k]; has {
				t.Errorf("a measurement with %s: %v", k, got)
			}
		}
		if got["mcp.method.name"] != "tools/call" {
			continue
		}
		wantAttrs(t, "measurement", got, wantNetwork)
		wantAttrs(t, "measurement", got, map[attribute.Key]string{"mcp.protocol.version": c.ProtocolVersion(), "gen_ai.operation.name": "execute_tool"})
		switch got["gen_ai.tool.name"] {
		case "greet":
			ok++
			wantAttrs(t, "success", got, map[attribute.Key]string{"error.type": ""})
		case "missing":
			failed++
			code := strconv.Itoa(mcpclient.RPCInvalidParams)
			wantAttrs(t, "failure", got, map[attribute.Key]string{"error.type": code, "rpc.response.status_code": code})
		}
		if dp.Count != 1 || dp.Sum <= 0 {
			t.Errorf("count %d, sum %v: want one positive duration", dp.Count, dp.Sum)
		}
	}
	if ok != 1 || failed != 1 {
		t.Errorf("%d measurements of the call, %d of the failure, want 1 and 1: %+v", ok, failed, h.DataPoints)
	}

	if err := caller.Close(); err != nil {
		t.Fatal(err)
	}
	if err := caller.Close(); err != nil { // closing again records nothing more
		t.Fatal(err)
	}
	m, h = tel.histogram(t, "mcp.client.session.duration")
	if m.Unit != "s" || len(h.DataPoints) != 1 || h.DataPoints[0].Count != 1 {
		t.Fatalf("unit %q, points %+v: want one session in seconds", m.Unit, h.DataPoints)
	}
	dp := h.DataPoints[0]
	got := attrs(dp.Attributes.ToSlice())
	wantAttrs(t, "session", got, wantNetwork)
	wantAttrs(t, "session", got, map[attribute.Key]string{"mcp.protocol.version": c.ProtocolVersion(), "error.type": ""})
	if dp.Sum <= 0 || !slices.Equal(dp.Bounds, []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}) {
		t.Errorf("sum %v, bounds %v", dp.Sum, dp.Bounds)
	}
	if _, err := c.CallTool(ctx, "greet", nil); mcpclient.CodeOf(err) != mcpclient.CodeClosed {
		t.Errorf("the client after the wrapper's Close: %v, want closed", err)
	}
}

// A session the server expires is replaced under the call that meets the expiry: the old one
// is measured as lost when the new one opens, the new one when the wrapper closes, and the new
// handshake is an event of the call's span.
func TestSessionReplaced(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t, mcpotel.WithSessionID())
	srv := mcptest.NewTestHTTPServer(t, greetTool)
	c := mcptest.NewClient(t, srv, mcpotel.AttemptHook())
	caller := mcpotel.Wrap(c, tel.opts...)
	first := c.SessionID()

	srv.Inject(mcptest.Fault{Kind: mcptest.ExpireSession, Tool: "greet"})
	if _, err := caller.CallTool(testCtx(t), "greet", nil); err != nil {
		t.Fatal(err)
	}
	if c.SessionID() == first {
		t.Fatal("the client kept its expired session")
	}
	s := tel.span(t, "tools/call greet")
	wantAttrs(t, "span", attrs(s.Attributes), map[attribute.Key]string{"mcp.session.id": c.SessionID()})
	var handshake bool
	for _, ev := range attemptEvents(s) {
		handshake = handshake || ev["mcpclient.attempt.handshake"] == "true" && ev["mcp.method.name"] == "initialize"
	}
	if !handshake {
		t.Errorf("events %v, want the new session's initialize among them", attemptEvents(s))
	}
	if err := caller.Close(); err != nil {
		t.Fatal(err)
	}
	_, h := tel.histogram(t, "mcp.client.session.duration")
	var errTypes []string
	for _, dp := range h.DataPoints {
		for range dp.Count {
			errTypes = append(errTypes, attrs(dp.Attributes.ToSlice())["error.type"])
		}
	}
	slices.Sort(errTypes)
	if !slices.Equal(errTypes, []string{"", "session_lost"}) {
		t.Errorf("sessions ended with error.type %q, want one lost and one closed", errTypes)
	}
}

// Each method's span is named after it and its target, with the attributes of that target; the
// listings that take call options are a span per page, each page carrying its own context.
func TestSpanNames(t *testing.T) {
	t.Parallel()
	const uri = "file:///notes.txt"
	prompt := func(context.Context, map[string]string) (*mcpclient.GetPromptResult, error) {
		return &mcpclient.GetPromptResult{}, nil
	}
	read := func(_ context.Context, uri string) ([]mcpclient.ResourceContents, error) {
		return []mcpclient.ResourceContents{{URI: uri, Text: "notes"}}, nil
	}
	srv := mcptest.NewTestServer(t, greetTool, brokenTool, mcptest.WithPageSize(1),
		mcptest.WithPrompt(mcpclient.Prompt{Name: "summarize"}, prompt),
		mcptest.WithPrompt(mcpclient.Prompt{Name: "translate"}, prompt),
		mcptest.WithResource(mcpclient.Resource{URI: uri, Name: "notes"}, read))
	tel := newTelemetry(t)
	c := mcptest.NewClient(t, srv, mcpotel.AttemptHook())
	caller := mcpotel.Wrap(c, tel.opts...)
	ctx := testCtx(t)

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(caller.Ping(ctx))
	_, err := caller.GetPrompt(ctx, "summarize", nil)
	must(err)
	_, err = caller.ReadResource(ctx, uri)
	must(err)
	_, err = caller.ListToolsPage(ctx, "")
	must(err)
	prompts, err := mcpclient.Collect(caller.Prompts(ctx))
	must(err)
	tools, err := mcpclient.Collect(caller.Tools(ctx))
	must(err)
	if len(prompts) != 2 || len(tools) != 2 {
		t.Fatalf("%d prompts, %d tools, want 2 and 2", len(prompts), len(tools))
	}

	wantAttrs(t, "ping", attrs(tel.span(t, "ping").Attributes), map[attribute.Key]string{"mcp.method.name": "ping", "gen_ai.tool.name": ""})
	s := tel.span(t, "prompts/get summarize")
	wantAttrs(t, "prompts/get", attrs(s.Attributes), map[attribute.Key]string{"mcp.method.name": "prompts/get", "gen_ai.prompt.name": "summarize", "gen_ai.operation.name": ""})
	s = tel.span(t, "resources/read")
	wantAttrs(t, "resources/read", attrs(s.Attributes), map[attribute.Key]string{"mcp.method.name": "resources/read", "mcp.resource.uri": uri})
	frames := srv.Received(requestID(t, s))
	if len(frames) != 1 {
		t.Fatalf("%d frames of the read", len(frames))
	}
	sc, _ := metaContext(t, frames[0])
	sameSpan(t, "resources/read _meta", sc, s.SpanContext)

	// ListToolsPage, then two pages of Tools in one span.
	lists := tel.named("tools/list")
	if len(lists) != 2 {
		t.Fatalf("%d tools/list spans, want ListToolsPage's and Tools'", len(lists))
	}
	requestID(t, lists[0])
	listing := lists[1]
	if id, has := attrs(listing.Attributes)["jsonrpc.request.id"]; has {
		t.Errorf("the listing of two requests names one, %s", id)
	}
	if n := len(attemptEvents(listing)); n != 2 {
		t.Errorf("%d attempts in the listing, want one per page", n)
	}

	// Prompts: a span per page, each request carrying its span's context.
	pages := tel.named("prompts/list")
	if len(pages) != 2 {
		t.Fatalf("%d prompts/list spans, want one per page", len(pages))
	}
	for _, page := range pages {
		frames := srv.Received(requestID(t, page))
		if len(frames) != 1 {
			t.Fatalf("%d frames of a page", len(frames))
		}
		sc, _ := metaContext(t, frames[0])
		sameSpan(t, "a page's _meta", sc, page.SpanContext)
	}
}

// WithResourceURITarget names a resource's spans after its URI, which the conventions leave to
// the user's choice.
func TestResourceURITarget(t *testing.T) {
	t.Parallel()
	read := func(_ context.Context, uri string) ([]mcpclient.ResourceContents, error) {
		return []mcpclient.ResourceContents{{URI: uri, Text: "notes"}}, nil
	}
	srv := mcptest.NewTestServer(t, mcptest.WithResource(mcpclient.Resource{URI: "file:///notes.txt", Name: "notes"}, read))
	tel := newTelemetry(t, mcpotel.WithResourceURITarget())
	caller := mcpotel.Wrap(mcptest.NewClient(t, srv), tel.opts...)
	if _, err := caller.ReadResource(testCtx(t), "file:///notes.txt"); err != nil {
		t.Fatal(err)
	}
	tel.span(t, "resources/read file:///notes.txt")
}

// Do cannot change the bytes of a request frozen before it: its span is made, and the request
// carries the context Inject gave it at NewRequest. Supersede freezes a new request, which
// carries its own span's context.
func TestDoAndSupersede(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	srv := mcptest.NewTestServer(t, greetTool)
	c := mcptest.NewClient(t, srv, mcpotel.AttemptHook())
	caller := mcpotel.Wrap(c, tel.opts...)

	ctx, parent := tel.tp.Tracer("test").Start(testCtx(t), "booking")
	defer parent.End()
	req, err := caller.NewRequest("tools/call", mcpclient.CallToolParams{Name: "greet"}, mcpotel.Inject(ctx, tel.opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := caller.Do(ctx, req); err != nil {
		t.Fatal(err)
	}
	do := tel.span(t, "tools/call greet")
	if do.Parent.SpanID() != parent.SpanContext().SpanID() || requestID(t, do) != req.ID() {
		t.Errorf("Do's span: parent %v, id %v; want the caller's span and %v", do.Parent.SpanID(), requestID(t, do), req.ID())
	}
	frames := srv.Received(req.ID())
	if len(frames) != 1 {
		t.Fatalf("%d frames", len(frames))
	}
	sc, _ := metaContext(t, frames[0])
	sameSpan(t, "the frozen request's _meta", sc, parent.SpanContext())

	tel.spans.Reset()
	resp, err := caller.Supersede(ctx, req, mcpclient.Inspection{Checked: "the greeting log", Found: "one greeting"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sup := tel.span(t, "tools/call greet")
	if id := requestID(t, sup); id != resp.Request.ID() || id == req.ID() {
		t.Errorf("Supersede's span names %v, want the new request %v", id, resp.Request.ID())
	}
	frames = srv.Received(resp.Request.ID())
	if len(frames) != 1 {
		t.Fatalf("%d frames", len(frames))
	}
	sc, meta := metaContext(t, frames[0])
	sameSpan(t, "the superseding request's _meta", sc, sup.SpanContext)
	if meta["supersedes"] == "" {
		t.Errorf("_meta %v lost the client's supersedes", meta)
	}
}

// The caller's own WithResponse and WithMeta win over the wrapper's: their Response is filled,
// their traceparent sent, and the span still learns the request's id from the attempts.
func TestCallersOptionsWin(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	srv := mcptest.NewTestServer(t, greetTool)
	c := mcptest.NewClient(t, srv, mcpotel.AttemptHook())
	caller := mcpotel.Wrap(c, tel.opts...)

	const theirs = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	var resp mcpclient.Response
	if _, err := caller.CallTool(testCtx(t), "greet", nil, mcpclient.WithResponse(&resp), mcpclient.WithMeta("traceparent", theirs)); err != nil {
		t.Fatal(err)
	}
	if resp.Request == nil {
		t.Fatal("the caller's Response was not filled")
	}
	s := tel.span(t, "tools/call greet")
	if id := requestID(t, s); id != resp.Request.ID() {
		t.Errorf("span id %v, want %v", id, resp.Request.ID())
	}
	_, meta := metaContext(t, srv.Received(resp.Request.ID())[0])
	if meta["traceparent"] != theirs {
		t.Errorf("traceparent %q, want the caller's", meta["traceparent"])
	}
}

// AttemptHook works without the wrapper: the attempts go to whatever span the call's context
// holds.
func TestAttemptHookOnCallersSpan(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	srv := mcptest.NewTestServer(t, greetTool)
	c := mcptest.NewClient(t, srv, mcpotel.AttemptHook())

	ctx, span := tel.tp.Tracer("test").Start(testCtx(t), "mine")
	var resp mcpclient.Response
	_, err := c.CallTool(ctx, "greet", nil, mcpclient.WithResponse(&resp))
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	events := attemptEvents(tel.span(t, "mine"))
	if len(events) != 1 {
		t.Fatalf("events %v", events)
	}
	wantAttrs(t, "attempt", events[0], map[attribute.Key]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "greet", "jsonrpc.request.id": resp.Request.ID().String(),
		"mcpclient.attempt.outcome": "answered"})
	if _, err := strconv.ParseFloat(events[0]["mcpclient.attempt.latency"], 64); err != nil {
		t.Errorf("latency %q: %v", events[0]["mcpclient.attempt.latency"], err)
	}
}
