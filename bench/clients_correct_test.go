package bench

import (
	"context"
	"fmt"
	"testing"
)

// TestClients checks that every client gets every payload right, 16 MiB included, over every
// setup the benchmarks use.
func TestClients(t *testing.T) {
	ctx := context.Background()
	for _, resp := range []string{"json", "sse"} {
		for _, name := range httpClients {
			t.Run(fmt.Sprintf("http-%s/%s", resp, name), func(t *testing.T) {
				hc, closeIdle := pooledClient(nil)
				defer closeIdle()
				c, err := connectHTTP(ctx, name, serverURL+"/"+resp, hc)
				if err != nil {
					t.Fatal(err)
				}
				defer c.close()
				for _, p := range payloads() {
					if n, err := c.prepare(p.tool, p.args)(ctx); err != nil || n != p.want {
						t.Errorf("%s: %d bytes, %v; want %d", p.name, n, err, p.want)
					}
				}
			})
		}
	}
	for _, setup := range []string{"pipe", "native"} {
		for _, name := range httpClients {
			if setup == "native" && name == raw {
				continue
			}
			t.Run(fmt.Sprintf("memory-%s/%s", setup, name), func(t *testing.T) {
				connect := connectPipe
				if setup == "native" {
					connect = connectNative
				}
				c, err := connect(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				defer c.close()
				for _, p := range payloads()[:2] {
					if n, err := c.prepare(p.tool, p.args)(ctx); err != nil || n != p.want {
						t.Errorf("%s: %d bytes, %v; want %d", p.name, n, err, p.want)
					}
				}
			})
		}
	}
}
