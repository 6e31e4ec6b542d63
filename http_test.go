package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// recorder notes every HTTP request a transport sends.
type recorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	method string
	header http.Header
	at     time.Time
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, recorded{req.Method, req.Header.Clone(), time.Now()})
	r.mu.Unlock()
	return r.base.RoundTrip(req)
}

func (r *recorder) all() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.reqs...)
}

// httpClient connects to srv through a recording transport.
func httpClient(t *testing.T, srv *mcptest.HTTPServer, opts ...mcpclient.Option) (*mcpclient.Client, *recorder) {
	t.Helper()
	rec := &recorder{base: http.DefaultTransport}
	tr := &transport.HTTP{URL: srv.URL, Client: &http.Client{Transport: rec}}
	c, err := mcpclient.Connect(context.Background(), tr, append([]mcpclient.Option{mcpclient.WithLogger(mcptest.TestLogger(t))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, rec
}

// bothResponseKinds runs f against a server answering with JSON bodies and one answering with
// SSE streams.
func bothResponseKinds(t *testing.T, f func(t *testing.T, opts ...mcptest.Option)) {
	t.Run("json", func(t *testing.T) { f(t) })
	t.Run("sse", func(t *testing.T) { f(t, mcptest.WithSSEResponses(10*time.Millisecond)) })
}

func TestHTTPSessionAndHeaders(t *testing.T) {
	t.Parallel()
	bothResponseKinds(t, func(t *testing.T, opts ...mcptest.Option) {
		var k counter
		srv := mcptest.NewTestHTTPServer(t, append(opts, mcptest.WithTool(unsafeTool, k.tool))...)
		c, rec := httpClient(t, srv)
		if c.SessionID() == "" {
			t.Fatal("no session id captured")
		}
		if _, err := c.CallTool(context.Background(), "reserve", map[string]int{"n": 1}); err != nil {
			t.Fatal(err)
		}
		reqs := rec.all()
		// The client probes with server/discover first; mcptest speaks no stateless revision.
		if len(reqs) < 4 || reqs[0].header.Get("Mcp-Method") != "server/discover" {
			t.Fatalf("%d requests, the first %v", len(reqs), reqs[0].header)
		}
		reqs = reqs[1:]
		for i, r := range reqs {
			if r.method == http.MethodGet { // the standalone stream
				if r.header.Get("Mcp-Session-Id") != c.SessionID() {
					t.Errorf("GET without the session: %v", r.header)
				}
				continue
			}
			if got := r.header.Get("Accept"); !strings.Contains(got, "application/json") || !strings.Contains(got, "text/event-stream") {
				t.Errorf("request %d Accept %q", i, got)
			}
			if i == 0 { // initialize
				if r.header.Get("Mcp-Session-Id") != "" || r.header.Get("Mcp-Protocol-Version") != "" {
					t.Errorf("initialize carried session headers: %v", r.header)
				}
				continue
			}
			if r.header.Get("Mcp-Session-Id") != c.SessionID() || r.header.Get("Mcp-Protocol-Version") != c.ProtocolVersion() {
				t.Errorf("request %d headers %v", i, r.header)
			}
		}
	})
}

func TestHTTPResetAfterExecutionResendsSameBytes(t *testing.T) {
	t.Parallel()
	bothResponseKinds(t, func(t *testing.T, opts ...mcptest.Option) {
		var k counter
		srv := mcptest.NewTestHTTPServer(t, append(opts,
			mcptest.WithTool(unsafeTool, k.tool),
			mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "reserve"}))...)
		c, _ := httpClient(t, srv, noWait)
		req := callReq(t, c, "reserve", nil)
		resp, err := c.Do(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Attempts != 2 || k.runs != 1 {
			t.Errorf("attempts %d runs %d, want 2 and 1", resp.Attempts, k.runs)
		}
		assertFramesIdentical(t, srv.Received(req.ID()), 2)
	})
}

func TestHTTPResetWithoutReceiptsGivesOutcomeUnknown(t *testing.T) {
	t.Parallel()
	var k counter
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithTool(unsafeTool, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropBeforeExecution, Tool: "reserve"}))
	c, _ := httpClient(t, srv, noWait)
	_, err := c.CallTool(context.Background(), "reserve", nil)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || asError(t, err).Attempts != 1 {
		t.Fatalf("error %v, want ErrOutcomeUnknown after one attempt", err)
	}
}

func TestHTTPServiceUnavailableHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	var k counter
	srv := mcptest.NewTestHTTPServer(t,
		mcptest.WithTool(unsafeTool, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.Fail, Tool: "reserve", Times: 2, RetryAfter: time.Second}))
	var delays []time.Duration
	c, _ := httpClient(t, srv, mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{
		NewBackOff:     func() backoff.BackOff { return &backoff.ZeroBackOff{} },
		MaxServerDelay: 20 * time.Millisecond, // the 1s hint, capped, replaces the zero backoff
		OnRetry:        func(_ int, cause error, d time.Duration) { delays = append(delays, d) },
	}))
	req := callReq(t, c, "reserve", nil)
	resp, err := c.Do(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Attempts != 3 || k.runs != 1 {
		t.Errorf("attempts %d runs %d", resp.Attempts, k.runs)
	}
	if len(delays) != 2 || delays[0] != 20*time.Millisecond || delays[1] != 20*time.Millisecond {
		t.Errorf("waits %v, want the server's hint capped at 20ms", delays)
	}
	assertFramesIdentical(t, srv.Received(req.ID()), 3)
}

