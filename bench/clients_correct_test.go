package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
)

// TestClients checks that every client gets every payload right, 16 MiB included, over every
// setup the benchmarks use. Over HTTP it also checks that every request a client sends goes
// through the http.Client it was given, as the comparison of pools alike needs: the clients get
// a URL that only that http.Client can reach, and must send their DELETE at Close through it
// (and go-sdk its standalone GET stream).
func TestClients(t *testing.T) {
	ctx := context.Background()
	server, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	for _, resp := range []string{"json", "sse"} {
		for _, name := range httpClients {
			t.Run(fmt.Sprintf("http-%s/%s", resp, name), func(t *testing.T) {
				cnt := &counter{}
				hc, closeIdle := pooledClient(func(rt http.RoundTripper) http.RoundTripper {
					cnt.next = hostRewriter{rt, server.Host}
					return cnt
				})
				defer closeIdle()
				c, err := connectHTTP(ctx, name, unreachableURL+"/"+resp, hc)
				if err != nil {
					t.Fatal(err)
				}
				closed := false
				defer func() {
					if !closed {
						c.close()
					}
				}()
				for _, p := range payloads() {
					if n, err := c.prepare(p.tool, p.args)(ctx); err != nil || n != p.want {
						t.Errorf("%s: %d bytes, %v; want %d", p.name, n, err, p.want)
					}
				}
				c.close()
				closed = true
				if d := cnt.delete.Load(); d != 1 {
					t.Errorf("%d DELETE requests through the given http.Client, want 1", d)
				}
				if g := cnt.get.Load(); name == gosdk && g == 0 {
					t.Error("go-sdk's standalone GET stream did not go through the given http.Client")
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

// unreachableURL names a host that never resolves (RFC 2606 reserves .invalid): a request sent
// to it by any other way than hostRewriter fails.
const unreachableURL = "http://mcp.invalid"

// hostRewriter sends every request to host (the echo server), whatever host its URL names.
type hostRewriter struct {
	next http.RoundTripper
	host string
}

func (h hostRewriter) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Host, r.Host = h.host, ""
	return h.next.RoundTrip(r)
}
