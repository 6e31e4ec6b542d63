package mcpclient_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/transport"
)

func FuzzClientRoute(f *testing.F) {
	for _, seed := range []string{
		``,
		`{`,
		`not json at all`,
		`{"jsonrpc":"2.0","id":"00000000-0000-0000-0000-000000000000","result":{}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"nobody asked"}}`,
		`{"jsonrpc":"2.0","id":"x","error":"not an object"}`,
		`{"jsonrpc":"2.0","id":{"a":1},"result":{}}`,
		`{"jsonrpc":"2.0","id":null,"result":null}`,
		`[{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}},{"jsonrpc":"2.0","id":2,"result":{}},{"jsonrpc":"2.0","id":3,"method":"ping"}]`,
		`[]`,
		`[1,null,"x"]`,
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"s-1","method":"sampling/createMessage","params":{}}`,
		`{"jsonrpc":"2.0","id":[1,{"x":null}],"method":"ping"}`,
		`{"jsonrpc":"1.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}`,
		strings.Repeat("[", 12000) + strings.Repeat("]", 12000),
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + strings.Repeat("x", 1<<16) + `"}}`,
		"[" + strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"ping"},`, 200) + `{"jsonrpc":"2.0","method":"n"}]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, garbage []byte) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()

		// The server answers initialize, ignores notifications and the client's answers to
		// server requests, and answers each ping with the garbage first and then the ping's
		// proper response.
		var pings atomic.Int32
		srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
			switch {
			case m.Method == "":
				// The client's answer to a request the garbage carried.
			case m.Method == "notifications/initialized":
			case (m.Method == "server/discover" || m.Method == "initialize") && m.ID != nil:
				return false // the defaults: server/discover refused (the client falls back), initialize answered
			case m.Method == "ping" && m.ID != nil:
				pings.Add(1)
				for _, frame := range []string{string(garbage), testpeer.Result(m.ID, `{}`)} {
					if err := p.Send(frame); err != nil {
						if !errors.Is(err, transport.ErrClosed) {
							t.Errorf("fake server: Send: %v", err)
						}
						break
					}
				}
			default:
				t.Errorf("fake server: unexpected frame from the client: %+v", m)
			}
			return true
		})
		var (
			dialMu sync.Mutex
			dials  int
		)
		dial := transport.DialFunc(func(ctx context.Context, r transport.Receiver) (transport.Conn, error) {
			dialMu.Lock()
			defer dialMu.Unlock()
			dials++
			if dials > 1 {
				// The session must survive the garbage: a reconnect means it did not.
				return nil, &transport.Error{Outcome: transport.NotDelivered, Err: errors.New("fake server accepts one connection")}
			}
			return srv.Transport().Connect(ctx, r)
		})

		c, err := mcpclient.Connect(ctx, dial)
		if err != nil {
			t.Fatalf("Connect: %v", err)
		}
		pingErr := c.Ping(ctx)

		closed := make(chan struct{})
		go func() {
			c.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-ctx.Done():
			t.Fatalf("Close did not return (garbage %.200q)", garbage)
		}
		served := make(chan struct{})
		go func() {
			srv.Wait()
			close(served)
		}()
		select {
		case <-served:
		case <-ctx.Done():
			t.Fatal("the fake server did not see the pipe close")
		}

		if pingErr != nil {
			t.Errorf("Ping after garbage %.200q: %v", garbage, pingErr)
		}
		dialMu.Lock()
		if dials != 1 {
			t.Errorf("client dialed %d times, want 1 (garbage %.200q)", dials, garbage)
		}
		dialMu.Unlock()
		if n := pings.Load(); n != 1 {
			t.Errorf("server saw %d pings, want 1", n)
		}
	})
}
