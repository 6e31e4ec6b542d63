package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// statelessMCPTest is an mcptest HTTP server speaking the stateless revision beside the newest
// session one, with the unsafe tool counting its runs.
func statelessMCPTest(t *testing.T, opts ...mcptest.Option) *mcptest.HTTPServer {
	t.Helper()
	opts = append([]mcptest.Option{
		mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728, mcpclient.ProtocolVersion20251125),
		mcptest.WithTool(unsafeTool, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("reserved")}}, nil
		}),
	}, opts...)
	return mcptest.NewTestHTTPServer(t, opts...)
}

// TestStatelessAgainstMCPTest: the client negotiates the stateless revision with mcptest, and a
// call whose answer was lost after it ran is resent under the same id and answered from the
// receipt the request opted into: it runs once.
func TestStatelessAgainstMCPTest(t *testing.T) {
	t.Parallel()
	for _, sse := range []bool{false, true} {
		t.Run(map[bool]string{false: "JSON", true: "SSE"}[sse], func(t *testing.T) {
			t.Parallel()
			var opts []mcptest.Option
			if sse {
				opts = append(opts, mcptest.WithSSEResponses(time.Millisecond))
			}
			srv := statelessMCPTest(t, opts...)
			c := mcptest.NewClient(t, srv, mcpclient.WithRetryPolicy(mcptest.FastRetryPolicy()))
			if got := c.ProtocolVersion(); got != mcpclient.ProtocolVersion20260728 {
				t.Fatalf("negotiated %s, want the stateless revision", got)
			}
			if srv.Sessions() != 0 {
				t.Errorf("%d sessions opened in a stateless revision", srv.Sessions())
			}
			srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: unsafeTool.Name})
			res, err := c.CallTool(testCtx(t), unsafeTool.Name, nil)
			if err != nil || res.Text() != "reserved" {
				t.Fatalf("call: %v %v", res, err)
			}
			if got := srv.Executions(unsafeTool.Name); got != 1 {
				t.Errorf("the tool ran %d times, want once", got)
			}
		})
	}
}

// TestStatelessAgainstMCPTestWithoutReceipts: against a server that keeps no receipts, the lost
// answer of an unsafe call stays unknown; nothing runs twice.
func TestStatelessAgainstMCPTestWithoutReceipts(t *testing.T) {
	t.Parallel()
	srv := statelessMCPTest(t, mcptest.WithMode(mcptest.ModeNone))
	c := mcptest.NewClient(t, srv, mcpclient.WithRetryPolicy(mcptest.FastRetryPolicy()))
	srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: unsafeTool.Name})
	_, err := c.CallTool(testCtx(t), unsafeTool.Name, nil)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("call: %v, want ErrOutcomeUnknown", err)
	}
	if got := srv.Executions(unsafeTool.Name); got != 1 {
		t.Errorf("the tool ran %d times, want once", got)
	}
}

