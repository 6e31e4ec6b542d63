package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient/internal/transporttest"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		header string
		want   time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{"0", 0},
		{"-5", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{now.Add(2 * time.Second).Format(time.RFC850), 2 * time.Second},
	} {
		if got := retryAfter(tt.header, now); got != tt.want {
			t.Errorf("retryAfter(%q) = %v, want %v", tt.header, got, tt.want)
		}
	}
}

// pipeServer serves h over in-memory connections (transporttest.PipeHTTP), h getting the
// requests with their bodies read, so that a request's context ends when the client hangs up.
func pipeServer(t *testing.T, h http.Handler) *http.Client {
	return transporttest.PipeHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		h.ServeHTTP(w, r)
	}))
}

// requestTimes records when a server saw each request of a kind.
type requestTimes struct {
	mu    sync.Mutex
	times []time.Time
}

func (r *requestTimes) add() {
	r.mu.Lock()
	r.times = append(r.times, time.Now())
	r.mu.Unlock()
}

func (r *requestTimes) all() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.times)
}

// between counts the requests seen in [from, to).
func (r *requestTimes) between(from, to time.Time) int {
	n := 0
	for _, at := range r.all() {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// funcReceiver is a Receiver that passes frames and failures to funcs, when set, and reports a
// frame's answer as a client does.
type funcReceiver struct {
	frame func(frame []byte)
	fail  func(err error)
}

func (r funcReceiver) Deliver(frame []byte, awaited string) bool {
	if r.frame != nil {
		r.frame(frame)
	}
	return transporttest.Answers(frame, awaited)
}

func (r funcReceiver) Fail(err error) {
	if r.fail != nil {
		r.fail(err)
	}
}

// listening connects to the server behind client and opens the GET stream, dropping what it
// delivers.
func listening(t *testing.T, client *http.Client) *httpConn {
	t.Helper()
	conn, err := (&HTTP{URL: "http://mcp.test/mcp", Client: client}).Connect(context.Background(), funcReceiver{})
	if err != nil {
		t.Fatal(err)
	}
	c := conn.(*httpConn)
	t.Cleanup(func() { c.Close() })
	c.Listen()
	return c
}

// A server asking for a 1 ms reconnection delay, sending an event and hanging up, again and
// again, gets no storm of GETs: the delay has a floor, and it doubles after every connection
// that did not stay up, up to a cap, for as long as the client lives.
func TestServerStreamReconnectionsBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var gets requestTimes
		n := 0
		client := pipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet {
				w.WriteHeader(http.StatusAccepted)
				return
			}
			gets.add()
			n++
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "retry: 1\nid: e%d\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n", n)
		}))
		start := time.Now()
		listening(t, client)
		time.Sleep(10 * time.Second)
		if got := gets.all(); len(got) > 8 {
			t.Fatalf("%d GETs in the first 10s", len(got))
		}
		time.Sleep(10*time.Minute - 10*time.Second)
		all := gets.all()
		if len(all) < 2 {
			t.Fatalf("%d GETs: the stream was not reopened", len(all))
		}
		if d := all[1].Sub(all[0]); d < minReconnectDelay {
			t.Errorf("reconnected after %v, under the floor of %v", d, minReconnectDelay)
		}
		for i := 2; i < len(all); i++ {
			prev, d := all[i-1].Sub(all[i-2]), all[i].Sub(all[i-1])
			if d < min(2*prev, maxReconnectDelay) {
				t.Errorf("wait %d: %v after %v, want it doubled up to %v", i, d, prev, maxReconnectDelay)
			}
		}
		// The stream is still wanted: it is reopened at the cap, no faster.
		last := start.Add(5 * time.Minute)
		if got := gets.between(last, last.Add(5*time.Minute)); got < 9 || got > 11 {
			t.Errorf("%d GETs in 5 minutes at the cap, want one every %v", got, maxReconnectDelay)
		}
	})
}

// A connection that stayed up resets the backoff, events or not: the server's own delay applies
// again, above the floor.
func TestServerStreamSteadyConnectionResetsTheBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var gets requestTimes
		client := pipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet {
				w.WriteHeader(http.StatusAccepted)
				return
			}
			gets.add()
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "retry: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-time.After(2 * steadyConnection):
			case <-r.Context().Done():
			}
		}))
		listening(t, client)
		time.Sleep(time.Minute)
		all := gets.all()
		if len(all) < 10 {
			t.Fatalf("%d GETs in a minute of connections of %v each", len(all), 2*steadyConnection)
		}
		for i := 1; i < len(all); i++ {
			if d := all[i].Sub(all[i-1]); d != 2*steadyConnection+minReconnectDelay {
				t.Errorf("GET %d came %v after the previous, want %v", i, d, 2*steadyConnection+minReconnectDelay)
			}
		}
	})
}

