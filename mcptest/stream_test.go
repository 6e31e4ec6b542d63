package mcptest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/transporttest"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// stdioServerEnv makes the test binary serve an mcptest server over its stdin and stdout
// instead of running the tests.
const stdioServerEnv = "MCPTEST_STREAM_TEST_SERVER"

func init() {
	if os.Getenv(stdioServerEnv) != "" {
		srv := mcptest.NewServer(mcptest.WithTool(mcpclient.Tool{Name: "pid"}, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(fmt.Sprint("pid ", os.Getpid()))}}, nil
		}))
		err := srv.ServeStream(context.Background(), os.Stdin, os.Stdout)
		srv.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// pipeEnd is one end of a pair of io.Pipes: it reads what the other end writes, and the other
// end reads what it writes.
type pipeEnd struct {
	*io.PipeReader
	*io.PipeWriter
}

func (p pipeEnd) Close() error {
	p.PipeWriter.Close()
	return p.PipeReader.Close()
}

// serveOverPipes runs srv.ServeStream over a pair of pipes and returns a transport whose one
// connection is their other end, and where ServeStream's error arrives. When ServeStream
// returns, the stream towards the client ends, as when a server process exits. The test's
// cleanup waits for ServeStream.
func serveOverPipes(t *testing.T, ctx context.Context, srv *mcptest.Server) (transport.Transport, <-chan error) {
	t.Helper()
	fromClient, toServer := io.Pipe()
	fromServer, toClient := io.Pipe()
	done := make(chan error, 1)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		err := srv.ServeStream(ctx, fromClient, toClient)
		toClient.Close()
		fromClient.Close()
		done <- err
	}()
	var opened atomic.Bool
	tr := &transport.Stream{Open: func(context.Context) (io.ReadWriteCloser, error) {
		if opened.Swap(true) {
			return nil, errors.New("the stream serves one connection")
		}
		return pipeEnd{fromServer, toServer}, nil
	}}
	t.Cleanup(func() {
		toServer.Close()
		fromServer.Close()
		select {
		case <-returned:
		case <-time.After(10 * time.Second):
			t.Error("ServeStream did not return")
		}
	})
	return tr, done
}

// awaitServe returns ServeStream's error, failing the test if it does not come.
func awaitServe(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("ServeStream did not return")
		return nil
	}
}

