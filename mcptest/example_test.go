package mcptest_test

import (
	"context"
	"fmt"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

func ExampleNewServer() {
	runs := 0
	srv := mcptest.NewServer(
		mcptest.WithTool(mcpclient.Tool{Name: "charge"}, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			runs++
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("charged")}}, nil
		}),
		// The first reply is lost after the tool ran.
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "charge"}))
	defer srv.Close()

	c, err := mcpclient.Connect(context.Background(), srv.Transport())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	res, err := c.CallTool(context.Background(), "charge", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Text(), "- tool runs:", runs)
	// Output: charged - tool runs: 1
}
