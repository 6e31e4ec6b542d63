package mcpotel_test

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/northstar-mcp/mcpclient/mcptest"
	mcpotel "github.com/northstar-mcp/mcpclient/otel"
)

// A Streamable HTTP session id is a bearer of the session: whoever holds it can send in it. Spans
// travel to collectors and backends the client does not control, so they carry it only when the
// application asks.
func TestSessionIDIsNotRecordedByDefault(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	srv := mcptest.NewTestHTTPServer(t, greetTool)
	c := mcptest.NewClient(t, srv, mcpotel.AttemptHook())
	caller := mcpotel.Wrap(c, tel.opts...)
	if _, err := caller.CallTool(testCtx(t), "greet", nil); err != nil {
		t.Fatal(err)
	}
	if c.SessionID() == "" {
		t.Fatal("the HTTP server named no session")
	}
	s := tel.span(t, "tools/call greet")
	if v, ok := attrs(s.Attributes)["mcp.session.id"]; ok {
		t.Errorf("span: mcp.session.id = %q, want none", v)
	}
	events := attemptEvents(s)
	if len(events) == 0 {
		t.Fatal("no attempt events")
	}
	for _, ev := range events {
		if v, ok := ev["mcp.session.id"]; ok {
			t.Errorf("attempt event: mcp.session.id = %q, want none", v)
		}
	}
}

func TestWithSessionIDRecordsIt(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t, mcpotel.WithSessionID())
	srv := mcptest.NewTestHTTPServer(t, greetTool)
	c := mcptest.NewClient(t, srv, mcpotel.AttemptHook())
	caller := mcpotel.Wrap(c, tel.opts...)
	if _, err := caller.CallTool(testCtx(t), "greet", nil); err != nil {
		t.Fatal(err)
	}
	s := tel.span(t, "tools/call greet")
	wantAttrs(t, "span", attrs(s.Attributes), map[attribute.Key]string{"mcp.session.id": c.SessionID()})
	for _, ev := range attemptEvents(s) {
		wantAttrs(t, "attempt", ev, map[attribute.Key]string{"mcp.session.id": c.SessionID()})
	}
}
