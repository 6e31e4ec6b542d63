package mcpclient_test

// Floods of server messages: the client's queues stay bounded, and nothing is lost or
// deadlocked.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
)

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
			baseline              = bubbleGoroutines()
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
		t.Logf("flood held back: %d sent, %d processed, %d handlers running, %d goroutines over the baseline", sent.Load(), processed, inFlight.Load(), bubbleGoroutines()-baseline)
		if got := sent.Load(); got >= total || got-processed > 64+16+2 {
			t.Errorf("the server sent %d messages and the client processed %d while the handlers were stuck, want at most %d waiting",
				got, processed, 64+16+2)
		}
		if extra := bubbleGoroutines() - baseline; extra > 16+30 {
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
		if n := bubbleGoroutines(); n > baseline {
			t.Errorf("%d goroutines after Close, %d before", n, baseline)
		}
	})
}

// bubbleGoroutines counts the goroutines of synctest bubbles, the test's own. runtime's count
// will not do: it counts a goroutine that has returned until it is torn down, which under the
// race detector may be after a synctest.Wait.
func bubbleGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), ", synctest bubble ")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestHostileFloodDuringACallIsBounded: while a call awaits its answer the client keeps reading
// (a handler may be the one awaiting it, see the next test), so a flood then is bounded by the
// bytes queued for the handlers. Past the bound the session ends with ErrInboundOverflow, the
// call ends with a typed error, and the client opens a new session for the next call.
func TestHostileFloodDuringACallIsBounded(t *testing.T) {
	const limit = 64 << 10
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
		c, err := mcpclient.Connect(context.Background(), srv.Transport(), noWait, mcpclient.WithInboxHardLimitForTest(limit),
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
