// Package integration is what an application builds on mcpclient when a tool call has side
// effects: Book reserves a room once, whatever happens to the reply. Its test
// (booking_test.go) is the kind of integration test users write with mcptest: a server with
// receipts or without, a reply lost after the booking was made, or a request lost before.
package integration

import (
	"context"
	"errors"
	"fmt"

	"github.com/northstar-mcp/mcpclient"
)

// Book reserves room for night with the server's "reserve" tool and returns its answer.
//
// When the reply is lost and the client cannot learn the outcome by itself (no receipts), it
// does not call again blindly: it looks for the booking with the read-only "find_booking" tool.
// A booking found is the outcome (nothing more is sent); none found is the evidence for
// replacing the lost request with a new one, under a new id, recorded as its replacement.
func Book(ctx context.Context, c mcpclient.Caller, room, night string) (string, error) {
	args := map[string]string{"room": room, "night": night}
	res, err := c.CallTool(ctx, "reserve", args)
	if err == nil {
		return res.Text(), nil
	}
	var e *mcpclient.Error
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.As(err, &e) {
		return "", err
	}
	found, ferr := c.CallTool(ctx, "find_booking", args)
	if ferr != nil {
		return "", fmt.Errorf("the booking's outcome is unknown, and looking for it failed: %w (after %w)", ferr, err)
	}
	if found.Text() != "" {
		return found.Text(), nil // the lost request ran: that booking is the answer
	}
	inspection := mcpclient.Inspection{Checked: "find_booking " + room + " " + night, Found: "no booking"}
	res, err = c.SupersedeToolCall(ctx, e.Request, inspection, args)
	if err != nil {
		return "", err
	}
	return res.Text(), nil
}
