package events_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/events"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
)

// Over HTTP, in both revisions, events/stream answered as an SSE stream: the first stream breaks
// after an event and a heartbeat, and the client opens another after ReconnectDelay from the
// heartbeat's cursor; that one goes silent, and the client closes it after twice the heartbeat
// interval and opens a third at once from the last cursor; the third is terminated (Forbidden)
// and then answered, and Stream returns the termination without reconnecting.
func TestHTTPStreamReconnectsFromTheCursor(t *testing.T) {
	for _, rev := range httpRevisions {
		t.Run(rev.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := &httpPeer{stateless: rev.stateless, settings: `{}`, mode: events.DeliveryPush}
				p.serve = func(r *testpeer.Request, n int) bool {
					if r.Method == "notifications/cancelled" {
						r.W.WriteHeader(202)
						return true
					}
					if r.Method != "events/stream" {
						return false
					}
					send, awaitHangUp := p.stream(r)
					switch n {
					case 0:
						send("active", `{"cursor":"c0","truncated":false}`)
						send("event", occurrence(replayType, "e1", `"c1"`))
						send("heartbeat", `{"cursor":"c2"}`)
						// The handler returns: the stream ends without an answer.
					case 1:
						send("active", `{"cursor":"c2"}`)
						send("event", occurrence(replayType, "e2", `"c3"`))
						for range 2 {
							time.Sleep(time.Second) // the bubble's clock
							send("heartbeat", `{"cursor":"c3"}`)
						}
						awaitHangUp() // silent until the client gives up on it
					default:
						send("active", `{"cursor":"c3"}`)
						send("error", `{"error":{"code":-32603,"message":"UpstreamError"}}`)
						send("terminated", `{"error":{"code":-32024,"message":"Forbidden","data":{"reason":"Access revoked"}}}`)
						p.finish(r, `{}`)
					}
					return true
				}
				router := events.NewRouter()
				c := connectHTTP(t, p, router.Option())
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()

				var seen []string
				var actives, beats int
				var transient []*events.Error
				err := router.Stream(ctx, c, events.StreamParams{Name: replayType, Arguments: map[string]any{"repo": "a/b"}}, events.StreamHandlers{
					Active:    func(context.Context, *events.Active) { actives++ },
					Event:     func(_ context.Context, o *events.Occurrence) { seen = append(seen, o.EventID) },
					Heartbeat: func(context.Context, *events.Heartbeat) { beats++ },
					Error:     func(_ context.Context, e *events.Error) { transient = append(transient, e) },
				}, events.HeartbeatInterval(time.Second))
				var term *events.TerminatedError
				if !errors.As(err, &term) || !errors.Is(err, events.ErrForbidden) || term.Name != replayType {
					t.Fatalf("Stream ended with %v, want a *TerminatedError matching ErrForbidden", err)
				}

				streams := p.requests("events/stream", replayType)
				if len(streams) != 3 {
					t.Fatalf("%d streams, want 3", len(streams))
				}
				var cursors []string
				for _, r := range streams {
					cursors = append(cursors, httpCursorOf(r))
					if got := string(r.Param("arguments")); got != `{"repo":"a/b"}` {
						t.Errorf("stream %s: arguments %s", r.ID, got)
					}
				}
				if want := []string{"null", `"c2"`, `"c3"`}; !slices.Equal(cursors, want) {
					t.Errorf("cursors sent %v, want %v", cursors, want)
				}
				if gap := streams[1].at.Sub(streams[0].at); gap != events.DefaultReconnectDelay {
					t.Errorf("the broken stream was opened again %v later, want the reconnect delay", gap)
				}
				synctest.Wait() // the server has seen the hang-up; the bubble's clock has not moved since
				if at, ok := p.hangUpOf(streams[1]); !ok || at.Sub(streams[1].at) != 4*time.Second {
					t.Errorf("the silent stream was closed %v after it opened (closed: %v), want 2s of heartbeats and 2s of silence", at.Sub(streams[1].at), ok)
				} else if !streams[2].at.Equal(at) {
					t.Errorf("the stream after the silent one came %v after closing it, want at once", streams[2].at.Sub(at))
				}
				if !slices.Equal(seen, []string{"e1", "e2"}) || actives != 3 || beats != 3 {
					t.Errorf("events %v, %d actives, %d heartbeats; want e1 and e2, 3 and 3", seen, actives, beats)
				}
				if len(transient) != 1 || transient[0].Code != -32603 {
					t.Errorf("transient errors %v, want the one the server sent", transient)
				}
				if rev.stateless {
					for _, r := range p.requests("notifications/cancelled", "") {
						t.Errorf("notifications/cancelled %s: a stateless client ends a stream by closing it", r.Params)
					}
				}
				checkWire(t, p)
			})
		})
	}
}

