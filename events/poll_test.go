package events_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/events"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
)

func occurrence(name, id, cursor string) string {
	return `{"eventId":"` + id + `","name":"` + name + `","timestamp":"2026-02-19T15:30:00Z","data":{"eventId":"` + id + `"},"cursor":` + cursor + `}`
}

// Mirrors the upstream client scenario events-client-poll: the replay type answers a scripted
// sequence, each step setting up what the next poll shows (drain at once on hasMore, wait
// nextPollMs, wait the floor after nextPollMs 0, carry the fresh cursor after truncated,
// list again after list_changed); the cursorless type answers a null cursor once, then none.
func TestPollLoopConformance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPeer(t, `{"listChanged":true}`, events.DeliveryPoll, func(c *testpeer.Conn, m testpeer.Msg, n int) bool {
			if m.Method != "events/poll" {
				return false
			}
			if string(m.Param("name")) == `"`+cursorlessType+`"` {
				if n == 0 {
					c.Send(testpeer.Result(m.ID, `{"events":[`+occurrence(cursorlessType, "cursorless-1", "null")+`],"cursor":null,"hasMore":false,"nextPollMs":1000}`))
				} else {
					c.Send(testpeer.Result(m.ID, `{"events":[],"hasMore":false,"nextPollMs":1000}`))
				}
				return true
			}
			switch n {
			case 0:
				c.Send(testpeer.Result(m.ID, `{"events":[`+occurrence(replayType, "tick-1", `"tick-1"`)+`],"cursor":"tick-1","hasMore":true,"nextPollMs":3000}`))
			case 1:
				c.Send(testpeer.Result(m.ID, `{"events":[`+occurrence(replayType, "tick-2", `"tick-2"`)+`],"cursor":"tick-2","hasMore":false,"nextPollMs":2000}`))
			case 2:
				c.Send(testpeer.Result(m.ID, `{"events":[],"cursor":"tick-3","hasMore":false,"nextPollMs":0}`))
			case 3:
				c.Send(testpeer.Result(m.ID, `{"events":[],"cursor":"tick-fresh","truncated":true,"hasMore":false,"nextPollMs":0}`))
			case 4:
				c.Send(`{"jsonrpc":"2.0","method":"notifications/events/list_changed"}`)
				c.Send(testpeer.Result(m.ID, `{"events":[],"cursor":"tick-5","hasMore":false,"nextPollMs":1000}`))
			default:
				c.Send(testpeer.Result(m.ID, `{"events":[],"cursor":"tick-6","hasMore":false,"nextPollMs":1000}`))
			}
			return true
		})
		var client *mcpclient.Client
		relisted := make(chan error, 4)
		router := events.NewRouter(events.OnListChanged(func(ctx context.Context) {
			_, err := mcpclient.Collect(events.List(ctx, client))
			relisted <- err
		}))
		client = connect(t, p, router.Option())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()

		types, err := mcpclient.Collect(events.List(ctx, client))
		if err != nil || len(types) != 2 || !types[0].Supports(events.DeliveryPoll) || types[0].Supports(events.DeliveryPush) {
			t.Fatalf("List = %v, %v; want the two poll types", types, err)
		}
		var seen []string
		done := make(chan error, 1)
		go func() {
			done <- events.PollLoop(ctx, client, events.PollParams{Name: cursorlessType}, nil)
		}()
		err = events.PollLoop(ctx, client, events.PollParams{Name: replayType}, func(_ context.Context, res *events.PollResult) error {
			for _, o := range res.Events {
				seen = append(seen, o.EventID)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("PollLoop: %v", err)
		}
		if err := <-done; err != nil {
			t.Fatalf("PollLoop of the cursorless type: %v", err)
		}
		if err := <-relisted; err != nil {
			t.Fatalf("listing again after list_changed: %v", err)
		}

		ticks := p.requests("events/poll", replayType)
		if len(ticks) < 6 {
			t.Fatalf("%d polls of %s, want at least 6", len(ticks), replayType)
		}
		gap := func(i int) time.Duration { return ticks[i+1].at.Sub(ticks[i].at) }
		if gap(0) != 0 {
			t.Errorf("after hasMore the next poll came %v later, want at once", gap(0))
		}
		if gap(1) < 2*time.Second {
			t.Errorf("after nextPollMs 2000 the next poll came %v later", gap(1))
		}
		if gap(2) < events.DefaultPollFloor {
			t.Errorf("after nextPollMs 0 the next poll came %v later, under the floor", gap(2))
		}
		if c := cursorOf(ticks[0]); c != "null" {
			t.Errorf("first poll sent cursor %s, want null", c)
		}
		if c := cursorOf(ticks[4]); c != `"tick-fresh"` {
			t.Errorf("after truncated the next poll sent cursor %s, want the fresh one", c)
		}
		if got := seen; len(got) != 2 || got[0] != "tick-1" || got[1] != "tick-2" {
			t.Errorf("events %v, want tick-1 and tick-2", got)
		}
		lists := p.requests("events/list", "")
		if len(lists) < 2 || lists[len(lists)-1].at.Before(ticks[4].at) {
			t.Errorf("events/list not called again after list_changed (%d calls)", len(lists))
		}

		cursorless := p.requests("events/poll", cursorlessType)
		if len(cursorless) < 3 {
			t.Errorf("%d polls of %s: the client stopped after an answer without cursor", len(cursorless), cursorlessType)
		}
		for i, r := range cursorless {
			if c := cursorOf(r); c != "null" {
				t.Errorf("poll %d of %s sent cursor %s, want null", i, cursorlessType, c)
			}
		}
	})
}

// Mirrors the upstream client scenario events-client-no-extension: against a server that does
// not declare the extension, no events/* request is sent.
func TestNoRequestWithoutTheExtension(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPeer(t, "", events.DeliveryPoll, func(c *testpeer.Conn, m testpeer.Msg, _ int) bool {
			if m.Method == "events/poll" {
				c.Send(testpeer.Result(m.ID, `{"events":[],"cursor":null,"hasMore":false,"nextPollMs":1000}`))
				return true
			}
			return false
		})
		router := events.NewRouter()
		c := connect(t, p, router.Option())
		ctx := context.Background()
		calls := map[string]error{
			"List":     func() error { _, err := mcpclient.Collect(events.List(ctx, c)); return err }(),
			"Poll":     func() error { _, err := events.Poll(ctx, c, &events.PollParams{Name: replayType}); return err }(),
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
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, r := range p.got {
			if len(r.Method) >= 7 && r.Method[:7] == "events/" {
				t.Errorf("the client sent %s to a server without the extension", r.Method)
			}
		}
	})
}
