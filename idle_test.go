package mcpclient_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// clientGoroutines counts the goroutines running code of the client or its transports, not of
// mcptest's server in the same process or of net/http's connection pool.
func clientGoroutines(t *testing.T) int {
	t.Helper()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 2); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range strings.Split(buf.String(), "\n\n") {
		if strings.Contains(g, "northstar-mcp/mcpclient.(*") || strings.Contains(g, "northstar-mcp/mcpclient/transport.(*httpConn)") {
			n++
		}
	}
	return n
}

// An idle session over Streamable HTTP keeps no goroutine: answers reach their callers on the
// goroutines that read them, and the dispatcher runs only while there is something to dispatch.
func TestHTTPIdleSessionKeepsNoGoroutine(t *testing.T) {
	bothResponseKinds(t, func(t *testing.T, opts ...mcptest.Option) {
		srv := mcptest.NewTestHTTPServer(t, append(opts, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, nil))...)
		c, _ := httpClient(t, srv)
		if _, err := c.CallTool(context.Background(), "echo", map[string]any{"x": 1}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "no client goroutine", func() bool { return clientGoroutines(t) == 0 })
	})
}

// A notification handler asks for the GET stream, and so for the goroutine that reads it; the
// dispatcher that runs the handler ends when it has run it.
func TestHTTPListeningSessionKeepsOnlyItsStreamReader(t *testing.T) {
	srv := mcptest.NewTestHTTPServer(t)
	got := make(chan struct{}, 16)
	c, _ := httpClient(t, srv, mcpclient.WithNotificationHandler("notifications/tools/list_changed",
		func(context.Context, string, json.RawMessage) { got <- struct{}{} }))
	_ = c
	for delivered := false; !delivered; {
		srv.Notify("notifications/tools/list_changed", nil)
		select {
		case <-got:
			delivered = true
		case <-time.After(10 * time.Millisecond):
		}
	}
	waitFor(t, "the GET stream's reader alone", func() bool { return clientGoroutines(t) == 1 })
}

// BenchmarkIdleSession measures what one connected, idle session holds on the heap after GC, per
// session, over b.N sessions open at once (-benchtime=100x, say). The servers hold as little as
// they can: a process of its own for Command, a scripted reader for the byte stream and the
// in-memory pipe, a handler for HTTP that keeps no session state.
func BenchmarkIdleSession(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	httpSrv := httptest.NewServer(idleHTTPServer())
	defer httpSrv.Close()
	transports := []struct {
		name string
		tr   transport.Transport
	}{
		{"stream", &transport.Stream{Open: func(context.Context) (io.ReadWriteCloser, error) {
			client, server := net.Pipe()
			go idleStreamServer(server)
			return client, nil
		}}},
		{"command", &transport.Command{Path: exe,
			Env: append(os.Environ(), stdioServerEnv+"=ok", stdioServerEnv+"_PIDS="+os.DevNull, "GORACE=atexit_sleep_ms=0")}},
		{"memory", &transport.Memory{Accept: func(server *transport.MemoryConn) error {
			go idleMemoryServer(server)
			return nil
		}}},
		{"http", &transport.HTTP{URL: httpSrv.URL}},
	}
	for _, tc := range transports {
		b.Run("transport="+tc.name, func(b *testing.B) {
			ctx := context.Background()
			connect := func() *mcpclient.Client {
				c, err := mcpclient.Connect(ctx, tc.tr, mcpclient.WithProtocolVersion(mcpclient.LatestStatefulProtocolVersion))
				if err != nil {
					b.Fatal(err)
				}
				return c
			}
			connect().Close() // warms what is shared: the HTTP pool's connection, sync.Pools
			clients := make([]*mcpclient.Client, 0, b.N)
			defer func() {
				for _, c := range clients {
					c.Close()
				}
			}()
			var before, after runtime.MemStats
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&before)
			goroutines := runtime.NumGoroutine()
			b.ResetTimer()
			for range b.N {
				clients = append(clients, connect())
			}
			b.StopTimer()
			time.Sleep(100 * time.Millisecond) // let what follows the handshake settle
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&after)
			n := float64(b.N)
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "heap-B/session")
			b.ReportMetric(float64(runtime.NumGoroutine()-goroutines)/n, "goroutines/session")
		})
	}
}

// idleServerAnswer answers one line of an idle session's handshake, or returns nil.
func idleServerAnswer(line []byte) []byte {
	var m testpeer.Msg
	if json.Unmarshal(line, &m) != nil || m.ID == nil {
		return nil
	}
	if m.Method == "initialize" {
		return []byte(testpeer.Result(m.ID, `{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"idle","version":"0"}}`) + "\n")
	}
	return []byte(testpeer.NoMethod(m.ID) + "\n")
}

func idleStreamServer(conn net.Conn) {
	defer conn.Close()
	br := bufio.NewReaderSize(conn, 16)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return
		}
		if a := idleServerAnswer(line); a != nil {
			if _, err := conn.Write(a); err != nil {
				return
			}
		}
	}
}

func idleMemoryServer(conn *transport.MemoryConn) {
	defer conn.Close()
	for {
		frame, err := conn.Receive(context.Background())
		if err != nil {
			return
		}
		if a := idleServerAnswer(frame); a != nil {
			if conn.Send(context.Background(), &transport.Message{Frame: bytes.TrimSuffix(a, []byte("\n"))}) != nil {
				return
			}
		}
	}
}

// idleHTTPServer answers the handshake of sessions it does not remember: a session id for
// initialize, 202 for notifications, 405 for the GET stream.
func idleHTTPServer() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		a := idleServerAnswer(body)
		if a == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", "idle")
		w.Write(a)
	})
}
