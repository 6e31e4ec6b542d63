package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// mrtrServer serves the fixtures in the stateless revision and the newest session one.
func mrtrServer(t *testing.T) *mcptest.HTTPServer {
	t.Helper()
	return mcptest.NewTestHTTPServer(t, append([]mcptest.Option{
		mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728, mcpclient.ProtocolVersion20251125),
	}, mrtrFixtures()...)...)
}

var (
	mrtrUserSays = mcpclient.WithElicitationHandler(func(_ context.Context, p *mcpclient.ElicitParams) (*mcpclient.ElicitResult, error) {
		answers := map[string]map[string]any{
			"What is your name?":                   {"name": "Ada"},
			"Step 1: What is your name?":           {"name": "Ada"},
			"Step 2: What is your favorite color?": {"color": "blue"},
			"Please confirm":                       {"ok": true},
			"What context should the prompt use?":  {"context": "tea"},
		}
		return &mcpclient.ElicitResult{Action: mcpclient.ElicitAccept, Content: answers[p.Message]}, nil
	})
	mrtrModelSays = mcpclient.WithSamplingHandler(func(context.Context, *mcpclient.CreateMessageParams) (*mcpclient.CreateMessageResult, error) {
		return &mcpclient.CreateMessageResult{Role: "assistant", Model: "m", Content: mcpclient.SamplingContent{mcpclient.TextContent("Paris")}}, nil
	})
	mrtrClientRoots = mcpclient.WithRoots(mcpclient.Root{URI: "file:///work", Name: "work"})
)

// TestMRTRFixtures: this module's client, answering every kind of input, completes each fixture
// in both revisions; in the stateless one through as many rounds as the fixture asks.
func TestMRTRFixtures(t *testing.T) {
	srv := mrtrServer(t)
	for _, version := range []string{mcpclient.ProtocolVersion20260728, mcpclient.ProtocolVersion20251125} {
		t.Run(version, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c := mcptest.NewClient(t, srv, mrtrUserSays, mrtrModelSays, mrtrClientRoots, mcpclient.WithProtocolVersion(version))
			stateOK := "confirmation accept without a requestState"
			if version == mcpclient.ProtocolVersion20260728 {
				stateOK = "state-ok: confirmation accept in round 2"
			}
			for tool, want := range map[string]string{
				"test_input_required_result_elicitation":     "Hello, Ada!",
				"test_input_required_result_sampling":        "The model says: Paris",
				"test_input_required_result_list_roots":      "Roots: file:///work",
				"test_input_required_result_multi_round":     "Ada likes blue",
				"test_input_required_result_multiple_inputs": "Paris, Ada! Roots: file:///work",
				"test_input_required_result_request_state":   stateOK,
				"test_input_required_result_tampered_state":  stateOK,
				"test_input_required_result_capabilities":    "inputs answered: 3",
				"test_missing_capability":                    "The model says: Paris",
				"test_streaming_elicitation":                 "Hello, Ada!",
			} {
				res, err := c.CallTool(ctx, tool, nil)
				if err != nil || res.Text() != want {
					t.Errorf("%s: %v %v, want %q", tool, res, err, want)
				}
			}
			p, err := c.GetPrompt(ctx, "test_input_required_result_prompt", nil)
			if err != nil || len(p.Messages) != 1 || !strings.Contains(p.Messages[0].Content.Text, "tea") {
				t.Errorf("prompt: %+v %v", p, err)
			}
		})
	}
}

// TestMRTRFixturesWithoutSampling: in the stateless revision a client without sampling is
// refused test_missing_capability with -32021, and test_input_required_result_capabilities asks
// it only what it declared.
func TestMRTRFixturesWithoutSampling(t *testing.T) {
	srv := mrtrServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := mcptest.NewClient(t, srv, mrtrUserSays)
	_, err := c.CallTool(ctx, "test_missing_capability", nil)
	var rpc *mcpclient.RPCError
	if !errors.As(err, &rpc) || rpc.Code != mcpclient.RPCMissingRequiredClientCapability {
		t.Errorf("test_missing_capability: %v, want -32021", err)
	}
	res, err := c.CallTool(ctx, "test_input_required_result_capabilities", nil)
	if err != nil || res.Text() != "inputs answered: 1" {
		t.Errorf("test_input_required_result_capabilities: %v %v, want only the elicitation asked", res, err)
	}
}
