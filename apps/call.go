package apps

import (
	"context"
	"fmt"

	"github.com/northstar-mcp/mcpclient"
)

// CallFromApp carries a view's tools/call to the server the view came from: c is the client of
// that server, never another's, since a view may call only its own server's tools. It refuses,
// before sending, with ErrNotForApp (CodeInvalidArgument), a tool whose visibility does not
// include "app" and a tool the server does not list (the client's cached listing, see
// mcpclient.Client.CachedTools, which it lists when it holds none). Otherwise it is
// c.CallTool(ctx, name, args, opts...): the same request id, ledger entry, receipts and retry
// rules as any call of the host's, and the same answers after ErrOutcomeUnknown (Resend,
// Supersede). Pin the id with mcpclient.WithRequestID to record it before anything is sent.
func CallFromApp(ctx context.Context, c mcpclient.Caller, name string, args any, opts ...mcpclient.CallOption) (*mcpclient.CallToolResult, error) {
	if err := CheckAppCall(ctx, c, name); err != nil {
		return nil, err
	}
	return c.CallTool(ctx, name, args, opts...)
}

// CheckAppCall returns nil if a view of c's server may call the tool name, and the refusal
// CallFromApp would return if not; for a host that builds the request itself (NewRequest,
// then Do).
func CheckAppCall(ctx context.Context, c mcpclient.Caller, name string) error {
	tools, err := c.CachedTools(ctx)
	if err != nil {
		return err
	}
	for _, t := range tools {
		if t == nil || t.Name != name {
			continue
		}
		ui, _ := UIOf(t)
		if ui.CallableByApp() {
			return nil
		}
		why := fmt.Sprintf("its visibility is %v", ui.Visibility)
		if err := ui.Validate(); err != nil {
			why = err.Error()
		}
		return &mcpclient.Error{Code: mcpclient.CodeInvalidArgument, Err: fmt.Errorf("%w: tool %s: %s", ErrNotForApp, name, why)}
	}
	return &mcpclient.Error{Code: mcpclient.CodeInvalidArgument, Err: fmt.Errorf("%w: the server does not list tool %s", ErrNotForApp, name)}
}
