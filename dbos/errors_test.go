package mcpdbos_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	mcpdbos "github.com/northstar-mcp/mcpclient/dbos"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// TestErrorMapping checks, for each way a call can end, the error a step returns and whether
// DBOS's retry predicate lets the step run again. The calls are made outside a workflow, under a
// pinned id, as a step makes them: what is checked is the mapping, which needs no database.
func TestErrorMapping(t *testing.T) {
	id := mcpclient.IDFromKey("mcpdbos test", "job")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		opts []mcptest.Option
		// call makes the call; nil calls charge under id.
		call  func(t *testing.T, srv *mcptest.Server, c *mcpclient.Client) error
		typ   string
		retry bool
	}{
		{name: "answered"},
		{
			name:  "not delivered",
			opts:  []mcptest.Option{mcptest.WithFault(mcptest.Fault{Kind: mcptest.Fail, Tool: "charge", Times: -1})},
			typ:   mcpdbos.TypeNotDelivered,
			retry: true,
		},
		{
			name: "outcome unknown",
			opts: []mcptest.Option{mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "charge", Times: -1})},
			typ:  mcpdbos.TypeOutcomeUnknown,
		},
		{
			name: "interrupted after sending",
			opts: []mcptest.Option{mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "block"})},
			call: func(t *testing.T, srv *mcptest.Server, c *mcpclient.Client) error {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				srv.AddTool(mcpclient.Tool{Name: "block"}, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
					cancel() // the call ends once the tool ran, before its answer is out
					return &mcpclient.CallToolResult{}, nil
				})
				_, err := c.CallTool(ctx, "block", nil, mcpclient.WithRequestID(id))
				return mcpdbos.StepError(ctx, err)
			},
			typ:   mcpdbos.TypeInterrupted,
			retry: true,
		},
		{
			name: "cancelled before sending",
			call: func(t *testing.T, _ *mcptest.Server, c *mcpclient.Client) error {
				_, err := c.CallTool(cancelled, "charge", nil, mcpclient.WithRequestID(id))
				return mcpdbos.StepError(cancelled, err)
			},
			typ:   mcpdbos.TypeNotDelivered,
			retry: true,
		},
		{
			// A server holds a resend of a running request up to receipts.DefaultWait (30s in
			// mcptest) before it refuses it as in flight: the refusal is made here rather than
			// waited for.
			name: "in flight",
			call: func(t *testing.T, _ *mcptest.Server, c *mcpclient.Client) error {
				req, err := c.NewRequest("tools/call", map[string]any{"name": "charge"}, mcpclient.WithRequestID(id))
				if err != nil {
					return err
				}
				return mcpdbos.StepError(context.Background(), &mcpclient.Error{Code: mcpclient.CodeRequestInFlight, Request: req, Attempts: 1, Err: mcpclient.ErrRequestInFlight})
			},
			typ:   mcpdbos.TypeInFlight,
			retry: true,
		},
		{
			name: "other arguments under the id",
			call: func(t *testing.T, srv *mcptest.Server, c *mcpclient.Client) error {
				// An earlier run, in another process, called with other arguments.
				if _, err := mcptest.NewClient(t, srv).CallTool(context.Background(), "charge", map[string]int{"amount": 1}, mcpclient.WithRequestID(id)); err != nil {
					return err
				}
				_, err := c.CallTool(context.Background(), "charge", map[string]int{"amount": 7}, mcpclient.WithRequestID(id))
				return mcpdbos.StepError(context.Background(), err)
			},
			typ: mcpdbos.TypeConflict,
		},
		{
			name: "a JSON-RPC error",
			call: func(t *testing.T, _ *mcptest.Server, c *mcpclient.Client) error {
				_, err := c.CallTool(context.Background(), "missing", nil, mcpclient.WithRequestID(id))
				return mcpdbos.StepError(context.Background(), err)
			},
			typ: mcpdbos.TypeFailed,
		},
		{
			name: "not a step's context",
			call: func(t *testing.T, _ *mcptest.Server, c *mcpclient.Client) error {
				_, err := mcpdbos.Step(c, "charge", nil)(context.Background())
				if !errors.Is(err, mcpdbos.ErrNotInStep) {
					t.Errorf("error %v, want ErrNotInStep in its chain", err)
				}
				return err
			},
			typ: mcpdbos.TypeFailed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := mcptest.NewTestServer(t, append([]mcptest.Option{mcptest.WithTool(chargeTool, answerCharge)}, tt.opts...)...)
			c := mcptest.NewClient(t, srv)
			call := tt.call
			if call == nil {
				call = func(t *testing.T, _ *mcptest.Server, c *mcpclient.Client) error {
					_, err := c.CallTool(context.Background(), "charge", map[string]int{"amount": 7}, mcpclient.WithRequestID(id))
					return mcpdbos.StepError(context.Background(), err)
				}
			}
			err := call(t, srv, c)
			if tt.typ == "" {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				return
			}
			var e *mcpdbos.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T), want an *mcpdbos.Error", err, err)
			}
			if e.Type != tt.typ || e.Retry != tt.retry || mcpdbos.Retryable(err) != tt.retry {
				t.Errorf("error of type %s, retried %v, want %s, %v: %v", e.Type, mcpdbos.Retryable(err), tt.typ, tt.retry, err)
			}
			if tt.name != "not a step's context" && e.RequestID != id {
				t.Errorf("error names request %s, want %s", e.RequestID, id)
			}
			// Retryable sees through the wrapping DBOS adds when it gives up.
			if mcpdbos.Retryable(fmt.Errorf("step failed: %w", err)) != tt.retry {
				t.Error("Retryable does not see through a wrapped error")
			}
		})
	}
	if mcpdbos.Retryable(errors.New("some other error")) {
		t.Error("Retryable(an error of something else) = true, want false")
	}
}
