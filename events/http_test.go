package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/events"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
)

// Over HTTP, in both revisions: List walks both pages; PollLoop drains at once on hasMore, waits
// nextPollMs (never under the floor), sends null again after an answer without cursor, the fresh
// cursor after truncated, hands over a list_changed that came on a poll's SSE answer, and stops
// with ErrNotFound when the type goes away.
func TestHTTPListAndPollLoop(t *testing.T) {
	for _, rev := range httpRevisions {
		t.Run(rev.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := &httpPeer{stateless: rev.stateless, settings: `{"listChanged":true}`, mode: events.DeliveryPoll}
				p.serve = func(r *testpeer.Request, n int) bool {
					if r.Method != "events/poll" {
						return false
					}
					switch n {
					case 0:
						p.answer(r, `{"events":[`+occurrence(replayType, "tick-1", `"tick-1"`)+`],"cursor":"tick-1","hasMore":true,"nextPollMs":3000}`)
					case 1:
						// The answer comes as an SSE stream, after a list_changed.
						r.SSE()("", `{"jsonrpc":"2.0","method":"notifications/events/list_changed"}`)
						p.finish(r, `{"events":[`+occurrence(replayType, "tick-2", `"tick-2"`)+`],"cursor":"tick-2","hasMore":false,"nextPollMs":2000}`)
					case 2:
						p.answer(r, `{"events":[],"hasMore":false,"nextPollMs":0}`)
					case 3:
						p.answer(r, `{"events":[],"cursor":"tick-fresh","truncated":true,"nextPollMs":1500}`)
					default:
						r.JSON(`{"jsonrpc":"2.0","id":` + string(r.ID) + `,"error":{"code":-32023,"message":"NotFound","data":{"kind":"event"}}}`)
					}
					return true
				}
				var client *mcpclient.Client
				relisted := make(chan error, 4)
				router := events.NewRouter(events.OnListChanged(func(ctx context.Context) {
					_, err := mcpclient.Collect(events.List(ctx, client))
					relisted <- err
				}))
				client = connectHTTP(t, p, router.Option())
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()

				init, err := client.Session(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if s, ok := events.Declared(init.Capabilities); !ok || !s.ListChanged {
					t.Fatalf("Declared = %+v, %v; want the extension with listChanged", s, ok)
				}
				types, err := mcpclient.Collect(events.List(ctx, client))
				if err != nil || len(types) != 2 || types[0].Name != replayType || types[1].Name != cursorlessType || !types[1].Supports(events.DeliveryPoll) {
					t.Fatalf("List = %v, %v; want both pages", types, err)
				}

				var seen []string
				err = events.PollLoop(ctx, client, events.PollParams{Name: replayType, Arguments: map[string]any{"repo": "a/b"}}, func(_ context.Context, res *events.PollResult) error {
					for _, o := range res.Events {
						seen = append(seen, o.EventID)
					}
					return nil
				})
				if !errors.Is(err, events.ErrNotFound) || mcpclient.CodeOf(err) != mcpclient.CodeServerError {
					t.Fatalf("PollLoop ended with %v, want ErrNotFound in a server error", err)
				}
				select {
				case err := <-relisted:
					if err != nil {
						t.Fatalf("listing again after list_changed: %v", err)
					}
				default:
					t.Fatal("the list_changed on the poll's SSE answer was not handed over")
				}

				polls := p.requests("events/poll", replayType)
				if len(polls) != 5 {
					t.Fatalf("%d polls, want 5", len(polls))
				}
				var cursors []string
				for _, r := range polls {
					cursors = append(cursors, httpCursorOf(r))
					if got := string(r.Param("arguments")); got != `{"repo":"a/b"}` {
						t.Errorf("poll %s: arguments %s", r.ID, got)
					}
				}
				if want := []string{"null", `"tick-1"`, `"tick-2"`, "null", `"tick-fresh"`}; !slices.Equal(cursors, want) {
					t.Errorf("cursors sent %v, want %v", cursors, want)
				}
				gap := func(i int) time.Duration { return polls[i+1].at.Sub(polls[i].at) }
				for i, want := range []time.Duration{0, 2 * time.Second, events.DefaultPollFloor, 1500 * time.Millisecond} {
					if gap(i) != want {
						t.Errorf("poll %d came %v after poll %d, want %v", i+1, gap(i), i, want)
					}
				}
				if !slices.Equal(seen, []string{"tick-1", "tick-2"}) {
					t.Errorf("events %v, want tick-1 and tick-2", seen)
				}
				if n := len(p.requests("events/list", "")); n != 4 {
					t.Errorf("%d events/list requests, want two pages twice", n)
				}
				checkWire(t, p)
			})
		})
	}
}

