package mcpdbos_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// The recovery test runs this test binary again as a worker process (see TestMain), which the
// test kills mid-step. The environment tells it where the database and the server are.
const (
	envRole   = "MCPDBOS_ROLE" // "worker"
	envDB     = "MCPDBOS_DB"
	envSchema = "MCPDBOS_SCHEMA"
	envServer = "MCPDBOS_SERVER"
)

// recoveredWorkflowID is the workflow the worker starts and the test recovers.
const recoveredWorkflowID = "order-recovered"

// worker starts the charge workflow against the parent's server and database. Its step's call
// never ends: the parent holds the tool until it has killed the worker.
func worker() int {
	ctx := context.Background()
	c, err := mcpclient.Connect(ctx, &transport.HTTP{URL: os.Getenv(envServer)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker: connect:", err)
		return 1
	}
	dctx, err := dbos.NewContext(ctx, config(os.Getenv(envDB), os.Getenv(envSchema)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker: dbos:", err)
		return 1
	}
	workflow := chargeWorkflow(c)
	dbos.RegisterWorkflow(dctx, workflow, dbos.WithWorkflowName("charge"))
	if err := dbos.Launch(dctx); err != nil {
		fmt.Fprintln(os.Stderr, "worker: launch:", err)
		return 1
	}
	h, err := dbos.RunWorkflow(dctx, workflow, []int{7}, dbos.WithWorkflowID(recoveredWorkflowID))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker: run:", err)
		return 1
	}
	out, err := h.GetResult()
	fmt.Fprintln(os.Stderr, "worker: the workflow ended before the worker was killed:", out, err)
	return 1
}

// A process dies while its workflow's step waits for the tool's answer; the tool runs on. DBOS
// launched in another process recovers the workflow and runs the step again, which sends the
// same request and is answered from the server's receipt: the tool ran once.
func TestRecoveredWorkflowRunsToolOnce(t *testing.T) {
	schema := newSchema(t)
	running, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(chargeTool, func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		if first.CompareAndSwap(false, true) {
			close(running)
			<-release // until the worker that called is dead
		}
		return answerCharge(ctx, call)
	}))
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"=worker", envDB+"="+dbURL, envSchema+"="+schema, envServer+"="+srv.URL)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-running:
	case err := <-exited:
		t.Fatalf("the worker exited before its step called the tool: %v\n%s", err, stderr.Bytes())
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("the worker's step did not call the tool within a minute\n%s", stderr.Bytes())
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no shutdown, nothing recorded
		t.Fatal(err)
	}
	<-exited
	close(release)
	released = true

	rec := &recorder{Caller: mcptest.NewClient(t, srv)}
	workflow := chargeWorkflow(rec)
	ctx := launch(t, schema, func(ctx dbos.Context) { dbos.RegisterWorkflow(ctx, workflow, dbos.WithWorkflowName("charge")) })
	h, err := dbos.RetrieveWorkflow[[]string](ctx, recoveredWorkflowID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.GetResult()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{`charged {"amount":7}`}; !slices.Equal(out, want) {
		t.Errorf("result %q, want %q", out, want)
	}
	if n := srv.Executions(chargeTool.Name); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
	ids := rec.seen()
	if len(ids) != 1 {
		t.Fatalf("the recovered step called %d times (%v), want 1", len(ids), ids)
	}
	frames := srv.Received(ids[0])
	if len(frames) != 2 {
		t.Fatalf("the server received %d requests under %s, want the dead worker's and the recovery's", len(frames), ids[0])
	}
	if !bytes.Equal(frames[0], frames[1]) {
		t.Errorf("the recovery sent other bytes than the dead worker:\n%s\nthen\n%s", frames[0], frames[1])
	}
}
