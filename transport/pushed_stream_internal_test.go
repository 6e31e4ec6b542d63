package transport

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
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

func pushedConn(t *testing.T, url string) (*httpConn, <-chan []byte) {
	t.Helper()
	conn, err := (&HTTP{URL: url}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := conn.(*httpConn)
	frames := make(chan []byte, 8)
	c.Push(func(frame []byte, err error) {
		if err == nil {
			frames <- frame
		}
	})
	return c, frames
}

// With a pushing client, Send reads an SSE answer on the caller's goroutine: the answer has been
// pushed when Send returns, and a server that keeps the stream open after it holds nobody.
func TestPushedSSEAnswerIsDeliveredBeforeSendReturns(t *testing.T) {
	ended := make(chan struct{})
	srv := httptest.NewServer(answerThenHold(ended))
	t.Cleanup(srv.Close) // after the connection's, which ends the held stream
	c, frames := pushedConn(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Send(ctx, &Message{Frame: []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), ID: "1", Method: "ping"}); err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-frames:
		if string(f) != `{"jsonrpc":"2.0","id":1,"result":{}}` {
			t.Fatalf("pushed %s", f)
		}
	default:
		t.Fatal("Send returned before the answer was pushed")
	}
	if ctx.Err() != nil {
		t.Fatal("Send was held by the open stream")
	}
}

// The rest of a response stream is read for a while after its answer, whatever the caller does
// with its context, and then closed.
func TestStreamOpenAfterItsAnswerIsClosed(t *testing.T) {
	saved := afterAnswerTimeout
	t.Cleanup(func() { afterAnswerTimeout = saved }) // last: the connection's Close waits for its readers
	afterAnswerTimeout = 20 * time.Millisecond
	ended := make(chan struct{})
	srv := httptest.NewServer(answerThenHold(ended))
	t.Cleanup(srv.Close)
	c, _ := pushedConn(t, srv.URL)
	if err := c.Send(context.Background(), &Message{Frame: []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), ID: "1", Method: "ping"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream is still open")
	}
}
