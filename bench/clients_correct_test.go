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
// (and go-sdk its standalone GET stream). Against the servers that serve 2026-07-28 (the
// stateless go-sdk server and the mcp-go server) every client must speak that revision, which
// has no session: no GET stream and no DELETE.
func TestClients(t *testing.T) {
	ctx := context.Background()
	server, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	for _, srv := range []echoServer{gosdkStateful, gosdkStateless, mcpgoServer} {
		for _, resp := range []string{"json", "sse"} {
			for _, name := range httpClients {
				t.Run(fmt.Sprintf("http-%s-%s/%s", srv.name, resp, name), func(t *testing.T) {
					cnt := &counter{}
					hc, closeIdle := pooledClient(func(rt http.RoundTripper) http.RoundTripper {
						cnt.next = hostRewriter{rt, server.Host}
						return cnt
					})
					defer closeIdle()
					c, err := connectServer(ctx, name, srv, srv.url(unreachableURL, resp), hc)
					if err != nil {
						t.Fatal(err)
					}
					closed := false
					defer func() {
						if !closed {
							c.close()
						}
					}()
					version := protocolVersion(c)
					if srv.modern && version != rawModernProtocol {
						t.Errorf("negotiated %s with the %s server, want %s", version, srv.name, rawModernProtocol)
					}
					for _, p := range payloads() {
						if n, err := c.prepare(p.tool, p.args)(ctx); err != nil || n != p.want {
							t.Errorf("%s: %d bytes, %v; want %d", p.name, n, err, p.want)
						}
					}
					c.close()
					closed = true
					wantDeletes, wantGet := int64(1), name == gosdk
					if version == rawModernProtocol {
						wantDeletes, wantGet = 0, false
					}
					if d := cnt.delete.Load(); d != wantDeletes {
						t.Errorf("%d DELETE requests through the given http.Client, want %d", d, wantDeletes)
					}
					if g := cnt.get.Load(); (g > 0) != wantGet {
						t.Errorf("%d GET requests through the given http.Client; want a GET stream: %v", g, wantGet)
					}
				})
			}
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