// A client over a byte stream calls a tool that reports progress and asks the client for a
// sample, receives a notification, sends one, and ending its side of the stream ends
// ServeStream without error.
func TestServeStreamServesAClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "ask"}, func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		call.Progress(1, 2, "asking")
		raw, err := call.Request(ctx, "sampling/createMessage", mcpclient.CreateMessageParams{
			Messages:  []mcpclient.SamplingMessage{{Role: "user", Content: mcpclient.SamplingContent{mcpclient.TextContent("ping?")}}},
			MaxTokens: 10,
		})
		if err != nil {
			return nil, err
		}
		var sample mcpclient.CreateMessageResult
		if err := json.Unmarshal(raw, &sample); err != nil {
			return nil, err
		}
		call.Progress(2, 2, "answered")
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("the model said " + sample.Content[0].Text)}}, nil
	}))
	tr, done := serveOverPipes(t, ctx, srv)

	notified := make(chan string, 1)
	c, err := mcpclient.Connect(ctx, tr,
		mcpclient.WithSamplingHandler(func(_ context.Context, p *mcpclient.CreateMessageParams) (*mcpclient.CreateMessageResult, error) {
			return &mcpclient.CreateMessageResult{Role: "assistant", Model: "scripted",
				Content: mcpclient.SamplingContent{mcpclient.TextContent("pong to " + p.Messages[0].Content[0].Text)}}, nil
		}),
		mcpclient.WithNotificationHandler("notifications/example", func(_ context.Context, _ string, params json.RawMessage) {
			notified <- string(params)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	var progress []string
	res, err := c.CallTool(ctx, "ask", nil, mcpclient.WithProgress(func(p mcpclient.Progress) {
		progress = append(progress, fmt.Sprintf("%v/%v %s", p.Progress, p.Total, p.Message))
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Text(), "the model said pong to ping?"; got != want {
		t.Errorf("result %q, want %q", got, want)
	}
	if got, want := strings.Join(progress, ", "), "1/2 asking, 2/2 answered"; got != want {
		t.Errorf("progress %q, want %q", got, want)
	}

	if err := srv.AwaitNotifications(ctx, "notifications/initialized", 1); err != nil {
		t.Error(err)
	}
	srv.Notify("notifications/example", map[string]int{"n": 1})
	select {
	case got := <-notified:
		if got != `{"n":1}` {
			t.Errorf("notification params %s", got)
		}
	case <-ctx.Done():
		t.Error("the notification did not reach the client")
	}

	c.Close()
	if err := awaitServe(t, done); err != nil {
		t.Errorf("ServeStream after the client closed: %v, want nil", err)
	}
}

// Frames are lines: blank lines are skipped, a "\r" before the newline is dropped, each answer
// is one line, and the end of the input ends ServeStream without error.
func TestServeStreamFramesLines(t *testing.T) {
	srv := mcptest.NewTestServer(t)
	fromClient, toServer := io.Pipe()
	fromServer, toClient := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- srv.ServeStream(context.Background(), fromClient, toClient)
		toClient.Close()
	}()
	lines := bufio.NewScanner(fromServer)
	var got []string
	write := func(s string) {
		t.Helper()
		if _, err := io.WriteString(toServer, s); err != nil {
			t.Fatal(err)
		}
	}
	write("\n  \n" + `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}` + "\r\n")
	if lines.Scan() {
		got = append(got, lines.Text())
	}
	// The last line ends with the stream, without a newline.
	write(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" + `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	toServer.Close()
	for lines.Scan() {
		got = append(got, lines.Text())
	}
	if err := awaitServe(t, served); err != nil {
		t.Errorf("ServeStream at the end of its input: %v, want nil", err)
	}
	if len(got) != 2 || !strings.HasPrefix(got[0], `{"jsonrpc":"2.0","id":1,"result":{`) || got[1] != `{"jsonrpc":"2.0","id":2,"result":{}}` {
		t.Errorf("the server wrote %d lines:\n%s", len(got), strings.Join(got, "\n"))
	}
	if n := srv.NotificationsReceived("notifications/initialized"); n != 1 {
		t.Errorf("%d notifications/initialized received, want 1", n)
	}
}

// The end of ctx ends ServeStream while it waits for input: through a read deadline on a reader
// that has one, cleared again before ServeStream returns, and by closing a reader that has none.
func TestServeStreamEndsWithItsContext(t *testing.T) {
	stop := errors.New("stop")
	serve := func(t *testing.T, r io.Reader) error {
		srv := mcptest.NewTestServer(t)
		ctx, cancel := context.WithCancelCause(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.ServeStream(ctx, r, io.Discard) }()
		cancel(stop)
		return awaitServe(t, done)
	}
	t.Run("read deadline", func(t *testing.T) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		defer w.Close()
		if err := serve(t, r); !errors.Is(err, stop) {
			t.Errorf("ServeStream = %v, want the context's cause", err)
		}
		if _, err := io.WriteString(w, "after\n"); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len("after\n"))
		if _, err := io.ReadFull(r, buf); err != nil || string(buf) != "after\n" {
			t.Errorf("reading the pipe after ServeStream: %q, %v", buf, err)
		}
	})
	t.Run("closed reader", func(t *testing.T) {
		r, w := io.Pipe()
		if err := serve(t, r); !errors.Is(err, stop) {
			t.Errorf("ServeStream = %v, want the context's cause", err)
		}
		if _, err := io.WriteString(w, "after\n"); !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("writing to the pipe after ServeStream: %v, want io.ErrClosedPipe", err)
		}
	})
}

// A server that closes ends ServeStream with an error, though its input goes on.
func TestServeStreamEndsWhenTheServerCloses(t *testing.T) {
	srv := mcptest.NewServer()
	defer srv.Close()
	fromClient, toServer := io.Pipe()
	fromServer, toClient := io.Pipe()
	defer toServer.Close()
	defer fromServer.Close()
	done := make(chan error, 1)
	go func() { done <- srv.ServeStream(context.Background(), fromClient, toClient) }()
	go io.WriteString(toServer, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`+"\n")
	if line, err := bufio.NewReader(fromServer).ReadString('\n'); err != nil || !strings.HasPrefix(line, `{"jsonrpc":"2.0","id":1,"result":{`) {
		t.Fatalf("initialize answered %q, %v", line, err)
	}
	srv.Close()
	if err := awaitServe(t, done); err == nil || !strings.Contains(err.Error(), "server ended the connection") {
		t.Errorf("ServeStream after Close: %v, want the server's end", err)
	}
}

// A line of exactly 64 MiB is served; one byte more ends ServeStream with ErrMessageTooLarge.
func TestServeStreamRefusesALineOverTheLimit(t *testing.T) {
	srv := mcptest.NewTestServer(t)
	fromClient, toServer := io.Pipe()
	note := `{"jsonrpc":"2.0","method":"notifications/padded"}`
	pad := strings.Repeat(" ", transport.DefaultMaxMessageSize-len(note))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, s := range []string{note, pad, "\r\n", note, pad, " \n"} {
			if _, err := io.WriteString(toServer, s); err != nil {
				return
			}
		}
		toServer.Close()
	}()
	err := srv.ServeStream(context.Background(), fromClient, io.Discard)
	fromClient.Close() // the writer may still be writing
	wg.Wait()
	if !errors.Is(err, transport.ErrMessageTooLarge) {
		t.Errorf("ServeStream = %v, want ErrMessageTooLarge", err)
	}
	if n := srv.NotificationsReceived("notifications/padded"); n != 1 {
		t.Errorf("%d padded notifications served, want the one at the limit", n)
	}
}

// A program serving os.Stdin and os.Stdout with ServeStream is a server transport.Command can
// run: it answers, and exits by itself once its stdin closes.
func TestServeStreamOverStdio(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A race-enabled binary sleeps a second at exit unless told not to.
	cmd := &transport.Command{Path: exe, Env: append(os.Environ(), stdioServerEnv+"=1", "GORACE=atexit_sleep_ms=0")}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in := new(transporttest.Queue)
	conn, err := cmd.Connect(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	exchange := func(frames ...string) string {
		t.Helper()
		for _, frame := range frames {
			if err := conn.Send(ctx, &transport.Message{Frame: []byte(frame)}); err != nil {
				t.Fatal(err)
			}
		}
		answer, err := in.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return string(answer)
	}
	exchange(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	answer := exchange(`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pid"}}`)
	if !strings.Contains(answer, `"id":2,"result":{"content":[{"type":"text","text":"pid `) || strings.Contains(answer, fmt.Sprint(os.Getpid())) {
		t.Errorf("tools/call answered %s", answer)
	}
	if err := conn.Close(); err != nil {
		t.Errorf("Close: %v, want nil: the server exits by itself at the end of its stdin", err)
	}
}

// A byte stream cannot say that an exchange broke: a reply a fault drops never comes, and the
// client's call ends with its own timeout, its outcome unknown, the tool having run once.
func TestServeStreamLeavesADroppedReplyUnanswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs int
		var mu sync.Mutex
		srv := mcptest.NewServer(mcptest.WithMode(mcptest.ModeNone),
			mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echo(&runs, &mu)),
			mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "echo"}))
		defer srv.Close()
		tr, _ := serveOverPipes(t, context.Background(), srv)
		c, err := mcpclient.Connect(context.Background(), tr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		_, err = c.CallTool(context.Background(), "echo", nil, mcpclient.WithTimeouts(time.Second, 0))
		if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, mcpclient.ErrCallTimeout) || time.Since(start) != time.Second {
			t.Errorf("after %v: %v, want ErrOutcomeUnknown by the idle timeout of 1s", time.Since(start), err)
		}
		mu.Lock()
		defer mu.Unlock()
		if runs != 1 {
			t.Errorf("the tool ran %d times, want 1", runs)
		}
	})
}

