package mcpotel

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/mcpconv"
	"go.opentelemetry.io/otel/trace"

	"github.com/northstar-mcp/mcpclient"
)

// ScopeName is the instrumentation scope of the spans and metrics.
const ScopeName = "github.com/northstar-mcp/mcpclient/otel"

// durationBuckets are the bucket boundaries, in seconds, that the semantic conventions advise for
// mcp.client.operation.duration and mcp.client.session.duration.
var durationBuckets = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

// A Caller is an mcpclient.Caller instrumented by Wrap. Session and CachedTools make no span, NewRequest
// sends nothing, and the methods it does not know (those that later versions add to
// mcpclient.Caller) pass through untraced.
type Caller struct {
	mcpclient.Caller
	cfg     config
	tracer  trace.Tracer
	opDur   metric.Float64Histogram
	session *sessionClock
	info    sessionInfo // nil when the wrapped Caller does not tell its session
	frozen  *frozenTrace
}

// sessionInfo is what a *mcpclient.Client tells of its session beyond the Caller interface.
type sessionInfo interface {
	ProtocolVersion() string
	SessionID() string
}

var _ mcpclient.Caller = (*Caller)(nil)

// Wrap returns c instrumented after the OpenTelemetry semantic conventions for MCP.
//
// Each request-making call is a CLIENT span named "{mcp.method.name} {target}" (the tool of a
// tools/call, the prompt of a prompts/get; the method alone otherwise), with mcp.method.name,
// jsonrpc.request.id, mcp.protocol.version (and mcp.session.id WithSessionID), gen_ai.tool.name
// and gen_ai.operation.name ("execute_tool") for tools/call, gen_ai.prompt.name for prompts/get,
// mcp.resource.uri for resources/read, subscribe and unsubscribe, and on failure error.type,
// rpc.response.status_code (for a JSON-RPC error) and an ERROR status. Each is measured as
// mcp.client.operation.duration. The span's trace context goes into the request's params._meta
// (traceparent, tracestate, baggage: whatever the propagator writes) with WithMeta, before the
// request is frozen: every resend under the same id carries the same bytes. A call that pins an
// id (WithRequestID) already frozen, to re-read its outcome, writes the trace context that
// request was frozen with rather than its span's, so that it is the same bytes again: the
// wrapper remembers what it wrote under each id (as many as the client's ledger holds), and a
// client with a journal tells it of a request frozen by an earlier process (Client.Journaled).
//
// Do and Resend send a request frozen before them, whose bytes cannot change: their span is
// made, but its context is not in the request. Freeze such a request with Inject's options, under
// the span that the request belongs to. Supersede and SupersedeToolCall freeze a new request and
// carry their span's context.
//
// Tools is one span over the whole listing, its pages included, and carries no trace context:
// its pages are requests the client makes for itself. Resources, ResourceTemplates and Prompts
// are one span per page, each carrying its context.
//
// The attempts of each call are events of its span when the client was made with AttemptHook.
// Close records mcp.client.session.duration.
func Wrap(c mcpclient.Caller, opts ...Option) *Caller {
	cfg := newConfig(opts)
	w := &Caller{Caller: c, cfg: cfg}
	w.tracer = cfg.tracerProvider.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL))
	meter := cfg.meterProvider.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	opDur, err := mcpconv.NewClientOperationDuration(meter, metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err != nil {
		otel.Handle(err)
	}
	sessDur, err := mcpconv.NewClientSessionDuration(meter, metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err != nil {
		otel.Handle(err)
	}
	w.opDur = opDur.Inst()
	w.info, _ = c.(sessionInfo)
	w.frozen = &frozenTrace{max: mcpclient.DefaultLedgerCapacity}
	if l, ok := c.(interface{ Ledger() *mcpclient.Ledger }); ok && l.Ledger().Cap() > 0 {
		w.frozen.max = l.Ledger().Cap()
	}
	w.session = &sessionClock{hist: sessDur.Inst(), attrs: cfg.attrs, start: time.Now()}
	if w.info != nil {
		w.session.observe(w.info.ProtocolVersion())
	}
	return w
}

// Close closes the wrapped Caller, if it has a Close method, and records the duration of its
// session as mcp.client.session.duration: from Wrap, or from the handshake of the session that
// replaced a lost one, to Close. It is recorded once, whatever Close returns.
func (c *Caller) Close() error {
	var err error
	if cl, ok := c.Caller.(interface{ Close() error }); ok {
		err = cl.Close()
	}
	c.session.end(time.Now())
	return err
}

// Detach detaches the wrapped Caller, if it has a Detach method (mcpclient.Client.Detach), and
// records the session's duration as Close does.
func (c *Caller) Detach() error {
	var err error
	if d, ok := c.Caller.(interface{ Detach() error }); ok {
		err = d.Detach()
	}
	c.session.end(time.Now())
	return err
}

// A target is what a call is about: its method and the tool, prompt or resource it names.
type target struct {
	method, name, uri string
}

// targetOf reads the target of a frozen request.
func targetOf(req *mcpclient.Request) target {
	t := target{method: req.Method(), name: req.Name()}
	if hasURI(t.method) {
		t.uri = uriOf(req.Params())
	}
	return t
}

// targetOfParams reads the target of a request about to be made of method and params.
func targetOfParams(method string, params any) target {
	t := target{method: method}
	if method != "tools/call" && method != "prompts/get" && !hasURI(method) {
		return t
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return t // the client will refuse the params and say why
	}
	var p struct {
		Name string `json:"name"`
		URI  string `json:"uri"`
	}
	_ = json.Unmarshal(raw, &p) // params that are not an object name nothing
	t.name = p.Name
	if hasURI(method) {
		t.uri = p.URI
	}
	return t
}

func hasURI(method string) bool {
	switch method {
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		return true
	}
	return false
}

func uriOf(params json.RawMessage) string {
	var p struct {
		URI string `json:"uri"`
	}
	_ = json.Unmarshal(params, &p)
	return p.URI
}

// An op is one traced call: its span, what its measurement is recorded with, and what the
// attempt hook and the call's answer tell about it.
type op struct {
	c     *Caller
	ctx   context.Context
	span  trace.Span
	start time.Time
	attrs []attribute.KeyValue // of the span and the measurement alike
	state *callState
	resp  mcpclient.Response // filled by the WithResponse the wrapper adds
	// req is the request Do was handed; listing: the op spans the pages of a listing.
	req     *mcpclient.Request
	listing bool
	// trace is what the call wrote into params._meta, and pinned the id its options pin;
	// traced is false for a call that made no request of its own (Do, Resend, a listing).
	trace  []metaMember
	pinned mcpclient.ID
	traced bool
}

// begin starts the span of a call of t, and the context the call runs under: the span, and the
// state the attempt hook reports to.
func (c *Caller) begin(ctx context.Context, t target) (context.Context, *op) {
	attrs := make([]attribute.KeyValue, 0, 3+len(c.cfg.attrs))
	attrs = append(attrs, semconv.McpMethodNameKey.String(t.method))
	name := t.method
	switch t.method {
	case "tools/call":
		attrs = append(attrs, semconv.GenAIToolName(t.name), semconv.GenAIOperationNameExecuteTool)
		name += " " + t.name
	case "prompts/get", "completion/complete":
		if t.name != "" {
			attrs = append(attrs, semconv.GenAIPromptName(t.name))
			name += " " + t.name
		}
	}
	attrs = append(attrs, c.cfg.attrs...)
	spanAttrs := attrs
	if t.uri != "" {
		spanAttrs = append(slices.Clip(attrs), semconv.McpResourceURI(t.uri))
		if c.cfg.uriTarget {
			name += " " + t.uri
		}
	}
	ctx, span := c.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(spanAttrs...))
	st := &callState{clock: c.session, recordSession: c.cfg.sessionID}
	ctx = context.WithValue(ctx, callKey{}, st)
	return ctx, &op{c: c, ctx: ctx, span: span, start: time.Now(), attrs: attrs, state: st}
}