// Over HTTP, in both revisions: KeepSubscribed refreshes halfway to each grant's expiry with the
// cursor of the answer before; Unsubscribe ends the subscription, and a second one is refused
// with ErrNotFound; a callback the server cannot verify is refused with ErrCallbackEndpoint.
func TestHTTPSubscribeAndUnsubscribe(t *testing.T) {
	const hook = "https://hooks.example/events"
	for _, rev := range httpRevisions {
		t.Run(rev.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := &httpPeer{stateless: rev.stateless, settings: `{}`, mode: events.DeliveryWebhook}
				p.serve = func(r *testpeer.Request, n int) bool {
					switch {
					case r.Method == "events/subscribe" && string(r.Param("name")) == `"`+cursorlessType+`"`:
						r.JSON(`{"jsonrpc":"2.0","id":` + string(r.ID) + `,"error":{"code":-32027,"message":"CallbackEndpointError","data":{"reason":"challenge_failed"}}}`)
					case r.Method == "events/subscribe":
						until := time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)
						cursor := `"w` + string(rune('1'+n)) + `"`
						p.answer(r, `{"id":"sub-1","refreshBefore":"`+until+`","cursor":`+cursor+`,"deliveryStatus":{"active":true}}`)
					case r.Method == "events/unsubscribe" && n == 0:
						p.answer(r, `{}`)
					case r.Method == "events/unsubscribe":
						r.JSON(`{"jsonrpc":"2.0","id":` + string(r.ID) + `,"error":{"code":-32023,"message":"NotFound","data":{"kind":"subscription"}}}`)
					default:
						return false
					}
					return true
				}
				c := connectHTTP(t, p, events.NewRouter().Option())
				ctx := context.Background()
				secret := events.NewSecret()

				var answers []*events.SubscribeResult
				stop := errors.New("enough")
				err := events.KeepSubscribed(ctx, c, events.SubscribeParams{Name: replayType, Arguments: map[string]any{"repo": "a/b"},
					Delivery: events.WebhookDelivery{URL: hook, Secret: secret}, TTL: 10 * time.Minute},
					func(_ context.Context, res *events.SubscribeResult) error {
						answers = append(answers, res)
						if len(answers) == 3 {
							return stop
						}
						return nil
					})
				if !errors.Is(err, stop) {
					t.Fatalf("KeepSubscribed: %v", err)
				}
				subs := p.requests("events/subscribe", replayType)
				if len(subs) != 3 {
					t.Fatalf("%d subscribes, want 3", len(subs))
				}
				var cursors []string
				for i, r := range subs {
					cursors = append(cursors, httpCursorOf(r))
					var delivery struct {
						Mode, URL, Secret string
					}
					json.Unmarshal(r.Param("delivery"), &delivery)
					if delivery.Mode != "webhook" || delivery.URL != hook || delivery.Secret != secret || string(r.Param("ttlMs")) != "600000" {
						t.Errorf("subscribe %d: delivery %s, ttlMs %s", i, r.Param("delivery"), r.Param("ttlMs"))
					}
					if i > 0 && subs[i].at.Sub(subs[i-1].at) != 5*time.Minute {
						t.Errorf("refresh %d came %v after the one before, want halfway to the 10m grant", i, subs[i].at.Sub(subs[i-1].at))
					}
				}
				if want := []string{"null", `"w1"`, `"w2"`}; !slices.Equal(cursors, want) {
					t.Errorf("cursors sent %v, want %v", cursors, want)
				}
				if answers[0].ID != "sub-1" || answers[0].DeliveryStatus == nil || !answers[0].DeliveryStatus.Active {
					t.Errorf("first answer %+v", answers[0])
				}

				if err := events.Unsubscribe(ctx, c, replayType, map[string]any{"repo": "a/b"}, hook); err != nil {
					t.Fatalf("Unsubscribe: %v", err)
				}
				err = events.Unsubscribe(ctx, c, replayType, map[string]any{"repo": "a/b"}, hook)
				var rpc *mcpclient.RPCError
				if !errors.Is(err, events.ErrNotFound) || !errors.As(err, &rpc) || rpc.Code != events.CodeNotFound {
					t.Errorf("a second Unsubscribe: %v, want ErrNotFound", err)
				}
				unsubs := p.requests("events/unsubscribe", replayType)
				if len(unsubs) != 2 || string(unsubs[0].Param("delivery")) != `{"url":"`+hook+`"}` || string(unsubs[0].Param("arguments")) != `{"repo":"a/b"}` {
					t.Errorf("unsubscribe requests %v", unsubs)
				}

				_, err = events.Subscribe(ctx, c, &events.SubscribeParams{Name: cursorlessType, Delivery: events.WebhookDelivery{URL: hook, Secret: secret}})
				if !errors.Is(err, events.ErrCallbackEndpoint) {
					t.Errorf("Subscribe with a callback the server cannot verify: %v, want ErrCallbackEndpoint", err)
				}
				checkWire(t, p)
			})
		})
	}
}

// Over HTTP, in both revisions, against a server whose capabilities do not declare the extension
// (or declare it with settings that are no object): every call is refused before sending.
func TestHTTPNoRequestWithoutTheExtension(t *testing.T) {
	for _, rev := range httpRevisions {
		for _, settings := range []string{"", "true"} {
			t.Run(rev.name+"/"+settings, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					p := &httpPeer{stateless: rev.stateless, settings: settings, mode: events.DeliveryPush}
					router := events.NewRouter()
					c := connectHTTP(t, p, router.Option())
					ctx := context.Background()
					calls := map[string]error{
						"List":     func() error { _, err := mcpclient.Collect(events.List(ctx, c)); return err }(),
						"PollLoop": events.PollLoop(ctx, c, events.PollParams{Name: replayType}, nil),
						"Stream":   router.Stream(ctx, c, events.StreamParams{Name: replayType}, events.StreamHandlers{}),
						"Subscribe": func() error {
							_, err := events.Subscribe(ctx, c, &events.SubscribeParams{Name: replayType,
								Delivery: events.WebhookDelivery{URL: "https://hooks.example/x", Secret: events.NewSecret()}})
							return err
						}(),
						"Unsubscribe": events.Unsubscribe(ctx, c, replayType, nil, "https://hooks.example/x"),
					}
					for name, err := range calls {
						if !errors.Is(err, events.ErrNotDeclared) || mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument {
							t.Errorf("%s: error %v, want ErrNotDeclared (CodeInvalidArgument)", name, err)
						}
					}
					for _, r := range p.eventsRequests() {
						t.Errorf("the client sent %s to a server without the extension", r.Method)
					}
				})
			})
		}
	}
}
