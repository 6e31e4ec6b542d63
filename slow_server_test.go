package mcpclient_test

// Servers that go quiet or answer slowly: a silent server holds neither a call nor Connect past
// its bounds, and an answer that arrives a byte at a time arrives whole.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/transport"
)

func TestHostileSSEStreamNeverAnswers(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sse", "no headers"} {
		t.Run(kind, func(t *testing.T) {
			abandoned := make(chan struct{})
			srv := testpeer.NewHTTP(t, firstToolCall(func(r *testpeer.Request) {
				if kind == "sse" {
					r.SSE()("p1", "") // a priming event, then silence
				}
				<-r.HTTP.Context().Done() // the client hung up
				close(abandoned)
			}))
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
//
// The test and its cases run alone: the answered case needs its progress reports to come well
// within the bound, which a machine busy with other tests cannot promise.
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
			srv := testpeer.NewHTTP(t, firstToolCall(func(r *testpeer.Request) {
				tc.serve(r)
			}))
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
		srv := testpeer.NewHTTP(t, firstToolCall(func(r *testpeer.Request) {
			<-r.HTTP.Context().Done()
		}), testpeer.Legacy("s1"))
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

func TestHostileByteAtATimeResponse(t *testing.T) {
	t.Parallel()
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