func TestHTTPSessionExpiryReinitializes(t *testing.T) {
	t.Parallel()
	var k counter
	srv := mcptest.NewTestHTTPServer(t,
		mcptest.WithTool(unsafeTool, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.ExpireSession, Tool: "reserve"}))
	c, rec := httpClient(t, srv, noWait)
	first := c.SessionID()
	resp, err := c.Do(context.Background(), callReq(t, c, "reserve", nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.SessionID() == first || c.SessionID() == "" {
		t.Errorf("session %q after expiry of %q", c.SessionID(), first)
	}
	if resp.Attempts != 2 || k.runs != 1 {
		t.Errorf("attempts %d runs %d", resp.Attempts, k.runs)
	}
	inits := 0
	for _, r := range rec.all() {
		if r.method == http.MethodPost && r.header.Get("Mcp-Session-Id") == "" && r.header.Get("Mcp-Method") == "" {
			inits++
		}
	}
	if inits != 2 {
		t.Errorf("%d initialize requests, want 2", inits)
	}
}

// Without an epoch, the client cannot tell that the receipts outlived the session.
func TestHTTPSessionExpiryAfterUncertainAttemptIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	var k counter
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithoutReceiptEpoch(),
		mcptest.WithTool(unsafeTool, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "reserve"}))
	var once sync.Once
	c, _ := httpClient(t, srv, mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{
		NewBackOff: func() backoff.BackOff { return &backoff.ZeroBackOff{} },
		OnRetry: func(int, error, time.Duration) {
			once.Do(func() { srv.Inject(mcptest.Fault{Kind: mcptest.ExpireSession, Tool: "reserve"}) })
		},
	}))
	_, err := c.CallTool(context.Background(), "reserve", nil)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, mcpclient.ErrSessionLost) {
		t.Fatalf("error %v, want ErrOutcomeUnknown from a lost session", err)
	}
	if k.runs != 1 {
		t.Errorf("runs %d, want 1", k.runs)
	}
}

// breakFirstCall lets the first tools/call POST reach the server but reports a reset to the
// client once the tool runs, as a connection dropped after the request was written does.
type breakFirstCall struct {
	base    http.RoundTripper
	started <-chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

func (b *breakFirstCall) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && req.GetBody != nil {
		body, _ := req.GetBody()
		peek := make([]byte, 512)
		n, _ := body.Read(peek)
		first := false
		if strings.Contains(string(peek[:n]), `"tools/call"`) {
			b.once.Do(func() { first = true })
		}
		if first {
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				if resp, err := b.base.RoundTrip(req); err == nil {
					resp.Body.Close()
				}
			}()
			<-b.started
			return nil, errors.New("connection reset by peer")
		}
	}
	return b.base.RoundTrip(req)
}

func TestHTTPInFlightRefusalOfAResendIsHardSignal(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusConflict, http.StatusBadRequest} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			release := make(chan struct{})
			started := make(chan struct{}, 1)
			srv := mcptest.NewTestHTTPServer(t, mcptest.WithMode(mcptest.ModeInFlightRefusal), mcptest.WithInFlightStatus(status),
				mcptest.WithTool(unsafeTool, func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
					started <- struct{}{}
					select {
					case <-release:
					case <-ctx.Done():
					}
					return &mcpclient.CallToolResult{}, nil
				}))
			rt := &breakFirstCall{base: &http.Transport{}, started: started}
			defer rt.wg.Wait()
			defer close(release)
			c, err := mcpclient.Connect(context.Background(), &transport.HTTP{URL: srv.URL, Client: &http.Client{Transport: rt}},
				mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{Mode: mcpclient.RetryAlways, NewBackOff: func() backoff.BackOff { return &backoff.ZeroBackOff{} }}))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()

			req := callReq(t, c, "reserve", nil)
			_, err = c.Do(context.Background(), req)
			if !errors.Is(err, mcpclient.ErrRequestInFlight) {
				t.Fatalf("error %v, want ErrRequestInFlight", err)
			}
			var rpc *mcpclient.RPCError
			if !errors.As(err, &rpc) || rpc.Code != mcpclient.RPCInvalidRequest {
				t.Errorf("the JSON-RPC body was lost: %v", err)
			}
			if e := asError(t, err); e.Attempts != 2 {
				t.Errorf("attempts %d, want 2: no retry after the refusal", e.Attempts)
			}
			if srv.Executions("reserve") != 1 {
				t.Errorf("executions %d", srv.Executions("reserve"))
			}
		})
	}
}

