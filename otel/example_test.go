package mcpotel_test

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	mcpotel "github.com/northstar-mcp/mcpclient/otel"
)

// A tool call whose reply is lost after the tool ran: one span, whose two attempt events show
// the loss and the resend that read the server's receipt.
func ExampleWrap() {
	srv := mcptest.NewServer(mcptest.WithTool(mcpclient.Tool{Name: "greet"}, greet),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "greet"}))
	defer srv.Close()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())

	c, err := mcpclient.Connect(context.Background(), srv.Transport(), mcpotel.AttemptHook(),
		mcpclient.WithRetryPolicy(mcptest.FastRetryPolicy()))
	if err != nil {
		fmt.Println(err)
		return
	}
	caller := mcpotel.Wrap(c, mcpotel.WithTracerProvider(tp), mcpotel.WithPropagator(propagation.TraceContext{}))
	defer caller.Close()

	if _, err := caller.CallTool(context.Background(), "greet", nil); err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range spans.GetSpans() {
		fmt.Println(s.Name, s.SpanKind)
		for _, ev := range s.Events {
			a := attrs(ev.Attributes)
			fmt.Println(" ", ev.Name, a[mcpotel.AttemptNumberKey], a[mcpotel.AttemptOutcomeKey])
		}
	}
	// Output:
	// tools/call greet client
	//   mcpclient.attempt 1 uncertain
	//   mcpclient.attempt 2 answered
}
