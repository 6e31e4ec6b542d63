package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/examples/integration"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// hotel is the server's state: the bookings made.
type hotel struct {
	mu       sync.Mutex
	bookings map[string]string // "room night" -> ref
}

type stay struct {
	Room  string `json:"room"`
	Night string `json:"night"`
}

func (h *hotel) reserve(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	var s stay
	if err := json.Unmarshal(call.Arguments, &s); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ref := fmt.Sprintf("booked %s on %s, ref R-%d", s.Room, s.Night, len(h.bookings)+1)
	h.bookings[s.Room+" "+s.Night] = ref
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(ref)}}, nil
}

func (h *hotel) find(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	var s stay
	if err := json.Unmarshal(call.Arguments, &s); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(h.bookings[s.Room+" "+s.Night])}}, nil
}

func newHotel(t *testing.T, mode mcptest.Mode, fault mcptest.FaultKind) (*hotel, *mcptest.HTTPServer) {
	h := &hotel{bookings: map[string]string{}}
	yes := true
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithMode(mode),
		mcptest.WithTool(mcpclient.Tool{Name: "reserve"}, h.reserve),
		mcptest.WithTool(mcpclient.Tool{Name: "find_booking", Annotations: &mcpclient.ToolAnnotations{ReadOnlyHint: &yes}}, h.find))
	srv.Inject(mcptest.Fault{Kind: fault, Tool: "reserve"})
	return h, srv
}

// Whatever happens to the first request, the room is booked exactly once, and Book says so.
func TestBookOnceWhateverHappensToTheReply(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mode  mcptest.Mode
		fault mcptest.FaultKind
		ref   string
		calls int // of reserve, as the server saw them executed
	}{
		{"receipts, reply lost: the resend reads the receipt", mcptest.ModeReceipts, mcptest.DropAfterExecution, "R-1", 1},
		{"no receipts, reply lost: found by inspection", mcptest.ModeNone, mcptest.DropAfterExecution, "R-1", 1},
		{"no receipts, request lost: superseded", mcptest.ModeNone, mcptest.DropBeforeExecution, "R-1", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, srv := newHotel(t, tc.mode, tc.fault)
			c := mcptest.NewClient(t, srv)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got, err := integration.Book(ctx, c, "12", "2026-12-24")
			if err != nil {
				t.Fatal(err)
			}
			if want := "booked 12 on 2026-12-24, ref " + tc.ref; got != want || len(h.bookings) != 1 || srv.Executions("reserve") != tc.calls {
				t.Errorf("Book = %q with %d bookings and %d executions, want %q, one booking", got, len(h.bookings), srv.Executions("reserve"), want)
			}
		})
	}
}
