package mcpclient_test

// Hostile servers. Each test lets a server misbehave in one way, checks that
// the client fails the affected call with an *mcpclient.Error of a sensible Code (or, where the
// misbehaviour is survivable, returns the right answer), and then checks that a normal call on the
// same Client succeeds.
//
// Related tests elsewhere, whose cases are not repeated here (the tests below add what they
// lack: the follow-up call, other transports):
//   - TestHTTPOversizedAnswerIsTypedAndNotRefetched (http_test.go): an oversized JSON body or SSE
//     event leaves the outcome unknown and is not fetched again (here: the same, plus the follow-up call, plus
//     stdio-style streams).
//   - TestResponsesForUnknownIDsAndDuplicatesAreDropped (session_test.go): unknown ids,
//     duplicates and garbage over a pipe, with a follow-up ping (here: the HTTP forms).
//   - TestResponseShapes (session_test.go): a result and an error together over a pipe is
//     an unknown outcome (here: over HTTP too, with a follow-up call).
//   - TestMalformedErrorObjectLeavesOutcomeUnknown (session_test.go): an error that is no object.
//   - TestServerLyingAboutIDsLeavesOutcomeUnknown, TestHTTPAnswerForAnotherIDLeavesOutcomeUnknown
//     (session_test.go): answers for other ids only, over a pipe and an HTTP JSON body.

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
	"sync"
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

// bytesAllocated returns how many bytes of heap f allocated (the process's, so tests that
// measure it must not run in parallel).
func bytesAllocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
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

func TestHostileOversizedSSEEvent(t *testing.T) {
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

func TestHostileResponseForUnknownID(t *testing.T) {
	// A JSON body is a POST's only answer: one for another id leaves the outcome unknown at once.
	t.Run("http-json", func(t *testing.T) {
		first := testpeer.Once()
		srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
			if r.Method == "tools/call" && first() {
				r.JSON(testpeer.Result(json.RawMessage(`"not-yours"`), testpeer.ToolResult))
				return true
			}
			return false
		})
		c := connect(t, &transport.HTTP{URL: srv.URL})
		_, err := c.CallTool(testCtx(t), "reserve", nil)
		if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want ErrOutcomeUnknown at once", err)
		}
		stillUsable(t, c)
	})
	// A stream may carry other messages before the answer: an unknown id is dropped.
	t.Run("http-sse", func(t *testing.T) {
		first := testpeer.Once()
		srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
			if r.Method != "tools/call" || !first() {
				return false
			}
			event := r.SSE()
			event("", testpeer.Result(json.RawMessage(`"not-yours"`), `{"content":[{"type":"text","text":"forged"}]}`))
			event("", testpeer.Result(json.RawMessage(`12345`), `{"content":[{"type":"text","text":"forged"}]}`))
			event("", testpeer.Result(r.ID, `{"content":[{"type":"text","text":"mine"}]}`))
			return true
		})
		c := connect(t, &transport.HTTP{URL: srv.URL})
		res, err := c.CallTool(testCtx(t), "reserve", nil)
		if err != nil || res.Text() != "mine" {
			t.Fatalf("result %v, error %v: want the answer for the request's own id", res, err)
		}
		stillUsable(t, c)
	})
}

func TestHostileTwoResponsesForOneID(t *testing.T) {
	for _, kind := range []string{"http-sse", "http-json-batch"} {
		t.Run(kind, func(t *testing.T) {
			first := testpeer.Once()
			srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
				if r.Method != "tools/call" || !first() {
					return false
				}
				one := testpeer.Result(r.ID, `{"content":[{"type":"text","text":"first"}]}`)
				two := testpeer.Result(r.ID, `{"content":[{"type":"text","text":"second"}]}`)
				if kind == "http-sse" {
					event := r.SSE()
					event("", one)
					event("", two)
				} else {
					r.JSON("[" + one + "," + two + "]")
				}
				return true
			})
			c := connect(t, &transport.HTTP{URL: srv.URL})
			res, err := c.CallTool(testCtx(t), "reserve", nil)
			if err != nil || res.Text() != "first" {
				t.Fatalf("result %v, error %v: want the first answer", res, err)
			}
			// The second answer was dropped, not kept for the next request.
			stillUsable(t, c)
		})
	}
}

