package testpeer_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/internal/transporttest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// TestMain fails the run when a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Idle pooled HTTP connections keep net/http's goroutines; they are the pool's.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
}

// usable connects a client to tr and checks the defaults: the handshake, a tool call answered
// "ok", and a ping.
func usable(t *testing.T, tr transport.Transport) *mcpclient.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := mcpclient.Connect(ctx, tr)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	res, err := c.CallTool(ctx, "anything", nil)
	if err != nil || res.Text() != "ok" {
		t.Fatalf("call: %v, %v; want the default answer", res, err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	return c
}

func TestPipeDefaultsAndScript(t *testing.T) {
	for name, opts := range map[string][]testpeer.Option{"frames": nil, "lines": {testpeer.Lines(0)}} {
		t.Run(name, func(t *testing.T) {
			seen := make(chan string, 16)
			p := testpeer.NewPipe(t, func(c *testpeer.Conn, m testpeer.Msg) bool {
				seen <- m.Method
				if m.Method == "tools/call" && string(m.Param("name")) == `"mine"` {
					c.Send(testpeer.Result(m.ID, `{"content":[{"type":"text","text":"scripted"}]}`))
					return true
				}
				return false
			}, opts...)
			c := usable(t, p.Transport())
			res, err := c.CallTool(context.Background(), "mine", nil)
			if err != nil || res.Text() != "scripted" {
				t.Fatalf("call: %v, %v; want the script's answer", res, err)
			}
			c.Close()
			p.Wait()
			close(seen)
			var methods []string
			for m := range seen {
				methods = append(methods, m)
			}
			if len(methods) < 5 || methods[0] != "server/discover" || methods[1] != "initialize" {
				t.Errorf("the script saw %v, want every message from the handshake on", methods)
			}
			if n := p.Opened(); n != 1 {
				t.Errorf("%d connections, want 1", n)
			}
		})
	}
}

func TestPipeHangUpRefusesConnections(t *testing.T) {
	p := testpeer.NewPipe(t, nil)
	usable(t, p.Transport())
	p.HangUp()
	if _, err := p.Transport().Connect(context.Background(), new(transporttest.Queue)); transport.OutcomeOf(err) != transport.NotDelivered {
		t.Fatalf("connect after the hang-up: %v, want a refusal", err)
	}
}

func TestHTTPDefaultsAndScript(t *testing.T) {
	srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		if r.Method == "tools/call" && string(r.Param("name")) == `"mine"` {
			r.SSE()("e1", testpeer.Result(r.ID, `{"content":[{"type":"text","text":"scripted"}]}`))
			return true
		}
		return false
	})
	c := usable(t, &transport.HTTP{URL: srv.URL})
	if c.SessionID() != testpeer.SessionID {
		t.Errorf("session %q, want %q", c.SessionID(), testpeer.SessionID)
	}
	res, err := c.CallTool(context.Background(), "mine", nil)
	if err != nil || res.Text() != "scripted" {
		t.Fatalf("call: %v, %v; want the script's answer", res, err)
	}
	c.Close()
	if n := srv.Count("tools/call"); n != 2 {
		t.Errorf("%d tools/call counted, want 2", n)
	}
	reqs := srv.Requests()
	if last := reqs[len(reqs)-1]; last.HTTPMethod != http.MethodDelete || last.Header.Get("Mcp-Session-Id") != testpeer.SessionID {
		t.Errorf("last request %s %v, want the DELETE of the session", last.HTTPMethod, last.Header)
	}
}

func TestHTTPStateless(t *testing.T) {
	srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		if r.Method == "tools/call" {
			r.Reply(http.StatusOK, `"result":{"resultType":"complete","content":[{"type":"text","text":"ok"}]}`)
			return true
		}
		return false
	}, testpeer.Stateless())
	c := usable(t, &transport.HTTP{URL: srv.URL})
	if c.ProtocolVersion() != mcpclient.ProtocolVersion20260728 || c.SessionID() != "" || c.ServerInfo().Name != "stateless" {
		t.Errorf("protocol %q, session %q, server %q: want a stateless session", c.ProtocolVersion(), c.SessionID(), c.ServerInfo().Name)
	}
}

func TestHTTPLegacy(t *testing.T) {
	srv := testpeer.NewHTTP(t, nil, testpeer.Legacy("s1"))
	c := usable(t, &transport.SSE{URL: srv.URL + "/sse"})
	if c.ProtocolVersion() != mcpclient.ProtocolVersion20241105 {
		t.Errorf("protocol %q, want 2024-11-05", c.ProtocolVersion())
	}
}