// A response stream polled by a server asking for 1 ms waits the floor between polls.
func TestResponseStreamResumptionHasAFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var gets requestTimes
		var mu sync.Mutex
		seq := 0
		client := pipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			seq++
			w.Header().Set("Content-Type", "text/event-stream")
			if r.Method == http.MethodGet {
				gets.add()
				if len(gets.all()) == 5 {
					fmt.Fprintf(w, "id: e%d\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n", seq)
					return
				}
			}
			fmt.Fprintf(w, "retry: 1\nid: e%d\ndata: \n\n", seq)
		}))
		answered := make(chan struct{})
		conn, err := (&HTTP{URL: "http://mcp.test/mcp", Client: client}).Connect(context.Background(), funcReceiver{
			frame: func(frame []byte) {
				if transporttest.Answers(frame, "1") {
					close(answered)
				}
			},
			fail: func(err error) { t.Errorf("exchange failed: %v", err) },
		})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		c := conn.(*httpConn)
		start := time.Now()
		if err := c.Send(context.Background(), &Message{Frame: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`), ID: "1", Method: "tools/call"}); err != nil {
			t.Fatal(err)
		}
		<-answered
		all := gets.all()
		if len(all) != 5 {
			t.Fatalf("%d polls, want 5", len(all))
		}
		// Every poll brought a new event id: the server is making progress, and gets the floor.
		prev := start
		for i, at := range all {
			if d := at.Sub(prev); d != minReconnectDelay {
				t.Errorf("poll %d came %v after the previous, want the floor of %v", i, d, minReconnectDelay)
			}
			prev = at
		}
	})
}

// exchangeEnd is how one request's exchange ended, as the connection reported it.
type exchangeEnd struct {
	err error
	at  time.Time
}

// sendInBubble connects to the server behind client with t's settings, sends request 1 and
// reports how its exchange ends: with Send's error, a failure pushed for it, or its answer.
func sendInBubble(t *testing.T, tr *HTTP) <-chan exchangeEnd {
	t.Helper()
	ended := make(chan exchangeEnd, 2)
	conn, err := tr.Connect(context.Background(), funcReceiver{
		frame: func(frame []byte) {
			if transporttest.Answers(frame, "1") {
				ended <- exchangeEnd{nil, time.Now()}
			}
		},
		fail: func(err error) { ended <- exchangeEnd{err, time.Now()} },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := conn.(*httpConn)
	go func() {
		if err := c.Send(context.Background(), &Message{Frame: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`), ID: "1", Method: "tools/call"}); err != nil {
			ended <- exchangeEnd{err, time.Now()}
		}
	}()
	return ended
}

// wantTimedOut checks that an exchange ended Uncertain with ErrResponseTimeout at want.
func wantTimedOut(t *testing.T, end exchangeEnd, want time.Time) {
	t.Helper()
	var te *Error
	if !errors.As(end.err, &te) || te.Outcome != Uncertain || te.ID != "1" || !errors.Is(end.err, ErrResponseTimeout) {
		t.Fatalf("the exchange ended with %v, want Uncertain with ErrResponseTimeout", end.err)
	}
	if !end.at.Equal(want) {
		t.Errorf("it ended after %v, want %v", end.at.Sub(want.Add(-1)), want)
	}
}

// A server that never answers a request ends it, by default after DefaultResponseHeaderTimeout:
// the request was written, so the outcome is uncertain.
func TestResponseHeaderTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		want    time.Duration // 0: no bound
	}{
		{"default", 0, DefaultResponseHeaderTimeout},
		{"set", 2 * time.Second, 2 * time.Second},
		{"off", -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				client := pipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method == http.MethodPost {
						<-r.Context().Done()
					}
				}))
				start := time.Now()
				ended := sendInBubble(t, &HTTP{URL: "http://mcp.test/mcp", Client: client, ResponseHeaderTimeout: tc.timeout})
				select {
				case end := <-ended:
					if tc.want == 0 {
						t.Fatalf("the exchange ended with %v after %v, with no bound", end.err, end.at.Sub(start))
					}
					wantTimedOut(t, end, start.Add(tc.want))
				case <-time.After(time.Hour):
					if tc.want != 0 {
						t.Fatal("the request still waits for its answer after an hour")
					}
				}
			})
		})
	}
}

