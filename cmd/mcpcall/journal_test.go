package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// mcpcallProcess runs mcpcall as a process of its own: this test binary, told to be it.
func mcpcallProcess(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "MCPCALL_AS_MAIN=1")
	return cmd
}

// A run killed by SIGKILL while the server runs its call, started again with the same command,
// resends the same bytes under the same id; the server's receipt answers, the tool having run
// once, and the second run prints the result.
func TestJournalRecoversKilledCall(t *testing.T) {
	var runs atomic.Int32
	running, release := make(chan struct{}), make(chan struct{})
	srv := mcptest.NewHTTPServer(mcptest.WithTool(mcpclient.Tool{Name: "deploy", InputSchema: []byte(`{"type":"object"}`)},
		func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			if runs.Add(1) == 1 {
				close(running)
				<-release
			}
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("deployed " + string(call.Arguments))}}, nil
		}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "journal.db")
	args := []string{"-url", srv.URL, "-journal", path, "tools/call", `{"name":"deploy","arguments":{"version":"1.2.3"}}`}

	first := mcpcallProcess(args...)
	var firstErr bytes.Buffer
	first.Stderr = &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-running:
	case <-time.After(30 * time.Second):
		first.Process.Kill()
		t.Fatalf("the call never reached the server: %s", firstErr.String())
	}
	first.Process.Kill()
	err := first.Wait()
	close(release)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the first run was not killed: %v", err)
	}

	second := mcpcallProcess(args...)
	var out, errOut bytes.Buffer
	second.Stdout, second.Stderr = &out, &errOut
	if err := second.Run(); err != nil {
		t.Fatalf("second run: %v; stderr: %s", err, errOut.String())
	}
	if !strings.Contains(out.String(), `deployed {\"version\":\"1.2.3\"}`) {
		t.Fatalf("stdout %q", out.String())
	}
	if !strings.Contains(errOut.String(), "resending request") {
		t.Fatalf("stderr %q does not say it resent", errOut.String())
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times", n)
	}
	var frames [][]byte
	for _, r := range srv.Requests() {
		if r.RPCMethod == "tools/call" {
			frames = append(frames, srv.Received(r.ID)...)
			break
		}
	}
	if len(frames) != 2 || !bytes.Equal(frames[0], frames[1]) {
		t.Fatalf("the id carried %d frames: %q", len(frames), frames)
	}

	// A third run of the same command is the same request, answered from the receipt; with -new
	// it is a new call.
	third := mcpcallProcess(append([]string{"-new"}, args...)...)
	var thirdErr bytes.Buffer
	third.Stderr = &thirdErr
	if err := third.Run(); err != nil || strings.Contains(thirdErr.String(), "resending") {
		t.Fatalf("third run: %v; stderr %q", err, thirdErr.String())
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("the tool ran %d times after a new call", n)
	}
}

// A recovered call that resending could run twice is left alone, and named, unless -id says to
// resend it.
func TestJournalUnknownNeedsID(t *testing.T) {
	var runs atomic.Int32
	srv := mcptest.NewHTTPServer(mcptest.WithTool(mcpclient.Tool{Name: "deploy", InputSchema: []byte(`{"type":"object"}`)},
		func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			runs.Add(1)
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("deployed")}}, nil
		}), mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "deploy"}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "journal.db")
	args := []string{"-url", srv.URL, "-journal", path, "-retry", "never", "tools/call", `{"name":"deploy"}`}
	var stdout, stderr bytes.Buffer
	if code := run(args, nil, &stdout, &stderr); code != exitUnknown {
		t.Fatalf("first run: exit %d; %s", code, stderr.String())
	}
	srv.Server.Restart() // the receipt is gone with the server's process
	stderr.Reset()
	if code := run(args, nil, &stdout, &stderr); code != exitUnknown || !strings.Contains(stderr.String(), "-id") {
		t.Fatalf("second run: exit %d; %s", code, stderr.String())
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times", n)
	}
	id := regexpID.FindStringSubmatch(stderr.String())
	if id == nil {
		t.Fatalf("no id in %q", stderr.String())
	}
	stderr.Reset()
	if code := run(append(args[:len(args)-2:len(args)-2], "-id", id[1], "tools/call", `{"name":"deploy"}`), nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("resend with -id: exit %d; %s", code, stderr.String())
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("the tool ran %d times; the caller chose to resend", n)
	}
}

