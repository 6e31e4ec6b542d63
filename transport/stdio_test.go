//go:build unix

package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/internal/transporttest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// fakeServerEnv makes the test binary run as a fake stdio MCP server instead of the tests.
const fakeServerEnv = "MCPCLIENT_STDIO_TEST_SERVER"

func init() {
	if os.Getenv(fakeServerEnv) != "" {
		runFakeServer()
		os.Exit(0)
	}
}

// runFakeServer answers JSON-RPC lines on stdin: initialize, ping, and tools/call, whose tools
// echo their arguments except for these:
//
//   - die: exit(3) without answering
//   - stderr: write a line to stderr, then answer
//   - spawn: start a grandchild `sleep 300` sharing stdout and stderr; answer with its pid
//   - spawn-detached: the same, in a session of its own, out of reach of group signals
//   - stall: stop reading stdin after the answer
//   - linger: from now on ignore the end of stdin (but not SIGTERM)
//   - ignore-stdin-close: from now on ignore the end of stdin and SIGTERM
//   - big: answer with a text of arguments.size bytes
//
// Answers to tools/call carry "server=<pid>".
func runFakeServer() {
	stay := false
	testpeer.Serve(os.Stdin, os.Stdout, func(p *testpeer.Conn, m testpeer.Msg) bool {
		if m.Method != "tools/call" || m.ID == nil {
			return false
		}
		var params struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		json.Unmarshal(m.Params, &params)
		text := string(params.Arguments)
		stall := false
		switch params.Name {
		case "die":
			os.Exit(3)
		case "stderr":
			fmt.Fprintln(os.Stderr, "fake-stdio: a line on stderr")
		case "spawn":
			cmd := exec.Command("sleep", "300")
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			if err := cmd.Start(); err != nil {
				text = "spawn failed: " + err.Error()
			} else {
				text = fmt.Sprintf("grandchild=%d", cmd.Process.Pid)
			}
		case "spawn-detached":
			cmd := exec.Command("sleep", "300")
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := cmd.Start(); err != nil {
				text = "spawn failed: " + err.Error()
			} else {
				text = fmt.Sprintf("grandchild=%d", cmd.Process.Pid)
			}
		case "stall":
			stall = true
		case "linger":
			stay = true
		case "ignore-stdin-close":
			stay = true
			signal.Ignore(syscall.SIGTERM)
		case "big":
			var a struct{ Size int }
			json.Unmarshal(params.Arguments, &a)
			text = strings.Repeat("x", a.Size)
		}
		text += fmt.Sprintf(" server=%d", os.Getpid())
		result, _ := json.Marshal(map[string]any{"content": []map[string]any{{"type": "text", "text": text}}})
		p.Send(testpeer.Result(m.ID, string(result)))
		if stall {
			time.Sleep(time.Hour) // stop reading stdin
		}
		return true
	}, testpeer.WithInit(`{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"fake-stdio","version":"0"}}`))
	if stay {
		time.Sleep(time.Hour)
	}
}

// fakeServer returns a Command that runs the test binary as the fake server.
func fakeServer(t *testing.T) *transport.Command {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A race-enabled binary sleeps a second at exit unless told not to.
	env := append(os.Environ(), fakeServerEnv+"=1", "GORACE=atexit_sleep_ms=0")
	return &transport.Command{Path: exe, Env: env}
}

// received is a connection and what it delivers, taken with Receive as a client reading its
// connection by hand would.
type received struct {
	transport.Conn
	*transporttest.Queue
}

func connectCommand(t *testing.T, cmd *transport.Command) received {
	t.Helper()
	q := new(transporttest.Queue)
	c, err := cmd.Connect(context.Background(), q)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return received{c, q}
}

// callTool sends a tools/call and returns the text of the next frame's result.
func callTool(t *testing.T, c received, id int, name string, args string) string {
	t.Helper()
	sendToolCall(t, c, id, name, args)
	frame := streamReceive(t, c.Queue)
	var m struct {
		ID     int `json:"id"`
		Result struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(frame), &m); err != nil || m.ID != id || len(m.Result.Content) != 1 {
		t.Fatalf("answer to %s: %.200s (%v)", name, frame, err)
	}
	return m.Result.Content[0].Text
}