func TestHTTPInFlightRefusalOfAFirstSend(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{}, 1)
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithMode(mcptest.ModeInFlightRefusal), mcptest.WithInFlightStatus(http.StatusBadRequest),
		mcptest.WithTool(unsafeTool, func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			started <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return &mcpclient.CallToolResult{}, nil
		}))
	a := mcptest.NewClient(t, srv)
	b := mcptest.NewClient(t, srv)
	id := mcpclient.StringID("shared")
	go a.CallTool(context.Background(), "reserve", nil, mcpclient.WithRequestID(id))
	<-started
	// A 400 to a body never sent before is an ordinary refusal, not a conflict.
	_, err := b.CallTool(context.Background(), "reserve", nil, mcpclient.WithRequestID(id))
	if mcpclient.CodeOf(err) != mcpclient.CodeServerError || !mcpclient.IsWireError(err) {
		t.Fatalf("error %v, want the server's -32600 as a server error", err)
	}
}

func TestHTTPBrokenStreamIsResumed(t *testing.T) {
	t.Parallel()
	var k counter
	srv := mcptest.NewTestHTTPServer(t,
		mcptest.WithSSEResponses(50*time.Millisecond),
		mcptest.WithTool(unsafeTool, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.BreakStream, Tool: "reserve"}))
	c, rec := httpClient(t, srv, noWait)
	req := callReq(t, c, "reserve", nil)
	resp, err := c.Do(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Attempts != 1 || k.runs != 1 {
		t.Errorf("attempts %d runs %d: a resumption is not a resend", resp.Attempts, k.runs)
	}
	reqs := rec.all()
	var post, get *recorded
	for i := range reqs {
		switch {
		case reqs[i].method == http.MethodPost:
			post = &reqs[i]
		case reqs[i].method == http.MethodGet && reqs[i].header.Get("Last-Event-ID") != "":
			get = &reqs[i]
		}
	}
	if get == nil {
		t.Fatal("no GET with Last-Event-ID")
	}
	if wait := get.at.Sub(post.at); wait < 50*time.Millisecond {
		t.Errorf("resumed after %v, before the server's retry of 50ms", wait)
	}
}

func TestHTTPCloseDeletesSession(t *testing.T) {
	t.Parallel()
	srv := mcptest.NewTestHTTPServer(t)
	c, rec := httpClient(t, srv)
	sid := c.SessionID()
	c.Close()
	reqs := rec.all()
	last := reqs[len(reqs)-1]
	if last.method != http.MethodDelete || last.header.Get("Mcp-Session-Id") != sid {
		t.Fatalf("last request %s %v, want DELETE of the session", last.method, last.header)
	}
}

