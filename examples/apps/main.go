// Apps shows a Go host of MCP Apps (package apps): it declares the extension, offers the model
// only the tools meant for it, reads the view of a tool with its sandbox settings, and carries a
// call the view makes through the client, ledger included.
//
// It runs offline against an embedded mcptest server with a weather tool whose view is a
// ui:// resource, and an app-only refresh tool that the view calls.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/apps"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

const viewURI = "ui://weather/dashboard"

const viewHTML = `<!DOCTYPE html><html><body><div id="temp">…</div>
<script>/* the view asks the host for tools/call refresh over postMessage */</script></body></html>`

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "apps:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	weather := func(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("Oslo: 4°C, drizzle")}}, nil
	}
	refresh := func(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("refreshed " + string(call.Arguments))}}, nil
	}
	object := json.RawMessage(`{"type":"object"}`)
	srv := mcptest.NewServer(
		mcptest.WithTool(mcpclient.Tool{Name: "get_weather", Description: "Current weather for a city.", InputSchema: object,
			Meta: json.RawMessage(`{"ui":{"resourceUri":"` + viewURI + `"}}`)}, weather),
		mcptest.WithTool(mcpclient.Tool{Name: "refresh_dashboard", Description: "Refreshes the dashboard's data.", InputSchema: object,
			Meta: json.RawMessage(`{"ui":{"resourceUri":"` + viewURI + `","visibility":["app"]}}`)}, refresh),
		mcptest.WithResource(mcpclient.Resource{URI: viewURI, Name: "weather_dashboard", MIMEType: apps.MIMEType},
			func(_ context.Context, uri string) ([]mcpclient.ResourceContents, error) {
				return []mcpclient.ResourceContents{{URI: uri, MIMEType: apps.MIMEType, Text: viewHTML,
					Meta: json.RawMessage(`{"ui":{"csp":{"connectDomains":["https://api.weather.example"]},"prefersBorder":true}}`)}}, nil
			}))
	defer srv.Close()

	c, err := mcpclient.Connect(ctx, srv.Transport(), apps.Declare())
	if err != nil {
		return err
	}
	defer c.Close()

	tools, err := c.CachedTools(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "server lists %d tools; the model is offered %v, the view may call %v\n",
		len(tools), names(apps.ModelTools(tools)), names(apps.AppTools(tools)))

	for r, err := range c.Resources(ctx) {
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "resource %s (%s)\n", r.URI, r.MIMEType)
	}

	// The model called get_weather: show its view beside the result.
	for _, t := range tools {
		ui, ok := apps.UIOf(t)
		if !ok || t.Name != "get_weather" {
			continue
		}
		if err := ui.Validate(); err != nil {
			return err
		}
		res, err := c.CallTool(ctx, t.Name, map[string]string{"city": "Oslo"})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "model called %s: %s\n", t.Name, res.Content[0].Text)
		view, err := apps.ReadUI(ctx, c, ui.ResourceURI)
		if err != nil {
			return err
		}
		border := view.UI.PrefersBorder != nil && *view.UI.PrefersBorder
		fmt.Fprintf(out, "view %s: %d bytes of HTML, connect-src %s, border %v\n",
			view.URI, len(view.HTML), strings.Join(view.UI.CSP.ConnectDomains, " "), border)
	}

	// The view asks for tools/call: the host carries what the view may call, and refuses the rest.
	id := mcpclient.StringID("view-refresh-1")
	res, err := apps.CallFromApp(ctx, c, "refresh_dashboard", map[string]string{"city": "Oslo"}, mcpclient.WithRequestID(id))
	if err != nil {
		return err
	}
	_, inLedger := c.Ledger().Lookup(id)
	fmt.Fprintf(out, "view called refresh_dashboard: %s (in the ledger: %v)\n", res.Content[0].Text, inLedger)
	if _, err := apps.CallFromApp(ctx, c, "delete_everything", nil); err != nil {
		fmt.Fprintf(out, "view called delete_everything: refused: %v\n", err)
	} else {
		return fmt.Errorf("a tool the server does not list was called")
	}
	return nil
}

func names(tools []*mcpclient.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return out
}
