// Plugin shows a plugin around mcpclient (plugin.go): a token chosen per user, a policy that
// denies tools before anything is sent, a log and counts of every attempt of every request, and
// the server's tools offered to a model in the shape function-calling APIs take.
//
// It runs against an embedded mcptest server over Streamable HTTP that refuses the first call
// with 503 and Retry-After, so that the log shows a retry.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "plugin:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	search := func(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("3 results for " + string(call.Arguments))}}, nil
	}
	srv := mcptest.NewHTTPServer(
		mcptest.WithTool(mcpclient.Tool{Name: "search", Description: "Searches the catalog.", InputSchema: json.RawMessage(`{"type":"object"}`)}, search),
		mcptest.WithTool(mcpclient.Tool{Name: "delete_all", Description: "Deletes everything."}, search))
	defer srv.Close()
	srv.Inject(mcptest.Fault{Kind: mcptest.Fail, Tool: "search"})

	p := &Plugin{
		Tokens: map[string]string{"ada": "t-ada", "bob": "t-bob"},
		Deny:   map[string]bool{"delete_all": true},
		Log:    slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{ReplaceAttr: dropTime})),
	}
	c, err := mcpclient.Connect(ctx, srv.Transport(), append(p.Options(), mcpclient.WithRetryPolicy(mcptest.FastRetryPolicy()))...)
	if err != nil {
		return err
	}
	defer c.Close()

	res, err := c.CallTool(context.WithValue(ctx, User{}, "ada"), "search", map[string]string{"q": "chairs"})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "search:", res.Text())
	_, err = c.CallTool(context.WithValue(ctx, User{}, "bob"), "delete_all", nil)
	fmt.Fprintln(out, "delete_all:", err, "| denied:", errors.Is(err, ErrDenied), "| executions:", srv.Executions("delete_all"))

	for _, r := range srv.Requests() {
		if r.RPCMethod == "tools/call" {
			fmt.Fprintln(out, "the server saw tools/call with", r.Header.Get("Authorization"))
		}
	}
	fns, err := p.Functions(ctx, c)
	if err != nil {
		return err
	}
	offered, _ := json.Marshal(fns)
	fmt.Fprintln(out, "offered to the model:", string(offered))
	fmt.Fprintln(out, "attempts by outcome:", p.Attempts())
	return nil
}

// dropTime keeps the log's lines the same from run to run.
func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey || a.Key == "took" {
		return slog.Attr{}
	}
	return a
}