func TestHTTPNotificationsOnGetStream(t *testing.T) {
	t.Parallel()
	srv := mcptest.NewTestHTTPServer(t)
	got := make(chan string, 1)
	c, rec := httpClient(t, srv, mcpclient.WithNotificationHandler("notifications/tools/list_changed",
		func(_ context.Context, method string, _ json.RawMessage) {
			// The test notifies until one arrives, so more may follow: a handler blocked on
			// them would hold Close up.
			select {
			case got <- method:
			default:
			}
		}))
	_ = c
	waitFor(t, "the GET stream", func() bool {
		for _, r := range rec.all() {
			if r.method == http.MethodGet {
				return true
			}
		}
		return false
	})
	// The stream may still be opening on the server side: notify until it arrives.
	for {
		srv.Notify("notifications/tools/list_changed", nil)
		select {
		case m := <-got:
			if m != "notifications/tools/list_changed" {
				t.Fatalf("got %q", m)
			}
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// largeImage is a tool result of 10 MiB: an image in base64, as tools return files.
func largeImage() mcpclient.Content {
	const block = "iVBORw0KGgoAAAANSUhEUgAA" // whole base64 quanta
	return mcpclient.Content{Type: "image", MIMEType: "image/png", Data: strings.Repeat(block, 10<<20/len(block))}
}

// largeImageTool answers every call with want.
func largeImageTool(want mcpclient.Content) mcptest.Option {
	return mcptest.WithTool(unsafeTool, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{want}}, nil
	})
}

// wantLargeImage checks that c's call of the tool returns want whole.
func wantLargeImage(t *testing.T, c *mcpclient.Client, want mcpclient.Content) {
	t.Helper()
	res, err := c.CallTool(context.Background(), unsafeTool.Name, nil)
	if err != nil {
		t.Fatalf("a result of %d MiB with the default limit: %v", len(want.Data)>>20, err)
	}
	if len(res.Content) != 1 || res.Content[0].Data != want.Data {
		t.Fatalf("the result came back changed: %d blocks", len(res.Content))
	}
}

func TestHTTPLargeToolResultArrivesWhole(t *testing.T) {
	t.Parallel()
	want := largeImage()
	bothResponseKinds(t, func(t *testing.T, opts ...mcptest.Option) {
		srv := mcptest.NewTestHTTPServer(t, append(opts, largeImageTool(want))...)
		c, err := mcpclient.Connect(context.Background(), &transport.HTTP{URL: srv.URL}, noWait)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wantLargeImage(t, c, want)
	})
}

func TestHTTPConnectionRefusedIsNotDelivered(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := mcpclient.Connect(context.Background(), &transport.HTTP{URL: url}, noWait)
	if !errors.Is(err, mcpclient.ErrNotDelivered) {
		t.Fatalf("error %v, want ErrNotDelivered", err)
	}
}

func TestHTTPDetachLeavesTheSession(t *testing.T) {
	t.Parallel()
	srv := mcptest.NewTestHTTPServer(t)
	c, rec := httpClient(t, srv)
	c.Detach()
	for _, r := range rec.all() {
		if r.method == http.MethodDelete {
			t.Fatal("Detach ended the session")
		}
	}
	if srv.Sessions() != 1 {
		t.Errorf("%d sessions, want the detached one", srv.Sessions())
	}
	if err := c.Ping(context.Background()); !errors.Is(err, mcpclient.ErrClosed) {
		t.Errorf("a detached client still works: %v", err)
	}
}

func TestHTTPHeaderFuncErrorIsNotDelivered(t *testing.T) {
	t.Parallel()
	srv := mcptest.NewTestHTTPServer(t)
	tr := &transport.HTTP{URL: srv.URL, HeaderFunc: func(context.Context, http.Header) error {
		return errors.New("no token")
	}}
	_, err := mcpclient.Connect(context.Background(), tr, noWait)
	if !errors.Is(err, mcpclient.ErrNotDelivered) || srv.FramesReceived() != 0 {
		t.Fatalf("error %v, frames %d: want not delivered, nothing sent", err, srv.FramesReceived())
	}
}

func TestHTTPRestart(t *testing.T) {
	t.Parallel()
	var k counter
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(unsafeTool, k.tool))
	c, _ := httpClient(t, srv, noWait)
	before := c.SessionID()
	srv.Restart()
	resp, err := c.Do(context.Background(), callReq(t, c, "reserve", nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.SessionID() == before || resp.Attempts != 2 || k.runs != 1 {
		t.Errorf("session %q (was %q), attempts %d, runs %d", c.SessionID(), before, resp.Attempts, k.runs)
	}
}

func TestHTTPConcurrentCalls(t *testing.T) {
	t.Parallel()
	bothResponseKinds(t, func(t *testing.T, opts ...mcptest.Option) {
		var k counter
		srv := mcptest.NewTestHTTPServer(t, append(opts, mcptest.WithTool(unsafeTool, k.tool))...)
		c := mcptest.NewClient(t, srv)
		var wg sync.WaitGroup
		for i := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := c.CallTool(context.Background(), "reserve", map[string]int{"i": i})
				if err != nil {
					t.Error(err)
					return
				}
				if want := fmt.Sprintf(`{"i":%d}`, i); !strings.HasSuffix(res.Text(), want) {
					t.Errorf("call %d got %q", i, res.Text())
				}
			}()
		}
		wg.Wait()
	})
}

// pollingServer answers tools/call with an SSE stream that carries only a priming event and
// closes; every GET with Last-Event-ID does the same with a new id, until the answer is ready
// after answerAfter polls. getStatus, if not 0, answers the GETs with that status instead.
func pollingServer(t *testing.T, answerAfter, getStatus int) *testpeer.HTTP {
	var mu sync.Mutex
	gets, seq := 0, 0
	var callID json.RawMessage
	return testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		prime := func() {
			seq++
			r.W.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(r.W, "id: e%d\nretry: 5\ndata: \n\n", seq)
		}
		switch {
		case r.HTTPMethod == http.MethodGet:
			gets++
			if getStatus != 0 {
				r.W.WriteHeader(getStatus)
				return true
			}
			prime()
			if gets >= answerAfter {
				fmt.Fprintf(r.W, "id: e%d\ndata: %s\n\n", seq+1, testpeer.Result(callID, `{"content":[]}`))
			}
			return true
		case r.Method == "tools/call":
			callID = r.ID
			prime()
			return true
		}
		return false
	}, testpeer.WithSessionID(""))
}

// gets counts the GETs srv received.
func gets(srv *testpeer.HTTP) int {
	n := 0
	for _, r := range srv.Requests() {
		if r.HTTPMethod == http.MethodGet {
			n++
		}
	}
	return n
}

func TestHTTPPolledStreamProgressesByEventIDs(t *testing.T) {
	t.Parallel()
	srv := pollingServer(t, 6, 0)
	c, err := mcpclient.Connect(context.Background(), &transport.HTTP{URL: srv.URL, MaxResumes: 2}, noWait)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CallTool(context.Background(), "slow", nil); err != nil {
		t.Fatalf("a call polled 6 times with a resumption limit of 2: %v", err)
	}
	if n := gets(srv); n != 6 {
		t.Errorf("%d polls", n)
	}
}