// A stream cannot refuse a frame: a request refused before it runs is answered with a JSON-RPC
// error, so that a client probing with server/discover before initialize learns at once.
func TestServeStreamAnswersRefusals(t *testing.T) {
	srv := mcptest.NewTestServer(t, mcptest.WithFault(mcptest.Fault{Kind: mcptest.Fail, Method: "ping"}))
	fromClient, toServer := io.Pipe()
	fromServer, toClient := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- srv.ServeStream(context.Background(), fromClient, toClient)
		toClient.Close()
	}()
	lines := bufio.NewScanner(fromServer)
	exchange := func(frame string) string {
		t.Helper()
		if _, err := io.WriteString(toServer, frame+"\n"); err != nil {
			t.Fatal(err)
		}
		if !lines.Scan() {
			t.Fatalf("no answer to %s: %v", frame, lines.Err())
		}
		return lines.Text()
	}
	if got := exchange(`{"jsonrpc":"2.0","id":1,"method":"server/discover"}`); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"no session`) {
		t.Errorf("server/discover before initialize answered %s", got)
	}
	exchange(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	if got := exchange(`{"jsonrpc":"2.0","id":3,"method":"ping"}`); got != `{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"mcptest: server unavailable (injected fault)"}}` {
		t.Errorf("a ping refused by a Fail fault answered %s", got)
	}
	toServer.Close()
	if err := awaitServe(t, served); err != nil {
		t.Errorf("ServeStream = %v, want nil", err)
	}
}

