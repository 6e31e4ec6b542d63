//go:build unix

package worker_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/journal"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/worker"
)

// A worker killed while its tool runs on the server leaves the job in its journal; the next
// process recovers it under the same id, the server answers from its receipt, and running the
// job again afterwards answers from the receipt too: the tool ran once.
func TestKilledWorkersJobRunsOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	var runs atomic.Int32
	entered, release := make(chan struct{}, 1), make(chan struct{})
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(mcpclient.Tool{Name: "charge"}, func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		runs.Add(1)
		entered <- struct{}{}
		<-release
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("charged")}}, nil
	}))
	path := filepath.Join(t.TempDir(), "journal.db")
	child := startChild(t, srv.URL, path, "job-1")
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker's call never reached the tool")
	}
	child.kill(t)
	close(release) // the tool ends; its answer has nowhere to go

	recoverAndRerun(t, srv, path, "job-1", true)
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times for one job", n)
	}
}

// Killed at any moment of its call (before its claim is durable, before the request leaves,
// while the tool runs, after the answer), the worker leaves its job for the next process to
// recover or to run: recovery then the job's own run charge it once.
func TestWorkerKilledAtRandomRunsItsJobOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for i := range 6 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			var runs atomic.Int32
			srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(mcpclient.Tool{Name: "charge"}, func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
				runs.Add(1)
				time.Sleep(5 * time.Millisecond) // a tool that takes time, for kills to fall in
				return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("charged")}}, nil
			}))
			path := filepath.Join(t.TempDir(), "journal.db")
			child := startChild(t, srv.URL, path, "job")
			time.Sleep(time.Duration(rand.IntN(150)) * time.Millisecond)
			child.kill(t)
			recoverAndRerun(t, srv, path, "job", false)
			if n := runs.Load(); n != 1 {
				t.Fatalf("the tool ran %d times for one job", n)
			}
		})
	}
}

// recoverAndRerun opens the journal a killed worker left, runs a recovery pass, then runs the
// job again as a restarted worker does. mustFind says the killed worker is known to have sent it.
func recoverAndRerun(t *testing.T, srv *mcptest.HTTPServer, path, job string, mustFind bool) {
	t.Helper()
	j, err := journal.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	c := mcptest.NewClient(t, srv, mcpclient.WithJournal(j))
	defer c.Close()
	ctx := context.Background()
	s, err := worker.Pass(ctx, c)
	if err != nil || s.Failed != 0 || s.Handled != s.Found {
		t.Fatalf("recovery pass: %+v, %v", s, err)
	}
	if mustFind && s.Found != 1 {
		t.Fatalf("recovery found %d requests, want the killed worker's", s.Found)
	}
	id := mcpclient.IDFromKey("billing", job)
	res, err := c.CallTool(ctx, "charge", map[string]any{"job": job}, mcpclient.WithRequestID(id))
	if err != nil {
		t.Fatalf("the job run again after recovery: %v", err)
	}
	if res.Text() != "charged" {
		t.Fatalf("the job run again answered %q", res.Text())
	}
	rec, ok, err := c.Journaled(ctx, id)
	if err != nil || !ok || rec.State != mcpclient.StateAnswered {
		t.Fatalf("the job in the journal: %+v, %v, %v; want it answered", rec, ok, err)
	}
}

type childProcess struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	done   chan error
}

func startChild(t *testing.T, url, path, job string) *childProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"=charge", envURL+"="+url, envJournal+"="+path, envJob+"="+job)
	p := &childProcess{cmd: cmd, stderr: &lockedBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
	})
	return p
}

// kill kills the child with SIGKILL and waits for it; a child that ended by itself (its call
// done before the kill) is fine, one that failed is not.
func (p *childProcess) kill(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	err := <-p.done
	p.done <- err // for the cleanup
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Exited() && ws.ExitStatus() != 0 {
		t.Fatalf("the worker failed: %s", p.stderr.String())
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
