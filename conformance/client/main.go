// Command client is the client the MCP conformance suite drives: it is started with the
// scenario's server URL as its last argument and MCP_CONFORMANCE_SCENARIO in its environment,
// does what the scenario expects of a client, and exits 0 when that went well.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/transport"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: client [args] SERVER_URL")
		os.Exit(2)
	}
	if err := run(os.Getenv("MCP_CONFORMANCE_SCENARIO"), os.Args[len(os.Args)-1]); err != nil {
		fmt.Fprintln(os.Stderr, "conformance client:", err)
		os.Exit(1)
	}
}

func run(scenario, url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts := []mcpclient.Option{
		mcpclient.WithLogger(log),
		mcpclient.WithClientInfo(mcpclient.Implementation{Name: "mcpclient-conformance", Version: mcpclient.Version}),
	}
	if scenario == "elicitation-sep1034-client-defaults" || scenario == "sep-2322-client-request-state" {
		// Accept with nothing filled in: the client completes the form from the schema's
		// defaults (SEP-1034).
		opts = append(opts, mcpclient.WithElicitationHandler(func(context.Context, *mcpclient.ElicitParams) (*mcpclient.ElicitResult, error) {
			return &mcpclient.ElicitResult{Action: mcpclient.ElicitAccept}, nil
		}))
	}
	auth, err := authorizer(scenario, log)
	if err != nil {
		return err
	}
	tr := &transport.HTTP{URL: url, Logger: log}
	if auth != nil {
		tr.Authorizer = auth
	}
	opts = append(opts, skillsOptions(scenario)...)
	c, err := mcpclient.Connect(ctx, tr, opts...)
	if err != nil {
		return err
	}
	defer c.Close()

	switch scenario {
	case "tools_call":
		if _, err := c.CachedTools(ctx); err != nil {
			return err
		}
		res, err := c.CallTool(ctx, "add_numbers", map[string]int{"a": 5, "b": 3})
		if err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "add_numbers:", res.Text())
	case "sse-retry":
		if _, err := c.CachedTools(ctx); err != nil {
			return err
		}
		res, err := c.CallTool(ctx, "test_reconnection", map[string]any{})
		if err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "test_reconnection:", res.Text())
	case "sep-2322-client-request-state":
		// Multi round-trip calls: the library answers input_required rounds by itself.
		if _, err := c.CachedTools(ctx); err != nil {
			return err
		}
		for _, tool := range []string{"test_mrtr_echo_state", "test_mrtr_unrelated", "test_mrtr_no_state", "test_mrtr_no_result_type"} {
			res, err := c.CallTool(ctx, tool, map[string]any{})
			if err != nil {
				return fmt.Errorf("%s: %w", tool, err)
			}
			fmt.Fprintln(os.Stderr, tool+":", res.Text())
		}
	case "http-standard-headers":
		return touchEverything(ctx, c)
	case "json-schema-2020-12-preservation":
		return echoSchema(ctx, c)
	case "sep-2640-client-no-prefetch", "sep-2640-client-verify-digest", "sep-2640-client-verify-size", "sep-2640-client-verify-frontmatter":
		return runSkills(ctx, c, scenario)
	case "http-custom-headers":
		var scenarioContext struct {
			ToolCalls []struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"toolCalls"`
		}
		if err := json.Unmarshal([]byte(os.Getenv("MCP_CONFORMANCE_CONTEXT")), &scenarioContext); err != nil {
			return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
		if _, err := c.CachedTools(ctx); err != nil {
			return err
		}
		for _, call := range scenarioContext.ToolCalls {
			if _, err := c.CallTool(ctx, call.Name, call.Arguments); err != nil {
				return fmt.Errorf("%s: %w", call.Name, err)
			}
		}
	case "http-invalid-tool-headers":
		// The library leaves out the tools whose headers are declared wrong.
		tools, err := c.CachedTools(ctx)
		if err != nil {
			return err
		}
		for _, tool := range tools {
			if _, err := c.CallTool(ctx, tool.Name, map[string]any{"region": "us-west1"}); err != nil {
				return fmt.Errorf("%s: %w", tool.Name, err)
			}
		}
	case "elicitation-sep1034-client-defaults":
		if _, err := c.CachedTools(ctx); err != nil {
			return err
		}
		res, err := c.CallTool(ctx, "test_client_elicitation_defaults", map[string]any{})
		if err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "elicitation:", res.Text())
	default:
		// The lifecycle alone: initialize, list what the server offers, shut down; and where
		// the server protects one, a tool call, each authorized.
		tools, err := c.CachedTools(ctx)
		if err != nil {
			return err
		}
		for _, tool := range tools {
			if tool.Name == "test-tool" {
				if _, err := c.CallTool(ctx, tool.Name, map[string]any{}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// touchEverything lists tools, resources and prompts and uses one of each, so that every
// request kind goes over the wire once.
func touchEverything(ctx context.Context, c *mcpclient.Client) error {
	tools, err := c.CachedTools(ctx)
	if err != nil {
		return err
	}
	for _, tool := range tools {
		if _, err := c.CallTool(ctx, tool.Name, map[string]any{}); err != nil {
			return fmt.Errorf("%s: %w", tool.Name, err)
		}
	}
	resources, err := mcpclient.Collect(c.Resources(ctx))
	if err != nil {
		return err
	}
	if len(resources) > 0 {
		if _, err := c.ReadResource(ctx, resources[0].URI); err != nil {
			return err
		}
	}
	prompts, err := mcpclient.Collect(c.Prompts(ctx))
	if err != nil {
		return err
	}
	for _, p := range prompts {
		if _, err := c.GetPrompt(ctx, p.Name, nil); err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
	}
	return nil
}