func TestHostileWrongJSONRPCVersion(t *testing.T) {
	for name, reply := range map[string]string{
		"1.0":     `{"jsonrpc":"1.0","id":ID,"result":{}}`,
		"missing": `{"id":ID,"result":{}}`,
		"empty":   `{"jsonrpc":"","id":ID,"result":{}}`,
		// jsonrpc.Decode refuses the frame (a number where a string belongs), but its id
		// names a waiting call, which fails at once rather than waiting for its deadline.
		"number": `{"jsonrpc":2.0,"id":ID,"result":{}}`,
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				first := testpeer.Once()
				srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
					if m.Method == "tools/call" && first() {
						p.Send(strings.ReplaceAll(reply, "ID", string(m.ID)))
						return true
					}
					return false
				})
				c, err := mcpclient.Connect(context.Background(), srv.Transport(), noWait)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, err = c.CallTool(ctx, "reserve", nil)
				if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("error %v (code %v), want ErrOutcomeUnknown at once", err, mcpclient.CodeOf(err))
				}
				stillUsable(t, c)
			})
		})
	}
}

func TestHostileResultAndErrorTogether(t *testing.T) {
	const both = `{"jsonrpc":"2.0","id":ID,"result":{"content":[]},"error":{"code":-32000,"message":"both"}}`
	// The server answered the id with something that is no answer: the tool may have run, and
	// resending would fetch the same thing, receipts or not.
	check := func(t *testing.T, c *mcpclient.Client) {
		t.Helper()
		_, err := c.CallTool(testCtx(t), "reserve", nil)
		if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, mcpclient.ErrMalformedResponse) {
			t.Fatalf("error %v (code %v), want ErrOutcomeUnknown caused by ErrMalformedResponse", err, mcpclient.CodeOf(err))
		}
		e := asError(t, err)
		if entry, _ := c.Ledger().Lookup(e.ID); entry.State != mcpclient.StateUncertain || e.Attempts != 1 {
			t.Errorf("ledger state %v after %d attempts, want uncertain after one", entry.State, e.Attempts)
		}
		stillUsable(t, c)
	}
	t.Run("pipe", func(t *testing.T) {
		first := testpeer.Once()
		check(t, connect(t, testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
			if m.Method == "tools/call" && first() {
				p.Send(strings.ReplaceAll(both, "ID", string(m.ID)))
				return true
			}
			return false
		}).Transport()))
	})
	for _, kind := range []string{"http-json", "http-sse"} {
		t.Run(kind, func(t *testing.T) {
			first := testpeer.Once()
			srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
				if r.Method != "tools/call" || !first() {
					return false
				}
				frame := strings.ReplaceAll(both, "ID", string(r.ID))
				if kind == "http-json" {
					r.JSON(frame)
				} else {
					r.SSE()("", frame)
				}
				return true
			})
			check(t, connect(t, &transport.HTTP{URL: srv.URL}, mcpclient.WithReceipts(mcpclient.ReceiptScopeSession)))
		})
	}
}

func TestHostileHugeHeaders(t *testing.T) {
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
			first := testpeer.Once()
			srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
				if r.Method != "tools/call" || !first() {
					return false
				}
				chunk := strings.Repeat("h", 8<<10)
				for i := range tt.size / len(chunk) {
					r.W.Header().Set(fmt.Sprintf("X-Junk-%d", i), chunk)
				}
				r.JSON(testpeer.Result(r.ID, testpeer.ToolResult))
				return true
			})
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