func sendToolCall(t *testing.T, c transport.Conn, id int, name string, args string) {
	t.Helper()
	frame := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, args)
	if err := c.Send(context.Background(), &transport.Message{Frame: []byte(frame), ID: fmt.Sprint(id), Method: "tools/call"}); err != nil {
		t.Fatalf("Send %s: %v", name, err)
	}
}

// pidIn returns the number after key= in text.
func pidIn(t *testing.T, text, key string) int {
	t.Helper()
	for _, f := range strings.Fields(text) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			var pid int
			if _, err := fmt.Sscan(v, &pid); err == nil && pid > 0 {
				return pid
			}
		}
	}
	t.Fatalf("no %s= in %q", key, text)
	return 0
}

// reaped reports whether pid no longer exists, not even as a zombie.
func reaped(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// dead reports whether pid no longer runs. A killed grandchild is reparented to init, and is a
// zombie until init reaps it: that counts as dead.
func dead(pid int) bool {
	if reaped(pid) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && f[0] == "Z"
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCommandWithClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcpclient.Connect(ctx, fakeServer(t))
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer c.Close()
	if got := c.ServerInfo().Name; got != "fake-stdio" {
		t.Errorf("server name %q", got)
	}
	if got := c.ProtocolVersion(); got != "2025-11-25" {
		t.Errorf("protocol version %q", got)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	res, err := c.CallTool(ctx, "echo", map[string]any{"x": 1})
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	if got := res.Text(); !strings.HasPrefix(got, `{"x":1} server=`) {
		t.Errorf("echo = %q", got)
	}
}

func TestCommandLargeAnswerWithClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcpclient.Connect(ctx, fakeServer(t)) // the default limit
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer c.Close()
	const size = 10 << 20
	res, err := c.CallTool(ctx, "big", map[string]any{"size": size})
	if err != nil {
		t.Fatalf("a result of %d MiB: %v", size>>20, err)
	}
	if got := res.Text(); len(got) < size || strings.Trim(got[:size], "x") != "" || !strings.HasPrefix(got[size:], " server=") {
		t.Fatalf("the result came back changed: %d bytes", len(got))
	}
}

func TestCommandDeathWithClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcpclient.Connect(ctx, fakeServer(t))
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer c.Close()
	_, err = c.CallTool(ctx, "die", nil)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("CallTool(die) = %v, want ErrOutcomeUnknown", err)
	}
	if !errors.Is(err, transport.ErrProcessExited) {
		t.Errorf("CallTool(die) = %v, want ErrProcessExited in the chain", err)
	}
	if !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("CallTool(die) = %v, want the exit status", err)
	}
	// The next call spawns a new server: a new session.
	res, err := c.CallTool(ctx, "echo", map[string]any{"again": true})
	if err != nil {
		t.Fatalf("CallTool after the server died: %v", err)
	}
	if got := res.Text(); !strings.HasPrefix(got, `{"again":true}`) {
		t.Errorf("echo = %q", got)
	}
}

func TestCommandDeathEndsConn(t *testing.T) {
	c := connectCommand(t, fakeServer(t))
	if got := callTool(t, c, 1, "echo", `{"a":1}`); !strings.HasPrefix(got, `{"a":1}`) {
		t.Fatalf("echo = %q", got)
	}
	sendToolCall(t, c, 2, "die", `{}`)
	_, err := c.Receive(context.Background())
	wantConnEnded(t, err, transport.ErrProcessExited)
	if err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("the end reported = %v, want the exit status", err)
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 {
		t.Errorf("the end reported = %v, want an *exec.ExitError with code 3 in the chain", err)
	}
	err = c.Send(context.Background(), &transport.Message{Frame: []byte(`{"jsonrpc":"2.0","id":3,"method":"ping"}`), ID: "3", Method: "ping"})
	wantOutcome(t, err, transport.NotDelivered, transport.ErrProcessExited)
	if err := c.Close(); err != nil {
		t.Errorf("Close after the process exited: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	wantNothingMore(t, c.Conn, c.Queue) // the end was reported once
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestCommandStderrToWriter(t *testing.T) {
	var stderr syncBuffer
	cmd := fakeServer(t)
	cmd.Stderr = &stderr
	c := connectCommand(t, cmd)
	callTool(t, c, 1, "stderr", `{}`)
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := stderr.String(); got != "fake-stdio: a line on stderr\n" {
		t.Errorf("stderr = %q", got)
	}
}

// recordHandler keeps the records logged through it.
type recordHandler struct {
	mu      *sync.Mutex
	records *[]slog.Record
}

func newRecordHandler() recordHandler {
	return recordHandler{mu: new(sync.Mutex), records: new([]slog.Record)}
}

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.records = append(*h.records, r.Clone())
	return nil
}
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordHandler) WithGroup(string) slog.Handler      { return h }

// find returns the attribute key of the first record at level that has it.
func (h recordHandler) find(level slog.Level, key string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range *h.records {
		if r.Level != level {
			continue
		}
		var v string
		var ok bool
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == key {
				v, ok = a.Value.String(), true
				return false
			}
			return true
		})
		if ok {
			return v, true
		}
	}
	return "", false
}