// options returns the call's options with the wrapper's before them: the trace context (see
// traceFor), and WithResponse for the request's id. The caller's own come last, so that a
// WithMeta or WithResponse of theirs wins over the wrapper's.
func (o *op) options(opts []mcpclient.CallOption) []mcpclient.CallOption {
	o.pinned = mcpclient.RequestIDOf(opts...)
	o.trace, o.traced = o.c.traceFor(o.ctx, o.pinned), true
	ours := withMeta(o.trace, make([]mcpclient.CallOption, 0, 4+len(opts)))
	ours = append(ours, mcpclient.WithResponse(&o.resp))
	return append(ours, opts...)
}

// end ends the span with what the call left, and records its duration. toolError: the call
// answered a tool result with isError set.
func (o *op) end(err error, toolError bool) {
	final := o.resp.Request
	if final == nil {
		var e *mcpclient.Error
		if errors.As(err, &e) {
			final = e.Request
		}
	}
	if o.traced {
		// Under the id pinned, and under a re-issue's, which carries the same _meta.
		o.c.frozen.put(o.pinned, o.trace)
		if final.ID() != o.pinned {
			o.c.frozen.put(final.ID(), o.trace)
		}
	}
	id := final.ID()
	if id.IsZero() {
		id = o.state.requestID(o.listing)
	}
	if id.IsZero() && o.req != nil {
		id = o.req.ID()
	}
	var sessionID, version string
	if o.c.info != nil {
		sessionID, version = o.c.info.SessionID(), o.c.info.ProtocolVersion()
	}
	if sessionID == "" {
		sessionID = o.state.session()
	}
	o.c.session.observe(version)

	errType, rpcCode, message := failure(err, toolError)
	var after []attribute.KeyValue
	if version != "" {
		after = append(after, semconv.McpProtocolVersion(version))
	}
	if errType != "" {
		after = append(after, semconv.ErrorTypeKey.String(errType))
	}
	if rpcCode != "" {
		after = append(after, semconv.RPCResponseStatusCode(rpcCode))
	}
	measured := append(slices.Clip(o.attrs), after...)
	if !id.IsZero() {
		after = append(after, semconv.JSONRPCRequestID(id.String()))
	}
	if sessionID != "" && o.c.cfg.sessionID {
		after = append(after, semconv.McpSessionID(sessionID))
	}
	o.span.SetAttributes(after...)
	if errType != "" {
		o.span.SetStatus(codes.Error, message)
	}
	o.span.End()
	o.c.opDur.Record(o.ctx, time.Since(o.start).Seconds(), metric.WithAttributeSet(attribute.NewSet(measured...)))
}

