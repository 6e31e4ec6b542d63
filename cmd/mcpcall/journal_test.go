package main

import (
	"bytes"
	"context"
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

	// A third run is a new call: nothing is left to recover.
	third := mcpcallProcess(args...)
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

// A journal record that no longer decodes is named on stderr and left alone: the run goes on and
// sends its own call.
func TestJournalCorruptRecordDoesNotStopTheRun(t *testing.T) {
	var runs atomic.Int32
	srv := mcptest.NewHTTPServer(mcptest.WithTool(mcpclient.Tool{Name: "deploy", InputSchema: []byte(`{"type":"object"}`)},
		func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			runs.Add(1)
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("deployed")}}, nil
		}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "journal.db")
	args := []string{"-url", srv.URL, "-journal", path, "-retry", "never", "tools/call", `{"name":"deploy"}`}
	var stdout, stderr bytes.Buffer
	srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "deploy"})
	if code := run(args, nil, &stdout, &stderr); code != exitUnknown {
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
