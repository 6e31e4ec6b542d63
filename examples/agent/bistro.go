package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// A bistro is the server side of the demo: a booking service whose tools the agent calls. Its
// bookings are the side effect that must happen once.
type bistro struct {
	mu       sync.Mutex
	bookings []reservation
}

type reservation struct {
	Ref        string `json:"ref"`
	Restaurant string `json:"restaurant"`
	Party      int    `json:"party"`
	Time       string `json:"time"`
	Name       string `json:"name"`
}

func (r reservation) String() string {
	return fmt.Sprintf("%s: %s, %d at %s, under %s", r.Ref, r.Restaurant, r.Party, r.Time, r.Name)
}

// table is what the agent asks for: the arguments of book_table and of find_reservations.
type table struct {
	Restaurant string `json:"restaurant,omitempty"`
	Party      int    `json:"party,omitempty"`
	Time       string `json:"time,omitempty"`
}

var restaurants = []struct{ name, about string }{
	{"Chez Marcel", "bistro, lively, live music on weekends"},
	{"Trattoria Sole", "Italian, quiet, tables by the river"},
	{"Kantine", "canteen, loud, long shared tables"},
}

// demoServer is the server of the demo, over either transport: the bistro's tools, no receipts
// (a repeated request runs again), and the reply to the first book_table lost after the table
// was booked.
func demoServer(b *bistro) []mcptest.Option {
	return append(b.tools(),
		mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "book_table"}))
}

// tools are the bistro's tools, and its name.
func (b *bistro) tools() []mcptest.Option {
	yes := true
	readOnly := &mcpclient.ToolAnnotations{ReadOnlyHint: &yes}
	return []mcptest.Option{
		mcptest.WithServerInfo(mcpclient.Implementation{Name: "bistro", Version: "1.0"}),
		mcptest.WithTool(mcpclient.Tool{
			Name:        "search_restaurants",
			Description: "Finds restaurants with a free table and has the client's model pick the best match for the guest's wish.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"wish":{"type":"string"},"party":{"type":"integer"},"time":{"type":"string"}},"required":["wish","party","time"]}`),
			Annotations: readOnly,
		}, b.search),
		mcptest.WithTool(mcpclient.Tool{
			Name:        "book_table",
			Description: "Books a table, under a name the user gives. Each call books one.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"restaurant":{"type":"string"},"party":{"type":"integer"},"time":{"type":"string"}},"required":["restaurant","party","time"]}`),
		}, b.book),
		mcptest.WithTool(mcpclient.Tool{
			Name:        "find_reservations",
			Description: "Lists the reservations that match the given restaurant, party and time (all of them when none is given).",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"restaurant":{"type":"string"},"party":{"type":"integer"},"time":{"type":"string"}}}`),
			Annotations: readOnly,
		}, b.find),
	}
}

// search reports its progress restaurant by restaurant, then asks the client's model
// (sampling/createMessage) which restaurant suits the wish.
func (b *bistro) search(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	var args struct {
		Wish  string `json:"wish"`
		Party int    `json:"party"`
		Time  string `json:"time"`
	}
	if err := json.Unmarshal(call.Arguments, &args); err != nil {
		return nil, err
	}
	var options strings.Builder
	names := make([]string, 0, len(restaurants))
	for i, r := range restaurants {
		call.Progress(float64(i+1), float64(len(restaurants)), "checked "+r.name)
		fmt.Fprintf(&options, "\n- %s: %s", r.name, r.about)
		names = append(names, r.name)
	}
	raw, err := call.Request(ctx, "sampling/createMessage", mcpclient.CreateMessageParams{
		SystemPrompt: "You choose restaurants. Answer with the restaurant's name only.",
		Messages: []mcpclient.SamplingMessage{{Role: "user", Content: mcpclient.SamplingContent{mcpclient.TextContent(
			fmt.Sprintf("The guest wishes: %s. Which of these suits them best?%s", args.Wish, options.String()))}}},
		MaxTokens: 20,
	})
	if err != nil {
		return nil, fmt.Errorf("asking the client's model: %w", err)
	}
	var sample mcpclient.CreateMessageResult
	if err := json.Unmarshal(raw, &sample); err != nil || len(sample.Content) == 0 {
		return nil, fmt.Errorf("the client's model answered %s", raw)
	}
	pick := strings.TrimSpace(sample.Content[0].Text)
	known := false
	for _, n := range names {
		known = known || n == pick
	}
	if !known {
		return nil, fmt.Errorf("the client's model picked %q, which is not on the list", pick)
	}
	structured, _ := json.Marshal(map[string]any{"options": names, "pick": pick})
	return &mcpclient.CallToolResult{
		Content: []mcpclient.Content{mcpclient.TextContent(fmt.Sprintf("%d restaurants have a table for %d at %s; the best match for %q is %s",
			len(names), args.Party, args.Time, args.Wish, pick))},
		StructuredContent: structured,
	}, nil
}

// book asks the user (elicitation/create) for the name to book under, then books the table.
func (b *bistro) book(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	var t table
	if err := json.Unmarshal(call.Arguments, &t); err != nil {
		return nil, err
	}
	call.Progress(1, 3, "checking the table")
	raw, err := call.Request(ctx, "elicitation/create", mcpclient.ElicitParams{
		Message:         fmt.Sprintf("Book %s for %d at %s: under which name?", t.Restaurant, t.Party, t.Time),
		RequestedSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","title":"Name"}},"required":["name"]}`),
	})
	if err != nil {
		return nil, fmt.Errorf("asking the user: %w", err)
	}
	var answer mcpclient.ElicitResult
	if err := json.Unmarshal(raw, &answer); err != nil {
		return nil, err
	}
	name, _ := answer.Content["name"].(string)
	if answer.Action != mcpclient.ElicitAccept || name == "" {
		return nil, errors.New("the user gave no name: nothing was booked")
	}
	call.Progress(2, 3, "holding the table")
	b.mu.Lock()
	r := reservation{Ref: fmt.Sprintf("B-%d", len(b.bookings)+1), Restaurant: t.Restaurant, Party: t.Party, Time: t.Time, Name: name}
	b.bookings = append(b.bookings, r)
	b.mu.Unlock()
	call.Progress(3, 3, "confirmed")
	structured, _ := json.Marshal(r)
	return &mcpclient.CallToolResult{
		Content:           []mcpclient.Content{mcpclient.TextContent("booked " + r.String())},
		StructuredContent: structured,
	}, nil
}

// find lists the reservations that match its arguments.
func (b *bistro) find(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	var t table
	if len(call.Arguments) > 0 {
		if err := json.Unmarshal(call.Arguments, &t); err != nil {
			return nil, err
		}
	}
	b.mu.Lock()
	found := []reservation{}
	for _, r := range b.bookings {
		if (t.Restaurant == "" || t.Restaurant == r.Restaurant) && (t.Party == 0 || t.Party == r.Party) && (t.Time == "" || t.Time == r.Time) {
			found = append(found, r)
		}
	}
	b.mu.Unlock()
	lines := []string{"no reservation"}
	if len(found) > 0 {
		lines = lines[:0]
	}
	for _, r := range found {
		lines = append(lines, r.String())
	}
	structured, _ := json.Marshal(map[string]any{"reservations": found})
	return &mcpclient.CallToolResult{
		Content:           []mcpclient.Content{mcpclient.TextContent(strings.Join(lines, "\n"))},
		StructuredContent: structured,
	}, nil
}