func TestHostileSSEStreamNeverAnswers(t *testing.T) {
	for _, kind := range []string{"sse", "no headers"} {
		t.Run(kind, func(t *testing.T) {
			first := testpeer.Once()
			abandoned := make(chan struct{})
			srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
				if r.Method != "tools/call" || !first() {
					return false
				}
				if kind == "sse" {
					r.SSE()("p1", "") // a priming event, then silence
				}
				<-r.HTTP.Context().Done() // the client hung up
				close(abandoned)
				return true
			})
			c := connect(t, &transport.HTTP{URL: srv.URL})
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			_, err := c.CallTool(ctx, "reserve", nil)
			if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("error %v, want ErrOutcomeUnknown at the call's deadline", err)
			}
			select {
			case <-abandoned:
			case <-testCtx(t).Done():
				t.Fatal("the client kept the silent exchange open")
			}
			// The notice is sent after the call returned, on the session's own goroutine.
			waitFor(t, "notifications/cancelled", func() bool { return srv.Count("notifications/cancelled") == 1 })
			stillUsable(t, c)
			if n := srv.Count("notifications/cancelled"); n != 1 {
				t.Errorf("%d notifications/cancelled, want 1", n)
			}
		})
	}
}

// A server that goes quiet does not hold a call until its context ends (forever, for
// context.Background()): no answer to the POST, or an answer that brings nothing or only
// keepalives, ends the call as an unknown outcome once the transport's bound passes. A slow call
// that reports progress is not cut.
func TestHostileSilentServerEndsTheCall(t *testing.T) {
	const bound = 300 * time.Millisecond
	keepalives := func(r *testpeer.Request, what string) {
		for {
			io.WriteString(r.W, what)
			r.W.(http.Flusher).Flush()
			select {
			case <-time.After(bound / 6):
			case <-r.HTTP.Context().Done():
				return
			}
		}
	}
	for _, tc := range []struct {
		name     string
		serve    func(r *testpeer.Request)
		answered bool
	}{
		{"no answer", func(r *testpeer.Request) { <-r.HTTP.Context().Done() }, false},
		{"headers only", func(r *testpeer.Request) {
			r.W.Header().Set("Content-Type", "application/json")
			r.W.WriteHeader(http.StatusOK)
			r.W.(http.Flusher).Flush()
			<-r.HTTP.Context().Done()
		}, false},
		{"sse comments", func(r *testpeer.Request) {
			r.SSE()("p1", "") // a priming event, then only comments
			keepalives(r, ": keepalive\n\n")
		}, false},
		{"sse progress", func(r *testpeer.Request) {
			event := r.SSE()
			for range 8 {
				event("", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`)
				time.Sleep(bound / 3)
			}
			event("", testpeer.Result(r.ID, testpeer.ToolResult))
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := testpeer.Once()
			srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
				if r.Method != "tools/call" || !first() {
					return false
				}
				tc.serve(r)
				return true
			})
			c := connect(t, &transport.HTTP{URL: srv.URL, ResponseHeaderTimeout: bound, ResponseIdleTimeout: bound})
			start := time.Now()
			res, err := c.CallTool(testCtx(t), "reserve", nil)
			took := time.Since(start)
			if tc.answered {
				if err != nil || res.Text() != "ok" {
					t.Fatalf("call: %v, want the answer after %v of progress", err, took)
				}
				if took < 2*bound {
					t.Errorf("answered after %v: the progress did not outlast the bound", took)
				}
				return
			}
			if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, transport.ErrResponseTimeout) {
				t.Fatalf("call: %v, want ErrOutcomeUnknown with ErrResponseTimeout", err)
			}
			if took > 10*bound {
				t.Errorf("the call ended after %v", took)
			}
			if n := srv.Count("tools/call"); n != 1 {
				t.Errorf("the unsafe call was sent %d times", n)
			}
			stillUsable(t, c)
		})
	}
	// A legacy server answers each POST at once, the answer coming over its stream.
	t.Run("legacy no answer", func(t *testing.T) {
		first := testpeer.Once()
		srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
			if r.Method != "tools/call" || !first() {
				return false
			}
			<-r.HTTP.Context().Done()
			return true
		}, testpeer.Legacy("s1"))
		c := connect(t, &transport.SSE{URL: srv.URL + "/sse", ResponseHeaderTimeout: bound})
		start := time.Now()
		_, err := c.CallTool(testCtx(t), "reserve", nil)
		if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, transport.ErrResponseTimeout) {
			t.Fatalf("call: %v, want ErrOutcomeUnknown with ErrResponseTimeout", err)
		}
		if took := time.Since(start); took > 10*bound {
			t.Errorf("the call ended after %v", took)
		}
		stillUsable(t, c)
	})
}

// within waits for done's error on the bubble's clock: it checks the error with check and that
// it came after exactly want, and fails (hanging up first) if none comes within an hour.
func within(t *testing.T, what string, done <-chan error, hangUp func(), want time.Duration, check func(error)) {
	t.Helper()
	start := time.Now()
	select {
	case err := <-done:
		check(err)
		if took := time.Since(start); took != want {
			t.Errorf("%s gave up after %v, want %v", what, took, want)
		}
	case <-time.After(time.Hour):
		t.Errorf("%s still waits after an hour", what)
		hangUp()
		<-done
	}
}

// Connect under a context without a deadline gives up on a server that never answers the
// handshake: after DefaultHandshakeTimeout, or the client's own bound. So does a reconnection
// under a call's context without one.
func TestHostileServerNeverAnswersTheHandshake(t *testing.T) {
	wantTimeout := func(t *testing.T, what string) func(error) {
		return func(err error) {
			if !errors.Is(err, mcpclient.ErrHandshakeTimeout) || !errors.Is(err, mcpclient.ErrNotDelivered) {
				t.Errorf("%s: %v, want ErrNotDelivered caused by ErrHandshakeTimeout", what, err)
			}
		}
	}
	for _, tc := range []struct {
		name string
		opts []mcpclient.Option
		want time.Duration
	}{
		{"default", nil, mcpclient.DefaultHandshakeTimeout},
		{"set", []mcpclient.Option{mcpclient.WithHandshakeTimeout(5 * time.Second)}, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// The server reads everything and answers nothing.
				srv := testpeer.NewPipe(t, func(*testpeer.Conn, testpeer.Msg) bool { return true }, testpeer.Lines(0))
				defer srv.HangUp()
				done := make(chan error, 1)
				go func() {
					_, err := mcpclient.Connect(context.Background(), srv.Transport(), tc.opts...)
					done <- err
				}()
				within(t, "connect", done, srv.HangUp, tc.want, wantTimeout(t, "connect"))
			})
		})
	}
	t.Run("reconnection", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// The first session opens, and the server hangs up; later ones never answer.
			srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
				if p.N > 0 {
					return true // reads everything, answers nothing
				}
				if m.Method == "notifications/initialized" {
					p.Close()
				}
				return false
			}, testpeer.Lines(0))
			defer srv.HangUp()
			c, err := mcpclient.Connect(context.Background(), srv.Transport(), mcpclient.WithHandshakeTimeout(5*time.Second),
				mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{MaxAttempts: 1}))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			synctest.Wait() // the client has seen the hang-up
			done := make(chan error, 1)
			go func() {
				_, err := c.CallTool(context.Background(), "reserve", nil)
				done <- err
			}()
			within(t, "the call", done, srv.HangUp, 5*time.Second, wantTimeout(t, "call"))
		})
	})
}

func TestHostileByteAtATimeResponse(t *testing.T) {
	answer := `{"content":[{"type":"text","text":"sl\u00f6w \"bytes\""}]}`
	const want = `slöw "bytes"`
	trickle := func(w io.Writer, s string) {
		for i := range len(s) {
			w.Write([]byte{s[i]})
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
	}
	for _, kind := range []string{"http-json", "http-sse"} {
		t.Run(kind, func(t *testing.T) {
			srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
				if r.Method != "tools/call" {
					return false
				}
				if kind == "http-json" {
					r.W.Header().Set("Content-Type", "application/json")
					trickle(r.W, testpeer.Result(r.ID, answer))
				} else {
					r.W.Header().Set("Content-Type", "text/event-stream")
					trickle(r.W, "id: 1\r\nretry: 10\r\ndata: "+testpeer.Result(r.ID, answer)+"\r\n\r\n")
				}
				return true
			})
			c := connect(t, &transport.HTTP{URL: srv.URL})
			for range 2 {
				res, err := c.CallTool(testCtx(t), "reserve", nil)
				if err != nil || res.Text() != want {
					t.Fatalf("result %v, error %v", res, err)
				}
			}
			if err := c.Ping(testCtx(t)); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("stream", func(t *testing.T) {
		c := connect(t, testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
			if m.Method == "tools/call" {
				trickle(p, testpeer.Result(m.ID, answer)+"\r\n")
				return true
			}
			return false
		}, testpeer.Lines(0)).Transport())
		for range 2 {
			res, err := c.CallTool(testCtx(t), "reserve", nil)
			if err != nil || res.Text() != want {
				t.Fatalf("result %v, error %v", res, err)
			}
		}
		if err := c.Ping(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	})
}

// TestHostileFloodOfServerMessages floods the client with notifications and server requests
// while no call awaits an answer. The client's queues are bounded: server request handlers run
// at most 16 at a time and the requests beyond are refused at once as busy, and once a
// notification handler is stuck and the inbound queue (64) is full the client stops reading, so
// the flooding server is held back instead of the client's memory growing. Nothing is lost or
// deadlocked: every notification reaches its handler, every request is answered, and the
// goroutines return to their number before.
func TestHostileFloodOfServerMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 6000 messages: a quarter server requests with a handler, 1 in 12 requests for an
		// unknown method, 1 in 12 progress reports for no call, the rest notifications.
		const total = 6000
		const stuck = total / 2 // the notification whose handler waits for release
		var (
			sent, answers         atomic.Int32
			inFlight, maxInFlight atomic.Int32
			handled, notified     atomic.Int32
			refused               atomic.Int32 // answers saying the client is busy
			asks, unknown, notes  int32
			asksBeforeStuck       int32
			release               = make(chan struct{})
			baseline              = runtime.NumGoroutine()
		)
		flood := make([]string, total)
		for i := range flood {
			switch i % 12 {
			case 1, 5, 9:
				flood[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":"s%d","method":"flood/ask","params":{}}`, i)
				asks++
				if i < stuck {
					asksBeforeStuck++
				}
			case 3:
				flood[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":"s%d","method":"no/such/method"}`, i)
				unknown++
			case 7:
				flood[i] = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"nobody","progress":1}}`
				notes++
			default:
				flood[i] = fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/flood","params":{"n":%d}}`, i)
				notes++
			}
		}
		srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
			switch {
			case m.Method == "" && strings.HasPrefix(string(m.ID), `"s`):
				answers.Add(1)
				if strings.Contains(string(m.Error), "busy") {
					refused.Add(1)
				}
			case m.Method == "notifications/initialized":
				p.Go(func() {
					for _, frame := range flood {
						if p.Send(frame) != nil {
							return
						}
						sent.Add(1)
					}
				})
			}
			return false
		})
		c, err := mcpclient.Connect(context.Background(), srv.Transport(), noWait,
			mcpclient.WithNotificationHandler("*", func(_ context.Context, _ string, params json.RawMessage) {
				notified.Add(1)
				var p struct{ N int }
				if json.Unmarshal(params, &p) == nil && p.N == stuck {
					<-release
				}
			}),
			mcpclient.WithRequestHandler("flood/ask", func(ctx context.Context, _ json.RawMessage) (any, error) {
				n := inFlight.Add(1)
				defer inFlight.Add(-1)
				for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
				}
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				handled.Add(1)
				return struct{}{}, nil
			}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()

		synctest.Wait() // all blocked: the handlers on release, the flooder on backpressure
		if got := maxInFlight.Load(); got != 16 {
			t.Errorf("%d server request handlers at once, want 16", got)
		}
		if got, want := refused.Load(), asksBeforeStuck-16; got != want || handled.Load() != 0 {
			t.Errorf("%d requests refused as busy and %d handled before the stuck notification, want %d and 0", got, handled.Load(), want)
		}
		// Held back: the flooder is blocked, and what the client holds unprocessed is bounded (64
		// queued for the dispatcher, 16 in the pipe, one each in the reader's and the
		// dispatcher's hands).
		processed := notified.Load() + answers.Load() + inFlight.Load()
		t.Logf("flood held back: %d sent, %d processed, %d handlers running, %d goroutines over the baseline", sent.Load(), processed, inFlight.Load(), runtime.NumGoroutine()-baseline)
		if got := sent.Load(); got >= total || got-processed > 64+16+2 {
			t.Errorf("the server sent %d messages and the client processed %d while the handlers were stuck, want at most %d waiting",
				got, processed, 64+16+2)
		}
		if extra := runtime.NumGoroutine() - baseline; extra > 16+30 {
			t.Errorf("%d goroutines more than before the flood, want a bounded number", extra)
		}
		close(release)
		synctest.Wait()
		// After release a handler returns at once, so how many of the later requests find a
		// slot depends on the schedule; each is handled or refused.
		if handled.Load()+refused.Load() != asks || answers.Load() != asks+unknown || notified.Load() != notes {
			t.Errorf("%d requests handled and %d refused as busy, %d answered, %d notifications delivered; want %d, %d, %d",
				handled.Load(), refused.Load(), answers.Load(), notified.Load(), asks, asks+unknown, notes)
		}
		if err := c.Ping(context.Background()); err != nil {
			t.Fatalf("ping after the flood: %v", err)
		}
		c.Close()
		synctest.Wait()
		if n := runtime.NumGoroutine(); n > baseline {
			t.Errorf("%d goroutines after Close, %d before", n, baseline)
		}
	})
}

