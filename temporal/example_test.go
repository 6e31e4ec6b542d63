package mcptemporal_test

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/testsuite"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	mcptemporal "github.com/northstar-mcp/mcpclient/temporal"
)

// Payments is an activity holding the client its calls go through: one client per worker.
type Payments struct {
	MCP mcpclient.Caller
}

// Charge calls the charge tool under an id of its activity's own: a retry of the activity is
// answered from the server's receipt instead of charging again.
func (p *Payments) Charge(ctx context.Context, order string, cents int) (string, error) {
	res, err := mcptemporal.CallTool(ctx, p.MCP, "charge", map[string]any{"order": order, "cents": cents})
	if err != nil {
		return "", err // retryable or not, as the package documentation says
	}
	if res.IsError {
		return "", fmt.Errorf("charge refused: %s", res.Text()) // the tool's own answer: decide
	}
	return res.Text(), nil
}

func ExampleCallTool() {
	srv := mcptest.NewServer(mcptest.WithTool(mcpclient.Tool{Name: "charge"},
		func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("charged")}}, nil
		}))
	defer srv.Close()
	c, err := mcpclient.Connect(context.Background(), srv.Transport())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	// A worker registers the activity: worker.RegisterActivity(&Payments{MCP: c}). Here
	// Temporal's test environment runs it.
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(&Payments{MCP: c})
	val, err := env.ExecuteActivity("Charge", "order-17", 1250)
	if err != nil {
		fmt.Println(err)
		return
	}
	var out string
	if err := val.Get(&out); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out, "- tool runs:", srv.Executions("charge"))
	// Output: charged - tool runs: 1
}