// failure classifies a call's failure: error.type, with rpc.response.status_code and the
// status description. A JSON-RPC error is its code, as the conventions ask; a tool result with
// isError is tool_error; any other error of the client is its mcpclient.Code, written as an
// identifier (codeType: "outcome_unknown", "not_delivered", ...), and an error without one _OTHER.
func failure(err error, toolError bool) (errType, rpcCode, message string) {
	if err == nil {
		if toolError {
			return "tool_error", "", ""
		}
		return "", "", ""
	}
	var rpc *mcpclient.RPCError
	if errors.As(err, &rpc) {
		code := strconv.FormatInt(rpc.Code, 10)
		return code, code, rpc.Message
	}
	if code := mcpclient.CodeOf(err); code != 0 {
		return codeType(code), "", err.Error()
	}
	return semconv.ErrorTypeOther.Value.AsString(), "", err.Error()
}

// codeType writes code as error.type values are written: lower case, words joined by "_".
func codeType(code mcpclient.Code) string {
	return strings.ReplaceAll(strings.ToLower(code.String()), " ", "_")
}

// isToolError reports whether a tools/call result carries isError: true.
func isToolError(result json.RawMessage) bool {
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(result, &r) == nil && r.IsError
}

func (c *Caller) Ping(ctx context.Context, opts ...mcpclient.CallOption) error {
	ctx, o := c.begin(ctx, target{method: "ping"})
	err := c.Caller.Ping(ctx, o.options(opts)...)
	o.end(err, false)
	return err
}

func (c *Caller) CallTool(ctx context.Context, name string, args any, opts ...mcpclient.CallOption) (*mcpclient.CallToolResult, error) {
	ctx, o := c.begin(ctx, target{method: "tools/call", name: name})
	res, err := c.Caller.CallTool(ctx, name, args, o.options(opts)...)
	o.end(err, res != nil && res.IsError)
	return res, err
}

// Tools is one span over the whole listing: the client's pages are its own requests, which
// the wrapper cannot add a trace context to.
func (c *Caller) Tools(ctx context.Context) iter.Seq2[*mcpclient.Tool, error] {
	return func(yield func(*mcpclient.Tool, error) bool) {
		ctx, o := c.begin(ctx, target{method: "tools/list"})
		o.listing = true
		var failed error
		defer func() { o.end(failed, false) }()
		for t, err := range c.Caller.Tools(ctx) {
			if err != nil {
				failed = err
			}
			if !yield(t, err) {
				return
			}
		}
	}
}

