package transport_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient/internal/transporttest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// answerThenHold answers a POST with an SSE stream holding the answer to the request with id
// "1" and then keeps the stream open until the request ends; ended is closed then.
func answerThenHold(ended chan<- struct{}) http.Handler {
	var once sync.Once
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: e1\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		once.Do(func() { close(ended) })
	})
}

// httpConn connects to url with tr and returns the connection and what it delivers.
func httpConn(t *testing.T, tr *transport.HTTP) (transport.Conn, *transporttest.Queue) {
	t.Helper()
	q := new(transporttest.Queue)
	conn, err := tr.Connect(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, q
}

// Send reads an SSE answer on the caller's goroutine: the answer has been delivered when Send
// returns, and a server that keeps the stream open after it holds nobody.
func TestSSEAnswerIsDeliveredBeforeSendReturns(t *testing.T) {
	ended := make(chan struct{})
	srv := httptest.NewServer(answerThenHold(ended))
	t.Cleanup(srv.Close) // after the connection's, which ends the held stream
	c, q := httpConn(t, &transport.HTTP{URL: srv.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Send(ctx, &transport.Message{Frame: []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), ID: "1", Method: "ping"}); err != nil {
		t.Fatal(err)
	}
	if q.Len() == 0 {
		t.Fatal("Send returned before the answer was delivered")
	}
	if f, err := q.Receive(ctx); err != nil || string(f) != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Fatalf("delivered %s, %v", f, err)
	}
	if ctx.Err() != nil {
		t.Fatal("Send was held by the open stream")
	}
}

// The rest of a response stream is read for a while after its answer, whatever the caller does
// with its context, and then closed.
func TestStreamOpenAfterItsAnswerIsClosed(t *testing.T) {
	ended := make(chan struct{})
	srv := httptest.NewServer(answerThenHold(ended))
	t.Cleanup(srv.Close)
	tr := &transport.HTTP{URL: srv.URL}
	transport.SetAfterAnswerTimeout(tr, 20*time.Millisecond)
	c, _ := httpConn(t, tr)
	if err := c.Send(context.Background(), &transport.Message{Frame: []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), ID: "1", Method: "ping"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream is still open")
	}
}

// The requests a connection makes on its own, the GET stream and the DELETE at Close, carry the
// session header the client set, so that a gateway checking every request lets them through.
func TestSessionHeaderReachesGETAndDELETE(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Method] = r.Header.Get("X-Token")
		mu.Unlock()
		switch r.Method {
		case http.MethodPost:
			w.Header().Set("Mcp-Session-Id", "s1")
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
		case http.MethodGet:
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
	}))
	t.Cleanup(srv.Close)
	c, _ := httpConn(t, &transport.HTTP{URL: srv.URL})
	sc := c.(transport.SessionHeaderConn)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Send(ctx, &transport.Message{Frame: []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`), ID: "1", Method: "initialize",
		Header: http.Header{"X-Token": {"post"}}}); err != nil {
		t.Fatal(err)
	}
	sc.SetSessionHeader(http.Header{"X-Token": {"session"}})
	sc.Listen()
	c.Close()
	mu.Lock()
	defer mu.Unlock()
	if want := map[string]string{"POST": "post", "GET": "session", "DELETE": "session"}; fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("X-Token by HTTP method: %v, want %v", seen, want)
	}
}
