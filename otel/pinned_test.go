package mcpotel_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/journal"
	"github.com/northstar-mcp/mcpclient/mcptest"
	mcpotel "github.com/northstar-mcp/mcpclient/otel"
)

var never = mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{Mode: mcpclient.RetryNever})

// A call made again under the id it pinned, to re-read an outcome the first call could not
// learn, is a resend: the same bytes, the first call's trace context included, though it runs
// under another span. Other arguments under that id are still refused.
func TestPinnedIDCalledAgainIsAResend(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	srv := mcptest.NewTestHTTPServer(t, greetTool)
	c := mcptest.NewClient(t, srv, never)
	caller := mcpotel.Wrap(c, tel.opts...)
	id := mcpclient.StringID("6f1d2c4e-8a3b-4f5e-9c7d-0a1b2c3d4e5f") // persisted by the caller

	srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "greet"})
	first, firstSpan := tel.tp.Tracer("test").Start(testCtx(t), "first try")
	_, err := caller.CallTool(first, "greet", map[string]string{"who": "ada"}, mcpclient.WithRequestID(id))
	firstSpan.End()
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("first call: %v, want ErrOutcomeUnknown", err)
	}

	again, againSpan := tel.tp.Tracer("test").Start(testCtx(t), "re-read")
	res, err := caller.CallTool(again, "greet", map[string]string{"who": "ada"}, mcpclient.WithRequestID(id))
	againSpan.End()
	if err != nil || res.Text() != "hello" {
		t.Fatalf("call again under the pinned id: %v, %v", res, err)
	}
	frames := srv.Received(id)
	if len(frames) != 2 || !bytes.Equal(frames[0], frames[1]) {
		t.Fatalf("frames under %v:\n%s\nwant two identical", id, bytes.Join(frames, []byte("\n")))
	}
	if n := srv.Executions("greet"); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
	spans := tel.named("tools/call greet")
	if len(spans) != 2 {
		t.Fatalf("%d spans of the call, want 2", len(spans))
	}
	sc, _ := metaContext(t, frames[1])
	sameSpan(t, "the resend's _meta", sc, spans[0].SpanContext) // the first call's, as frozen
	for _, s := range spans {
		if got := requestID(t, s); got != id {
			t.Errorf("span %v names request %v, want %v", s.SpanContext.SpanID(), got, id)
		}
	}

	_, err = caller.CallTool(testCtx(t), "greet", map[string]string{"who": "bob"}, mcpclient.WithRequestID(id))
	if !errors.Is(err, mcpclient.ErrRequestIDReused) {
		t.Errorf("other arguments under the pinned id: %v, want ErrRequestIDReused", err)
	}
}

// After a restart, a call made again under the id it pinned finds the request in the journal,
// and sends its bytes, the trace context of the earlier process's span included.
func TestPinnedIDCalledAgainAfterARestart(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	srv := mcptest.NewTestHTTPServer(t, greetTool)
	path := filepath.Join(t.TempDir(), "journal.db")
	id := mcpclient.StringID("3e9a7b1c-2d4f-4a6b-8c0d-1e2f3a4b5c6d")
	args := map[string]string{"who": "ada"}

	// The earlier process: the reply is lost, and the process ends without learning it.
	srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "greet"})
	func() {
		j, err := journal.OpenFile(path)
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		c, err := mcpclient.Connect(testCtx(t), srv.Transport(), mcpclient.WithJournal(j), never)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Detach()
		ctx, span := tel.tp.Tracer("test").Start(testCtx(t), "before the restart")
		_, err = mcpotel.Wrap(c, tel.opts...).CallTool(ctx, "greet", args, mcpclient.WithRequestID(id))
		span.End()
		if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
			t.Fatalf("before the restart: %v, want ErrOutcomeUnknown", err)
		}
	}()

	j, err := journal.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	c, err := mcpclient.Connect(testCtx(t), srv.Transport(), mcpclient.WithJournal(j), never)
	if err != nil {
		t.Fatal(err)
	}
	caller := mcpotel.Wrap(c, tel.opts...)
	defer caller.Close()
	ctx, span := tel.tp.Tracer("test").Start(testCtx(t), "after the restart")
	res, err := caller.CallTool(ctx, "greet", args, mcpclient.WithRequestID(id))
	span.End()
	if err != nil || res.Text() != "hello" {
		t.Fatalf("after the restart: %v, %v", res, err)
	}
	frames := srv.Received(id)
	if len(frames) != 2 || !bytes.Equal(frames[0], frames[1]) {
		t.Fatalf("frames under %v:\n%s\nwant two identical", id, bytes.Join(frames, []byte("\n")))
	}
	if n := srv.Executions("greet"); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
}