func TestCommandStderrToLogger(t *testing.T) {
	h := newRecordHandler()
	cmd := fakeServer(t)
	cmd.Logger = slog.New(h)
	c := connectCommand(t, cmd)
	callTool(t, c, 1, "stderr", `{}`)
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got, ok := h.find(slog.LevelInfo, "stderr"); !ok || got != "fake-stdio: a line on stderr" {
		t.Errorf("logged stderr = %q, %v", got, ok)
	}
}

func TestCommandOversizedAnswerEndsItsExchange(t *testing.T) {
	h := newRecordHandler()
	cmd := fakeServer(t)
	cmd.Logger = slog.New(h)
	cmd.MaxFrameSize = 4 << 10
	c := connectCommand(t, cmd)
	sendToolCall(t, c, 1, "big", `{"size":100000}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Receive(ctx)
	if te := wantOutcome(t, err, transport.Uncertain, transport.ErrMessageTooLarge); te.ID != "1" {
		t.Fatalf("the failure names request %q, want 1", te.ID)
	}
	// The connection goes on.
	if got := callTool(t, c, 2, "echo", `{"n":2}`); !strings.HasPrefix(got, `{"n":2}`) {
		t.Fatalf("echo = %q", got)
	}
	if n := oversized(t, c.Conn); n != 1 {
		t.Errorf("OversizedFrames = %d, want 1", n)
	}
	if got, ok := h.find(slog.LevelWarn, "err"); !ok || got != transport.ErrMessageTooLarge.Error() {
		t.Errorf("warning about the oversized answer: err = %q, %v", got, ok)
	}
}

// A line over the limit costs the client about the limit, whatever its length: what is read of it
// is dropped once it is over, and what was kept until then is not copied as it grows. Every byte
// the client allocates while it reads the line bounds what the line can have held at once, so
// the bound is checked on the total allocated, which garbage collection timing cannot blur.
func TestCommandOversizedAnswerCostsAtMostTheLimit(t *testing.T) {
	const limit = 8 << 20
	cmd := fakeServer(t)
	cmd.MaxFrameSize = limit
	c := connectCommand(t, cmd)
	callTool(t, c, 1, "echo", `{}`) // the process and the connection's buffers are up
	var err error
	allocated := bytesAllocated(func() {
		sendToolCall(t, c, 2, "big", fmt.Sprintf(`{"size":%d}`, limit*7/4))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = c.Receive(ctx)
	})
	if te := wantOutcome(t, err, transport.Uncertain, transport.ErrMessageTooLarge); te.ID != "2" {
		t.Fatalf("the failure names request %q, want 2", te.ID)
	}
	if allocated > limit*3/2 {
		t.Errorf("reading a line of %d MiB over a limit of %d MiB allocated %.1f MiB, want at most %.1f MiB",
			limit*7/4>>20, limit>>20, float64(allocated)/(1<<20), float64(limit*3/2)/(1<<20))
	}
	// The connection goes on.
	if got := callTool(t, c, 3, "echo", `{"n":3}`); !strings.HasPrefix(got, `{"n":3}`) {
		t.Fatalf("echo = %q", got)
	}
}

// bytesAllocated returns how many bytes of heap f allocated (the process's: tests that measure it
// must not run in parallel).
func bytesAllocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestCommandOversizedAnswerWithClient(t *testing.T) {
	cmd := fakeServer(t)
	cmd.MaxFrameSize = 4 << 10
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcpclient.Connect(ctx, cmd)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer c.Close()
	before, err := c.CallTool(ctx, "echo", map[string]any{})
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	// A deadline far shorter than the test's: an answer left waiting would end there.
	callCtx, cancelCall := context.WithTimeout(ctx, 5*time.Second)
	defer cancelCall()
	_, err = c.CallTool(callCtx, "big", map[string]any{"size": 100000})
	if !errors.Is(err, transport.ErrMessageTooLarge) || !errors.Is(err, mcpclient.ErrOutcomeUnknown) || callCtx.Err() != nil {
		t.Fatalf("error %v, want an unknown outcome for the oversized answer before the deadline", err)
	}
	after, err := c.CallTool(ctx, "echo", map[string]any{})
	if err != nil {
		t.Fatalf("CallTool after the oversized answer: %v", err)
	}
	if pidIn(t, after.Text(), "server") != pidIn(t, before.Text(), "server") {
		t.Errorf("the connection did not survive: %q, then %q", before.Text(), after.Text())
	}
}

func TestCommandCloseLeavesNoOrphan(t *testing.T) {
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep command:", err)
	}
	c := connectCommand(t, fakeServer(t))
	text := callTool(t, c, 1, "spawn", `{}`)
	grandchild, server := pidIn(t, text, "grandchild"), pidIn(t, text, "server")
	if dead(grandchild) {
		t.Fatalf("grandchild %d is not running", grandchild)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !reaped(server) {
		t.Errorf("server process %d still exists after Close (a zombie?)", server)
	}
	eventually(t, 5*time.Second, fmt.Sprintf("grandchild %d survived Close", grandchild), func() bool { return dead(grandchild) })
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestCommandServerDeathKillsItsGroup(t *testing.T) {
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep command:", err)
	}
	c := connectCommand(t, fakeServer(t))
	grandchild := pidIn(t, callTool(t, c, 1, "spawn", `{}`), "grandchild")
	sendToolCall(t, c, 2, "die", `{}`)
	// The grandchild holds stdout too: the end is reported all the same, since it is killed.
	_, err := c.Receive(context.Background())
	wantConnEnded(t, err, transport.ErrProcessExited)
	eventually(t, 5*time.Second, fmt.Sprintf("grandchild %d survived its server", grandchild), func() bool { return dead(grandchild) })
}

// TestCommandDetachedDescendant checks that a descendant which left the process group, and so
// survives the group kill, can keep neither the report of the end nor Close from ending, though it holds the
// server's stdout and stderr.
func TestCommandDetachedDescendant(t *testing.T) {
	t.Parallel() // most of it is a wait for a process
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep command:", err)
	}
	var stderr syncBuffer
	cmd := fakeServer(t)
	cmd.Stderr = &stderr
	c := connectCommand(t, cmd)
	grandchild := pidIn(t, callTool(t, c, 1, "spawn-detached", `{}`), "grandchild")
	t.Cleanup(func() { syscall.Kill(grandchild, syscall.SIGKILL) })
	if got := callTool(t, c, 2, "echo", `{"still":"talking"}`); !strings.HasPrefix(got, `{"still":"talking"}`) {
		t.Fatalf("echo = %q", got)
	}
	sendToolCall(t, c, 3, "die", `{}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Receive(ctx)
	wantConnEnded(t, err, transport.ErrProcessExited)
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v", d)
	}
}