// A response that stops bringing anything ends its exchange: a JSON body without a byte, an SSE
// stream without a message (keepalive comments and events of other types are none). One that
// brings messages, progress say, is not cut however long it takes.
func TestResponseIdleTimeout(t *testing.T) {
	const progress = `data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}` + "\n\n"
	keepalives := func(w http.ResponseWriter, r *http.Request, every time.Duration, what string) {
		for {
			io.WriteString(w, what)
			w.(http.Flusher).Flush()
			select {
			case <-time.After(every):
			case <-r.Context().Done():
				return
			}
		}
	}
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		serve   func(w http.ResponseWriter, r *http.Request)
		want    time.Duration // 0: answered
	}{
		{"json body stalls", 0, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0",`)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, DefaultResponseIdleTimeout},
		// The watchdog notes each read and looks at the time only when its timer fires: a body
		// trickling for longer than the bound is not cut, and one that stalls after trickling
		// is cut the bound after its last byte, not after its first.
		{"json body trickles", 0, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0",`)
			for range 10 {
				w.(http.Flusher).Flush()
				time.Sleep(2 * time.Minute)
				io.WriteString(w, " ")
			}
			io.WriteString(w, `"id":1,"result":{}}`)
		}, 0},
		{"json body stalls after trickling", 0, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0",`)
			for range 3 {
				w.(http.Flusher).Flush()
				time.Sleep(2 * time.Minute)
				io.WriteString(w, " ")
			}
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, 6*time.Minute + DefaultResponseIdleTimeout},
		{"sse comments", 0, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			keepalives(w, r, time.Second, ": keepalive\n\n")
		}, DefaultResponseIdleTimeout},
		// The stream has an event id, and is not resumed: it would be as quiet again.
		{"sse other events after progress", 3 * time.Second, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "id: e1\n"+progress)
			w.(http.Flusher).Flush()
			time.Sleep(time.Second)
			keepalives(w, r, time.Second, "event: ping\ndata: {}\n\n")
		}, 3 * time.Second},
		{"sse progress", 0, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for range 20 {
				io.WriteString(w, progress)
				w.(http.Flusher).Flush()
				time.Sleep(time.Minute)
			}
			io.WriteString(w, `data: {"jsonrpc":"2.0","id":1,"result":{}}`+"\n\n")
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				client := pipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method != http.MethodPost {
						w.WriteHeader(http.StatusMethodNotAllowed)
						return
					}
					tc.serve(w, r)
				}))
				start := time.Now()
				ended := sendInBubble(t, &HTTP{URL: "http://mcp.test/mcp", Client: client, ResponseIdleTimeout: tc.timeout})
				select {
				case end := <-ended:
					if tc.want == 0 {
						if end.err != nil {
							t.Fatalf("the exchange ended with %v, want its answer", end.err)
						}
						return
					}
					wantTimedOut(t, end, start.Add(tc.want))
				case <-time.After(time.Hour):
					t.Fatal("the exchange still waits after an hour")
				}
			})
		})
	}
}

// The GET stream is meant to be quiet: a server that only keeps it alive keeps it open.
func TestServerStreamHasNoIdleBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var gets requestTimes
		client := pipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			gets.add()
			w.Header().Set("Content-Type", "text/event-stream")
			for {
				io.WriteString(w, ": keepalive\n\n")
				w.(http.Flusher).Flush()
				select {
				case <-time.After(time.Minute):
				case <-r.Context().Done():
					return
				}
			}
		}))
		listening(t, client)
		time.Sleep(time.Hour)
		if n := len(gets.all()); n != 1 {
			t.Errorf("%d GETs in an hour of a quiet stream, want 1", n)
		}
	})
}

// The values of the headers a request carries share one array; a RoundTripper that appends to
// one of them, or rewrites it in place, leaves the others as they were.
func TestHeaderValuesStayApart(t *testing.T) {
	h := http.Header{}
	hv := headerValues{h: h, vals: make([]string, 0, 4)}
	hv.set("Content-Type", "application/json")
	hv.set("Accept", "text/event-stream")
	hv.set("Mcp-Session-Id", "abc")
	h.Add("Content-Type", "text/plain")
	h["Accept"][0] = "*/*"
	h.Add("Accept", "application/json")
	want := http.Header{
		"Content-Type":   {"application/json", "text/plain"},
		"Accept":         {"*/*", "application/json"},
		"Mcp-Session-Id": {"abc"},
	}
	for k, v := range want {
		if !slices.Equal(h[k], v) {
			t.Errorf("%s = %q, want %q", k, h[k], v)
		}
	}
}

// The media type of an answer reads as mime.ParseMediaType reads it, whatever the header holds.
func FuzzMediaTypeOf(f *testing.F) {
	for _, v := range []string{"application/json", "text/event-stream", "application/json; charset=utf-8",
		"Application/JSON", " text/event-stream ;charset=utf-8", "application/json;", "application/json; =bad",
		"application/json garbage", "application/jsonx", "text/event-stream,application/json", "", ";", "text/html"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		want, _, _ := mime.ParseMediaType(v)
		if got := mediaTypeOf(v); got != want {
			t.Errorf("mediaTypeOf(%q) = %q, mime.ParseMediaType reads %q", v, got, want)
		}
	})
}

// The endpoint checked last is remembered, and its answer is the one a check would give: an
// endpoint that is no http or https URL is refused whatever came before it.
func TestEndpointURL(t *testing.T) {
	for range 2 {
		for _, c := range []struct {
			raw, url string
			ok       bool
		}{
			{"http://127.0.0.1:1/mcp", "http://127.0.0.1:1/mcp", true},
			{"http://127.0.0.1:1/mcp", "http://127.0.0.1:1/mcp", true},
			{"HTTPS://example.com/a b", "https://example.com/a%20b", true},
			{"HTTPS://example.com/a b", "https://example.com/a%20b", true},
			{"ftp://example.com/mcp", "", false},
			{"ftp://example.com/mcp", "", false},
			{"/mcp", "", false},
			{"http://127.0.0.1:1/mcp", "http://127.0.0.1:1/mcp", true},
		} {
			if got, ok := endpointURL(c.raw); got != c.url || ok != c.ok {
				t.Errorf("endpointURL(%q) = %q, %v; want %q, %v", c.raw, got, ok, c.url, c.ok)
			}
		}
	}
}
