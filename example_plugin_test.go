package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cenkalti/backoff/v4"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

type userKey struct{}

// An interceptor adds a token chosen for the caller (from the call's context) and denies a tool
// before anything is sent.
func ExampleWithInterceptors() {
	srv := mcptest.NewServer(mcptest.WithTool(mcpclient.Tool{Name: "greet"}, greet), mcptest.WithTool(mcpclient.Tool{Name: "delete_all"}, greet))
	defer srv.Close()

	errDenied := errors.New("denied by policy")
	policy := func(next mcpclient.Handler) mcpclient.Handler {
		return func(ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
			if x.Request.Method() == "tools/call" && x.Request.Name() == "delete_all" {
				return nil, errDenied
			}
			if user, ok := ctx.Value(userKey{}).(string); ok {
				x.Header.Set("Authorization", "Bearer token-of-"+user) // HTTP transports send it
			}
			return next(ctx, x)
		}
	}
	c, err := mcpclient.Connect(context.Background(), srv.Transport(), mcpclient.WithInterceptors(policy))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	ctx := context.WithValue(context.Background(), userKey{}, "ada")
	res, err := c.CallTool(ctx, "greet", nil)
	fmt.Println(res.Text(), err)
	_, err = c.CallTool(ctx, "delete_all", nil)
	fmt.Println(mcpclient.CodeOf(err), errors.Is(err, errDenied), srv.Executions("delete_all"))
	// Output:
	// hello  <nil>
	// refused by an interceptor true 0
}

// The attempt hook hears each attempt: here a reply lost after the tool ran, and the resend
// under the same id that the server's receipt answers.
func ExampleWithAttemptHook() {
	srv := mcptest.NewServer(mcptest.WithTool(mcpclient.Tool{Name: "greet"}, greet))
	defer srv.Close()
	hook := func(_ context.Context, ev mcpclient.AttemptEvent) {
		if !ev.Handshake {
			fmt.Println(ev.Method, ev.Tool, "attempt", ev.Attempt, ev.Outcome)
		}
	}
	c, err := mcpclient.Connect(context.Background(), srv.Transport(), mcpclient.WithAttemptHook(hook),
		mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{NewBackOff: func() backoff.BackOff { return &backoff.ZeroBackOff{} }}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "greet"})
	if _, err := c.CallTool(context.Background(), "greet", nil); err != nil {
		fmt.Println(err)
	}
	fmt.Println("executions:", srv.Executions("greet"))
	// Output:
	// tools/call greet attempt 1 uncertain
	// tools/call greet attempt 2 answered
	// executions: 1
}

// A plugin decorates a client by embedding the Caller it wraps and overriding what it changes.
type readOnly struct{ mcpclient.Caller }

func (r readOnly) CallTool(ctx context.Context, name string, args any, opts ...mcpclient.CallOption) (*mcpclient.CallToolResult, error) {
	tools, err := r.CachedTools(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range tools {
		if t.Name == name && t.Annotations != nil && t.Annotations.ReadOnlyHint != nil && *t.Annotations.ReadOnlyHint {
			return r.Caller.CallTool(ctx, name, args, opts...)
		}
	}
	return nil, fmt.Errorf("%s is not read-only", name)
}

func ExampleCaller() {
	yes := true
	srv := mcptest.NewServer(
		mcptest.WithTool(mcpclient.Tool{Name: "greet", Annotations: &mcpclient.ToolAnnotations{ReadOnlyHint: &yes}}, greet),
		mcptest.WithTool(mcpclient.Tool{Name: "reserve"}, greet))
	defer srv.Close()
	c, err := mcpclient.Connect(context.Background(), srv.Transport())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	var caller mcpclient.Caller = readOnly{c}
	_, err = caller.CallTool(context.Background(), "greet", nil)
	fmt.Println(err)
	_, err = caller.CallTool(context.Background(), "reserve", nil)
	fmt.Println(err)
	// Output:
	// <nil>
	// reserve is not read-only
}

// A tool asks the client's model for a completion; the client answers with its handler.
func ExampleWithSamplingHandler() {
	summarize := func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		res, err := call.Request(ctx, "sampling/createMessage", map[string]any{
			"messages":  []map[string]any{{"role": "user", "content": map[string]string{"type": "text", "text": "Summarize: MCP."}}},
			"maxTokens": 50,
		})
		if err != nil {
			return nil, err
		}
		var m mcpclient.CreateMessageResult
		if err := json.Unmarshal(res, &m); err != nil || len(m.Content) == 0 {
			return nil, fmt.Errorf("no completion: %s", res)
		}
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(m.Model + " said: " + m.Content[0].Text)}}, nil
	}
	srv := mcptest.NewServer(mcptest.WithTool(mcpclient.Tool{Name: "summarize"}, summarize))
	defer srv.Close()
	c, err := mcpclient.Connect(context.Background(), srv.Transport(),
		mcpclient.WithSamplingHandler(func(_ context.Context, p *mcpclient.CreateMessageParams) (*mcpclient.CreateMessageResult, error) {
			// An application asks its model here, after the user approved the request.
			return &mcpclient.CreateMessageResult{Role: "assistant", Model: "tiny-model",
				Content: mcpclient.SamplingContent{mcpclient.TextContent("a protocol for tools")}}, nil
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	res, err := c.CallTool(context.Background(), "summarize", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Text())
	// Output: tiny-model said: a protocol for tools
}

// Progress reports of one call reach the handler given with it, before the call returns.
func ExampleWithProgress() {
	steps := func(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		for i := 1; i <= 3; i++ {
			call.Progress(float64(i), 3, fmt.Sprintf("step %d", i))
		}
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("done")}}, nil
	}
	srv := mcptest.NewServer(mcptest.WithTool(mcpclient.Tool{Name: "steps"}, steps))
	defer srv.Close()
	c, err := mcpclient.Connect(context.Background(), srv.Transport())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	res, err := c.CallTool(context.Background(), "steps", nil, mcpclient.WithProgress(func(p mcpclient.Progress) {
		fmt.Printf("%.0f/%.0f %s\n", p.Progress, p.Total, p.Message)
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Text())
	// Output:
	// 1/3 step 1
	// 2/3 step 2
	// 3/3 step 3
	// done
}
