package mcpotel

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// An Option configures Wrap and Inject.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
	propagator     propagation.TextMapPropagator
	attrs          []attribute.KeyValue
	uriTarget      bool
	sessionID      bool
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if c.tracerProvider == nil {
		c.tracerProvider = otel.GetTracerProvider()
	}
	if c.meterProvider == nil {
		c.meterProvider = otel.GetMeterProvider()
	}
	if c.propagator == nil {
		c.propagator = otel.GetTextMapPropagator()
	}
	return c
}

// WithTracerProvider sets where the spans go; the global TracerProvider by default.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tracerProvider = tp })
}

// WithMeterProvider sets where the measurements go; the global MeterProvider by default.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.meterProvider = mp })
}

// WithPropagator sets how the trace context is written into params._meta; the global
// TextMapPropagator by default. The global one propagates nothing until the application sets
// one (otel.SetTextMapPropagator), as with every OpenTelemetry instrumentation; pass
// propagation.TraceContext{} (with propagation.Baggage{} in a composite, for baggage) to
// propagate regardless.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return optionFunc(func(c *config) { c.propagator = p })
}

// WithAttributes adds attributes to every span and every measurement: what the wrapper cannot
// see through a Caller, such as the transport's network.transport ("tcp" for HTTP, "pipe" for
// stdio), network.protocol.name, server.address and server.port. They are recorded on the
// metrics too, so they must have few distinct values.
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return optionFunc(func(c *config) { c.attrs = append(c.attrs, attrs...) })
}

// WithResourceURITarget names the spans of resources/read, resources/subscribe and
// resources/unsubscribe after the resource URI ("resources/read file:///notes.txt"). The
// semantic conventions leave it out by default, since URIs make span names of high cardinality;
// the URI is always recorded as mcp.resource.uri.
func WithResourceURITarget() Option {
	return optionFunc(func(c *config) { c.uriTarget = true })
}

// WithSessionID records the session id as mcp.session.id on spans and attempt events, as the
// semantic conventions recommend. It is off by default: a Streamable HTTP session id lets whoever
// holds it send in the session, and spans go to collectors and backends the client does not
// control. Turn it on where traces are as private as the session.
func WithSessionID() Option {
	return optionFunc(func(c *config) { c.sessionID = true })
}