func TestHTTPResumptionIsBounded(t *testing.T) {
	t.Parallel()
	srv := pollingServer(t, 0, http.StatusInternalServerError)
	c, err := mcpclient.Connect(context.Background(), &transport.HTTP{URL: srv.URL, MaxResumes: 3}, noWait)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.CallTool(context.Background(), "slow", nil)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("error %v, want ErrOutcomeUnknown once resumption gives up", err)
	}
	if n := gets(srv); n != 3 {
		t.Errorf("%d resumption attempts, want 3", n)
	}
}

// The test runs alone: the server's ping must be answered within 200 ms.
func TestHTTPServerStreamOpensOnlyWhenAsked(t *testing.T) {
	for _, asked := range []bool{false, true} {
		t.Run(fmt.Sprint("asked=", asked), func(t *testing.T) {
			pinged := make(chan error, 1)
			srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(unsafeTool, func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
				ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				defer cancel()
				_, err := call.Request(ctx, "ping", nil)
				pinged <- err
				return &mcpclient.CallToolResult{}, nil
			}))
			var opts []mcpclient.Option
			if asked {
				opts = append(opts, mcpclient.WithServerStream())
			}
			c, rec := httpClient(t, srv, opts...)
			if _, err := c.CallTool(context.Background(), "reserve", nil); err != nil {
				t.Fatal(err)
			}
			gets := 0
			for _, r := range rec.all() {
				if r.method == http.MethodGet {
					gets++
				}
			}
			err := <-pinged
			switch {
			case asked && (gets != 1 || err != nil):
				t.Errorf("asked: %d GETs, server ping %v; want the stream open and the ping answered", gets, err)
			case !asked && (gets != 0 || err == nil):
				t.Errorf("default: %d GETs, server ping %v; want no stream", gets, err)
			}
		})
	}
}

// A 404 on one request ends the session for new requests only: a concurrent call the server is
// still executing gets its answer, rather than an unknown outcome it did nothing to earn.
func TestHTTPSessionExpiryLetsConcurrentCallsFinish(t *testing.T) {
	t.Parallel()
	for _, sse := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[sse], func(t *testing.T) {
			started := make(chan struct{})
			release := make(chan struct{})
			slow := func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
				close(started)
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("done")}}, nil
			}
			var k counter
			opts := []mcptest.Option{
				mcptest.WithTool(mcpclient.Tool{Name: "slow"}, slow),
				mcptest.WithTool(unsafeTool, k.tool),
				mcptest.WithFault(mcptest.Fault{Kind: mcptest.ExpireSession, Tool: "reserve"}),
			}
			if sse {
				opts = append(opts, mcptest.WithSSEResponses(0))
			}
			srv := mcptest.NewTestHTTPServer(t, opts...)
			c, _ := httpClient(t, srv, noWait)
			first := c.SessionID()

			type outcome struct {
				resp *mcpclient.Response
				err  error
			}
			done := make(chan outcome, 1)
			go func() {
				resp, err := c.Do(context.Background(), callReq(t, c, "slow", nil))
				done <- outcome{resp, err}
			}()
			<-started
			resp, err := c.Do(context.Background(), callReq(t, c, "reserve", nil))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Attempts != 2 || c.SessionID() == first {
				t.Errorf("reserve: %d attempts, session %q (was %q)", resp.Attempts, c.SessionID(), first)
			}
			close(release)
			o := <-done
			if o.err != nil {
				t.Fatalf("the concurrent call: %v", o.err)
			}
			if o.resp.Attempts != 1 {
				t.Errorf("the concurrent call took %d attempts, want 1", o.resp.Attempts)
			}
		})
	}
}

// A reconnection to a server that answered server/discover as an older one goes straight to
// initialize: the probe is paid once per client, not once per session.
func TestHTTPReconnectionToAnOlderServerSkipsTheProbe(t *testing.T) {
	t.Parallel()
	var k counter
	srv := mcptest.NewTestHTTPServer(t,
		mcptest.WithTool(unsafeTool, k.tool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.ExpireSession, Tool: "reserve"}))
	c, rec := httpClient(t, srv, noWait)
	first := c.SessionID()
	if _, err := c.Do(context.Background(), callReq(t, c, "reserve", nil)); err != nil {
		t.Fatal(err)
	}
	if c.SessionID() == first {
		t.Fatal("the session did not expire")
	}
	var probes, starts int
	for _, r := range rec.all() {
		switch {
		case r.header.Get("Mcp-Method") == "server/discover":
			probes++
		case r.method == http.MethodPost && r.header.Get("Mcp-Session-Id") == "":
			starts++
		}
	}
	if probes != 1 || starts != 2 {
		t.Errorf("%d server/discover and %d initialize for two sessions, want 1 and 2", probes, starts)
	}
	if c.ProtocolVersion() != mcpclient.LatestStatefulProtocolVersion {
		t.Errorf("protocol %q after the reconnection", c.ProtocolVersion())
	}
}