func (c *Caller) ListToolsPage(ctx context.Context, cursor string, opts ...mcpclient.CallOption) (*mcpclient.ListToolsResult, error) {
	ctx, o := c.begin(ctx, target{method: "tools/list"})
	res, err := c.Caller.ListToolsPage(ctx, cursor, o.options(opts)...)
	o.end(err, false)
	return res, err
}

// Resources is one span per page, each carrying its trace context.
func (c *Caller) Resources(ctx context.Context) iter.Seq2[*mcpclient.Resource, error] {
	return mcpclient.Paginate(ctx, func(ctx context.Context, cursor string) ([]*mcpclient.Resource, string, error) {
		page, err := c.ListResourcesPage(ctx, cursor)
		if err != nil {
			return nil, "", err
		}
		return page.Resources, page.NextCursor, nil
	})
}

func (c *Caller) ListResourcesPage(ctx context.Context, cursor string, opts ...mcpclient.CallOption) (*mcpclient.ListResourcesResult, error) {
	ctx, o := c.begin(ctx, target{method: "resources/list"})
	res, err := c.Caller.ListResourcesPage(ctx, cursor, o.options(opts)...)
	o.end(err, false)
	return res, err
}

// ResourceTemplates is one span per page, each carrying its trace context.
func (c *Caller) ResourceTemplates(ctx context.Context) iter.Seq2[*mcpclient.ResourceTemplate, error] {
	return mcpclient.Paginate(ctx, func(ctx context.Context, cursor string) ([]*mcpclient.ResourceTemplate, string, error) {
		page, err := c.ListResourceTemplatesPage(ctx, cursor)
		if err != nil {
			return nil, "", err
		}
		return page.ResourceTemplates, page.NextCursor, nil
	})
}

func (c *Caller) ListResourceTemplatesPage(ctx context.Context, cursor string, opts ...mcpclient.CallOption) (*mcpclient.ListResourceTemplatesResult, error) {
	ctx, o := c.begin(ctx, target{method: "resources/templates/list"})
	res, err := c.Caller.ListResourceTemplatesPage(ctx, cursor, o.options(opts)...)
	o.end(err, false)
	return res, err
}

func (c *Caller) ReadResource(ctx context.Context, uri string, opts ...mcpclient.CallOption) (*mcpclient.ReadResourceResult, error) {
	ctx, o := c.begin(ctx, target{method: "resources/read", uri: uri})
	res, err := c.Caller.ReadResource(ctx, uri, o.options(opts)...)
	o.end(err, false)
	return res, err
}

func (c *Caller) Subscribe(ctx context.Context, uri string, opts ...mcpclient.CallOption) error {
	ctx, o := c.begin(ctx, target{method: "resources/subscribe", uri: uri})
	err := c.Caller.Subscribe(ctx, uri, o.options(opts)...)
	o.end(err, false)
	return err
}

func (c *Caller) Unsubscribe(ctx context.Context, uri string, opts ...mcpclient.CallOption) error {
	ctx, o := c.begin(ctx, target{method: "resources/unsubscribe", uri: uri})
	err := c.Caller.Unsubscribe(ctx, uri, o.options(opts)...)
	o.end(err, false)
	return err
}

// Prompts is one span per page, each carrying its trace context.
func (c *Caller) Prompts(ctx context.Context) iter.Seq2[*mcpclient.Prompt, error] {
	return mcpclient.Paginate(ctx, func(ctx context.Context, cursor string) ([]*mcpclient.Prompt, string, error) {
		page, err := c.ListPromptsPage(ctx, cursor)
		if err != nil {
			return nil, "", err
		}
		return page.Prompts, page.NextCursor, nil
	})
}

func (c *Caller) ListPromptsPage(ctx context.Context, cursor string, opts ...mcpclient.CallOption) (*mcpclient.ListPromptsResult, error) {
	ctx, o := c.begin(ctx, target{method: "prompts/list"})
	res, err := c.Caller.ListPromptsPage(ctx, cursor, o.options(opts)...)
	o.end(err, false)
	return res, err
}

func (c *Caller) GetPrompt(ctx context.Context, name string, args map[string]string, opts ...mcpclient.CallOption) (*mcpclient.GetPromptResult, error) {
	ctx, o := c.begin(ctx, target{method: "prompts/get", name: name})
	res, err := c.Caller.GetPrompt(ctx, name, args, o.options(opts)...)
	o.end(err, false)
	return res, err
}

