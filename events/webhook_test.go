package events_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/events"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
)

// Mirrors the upstream client scenario events-client-webhook: every grant expires 2.5s out; the
// client refreshes each subscription under the same key before its grant expires, and never
// replays a null cursor.
func TestKeepSubscribedConformance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var grants []time.Time // of the replay type, in order
		p := newPeer(t, `{}`, events.DeliveryWebhook, func(c *testpeer.Conn, m testpeer.Msg, n int) bool {
			if m.Method != "events/subscribe" {
				return false
			}
			refreshBefore := time.Now().Add(2500 * time.Millisecond)
			cursor := "null"
			if string(m.Param("name")) == `"`+replayType+`"` {
				grants = append(grants, refreshBefore)
				cursor = `"w-` + strconv.Itoa(n) + `"`
			}
			c.Send(testpeer.Result(m.ID, `{"id":"sub-1","cursor":`+cursor+`,"refreshBefore":"`+refreshBefore.UTC().Format(time.RFC3339Nano)+`"}`))
			return true
		})
		c := connect(t, p, events.NewRouter().Option())
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		defer cancel()

		done := make(chan error, 1)
		go func() {
			done <- events.KeepSubscribed(ctx, c, events.SubscribeParams{Name: cursorlessType,
				Delivery: events.WebhookDelivery{URL: "https://hooks.example/b", Secret: events.NewSecret()}}, nil)
		}()
		params := events.SubscribeParams{Name: replayType, Arguments: map[string]any{"severity": "P1"},
			Delivery: events.WebhookDelivery{URL: "https://hooks.example/a", Secret: events.NewSecret()}, TTL: time.Hour}
		if err := events.KeepSubscribed(ctx, c, params, nil); err != nil {
			t.Fatalf("KeepSubscribed: %v", err)
		}
		if err := <-done; err != nil {
			t.Fatalf("KeepSubscribed of the cursorless type: %v", err)
		}

		subs := p.requests("events/subscribe", replayType)
		if len(subs) < 3 {
			t.Fatalf("%d subscribes of %s in 8s of 2.5s grants: no refresh", len(subs), replayType)
		}
		for i, r := range subs {
			if i > 0 && !r.at.Before(grants[i-1]) {
				t.Errorf("refresh %d came %v after the grant expired", i, r.at.Sub(grants[i-1]))
			}
			for _, key := range []string{"name", "arguments", "delivery"} {
				if string(r.Param(key)) != string(subs[0].Param(key)) {
					t.Errorf("refresh %d changed %s: %s, then %s", i, key, subs[0].Param(key), r.Param(key))
				}
			}
			want := "null"
			if i > 0 {
				want = `"w-` + strconv.Itoa(i-1) + `"`
			}
			if c := cursorOf(r); c != want {
				t.Errorf("subscribe %d sent cursor %s, want %s", i, c, want)
			}
			if ttl := string(r.Param("ttlMs")); ttl != "3600000" {
				t.Errorf("subscribe %d sent ttlMs %s, want 3600000", i, ttl)
			}
		}
		if mode := string(subs[0].Param("delivery")); !strings.Contains(mode, `"mode":"webhook"`) {
			t.Errorf("delivery %s names no webhook mode", mode)
		}
		later := p.requests("events/subscribe", cursorlessType)
		if len(later) < 2 {
			t.Fatalf("%d subscribes of %s, want refreshes", len(later), cursorlessType)
		}
		for i, r := range later {
			if c := cursorOf(r); c != "null" {
				t.Errorf("subscribe %d of %s sent cursor %s, want null", i, cursorlessType, c)
			}
		}
	})
}

// Subscribe refuses locally what the server must refuse: a callback that is not https, a
// secret that is not whsec_ and the base64 of 24 to 64 bytes. NewSecret makes valid ones.
func TestSubscribeRefusesLocally(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPeer(t, `{}`, events.DeliveryWebhook, nil)
		c := connect(t, p)
		short := "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 16))
		for name, d := range map[string]events.WebhookDelivery{
			"http":         {URL: "http://hooks.example/a", Secret: events.NewSecret()},
			"no prefix":    {URL: "https://hooks.example/a", Secret: "secret"},
			"short secret": {URL: "https://hooks.example/a", Secret: short},
		} {
			_, err := events.Subscribe(context.Background(), c, &events.SubscribeParams{Name: replayType, Delivery: d})
			if mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument {
				t.Errorf("%s: error %v, want CodeInvalidArgument", name, err)
			}
		}
		if n := len(p.requests("events/subscribe", "")); n != 0 {
			t.Errorf("%d subscribes sent", n)
		}
		s := events.NewSecret()
		b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		if !strings.HasPrefix(s, "whsec_") || err != nil || len(b) != 32 || s == events.NewSecret() {
			t.Errorf("NewSecret = %q (%v)", s, err)
		}
	})
}