// A gateway may answer 5xx after the server ran the request (an upstream reset before its
// headers, a gateway timeout): only 429 and 503 that carry the server's Retry-After prove the
// request was turned away before it was read.
func TestHTTPStatusWithoutRetryAfterIsUncertain(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status     int
		retryAfter string
		delivered  bool // the first attempt may have reached the handler
	}{
		{http.StatusInternalServerError, "", true},
		{http.StatusBadGateway, "", true},
		{http.StatusServiceUnavailable, "", true},
		{http.StatusGatewayTimeout, "", true},
		{http.StatusGatewayTimeout, "1", true}, // Retry-After proves nothing on a gateway timeout
		{http.StatusTooManyRequests, "", true},
		{http.StatusServiceUnavailable, "0", false},
		{http.StatusTooManyRequests, "0", false},
		{http.StatusServiceUnavailable, "Wed, 21 Oct 2015 07:28:00 GMT", false}, // a date in the past: no wait
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d-retry-after-%q", tc.status, tc.retryAfter), func(t *testing.T) {
			srv := testpeer.NewHTTP(t, firstToolCall(func(r *testpeer.Request) {
				if tc.retryAfter != "" {
					r.W.Header().Set("Retry-After", tc.retryAfter)
				}
				http.Error(r.W, "upstream connect error or disconnect/reset before headers", tc.status)
			}))
			c := connect(t, &transport.HTTP{URL: srv.URL})
			req := callReq(t, c, "reserve", nil)
			resp, err := c.Do(testCtx(t), req)
			if !tc.delivered {
				if err != nil || resp.Attempts != 2 {
					t.Fatalf("err %v: want the request resent after a refusal that proves it was not read", err)
				}
				return
			}
			if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
				t.Fatalf("err %v, want ErrOutcomeUnknown: the tool may have run behind the gateway", err)
			}
			if n := srv.Count("tools/call"); n != 1 {
				t.Errorf("the unsafe call was sent %d times without receipts", n)
			}
			if e, _ := c.Ledger().Lookup(req.ID()); e.State != mcpclient.StateUncertain {
				t.Errorf("ledger state %v, want uncertain", e.State)
			}
		})
	}
}

// errorBodyServer answers tools/call (the first only, with once) with status and a JSON body.
func errorBodyServer(t *testing.T, status int, body string, once bool) *testpeer.HTTP {
	first := testpeer.Once()
	return testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		if r.Method != "tools/call" || (once && !first()) {
			return false
		}
		r.W.Header().Set("Content-Type", "application/json")
		r.W.WriteHeader(status)
		io.WriteString(r.W, body)
		return true
	})
}

// A JSON-RPC error object whose id is null or another request's is not this request's answer: a
// gateway's 502 carrying one says nothing about whether the request ran.
func TestHTTPErrorBodyForAnotherIDIsNotTheAnswer(t *testing.T) {
	t.Parallel()
	for _, id := range []string{`null`, `"someone-else"`} {
		t.Run(id, func(t *testing.T) {
			body := `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32603,"message":"upstream failed"}}`
			t.Run("receipts", func(t *testing.T) {
				srv := errorBodyServer(t, http.StatusBadGateway, body, true)
				c := connect(t, &transport.HTTP{URL: srv.URL}, mcpclient.WithReceipts(mcpclient.ReceiptScopeSession))
				req := callReq(t, c, "reserve", nil)
				resp, err := c.Do(testCtx(t), req)
				if err != nil {
					t.Fatalf("err %v: the error body was taken as the answer instead of resending", err)
				}
				if resp.Attempts != 2 || resp.Request.ID() != req.ID() {
					t.Errorf("attempts %d under %v, want the same id resent once", resp.Attempts, resp.Request.ID())
				}
			})
			t.Run("no-receipts", func(t *testing.T) {
				srv := errorBodyServer(t, http.StatusBadGateway, body, false)
				c := connect(t, &transport.HTTP{URL: srv.URL})
				req := callReq(t, c, "reserve", nil)
				_, err := c.Do(testCtx(t), req)
				if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || mcpclient.IsWireError(err) {
					t.Fatalf("err %v, want ErrOutcomeUnknown with no server answer in it", err)
				}
				if e, _ := c.Ledger().Lookup(req.ID()); e.State != mcpclient.StateUncertain {
					t.Errorf("ledger state %v, want uncertain", e.State)
				}
			})
		})
	}
	// A 4xx is the refusal of this request whatever id its body names: the body is its detail.
	t.Run("4xx", func(t *testing.T) {
		srv := errorBodyServer(t, http.StatusBadRequest, `{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"bad arguments"}}`, false)
		c := connect(t, &transport.HTTP{URL: srv.URL})
		_, err := c.CallTool(testCtx(t), "reserve", nil)
		var rpc *mcpclient.RPCError
		if mcpclient.CodeOf(err) != mcpclient.CodeServerError || !errors.As(err, &rpc) || rpc.Code != mcpclient.RPCInvalidParams {
			t.Fatalf("err %v, want the server's refusal with its JSON-RPC detail", err)
		}
	})
}