// TestHostileFloodDuringACallIsBounded: while a call awaits its answer the client keeps reading
// (a handler may be the one awaiting it, see the next test), so a flood then is bounded by the
// bytes queued for the handlers. Past the bound the session ends with ErrInboundOverflow, the
// call ends with a typed error, and the client opens a new session for the next call.
func TestHostileFloodDuringACallIsBounded(t *testing.T) {
	const limit = 64 << 10
	defer mcpclient.SetInboxHardLimitForTest(limit)()
	synctest.Test(t, func(t *testing.T) {
		const total = 6000
		var sent, notified atomic.Int32
		release := make(chan struct{})
		first := testpeer.Once()
		srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
			if m.Method == "tools/call" && first() {
				id := m.ID
				p.Go(func() {
					for i := range total {
						if p.Send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/flood","params":{"n":%d}}`, i)) != nil {
							return
						}
						sent.Add(1)
					}
					p.Send(testpeer.Result(id, testpeer.ToolResult))
				})
				return true
			}
			return false
		})
		c, err := mcpclient.Connect(context.Background(), srv.Transport(), noWait,
			mcpclient.WithNotificationHandler("*", func(context.Context, string, json.RawMessage) {
				notified.Add(1)
				<-release
			}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = c.CallTool(testCtx(t), "reserve", nil)
		if !errors.Is(err, mcpclient.ErrInboundOverflow) || mcpclient.CodeOf(err) != mcpclient.CodeOutcomeUnknown {
			t.Fatalf("error %v (code %v), want ErrOutcomeUnknown caused by ErrInboundOverflow", err, mcpclient.CodeOf(err))
		}
		// About 190 bytes a message are queued: the bound held the backlog to a few hundred.
		if got := sent.Load(); got >= total || got > limit/100 {
			t.Errorf("the server sent %d of %d messages before the session ended; want the bound to stop it", got, total)
		}
		t.Logf("session ended after %d messages, %d handled", sent.Load(), notified.Load())
		close(release)
		stillUsable(t, c)
	})
}

