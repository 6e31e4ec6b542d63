package mcptest_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
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

// A server that refuses the next call of a tool as a server keeping receipts refuses an id it
// holds for other content: the tool does not run, and the client stops with a conflict.
func ExampleFaultKind_refuseIDReused() {
	runs := 0
	srv := mcptest.NewServer(
		mcptest.WithTool(mcpclient.Tool{Name: "charge"}, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			runs++
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("charged")}}, nil
		}),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.RefuseIDReused, Tool: "charge"}))
	defer srv.Close()

	c, err := mcpclient.Connect(context.Background(), srv.Transport())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	_, err = c.CallTool(context.Background(), "charge", nil)
	var e *mcpclient.Error
	if errors.As(err, &e) {
		entry, _ := c.Ledger().Lookup(e.Request.ID())
		fmt.Println(errors.Is(err, mcpclient.ErrRequestIDReused), entry.State, "- tool runs:", runs)
	}
	// The fault is used up: the next call runs.
	res, err := c.CallTool(context.Background(), "charge", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Text(), "- tool runs:", runs)
	// Output:
	// true conflict - tool runs: 0
	// charged - tool runs: 1
}

// Over Streamable HTTP the in-flight refusal comes with status 409, as from a server keeping
// receipts whose wait for the running request is over.
func ExampleFaultKind_refuseInFlight() {
	srv := mcptest.NewHTTPServer(
		mcptest.WithTool(mcpclient.Tool{Name: "charge"}, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("charged")}}, nil
		}),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.RefuseInFlight, Tool: "charge"}))
	defer srv.Close()

	c, err := mcpclient.Connect(context.Background(), srv.Transport())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	_, err = c.CallTool(context.Background(), "charge", nil)
	var status *transport.StatusError
	fmt.Println(errors.Is(err, mcpclient.ErrRequestInFlight), errors.As(err, &status) && status.StatusCode == 409,
		"- tool runs:", srv.Executions("charge"))
	// Output: true true - tool runs: 0
}

// Hint options declare a tool's annotations without pointers to bools. The client takes a
// read-only tool as safe to run twice: to a server that keeps no receipts, a call whose
// delivery was lost is sent again under a new id.
func ExampleWithTool_hints() {
	srv := mcptest.NewServer(
		mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithTool(mcpclient.Tool{Name: "lookup"}, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("found")}}, nil
		}, mcptest.ReadOnlyHint(true), mcptest.OpenWorldHint(false)),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropBeforeExecution, Tool: "lookup"}))
	defer srv.Close()

	// FastRetryPolicy: the resend follows at once, without the default policy's backoff.
	c, err := mcpclient.Connect(context.Background(), srv.Transport(), mcpclient.WithRetryPolicy(mcptest.FastRetryPolicy()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	tools, err := c.CachedTools(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	a := tools[0].Annotations
	fmt.Println("readOnlyHint:", *a.ReadOnlyHint, "openWorldHint:", *a.OpenWorldHint, "idempotentHint set:", a.IdempotentHint != nil)
	res, err := c.CallTool(context.Background(), "lookup", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Text(), "- tool runs:", srv.Executions("lookup"))
	// Output:
	// readOnlyHint: true openWorldHint: false idempotentHint set: false
	// found - tool runs: 1
}
