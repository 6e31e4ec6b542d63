package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Resend sends req again: the same bytes under the same id. Use it to re-read the outcome of a
// request that ended with ErrOutcomeUnknown or a conflict, after inspecting the server's state.
// A server that keeps receipts answers with the reply it holds, without running the request
// again; one that keeps none may run it again, which is why Resend is the caller's decision and
// never the client's.
//
// Resend is Do by another name, so that code that re-reads says so; it retries under the same
// policy.
func (c *Client) Resend(ctx context.Context, req *Request) (*Response, error) {
	return c.Do(ctx, req)
}

// An Inspection records what a caller looked at, after an uncertain or refused request, before
// deciding to send different content: the evidence that replacing the request is deliberate.
type Inspection struct {
	// Checked says what was looked at: a query, a resource read, a person asked.
	Checked string
	// Found says what it showed about the earlier request's effect.
	Found string
}

func (i Inspection) String() string { return "checked " + i.Checked + "; found " + i.Found }

// Supersede replaces prev by a new request under a new id, and sends it.
//
// Use Supersede, not Resend, when the content must change, or when the inspection showed that
// prev did not run and must run again under a new id. It refuses to work without an inspection
// (ErrInspectionRequired) and while prev is still in flight (ErrRequestInFlight): moving to a new
// id merely to get past an error is what it is there to prevent.
//
// The new request has prev's method and params (nil keeps prev's), and carries
// _meta.supersedes = prev's id on the wire. The ledger keeps prev's entry and records which id
// replaced it and why. Note that the server will run the new request: it is a new request.
//
// For a tools/call, params are the call's params, the tool's name included; to change only the
// tool's arguments, use SupersedeToolCall.
func (c *Client) Supersede(ctx context.Context, prev *Request, inspection Inspection, params any, opts ...CallOption) (*Response, error) {
	next, err := c.newSupersedingRequest(prev, inspection, params, opts)
	if err != nil {
		return nil, returned(err)
	}
	if testHookSupersedeBuilt != nil {
		testHookSupersedeBuilt()
	}
	return c.Do(ctx, next)
}

// testHookSupersedeBuilt, set only by tests, runs between the building of a superseding request
// and its sending.
var testHookSupersedeBuilt func()

// SupersedeToolCall replaces the tool call prev by a call of the same tool with args (anything
// that marshals to a JSON object, or nil), under a new id, and sends it: Supersede for the usual
// correction, new arguments for the same tool. The new call's params are the tool's name, args
// and _meta.supersedes; what else prev's params carried is not kept (use Supersede to write the
// params whole). It needs an inspection and refuses a prev still in flight, as Supersede does,
// and returns the result as CallTool does.
func (c *Client) SupersedeToolCall(ctx context.Context, prev *Request, inspection Inspection, args any, opts ...CallOption) (*CallToolResult, error) {
	if prev == nil || prev.owner != c {
		return nil, returned(&Error{Code: CodeInvalidArgument, Err: errors.New("the request to supersede was not made by this client")})
	}
	if prev.method != "tools/call" {
		return nil, returned(&Error{Code: CodeInvalidArgument, ID: prev.id, Request: prev,
			Err: fmt.Errorf("SupersedeToolCall replaces a tools/call, not a %s", prev.method)})
	}
	rawArgs, err := marshalParams(args)
	if err != nil {
		return nil, returned(&Error{Code: CodeInvalidArgument, ID: prev.id, Request: prev, Err: fmt.Errorf("arguments of tool %s: %w", prev.name, err)})
	}
	next, err := c.newSupersedingRequest(prev, inspection, encodeToolCall(prev.name, rawArgs), opts)
	if err != nil {
		return nil, returned(err)
	}
	return c.sendToolCall(ctx, next)
}

func (c *Client) newSupersedingRequest(prev *Request, inspection Inspection, params any, opts []CallOption) (*Request, error) {
	if prev == nil || prev.owner != c {
		return nil, &Error{Code: CodeInvalidArgument, Err: errors.New("the request to supersede was not made by this client")}
	}
	if inspection.Checked == "" || inspection.Found == "" {
		return nil, &Error{Code: CodeInvalidArgument, ID: prev.id, Request: prev, Err: ErrInspectionRequired}
	}
	if e, ok := c.ledger.Lookup(prev.id); ok && e.State == StatePending {
		return nil, &Error{Code: CodeRequestInFlight, ID: prev.id, Request: prev,
			Err: errors.New("the request is still in flight; wait for its outcome before superseding it")}
	}
	spec := prev.requestSpec // nil params keep prev's content, without what the client added to it
	if params != nil {
		var err error
		if spec, err = specOf(prev.method, params); err != nil {
			var e *Error
			errors.As(err, &e)
			e.ID, e.Request = prev.id, prev
			return nil, e
		}
	}
	spec.meta = map[string]json.RawMessage{"supersedes": json.RawMessage(prev.key)}
	spec.extra, spec.version = nil, ""
	if s := c.current(); s != nil && s.modern {
		spec.version = s.init.ProtocolVersion
	}
	spec.supersedes, spec.reason, spec.automatic = prev.id, inspection.String(), false
	return c.buildWith(spec, opts)
}
