package mcpdbos_test

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/northstar-mcp/mcpclient"
	mcpdbos "github.com/northstar-mcp/mcpclient/dbos"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// The step's first run loses the answer after the tool ran and ends before the client can ask
// again, as a step bounded by a deadline does; DBOS retries the step, which sends the same
// request and is answered from the server's receipt: the tool ran once.
func TestRetriedStepRunsToolOnce(t *testing.T) {
	schema := newSchema(t)
	var interrupt atomic.Pointer[context.CancelFunc]
	srv := mcptest.NewTestServer(t,
		mcptest.WithTool(chargeTool, func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			if cancel := interrupt.Swap(nil); cancel != nil {
				(*cancel)()
			}
			return answerCharge(ctx, call)
		}),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: chargeTool.Name}))
	rec := &recorder{Caller: mcptest.NewClient(t, srv)}
	var runs atomic.Int32
	workflow := func(ctx dbos.Context, amount int) (string, error) {
		step := mcpdbos.Step(rec, chargeTool.Name, map[string]int{"amount": amount})
		res, err := dbos.RunAsStep(ctx, func(ctx context.Context) (*mcpclient.CallToolResult, error) {
			if runs.Add(1) == 1 {
				// The first run's context ends once the tool ran, before its answer is out.
				sctx, cancel := dbos.WithCancel(ctx.(dbos.Context))
				defer cancel()
				interrupt.Store(&cancel)
				return step(sctx)
			}
			return step(ctx)
		}, dbos.WithStepRetryPredicate(mcpdbos.Retryable), dbos.WithStepMaxRetries(2), dbos.WithStepBaseInterval(time.Millisecond))
		if err != nil {
			return "", err
		}
		return res.Text(), nil
	}
	ctx := launch(t, schema, func(ctx dbos.Context) { dbos.RegisterWorkflow(ctx, workflow, dbos.WithWorkflowName("charge")) })

	h, err := dbos.RunWorkflow(ctx, workflow, 7)
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.GetResult()
	if err != nil {
		t.Fatal(err)
	}
	if out != `charged {"amount":7}` {
		t.Errorf("result %q, want the tool's answer", out)
	}
	if n := srv.Executions(chargeTool.Name); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
	ids := rec.seen()
	if runs.Load() != 2 || len(ids) != 2 {
		t.Fatalf("%d runs of the step calling under %v, want 2 (the first interrupted)", runs.Load(), ids)
	}
	if ids[0] != ids[1] {
		t.Errorf("the step's runs called under %s and %s, want one id", ids[0], ids[1])
	}
	frames := srv.Received(ids[0])
	if len(frames) < 2 {
		t.Fatalf("the server received %d requests under %s, want one per run at least", len(frames), ids[0])
	}
	for _, f := range frames[1:] {
		if !bytes.Equal(f, frames[0]) {
			t.Errorf("a retry sent other bytes:\n%s\nthen\n%s", frames[0], f)
		}
	}
}

// Two steps of one workflow with the same arguments are two requests, and so are the steps of
// two workflows: the tool runs for each.
func TestStepsCallUnderTheirOwnIDs(t *testing.T) {
	schema := newSchema(t)
	srv := mcptest.NewTestServer(t, mcptest.WithTool(chargeTool, answerCharge))
	rec := &recorder{Caller: mcptest.NewClient(t, srv)}
	workflow := chargeWorkflow(rec)
	ctx := launch(t, schema, func(ctx dbos.Context) { dbos.RegisterWorkflow(ctx, workflow, dbos.WithWorkflowName("charge")) })
	for _, id := range []string{"order-17", "order-18"} {
		h, err := dbos.RunWorkflow(ctx, workflow, []int{7, 7}, dbos.WithWorkflowID(id))
		if err != nil {
			t.Fatal(err)
		}
		if out, err := h.GetResult(); err != nil || len(out) != 2 {
			t.Fatalf("workflow %s: %q, %v", id, out, err)
		}
	}
	if n := srv.Executions(chargeTool.Name); n != 4 {
		t.Errorf("the tool ran %d times, want 4", n)
	}
	ids := rec.seen()
	distinct := map[mcpclient.ID]bool{}
	for _, id := range ids {
		distinct[id] = true
	}
	if len(ids) != 4 || len(distinct) != 4 {
		t.Errorf("four steps called under %v, want four ids", ids)
	}
}

// A step whose outcome the client could not learn is not retried, and the workflow's error
// names the request.
func TestOutcomeUnknownStepIsNotRetried(t *testing.T) {
	schema := newSchema(t)
	srv := mcptest.NewTestServer(t, mcptest.WithTool(chargeTool, answerCharge),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: chargeTool.Name, Times: -1}))
	rec := &recorder{Caller: mcptest.NewClient(t, srv)}
	workflow := chargeWorkflow(rec, dbos.WithStepMaxRetries(3), dbos.WithStepBaseInterval(time.Millisecond))
	ctx := launch(t, schema, func(ctx dbos.Context) { dbos.RegisterWorkflow(ctx, workflow, dbos.WithWorkflowName("charge")) })
	h, err := dbos.RunWorkflow(ctx, workflow, []int{7})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.GetResult()
	var e *mcpdbos.Error
	if !errors.As(err, &e) || e.Type != mcpdbos.TypeOutcomeUnknown || e.Retry {
		t.Fatalf("error %v, want an *mcpdbos.Error of type %s, not retried", err, mcpdbos.TypeOutcomeUnknown)
	}
	ids := rec.seen()
	if len(ids) != 1 || e.RequestID != ids[0] {
		t.Errorf("%d runs of the step (ids %v), error names %s: want one run, named", len(ids), ids, e.RequestID)
	}
	if n := srv.Executions(chargeTool.Name); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
}
