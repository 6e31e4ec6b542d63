package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// errGaveUp is the cause a caller gives its own cancellation.
var errGaveUp = errors.New("the user closed the window")

// callerEndings are the ways a caller's context ends, each with the errors a caller must find in
// the call's error with errors.Is to tell its own ending from any other failure, and one it must
// not find.
var callerEndings = []struct {
	name string
	make func() (ctx context.Context, end func())
	want []error
	not  error
}{
	{"cancelled", func() (context.Context, func()) {
		return context.WithCancel(context.Background())
	}, []error{context.Canceled}, context.DeadlineExceeded},
	{"cancelled with a cause", func() (context.Context, func()) {
		ctx, cancel := context.WithCancelCause(context.Background())
		return ctx, func() { cancel(errGaveUp) }
	}, []error{context.Canceled, errGaveUp}, context.DeadlineExceeded},
	{"past its deadline", func() (context.Context, func()) {
		ctx := &expiringCtx{Context: context.Background(), done: make(chan struct{})}
		return ctx, ctx.expire
	}, []error{context.DeadlineExceeded}, context.Canceled},
}

// expiringCtx is a context whose deadline passes when the test says: its Err is then
// context.DeadlineExceeded, as a deadline's is, at the moment the test chooses.
type expiringCtx struct {
	context.Context // Background: nothing else ends it
	done            chan struct{}
	once            sync.Once
}

func (c *expiringCtx) expire()               { c.once.Do(func() { close(c.done) }) }
func (c *expiringCtx) Done() <-chan struct{} { return c.done }
func (c *expiringCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func wantEnding(t *testing.T, err error, want []error, not error) {
	t.Helper()
	for _, w := range want {
		if !errors.Is(err, w) {
			t.Errorf("errors.Is(err, %v) is false for %v", w, err)
		}
	}
	if errors.Is(err, not) {
		t.Errorf("errors.Is(err, %v) is true for %v", not, err)
	}
}

// A call whose context ended before anything was sent is not delivered, with the context's error
// in its chain: nothing ran.
func TestCallerEndingBeforeSendingIsNotDelivered(t *testing.T) {
	t.Parallel()
	featEach(t, func(t *testing.T, b featBackend) {
		var k counter
		srv, d := b.start(t, mcptest.WithTool(unsafeTool, k.tool))
		c := mcptest.NewClient(t, d)
		for _, ending := range callerEndings {
			t.Run(ending.name, func(t *testing.T) {
				ctx, end := ending.make()
				end()
				req := callReq(t, c, "reserve", nil)
				_, err := c.Do(ctx, req)
				if code := mcpclient.CodeOf(err); code != mcpclient.CodeNotDelivered {
					t.Errorf("code %v, want %v: %v", code, mcpclient.CodeNotDelivered, err)
				}
				wantEnding(t, err, ending.want, ending.not)
				if n := len(srv.Received(req.ID())); n != 0 || srv.Executions("reserve") != 0 {
					t.Errorf("the server received the request %d times and ran the tool %d times", n, srv.Executions("reserve"))
				}
			})
		}
	})
}

// A call whose context ends while it awaits its answer has an unknown outcome (the tool may have
// run), and the caller tells its own ending from any other unknown outcome with errors.Is.
func TestCallerEndingWhileAwaitingIsUnknownAndTellable(t *testing.T) {
	t.Parallel()
	featEach(t, func(t *testing.T, b featBackend) {
		started := make(chan struct{}, 1)
		_, d := b.start(t, mcptest.WithTool(unsafeTool, func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			started <- struct{}{}
			<-ctx.Done()
			return featText("finished anyway"), nil
		}))
		c := mcptest.NewClient(t, d)
		for _, ending := range callerEndings {
			t.Run(ending.name, func(t *testing.T) {
				ctx, end := ending.make()
				defer end()
				req := callReq(t, c, "reserve", nil)
				done := make(chan error, 1)
				go func() {
					_, err := c.Do(ctx, req)
					done <- err
				}()
				recv(t, started, "the tool to start")
				end()
				err := recv(t, done, "the call to end")
				if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
					t.Fatalf("err %v, want ErrOutcomeUnknown", err)
				}
				wantEnding(t, err, ending.want, ending.not)
				if e := asError(t, err); e.Request == nil || e.Request.ID() != req.ID() {
					t.Errorf("the error names %v, want the request %v", e.Request, req.ID())
				}
			})
		}
	})
}

// A response that comes after the client cancelled its request is expected, and logged at debug
// level; a response for an id the client never sent is still a warning.
func TestLateAnswerToACancelledCallIsNoWarning(t *testing.T) {
	t.Parallel()
	arrived, told := make(chan struct{}), make(chan struct{})
	var held json.RawMessage // the reader goroutine's alone
	srv := testpeer.NewPipe(t, func(c *testpeer.Conn, m testpeer.Msg) bool {
		switch m.Method {
		case "tools/call":
			held = m.ID // answered late
			close(arrived)
			return true
		case "notifications/cancelled":
			c.Send(testpeer.Result(held, testpeer.ToolResult))
			c.Send(testpeer.Result(json.RawMessage(`"never-sent"`), `{}`))
			close(told)
			return true
		}
		return false
	})
	logs := new(logRecords)
	c := connect(t, srv.Transport(), mcpclient.WithLogger(slog.New(logs)))
	req := callReq(t, c, "reserve", nil)
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() {
		_, err := c.Do(ctx, req)
		done <- err
	}()
	recv(t, arrived, "the request to reach the server")
	cancel()
	if err := recv(t, done, "the call to end"); !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want ErrOutcomeUnknown and context.Canceled", err)
	}
	recv(t, told, "the notice of the cancellation")
	// The ping's answer comes after both responses, on the same connection: they were routed.
	if err := c.Ping(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := logs.levelOf(req.ID().JSON()); got != slog.LevelDebug {
		t.Errorf("the late answer to the cancelled request was logged at %v, want %v", got, slog.LevelDebug)
	}
	if got := logs.levelOf(`"never-sent"`); got != slog.LevelWarn {
		t.Errorf("the answer for an id never sent was logged at %v, want %v", got, slog.LevelWarn)
	}
}

// logRecords is a slog.Handler that keeps every record.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecords) WithGroup(string) slog.Handler            { return h }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}

// levelOf returns the level of the record about a response for id (its "id" attribute), or
// slog.LevelError-1 if none was logged.
func (h *logRecords) levelOf(id string) slog.Level {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recs {
		found := false
		r.Attrs(func(a slog.Attr) bool {
			found = a.Key == "id" && a.Value.String() == id
			return !found
		})
		if found {
			return r.Level
		}
	}
	return slog.LevelError - 1
}