// TestCommandSendHonorsContext fills the stdin pipe of a server that stopped reading: the
// context interrupts the blocked write, which has written part of the frame by then.
func TestCommandSendHonorsContext(t *testing.T) {
	cmd := fakeServer(t)
	cmd.CloseTimeout = 50 * time.Millisecond
	c := connectCommand(t, cmd)
	callTool(t, c, 1, "stall", `{}`)
	big := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"pad":%q}}}`, strings.Repeat("x", 4<<20))
	frame := []byte(big)
	// Long enough for the frame to be copied and its first bytes written on a loaded machine
	// (a context that ends first leaves nothing written: not delivered).
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := c.Send(ctx, &transport.Message{Frame: frame, ID: "2", Method: "tools/call"})
	wantOutcome(t, err, transport.Uncertain, context.DeadlineExceeded)
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.Receive(ctx)
	wantConnEnded(t, err, transport.ErrClosed)
	if err := c.Close(); err == nil || !strings.Contains(err.Error(), "terminated") {
		t.Errorf("Close = %v, want it to say the server was terminated", err)
	}
}

func TestCommandCloseEscalates(t *testing.T) {
	for _, tc := range []struct {
		tool, want string
	}{
		{"linger", "terminated"},         // exits on SIGTERM
		{"ignore-stdin-close", "killed"}, // needs SIGKILL
	} {
		t.Run(tc.tool, func(t *testing.T) {
			const closeTimeout, termTimeout = 100 * time.Millisecond, 100 * time.Millisecond
			cmd := fakeServer(t)
			cmd.CloseTimeout, cmd.TermTimeout = closeTimeout, termTimeout
			c := connectCommand(t, cmd)
			server := pidIn(t, callTool(t, c, 1, tc.tool, `{}`), "server")
			start := time.Now()
			err := c.Close()
			elapsed := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Close = %v, want an error saying %q", err, tc.want)
			}
			limit := closeTimeout
			if tc.want == "killed" {
				limit += termTimeout
			}
			if elapsed < limit || elapsed > limit+2*time.Second {
				t.Errorf("Close took %v, want about %v", elapsed, limit)
			}
			if !reaped(server) {
				t.Errorf("server process %d still exists after Close", server)
			}
			if again := c.Close(); again != err {
				t.Errorf("second Close = %v, want %v", again, err)
			}
		})
	}
}

// Close ends the reader, and the end it causes is not reported to the Receiver.
func TestCommandCloseEndsTheReader(t *testing.T) {
	c := connectCommand(t, fakeServer(t))
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	wg.Wait()
	wantNothingMore(t, c.Conn, c.Queue)
	wantOutcome(t, c.Send(context.Background(), &transport.Message{Frame: []byte(`{}`)}), transport.NotDelivered, transport.ErrClosed)
}

func TestCommandStartFailure(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "server")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		cause      error
	}{
		{"missing", filepath.Join(t.TempDir(), "no-such-server"), fs.ErrNotExist},
		{"not on PATH", "mcpclient-no-such-server", exec.ErrNotFound},
		{"not executable", notExec, fs.ErrPermission},
		{"empty", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := (&transport.Command{Path: tc.path}).Connect(context.Background(), new(transporttest.Queue))
			if c != nil {
				c.Close()
				t.Fatal("Connect returned a Conn")
			}
			wantOutcome(t, err, transport.NotDelivered, tc.cause)
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c, err := fakeServer(t).Connect(ctx, new(transporttest.Queue))
	if c != nil {
		c.Close()
		t.Fatal("Connect with a done context returned a Conn")
	}
	wantOutcome(t, err, transport.NotDelivered, context.Canceled)
}

// shCommand returns a Command running script with sh; $0 in the script is arg0.
func shCommand(t *testing.T, script, arg0 string) *transport.Command {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh:", err)
	}
	return &transport.Command{Path: sh, Args: []string{"-c", script, arg0}}
}

// wantExitReport checks that err reports the process's exit with status 3 and the stderr
// wanted, and returns the report.
func wantExitReport(t *testing.T, err error, stderr string) *transport.ProcessExitError {
	t.Helper()
	var pe *transport.ProcessExitError
	if !errors.As(err, &pe) || !errors.Is(err, transport.ErrProcessExited) {
		t.Fatalf("error %v (%T) is not a *ProcessExitError", err, err)
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 {
		t.Errorf("error %v holds no *exec.ExitError with code 3", err)
	}
	if pe.Stderr != stderr {
		t.Errorf("Stderr = %q, want %q", pe.Stderr, stderr)
	}
	if msg := err.Error(); !strings.Contains(msg, "exit status 3") || !strings.Contains(msg, stderr) {
		t.Errorf("error %q does not name the exit status and %q", msg, stderr)
	}
	return pe
}

// TestCommandEarlyExitReportsStatusAndStderr: a server that exits at once, whatever becomes of
// its stderr, is reported to the Receiver and by a Send, whichever of the write and the exit comes
// first, with its exit status and the last line it wrote to stderr.
func TestCommandEarlyExitReportsStatusAndStderr(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(cmd *transport.Command) (check func(t *testing.T))
	}{
		{"stderr discarded", func(*transport.Command) func(*testing.T) { return func(*testing.T) {} }},
		{"stderr to a writer", func(cmd *transport.Command) func(*testing.T) {
			var b syncBuffer
			cmd.Stderr = &b
			return func(t *testing.T) {
				if got := b.String(); got != "boom\n" {
					t.Errorf("stderr written %q", got)
				}
			}
		}},
		{"stderr to a file", func(cmd *transport.Command) func(*testing.T) {
			f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			cmd.Stderr = f
			return func(t *testing.T) {
				if got, _ := os.ReadFile(f.Name()); string(got) != "boom\n" {
					t.Errorf("stderr written %q", got)
				}
			}
		}},
		{"stderr logged", func(cmd *transport.Command) func(*testing.T) {
			h := newRecordHandler()
			cmd.Logger = slog.New(h)
			return func(t *testing.T) {
				if got, ok := h.find(slog.LevelInfo, "stderr"); !ok || got != "boom" {
					t.Errorf("logged stderr = %q, %v", got, ok)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Several rounds: the write and the exit race, and either may win.
			for range 5 {
				cmd := shCommand(t, "echo boom >&2; exit 3", "")
				check := tc.setup(cmd)
				q := new(transporttest.Queue)
				c, err := cmd.Connect(context.Background(), q)
				if err != nil {
					t.Fatalf("Connect: %v", err)
				}
				err = c.Send(context.Background(), &transport.Message{Frame: []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`), ID: "1", Method: "initialize"})
				if err != nil {
					wantOutcome(t, err, transport.NotDelivered, transport.ErrProcessExited)
					wantExitReport(t, err, "boom")
				}
				_, err = q.Receive(context.Background())
				wantConnEnded(t, err, transport.ErrProcessExited)
				wantExitReport(t, err, "boom")
				err = c.Send(context.Background(), &transport.Message{Frame: []byte(`{"jsonrpc":"2.0","id":2,"method":"ping"}`), ID: "2", Method: "ping"})
				wantOutcome(t, err, transport.NotDelivered, transport.ErrProcessExited)
				wantExitReport(t, err, "boom")
				if err := c.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				check(t)
			}
		})
	}
}

