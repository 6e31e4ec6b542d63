package bench

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient/bench/echoserver"
)

// A payload is what one call moves: 1KiB is the echo tool with a 1 KiB argument (1 KiB each
// way); the larger ones are results of the blob tool, from a small request.
type payload struct {
	name string
	tool string
	args any
	want int
}

func payloads() []payload {
	p := []payload{{"1KiB", "echo", echoArgs{echoserver.Text(1 << 10)}, 1 << 10}}
	for _, s := range []struct {
		name string
		size int
	}{{"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"16MiB", 16 << 20}} {
		p = append(p, payload{s.name, "blob", blobArgs{s.size}, s.size})
	}
	return p
}

// callerCounts are the concurrency levels: 1 is sequential calls from the benchmark goroutine.
// GOMAXPROCS stays what the machine gives (2 on the reference machine).
var callerCounts = []int{1, 8, 64}

const connectTimeout = 30 * time.Second

// An echoServer is one of the servers cmd/echoserver serves, at its path below the base URL
// (then /json or /sse, by how it answers).
type echoServer struct {
	name string // as the benchmarks name it: server=NAME
	path string
	// modern: the server serves 2026-07-28, and every client speaks it there: mcp-go is left to
	// negotiate (it is pinned to 2025-11-25 otherwise) and raw sends 2026-07-28 requests.
	modern bool
}

var (
	// gosdkStateful is the go-sdk server with sessions, which all the other HTTP benchmarks use.
	gosdkStateful = echoServer{"gosdk", "", false}
	// gosdkStateless is the go-sdk server with StreamableHTTPOptions.Stateless.
	gosdkStateless = echoServer{"gosdk-stateless", "/stateless", true}
	// mcpgoServer is the mcp-go server with its Streamable HTTP defaults.
	mcpgoServer = echoServer{"mcpgo", "/mcpgo", true}
)

// url is where srv answers with resp (json or sse) below base.
func (srv echoServer) url(base, resp string) string { return base + srv.path + "/" + resp }

// connectHTTP connects client name to the stateful go-sdk server at url.
func connectHTTP(ctx context.Context, name, url string, hc *http.Client) (client, error) {
	return connectServer(ctx, name, gosdkStateful, url, hc)
}

// connectServer connects client name to srv at url.
func connectServer(ctx context.Context, name string, srv echoServer, url string, hc *http.Client) (client, error) {
	switch name {
	case ours:
		return connectOurs(ctx, oursHTTP(url, hc))
	case gosdk:
		return connectGoSDK(ctx, gosdkHTTP(url, hc))
	case mcpgo:
		return connectMCPGoHTTP(ctx, url, hc, !srv.modern)
	case raw:
		if srv.modern {
			return connectRawModern(ctx, url, hc)
		}
		return connectRawHTTP(ctx, url, hc)
	}
	return nil, fmt.Errorf("no client %q", name)
}

// BenchmarkCallHTTP: tools/call over Streamable HTTP to the echo server in its child process,
// so cpu-ns/op is the client's alone. Every client has an HTTP pool of its own, built alike (see
// pooledClient). The 1KiB echo runs at 1, 8 and 64 callers; larger results sequentially.
func BenchmarkCallHTTP(b *testing.B) {
	for _, resp := range []string{"json", "sse"} {
		for _, p := range payloads() {
			counts := callerCounts
			if p.want > 1<<10 {
				counts = []int{1}
			}
			for _, callers := range counts {
				for _, name := range httpClients {
					b.Run(fmt.Sprintf("resp=%s/size=%s/callers=%d/client=%s", resp, p.name, callers, name), func(b *testing.B) {
						hc, closeIdle := pooledClient(nil)
						defer closeIdle()
						ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
						defer cancel()
						c, err := connectHTTP(ctx, name, serverURL+"/"+resp, hc)
						if err != nil {
							b.Fatal(err)
						}
						defer c.close()
						measure(b, callers, c.prepare(p.tool, p.args), p.want)
					})
				}
			}
		}
	}
}

// BenchmarkCallServer: the 1 KiB echo over Streamable HTTP, as BenchmarkCallHTTP's, to the
// servers that serve 2026-07-28, where every client speaks that revision: the go-sdk server in
// stateless mode (server=gosdk-stateless) and the mcp-go server (server=mcpgo). No session:
// every request carries the revision and the client's identity and capabilities in _meta, and
// its method and tool name in headers. At 1 and 64 callers.
func BenchmarkCallServer(b *testing.B) {
	p := payloads()[0]
	for _, srv := range []echoServer{gosdkStateless, mcpgoServer} {
		for _, resp := range []string{"json", "sse"} {
			for _, callers := range []int{1, 64} {
				for _, name := range httpClients {
					b.Run(fmt.Sprintf("server=%s/resp=%s/size=%s/callers=%d/client=%s", srv.name, resp, p.name, callers, name), func(b *testing.B) {
						hc, closeIdle := pooledClient(nil)
						defer closeIdle()
						ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
						defer cancel()
						c, err := connectServer(ctx, name, srv, srv.url(serverURL, resp), hc)
						if err != nil {
							b.Fatal(err)
						}
						defer c.close()
						measure(b, callers, c.prepare(p.tool, p.args), p.want)
					})
				}
			}
		}
	}
}

// BenchmarkCallMemory: tools/call in one process, server included.
//
// setup=pipe puts the same go-sdk echo server behind every client, over net.Pipe with
// newline-delimited JSON (go-sdk's NewInMemoryTransports; ours through transport.Stream; mcp-go
// through its NewIO transport; raw by hand): client=raw is the server's and the pipe's cost, so
// a client's own cost is its figure less raw's.
//
// setup=native is each SDK's own in-memory path and server (see connectNative).
func BenchmarkCallMemory(b *testing.B) {
	p := payloads()[0]
	for _, setup := range []string{"pipe", "native"} {
		clients := httpClients
		if setup == "native" {
			clients = []string{ours, gosdk, mcpgo}
		}
		for _, callers := range callerCounts {
			for _, name := range clients {
				b.Run(fmt.Sprintf("setup=%s/size=%s/callers=%d/client=%s", setup, p.name, callers, name), func(b *testing.B) {
					ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
					defer cancel()
					connect := connectPipe
					if setup == "native" {
						connect = connectNative
					}
					c, err := connect(ctx, name)
					if err != nil {
						b.Fatal(err)
					}
					defer c.close()
					measure(b, callers, c.prepare(p.tool, p.args), p.want)
				})
			}
		}
	}
}
