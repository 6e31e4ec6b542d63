package mcpotel_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	mcpotel "github.com/northstar-mcp/mcpclient/otel"
)

// connectTraced connects to d under a span of tel's named "connect", ended on return, so that
// the handshake's attempt events are recorded on it.
func connectTraced(t *testing.T, tel *telemetry, d mcptest.Dialer, opts ...mcpclient.Option) *mcpclient.Client {
	t.Helper()
	ctx, span := tel.tp.Tracer("test").Start(testCtx(t), "connect")
	defer span.End()
	c, err := mcpclient.Connect(ctx, d.Transport(), append([]mcpclient.Option{mcpclient.WithLogger(mcptest.TestLogger(t))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Against a server of the revisions with sessions, the client's server/discover is refused and
// the session opens with initialize: the refusal is an attempt event marked as an older server's
// answer, with no error, and nothing the wrapper measures has an error.type.
func TestOlderServerFallbackIsNoError(t *testing.T) {
	t.Parallel()
	older := mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20251125)
	for _, tc := range []struct {
		name   string
		server mcptest.Dialer
		status string // http.response.status_code of the refusal
	}{
		{"in-memory", mcptest.NewTestServer(t, older, greetTool), ""},
		{"Streamable HTTP", mcptest.NewTestHTTPServer(t, older, greetTool), "400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tel := newTelemetry(t)
			c := connectTraced(t, tel, tc.server, mcpotel.AttemptHook())
			caller := mcpotel.Wrap(c, tel.opts...)
			if _, err := caller.CallTool(testCtx(t), "greet", nil); err != nil {
				t.Fatal(err)
			}
			if err := caller.Close(); err != nil {
				t.Fatal(err)
			}

			events := attemptEvents(tel.span(t, "connect"))
			if len(events) != 2 {
				t.Fatalf("events %v, want server/discover and initialize", events)
			}
			wantAttrs(t, "server/discover", events[0], map[attribute.Key]string{
				"mcp.method.name":                "server/discover",
				"mcpclient.attempt.handshake":    "true",
				"mcpclient.attempt.outcome":      "answered",
				"mcpclient.attempt.older_server": "true",
				"mcpclient.attempt.error":        "",
				"http.response.status_code":      tc.status,
			})
			wantAttrs(t, "initialize", events[1], map[attribute.Key]string{
				"mcp.method.name":                "initialize",
				"mcpclient.attempt.older_server": "",
				"mcpclient.attempt.error":        "",
			})
			for _, name := range []string{"mcp.client.operation.duration", "mcp.client.session.duration"} {
				_, h := tel.histogram(t, name)
				if len(h.DataPoints) == 0 {
					t.Errorf("%s: no measurement", name)
				}
				for _, dp := range h.DataPoints {
					if v, ok := dp.Attributes.Value("error.type"); ok {
						t.Errorf("%s: error.type %q, want none", name, v.Emit())
					}
				}
			}
		})
	}
}

// A server/discover that fails for real stays a failed attempt, though the client then finds the
// server older and opens the session with initialize.
func TestServerDiscoverFailureIsAnError(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	srv := mcptest.NewTestServer(t)
	srv.Inject(mcptest.Fault{Kind: mcptest.Fail, Method: "server/discover"})
	connectTraced(t, tel, srv, mcpotel.AttemptHook(), mcpclient.WithRetryPolicy(mcptest.FastRetryPolicy()))
	events := attemptEvents(tel.span(t, "connect"))
	if len(events) != 3 {
		t.Fatalf("events %v, want a failed server/discover, a refused one and initialize", events)
	}
	if events[0]["mcp.method.name"] != "server/discover" || events[0]["mcpclient.attempt.error"] == "" ||
		events[0]["mcpclient.attempt.older_server"] != "" {
		t.Errorf("the failed server/discover: %v", events[0])
	}
	wantAttrs(t, "the refused server/discover", events[1], map[attribute.Key]string{
		"mcp.method.name": "server/discover", "mcpclient.attempt.older_server": "true", "mcpclient.attempt.error": ""})
}

// AttemptHook and a hook of the application's own both hear every attempt, in the order the
// options were given: the one given after AttemptHook finds the attempt on the span already.
func TestAttemptHooksAddUp(t *testing.T) {
	t.Parallel()
	for _, ownFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("own hook first %v", ownFirst), func(t *testing.T) {
			t.Parallel()
			tel := newTelemetry(t)
			srv := mcptest.NewTestServer(t, greetTool)
			var onSpan []int // per attempt, the attempt events the span held when the own hook ran
			own := mcpclient.WithAttemptHook(func(ctx context.Context, ev mcpclient.AttemptEvent) {
				span, ok := trace.SpanFromContext(ctx).(sdktrace.ReadOnlySpan)
				if !ok {
					t.Errorf("attempt %s outside a span of the SDK", ev.Method)
					return
				}
				n := 0
				for _, e := range span.Events() {
					if e.Name == mcpotel.AttemptEvent {
						n++
					}
				}
				onSpan = append(onSpan, n)
			})
			opts := []mcpclient.Option{mcpotel.AttemptHook(), own}
			if ownFirst {
				opts = []mcpclient.Option{own, mcpotel.AttemptHook()}
			}
			c := connectTraced(t, tel, srv, opts...)
			caller := mcpotel.Wrap(c, tel.opts...)
			if _, err := caller.CallTool(testCtx(t), "greet", nil); err != nil {
				t.Fatal(err)
			}
			// server/discover and initialize on the connect span, then the call's attempt on its own.
			want := []int{1, 2, 1}
			if ownFirst {
				want = []int{0, 1, 0}
			}
			if !slices.Equal(onSpan, want) {
				t.Errorf("attempt events on the span when the own hook ran: %v, want %v", onSpan, want)
			}
			if n := len(attemptEvents(tel.span(t, "tools/call greet"))); n != 1 {
				t.Errorf("%d attempt events on the call's span, want 1", n)
			}
		})
	}
}