// TestHostileFloodWhileAHandlerCallsTheClient: a notification handler may call the Client
// (options.go, NotificationHandler), as a list_changed handler calling ListTools does. Here the
// server follows list_changed with a burst of 100 log notifications, and answers the handler's
// call after the burst: the client must still route that answer to the handler.
func TestHostileFloodWhileAHandlerCallsTheClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const burst = 100
		var c *mcpclient.Client
		handlerErr := make(chan error, 1)
		burstSent := make(chan struct{})
		var burstOnce sync.Once
		endBurst := func() { burstOnce.Do(func() { close(burstSent) }) }
		handlersPing := testpeer.Once()
		srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
			switch {
			case m.Method == "tools/call":
				id := m.ID
				p.Go(func() {
					defer endBurst()
					p.Send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
					for i := range burst {
						if p.Send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":%d}}`, i)) != nil {
							return
						}
					}
					endBurst()
					p.Send(testpeer.Result(id, testpeer.ToolResult))
				})
				return true
			case m.Method == "ping" && handlersPing():
				id := m.ID
				p.Go(func() { <-burstSent; p.Send(testpeer.Result(id, `{}`)) })
				return true
			}
			return false
		})
		var once sync.Once
		var err error
		c, err = mcpclient.Connect(context.Background(), srv.Transport(), noWait,
			mcpclient.WithNotificationHandler("notifications/tools/list_changed", func(ctx context.Context, _ string, _ json.RawMessage) {
				once.Do(func() {
					ctx, cancel := context.WithTimeout(ctx, time.Minute)
					defer cancel()
					handlerErr <- c.Ping(ctx)
				})
			}),
			mcpclient.WithLogHandler(func(context.Context, *mcpclient.LogMessage) {}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		if _, err := c.CallTool(ctx, "flood", nil); err != nil {
			t.Fatalf("the call during the flood: %v", err)
		}
		if err := <-handlerErr; err != nil {
			t.Errorf("a handler's call during a burst of notifications: %v", err)
		}
		if err := c.Ping(ctx); err != nil {
			t.Fatalf("ping after the flood: %v", err)
		}
	})
}