// Over HTTP, in both revisions: whatever ends an events/stream (its answer, a break, a
// termination and then the answer), the notifications the server sent on it before reach the
// handlers first. A log record ahead of them, whose handler takes a second, keeps them waiting in
// the client's notification queue when the end arrives; an event handler taking a second has
// Stream learn of the end while notifications still wait for it.
func TestHTTPStreamNotificationsBeforeItsEnd(t *testing.T) {
	for _, rev := range httpRevisions {
		for _, end := range []string{"answer", "break", "terminated"} {
			t.Run(rev.name+"/"+end, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					p := &httpPeer{stateless: rev.stateless, settings: `{}`, mode: events.DeliveryPush}
					p.serve = func(r *testpeer.Request, n int) bool {
						if r.Method != "events/stream" {
							return false
						}
						send, _ := p.stream(r)
						if n > 0 { // the reconnection after a break
							p.finish(r, `{}`)
							return true
						}
						r.W.Write([]byte(`data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"slow"}}` + "\n\n"))
						send("active", `{"cursor":"c0"}`)
						for i := range 3 {
							send("event", occurrence(replayType, "e"+string(rune('1'+i)), `"c`+string(rune('1'+i))+`"`))
						}
						switch end {
						case "answer":
							p.finish(r, `{}`)
						case "terminated":
							send("terminated", `{"error":{"code":-32023,"message":"NotFound","data":{"kind":"event"}}}`)
							p.finish(r, `{}`)
						}
						// "break": the handler returns, and the stream ends without an answer.
						return true
					}
					router := events.NewRouter()
					slowLog := mcpclient.WithLogHandler(func(context.Context, *mcpclient.LogMessage) { time.Sleep(time.Second) })
					c := connectHTTP(t, p, router.Option(), slowLog)
					var seen []string
					err := router.Stream(context.Background(), c, events.StreamParams{Name: replayType}, events.StreamHandlers{
						Event: func(_ context.Context, o *events.Occurrence) {
							seen = append(seen, o.EventID)
							time.Sleep(time.Second) // the rest, and the end, come meanwhile
						},
					})
					var term *events.TerminatedError
					switch {
					case end == "terminated" && (!errors.As(err, &term) || !errors.Is(err, events.ErrNotFound)):
						t.Errorf("Stream ended with %v, want the termination", err)
					case end != "terminated" && err != nil:
						t.Errorf("Stream: %v", err)
					}
					if want := []string{"e1", "e2", "e3"}; !slices.Equal(seen, want) {
						t.Errorf("events %v, want %v", seen, want)
					}
					streams := p.requests("events/stream", replayType)
					if end != "break" {
						if len(streams) != 1 {
							t.Errorf("%d streams, want 1", len(streams))
						}
						return
					}
					if len(streams) != 2 || httpCursorOf(streams[1]) != `"c3"` {
						t.Errorf("%d streams, the second from %s; want it from the last event's cursor", len(streams), httpCursorOf(streams[len(streams)-1]))
					}
				})
			})
		}
	}
}

