package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/transport"
)

// routeFuzzServer is a scripted server on the far end of a transport.Pipe. It answers
// initialize, ignores notifications and the client's answers to server requests, and answers
// each ping with garbage first and then the ping's proper response.
type routeFuzzServer struct {
	conn    *transport.MemoryConn
	garbage []byte
	done    chan struct{}

	mu         sync.Mutex
	pings      int
	unexpected []string
}

func (s *routeFuzzServer) serve() {
	defer close(s.done)
	ctx := context.Background()
	for {
		frame, err := s.conn.Receive(ctx)
		if err != nil {
			if !errors.Is(err, transport.ErrClosed) {
				s.note("Receive: %v", err)
			}
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.Unmarshal(frame, &m); err != nil {
			s.note("client sent a frame that is no JSON object: %q: %v", frame, err)
			continue
		}
		var out [][]byte
		switch {
		case m.Method == "":
			// The client's answer to a request the garbage carried.
		case m.Method == "notifications/initialized":
		case m.Method == "server/discover" && m.ID != nil: // a legacy server: the client falls back
			out = append(out, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, m.ID))
		case m.Method == "initialize" && m.ID != nil:
			out = append(out, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"fake","version":"0"}}}`, m.ID))
		case m.Method == "ping" && m.ID != nil:
			s.mu.Lock()
			s.pings++
			s.mu.Unlock()
			out = append(out, s.garbage, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID))
		default:
			s.note("unexpected frame from the client: %q", frame)
		}
		for _, b := range out {
			if err := s.conn.Send(ctx, &transport.Message{Frame: b}); err != nil {
				if !errors.Is(err, transport.ErrClosed) {
					s.note("Send: %v", err)
				}
				return
			}
		}
	}
}

func (s *routeFuzzServer) note(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unexpected = append(s.unexpected, fmt.Sprintf(format, args...))
}

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

		var (
			dialMu sync.Mutex
			dials  int
			srv    *routeFuzzServer
		)
		dial := transport.DialFunc(func(ctx context.Context) (transport.Conn, error) {
			dialMu.Lock()
			defer dialMu.Unlock()
			dials++
			if dials > 1 {
				// The session must survive the garbage: a reconnect means it did not.
				return nil, &transport.Error{Outcome: transport.NotDelivered, Err: errors.New("fake server accepts one connection")}
			}
			client, server := transport.Pipe()
			srv = &routeFuzzServer{conn: server, garbage: garbage, done: make(chan struct{})}
			go srv.serve()
			return client, nil
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
		select {
		case <-srv.done:
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
		srv.mu.Lock()
		defer srv.mu.Unlock()
		if srv.pings != 1 {
			t.Errorf("server saw %d pings, want 1", srv.pings)
		}
		for _, u := range srv.unexpected {
			t.Errorf("fake server: %s", u)
		}
	})
}
