package transport_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient/internal/transporttest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// pipeBuffer mirrors the frames a Pipe holds for its server; fillPipe relies on it.
const pipeBuffer = 16

// newPipe returns a pipe whose client end delivers to the queue returned; the client end is
// closed at the end of the test.
func newPipe(t *testing.T) (client transport.Conn, server *transport.MemoryConn, q *transporttest.Queue) {
	t.Helper()
	q = new(transporttest.Queue)
	client, server = transport.Pipe(q)
	t.Cleanup(func() { client.Close() })
	return client, server, q
}

func send(t *testing.T, c transport.Conn, frame string) {
	t.Helper()
	if err := c.Send(context.Background(), &transport.Message{Frame: []byte(frame)}); err != nil {
		t.Fatalf("Send(%s): %v", frame, err)
	}
}

// receive returns the next frame the server end received.
func receive(t *testing.T, server *transport.MemoryConn) string {
	t.Helper()
	b, err := server.Receive(context.Background())
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	return string(b)
}

// wantSendClosed checks that err is a NotDelivered *Error wrapping ErrClosed.
func wantSendClosed(t *testing.T, err error) {
	t.Helper()
	wantTransportError(t, err, transport.NotDelivered, transport.ErrClosed)
}

func wantTransportError(t *testing.T, err error, outcome transport.Outcome, cause error) {
	t.Helper()
	var te *transport.Error
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T) is not a *transport.Error", err, err)
	}
	if te.Outcome != outcome {
		t.Errorf("Outcome = %v, want %v (err %v)", te.Outcome, outcome, err)
	}
	if !errors.Is(err, cause) {
		t.Errorf("error %v does not wrap %v", err, cause)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestPipeDeliversInOrderAsPrivateCopies(t *testing.T) {
	frames := []string{`{"a":1}`, `{"b":2}`, ``, `[1,2,3]`, `{"c":3}`}
	sendAll := func(t *testing.T, c transport.Conn) [][]byte {
		bufs := make([][]byte, len(frames))
		for i, f := range frames {
			bufs[i] = []byte(f)
			if err := c.Send(context.Background(), &transport.Message{Frame: bufs[i]}); err != nil {
				t.Fatalf("Send %d: %v", i, err)
			}
			// The sender may reuse its buffer as soon as Send returns.
			for j := range bufs[i] {
				bufs[i][j] = 'X'
			}
		}
		return bufs
	}
	check := func(t *testing.T, bufs [][]byte, next func() ([]byte, error)) {
		for i, want := range frames {
			got, err := next()
			if err != nil {
				t.Fatalf("frame %d: %v", i, err)
			}
			if string(got) != want {
				t.Errorf("frame %d = %q, want %q", i, got, want)
			}
			if len(got) > 0 && len(bufs[i]) > 0 && &got[0] == &bufs[i][0] {
				t.Errorf("frame %d aliases the sender's buffer", i)
			}
		}
	}
	t.Run("from client", func(t *testing.T) {
		client, server, _ := newPipe(t)
		bufs := sendAll(t, client)
		check(t, bufs, func() ([]byte, error) { return server.Receive(context.Background()) })
	})
	t.Run("from server", func(t *testing.T) {
		_, server, q := newPipe(t)
		bufs := sendAll(t, server)
		check(t, bufs, func() ([]byte, error) { return q.Receive(context.Background()) })
	})
}

// The server end hands a frame to the client's Receiver within its Send, on its own goroutine.
func TestPipeServerSendReturnsOnceTheReceiverHasTheFrame(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		r := &holdingReceiver{got: make(chan []byte, 1), release: release}
		client, server := transport.Pipe(r)
		defer client.Close()
		sent := make(chan error, 1)
		go func() { sent <- server.Send(context.Background(), &transport.Message{Frame: []byte(`{"n":1}`)}) }()
		if got := <-r.got; string(got) != `{"n":1}` {
			t.Fatalf("delivered %q", got)
		}
		synctest.Wait()
		select {
		case err := <-sent:
			t.Fatalf("Send returned %v while the Receiver held the frame", err)
		default:
		}
		close(release)
		if err := <-sent; err != nil {
			t.Fatalf("Send: %v", err)
		}
	})
}