// An -id the journal holds as answered is not sent again to a server that restarted since: it
// has no receipt, and the tool would run twice. The run exits 5 and says what the journal holds.
func TestJournalAnsweredIDIsNotRerun(t *testing.T) {
	var runs atomic.Int32
	srv := mcptest.NewHTTPServer(mcptest.WithTool(mcpclient.Tool{Name: "deploy", InputSchema: []byte(`{"type":"object"}`)},
		func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			runs.Add(1)
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("deployed")}}, nil
		}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "journal.db")
	id := "6f1c1ef0-7d0e-4a6b-9d7f-2b1f3e4c5a6d"
	args := []string{"-url", srv.URL, "-journal", path, "-id", id, "tools/call", `{"name":"deploy"}`}
	var stdout, stderr bytes.Buffer
	if code := run(args, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("first run: exit %d; %s", code, stderr.String())
	}
	srv.Server.Restart()
	stderr.Reset()
	if code := run(args, nil, &stdout, &stderr); code != exitConflict || !strings.Contains(stderr.String(), "already answered") {
		t.Fatalf("the same -id after the server restarted: exit %d; %s", code, stderr.String())
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times", n)
	}
}

var regexpID = regexp.MustCompile(`-id ([0-9a-f-]{36})`)

// A journal record that no longer decodes is named on stderr and left alone: the run of another
// command goes on and sends its own call; the run of the record's own command sends nothing under
// its id, whose content is unknown.
func TestJournalCorruptRecordDoesNotStopTheRun(t *testing.T) {
	var runs atomic.Int32
	srv := mcptest.NewHTTPServer(mcptest.WithTool(mcpclient.Tool{Name: "deploy", InputSchema: []byte(`{"type":"object"}`)},
		func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			runs.Add(1)
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("deployed")}}, nil
		}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "journal.db")
	lost := []string{"-url", srv.URL, "-journal", path, "-retry", "never", "tools/call", `{"name":"deploy","arguments":{"v":1}}`}
	args := []string{"-url", srv.URL, "-journal", path, "-retry", "never", "tools/call", `{"name":"deploy"}`}
	var stdout, stderr bytes.Buffer
	srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "deploy"})
	if code := run(lost, nil, &stdout, &stderr); code != exitUnknown {
		t.Fatalf("first run: exit %d; %s", code, stderr.String())
	}
	id := regexp.MustCompile(`request "([0-9a-f-]{36})"`).FindStringSubmatch(stderr.String())
	if id == nil {
		t.Fatalf("no id in %q", stderr.String())
	}
	corruptRecord(t, path, mcpclient.StringID(id[1]))

	stdout.Reset()
	stderr.Reset()
	if code := run(args, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("run past a corrupt record: exit %d; %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), mcpclient.StringID(id[1]).JSON()) || !strings.Contains(stderr.String(), "corrupt") {
		t.Fatalf("stderr %q does not name the corrupt record %s", stderr.String(), id[1])
	}
	if !strings.Contains(stdout.String(), "deployed") {
		t.Fatalf("stdout %q", stdout.String())
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("the tool ran %d times, want 2 (the lost call and the new one)", n)
	}

	// The lost call's own command: its id is the unreadable record's.
	stdout.Reset()
	stderr.Reset()
	if code := run(lost, nil, &stdout, &stderr); code == exitOK || runs.Load() != 2 {
		t.Fatalf("the command of the unreadable record: exit %d, %d runs; %s", code, runs.Load(), stderr.String())
	}

	// Naming the unreadable record with -id sends nothing under its id: what it holds is unknown.
	stderr.Reset()
	withID := append(args[:len(args)-2:len(args)-2], "-id", id[1], "tools/call", `{"name":"deploy"}`)
	if code := run(withID, nil, &stdout, &stderr); code == exitOK {
		t.Fatalf("resend of an unreadable record: exit %d; %s", code, stderr.String())
	}
	if n := len(srv.Received(mcpclient.StringID(id[1]))); n != 1 || runs.Load() != 2 {
		t.Fatalf("the unreadable record's id was received %d times, the tool ran %d times", n, runs.Load())
	}
}

