package mcpclient_test

// What a server sends is bounded: an oversized message, event or set of headers ends the call it
// answers with a typed error and is not fetched again, a declared length is not trusted, and a
// small answer costs memory for its size only. After each, the client goes on.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

func TestHostileOversizedMessage(t *testing.T) {
	t.Parallel()
	big := `{"content":[{"type":"text","text":"` + strings.Repeat("x", 4096) + `"}]}`

	t.Run("http-json", func(t *testing.T) {
		first := testpeer.Once()
		srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
			if r.Method == "tools/call" && first() {
				r.JSON(testpeer.Result(r.ID, big))
				return true
			}
			return false
		})
		c := connect(t, &transport.HTTP{URL: srv.URL, MaxMessageSize: 1024})
		_, err := c.CallTool(testCtx(t), "reserve", nil)
		if !errors.Is(err, transport.ErrMessageTooLarge) || !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
			t.Fatalf("error %v, want ErrOutcomeUnknown with ErrMessageTooLarge", err)
		}
		if e := asError(t, err); e.Attempts != 1 || srv.Count("tools/call") != 1 {
			t.Errorf("%d attempts, %d POSTs: an oversized answer must not be fetched again", e.Attempts, srv.Count("tools/call"))
		}
		stillUsable(t, c)
	})

	// A stream transport reads the oversized line to its end without keeping it, and ends the
	// request it answered at once. oversizedOnStream sends the first tools/call's answer as
	// frame(id), over a 1 KiB limit, and checks that the call ends before its deadline (in the
	// bubble, a call left waiting would reach it at once) and that the client goes on, having
	// opened opens connections in all.
	oversizedOnStream := func(t *testing.T, frame func(id json.RawMessage) string, opens int) {
		synctest.Test(t, func(t *testing.T) {
			first := testpeer.Once()
			srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
				if m.Method == "tools/call" && first() {
					p.Send(frame(m.ID))
					return true
				}
				return false
			}, testpeer.Lines(1024))
			c := connect(t, srv.Transport())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := c.CallTool(ctx, "reserve", nil)
			if !errors.Is(err, transport.ErrMessageTooLarge) || !errors.Is(err, mcpclient.ErrOutcomeUnknown) || ctx.Err() != nil {
				t.Fatalf("error %v, want ErrOutcomeUnknown with ErrMessageTooLarge before the deadline", err)
			}
			stillUsable(t, c)
			if n := srv.Opened(); n != opens {
				t.Errorf("%d connections opened, want %d", n, opens)
			}
		})
	}
	// The connection goes on after an oversized answer.
	t.Run("stream", func(t *testing.T) {
		oversizedOnStream(t, func(id json.RawMessage) string { return testpeer.Result(id, big) }, 1)
	})

	// An oversized line that names no request ends the connection, and with it the calls
	// awaiting answers; the client opens a new one for the next call.
	t.Run("stream, no id", func(t *testing.T) {
		oversizedOnStream(t, func(json.RawMessage) string { return `{"jsonrpc":"2.0","result":` + big + "}" }, 2)
	})

	// The id an oversized answer names is matched as the client spells it.
	t.Run("stream, id spelled otherwise", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
				if m.Method == "tools/call" {
					// The same id without escapes: "a<b&c" for "a\u003cb\u0026c".
					var id string
					json.Unmarshal(m.ID, &id)
					p.Send(testpeer.Result(json.RawMessage(`"`+id+`"`), big))
					return true
				}
				return false
			}, testpeer.Lines(1024))
			c := connect(t, srv.Transport())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := c.CallTool(ctx, "reserve", nil, mcpclient.WithRequestID(mcpclient.StringID("a<b&c")))
			if !errors.Is(err, transport.ErrMessageTooLarge) || !errors.Is(err, mcpclient.ErrOutcomeUnknown) || ctx.Err() != nil {
				t.Fatalf("error %v, want ErrOutcomeUnknown with ErrMessageTooLarge before the deadline", err)
			}
			if err := c.Ping(ctx); err != nil {
				t.Fatalf("ping after the episode: %v", err)
			}
		})
	})
}

