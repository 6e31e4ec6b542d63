// Command client is the client the MCP conformance suite drives: it is started with the
// scenario's server URL as its last argument and MCP_CONFORMANCE_SCENARIO in its environment,
// does what the scenario expects of a client, and exits 0 when that went well.
package main

import (
	"context"
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
	if scenario == "elicitation-sep1034-client-defaults" {
		// Accept with nothing filled in: the client completes the form from the schema's
		// defaults (SEP-1034).
		opts = append(opts, mcpclient.WithElicitationHandler(func(context.Context, *mcpclient.ElicitParams) (*mcpclient.ElicitResult, error) {
			return &mcpclient.ElicitResult{Action: mcpclient.ElicitAccept}, nil
		}))
	}
	c, err := mcpclient.Connect(ctx, &transport.HTTP{URL: url, Logger: log}, opts...)
	if err != nil {
		return err
	}
	defer c.Close()

	switch scenario {
	case "tools_call":
		if _, err := c.ListTools(ctx); err != nil {
			return err
		}
		res, err := c.CallTool(ctx, "add_numbers", map[string]int{"a": 5, "b": 3})
		if err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "add_numbers:", res.Text())
	case "sse-retry":
		if _, err := c.ListTools(ctx); err != nil {
			return err
		}
		res, err := c.CallTool(ctx, "test_reconnection", map[string]any{})
		if err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "test_reconnection:", res.Text())
	case "elicitation-sep1034-client-defaults":
		if _, err := c.ListTools(ctx); err != nil {
			return err
		}
		res, err := c.CallTool(ctx, "test_client_elicitation_defaults", map[string]any{})
		if err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "elicitation:", res.Text())
	default:
		// The lifecycle alone: initialize, list what the server offers, shut down.
		if _, err := c.ListTools(ctx); err != nil {
			return err
		}
	}
	return nil
}
