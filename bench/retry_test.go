package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/transport"
)

// BenchmarkRetry: our client's retry machinery on the happy path, the default RetryPolicy
// against RetryNever with one attempt, sequential 1 KiB echo calls, in memory (the minimal
// server, so the client dominates) and over HTTP with JSON answers.
func BenchmarkRetry(b *testing.B) {
	p := payloads()[0]
	policies := map[string]mcpclient.RetryPolicy{
		"default": mcpclient.DefaultRetryPolicy(),
		"never":   {Mode: mcpclient.RetryNever, MaxAttempts: 1},
	}
	for _, tr := range []string{"memory", "http-json"} {
		for _, pol := range []string{"default", "never"} {
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
				c, err := connectOurs(context.Background(), t, mcpclient.WithRetryPolicy(policies[pol]))
				if err != nil {
					b.Fatal(err)
				}
				defer c.close()
				measure(b, 1, c.prepare(p.tool, p.args), p.want)
			})
		}
	}
}
