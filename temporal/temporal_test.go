package mcptemporal_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	mcptemporal "github.com/northstar-mcp/mcpclient/temporal"
)

// chargeTool is the tool the tests call: it counts its runs and answers with the amount.
var chargeTool = mcpclient.Tool{Name: "charge"}

// An attempt is what one attempt of the charge activity saw.
type attempt struct {
	Number int32
	ID     mcpclient.ID
}

// chargeActivity calls the charge tool through mcptemporal.
type chargeActivity struct {
	c mcpclient.Caller

	// interruptFirst gives the first attempt a context that the tool ends once it ran, before its
	// answer is out: the attempt ends as one the engine times out (StartToCloseTimeout) or whose
	// worker stops, which the test environment cannot time out itself.
	interruptFirst bool
	interrupt      atomic.Pointer[context.CancelFunc]

	mu       sync.Mutex
	attempts []attempt
}

func (a *chargeActivity) Charge(ctx context.Context, amount int) (string, error) {
	info := activity.GetInfo(ctx)
	id, err := mcptemporal.RequestID(ctx, chargeTool.Name)
	if err != nil {
		return "", err
	}
	a.mu.Lock()
	a.attempts = append(a.attempts, attempt{info.Attempt, id})
	a.mu.Unlock()
	if a.interruptFirst && info.Attempt == 1 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		a.interrupt.Store(&cancel)
	}
	res, err := mcptemporal.CallTool(ctx, a.c, chargeTool.Name, map[string]int{"amount": amount})
	if err != nil {
		return "", err
	}
	return res.Text(), nil
}

func (a *chargeActivity) seen() []attempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]attempt(nil), a.attempts...)
}

// newCharge returns a server holding the charge tool, which ends the activity's interrupted
// attempt when it runs, and the activity, connected to it.
func newCharge(t *testing.T, interruptFirst bool, opts ...mcptest.Option) (*mcptest.Server, *chargeActivity) {
	t.Helper()
	a := &chargeActivity{interruptFirst: interruptFirst}
	srv := mcptest.NewTestServer(t, append([]mcptest.Option{
		mcptest.WithTool(chargeTool, func(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			if cancel := a.interrupt.Swap(nil); cancel != nil {
				(*cancel)()
			}
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("charged " + string(call.Arguments))}}, nil
		})}, opts...)...)
	a.c = mcptest.NewClient(t, srv)
	return srv, a
}

// chargeWorkflow charges each amount in its own activity, which the engine retries.
func chargeWorkflow(ctx workflow.Context, amounts []int) ([]string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
	})
	var out []string
	for _, amount := range amounts {
		var s string
		if err := workflow.ExecuteActivity(ctx, "Charge", amount).Get(ctx, &s); err != nil {
			return out, err
		}
		out = append(out, s)
	}
	return out, nil
}

func runCharge(t *testing.T, a *chargeActivity, amounts ...int) ([]string, error) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterActivity(a)
	env.RegisterWorkflow(chargeWorkflow)
	env.ExecuteWorkflow(chargeWorkflow, amounts)
	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	var out []string
	if err := env.GetWorkflowResult(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// The first attempt's answer is lost after the tool ran and the attempt ends before the client
// can ask again; the engine retries the activity, whose second attempt sends the same request
// and is answered from the server's receipt: the tool ran once.
func TestRetriedActivityRunsToolOnce(t *testing.T) {
	srv, a := newCharge(t, true, mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: chargeTool.Name}))
	out, err := runCharge(t, a, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0] != `charged {"amount":7}` {
		t.Errorf("result %q, want the tool's answer", out)
	}
	if n := srv.Executions(chargeTool.Name); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
	seen := a.seen()
	if len(seen) != 2 {
		t.Fatalf("%d attempts, want 2 (the first interrupted): %v", len(seen), seen)
	}
	if seen[0].ID != seen[1].ID {
		t.Errorf("attempts called under %s and %s, want one id", seen[0].ID, seen[1].ID)
	}
	frames := srv.Received(seen[0].ID)
	if len(frames) < 2 {
		t.Fatalf("the server received %d requests under %s, want one per attempt at least", len(frames), seen[0].ID)
	}
	for _, f := range frames[1:] {
		if !bytes.Equal(f, frames[0]) {
			t.Errorf("a retry sent other bytes:\n%s\nthen\n%s", frames[0], f)
		}
	}
}

// Two activity executions of one workflow, with the same arguments, are two requests: the tool
// runs for each.
func TestActivitiesCallUnderTheirOwnIDs(t *testing.T) {
	srv, a := newCharge(t, false)
	out, err := runCharge(t, a, 7, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 {
		t.Fatalf("results %q, want two", out)
	}
	if n := srv.Executions(chargeTool.Name); n != 2 {
		t.Errorf("the tool ran %d times, want 2", n)
	}
	seen := a.seen()
	if len(seen) != 2 || seen[0].ID == seen[1].ID {
		t.Errorf("two activities called under %v, want two ids", seen)
	}
}

// An outcome the client could not learn stops the activity: the engine does not retry it, and
// the error names the request.
func TestOutcomeUnknownIsNotRetried(t *testing.T) {
	srv, a := newCharge(t, false, mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: chargeTool.Name, Times: -1}))
	_, err := runCharge(t, a, 7)
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != mcptemporal.TypeOutcomeUnknown || !appErr.NonRetryable() {
		t.Fatalf("error %v, want a non-retryable %s", err, mcptemporal.TypeOutcomeUnknown)
	}
	seen := a.seen()
	if len(seen) != 1 {
		t.Errorf("%d attempts, want 1", len(seen))
	}
	var d mcptemporal.Details
	if err := appErr.Details(&d); err != nil || len(seen) == 0 || d.RequestID != seen[0].ID.JSON() {
		t.Errorf("details %+v (%v), want the request id %s", d, err, seen[0].ID.JSON())
	}
	if n := srv.Executions(chargeTool.Name); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
}
