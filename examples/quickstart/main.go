// Quickstart shows what mcpclient does when the answer to a side-effecting tool call is lost.
//
// It starts an in-memory mcptest server whose "reserve" tool books a room, and makes the server
// drop the reply after the first execution. The client resends the same bytes under the same id;
// the server's receipt answers without booking twice. Then it shows a hard signal (other content
// under a used id), and a call whose every attempt is lost: after inspecting the hotel, the caller
// books the same room again with Supersede, a new id that names the lost one.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// hotel is the side effect: the bookings the tool made.
type hotel struct {
	mu       sync.Mutex
	bookings []string
}

func (h *hotel) reserve(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	var args struct {
		Room  string `json:"room"`
		Night string `json:"night"`
	}
	if err := json.Unmarshal(call.Arguments, &args); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bookings = append(h.bookings, args.Room+" on "+args.Night)
	ref := fmt.Sprintf("R-%03d", len(h.bookings))
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{
		mcpclient.TextContent(fmt.Sprintf("booked room %s for %s, ref %s", args.Room, args.Night, ref)),
	}}, nil
}

func (h *hotel) booked(room, night string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Contains(h.bookings, room+" on "+night)
}

func (h *hotel) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.bookings)
}

func run(ctx context.Context, w io.Writer) error {
	h := &hotel{}
	srv := mcptest.NewServer(
		mcptest.WithTool(mcpclient.Tool{Name: "reserve", Description: "Book a room for a night."}, h.reserve),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "reserve"}),
	)
	defer srv.Close()

	c, err := mcpclient.Connect(ctx, srv.Transport())
	if err != nil {
		return err
	}
	defer c.Close()
	scope := c.Receipts()
	fmt.Fprintf(w, "connected to %s, protocol %s, receipts scope %q\n\n", c.ServerInfo().Name, c.ProtocolVersion(), scope)

	// 1. A reply lost after the tool ran: the client resends the frozen request.
	fmt.Fprintln(w, "1. reserve room 12; the server drops the reply after booking")
	req, err := c.NewRequest("tools/call", mcpclient.CallToolParams{
		Name:      "reserve",
		Arguments: map[string]string{"room": "12", "night": "2026-12-24"},
	})
	if err != nil {
		return err
	}
	resp, err := c.Do(ctx, req)
	if err != nil {
		return err
	}
	var res mcpclient.CallToolResult
	if err := resp.Decode(&res); err != nil {
		return err
	}
	frames := srv.Received(req.ID())
	entry, _ := c.Ledger().Lookup(req.ID())
	fmt.Fprintf(w, "   request id   %s\n", req.ID())
	fmt.Fprintf(w, "   attempts     %d (ledger: %s after %d)\n", resp.Attempts, entry.State, entry.Attempts)
	fmt.Fprintf(w, "   same bytes   %v (%d frames received, fingerprint %.16s…)\n", allEqual(frames), len(frames), req.Fingerprint())
	fmt.Fprintf(w, "   executions   %d\n", srv.ExecutionsOf("reserve", req.ID()))
	fmt.Fprintf(w, "   result       %s\n\n", res.Text())
	if srv.ExecutionsOf("reserve", req.ID()) != 1 || !allEqual(frames) || len(frames) < 2 {
		return errors.New("expected one execution under a byte-identical resend")
	}

	// 2. A hard signal: another client puts other content under the same id.
	fmt.Fprintln(w, "2. a second client sends room 14 under the same id")
	other, err := mcpclient.Connect(ctx, srv.Transport())
	if err != nil {
		return err
	}
	defer other.Close()
	_, err = other.CallTool(ctx, "reserve", map[string]string{"room": "14", "night": "2026-12-24"},
		mcpclient.WithRequestID(req.ID()))
	var e *mcpclient.Error
	if !errors.Is(err, mcpclient.ErrRequestIDReused) || !errors.As(err, &e) {
		return fmt.Errorf("expected ErrRequestIDReused, got %v", err)
	}
	fmt.Fprintf(w, "   error        %v\n", err)
	fmt.Fprintf(w, "   from server  %v, attempts %d, bookings still %d\n\n", mcpclient.IsWireError(err), e.Attempts, h.count())

	// 3. An outcome the client cannot learn: every attempt is lost before an answer, so after
	// its attempts the client stops with ErrOutcomeUnknown and hands back the frozen request.
	fmt.Fprintln(w, "3. reserve room 15; every attempt is lost on the way")
	srv.Inject(mcptest.Fault{Kind: mcptest.DropBeforeExecution, Tool: "reserve", Times: -1})
	_, err = c.CallTool(ctx, "reserve", map[string]string{"room": "15", "night": "2026-12-25"})
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.As(err, &e) {
		return fmt.Errorf("expected ErrOutcomeUnknown, got %v", err)
	}
	srv.ClearFaults()
	lost := e.Request
	fmt.Fprintf(w, "   error        %v\n", err)

	// Changing the request without looking first is refused.
	_, err = c.Supersede(ctx, lost, mcpclient.Inspection{}, nil)
	fmt.Fprintf(w, "   supersede without inspection: %v\n", err)

	// The caller inspects the hotel and finds no booking for room 15: the lost request never ran.
	// Only then does it book room 15 again, deliberately, under a new id that names the old one.
	if h.booked("15", "2026-12-25") {
		return errors.New("room 15 was booked although every attempt was lost before the tool ran")
	}
	found := fmt.Sprintf("no booking for room 15 on 2026-12-25 among %d", h.count())
	fmt.Fprintf(w, "   inspection   %s\n", found)
	fmt.Fprintln(w, "   re-book room 15 under a new id, recording the inspection")
	resp, err = c.Supersede(ctx, lost, mcpclient.Inspection{Checked: "the hotel's bookings for 2026-12-25", Found: found},
		mcpclient.CallToolParams{Name: "reserve", Arguments: map[string]string{"room": "15", "night": "2026-12-25"}})
	if err != nil {
		return err
	}
	if err := resp.Decode(&res); err != nil {
		return err
	}
	old, _ := c.Ledger().Lookup(lost.ID())
	replacement, _ := c.Ledger().Lookup(resp.Request.ID())
	fmt.Fprintf(w, "   new id       %s, supersedes %s\n", resp.Request.ID(), replacement.Supersedes)
	fmt.Fprintf(w, "   old entry    %s, superseded by %s\n", old.State, old.SupersededBy)
	fmt.Fprintf(w, "   wire params  %s\n", resp.Request.Params())
	fmt.Fprintf(w, "   result       %s\n", res.Text())
	if !h.booked("15", "2026-12-25") || h.count() != 2 {
		return fmt.Errorf("expected room 12 and room 15 booked once each, got %d bookings", h.count())
	}
	fmt.Fprintf(w, "\nbookings: %d (one per request that ran)\n", h.count())
	return nil
}

func allEqual(frames [][]byte) bool {
	for _, f := range frames[1:] {
		if !bytes.Equal(f, frames[0]) {
			return false
		}
	}
	return len(frames) > 0
}
