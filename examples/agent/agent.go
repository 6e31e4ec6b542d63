package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/northstar-mcp/mcpclient"
)

// maxSteps bounds the tool calls of one task: a model that never answers must not loop forever.
const maxSteps = 8

// An agent carries out a task: it offers the server's tools to its model, calls the tool the
// model picks, hands the result back, and so on until the model answers.
type agent struct {
	c     *mcpclient.Client
	model *model
	out   *printer
	// callOpts go with every tool call: a progress handler, and an idle timeout, since an
	// answer that never comes (a lost reply on stdio) must not hold the agent forever.
	callOpts []mcpclient.CallOption
	// inspectors say, for each tool with side effects, how to find out with read-only tools
	// whether a call of it took effect.
	inspectors map[string]inspector
}

// run runs the model's steps until it answers.
func (a *agent) run(ctx context.Context) (string, error) {
	tools, err := mcpclient.Collect(a.c.Tools(ctx))
	if err != nil {
		return "", err
	}
	var history []turn
	for range maxSteps {
		s := a.model.next(tools, history)
		if s.Tool == "" {
			return s.Answer, nil
		}
		a.out.printf("model calls %s %s", s.Tool, jsonText(s.Args))
		res, err := a.call(ctx, s.Tool, s.Args)
		if err != nil {
			return "", err
		}
		a.out.printf("  result: %s", res.Text())
		history = append(history, turn{Tool: s.Tool, Args: s.Args, Result: res})
	}
	return "", fmt.Errorf("the model gave no answer within %d tool calls", maxSteps)
}

// call calls a tool for the model. A call whose outcome is unknown is settled (see settle)
// before anything else: it is never simply made again, since it may have run.
func (a *agent) call(ctx context.Context, name string, args map[string]any) (*mcpclient.CallToolResult, error) {
	res, err := a.c.CallTool(ctx, name, args, a.callOpts...)
	var e *mcpclient.Error
	if errors.Is(err, mcpclient.ErrOutcomeUnknown) && errors.As(err, &e) {
		a.out.printf("  %v", err)
		return a.settle(ctx, e, name, args)
	}
	return res, err
}

// An inspector finds out, with read-only tools, whether a call of a tool with side effects
// with args took effect, and says what it looked at and what it found.
type inspector func(ctx context.Context, c mcpclient.Caller, args map[string]any) (took bool, in mcpclient.Inspection, err error)

// settle finds out what became of a call whose outcome is unknown, e being its error, and goes
// on from there:
//   - it inspects the server's state first, with a read-only tool;
//   - the call took effect and the server holds its reply in a receipt: Resend sends the same
//     request (same id, same bytes) to read that reply, and nothing runs twice;
//   - it took effect and nothing holds its reply: what the inspection found is the outcome,
//     since a resend would run the call again;
//   - it left no trace: SupersedeToolCall sends it anew under a new id, with the inspection
//     recorded as the reason.
//
// "No trace" is evidence only once the lost request can no longer run: over stdio a call ends by
// its idle timeout while the server may still be working on it. A real agent looks again after
// the server's own time limit, or asks a service that tags each booking with a key of the
// caller's, before it supersedes.
func (a *agent) settle(ctx context.Context, e *mcpclient.Error, name string, args map[string]any) (*mcpclient.CallToolResult, error) {
	inspect, ok := a.inspectors[name]
	if !ok {
		return nil, fmt.Errorf("%s may or may not have run, and the agent has no way to find out: %w", name, e)
	}
	took, inspection, err := inspect(ctx, a.c, args)
	if err != nil {
		return nil, fmt.Errorf("%s may or may not have run, and looking failed: %w (after %w)", name, err, e)
	}
	a.out.printf("  inspected: %s", inspection)
	// A receipt lives in the server session that took the request: one that was lost took the
	// receipt with it.
	receipts := a.c.Receipts() != "" && !errors.Is(e, mcpclient.ErrSessionLost)
	switch {
	case took && receipts:
		a.out.printf("  it ran, and the server keeps receipts: resend request %s to read its reply", e.Request.ID())
		resp, err := a.c.Resend(ctx, e.Request)
		if err != nil {
			return nil, err
		}
		var res mcpclient.CallToolResult
		if err := resp.Decode(&res); err != nil {
			return nil, err
		}
		return &res, nil
	case took:
		a.out.printf("  it ran, and nothing holds its reply: what was found is the outcome (a resend would run it again)")
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(inspection.Found)}}, nil
	}
	a.out.printf("  it did not run: supersede request %s with a new request", e.Request.ID())
	var resp mcpclient.Response
	res, err := a.c.SupersedeToolCall(ctx, e.Request, inspection, args, append(a.callOpts, mcpclient.WithResponse(&resp))...)
	if err != nil {
		return nil, err
	}
	a.out.printf("  request %s, which superseded %s, answered", resp.Request.ID(), resp.Request.Supersedes())
	return res, nil
}

// findReservation is book_table's inspector: it looks for the reservation with the read-only
// find_reservations tool.
func findReservation(ctx context.Context, c mcpclient.Caller, args map[string]any) (bool, mcpclient.Inspection, error) {
	res, err := c.CallTool(ctx, "find_reservations", args)
	if err != nil {
		return false, mcpclient.Inspection{}, err
	}
	var found struct {
		Reservations []reservation `json:"reservations"`
	}
	if res.IsError || json.Unmarshal(res.StructuredContent, &found) != nil {
		return false, mcpclient.Inspection{}, fmt.Errorf("find_reservations answered %q", res.Text())
	}
	in := mcpclient.Inspection{Checked: "find_reservations " + jsonText(args), Found: "no reservation"}
	if len(found.Reservations) > 0 {
		in.Found = "reservation " + found.Reservations[0].String()
	}
	return len(found.Reservations) > 0, in, nil
}

// printer writes the demo's lines, which the client's handlers write too, from their own
// goroutines.
type printer struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format+"\n", args...)
}

func jsonText(v any) string {
	b, _ := json.Marshal(v) // maps of plain values
	return string(b)
}