// TestCommandSendWaitsForTheExitOfAServerThatClosedStdin: a write that fails because the server
// closed its stdin on its way out reports the exit that follows, not the broken pipe.
func TestCommandSendWaitsForTheExitOfAServerThatClosedStdin(t *testing.T) {
	var stderr syncBuffer
	cmd := shCommand(t, "exec 0<&-; echo boom >&2; sleep 0.2; exit 3", "")
	cmd.Stderr = &stderr
	c := connectCommand(t, cmd)
	eventually(t, 5*time.Second, "the server wrote nothing to stderr", func() bool { return stderr.String() != "" })
	err := c.Send(context.Background(), &transport.Message{Frame: []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`), ID: "1", Method: "initialize"})
	wantOutcome(t, err, transport.NotDelivered, transport.ErrProcessExited)
	wantExitReport(t, err, "boom")
	if !errors.Is(err, syscall.EPIPE) {
		t.Errorf("error %v does not keep the failed write", err)
	}
}

// TestCommandSendWaitForTheExitIsBounded: a server that closed its stdin and lives on gets the
// broken pipe after a bounded wait, or at once when the caller's context ends.
func TestCommandSendWaitForTheExitIsBounded(t *testing.T) {
	t.Parallel() // most of it is a wait for a process
	var stderr syncBuffer
	cmd := shCommand(t, "exec 0<&-; echo ready >&2; exec sleep 30", "")
	cmd.Stderr = &stderr
	cmd.CloseTimeout = 50 * time.Millisecond // sleep ignores the end of stdin; SIGTERM ends it
	c := connectCommand(t, cmd)
	eventually(t, 5*time.Second, "the server wrote nothing to stderr", func() bool { return stderr.String() != "" })
	frame := &transport.Message{Frame: []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`), ID: "1", Method: "initialize"}

	start := time.Now()
	err := c.Send(context.Background(), frame)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Send took %v", d)
	}
	wantOutcome(t, err, transport.NotDelivered, syscall.EPIPE)
	if errors.Is(err, transport.ErrProcessExited) {
		t.Errorf("Send = %v, but the process runs", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	err = c.Send(ctx, frame)
	if d := time.Since(start); d > 700*time.Millisecond {
		t.Errorf("Send with a 100ms deadline took %v", d)
	}
	wantOutcome(t, err, transport.NotDelivered, nil)
}

// TestCommandStderrFloodStaysBounded: what the exit report keeps of stderr is bounded in lines
// and bytes, however much the server wrote, and ends with its last words.
func TestCommandStderrFloodStaysBounded(t *testing.T) {
	for _, tc := range []struct{ name, script, last string }{
		{"many lines", `i=0; while [ $i -lt 2000 ]; do echo "line $i of a flood of stderr"; i=$((i+1)); done >&2; echo "last words" >&2; exit 3`, "last words"},
		{"megabytes of lines", `yes 'a line of a flood of stderr' | head -c 4000000 >&2; echo "last words" >&2; exit 3`, "last words"},
		{"one huge line", `head -c 3000000 /dev/zero | tr '\0' x >&2; echo "last words" >&2; exit 3`, "last words"},
		{"no newline", `head -c 3000000 /dev/zero | tr '\0' x >&2; printf 'last words' >&2; exit 3`, "last words"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := connectCommand(t, shCommand(t, tc.script, ""))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := c.Receive(ctx)
			wantConnEnded(t, err, transport.ErrProcessExited)
			var pe *transport.ProcessExitError
			if !errors.As(err, &pe) {
				t.Fatalf("the end reported = %v, want a *ProcessExitError", err)
			}
			if !strings.HasSuffix(pe.Stderr, tc.last) || !strings.HasPrefix(pe.Stderr, "…") {
				t.Errorf("Stderr = %.100q…, want a cut tail ending with %q", pe.Stderr, tc.last)
			}
			if n := strings.Count(pe.Stderr, "\n") + 1; n > 10 {
				t.Errorf("Stderr holds %d lines, want at most 10", n)
			}
			if n := len(pe.Stderr); n > 2<<10+len("…") {
				t.Errorf("Stderr holds %d bytes, want at most 2 KiB", n)
			}
			if n := len(err.Error()); n > 4<<10 {
				t.Errorf("the error's text is %d bytes", n)
			}
		})
	}
}

