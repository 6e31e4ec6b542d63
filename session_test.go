package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// restartOnRetry makes the server restart between a call's first attempt and its resend.
func restartOnRetry(srv *mcptest.Server) mcpclient.Option {
	var once sync.Once
	return mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{
		NewBackOff: func() backoff.BackOff { return &backoff.ZeroBackOff{} },
		OnRetry:    func(int, error, time.Duration) { once.Do(srv.Restart) },
	})
}

func TestLostReceiptScopeEndsRetriesOfUnsafeRequest(t *testing.T) {
	var k counter
	srv := mcptest.NewTestServer(t,
		mcptest.WithTool(unsafeTool, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "reserve"}))
	c := mcptest.NewClient(t, srv, restartOnRetry(srv))

	req := callReq(t, c, "reserve", nil)
	_, err := c.Do(context.Background(), req)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, mcpclient.ErrSessionLost) {
		t.Fatalf("error %v, want ErrOutcomeUnknown caused by ErrSessionLost", err)
	}
	if e := asError(t, err); e.Request != req {
		t.Errorf("error names request %v, want %v", e.Request.ID(), req.ID())
	}
	if k.runs != 1 {
		t.Errorf("runs %d, want 1: the resend must not run it again after the receipts were lost", k.runs)
	}
	// The client re-initialized and works.
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("ping after the restart: %v", err)
	}
}

func TestLostReceiptScopeReissuesSafeRequest(t *testing.T) {
	var k counter
	srv := mcptest.NewTestServer(t,
		mcptest.WithTool(readOnlyTool, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "lookup"}))
	c := mcptest.NewClient(t, srv, restartOnRetry(srv))
	if _, err := c.CachedTools(context.Background()); err != nil {
		t.Fatal(err)
	}
	res, err := c.CallTool(context.Background(), "lookup", nil)
	if err != nil {
		t.Fatalf("safe request after a restart: %v", err)
	}
	if k.runs != 2 || res.Text() == "" {
		t.Errorf("runs %d, want 2 (a safe request may run again)", k.runs)
	}
}

func TestSessionLostBeforeSendingReconnects(t *testing.T) {
	var k counter
	srv := mcptest.NewTestServer(t, mcptest.WithTool(unsafeTool, k.tool))
	c := mcptest.NewClient(t, srv, noWait)
	srv.Restart()
	req := callReq(t, c, "reserve", nil)
	resp, err := c.Do(context.Background(), req)
	if err != nil {
		t.Fatalf("call after restart: %v", err)
	}
	// The first attempt met the lost session and did not run; the second ran on a new one.
	if resp.Attempts != 2 || k.runs != 1 || resp.Request != req {
		t.Errorf("attempts %d runs %d, want 2 and 1 under the same id", resp.Attempts, k.runs)
	}
}

func TestCloseEndsPendingCallsWithOutcomeUnknown(t *testing.T) {
	started := make(chan struct{})
	srv := mcptest.NewTestServer(t, mcptest.WithTool(unsafeTool, func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}))
	c, err := mcpclient.Connect(context.Background(), srv.Transport(), noWait)
	if err != nil {
		t.Fatal(err)
	}
	req := callReq(t, c, "reserve", nil)
	done := make(chan error, 1)
	go func() { _, err := c.Do(context.Background(), req); done <- err }()
	<-started
	var wg sync.WaitGroup
	for range 3 { // Close is idempotent and safe to call concurrently
		wg.Add(1)
		go func() { defer wg.Done(); c.Close() }()
	}
	wg.Wait()
	err = <-done
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, mcpclient.ErrClosed) {
		t.Fatalf("pending call ended with %v, want ErrOutcomeUnknown and ErrClosed", err)
	}
	if asError(t, err).Request != req {
		t.Error("the error does not hold the request")
	}
	if err := c.Ping(context.Background()); !errors.Is(err, mcpclient.ErrClosed) {
		t.Errorf("call after Close: %v, want ErrClosed", err)
	}
}