// holdingReceiver passes on each frame it is given and holds the delivery until release closes.
type holdingReceiver struct {
	got     chan []byte
	release chan struct{}
}

func (r *holdingReceiver) Deliver(frame []byte, _ string) bool {
	r.got <- frame
	<-r.release
	return false
}

func (r *holdingReceiver) Fail(error) {}

func TestPipeConcurrentSenders(t *testing.T) {
	client, server, _ := newPipe(t)
	const senders, each = 8, 50
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				frame := fmt.Sprintf("%d/%d", s, i)
				if err := client.Send(context.Background(), &transport.Message{Frame: []byte(frame)}); err != nil {
					t.Errorf("Send %s: %v", frame, err)
					return
				}
			}
		})
	}
	// Frames of one sender keep their order; all arrive exactly once.
	next := make([]int, senders)
	for range senders * each {
		var s, i int
		got := receive(t, server)
		if _, err := fmt.Sscanf(got, "%d/%d", &s, &i); err != nil {
			t.Fatalf("unexpected frame %q", got)
		}
		if i != next[s] {
			t.Fatalf("sender %d: got frame %d, want %d", s, i, next[s])
		}
		next[s]++
	}
	wg.Wait()
}

func TestPipeClose(t *testing.T) {
	for _, closer := range []string{"client", "server"} {
		t.Run("closed by "+closer, func(t *testing.T) {
			client, server, q := newPipe(t)
			if isClosed(server.Done()) {
				t.Fatal("Done closed before Close")
			}
			self, peer := client, transport.Conn(server)
			if closer == "server" {
				self, peer = server, client
			}
			for _, c := range []transport.Conn{self, self, peer} {
				if err := c.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
			}
			if !isClosed(server.Done()) {
				t.Error("Done not closed")
			}
			for _, c := range []transport.Conn{client, server} {
				wantSendClosed(t, c.Send(context.Background(), &transport.Message{Frame: []byte(`{}`), ID: `1`}))
			}
			if _, err := server.Receive(context.Background()); !errors.Is(err, transport.ErrClosed) {
				t.Errorf("Receive after Close = %v, want ErrClosed", err)
			}
			wantSendClosed(t, server.FailExchange(context.Background(), &transport.Error{Outcome: transport.Uncertain, ID: `1`}))
			// The client's Receiver hears of the end once, and only when the server closed.
			wantEnds := 0
			if closer == "server" {
				wantEnds = 1
				if _, err := q.Receive(context.Background()); !errors.Is(err, transport.ErrClosed) {
					t.Errorf("the client's Receiver was told %v, want ErrClosed", err)
				}
			}
			if n := q.Len(); n != 0 {
				t.Errorf("the client's Receiver was told %d more things, want %d in all", n, wantEnds)
			}
		})
	}
}

func TestPipeConcurrentClose(t *testing.T) {
	client, server := transport.Pipe(new(transporttest.Queue))
	var wg sync.WaitGroup
	for i := range 10 {
		c := client
		if i%2 == 1 {
			c = server
		}
		wg.Go(func() {
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	wg.Wait()
	if !isClosed(server.Done()) {
		t.Error("pipe not closed")
	}
}

func TestCloseUnblocksReceive(t *testing.T) {
	for _, closer := range []string{"client", "server"} {
		t.Run("closed by "+closer, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				client, server := transport.Pipe(new(transporttest.Queue))
				got := make(chan error, 1)
				go func() {
					_, err := server.Receive(context.Background())
					got <- err
				}()
				synctest.Wait() // the receiver is durably blocked
				select {
				case err := <-got:
					t.Fatalf("Receive returned %v before Close", err)
				default:
				}
				if closer == "client" {
					client.Close()
				} else {
					server.Close()
				}
				if err := <-got; !errors.Is(err, transport.ErrClosed) {
					t.Errorf("blocked Receive = %v, want ErrClosed", err)
				}
			})
		})
	}
}

// fillPipe sends frames from c until the pipe is full.
func fillPipe(t *testing.T, c transport.Conn) {
	t.Helper()
	for i := range pipeBuffer {
		send(t, c, fmt.Sprint(i))
	}
}

func TestCloseUnblocksSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client, server := transport.Pipe(new(transporttest.Queue))
		fillPipe(t, client)
		got := make(chan error, 1)
		go func() {
			got <- client.Send(context.Background(), &transport.Message{Frame: []byte(`late`)})
		}()
		synctest.Wait()
		select {
		case err := <-got:
			t.Fatalf("Send on a full pipe returned %v before Close", err)
		default:
		}
		server.Close()
		wantSendClosed(t, <-got)
	})
}

func TestSendHonorsContextOnFullPipe(t *testing.T) {
	t.Run("canceled", func(t *testing.T) {
		client, _, _ := newPipe(t)
		fillPipe(t, client)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := client.Send(ctx, &transport.Message{Frame: []byte(`late`)})
		wantTransportError(t, err, transport.NotDelivered, context.Canceled)
	})
	t.Run("deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			client, _ := transport.Pipe(new(transporttest.Queue))
			defer client.Close()
			fillPipe(t, client)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := client.Send(ctx, &transport.Message{Frame: []byte(`late`)})
			wantTransportError(t, err, transport.NotDelivered, context.DeadlineExceeded)
		})
	})
}

func TestQueuedFramesSurviveClose(t *testing.T) {
	for _, closer := range []string{"client", "server"} {
		t.Run("closed by "+closer, func(t *testing.T) {
			client, server := transport.Pipe(new(transporttest.Queue))
			want := []string{`one`, `two`, `three`}
			for _, f := range want {
				send(t, client, f)
			}
			if closer == "client" {
				client.Close()
			} else {
				server.Close()
			}
			for _, f := range want {
				if got := receive(t, server); got != f {
					t.Errorf("got %q, want %q", got, f)
				}
			}
			for range 2 {
				if _, err := server.Receive(context.Background()); !errors.Is(err, transport.ErrClosed) {
					t.Errorf("Receive after the queue drained = %v, want ErrClosed", err)
				}
			}
		})
	}
}

func TestReceiveHonorsContext(t *testing.T) {
	t.Run("already canceled", func(t *testing.T) {
		_, server, _ := newPipe(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := server.Receive(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Receive = %v, want context.Canceled", err)
		}
	})
	t.Run("canceled while blocked", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			client, server := transport.Pipe(new(transporttest.Queue))
			defer client.Close()
			ctx, cancel := context.WithCancel(context.Background())
			got := make(chan error, 1)
			go func() {
				_, err := server.Receive(ctx)
				got <- err
			}()
			synctest.Wait()
			select {
			case err := <-got:
				t.Fatalf("Receive returned %v before cancel", err)
			default:
			}
			cancel()
			if err := <-got; !errors.Is(err, context.Canceled) {
				t.Errorf("Receive = %v, want context.Canceled", err)
			}
			// The connection still works.
			send(t, client, `after`)
			if got := receive(t, server); got != `after` {
				t.Errorf("got %q after a canceled Receive, want %q", got, `after`)
			}
		})
	})
	t.Run("deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			client, server := transport.Pipe(new(transporttest.Queue))
			defer client.Close()
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := server.Receive(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Receive = %v, want context.DeadlineExceeded", err)
			}
			if d := time.Since(start); d != 5*time.Second {
				t.Errorf("Receive returned after %v, want 5s", d)
			}
		})
	})
}

func TestFailExchange(t *testing.T) {
	client, server, q := newPipe(t)
	cause := errors.New("stream reset")
	ex := &transport.Error{Outcome: transport.Uncertain, ID: `"req-1"`, RetryAfter: time.Second, Err: cause}
	send(t, server, `before`)
	if err := server.FailExchange(context.Background(), ex); err != nil {
		t.Fatalf("FailExchange: %v", err)
	}
	send(t, server, `after`)

	next := func() ([]byte, error) { return q.Receive(context.Background()) }
	if got, _ := next(); string(got) != `before` {
		t.Errorf("first frame %q, want %q", got, `before`)
	}
	frame, err := next()
	if frame != nil {
		t.Errorf("frame %q delivered with the exchange failure", frame)
	}
	var te *transport.Error
	if !errors.As(err, &te) || te != ex {
		t.Fatalf("the Receiver was told %v, want the *Error passed to FailExchange", err)
	}
	if !errors.Is(err, cause) || te.ID != `"req-1"` || te.Outcome != transport.Uncertain {
		t.Errorf("exchange failure altered: %+v", te)
	}
	// The connection lives on, in both directions.
	if got, _ := next(); string(got) != `after` {
		t.Errorf("frame after the failure %q, want %q", got, `after`)
	}
	send(t, client, `reply`)
	if got := receive(t, server); got != `reply` {
		t.Errorf("reverse frame %q, want %q", got, `reply`)
	}
	if isClosed(server.Done()) {
		t.Error("FailExchange closed the pipe")
	}
}

