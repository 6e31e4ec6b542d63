package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/transport"
)

// BenchmarkRetry: our client's retry machinery on the happy path, the default RetryPolicy
// against RetryNever with one attempt, sequential 1 KiB echo calls, in memory (the minimal
// server, so the client dominates) and over HTTP with JSON answers. policy=plugin is the
// default policy with a plugin installed: an interceptor that adds a header and an attempt hook
// that counts, the cost of observing every attempt.
func BenchmarkRetry(b *testing.B) {
	p := payloads()[0]
	policies := map[string]mcpclient.RetryPolicy{
		"default": mcpclient.DefaultRetryPolicy(),
		"never":   {Mode: mcpclient.RetryNever, MaxAttempts: 1},
		"plugin":  mcpclient.DefaultRetryPolicy(),
	}
	var attempts atomic.Int64
	plugin := []mcpclient.Option{
		mcpclient.WithInterceptors(func(next mcpclient.Handler) mcpclient.Handler {
			return func(ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
				x.Header.Set("Authorization", "Bearer t")
				return next(ctx, x)
			}
		}),
		mcpclient.WithAttemptHook(func(context.Context, mcpclient.AttemptEvent) { attempts.Add(1) }),
	}
	for _, tr := range []string{"memory", "http-json"} {
		for _, pol := range []string{"default", "never", "plugin"} {
			b.Run(fmt.Sprintf("transport=%s/policy=%s", tr, pol), func(b *testing.B) {
				var t transport.Transport = &transport.Memory{Accept: func(s *transport.MemoryConn) error {
					go minimalServer(s)
					return nil
				}}
				if tr == "http-json" {
					hc, closeIdle := pooledClient(nil)
					defer closeIdle()
					t = oursHTTP(serverURL+"/json", hc)
				}
				opts := []mcpclient.Option{mcpclient.WithRetryPolicy(policies[pol])}
				if pol == "plugin" {
					opts = append(opts, plugin...)
				}
				c, err := connectOurs(context.Background(), t, opts...)
				if err != nil {
					b.Fatal(err)
				}
				defer c.close()
				measure(b, 1, c.prepare(p.tool, p.args), p.want)
			})
		}
	}
}