// halvingConn writes frames whole, but for those holding cut, of which it writes half and fails,
// as a connection reset in the middle of a write does.
type halvingConn struct {
	net.Conn
	cut string
}

func (h halvingConn) Write(b []byte) (int, error) {
	if !strings.Contains(string(b), h.cut) {
		return h.Conn.Write(b)
	}
	n, _ := h.Conn.Write(b[:len(b)/2])
	return n, errors.New("connection reset halfway")
}

// A write cut short breaks a byte stream for good: the calls awaiting answers on it end at once,
// their outcome unknown as on any lost session, rather than when their contexts do.
func TestBrokenStreamEndsTheCallsAwaitingAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var once sync.Once
		received := make(chan struct{})
		server := testpeer.NewPipe(t, func(_ *testpeer.Conn, m testpeer.Msg) bool {
			if m.Method != "tools/call" {
				return false
			}
			once.Do(func() { close(received) }) // and never answered
			return true
		}, testpeer.Lines(0)).Transport().(*transport.Stream)
		tr := &transport.Stream{Open: func(ctx context.Context) (io.ReadWriteCloser, error) {
			rwc, err := server.Open(ctx)
			if err != nil {
				return nil, err
			}
			return halvingConn{rwc.(net.Conn), "cut-me"}, nil
		}}
		c := connect(t, tr)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		awaiting := make(chan error, 1)
		go func() {
			_, err := c.CallTool(ctx, "reserve", nil) // never answered
			awaiting <- err
		}()
		<-received
		if _, err := c.CallTool(ctx, "cut-me", nil); !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
			t.Fatalf("the call whose frame was cut: %v, want ErrOutcomeUnknown", err)
		}
		synctest.Wait()
		select {
		case err := <-awaiting:
			if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, mcpclient.ErrSessionLost) {
				t.Errorf("the call awaiting its answer: %v, want ErrOutcomeUnknown after a lost session", err)
			}
		default:
			t.Fatal("the call awaiting its answer still waits on the broken stream")
		}
	})
}

func TestConnectToClosedServerIsNotDelivered(t *testing.T) {
	srv := mcptest.NewServer()
	srv.Close()
	_, err := mcpclient.Connect(context.Background(), srv.Transport(), noWait)
	if !errors.Is(err, mcpclient.ErrNotDelivered) {
		t.Fatalf("error %v, want ErrNotDelivered", err)
	}
	if asError(t, err).Attempts != mcpclient.DefaultMaxAttempts {
		t.Errorf("connect attempts %d, want %d", asError(t, err).Attempts, mcpclient.DefaultMaxAttempts)
	}
}

func TestRetryNeverSendsOnce(t *testing.T) {
	var k counter
	srv := mcptest.NewTestServer(t,
		mcptest.WithTool(unsafeTool, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "reserve"}))
	c := mcptest.NewClient(t, srv, mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{Mode: mcpclient.RetryNever}))
	req := callReq(t, c, "reserve", nil)
	_, err := c.Do(context.Background(), req)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || len(srv.Received(req.ID())) != 1 {
		t.Fatalf("error %v after %d sends, want ErrOutcomeUnknown after 1", err, len(srv.Received(req.ID())))
	}
}

func TestAssertedReceiptsResendSameID(t *testing.T) {
	var k counter
	srv := mcptest.NewTestServer(t,
		mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithTool(unsafeTool, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropBeforeExecution, Tool: "reserve"}))
	for name, opt := range map[string]mcpclient.Option{
		"WithReceipts": mcpclient.WithReceipts(mcpclient.ReceiptScopeSession),
		"RetryAlways":  mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{Mode: mcpclient.RetryAlways, NewBackOff: func() backoff.BackOff { return &backoff.ZeroBackOff{} }}),
	} {
		t.Run(name, func(t *testing.T) {
			srv.Inject(mcptest.Fault{Kind: mcptest.DropBeforeExecution, Tool: "reserve"})
			c := mcptest.NewClient(t, srv, noWait, opt)
			req := callReq(t, c, "reserve", nil)
			if _, err := c.Do(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			assertFramesIdentical(t, srv.Received(req.ID()), 2)
		})
	}
}