func TestFailExchangeNeedsID(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  *transport.Error
	}{
		{"nil", nil},
		{"no id", &transport.Error{Outcome: transport.Uncertain, Err: errors.New("x")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, server, q := newPipe(t)
			if err := server.FailExchange(context.Background(), tc.err); err == nil {
				t.Fatal("FailExchange accepted an error without an id")
			}
			if n := q.Len(); n != 0 {
				t.Errorf("the client's Receiver was told %d things", n)
			}
		})
	}
}

func TestMemoryConnect(t *testing.T) {
	var accepted *transport.MemoryConn
	m := &transport.Memory{Accept: func(s *transport.MemoryConn) error {
		if accepted != nil {
			t.Error("Accept called twice for one Connect")
		}
		accepted = s
		return nil
	}}
	var tr transport.Transport = m
	q := new(transporttest.Queue)
	conn, err := tr.Connect(context.Background(), q)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer conn.Close()
	if accepted == nil {
		t.Fatal("Accept not called")
	}
	send(t, conn, `ping`)
	if got := receive(t, accepted); got != `ping` {
		t.Errorf("server received %q, want %q", got, `ping`)
	}
	send(t, accepted, `pong`)
	if got, _ := q.Receive(context.Background()); string(got) != `pong` {
		t.Errorf("client received %q, want %q", got, `pong`)
	}
	conn.Close()
	if !isClosed(accepted.Done()) {
		t.Error("closing the client end did not close the server end")
	}
}

func TestMemoryConnectFails(t *testing.T) {
	refused := errors.New("server full")
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name       string
		ctx        context.Context
		acceptErr  error
		wantCause  error
		wantAccept bool
	}{
		{"accept refuses", context.Background(), refused, refused, true},
		{"context canceled", canceled, nil, context.Canceled, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var server *transport.MemoryConn
			m := &transport.Memory{Accept: func(s *transport.MemoryConn) error {
				server = s
				return tc.acceptErr
			}}
			conn, err := m.Connect(tc.ctx, new(transporttest.Queue))
			if conn != nil {
				conn.Close()
				t.Errorf("Connect returned a connection with error %v", err)
			}
			wantTransportError(t, err, transport.NotDelivered, tc.wantCause)
			if got := server != nil; got != tc.wantAccept {
				t.Fatalf("Accept called = %v, want %v", got, tc.wantAccept)
			}
			if server != nil && !isClosed(server.Done()) {
				t.Error("the refused connection's server end is still open")
				server.Close()
			}
		})
	}
}

func TestMemorySendHook(t *testing.T) {
	refused := &transport.Error{Outcome: transport.NotDelivered, Err: errors.New("dial refused")}
	reset := &transport.Error{Outcome: transport.Uncertain, ID: `7`, Err: errors.New("reset")}
	for _, tc := range []struct {
		name      string
		deliver   bool
		err       error
		delivered bool
	}{
		{"refused", false, refused, false},
		{"reset after delivery", true, reset, true},
		{"lost without a trace", false, nil, false},
		{"passed through", true, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen []transport.Message
			var server *transport.MemoryConn
			m := &transport.Memory{
				Accept: func(s *transport.MemoryConn) error { server = s; return nil },
				BeforeSend: func(msg *transport.Message) (bool, error) {
					seen = append(seen, *msg)
					if msg.Method == "probe" {
						return true, nil
					}
					return tc.deliver, tc.err
				},
			}
			q := new(transporttest.Queue)
			conn, err := m.Connect(context.Background(), q)
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			defer conn.Close()

			msg := &transport.Message{Frame: []byte(`{"id":7}`), ID: `7`, Method: "tools/call"}
			if err := conn.Send(context.Background(), msg); err != tc.err {
				t.Errorf("Send = %v, want %v", err, tc.err)
			}
			if len(seen) != 1 || seen[0].ID != `7` || seen[0].Method != "tools/call" || string(seen[0].Frame) != `{"id":7}` {
				t.Errorf("hook saw %+v, want the message sent", seen)
			}
			if err := conn.Send(context.Background(), &transport.Message{Frame: []byte(`probe`), Method: "probe"}); err != nil {
				t.Fatalf("probe Send: %v", err)
			}
			first := receive(t, server)
			if got := first == `{"id":7}`; got != tc.delivered {
				t.Errorf("server received the frame = %v, want %v (first frame %q)", got, tc.delivered, first)
			}
			if tc.delivered {
				if got := receive(t, server); got != `probe` {
					t.Errorf("second frame %q, want the probe", got)
				}
			}
			// The hook sits on the client end only.
			send(t, server, `down`)
			if got, _ := q.Receive(context.Background()); string(got) != `down` {
				t.Errorf("client received %q, want %q", got, `down`)
			}
			if len(seen) != 2 {
				t.Errorf("hook ran %d times, want 2 (client sends only)", len(seen))
			}
		})
	}
}

