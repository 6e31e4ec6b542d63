package mcptest

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/transport"
)

// NewTestServer returns a running server that logs to tb and is closed by tb's cleanup.
func NewTestServer(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	s := NewServer(append([]Option{WithLogger(TestLogger(tb))}, opts...)...)
	tb.Cleanup(func() { s.Close() })
	return s
}

// NewTestHTTPServer returns a started HTTP server that logs to tb and is closed by tb's cleanup.
func NewTestHTTPServer(tb testing.TB, opts ...Option) *HTTPServer {
	tb.Helper()
	h := NewHTTPServer(append([]Option{WithLogger(TestLogger(tb))}, opts...)...)
	tb.Cleanup(func() { h.Close() })
	return h
}

// A Dialer hands out transports to a server: a *Server (in memory) or an *HTTPServer.
type Dialer interface {
	Transport() transport.Transport
}

// NewClient connects a client to s, logging to tb, and closes it in tb's cleanup (before a
// server made by NewTestServer earlier is closed). A failed connect fails the test. The client
// retries under FastRetryPolicy, so that the faults a test injects cost it no real time; a
// WithRetryPolicy among opts replaces it.
func NewClient(tb testing.TB, s Dialer, opts ...mcpclient.Option) *mcpclient.Client {
	tb.Helper()
	opts = append([]mcpclient.Option{mcpclient.WithLogger(TestLogger(tb)), mcpclient.WithRetryPolicy(FastRetryPolicy())}, opts...)
	c, err := mcpclient.Connect(context.Background(), s.Transport(), opts...)
	if err != nil {
		tb.Fatalf("mcptest: connect: %v", err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// FastRetryPolicy is the client's default retry policy without its waits: attempts follow one
// another at once, and a server's delay hint (Retry-After) is capped at a millisecond. It is for
// tests, which should not sleep through backoff meant for real servers.
func FastRetryPolicy() mcpclient.RetryPolicy {
	return mcpclient.RetryPolicy{
		NewBackOff:     func() backoff.BackOff { return &backoff.ZeroBackOff{} },
		MaxServerDelay: time.Millisecond,
	}
}

// TestLogger returns a debug-level logger that writes through tb.Log, so that the records of a
// failing test are shown with it and the others are not.
func TestLogger(tb testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tbWriter{tb}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