func TestServerRequestsAreAnswered(t *testing.T) {
	answers := make(chan testpeer.Msg, 2)
	srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
		switch {
		case m.Method == "ping" && m.Result == nil:
			p.Send(`{"jsonrpc":"2.0","id":"s1","method":"ping"}`)
			p.Send(`{"jsonrpc":"2.0","id":"s2","method":"sampling/createMessage","params":{}}`)
			p.Send(testpeer.Result(m.ID, `{}`))
			return true
		case m.Method == "":
			answers <- m
		}
		return false
	})
	c, err := mcpclient.Connect(context.Background(), srv.Transport())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		a := <-answers
		switch string(a.ID) {
		case `"s1"`:
			if string(a.Result) != "{}" {
				t.Errorf("ping answered %s", a.Result)
			}
		case `"s2"`:
			var e mcpclient.RPCError
			if json.Unmarshal(a.Error, &e) != nil || e.Code != mcpclient.RPCMethodNotFound {
				t.Errorf("sampling answered %s, want method not found", a.Error)
			}
		default:
			t.Errorf("answer for unknown id %s", a.ID)
		}
	}
}

// A server request under an id the client is still handling is refused: two answers under one
// id could not be told apart, and the server's cancellation of the first would reach neither.
func TestServerRequestUnderAnIDInUseIsRefused(t *testing.T) {
	answers := make(chan testpeer.Msg, 2)
	release := make(chan struct{})
	srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
		switch {
		case m.Method == "ping" && m.Result == nil:
			p.Send(`{"jsonrpc":"2.0","id":"s1","method":"slow/ask"}`)
			p.Send(`{"jsonrpc":"2.0","id":"s1","method":"slow/ask"}`)
			p.Send(testpeer.Result(m.ID, `{}`))
			return true
		case m.Method == "":
			answers <- m
		}
		return false
	})
	c, err := mcpclient.Connect(context.Background(), srv.Transport(), mcpclient.WithRequestHandler("slow/ask", func(ctx context.Context, _ json.RawMessage) (any, error) {
		<-release
		return map[string]bool{"handled": true}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := <-answers
	var e mcpclient.RPCError
	if string(first.ID) != `"s1"` || json.Unmarshal(first.Error, &e) != nil || e.Code != mcpclient.RPCInvalidRequest {
		t.Fatalf("first answer %+v, want the duplicate refused with -32600", first)
	}
	close(release)
	if second := <-answers; string(second.Result) != `{"handled":true}` {
		t.Errorf("the request in hand answered %s %s, want its handler's result", second.Result, second.Error)
	}
}

func TestNotificationHandlers(t *testing.T) {
	srv := mcptest.NewTestServer(t)
	got := make(chan string, 4)
	c := mcptest.NewClient(t, srv,
		mcpclient.WithNotificationHandler("notifications/tools/list_changed", func(_ context.Context, method string, _ json.RawMessage) {
			got <- method
		}),
		mcpclient.WithNotificationHandler("notifications/panics", func(context.Context, string, json.RawMessage) {
			panic("handler bug")
		}),
		mcpclient.WithNotificationHandler("*", func(_ context.Context, method string, params json.RawMessage) {
			got <- "*" + method + string(params)
		}))
	srv.Notify("notifications/panics", nil)
	srv.Notify("notifications/tools/list_changed", nil)
	srv.Notify("notifications/message", map[string]string{"level": "info"})
	if m := <-got; m != "notifications/tools/list_changed" {
		t.Errorf("first notification %q", m)
	}
	if m := <-got; m != `*notifications/message{"level":"info"}` {
		t.Errorf("second notification %q", m)
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("client broken after a handler panic: %v", err)
	}
}

func TestKeepalivePingsUntilClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := mcptest.NewServer()
		defer srv.Close()
		c, err := mcpclient.Connect(context.Background(), srv.Transport(), mcpclient.WithKeepalive(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		base := srv.FramesReceived()
		time.Sleep(3*time.Minute + time.Second)
		synctest.Wait()
		if got := srv.FramesReceived() - base; got != 3 {
			t.Errorf("%d pings in 3 minutes, want 3", got)
		}
		c.Close()
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if got := srv.FramesReceived() - base; got != 3 {
			t.Errorf("pings went on after Close: %d", got)
		}
	})
}

// A client that learned the server is older goes straight to initialize when it reconnects; if
// that initialize fails, the server may have changed, and the next connection probes it again.
func TestFailedInitializeForgetsTheOlderServer(t *testing.T) {
	var mu sync.Mutex
	var probes []int // the dials, numbered from 1, that carried server/discover
	srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
		dial := p.N + 1
		switch {
		case m.Method == "server/discover":
			mu.Lock()
			probes = append(probes, dial)
			mu.Unlock()
		case m.Method == "initialize" && dial == 2:
			p.Send(testpeer.Error(m.ID, -32603, "not today"))
			return true
		case m.Method == "ping" && dial == 1:
			p.Close() // the connection is lost: the client dials again
			return true
		}
		return false
	})
	c, err := mcpclient.Connect(context.Background(), srv.Transport(), noWait)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Ping(context.Background()) // lost with the first connection
	// The second connection (no probe) fails initialize; the third probes again.
	for i := 0; i < 3 && c.Ping(context.Background()) != nil; i++ {
	}
	mu.Lock()
	defer mu.Unlock()
	if dials := srv.Opened(); dials < 3 || len(probes) != 2 || probes[0] != 1 || probes[1] != 3 {
		t.Fatalf("%d dials, server/discover on dials %v; want it on the first and, after the failed initialize of the second, the third", srv.Opened(), probes)
	}
}

