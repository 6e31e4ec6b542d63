package mcptemporal_test

import (
	"context"
	"errors"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	mcptemporal "github.com/northstar-mcp/mcpclient/temporal"
)

// TestErrorMapping runs one activity per way a call can end and checks the error Temporal gets
// from it: its type, whether the engine may retry it, and the request it names.
func TestErrorMapping(t *testing.T) {
	tests := []struct {
		name string
		// call makes the activity's call, on a server of its own made with opts.
		opts []mcptest.Option
		call func(ctx context.Context, t *testing.T, h harness, c *mcpclient.Client) (*mcpclient.CallToolResult, error)
		// tool is the tool whose id the error should name; "charge" when empty.
		tool string
		// typ is the error type wanted, "" for no error; retry whether the engine may retry it.
		typ   string
		retry bool
	}{
		{
			name: "answered",
			call: callCharge,
		},
		{
			name: "the tool reports its own failure",
			opts: []mcptest.Option{mcptest.WithTool(mcpclient.Tool{Name: "declines"}, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
				return &mcpclient.CallToolResult{IsError: true, Content: []mcpclient.Content{mcpclient.TextContent("card declined")}}, nil
			})},
			call: func(ctx context.Context, _ *testing.T, _ harness, c *mcpclient.Client) (*mcpclient.CallToolResult, error) {
				return mcptemporal.CallTool(ctx, c, "declines", nil)
			},
		},
		{
			name:  "not delivered",
			opts:  []mcptest.Option{mcptest.WithFault(mcptest.Fault{Kind: mcptest.Fail, Tool: "charge", Times: -1})},
			call:  callCharge,
			typ:   mcptemporal.TypeNotDelivered,
			retry: true,
		},
		{
			name: "outcome unknown",
			opts: []mcptest.Option{mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "charge", Times: -1})},
			call: callCharge,
			typ:  mcptemporal.TypeOutcomeUnknown,
		},
		{
			name: "interrupted after sending",
			opts: []mcptest.Option{mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "block"})},
			call: func(ctx context.Context, t *testing.T, h harness, c *mcpclient.Client) (*mcpclient.CallToolResult, error) {
				ctx, cancel := context.WithCancel(ctx)
				defer cancel()
				h.srv.AddTool(mcpclient.Tool{Name: "block"}, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
					cancel() // the attempt ends once the tool ran, before its answer is out
					return &mcpclient.CallToolResult{}, nil
				})
				return mcptemporal.CallTool(ctx, c, "block", nil)
			},
			tool:  "block",
			typ:   mcptemporal.TypeInterrupted,
			retry: true,
		},
		{
			// A server holds a resend of a running request up to receipts.DefaultWait (30s in
			// mcptest) before it refuses it as in flight: the refusal is made here rather than
			// waited for.
			name: "in flight",
			call: func(ctx context.Context, t *testing.T, h harness, c *mcpclient.Client) (*mcpclient.CallToolResult, error) {
				id, err := mcptemporal.RequestID(ctx, "charge")
				if err != nil {
					return nil, err
				}
				req, err := c.NewRequest("tools/call", map[string]any{"name": "charge"}, mcpclient.WithRequestID(id))
				if err != nil {
					return nil, err
				}
				return nil, mcptemporal.ActivityError(ctx, &mcpclient.Error{Code: mcpclient.CodeRequestInFlight, Request: req, Attempts: 1, Err: mcpclient.ErrRequestInFlight})
			},
			typ:   mcptemporal.TypeInFlight,
			retry: true,
		},
		{
			name: "other arguments under the id",
			call: func(ctx context.Context, t *testing.T, h harness, c *mcpclient.Client) (*mcpclient.CallToolResult, error) {
				id, err := mcptemporal.RequestID(ctx, "charge")
				if err != nil {
					return nil, err
				}
				// An earlier attempt, in another process, called with other arguments.
				if _, err := mcptest.NewClient(t, h.dial).CallTool(ctx, "charge", map[string]int{"amount": 1}, mcpclient.WithRequestID(id)); err != nil {
					return nil, err
				}
				return callCharge(ctx, t, h, c)
			},
			typ: mcptemporal.TypeConflict,
		},
		{
			name: "a JSON-RPC error",
			call: func(ctx context.Context, _ *testing.T, _ harness, c *mcpclient.Client) (*mcpclient.CallToolResult, error) {
				return mcptemporal.CallTool(ctx, c, "missing", nil)
			},
			tool: "missing",
			typ:  mcptemporal.TypeFailed,
		},
		{
			name: "arguments that do not encode",
			call: func(ctx context.Context, _ *testing.T, _ harness, c *mcpclient.Client) (*mcpclient.CallToolResult, error) {
				return mcptemporal.CallTool(ctx, c, "charge", map[string]any{"f": func() {}})
			},
			typ: mcptemporal.TypeFailed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := append([]mcptest.Option{mcptest.WithTool(chargeTool, answerCharge)}, tt.opts...)
			srv := mcptest.NewTestServer(t, opts...)
			h := harness{srv, srv}
			c := mcptest.NewClient(t, h.dial)
			tool := tt.tool
			if tool == "" {
				tool = "charge"
			}
			var id mcpclient.ID
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			env.RegisterActivityWithOptions(func(ctx context.Context) (string, error) {
				var err error
				if id, err = mcptemporal.RequestID(ctx, tool); err != nil {
					return "", err
				}
				res, err := tt.call(ctx, t, h, c)
				if err != nil {
					return "", err
				}
				return res.Text(), nil
			}, activity.RegisterOptions{Name: "call"})
			_, err := env.ExecuteActivity("call")
			if tt.typ == "" {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				return
			}
			var appErr *temporal.ApplicationError
			if !errors.As(err, &appErr) {
				t.Fatalf("error %v (%T), want a *temporal.ApplicationError", err, err)
			}
			if appErr.Type() != tt.typ || appErr.NonRetryable() == tt.retry {
				t.Errorf("error of type %s, retryable %v, want %s, %v: %v", appErr.Type(), !appErr.NonRetryable(), tt.typ, tt.retry, err)
			}
			var d mcptemporal.Details
			if err := appErr.Details(&d); err != nil {
				t.Fatal(err)
			}
			if tt.name != "arguments that do not encode" && d.RequestID != id.JSON() {
				t.Errorf("details name request %s, want %s", d.RequestID, id.JSON())
			}
			if d.Code == "" {
				t.Error("details name no Code")
			}
		})
	}
}

// A harness is the server a case calls, and what dials it.
type harness struct {
	srv  *mcptest.Server
	dial mcptest.Dialer
}

func answerCharge(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("charged " + string(call.Arguments))}}, nil
}

func callCharge(ctx context.Context, _ *testing.T, _ harness, c *mcpclient.Client) (*mcpclient.CallToolResult, error) {
	return mcptemporal.CallTool(ctx, c, "charge", map[string]int{"amount": 7})
}

func TestOutsideAnActivity(t *testing.T) {
	if _, err := mcptemporal.RequestID(context.Background(), "charge"); !errors.Is(err, mcptemporal.ErrNotInActivity) {
		t.Errorf("RequestID outside an activity: %v, want ErrNotInActivity", err)
	}
	c := mcptest.NewClient(t, mcptest.NewTestServer(t, mcptest.WithTool(chargeTool, answerCharge)))
	_, err := mcptemporal.CallTool(context.Background(), c, "charge", nil)
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || !appErr.NonRetryable() || !errors.Is(err, mcptemporal.ErrNotInActivity) {
		t.Errorf("CallTool outside an activity: %v, want a non-retryable error with ErrNotInActivity", err)
	}
}