// A 202 to a request leaves its answer to a stream; when there is none (a stateless revision has
// no GET stream, an older server refuses the GET), nothing will ever answer: the call ends at
// once as uncertain instead of waiting for its deadline.
func TestHTTPAcceptedRequestWithoutAStreamEndsAtOnce(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, c *mcpclient.Client, sent func() int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		_, err := c.CallTool(ctx, "reserve", nil)
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("the call took %v", took)
		}
		if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v, want ErrOutcomeUnknown at once", err)
		}
		if n := sent(); n != 1 {
			t.Errorf("the unsafe call was sent %d times", n)
		}
	}
	t.Run("get-refused", func(t *testing.T) {
		srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
			if r.Method == "tools/call" {
				r.W.WriteHeader(http.StatusAccepted)
				return true
			}
			return false
		})
		c := connect(t, &transport.HTTP{URL: srv.URL})
		check(t, c, func() int { return srv.Count("tools/call") })
	})
	// The GET stream opens, then ends for good before the answer: the requests that waited for
	// it end then.
	t.Run("get-stream-ends", func(t *testing.T) {
		var gets atomic.Int32
		srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
			switch {
			case r.HTTPMethod == http.MethodGet:
				if gets.Add(1) > 1 {
					r.W.WriteHeader(http.StatusMethodNotAllowed)
					return true
				}
				r.W.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(r.W, "retry: 10\n\n")
				r.W.(http.Flusher).Flush()
				time.Sleep(200 * time.Millisecond) // the stream is up while the 202 is read
				return true
			case r.Method == "tools/call":
				r.W.WriteHeader(http.StatusAccepted)
				return true
			}
			return false
		})
		c := connect(t, &transport.HTTP{URL: srv.URL})
		check(t, c, func() int { return srv.Count("tools/call") })
	})
	t.Run("stateless", func(t *testing.T) {
		s := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
			if r.Method == "tools/call" {
				r.Reply(http.StatusAccepted, result(`{}`))
				return true
			}
			return false
		}, testpeer.Stateless())
		c := connect(t, &transport.HTTP{URL: s.URL})
		check(t, c, func() int { return s.Count("tools/call") })
	})
}

// A response stream that ends with nothing but a retry: field still tells the client how long to
// wait before asking again.
func TestHTTPStreamRetryFieldBoundsTheResend(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		retryMS  int
		maxDelay time.Duration
		want     time.Duration
	}{
		{"hint", 200, 0, 200 * time.Millisecond},
		{"capped", 60_000, 150 * time.Millisecond, 150 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := testpeer.NewHTTP(t, firstToolCall(func(r *testpeer.Request) {
				r.W.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprintf(r.W, "retry: %d\n\n", tc.retryMS)
			}))
			var mu sync.Mutex
			var waits []time.Duration
			c := connect(t, &transport.HTTP{URL: srv.URL},
				mcpclient.WithReceipts(mcpclient.ReceiptScopeSession),
				mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{
					NewBackOff:     func() backoff.BackOff { return &backoff.ZeroBackOff{} },
					MaxServerDelay: tc.maxDelay,
					OnRetry: func(_ int, _ error, d time.Duration) {
						mu.Lock()
						waits = append(waits, d)
						mu.Unlock()
					},
				}))
			start := time.Now()
			resp, err := c.CallTool(testCtx(t), "reserve", nil)
			if err != nil || resp.Text() != "ok" {
				t.Fatalf("err %v", err)
			}
			if took := time.Since(start); took < tc.want {
				t.Errorf("resent after %v, before the server's delay of %v", took, tc.want)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(waits) != 1 || waits[0] != tc.want {
				t.Errorf("waits %v, want [%v]", waits, tc.want)
			}
		})
	}
}

type tenantKey struct{}