// TestStatelessLogLevelRidesEachRequest: in the stateless revision the log level the client sets
// rides in each request's _meta, and mcptest sends a tool's records on that request's stream
// only at or above it: none before a level is set.
func TestStatelessLogLevelRidesEachRequest(t *testing.T) {
	t.Parallel()
	srv := statelessMCPTest(t, mcptest.WithTool(mcpclient.Tool{Name: "chatty"}, func(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		call.Log(mcpclient.LevelDebug, "t", "debug")
		call.Log(mcpclient.LevelError, "t", "error")
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("done")}}, nil
	}))
	records := make(chan mcpclient.LoggingLevel, 16)
	c := mcptest.NewClient(t, srv, mcpclient.WithLogHandler(func(_ context.Context, m *mcpclient.LogMessage) { records <- m.Level }))
	ctx := testCtx(t)
	for _, step := range []struct {
		level mcpclient.LoggingLevel // "" sets none
		want  []mcpclient.LoggingLevel
	}{
		{"", nil},
		{mcpclient.LevelError, []mcpclient.LoggingLevel{mcpclient.LevelError}},
		{mcpclient.LevelDebug, []mcpclient.LoggingLevel{mcpclient.LevelDebug, mcpclient.LevelError}},
	} {
		if step.level != "" {
			if err := c.SetLoggingLevel(ctx, step.level); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.CallTool(ctx, "chatty", nil); err != nil {
			t.Fatal(err)
		}
		// Log handlers run apart from the call: take what is due, then make sure nothing more
		// comes.
		for _, want := range step.want {
			if got := recv(t, records, "a log record"); got != want {
				t.Errorf("level %q: record %q, want %q", step.level, got, want)
			}
		}
		select {
		case extra := <-records:
			t.Errorf("level %q: an extra record %q", step.level, extra)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestStatelessListenAgainstMCPTest: a subscription opened with Listen hears the tool list
// change and the update of the resource it named, and ends when the server closes.
func TestStatelessListenAgainstMCPTest(t *testing.T) {
	t.Parallel()
	t.Run("http", func(t *testing.T) {
		srv := statelessMCPTest(t, mcptest.WithResource(mcpclient.Resource{URI: "test://r", Name: "r"}, nil))
		testListen(t, srv.Server, srv, true)
	})
	t.Run("memory", func(t *testing.T) {
		srv := mcptest.NewTestServer(t, statelessRevisions, mcptest.WithResource(mcpclient.Resource{URI: "test://r", Name: "r"}, nil))
		testListen(t, srv, srv, false)
	})
}

// testListen listens to srv through d; graceful says whether the server's Close ends the
// subscription with a result (over HTTP) or by ending the connection (in memory).
func testListen(t *testing.T, srv *mcptest.Server, d mcptest.Dialer, graceful bool) {
	changed := make(chan struct{}, 4)
	updated := make(chan string, 4)
	c := mcptest.NewClient(t, d,
		mcpclient.WithNotificationHandler("notifications/tools/list_changed", func(context.Context, string, json.RawMessage) { changed <- struct{}{} }),
		mcpclient.WithResourceUpdatedHandler(func(_ context.Context, uri string) { updated <- uri }))
	sub, err := c.Listen(testCtx(t), mcpclient.SubscriptionFilter{ToolsListChanged: true, PromptsListChanged: true, ResourceSubscriptions: []string{"test://r"}})
	if err != nil {
		t.Fatal(err)
	}
	if a := sub.Acknowledged; !a.ToolsListChanged || a.PromptsListChanged || len(a.ResourceSubscriptions) != 1 {
		t.Errorf("acknowledged %+v: the server has no prompts", a)
	}
	srv.AddTool(mcpclient.Tool{Name: "late"}, nil)
	recv(t, changed, "the tool list change")
	srv.ResourceUpdated("test://r")
	if uri := recv(t, updated, "the resource update"); uri != "test://r" {
		t.Errorf("updated %s", uri)
	}
	srv.Close()
	recv(t, sub.Done(), "the subscription to end")
	if err := sub.Err(); graceful && err != nil {
		t.Errorf("a closing server ends the subscription gracefully, got %v", err)
	}
}

// TestStatelessFaultsAgainstMCPTest: each fault mcptest injects does in the stateless revision
// what it does in the session ones, and the client's promise holds: an unsafe call runs at most
// once, and is answered wherever the server kept its receipt.
func TestStatelessFaultsAgainstMCPTest(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		fault   mcptest.Fault
		sse     bool
		restart bool // restart the server when the tool runs: its receipts are gone
		runs    int
		unknown bool // the call ends ErrOutcomeUnknown
	}{
		{name: "dropped before it ran", fault: mcptest.Fault{Kind: mcptest.DropBeforeExecution}, runs: 1},
		{name: "dropped after it ran", fault: mcptest.Fault{Kind: mcptest.DropAfterExecution}, runs: 1},
		{name: "dropped after it ran, SSE", fault: mcptest.Fault{Kind: mcptest.DropAfterExecution}, sse: true, runs: 1},
		{name: "refused with 503", fault: mcptest.Fault{Kind: mcptest.Fail}, runs: 1},
		{name: "stream broken before the answer", fault: mcptest.Fault{Kind: mcptest.BreakStream}, sse: true, runs: 1},
		{name: "expiry means nothing without sessions", fault: mcptest.Fault{Kind: mcptest.ExpireSession}, runs: 1},
		{name: "restarted while it ran", restart: true, runs: 1, unknown: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var srv *mcptest.HTTPServer
			restarted := false
			tool := mcptest.WithTool(unsafeTool, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
				if c.restart && !restarted {
					restarted = true
					srv.Restart()
				}
				return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("reserved")}}, nil
			})
			opts := []mcptest.Option{tool}
			if c.sse {
				opts = append(opts, mcptest.WithSSEResponses(time.Millisecond))
			}
			srv = statelessMCPTest(t, opts...)
			cl := mcptest.NewClient(t, srv, mcpclient.WithRetryPolicy(mcptest.FastRetryPolicy()))
			if c.fault.Kind != 0 {
				c.fault.Tool = unsafeTool.Name
				srv.Inject(c.fault)
			}
			res, err := cl.CallTool(testCtx(t), unsafeTool.Name, nil)
			switch {
			case c.unknown && !errors.Is(err, mcpclient.ErrOutcomeUnknown):
				t.Errorf("call: %v, want ErrOutcomeUnknown", err)
			case !c.unknown && (err != nil || res.Text() != "reserved"):
				t.Errorf("call: %v %v", res, err)
			}
			if got := srv.Executions(unsafeTool.Name); got != c.runs {
				t.Errorf("the tool ran %d times, want %d", got, c.runs)
			}
		})
	}
}

