package mcpdbos_test

import (
	"fmt"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/northstar-mcp/mcpclient"
	mcpdbos "github.com/northstar-mcp/mcpclient/dbos"
)

// mcp is the client the workflows' steps call through: one per process.
var mcp mcpclient.Caller

// ChargeOrder charges an order in one step: a retry of the step, or its rerun when DBOS recovers
// the workflow after a crash, is answered from the server's receipt instead of charging again.
func ChargeOrder(ctx dbos.Context, cents int) (string, error) {
	res, err := mcpdbos.CallTool(ctx, mcp, "charge", map[string]any{"cents": cents},
		dbos.WithStepMaxRetries(5), dbos.WithStepBaseInterval(time.Second))
	if err != nil {
		return "", err // an *mcpdbos.Error, or its text when the workflow is recovered
	}
	if res.IsError {
		return "", fmt.Errorf("charge refused: %s", res.Text()) // the tool's own answer: decide
	}
	return res.Text(), nil
}

func ExampleCallTool() {
	// At start-up, after dbos.NewContext and before dbos.Launch:
	//
	//	mcp = client
	//	dbos.RegisterWorkflow(dctx, ChargeOrder)
	//
	// and to charge order 17, once, whatever crashes meanwhile:
	//
	//	h, err := dbos.RunWorkflow(dctx, ChargeOrder, 1250, dbos.WithWorkflowID("order-17"))
}