// The extension's JSON-RPC errors are matched by their sentinels, keeping the client's error
// (its code, the *RPCError) in the chain; Unsubscribe sends the subscription's key.
func TestErrorsAndUnsubscribe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		codes := map[string]int{"a": events.CodeNotFound, "b": events.CodeForbidden, "c": events.CodeResourceExhausted,
			"d": events.CodeUnsupported, "e": events.CodeCallbackEndpointError, "f": -32602}
		p := newPeer(t, `{}`, events.DeliveryPoll, func(c *testpeer.Conn, m testpeer.Msg, _ int) bool {
			switch m.Method {
			case "events/poll":
				name := string(m.Param("name"))
				c.Send(testpeer.Error(m.ID, codes[name[1:len(name)-1]], "refused"))
			case "events/unsubscribe":
				c.Send(testpeer.Result(m.ID, `{}`))
			default:
				return false
			}
			return true
		})
		c := connect(t, p)
		ctx := context.Background()
		want := map[string]error{"a": events.ErrNotFound, "b": events.ErrForbidden, "c": events.ErrResourceExhausted,
			"d": events.ErrUnsupported, "e": events.ErrCallbackEndpoint}
		all := []error{events.ErrNotFound, events.ErrForbidden, events.ErrResourceExhausted, events.ErrUnsupported, events.ErrCallbackEndpoint}
		for name := range codes {
			_, err := events.Poll(ctx, c, &events.PollParams{Name: name})
			var rpc *mcpclient.RPCError
			if !errors.As(err, &rpc) || rpc.Code != int64(codes[name]) || mcpclient.CodeOf(err) != mcpclient.CodeServerError {
				t.Errorf("%s: error %v, want the server's error", name, err)
			}
			for _, s := range all {
				if errors.Is(err, s) != (s == want[name]) {
					t.Errorf("%s: errors.Is(%v, %v) = %v", name, err, s, errors.Is(err, s))
				}
			}
		}
		if err := events.Unsubscribe(ctx, c, replayType, map[string]any{"severity": "P1"}, "https://hooks.example/a"); err != nil {
			t.Fatalf("Unsubscribe: %v", err)
		}
		r := p.requests("events/unsubscribe", replayType)
		if len(r) != 1 || string(r[0].Param("delivery")) != `{"url":"https://hooks.example/a"}` || string(r[0].Param("arguments")) != `{"severity":"P1"}` {
			t.Errorf("events/unsubscribe params: %v", r)
		}
	})
}

// events/list is paginated as tools/list is; List follows nextCursor.
func TestListPaginates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPeer(t, `{}`, events.DeliveryPoll, nil)
		p.Pipe = testpeer.NewPipe(t, func(c *testpeer.Conn, m testpeer.Msg) bool {
			if m.Method != "events/list" {
				return false
			}
			if string(m.Param("cursor")) == `"page2"` {
				c.Send(testpeer.Result(m.ID, `{"events":[`+descriptor(cursorlessType, events.DeliveryPush)+`]}`))
			} else {
				c.Send(testpeer.Result(m.ID, `{"events":[`+descriptor(replayType, events.DeliveryPoll)+`],"nextCursor":"page2"}`))
			}
			return true
		}, testpeer.WithInit(initWith(`{"listChanged":true}`)))
		c := connect(t, p)
		s, ok := events.Declared(mustSession(t, c).Capabilities)
		if !ok || !s.ListChanged {
			t.Errorf("Declared = %+v, %v", s, ok)
		}
		types, err := mcpclient.Collect(events.List(context.Background(), c))
		if err != nil || len(types) != 2 || types[0].Name != replayType || types[1].Name != cursorlessType || !types[1].Supports(events.DeliveryPush) {
			t.Fatalf("List = %v, %v", types, err)
		}
	})
}

func mustSession(t *testing.T, c *mcpclient.Client) mcpclient.InitializeResult {
	t.Helper()
	init, err := c.Session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return init
}