// corruptRecord overwrites how id stands in the file journal at path with bytes that do not
// decode, as a torn or damaged write would leave it.
func corruptRecord(t *testing.T, path string, id mcpclient.ID) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("standing")).Put([]byte(id.JSON()), []byte("{not json"))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// With -journal, the same command run again after a success is the same request: the server's
// receipt answers it and the tool does not run again; once the server lost its receipts, mcpcall
// sends nothing and says how to send it anew (-new), which runs it again.
func TestJournalSameCommandAfterASuccessDoesNotRunAgain(t *testing.T) {
	var runs atomic.Int32
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(mcpclient.Tool{Name: "charge", InputSchema: []byte(`{"type":"object"}`)},
		func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			runs.Add(1)
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("charged " + string(call.Arguments))}}, nil
		}))
	path := filepath.Join(t.TempDir(), "journal.db")
	first := call(t, "", "-url", srv.URL, "-journal", path, "tools/call", `{"name":"charge","arguments":{"amount":12}}`)
	if first.code != exitOK || !strings.Contains(first.stdout, "charged") {
		t.Fatalf("first run: %+v", first)
	}
	// The same command, its params spelled otherwise.
	again := call(t, "", "-url", srv.URL, "-journal", path, "tools/call", `{ "arguments": {"amount": 12}, "name": "charge" }`)
	const answer = `"text":"charged {\"amount\":12}"`
	if !strings.Contains(first.stdout, answer) || again.code != exitOK || !strings.Contains(again.stdout, answer) {
		t.Fatalf("the same command again: %+v; want the first answer", again)
	}
	if !strings.Contains(again.stderr, "was answered before") {
		t.Fatalf("the same command again: stderr %q does not say it was answered before", again.stderr)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times for one command", n)
	}
	short := call(t, "", "-url", srv.URL, "-journal", path, "call", "charge", "amount=12")
	if short.code != exitOK || runs.Load() != 1 {
		t.Fatalf("the same command in its short form: %+v, %d runs", short, runs.Load())
	}
	other := call(t, "", "-url", srv.URL, "-journal", path, "call", "charge", "amount=13")
	if other.code != exitOK || runs.Load() != 2 {
		t.Fatalf("another command: %+v, %d runs; want it run", other, runs.Load())
	}

	srv.Restart() // the receipts go with it
	lost := call(t, "", "-url", srv.URL, "-journal", path, "call", "charge", "amount=12")
	if lost.code != exitConflict || lost.stdout != "" || !strings.Contains(lost.stderr, "-new") {
		t.Fatalf("the same command once the receipt is gone: %+v; want exit %d naming -new", lost, exitConflict)
	}
	checkStderr(t, lost)
	if n := runs.Load(); n != 2 {
		t.Fatalf("the tool ran %d times; a command answered before must not run again by itself", n)
	}
	fresh := call(t, "", "-url", srv.URL, "-journal", path, "-new", "call", "charge", "amount=12")
	if fresh.code != exitOK || runs.Load() != 3 {
		t.Fatalf("-new: %+v, %d runs; want it run as a new request", fresh, runs.Load())
	}
}

// -new is for -journal alone, and contradicts -id.
func TestNewFlagUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-url", "http://127.0.0.1:1/mcp", "-new", "ping"},
		{"-url", "http://127.0.0.1:1/mcp", "-journal", "j.db", "-new", "-id", "x", "ping"},
	} {
		if r := call(t, "", args...); r.code != exitLocal || !strings.Contains(r.stderr, "-new") {
			t.Errorf("%q: %+v; want a usage error naming -new", args, r)
		}
	}
}

// A command's id depends on the server, the method and the params, not on how the params are
// spelled, nor on the secrets of the server's address.
func TestCommandID(t *testing.T) {
	id := func(url, method, params string) string {
		t.Helper()
		got, _, err := commandID(&options{url: url, method: method, params: json.RawMessage(params)})
		if err != nil {
			t.Fatal(err)
		}
		return got.String()
	}
	base := id("https://a.example/mcp", "tools/call", `{"name":"x","arguments":{"n":1}}`)
	for _, tc := range []struct {
		url, method, params string
		same                bool
	}{
		{"https://a.example/mcp", "tools/call", `{ "arguments" : { "n" : 1 }, "name" : "x" }`, true},
		{"https://a.example/mcp?token=secret2", "tools/call", `{"name":"x","arguments":{"n":1}}`, false},
		{"https://b.example/mcp", "tools/call", `{"name":"x","arguments":{"n":1}}`, false},
		{"https://a.example/mcp", "tools/call", `{"name":"x","arguments":{"n":1.0}}`, false},
		{"https://a.example/mcp", "tools/call", `{"name":"x","arguments":{"n":2}}`, false},
		{"https://a.example/mcp", "prompts/get", `{"name":"x","arguments":{"n":1}}`, false},
	} {
		if got := id(tc.url, tc.method, tc.params); (got == base) != tc.same {
			t.Errorf("%s %s %s: same id %v, want %v", tc.url, tc.method, tc.params, got == base, tc.same)
		}
	}
	a := id("https://a.example/mcp?token=one", "ping", `{}`)
	if b := id("https://a.example/mcp?token=two", "ping", `{}`); a != b {
		t.Errorf("the query's secret changed the command's id")
	}
}
