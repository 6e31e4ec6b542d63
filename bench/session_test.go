package bench

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
)

// BenchmarkSessionStart: the time and requests until the first tools/call can be sent (Connect,
// or Start and Initialize), per new session. Sessions share one pooled HTTP client, so the TCP
// connection is reused and the figure is the session's. reqs/op counts the requests issued while
// connecting; reqs-total/op also those issued after it returned and at Close (a GET stream, a
// DELETE). Close is outside the timed part and outside cpu-ns/op.
//
// http-json-2025-11-25 is http-json with ours pinned to 2025-11-25, the revision the peers and
// the server speak: the same two requests for every client, without the server/discover probe
// by which ours, preferring 2026-07-28, learns that the server is older.
func BenchmarkSessionStart(b *testing.B) {
	for _, tr := range []string{"http-json", "http-json-2025-11-25", "http-sse", "memory-pipe"} {
		for _, name := range httpClients {
			b.Run(fmt.Sprintf("transport=%s/client=%s", tr, name), func(b *testing.B) {
				cnt := &counter{}
				hc, closeIdle := pooledClient(func(rt http.RoundTripper) http.RoundTripper { cnt.next = rt; return cnt })
				defer closeIdle()
				connect := func(ctx context.Context) (client, error) {
					switch tr {
					case "http-json":
						return connectHTTP(ctx, name, serverURL+"/json", hc)
					case "http-json-2025-11-25":
						if name == ours {
							return connectOurs(ctx, oursHTTP(serverURL+"/json", hc), mcpclient.WithProtocolVersion("2025-11-25"))
						}
						return connectHTTP(ctx, name, serverURL+"/json", hc)
					case "http-sse":
						return connectHTTP(ctx, name, serverURL+"/sse", hc)
					}
					return connectPipe(ctx, name)
				}
				// One session first, to open the pool's connection.
				ctx := context.Background()
				c, err := connect(ctx)
				if err != nil {
					b.Fatal(err)
				}
				c.close()
				runtime.GC()
				cnt0 := cnt.total()
				var cpu time.Duration
				var reqs int64
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					before := cnt.total()
					c0 := cpuTime()
					c, err := connect(ctx)
					cpu += cpuTime() - c0
					reqs += cnt.total() - before
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					c.close()
					b.StartTimer()
				}
				b.StopTimer()
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
				if tr != "memory-pipe" {
					b.ReportMetric(float64(reqs)/float64(b.N), "reqs/op")
					b.ReportMetric(float64(cnt.total()-cnt0)/float64(b.N), "reqs-total/op")
				}
			})
		}
	}
}

// BenchmarkIdleSession: what one connected, idle session holds: heap after GC, goroutines, and
// the requests it made once settled (a standalone GET stream included), per session, over b.N
// sessions open at once (run.sh uses -benchtime=20x). The sessions of one client share an HTTP
// pool, so idle keep-alive connections are not charged to each session; a held stream is. Over
// the pipe the go-sdk server runs in this process: its share of each session is in every
// client's figure (raw's, whose reader keeps a 64 KiB buffer, is no floor there).
func BenchmarkIdleSession(b *testing.B) {
	for _, resp := range []string{"json", "sse"} {
		for _, name := range httpClients {
			b.Run(fmt.Sprintf("resp=%s/client=%s", resp, name), func(b *testing.B) {
				cnt := &counter{}
				hc, closeIdle := pooledClient(func(rt http.RoundTripper) http.RoundTripper { cnt.next = rt; return cnt })
				defer closeIdle()
				ctx := context.Background()
				url := serverURL + "/" + resp
				warm, err := connectHTTP(ctx, name, url, hc) // opens the pool's connection
				if err != nil {
					b.Fatal(err)
				}
				warm.close()
				time.Sleep(200 * time.Millisecond) // let the closed session's goroutines end
				var m0, m1 runtime.MemStats
				runtime.GC()
				runtime.GC()
				runtime.ReadMemStats(&m0)
				g0, cnt0, gets0 := runtime.NumGoroutine(), cnt.total(), cnt.get.Load()
				sessions := make([]client, 0, b.N)
				defer func() {
					for _, c := range sessions {
						c.close()
					}
				}()
				b.ResetTimer()
				for range b.N {
					c, err := connectHTTP(ctx, name, url, hc)
					if err != nil {
						b.Fatal(err)
					}
					sessions = append(sessions, c)
				}
				b.StopTimer()
				time.Sleep(300 * time.Millisecond) // let background requests and goroutines start
				runtime.GC()
				runtime.GC()
				runtime.ReadMemStats(&m1)
				n := float64(b.N)
				b.ReportMetric((float64(m1.HeapAlloc)-float64(m0.HeapAlloc))/n, "heap-B/session")
				b.ReportMetric(float64(runtime.NumGoroutine()-g0)/n, "goroutines/session")
				b.ReportMetric(float64(cnt.total()-cnt0)/n, "reqs/session")
				b.ReportMetric(float64(cnt.get.Load()-gets0)/n, "gets/session")
			})
		}
	}
	for _, name := range httpClients {
		b.Run("transport=pipe/client="+name, func(b *testing.B) {
			ctx := context.Background()
			warm, err := connectPipe(ctx, name) // starts the server, fills what is pooled
			if err != nil {
				b.Fatal(err)
			}
			warm.close()
			time.Sleep(200 * time.Millisecond)
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&m0)
			g0 := runtime.NumGoroutine()
			sessions := make([]client, 0, b.N)
			defer func() {
				for _, c := range sessions {
					c.close()
				}
			}()
			b.ResetTimer()
			for range b.N {
				c, err := connectPipe(ctx, name)
				if err != nil {
					b.Fatal(err)
				}
				sessions = append(sessions, c)
			}
			b.StopTimer()
			time.Sleep(300 * time.Millisecond)
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&m1)
			n := float64(b.N)
			b.ReportMetric((float64(m1.HeapAlloc)-float64(m0.HeapAlloc))/n, "heap-B/session")
			b.ReportMetric(float64(runtime.NumGoroutine()-g0)/n, "goroutines/session")
		})
	}
}