// When its input ends, ServeStream lets the requests still running finish and writes their
// answers; the server's own requests to the client fail, since nothing can answer them.
func TestServeStreamAnswersWhatRunsWhenItsInputEnds(t *testing.T) {
	synctest.Test(t, testServeStreamAnswersWhatRunsWhenItsInputEnds)
}

func testServeStreamAnswersWhatRunsWhenItsInputEnds(t *testing.T) {
	release := make(chan struct{})
	srv := mcptest.NewTestServer(t,
		mcptest.WithTool(mcpclient.Tool{Name: "slow"}, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			<-release
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("done")}}, nil
		}),
		mcptest.WithTool(mcpclient.Tool{Name: "ask"}, func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			_, err := call.Request(ctx, "roots/list", nil)
			return nil, err
		}))
	fromClient, toServer := io.Pipe()
	fromServer, toClient := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- srv.ServeStream(context.Background(), fromClient, toClient)
		toClient.Close()
	}()
	lines := bufio.NewScanner(fromServer)
	io.WriteString(toServer, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{}},"clientInfo":{"name":"raw","version":"0"}}}`+"\n")
	lines.Scan()
	io.WriteString(toServer, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow"}}`+"\n"+
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ask"}}`+"\n")
	if !lines.Scan() || !strings.Contains(lines.Text(), `"method":"roots/list"`) {
		t.Fatalf("the server's request was not sent: %s", lines.Text())
	}
	toServer.Close()
	synctest.Wait()
	select {
	case err := <-served:
		t.Fatalf("ServeStream returned (%v) while a request was running", err)
	default:
	}
	close(release)
	var got []string
	for lines.Scan() {
		got = append(got, lines.Text())
	}
	slices.Sort(got)
	if len(got) != 2 || !strings.HasPrefix(got[0], `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"done"}]`) ||
		!strings.Contains(got[1], `"id":3,"result":{"content":[{"type":"text","text":"mcptest: the session ended"}],"isError":true}`) {
		t.Errorf("after the end of the input the server wrote:\n%s", strings.Join(got, "\n"))
	}
	if err := awaitServe(t, served); err != nil {
		t.Errorf("ServeStream = %v, want nil", err)
	}
}