// HeaderFunc chooses headers per caller (a user's token, a tenant) from the values of the
// context the call was made with.
func TestHTTPHeaderFuncSeesTheCallersContext(t *testing.T) {
	t.Parallel()
	bothResponseKinds(t, func(t *testing.T, opts ...mcptest.Option) {
		srv := mcptest.NewTestHTTPServer(t, append(opts, mcptest.WithTool(unsafeTool, (&counter{}).tool))...)
		var mu sync.Mutex
		seen := map[string]int{} // tenant -> requests
		tr := &transport.HTTP{URL: srv.URL, HeaderFunc: func(ctx context.Context, h http.Header) error {
			tenant, _ := ctx.Value(tenantKey{}).(string)
			mu.Lock()
			seen[tenant]++
			mu.Unlock()
			return nil
		}}
		c, err := mcpclient.Connect(context.WithValue(context.Background(), tenantKey{}, "connector"), tr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		mu.Lock()
		if seen["connector"] == 0 {
			t.Errorf("Connect's requests carried none of its context's values: %v", seen)
		}
		clear(seen)
		mu.Unlock()
		ctx := context.WithValue(context.Background(), tenantKey{}, "acme")
		if _, err := c.CallTool(ctx, "reserve", nil); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if seen["acme"] != 1 || len(seen) != 1 {
			t.Errorf("HeaderFunc saw tenants %v for one call, want the caller's %q once", seen, "acme")
		}
	})
}

// TestSecuritySessionIDMustBeVisibleASCII: an Mcp-Session-Id outside 0x21-0x7E is refused at
// initialize, as a protocol violation (CodeProtocol), and never sent.
func TestSecuritySessionIDMustBeVisibleASCII(t *testing.T) {
	t.Parallel()
	for name, bad := range map[string]string{
		"space":     "abc def",
		"tab":       "abc\tdef",
		"utf-8":     "séance",
		"high byte": "abc\x80def",
	} {
		t.Run(name, func(t *testing.T) {
			var badInit, expire atomic.Bool
			var seenMu sync.Mutex
			var seen []string // every Mcp-Session-Id the server received
			srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
				if sid, ok := r.Header["Mcp-Session-Id"]; ok {
					seenMu.Lock()
					seen = append(seen, sid...)
					seenMu.Unlock()
				}
				switch {
				case r.Method == "initialize" && badInit.Load():
					r.W.Header().Set("Mcp-Session-Id", bad)
					r.JSON(testpeer.Result(r.ID, testpeer.InitResult))
					return true
				case r.Method == "ping" && expire.CompareAndSwap(true, false):
					http.Error(r.W, "no such session", http.StatusNotFound)
					return true
				}
				return false
			})
			tr := &transport.HTTP{URL: srv.URL}
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, transport.ErrInvalidSessionID) {
					t.Fatalf("%s: error %v, want ErrInvalidSessionID", what, err)
				}
				if mcpclient.CodeOf(err) != mcpclient.CodeProtocol {
					t.Errorf("%s: error %v has code %v, want %v: the server's answer is not valid MCP",
						what, err, mcpclient.CodeOf(err), mcpclient.CodeProtocol)
				}
				if strings.Contains(err.Error(), bad) {
					t.Errorf("%s: the error shows the session id: %v", what, err)
				}
			}

			// At Connect: refused at once (asking again gets the same id).
			badInit.Store(true)
			_, err := mcpclient.Connect(testCtx(t), tr, noWait)
			check("connect", err)
			if e := asError(t, err); e.Attempts > 1 {
				t.Errorf("initialize sent %d times, want 1", e.Attempts)
			}

			// On a reconnect after the session expired: the call fails, the next one works.
			badInit.Store(false)
			c := connect(t, tr)
			badInit.Store(true)
			expire.Store(true)
			check("reconnect", c.Ping(testCtx(t)))
			badInit.Store(false)
			if err := c.Ping(testCtx(t)); err != nil {
				t.Fatalf("ping once the server behaves: %v", err)
			}
			if c.SessionID() != testpeer.SessionID {
				t.Errorf("session id %q, want %q", c.SessionID(), testpeer.SessionID)
			}
			c.Close()
			seenMu.Lock()
			defer seenMu.Unlock()
			for _, sid := range seen {
				if sid != testpeer.SessionID {
					t.Errorf("the client sent session id %q", sid)
				}
			}
		})
	}
}

// A TypeScript SDK server refuses an unknown session with 400 and -32000, not 404.
func TestHTTPSessionRefusedWith400IsALostSession(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	sessions, inits := map[string]bool{}, 0
	srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == "initialize":
			inits++
			sid := fmt.Sprint("s", inits)
			sessions[sid] = true
			r.W.Header().Set("Mcp-Session-Id", sid)
			r.Answer(testpeer.InitResult)
		case !sessions[r.Header.Get("Mcp-Session-Id")]:
			r.W.Header().Set("Content-Type", "application/json")
			r.W.WriteHeader(http.StatusBadRequest)
			io.WriteString(r.W, `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`)
		case r.ID == nil:
			return false
		default:
			delete(sessions, "s1") // the first session expires after its first request
			r.Answer(`{}`)
		}
		return true
	})
	c, err := mcpclient.Connect(context.Background(), &transport.HTTP{URL: srv.URL}, noWait)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("after the session expired: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if inits != 2 {
		t.Errorf("%d initialize requests, want 2", inits)
	}
}

func TestHTTPTimeoutKeepsItsCause(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(unsafeTool, func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &mcpclient.CallToolResult{}, nil
	}))
	c := mcptest.NewClient(t, srv)
	_, err := c.CallTool(context.Background(), "reserve", nil, mcpclient.WithTimeouts(0, 50*time.Millisecond))
	if !errors.Is(err, mcpclient.ErrCallTimeout) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("error %v: want the timeout as the cause of an unknown outcome", err)
	}
}