// answerThenFailSend is a connection whose Send of a tools/call fails (as a legacy POST answered
// 502 does) after the call's answer came in on the stream and was routed to it. It stands
// between the connection and the client's Receiver to see the answer go by.
type answerThenFailSend struct {
	transport.Conn
	recv    transport.Receiver
	mu      sync.Mutex
	callID  string
	routed  chan struct{} // closed when the answer has been delivered
	closeMu sync.Once
}

func (w *answerThenFailSend) Send(ctx context.Context, msg *transport.Message) error {
	if msg.Method == "tools/call" {
		w.mu.Lock()
		w.callID = msg.ID
		w.mu.Unlock()
	}
	if err := w.Conn.Send(ctx, msg); err != nil || msg.Method != "tools/call" {
		return err
	}
	select {
	case <-w.routed:
	case <-time.After(10 * time.Second):
	}
	return &transport.Error{Outcome: transport.Uncertain, ID: msg.ID, Err: errors.New("HTTP 502 Bad Gateway")}
}

func (w *answerThenFailSend) Deliver(frame []byte, awaited string) bool {
	answered := w.recv.Deliver(frame, awaited)
	w.mu.Lock()
	if w.callID != "" && strings.Contains(string(frame), w.callID) {
		w.closeMu.Do(func() { close(w.routed) })
	}
	w.mu.Unlock()
	return answered
}

func (w *answerThenFailSend) Fail(err error) { w.recv.Fail(err) }

