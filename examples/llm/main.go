// Llm shows an MCP server's tools used by a model: the tools are offered to Claude through the
// Anthropic Go SDK, and the model's tool calls are run on the MCP server with mcpclient and
// their results handed back, until the model answers in text.
//
// The MCP server is an in-memory mcptest server with a hotel's front desk: "reserve" books a
// room (a side effect), "list_bookings" reads the bookings. Three questions are put to the model:
// an ordinary booking; a booking whose reply the server loses once, which the client recovers
// without the model noticing; and a booking whose every attempt is lost, which reaches the model
// as an outcome it must check before trying again.
//
// With ANTHROPIC_API_KEY set, the model is Claude (ANTHROPIC_BASE_URL and ANTHROPIC_MODEL are
// honoured). Without it, the example runs offline against a fake Messages API on httptest that
// answers each question with a planned tool call, then with text repeating the tool's result.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "llm:", err)
		os.Exit(1)
	}
}

// The questions put to the model, and the tool calls the offline model answers them with.
var (
	bookRoom12 = "Book room 12 for the night of 2026-12-24."
	bookRoom14 = "Book room 14 for the night of 2026-12-24."
	bookRoom15 = "Book room 15 for the night of 2026-12-25."

	offlinePlans = map[string]plannedCall{
		bookRoom12: {Tool: "reserve", Input: json.RawMessage(`{"room":"12","night":"2026-12-24"}`)},
		bookRoom14: {Tool: "reserve", Input: json.RawMessage(`{"room":"14","night":"2026-12-24"}`)},
		bookRoom15: {Tool: "reserve", Input: json.RawMessage(`{"room":"15","night":"2026-12-25"}`)},
	}
)

func run(ctx context.Context, out io.Writer) error {
	desk := &frontDesk{}
	srv := mcptest.NewServer(desk.tools()...)
	defer srv.Close()
	// OnRetry shows the attempts the client makes on its own: the model sees none of them.
	retry := mcpclient.DefaultRetryPolicy()
	retry.OnRetry = func(attempt int, cause error, delay time.Duration) {
		fmt.Fprintf(out, "client: attempt %d failed (%v); trying again in %v\n", attempt, cause, delay.Round(time.Millisecond))
	}
	c, err := mcpclient.Connect(ctx, srv.Transport(), mcpclient.WithRetryPolicy(retry))
	if err != nil {
		return err
	}
	defer c.Close()

	llm, model, closeModel := modelClient(out)
	defer closeModel()
	a := &agent{llm: llm, mcp: c, model: model, maxTurns: 8, log: out}

	steps := []struct {
		title    string
		fault    *mcptest.Fault
		question string
	}{
		{"an ordinary booking", nil, bookRoom12},
		{"the server loses the reply once; the client resends and the server's receipt answers",
			&mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "reserve"}, bookRoom14},
		{"every attempt is lost on the way: the outcome is unknown, and the model is told so",
			&mcptest.Fault{Kind: mcptest.DropBeforeExecution, Tool: "reserve", Times: -1}, bookRoom15},
	}
	for i, s := range steps {
		fmt.Fprintf(out, "\n%d. %s\n", i+1, s.title)
		if s.fault != nil {
			srv.Inject(*s.fault)
		}
		ran := srv.Executions("reserve")
		_, err := a.ask(ctx, s.question)
		srv.ClearFaults()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "server: reserve ran %d time(s) for this question; bookings: %s\n", srv.Executions("reserve")-ran, desk.list())
	}
	return nil
}

// modelClient returns the client of the model the example talks to, the model's name, and a
// func that releases what the client needs. Without ANTHROPIC_API_KEY the model is a fakeModel
// on httptest, and nothing from the environment is read.
func modelClient(out io.Writer) (anthropic.Client, anthropic.Model, func()) {
	if key := os.Getenv("ANTHROPIC_API_KEY"); key != "" {
		model := anthropic.Model(os.Getenv("ANTHROPIC_MODEL"))
		if model == "" {
			model = anthropic.ModelClaudeSonnet5_5
		}
		fmt.Fprintf(out, "model: %s through the Anthropic API\n", model)
		return anthropic.NewClient(), model, func() {}
	}
	fake := httptest.NewServer(&fakeModel{plans: offlinePlans})
	fmt.Fprintf(out, "model: a fake Messages API at %s (ANTHROPIC_API_KEY is not set)\n", fake.URL)
	llm := anthropic.NewClient(
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(fake.URL),
		option.WithAPIKey("offline"),
		option.WithHTTPClient(fake.Client()),
	)
	return llm, "fake-model", fake.Close
}

// A frontDesk is the hotel behind the MCP server's tools.
type frontDesk struct {
	mu       sync.Mutex
	bookings []string
}

var readOnly = true

func (d *frontDesk) tools() []mcptest.Option {
	return []mcptest.Option{
		mcptest.WithTool(mcpclient.Tool{
			Name:        "reserve",
			Description: "Book a hotel room for one night. Returns the booking's reference.",
			InputSchema: json.RawMessage(`{
				"type": "object",
				"properties": {
					"room": {"type": "string", "description": "The room number."},
					"night": {"type": "string", "description": "The night, as YYYY-MM-DD."}
				},
				"required": ["room", "night"]
			}`),
		}, d.reserve),
		mcptest.WithTool(mcpclient.Tool{
			Name:        "list_bookings",
			Description: "List the hotel's bookings.",
			InputSchema: json.RawMessage(`{"type": "object", "properties": {}}`),
			Annotations: &mcpclient.ToolAnnotations{ReadOnlyHint: &readOnly},
		}, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(d.list())}}, nil
		}),
	}
}

func (d *frontDesk) reserve(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	var args struct {
		Room  string `json:"room"`
		Night string `json:"night"`
	}
	if err := json.Unmarshal(call.Arguments, &args); err != nil || args.Room == "" || args.Night == "" {
		return &mcpclient.CallToolResult{IsError: true, Content: []mcpclient.Content{
			mcpclient.TextContent(`reserve needs a "room" and a "night"`),
		}}, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, b := range d.bookings {
		if strings.HasPrefix(b, "room "+args.Room+" on "+args.Night+" ") {
			return &mcpclient.CallToolResult{IsError: true, Content: []mcpclient.Content{
				mcpclient.TextContent("room " + args.Room + " is already booked for " + args.Night),
			}}, nil
		}
	}
	ref := fmt.Sprintf("R-%03d", len(d.bookings)+1)
	d.bookings = append(d.bookings, fmt.Sprintf("room %s on %s (%s)", args.Room, args.Night, ref))
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{
		mcpclient.TextContent(fmt.Sprintf("booked room %s for %s, ref %s", args.Room, args.Night, ref)),
	}}, nil
}

func (d *frontDesk) list() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.bookings) == 0 {
		return "none"
	}
	return strings.Join(d.bookings, "; ")
}