func TestOutcomeOf(t *testing.T) {
	conflict := &transport.Error{Outcome: transport.Conflict, ID: `1`}
	for _, tc := range []struct {
		name string
		err  error
		want transport.Outcome
	}{
		{"nil", nil, transport.Answered},
		{"not delivered", &transport.Error{Outcome: transport.NotDelivered}, transport.NotDelivered},
		{"uncertain", &transport.Error{Outcome: transport.Uncertain}, transport.Uncertain},
		{"conflict", conflict, transport.Conflict},
		{"wrapped", fmt.Errorf("call: %w", conflict), transport.Conflict},
		{"wrapped twice", fmt.Errorf("a: %w", fmt.Errorf("b: %w", &transport.Error{Outcome: transport.NotDelivered})), transport.NotDelivered},
		{"joined", errors.Join(errors.New("x"), &transport.Error{Outcome: transport.NotDelivered}), transport.NotDelivered},
		{"zero outcome", &transport.Error{Err: errors.New("x")}, transport.Uncertain},
		{"plain error", errors.New("boom"), transport.Uncertain},
		{"ErrClosed", transport.ErrClosed, transport.Uncertain},
		{"context", context.Canceled, transport.Uncertain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := transport.OutcomeOf(tc.err); got != tc.want {
				t.Errorf("OutcomeOf(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestOutcomeString(t *testing.T) {
	for _, tc := range []struct {
		o    transport.Outcome
		want string
	}{
		{transport.Answered, "answered"},
		{transport.NotDelivered, "not delivered"},
		{transport.Uncertain, "uncertain"},
		{transport.Conflict, "conflict"},
		{0, "Outcome(0)"},
		{-1, "Outcome(-1)"},
		{transport.Conflict + 1, fmt.Sprintf("Outcome(%d)", int(transport.Conflict+1))},
	} {
		if got := tc.o.String(); got != tc.want {
			t.Errorf("Outcome(%d).String() = %q, want %q", int(tc.o), got, tc.want)
		}
	}
}

func TestErrorMessageAndUnwrap(t *testing.T) {
	cause := errors.New("connection reset")
	for _, tc := range []struct {
		name string
		err  *transport.Error
		want string
	}{
		{"bare", &transport.Error{Outcome: transport.Uncertain}, "transport: uncertain"},
		{"id", &transport.Error{Outcome: transport.Conflict, ID: `"a"`}, `transport: conflict for request "a"`},
		{"cause", &transport.Error{Outcome: transport.NotDelivered, Err: cause}, "transport: not delivered: connection reset"},
		{"id and cause", &transport.Error{Outcome: transport.Uncertain, ID: `42`, Err: cause}, "transport: uncertain for request 42: connection reset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
			if got := tc.err.Unwrap(); got != tc.err.Err {
				t.Errorf("Unwrap() = %v, want %v", got, tc.err.Err)
			}
			if got := errors.Is(tc.err, cause); got != (tc.err.Err != nil) {
				t.Errorf("errors.Is(err, cause) = %v", got)
			}
		})
	}
}
