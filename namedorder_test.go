package mcpclient_test

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
)

// The notifications that name a call by io.modelcontextprotocol/subscriptionId, sent before its
// answer, are handled before Do returns, even when the dispatcher is still busy with a slow
// handler of an earlier notification as the answer comes: a caller that stops listening when its
// stream request ends must not lose them. A notification naming no call is not waited for.
func TestNotificationsNamingACallAreHandledBeforeItReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testpeer.NewPipe(t, func(c *testpeer.Conn, m testpeer.Msg) bool {
			if m.Method != "events/stream" {
				return false
			}
			named := `"_meta":{"io.modelcontextprotocol/subscriptionId":` + string(m.ID) + `}`
			c.Send(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"slow"}}`)
			c.Send(`{"jsonrpc":"2.0","method":"notifications/events/event","params":{"n":1,` + named + `}}`)
			c.Send(`{"jsonrpc":"2.0","method":"notifications/events/event","params":{"n":2,` + named + `}}`)
			c.Send(`{"jsonrpc":"2.0","method":"notifications/events/unnamed","params":{}}`)
			c.Send(testpeer.Result(m.ID, `{}`))
			return true
		})
		handled := 0
		unnamed := make(chan struct{})
		c, err := mcpclient.Connect(context.Background(), srv.Transport(),
			mcpclient.WithLogHandler(func(context.Context, *mcpclient.LogMessage) { time.Sleep(time.Second) }),
			mcpclient.WithNotificationHandler("notifications/events/event", func(context.Context, string, json.RawMessage) { handled++ }),
			mcpclient.WithNotificationHandler("notifications/events/unnamed", func(context.Context, string, json.RawMessage) { close(unnamed) }))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req, err := c.NewRequest("events/stream", map[string]string{"name": "ticks"})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := c.Do(context.Background(), req); err != nil {
			t.Fatalf("Do: %v", err)
		}
		if handled != 2 {
			t.Errorf("Do returned when %d of the 2 notifications naming it had been handled", handled)
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("Do returned after %v, want the second the slow handler took", d)
		}
		<-unnamed
	})
}
