package events_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/events"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The two event types every scripted server lists, as the upstream client scenarios do: one
// that replays from a cursor, one whose every cursor is null.
const (
	replayType     = "conformance.ticks"
	cursorlessType = "conformance.cursorless"
)

// initWith is an initialize answer whose capabilities declare the extension with settings, or
// not at all when settings is "".
func initWith(settings string) string {
	caps := `{"tools":{}}`
	if settings != "" {
		caps = `{"tools":{},"extensions":{"` + events.ExtensionID + `":` + settings + `}}`
	}
	return `{"protocolVersion":"2025-11-25","capabilities":` + caps + `,"serverInfo":{"name":"events","version":"0"}}`
}

// received is one message the scripted server got, and when (in the bubble's time).
type received struct {
	testpeer.Msg
	at time.Time
}

// peer is a scripted events server over in-memory connections. serve answers the events/*
// requests other than events/list (which lists both types, each offering mode); it runs on the
// connection's reading goroutine and reports whether it answered.
type peer struct {
	*testpeer.Pipe
	mode  events.DeliveryMode
	serve func(c *testpeer.Conn, m testpeer.Msg, n int) bool // n: how many requests of m's method and name came before

	mu  sync.Mutex
	got []received
}

func newPeer(t *testing.T, settings string, mode events.DeliveryMode, serve func(c *testpeer.Conn, m testpeer.Msg, n int) bool) *peer {
	p := &peer{mode: mode, serve: serve}
	p.Pipe = testpeer.NewPipe(t, p.script, testpeer.WithInit(initWith(settings)))
	return p
}

func (p *peer) script(c *testpeer.Conn, m testpeer.Msg) bool {
	p.mu.Lock()
	n := 0
	for _, r := range p.got {
		if r.Method == m.Method && string(r.Param("name")) == string(m.Param("name")) {
			n++
		}
	}
	p.got = append(p.got, received{m, time.Now()})
	p.mu.Unlock()
	if m.Method == "events/list" {
		c.Send(testpeer.Result(m.ID, fmt.Sprintf(`{"events":[%s,%s]}`, descriptor(replayType, p.mode), descriptor(cursorlessType, p.mode))))
		return true
	}
	return p.serve != nil && p.serve(c, m, n)
}

func descriptor(name string, mode events.DeliveryMode) string {
	return `{"name":"` + name + `","description":"d","delivery":["` + string(mode) + `"],"inputSchema":{"type":"object","properties":{}}}`
}

// requests returns the requests of method for the event type name ("" for any), in order.
func (p *peer) requests(method, name string) []received {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []received
	for _, r := range p.got {
		if r.Method == method && (name == "" || string(r.Param("name")) == `"`+name+`"`) {
			out = append(out, r)
		}
	}
	return out
}

// cursorOf returns the cursor a request carried, absent read as null.
func cursorOf(r received) string {
	c := r.Param("cursor")
	if c == nil {
		return "null"
	}
	return string(c)
}

func connect(t *testing.T, p *peer, opts ...mcpclient.Option) *mcpclient.Client {
	t.Helper()
	c, err := mcpclient.Connect(context.Background(), p.Transport(), opts...)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { c.Close(); p.Wait() })
	return c
}