func TestHostileOversizedSSEEvent(t *testing.T) {
	t.Parallel()
	first := testpeer.Once()
	var resumes atomic.Int32
	srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		if r.HTTPMethod == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
			resumes.Add(1)
		}
		if r.Method != "tools/call" || !first() {
			return false
		}
		event := r.SSE()
		event("e1", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"`+strings.Repeat("x", 4096)+`"}}`)
		event("e2", testpeer.Result(r.ID, testpeer.ToolResult))
		return true
	})
	c := connect(t, &transport.HTTP{URL: srv.URL, MaxMessageSize: 1024})
	_, err := c.CallTool(testCtx(t), "reserve", nil)
	if !errors.Is(err, transport.ErrMessageTooLarge) || !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("error %v, want ErrOutcomeUnknown with ErrMessageTooLarge", err)
	}
	if srv.Count("tools/call") != 1 || resumes.Load() != 0 {
		t.Errorf("%d POSTs, %d resumptions: the oversized event must not be fetched again", srv.Count("tools/call"), resumes.Load())
	}
	stillUsable(t, c)
}

func TestHostileHugeHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		client *http.Client // nil: the transport's default client
		size   int          // bytes of response headers
	}{
		// The shared client reads 1 MiB of headers (net/http's default is 10 MiB).
		{"default client", nil, 2 << 20},
		{"client with a limit", &http.Client{Transport: &http.Transport{MaxResponseHeaderBytes: 64 << 10}}, 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testpeer.NewHTTP(t, firstToolCall(func(r *testpeer.Request) {
				chunk := strings.Repeat("h", 8<<10)
				for i := range tt.size / len(chunk) {
					r.W.Header().Set(fmt.Sprintf("X-Junk-%d", i), chunk)
				}
				r.JSON(testpeer.Result(r.ID, testpeer.ToolResult))
			}))
			if tt.client != nil {
				defer tt.client.CloseIdleConnections()
			}
			c := connect(t, &transport.HTTP{URL: srv.URL, Client: tt.client})
			_, err := c.CallTool(testCtx(t), "reserve", nil)
			// The request was written; its answer could not be read: the outcome is unknown.
			if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "response headers exceeded") {
				t.Fatalf("error %v, want ErrOutcomeUnknown for headers over the limit", err)
			}
			if e := asError(t, err); e.Attempts != 1 || srv.Count("tools/call") != 1 {
				t.Errorf("%d attempts, %d POSTs, want 1", e.Attempts, srv.Count("tools/call"))
			}
			stillUsable(t, c)
		})
	}
}

// A server announcing a body near the limit and sending a few bytes of it costs the client
// memory for those bytes, not for the announcement.
func TestHostileDeclaredLengthIsNotTrusted(t *testing.T) {
	first := testpeer.Once()
	srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		if r.Method == "tools/call" && first() {
			r.W.Header().Set("Content-Type", "application/json")
			r.W.Header().Set("Content-Length", strconv.Itoa(transport.DefaultMaxMessageSize))
			io.WriteString(r.W, testpeer.Result(r.ID, testpeer.ToolResult)[:20])
			return true // net/http cuts the connection: the body is short of its length
		}
		return false
	})
	c := connect(t, &transport.HTTP{URL: srv.URL})
	var err error
	n := bytesAllocated(func() { _, err = c.CallTool(testCtx(t), "reserve", nil) })
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("error %v, want ErrOutcomeUnknown for an answer cut short", err)
	}
	if n > 4<<20 {
		t.Errorf("a call whose answer announced %d MiB and sent 20 bytes allocated %.1f MiB", transport.DefaultMaxMessageSize>>20, float64(n)/(1<<20))
	}
	stillUsable(t, c)
}

// With the default limit of 64 MiB, what a small answer costs follows its size on every
// transport: no buffer is sized by the limit.
func TestSmallAnswersCostNoLimitSizedBuffers(t *testing.T) {
	const calls, perCall = 20, 1 << 20
	check := func(t *testing.T, c *mcpclient.Client) {
		t.Helper()
		c.CallTool(testCtx(t), "reserve", nil) // the first call may set up what later ones reuse
		n := bytesAllocated(func() {
			for range calls {
				if _, err := c.CallTool(testCtx(t), "reserve", nil); err != nil {
					t.Fatal(err)
				}
			}
		})
		if n/calls > perCall {
			t.Errorf("a call with a small answer allocated %.1f MiB", float64(n/calls)/(1<<20))
		}
	}
	tool := mcptest.WithTool(unsafeTool, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("ok")}}, nil
	})
	bothResponseKinds(t, func(t *testing.T, opts ...mcptest.Option) {
		srv := mcptest.NewTestHTTPServer(t, append(opts, tool)...)
		check(t, connect(t, &transport.HTTP{URL: srv.URL}))
	})
	t.Run("legacy", func(t *testing.T) {
		srv := mcptest.NewTestHTTPServer(t, tool)
		check(t, connect(t, srv.SSETransport()))
	})
	t.Run("stream", func(t *testing.T) {
		check(t, connect(t, testpeer.NewPipe(t, nil, testpeer.Lines(0)).Transport()))
	})
}

// bytesAllocated returns how many bytes of heap f allocated (the process's, so tests that
// measure it must not run in parallel).
func bytesAllocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestHTTPOversizedAnswerIsTypedAndNotRefetched(t *testing.T) {
	t.Parallel()
	bothResponseKinds(t, func(t *testing.T, opts ...mcptest.Option) {
		big := strings.Repeat("x", 2048)
		srv := mcptest.NewTestHTTPServer(t, append(opts, mcptest.WithTool(unsafeTool,
			func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
				return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(big)}}, nil
			}))...)
		tr := &transport.HTTP{URL: srv.URL, MaxMessageSize: 1024}
		c, err := mcpclient.Connect(context.Background(), tr, noWait)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req := callReq(t, c, "reserve", nil)
		_, err = c.Do(context.Background(), req)
		if !errors.Is(err, transport.ErrMessageTooLarge) || !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
			t.Fatalf("error %v, want an unknown outcome for the oversized answer", err)
		}
		if n := len(srv.Received(req.ID())); n != 1 {
			t.Errorf("the request was sent %d times", n)
		}
	})
}