// noWaits retries at once: the tests of spawning count processes, not waits.
var noWaits = mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{NewBackOff: func() backoff.BackOff { return &backoff.ZeroBackOff{} }, MaxAttempts: 10})

// spawnCounter returns a file for a server script to append a line to at each start, and a
// function counting the lines.
func spawnCounter(t *testing.T) (path string, count func() int) {
	path = filepath.Join(t.TempDir(), "spawns")
	return path, func() int {
		b, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		return bytes.Count(b, []byte("\n"))
	}
}

// wantClientExitReport checks that err is an *mcpclient.Error reporting the server's exit with
// status 3 and its stderr "boom".
func wantClientExitReport(t *testing.T, err error, code error) {
	t.Helper()
	var e *mcpclient.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *mcpclient.Error", err, err)
	}
	if !errors.Is(err, code) || !errors.Is(err, transport.ErrProcessExited) {
		t.Errorf("error %v: want %v caused by ErrProcessExited", err, code)
	}
	if msg := err.Error(); !strings.Contains(msg, "exit status 3") || !strings.Contains(msg, "boom") {
		t.Errorf("error %q names neither the exit status nor the server's stderr", msg)
	}
}

// TestCommandExitingAtStartIsStartedTwiceByConnect: Connect starts a server that exits before
// answering once more, not as often as its attempts allow, and reports the exit.
func TestCommandExitingAtStartIsStartedTwiceByConnect(t *testing.T) {
	for _, version := range []string{"", mcpclient.LatestStatefulProtocolVersion} { // with server/discover first, and without
		t.Run("version="+version, func(t *testing.T) {
			spawns, count := spawnCounter(t)
			cmd := shCommand(t, `echo spawned >> "$0"; echo boom >&2; exit 3`, spawns)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			opts := []mcpclient.Option{noWaits}
			if version != "" {
				opts = append(opts, mcpclient.WithProtocolVersion(version))
			}
			c, err := mcpclient.Connect(ctx, cmd, opts...)
			if c != nil {
				c.Close()
				t.Fatal("Connect succeeded")
			}
			wantClientExitReport(t, err, mcpclient.ErrNotDelivered)
			if n := count(); n != 2 {
				t.Errorf("the server was started %d times, want 2", n)
			}
			var e *mcpclient.Error
			if errors.As(err, &e) && e.Attempts != 2 {
				t.Errorf("error counts %d attempts, want 2", e.Attempts)
			}
		})
	}
}

