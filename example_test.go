package mcpclient_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

func greet(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("hello " + string(call.Arguments))}}, nil
}

func ExampleConnect() {
	srv := mcptest.NewServer()
	defer srv.Close()

	c, err := mcpclient.Connect(context.Background(), srv.Transport())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	scope := c.Receipts()
	fmt.Println(c.ServerInfo().Name, c.ProtocolVersion(), scope)
	// Output: mcptest 2025-11-25 process
}

func ExampleClient_CallTool() {
	srv := mcptest.NewServer(mcptest.WithTool(mcpclient.Tool{Name: "greet"}, greet))
	defer srv.Close()
	c, err := mcpclient.Connect(context.Background(), srv.Transport())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	res, err := c.CallTool(context.Background(), "greet", map[string]string{"name": "ada"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Text())
	// Output: hello {"name":"ada"}
}

// Freezing a request before sending it gives the caller its id first, to record durably.
func ExampleClient_Do() {
	srv := mcptest.NewServer(
		mcptest.WithTool(mcpclient.Tool{Name: "greet"}, greet),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "greet"}))
	defer srv.Close()
	c, err := mcpclient.Connect(context.Background(), srv.Transport())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	req, err := c.NewRequest("tools/call", mcpclient.CallToolParams{Name: "greet", Arguments: map[string]string{"name": "bo"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := c.Do(context.Background(), req) // the first reply is lost; the resend reads the receipt
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("attempts:", resp.Attempts, "executions:", srv.ExecutionsOf("greet", req.ID()))
	// Output: attempts: 2 executions: 1
}

func ExampleClient_Supersede() {
	srv := mcptest.NewServer(
		mcptest.WithMode(mcptest.ModeNone), // no receipts: a lost reply leaves the outcome unknown
		mcptest.WithTool(mcpclient.Tool{Name: "greet"}, greet),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropBeforeExecution, Tool: "greet"}))
	defer srv.Close()
	c, err := mcpclient.Connect(context.Background(), srv.Transport())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	_, err = c.CallTool(context.Background(), "greet", map[string]string{"name": "cy"})
	var e *mcpclient.Error
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.As(err, &e) {
		fmt.Println("unexpected:", err)
		return
	}
	fmt.Println("outcome unknown after", e.Attempts, "attempt")

	// Look at the server's state first; then replace the request, saying what was found.
	found := fmt.Sprintf("%d greetings sent", srv.Executions("greet"))
	resp, err := c.Supersede(context.Background(), e.Request,
		mcpclient.Inspection{Checked: "the greeting log", Found: found},
		mcpclient.CallToolParams{Name: "greet", Arguments: map[string]string{"name": "cyd"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	old, _ := c.Ledger().Lookup(e.Request.ID())
	fmt.Println("old entry:", old.State, "superseded:", old.SupersededBy == resp.Request.ID())
	// Output:
	// outcome unknown after 1 attempt
	// old entry: uncertain superseded: true
}

func ExampleClient_Tools() {
	srv := mcptest.NewServer(
		mcptest.WithPageSize(1),
		mcptest.WithTool(mcpclient.Tool{Name: "a"}, greet),
		mcptest.WithTool(mcpclient.Tool{Name: "b"}, greet))
	defer srv.Close()
	c, err := mcpclient.Connect(context.Background(), srv.Transport())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	for tool, err := range c.Tools(context.Background()) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(tool.Name)
	}
	// Output:
	// a
	// b
}

// A URL-mode elicitation reaches its handler with the URL checked and parsed, and the host to
// show the user before asking whether to open it.
func ExampleWithURLElicitationHandler() {
	signIn := func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		res, err := call.Request(ctx, "elicitation/create", map[string]string{"mode": "url", "elicitationId": "e-1",
			"message": "Authorize access to your calendar", "url": "https://auth.example.com/authorize?state=x"})
		if err != nil {
			return nil, err
		}
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(string(res))}}, nil
	}
	srv := mcptest.NewServer(mcptest.WithTool(mcpclient.Tool{Name: "sign_in"}, signIn))
	defer srv.Close()
	c, err := mcpclient.Connect(context.Background(), srv.Transport(),
		mcpclient.WithURLElicitationHandler(func(_ context.Context, p *mcpclient.URLElicitParams) (*mcpclient.ElicitResult, error) {
			// An application asks the user here, showing p.Host, and opens p.URL.String() in
			// a browser only if the user agrees.
			fmt.Printf("%s: open a page on %s?\n", p.Message, p.Host)
			return &mcpclient.ElicitResult{Action: mcpclient.ElicitDecline}, nil
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	res, err := c.CallTool(context.Background(), "sign_in", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("the server heard", res.Text())
	// Output:
	// Authorize access to your calendar: open a page on auth.example.com?
	// the server heard {"action":"decline"}
}