// Complete's span names the prompt whose argument it completes, if its reference is a prompt's.
func (c *Caller) Complete(ctx context.Context, ref mcpclient.CompletionReference, name, value string, known map[string]string, opts ...mcpclient.CallOption) (*mcpclient.Completion, error) {
	t := target{method: "completion/complete"}
	if ref.Type == "ref/prompt" {
		t.name = ref.Name
	}
	ctx, o := c.begin(ctx, t)
	res, err := c.Caller.Complete(ctx, ref, name, value, known, o.options(opts)...)
	o.end(err, false)
	return res, err
}

func (c *Caller) SetLoggingLevel(ctx context.Context, level mcpclient.LoggingLevel, opts ...mcpclient.CallOption) error {
	ctx, o := c.begin(ctx, target{method: "logging/setLevel"})
	err := c.Caller.SetLoggingLevel(ctx, level, o.options(opts)...)
	o.end(err, false)
	return err
}

// Do makes the span of a request frozen before it: the request's bytes cannot carry the span's
// context (see Inject).
func (c *Caller) Do(ctx context.Context, req *mcpclient.Request) (*mcpclient.Response, error) {
	return c.do(ctx, req, c.Caller.Do)
}

// Resend makes the span of a resend, as Do does.
func (c *Caller) Resend(ctx context.Context, req *mcpclient.Request) (*mcpclient.Response, error) {
	return c.do(ctx, req, c.Caller.Resend)
}

func (c *Caller) do(ctx context.Context, req *mcpclient.Request, send func(context.Context, *mcpclient.Request) (*mcpclient.Response, error)) (*mcpclient.Response, error) {
	if req == nil {
		return send(ctx, req) // the client says what is wrong with it
	}
	ctx, o := c.begin(ctx, targetOf(req))
	o.req = req
	resp, err := send(ctx, req)
	o.endResponse(resp, err)
	return resp, err
}

// Supersede freezes the new request with its span's trace context.
func (c *Caller) Supersede(ctx context.Context, prev *mcpclient.Request, inspection mcpclient.Inspection, params any, opts ...mcpclient.CallOption) (*mcpclient.Response, error) {
	if prev == nil {
		return c.Caller.Supersede(ctx, prev, inspection, params, opts...)
	}
	t := targetOf(prev)
	if params != nil {
		t = targetOfParams(prev.Method(), params)
	}
	ctx, o := c.begin(ctx, t)
	resp, err := c.Caller.Supersede(ctx, prev, inspection, params, o.options(opts)...)
	o.endResponse(resp, err)
	return resp, err
}

// SupersedeToolCall freezes the new call with its span's trace context.
func (c *Caller) SupersedeToolCall(ctx context.Context, prev *mcpclient.Request, inspection mcpclient.Inspection, args any, opts ...mcpclient.CallOption) (*mcpclient.CallToolResult, error) {
	if prev == nil {
		return c.Caller.SupersedeToolCall(ctx, prev, inspection, args, opts...)
	}
	ctx, o := c.begin(ctx, target{method: "tools/call", name: prev.Name()})
	res, err := c.Caller.SupersedeToolCall(ctx, prev, inspection, args, o.options(opts)...)
	o.end(err, res != nil && res.IsError)
	return res, err
}

// endResponse ends the op of a call that returns a raw Response.
func (o *op) endResponse(resp *mcpclient.Response, err error) {
	toolError := false
	if resp != nil {
		if resp.Request != nil {
			o.resp.Request = resp.Request
			toolError = resp.Request.Method() == "tools/call" && isToolError(resp.Result)
		}
	}
	o.end(err, toolError)
}

// Session opens a session if the client has none; it makes no span, but a session it opens in
// place of a lost one restarts mcp.client.session.duration.
func (c *Caller) Session(ctx context.Context) (mcpclient.InitializeResult, error) {
	return c.Caller.Session(c.watch(ctx))
}

// CachedTools makes no span: it answers from the client's listing when it holds one. A listing
// it makes restarts mcp.client.session.duration as Session does; use Tools for a traced listing.
func (c *Caller) CachedTools(ctx context.Context) ([]*mcpclient.Tool, error) {
	return c.Caller.CachedTools(c.watch(ctx))
}

// watch returns ctx with a state for the attempt hook, and no span.
func (c *Caller) watch(ctx context.Context) context.Context {
	return context.WithValue(ctx, callKey{}, &callState{clock: c.session, recordSession: c.cfg.sessionID})
}