// TestCommandDyingServerIsRestartedOnceByACall: a call whose server died reconnects, but a
// server that then exits at start is started once more, not as often as the call's attempts
// allow; once it has exited at start twice in a row, a later call starts it once, until a
// session opens again.
func TestCommandDyingServerIsRestartedOnceByACall(t *testing.T) {
	spawns, count := spawnCounter(t)
	fake := fakeServer(t)
	// The first start is the fake server; every later one exits at once.
	cmd := shCommand(t, `n=$(wc -l < "$0" 2>/dev/null || echo 0); echo spawned >> "$0"
if [ "$n" -ge 1 ]; then echo boom >&2; exit 3; fi
exec "$FAKE_SERVER"`, spawns)
	cmd.Env = append(fake.Env, "FAKE_SERVER="+fake.Path)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcpclient.Connect(ctx, cmd, noWaits)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer c.Close()

	// die exits with status 3; the call is safe to repeat, so the client reconnects for it.
	_, err = c.CallTool(ctx, "die", nil, mcpclient.WithIdempotent())
	wantClientExitReport(t, err, mcpclient.ErrOutcomeUnknown)
	if n := count(); n != 3 {
		t.Errorf("the server was started %d times in all, want 3: once, and twice for the call", n)
	}

	_, err = c.CallTool(ctx, "echo", nil)
	wantClientExitReport(t, err, mcpclient.ErrNotDelivered)
	if n := count(); n != 4 {
		t.Errorf("the server was started %d times in all, want 4: once more for the second call", n)
	}
}