// An answer that reached the call before its send failed is the call's outcome: the send error
// comes later and says less.
func TestAnswerRoutedBeforeSendFailedWins(t *testing.T) {
	inner := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
		if m.Method == "tools/call" {
			p.Send(testpeer.Result(m.ID, `{"content":[{"type":"text","text":"booked R-17"}]}`))
			return true
		}
		return false
	})
	tr := transport.DialFunc(func(ctx context.Context, r transport.Receiver) (transport.Conn, error) {
		w := &answerThenFailSend{recv: r, routed: make(chan struct{})}
		conn, err := inner.Transport().Connect(ctx, w)
		if err != nil {
			return nil, err
		}
		w.Conn = conn
		return w, nil
	})
	c, err := mcpclient.Connect(context.Background(), tr, noWait)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := callReq(t, c, "reserve", nil)
	resp, err := c.Do(context.Background(), req)
	if err != nil {
		t.Fatalf("err %v: the answer that had arrived was dropped", err)
	}
	if text(t, resp) != "booked R-17" || resp.Attempts != 1 {
		t.Errorf("result %q after %d attempts", text(t, resp), resp.Attempts)
	}
	if e, _ := c.Ledger().Lookup(req.ID()); e.State != mcpclient.StateAnswered {
		t.Errorf("ledger state %v, want answered", e.State)
	}
}

// A caller that stops waiting gets its error at once: telling the server, which may be slow to
// take the notification, is not the caller's wait. A resend of the same id still reaches the
// server after the notice, so that the notice cannot cancel the resend.
//
// The test runs alone: it times the call against the server's slow notice.
func TestCancellationNoticeDoesNotHoldTheCaller(t *testing.T) {
	var mu sync.Mutex
	var order []string
	noticeTaken := make(chan struct{})
	first := testpeer.Once()
	srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		switch {
		case r.Method == "notifications/cancelled":
			time.Sleep(time.Second) // a slow server
			mu.Lock()
			order = append(order, "cancelled")
			mu.Unlock()
			close(noticeTaken)
			r.W.WriteHeader(http.StatusAccepted)
			return true
		case r.Method == "tools/call" && first():
			<-r.HTTP.Context().Done() // never answers the first send
			return true
		case r.Method == "tools/call":
			mu.Lock()
			order = append(order, "resend")
			mu.Unlock()
		}
		return false
	})
	c := connect(t, &transport.HTTP{URL: srv.URL}, mcpclient.WithReceipts(mcpclient.ReceiptScopeSession))
	req := callReq(t, c, "reserve", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Do(ctx, req)
	if took := time.Since(start); took > 600*time.Millisecond {
		t.Errorf("the call returned %v after it was sent, held by the cancellation notice", took)
	}
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("err %v, want ErrOutcomeUnknown", err)
	}
	if _, err := c.Resend(testCtx(t), req); err != nil {
		t.Fatalf("Resend: %v", err)
	}
	<-noticeTaken
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(order, []string{"cancelled", "resend"}) {
		t.Errorf("the server saw %v, want the notice before the resend", order)
	}
}

// Session opens a session when the last was lost, and returns what the new one settled.
func TestSessionReopensALostSession(t *testing.T) {
	t.Parallel()
	srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
		if m.Method == "x/hang-up" {
			p.Close()
			return true
		}
		return false
	})
	c := connect(t, srv.Transport(), mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{Mode: mcpclient.RetryNever}))
	ctx := testCtx(t)
	if _, err := c.Do(ctx, newRequest(t, c, "x/hang-up", nil)); !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("a request whose connection dropped: %v, want ErrOutcomeUnknown", err)
	}
	init, err := c.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if init.ServerInfo.Name != "testpeer" || init.ProtocolVersion == "" || srv.Opened() != 2 {
		t.Errorf("Session: %+v after %d connections, want the second session's", init, srv.Opened())
	}
	if again, err := c.Session(ctx); err != nil || again.ServerInfo != init.ServerInfo || srv.Opened() != 2 {
		t.Errorf("Session on a live session: %+v, %v, %d connections; want it as it is", again, err, srv.Opened())
	}
}
