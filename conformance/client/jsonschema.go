package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/northstar-mcp/mcpclient"
)

// echoSchema lists the tools and hands the inputSchema of json_schema_2020_12_tool, as the
// client received it, back to json_schema_echo, for the suite to see what the client kept of
// the JSON Schema 2020-12 keywords.
func echoSchema(ctx context.Context, c *mcpclient.Client) error {
	tools, err := c.CachedTools(ctx)
	if err != nil {
		return err
	}
	for _, tool := range tools {
		if tool.Name != "json_schema_2020_12_tool" {
			continue
		}
		res, err := c.CallTool(ctx, "json_schema_echo", map[string]json.RawMessage{"schema": tool.InputSchema})
		if err != nil {
			return fmt.Errorf("json_schema_echo: %w", err)
		}
		fmt.Fprintln(os.Stderr, "json_schema_echo:", res.Text())
		return nil
	}
	return fmt.Errorf("the server listed no json_schema_2020_12_tool")
}
