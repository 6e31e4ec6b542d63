package mcpotel

import (
	"context"

	"go.opentelemetry.io/otel/propagation"

	"github.com/northstar-mcp/mcpclient"
)

// Inject returns the call options that write ctx's trace context into a request's params._meta
// (traceparent, tracestate, baggage: whatever the propagator of opts writes, the global one by
// default), for a request frozen with NewRequest and sent with Do, which the wrapper cannot add
// to:
//
//	req, err := c.NewRequest("tools/call", params, mcpotel.Inject(ctx)...)
//
// The server's span is then a child of the span in ctx, beside the span Wrap makes for Do.
func Inject(ctx context.Context, opts ...Option) []mcpclient.CallOption {
	return inject(ctx, newConfig(opts).propagator, nil)
}

// inject appends to dst the call options that write the trace context p writes for ctx.
func inject(ctx context.Context, p propagation.TextMapPropagator, dst []mcpclient.CallOption) []mcpclient.CallOption {
	return withMeta(carried(ctx, p), dst)
}