// interviewTool asks its client's name (elicitation), then a model (sampling): two rounds of a
// multi round-trip request in the stateless revision, the second round's answers joined by the
// first's that the requestState carries.
var interviewTool = mcpclient.Tool{Name: "interview"}

func interview(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	who, err := call.Request(ctx, "elicitation/create", mcpclient.ElicitParams{Message: "Your name?",
		RequestedSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)})
	if err != nil {
		return nil, err
	}
	said, err := call.Request(ctx, "sampling/createMessage", mcpclient.CreateMessageParams{MaxTokens: 10,
		Messages: []mcpclient.SamplingMessage{{Role: "user", Content: mcpclient.SamplingContent{mcpclient.TextContent("Greet them")}}}})
	if err != nil {
		return nil, err
	}
	var e mcpclient.ElicitResult
	var m mcpclient.CreateMessageResult
	if err := errors.Join(json.Unmarshal(who, &e), json.Unmarshal(said, &m)); err != nil || len(m.Content) == 0 {
		return nil, fmt.Errorf("answers %s and %s: %v", who, said, err)
	}
	return featText(fmt.Sprintf("%s, %s (round %d)", m.Content[0].Text, e.Content["name"], call.Round())), nil
}

// TestStatelessInputRoundsAgainstMCPTest: a tool on mcptest that asks for an elicitation and a
// sample takes three requests in 2026-07-28, the client answering each round's input request
// with its handlers; a round whose answer is lost after it ran is resent under its id and read
// from its receipt. A client that declared no sampling gets the server's refusal, -32021 naming
// the capability, as a typed error.
func TestStatelessInputRoundsAgainstMCPTest(t *testing.T) {
	t.Parallel()
	var elicited, sampled atomic.Int32
	elicit := mcpclient.WithElicitationHandler(func(context.Context, *mcpclient.ElicitParams) (*mcpclient.ElicitResult, error) {
		elicited.Add(1)
		return &mcpclient.ElicitResult{Action: mcpclient.ElicitAccept, Content: map[string]any{"name": "Ada"}}, nil
	})
	sample := mcpclient.WithSamplingHandler(func(context.Context, *mcpclient.CreateMessageParams) (*mcpclient.CreateMessageResult, error) {
		sampled.Add(1)
		return &mcpclient.CreateMessageResult{Role: "assistant", Model: "m", Content: mcpclient.SamplingContent{mcpclient.TextContent("Hello")}}, nil
	})
	srv := statelessMCPTest(t, mcptest.WithTool(interviewTool, interview))

	t.Run("both handlers", func(t *testing.T) {
		c := mcptest.NewClient(t, srv, elicit, sample)
		if got := c.ProtocolVersion(); got != mcpclient.ProtocolVersion20260728 {
			t.Fatalf("negotiated %s, want the stateless revision", got)
		}
		// The second round's answer is lost after it ran.
		srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: interviewTool.Name, After: 1})
		res, err := c.CallTool(testCtx(t), interviewTool.Name, nil)
		if err != nil || res.Text() != "Hello, Ada (round 3)" {
			t.Fatalf("call: %v %v", res, err)
		}
		if elicited.Load() != 1 || sampled.Load() != 1 {
			t.Errorf("handlers ran %d and %d times, want once each", elicited.Load(), sampled.Load())
		}
		if got := srv.Executions(interviewTool.Name); got != 3 {
			t.Errorf("the tool ran %d times, want once a round", got)
		}
		var ids []string
		for _, r := range srv.Requests() {
			if r.RPCMethod == "tools/call" {
				ids = append(ids, r.ID.JSON())
			}
		}
		if len(ids) != 4 || ids[1] != ids[2] || ids[0] == ids[1] || ids[2] == ids[3] {
			t.Errorf("tools/call ids %v, want three rounds under their own ids, the second sent twice", ids)
		}
	})
	t.Run("no sampling declared", func(t *testing.T) {
		c := mcptest.NewClient(t, srv, elicit)
		_, err := c.CallTool(testCtx(t), interviewTool.Name, nil)
		var rpc *mcpclient.RPCError
		if !errors.As(err, &rpc) || rpc.Code != mcpclient.RPCMissingRequiredClientCapability || mcpclient.CodeOf(err) != mcpclient.CodeServerError {
			t.Fatalf("call: %v, want the server's -32021", err)
		}
		var data struct {
			Required map[string]json.RawMessage `json:"requiredCapabilities"`
		}
		if json.Unmarshal(rpc.Data, &data) != nil || string(data.Required["sampling"]) != "{}" || len(data.Required) != 1 {
			t.Errorf("error data %s, want requiredCapabilities {\"sampling\":{}}", rpc.Data)
		}
	})
}
