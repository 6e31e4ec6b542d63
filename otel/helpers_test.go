package mcpotel_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	mcpotel "github.com/northstar-mcp/mcpclient/otel"
)

func TestMain(m *testing.M) {
	// Idle pooled HTTP connections keep net/http's goroutines; they are the pool's, not ours.
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
}

// testCtx is a context that bounds a test that hangs.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// telemetry collects what a test's wrapper records: spans as they end, metrics when read.
type telemetry struct {
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
	// opts point the wrapper at them, with the W3C trace context propagator.
	opts []mcpotel.Option
}

func newTelemetry(t *testing.T, opts ...mcpotel.Option) *telemetry {
	t.Helper()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	base := []mcpotel.Option{mcpotel.WithTracerProvider(tp), mcpotel.WithMeterProvider(mp), mcpotel.WithPropagator(propagation.TraceContext{})}
	return &telemetry{spans: spans, reader: reader, tp: tp, opts: append(base, opts...)}
}

// span returns the one ended span named name.
func (tel *telemetry) span(t *testing.T, name string) tracetest.SpanStub {
	t.Helper()
	found := tel.named(name)
	if len(found) != 1 {
		t.Fatalf("%d spans named %q among %v, want 1", len(found), name, tel.names())
	}
	return found[0]
}

func (tel *telemetry) named(name string) []tracetest.SpanStub {
	var found []tracetest.SpanStub
	for _, s := range tel.spans.GetSpans() {
		if s.Name == name {
			found = append(found, s)
		}
	}
	return found
}

func (tel *telemetry) names() []string {
	var names []string
	for _, s := range tel.spans.GetSpans() {
		names = append(names, s.Name)
	}
	return names
}

// histogram collects the metrics and returns the float histogram named name, failing the test
// if there is none.
func (tel *telemetry) histogram(t *testing.T, name string) (metricdata.Metrics, metricdata.Histogram[float64]) {
	t.Helper()
	m, ok := tel.metric(t, name)
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is a %T, want a float64 histogram", name, m.Data)
	}
	return m, h
}

func (tel *telemetry) metric(t *testing.T, name string) (metricdata.Metrics, bool) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				if sm.Scope.Name != mcpotel.ScopeName {
					t.Errorf("%s in scope %q, want %q", name, sm.Scope.Name, mcpotel.ScopeName)
				}
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// attrs returns a span's, an event's or a data point's attributes by key.
func attrs(kvs []attribute.KeyValue) map[attribute.Key]string {
	m := make(map[attribute.Key]string, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = kv.Value.Emit()
	}
	return m
}

// wantAttrs fails the test for each key of want whose value in got differs ("" for absent).
func wantAttrs(t *testing.T, what string, got map[attribute.Key]string, want map[attribute.Key]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s = %q, want %q (all: %v)", what, k, got[k], v, got)
		}
	}
}

// attemptEvents returns the attempt events of a span.
func attemptEvents(s tracetest.SpanStub) []map[attribute.Key]string {
	var evs []map[attribute.Key]string
	for _, ev := range s.Events {
		if ev.Name == mcpotel.AttemptEvent {
			evs = append(evs, attrs(ev.Attributes))
		}
	}
	return evs
}

// requestID returns the jsonrpc.request.id of a span as the client's UUID ids are written.
func requestID(t *testing.T, s tracetest.SpanStub) mcpclient.ID {
	t.Helper()
	id := attrs(s.Attributes)["jsonrpc.request.id"]
	if id == "" {
		t.Fatalf("span %q has no jsonrpc.request.id: %v", s.Name, attrs(s.Attributes))
	}
	return mcpclient.StringID(id)
}

// metaContext returns the trace context a request frame carries in params._meta, read with the
// W3C propagator as a server would, and the raw _meta.
func metaContext(t *testing.T, frame []byte) (trace.SpanContext, map[string]string) {
	t.Helper()
	var msg struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal(frame, &msg); err != nil {
		t.Fatalf("frame %s: %v", frame, err)
	}
	carrier := propagation.MapCarrier{}
	meta := map[string]string{}
	for k, raw := range msg.Params.Meta {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			carrier[k], meta[k] = s, s
		}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), carrier)
	return trace.SpanContextFromContext(ctx), meta
}

// sameSpan fails the test unless got names the span of want.
func sameSpan(t *testing.T, what string, got, want trace.SpanContext) {
	t.Helper()
	if !got.IsValid() || got.TraceID() != want.TraceID() || got.SpanID() != want.SpanID() {
		t.Errorf("%s: trace context %v/%v, want %v/%v", what, got.TraceID(), got.SpanID(), want.TraceID(), want.SpanID())
	}
}

func text(s string) *mcpclient.CallToolResult {
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(s)}}
}

func greet(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	return text("hello"), nil
}

// broken is a tool that fails: the server answers a result with isError set.
func broken(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	return nil, errors.New("the backend is down")
}

var (
	greetTool  = mcptest.WithTool(mcpclient.Tool{Name: "greet"}, greet)
	brokenTool = mcptest.WithTool(mcpclient.Tool{Name: "broken"}, broken)
)