func TestHostileHTMLBody(t *testing.T) {
	const page = "<!doctype html><html><body><h1>Welcome to the hotel wifi</h1></body></html>"
	html := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, page)
	}
	t.Run("call", func(t *testing.T) {
		first := testpeer.Once()
		srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
			if r.Method == "tools/call" && first() {
				html(r.W)
				return true
			}
			return false
		})
		c := connect(t, &transport.HTTP{URL: srv.URL})
		_, err := c.CallTool(testCtx(t), "reserve", nil)
		var status *transport.StatusError
		// The POST reached something that answered 200 with a page: whether the tool ran is
		// unknown, and the body is not taken for an answer.
		if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.As(err, &status) || status.StatusCode != http.StatusOK {
			t.Fatalf("error %v, want ErrOutcomeUnknown with the 200 StatusError", err)
		}
		if !strings.Contains(err.Error(), "text/html") {
			t.Errorf("error %v does not name the Content-Type", err)
		}
		stillUsable(t, c)
	})
	t.Run("initialize", func(t *testing.T) {
		var bad atomic.Bool
		bad.Store(true)
		srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
			if bad.Load() && r.HTTPMethod == http.MethodPost {
				html(r.W)
				return true
			}
			return false
		})
		tr := &transport.HTTP{URL: srv.URL}
		_, err := mcpclient.Connect(testCtx(t), tr, noWait, mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{MaxAttempts: 2}))
		var status *transport.StatusError
		// No session, so none of the caller's requests was sent.
		if !errors.Is(err, mcpclient.ErrNotDelivered) || !errors.As(err, &status) || status.StatusCode != http.StatusOK {
			t.Fatalf("connect error %v, want ErrNotDelivered with the 200 StatusError", err)
		}
		bad.Store(false)
		stillUsable(t, connect(t, tr))
	})
}

func TestHostileRedirectLoop(t *testing.T) {
	var hops atomic.Int32
	first := testpeer.Once()
	srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		if r.Method != "tools/call" || (r.HTTP.URL.Query().Get("hop") == "" && !first()) {
			return false
		}
		n := hops.Add(1)
		// 307 keeps the method and the body: every hop delivers the request again.
		http.Redirect(r.W, r.HTTP, fmt.Sprintf("/?hop=%d", n), http.StatusTemporaryRedirect)
		return true
	})
	c := connect(t, &transport.HTTP{URL: srv.URL})
	_, err := c.CallTool(testCtx(t), "reserve", nil)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "redirects") {
		t.Fatalf("error %v, want ErrOutcomeUnknown after too many redirects", err)
	}
	if n := hops.Load(); n != 10 {
		t.Errorf("%d redirects followed, want 10", n)
	}
	if e := asError(t, err); e.Attempts != 1 {
		t.Errorf("%d attempts, want 1", e.Attempts)
	}
	stillUsable(t, c)
}
