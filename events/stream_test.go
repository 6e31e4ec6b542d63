package events_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/events"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
)

// streams serves events/stream: it ends each stream when the client cancels it.
type streams struct {
	mu      sync.Mutex
	stopped map[string]chan struct{} // by request id
}

func (s *streams) open(id string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped == nil {
		s.stopped = make(map[string]chan struct{})
	}
	ch := make(chan struct{})
	s.stopped[id] = ch
	return ch
}

// cancelled handles notifications/cancelled, reporting whether m was one.
func (s *streams) cancelled(m testpeer.Msg) bool {
	if m.Method != "notifications/cancelled" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch := s.stopped[string(m.Param("requestId"))]; ch != nil {
		close(ch)
		delete(s.stopped, string(m.Param("requestId")))
	}
	return true
}

// closeAll ends every stream still open.
func (s *streams) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, ch := range s.stopped {
		close(ch)
		delete(s.stopped, id)
	}
}

// Mirrors the upstream client scenario events-client-push: each type's first stream confirms,
// delivers one event, sends four heartbeats 500ms apart, then goes silent without closing;
// later streams heartbeat until the client hangs up. The client finds the silent stream dead
// and reconnects with the last cursor it received, and never replays a null one.
func TestStreamReconnectsWithCursorConformance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ss streams
		var mu sync.Mutex
		lastCursor := map[string]string{}
		p := newPeer(t, `{}`, events.DeliveryPush, func(c *testpeer.Conn, m testpeer.Msg, n int) bool {
			if ss.cancelled(m) {
				return true
			}
			if m.Method != "events/stream" {
				return false
			}
			var name string
			quoted := string(m.Param("name"))
			name = quoted[1 : len(quoted)-1]
			replay := name == replayType
			first := n == 0
			stop := ss.open(string(m.ID))
			meta := `"_meta":{"` + events.SubscriptionIDMeta + `":` + string(m.ID) + `}`
			c.Go(func() {
				k := 0
				position := func() string {
					if replay {
						return `"p-` + string(rune('0'+k)) + `"`
					}
					return "null"
				}
				c.Send(`{"jsonrpc":"2.0","method":"notifications/events/active","params":{"cursor":` + position() + `,"truncated":false,` + meta + `}}`)
				c.Send(`{"jsonrpc":"2.0","method":"notifications/events/event","params":{"eventId":"` + name + `-1","name":"` + name + `","timestamp":"2026-02-19T15:30:00Z","data":{},"cursor":` + position() + `,` + meta + `}}`)
				tick := time.NewTicker(500 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					if first && k >= 4 {
						continue // silent, not closed
					}
					k++
					c.Send(`{"jsonrpc":"2.0","method":"notifications/events/heartbeat","params":{"cursor":` + position() + `,` + meta + `}}`)
					if first {
						mu.Lock()
						lastCursor[name] = position()
						mu.Unlock()
					}
				}
			})
			return true
		})
		defer ss.closeAll()
		router := events.NewRouter()
		c := connect(t, p, router.Option())
		ctx, cancel := context.WithTimeout(context.Background(), 9*time.Second)
		defer cancel()

		var wg sync.WaitGroup
		got := map[string][]string{}
		for _, name := range []string{replayType, cursorlessType} {
			wg.Go(func() {
				err := router.Stream(ctx, c, events.StreamParams{Name: name}, events.StreamHandlers{
					Event: func(_ context.Context, o *events.Occurrence) {
						mu.Lock()
						got[name] = append(got[name], o.EventID)
						mu.Unlock()
					},
				})
				if err != nil {
					t.Errorf("Stream(%s): %v", name, err)
				}
			})
		}
		wg.Wait()

		ticks := p.requests("events/stream", replayType)
		if len(ticks) < 2 {
			t.Fatalf("%d streams of %s: the client did not reconnect the silent stream", len(ticks), replayType)
		}
		if c, want := cursorOf(ticks[1]), lastCursor[replayType]; c != want {
			t.Errorf("the client reconnected with cursor %s; the last heartbeat carried %s", c, want)
		}
		if c := cursorOf(ticks[0]); c != "null" {
			t.Errorf("the first stream sent cursor %s, want null", c)
		}
		later := p.requests("events/stream", cursorlessType)
		if len(later) < 2 {
			t.Fatalf("%d streams of %s, want a reconnection", len(later), cursorlessType)
		}
		for i, r := range later {
			if c := cursorOf(r); c != "null" {
				t.Errorf("stream %d of %s sent cursor %s, want null", i, cursorlessType, c)
			}
		}
		if len(got[replayType]) < 2 || got[replayType][0] != replayType+"-1" {
			t.Errorf("events of %s: %v, want one per stream", replayType, got[replayType])
		}
	})
}

// A stream the server terminates ends with a *TerminatedError matched by its code's sentinel;
// one the server refuses ends with the refusal, matched the same way.
func TestStreamTerminatedAndRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ss streams
		p := newPeer(t, `{}`, events.DeliveryPush, func(c *testpeer.Conn, m testpeer.Msg, _ int) bool {
			if ss.cancelled(m) {
				return true
			}
			if m.Method != "events/stream" {
				return false
			}
			if string(m.Param("name")) == `"gone"` {
				c.Send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32023,"message":"NotFound","data":{"kind":"event"}}}`)
				return true
			}
			meta := `"_meta":{"` + events.SubscriptionIDMeta + `":` + string(m.ID) + `}`
			stop := ss.open(string(m.ID))
			c.Go(func() {
				c.Send(`{"jsonrpc":"2.0","method":"notifications/events/active","params":{"cursor":"c1",` + meta + `}}`)
				c.Send(`{"jsonrpc":"2.0","method":"notifications/events/error","params":{"error":{"code":-32603,"message":"UpstreamError"},` + meta + `}}`)
				c.Send(`{"jsonrpc":"2.0","method":"notifications/events/terminated","params":{"error":{"code":-32024,"message":"Forbidden","data":{"reason":"Access revoked"}},` + meta + `}}`)
				<-stop
			})
			return true
		})
		defer ss.closeAll()
		router := events.NewRouter()
		c := connect(t, p, router.Option())
		ctx := context.Background()

		var transient []*events.Error
		err := router.Stream(ctx, c, events.StreamParams{Name: replayType}, events.StreamHandlers{
			Error: func(_ context.Context, e *events.Error) { transient = append(transient, e) },
		})
		var term *events.TerminatedError
		if !errors.As(err, &term) || !errors.Is(err, events.ErrForbidden) || errors.Is(err, events.ErrNotFound) {
			t.Fatalf("Stream error %v, want a *TerminatedError matching ErrForbidden", err)
		}
		if term.Name != replayType || term.Err.Code != events.CodeForbidden {
			t.Errorf("terminated %+v", term)
		}
		if len(transient) != 1 || transient[0].Code != -32603 {
			t.Errorf("transient errors %v, want the one the server sent", transient)
		}
		if n := len(p.requests("events/stream", replayType)); n != 1 {
			t.Errorf("%d streams after a termination, want no reconnection", n)
		}

		err = router.Stream(ctx, c, events.StreamParams{Name: "gone"}, events.StreamHandlers{})
		var rpc *mcpclient.RPCError
		if !errors.Is(err, events.ErrNotFound) || !errors.As(err, &rpc) || mcpclient.CodeOf(err) != mcpclient.CodeServerError {
			t.Fatalf("Stream of an unknown type: %v, want ErrNotFound in a server error", err)
		}
		if n := len(p.requests("events/stream", "gone")); n != 1 {
			t.Errorf("%d streams after a refusal, want 1", n)
		}
	})
}