// TestCommandConnectDeadlineWithAServerThatClosedStdin: a server that closed its stdin and lives
// on fails every write; Connect ends at its deadline all the same, with the last failure.
func TestCommandConnectDeadlineWithAServerThatClosedStdin(t *testing.T) {
	var stderr syncBuffer
	cmd := shCommand(t, `exec 0<&-; echo ready >&2; exec sleep 30`, "")
	cmd.Stderr = &stderr
	cmd.CloseTimeout = 50 * time.Millisecond // sleep ignores the end of stdin; SIGTERM ends it
	var mu sync.Mutex
	dials := 0
	// Each dial returns once the server has closed its stdin, so that every write fails.
	tr := transport.DialFunc(func(ctx context.Context, r transport.Receiver) (transport.Conn, error) {
		conn, err := cmd.Connect(ctx, r)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		dials++
		n := dials
		mu.Unlock()
		eventually(t, 5*time.Second, "the server did not close its stdin", func() bool { return strings.Count(stderr.String(), "ready") >= n })
		return conn, nil
	})
	const deadline = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	c, err := mcpclient.Connect(ctx, tr)
	elapsed := time.Since(start)
	if c != nil {
		c.Close()
		t.Fatal("Connect succeeded")
	}
	if elapsed > deadline+600*time.Millisecond {
		t.Errorf("Connect took %v with a deadline of %v", elapsed, deadline)
	}
	var e *mcpclient.Error
	if !errors.As(err, &e) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Connect = %v, want an *mcpclient.Error caused by the deadline", err)
	}
	if !errors.Is(err, syscall.EPIPE) {
		t.Errorf("Connect = %v, want the last attempt's failed write in it", err)
	}
}