// Over HTTP, in both revisions: a stream the server refuses (NotFound in a JSON answer) ends
// Stream with the refusal, with no reconnection; so does one refused with Unsupported on its SSE
// stream after an error notice; and two streams of one client run side by side, each getting
// only its own notifications.
func TestHTTPStreamRefusedAndConcurrent(t *testing.T) {
	for _, rev := range httpRevisions {
		t.Run(rev.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := &httpPeer{stateless: rev.stateless, settings: `{}`, mode: events.DeliveryPush}
				p.serve = func(r *testpeer.Request, n int) bool {
					if r.Method == "notifications/cancelled" {
						r.W.WriteHeader(202)
						return true
					}
					if r.Method != "events/stream" {
						return false
					}
					switch string(r.Param("name")) {
					case `"gone"`:
						r.JSON(`{"jsonrpc":"2.0","id":` + string(r.ID) + `,"error":{"code":-32023,"message":"NotFound","data":{"kind":"event"}}}`)
					case `"poll-only"`:
						send, _ := p.stream(r)
						send("error", `{"error":{"code":-32603,"message":"UpstreamError"}}`)
						r.W.Write([]byte(`data: {"jsonrpc":"2.0","id":` + string(r.ID) + `,"error":{"code":-32026,"message":"Unsupported"}}` + "\n\n"))
					default:
						send, awaitHangUp := p.stream(r)
						name := string(r.Param("name"))
						name = name[1 : len(name)-1]
						send("active", `{"cursor":null}`)
						send("event", occurrence(name, name+"-1", "null"))
						awaitHangUp()
					}
					return true
				}
				router := events.NewRouter()
				c := connectHTTP(t, p, router.Option())
				ctx := context.Background()

				err := router.Stream(ctx, c, events.StreamParams{Name: "gone"}, events.StreamHandlers{})
				var rpc *mcpclient.RPCError
				if !errors.Is(err, events.ErrNotFound) || !errors.As(err, &rpc) || mcpclient.CodeOf(err) != mcpclient.CodeServerError {
					t.Errorf("Stream of an unknown type: %v, want ErrNotFound in a server error", err)
				}
				err = router.Stream(ctx, c, events.StreamParams{Name: "poll-only"}, events.StreamHandlers{})
				if !errors.Is(err, events.ErrUnsupported) {
					t.Errorf("Stream of a type without push: %v, want ErrUnsupported", err)
				}
				for _, name := range []string{"gone", "poll-only"} {
					if n := len(p.requests("events/stream", name)); n != 1 {
						t.Errorf("%d streams of %s after a refusal, want 1", n, name)
					}
				}

				ctx, cancel := context.WithCancel(ctx)
				var wg sync.WaitGroup
				var mu sync.Mutex
				got := map[string][]string{}
				for _, name := range []string{replayType, cursorlessType} {
					wg.Go(func() {
						err := router.Stream(ctx, c, events.StreamParams{Name: name}, events.StreamHandlers{
							Event: func(_ context.Context, o *events.Occurrence) {
								mu.Lock()
								got[name] = append(got[name], o.Name)
								mu.Unlock()
							},
						})
						if err != nil {
							t.Errorf("Stream(%s): %v", name, err)
						}
					})
				}
				synctest.Wait() // both streams opened and delivered their event
				cancel()
				wg.Wait()
				for _, name := range []string{replayType, cursorlessType} {
					if !slices.Equal(got[name], []string{name}) {
						t.Errorf("the stream of %s got events of %v", name, got[name])
					}
					streams := p.requests("events/stream", name)
					if len(streams) != 1 {
						t.Fatalf("%d streams of %s, want 1", len(streams), name)
					}
					synctest.Wait() // the server has seen the hang-up
					if _, ok := p.hangUpOf(streams[0]); !ok {
						t.Errorf("the client left the stream of %s open after its context ended", name)
					}
				}
				checkWire(t, p)
			})
		})
	}
}
