// Package extcall is how the packages that speak an extension over the client's public API
// (tasks, skills, events) send one request: the same request path as the client's own calls,
// and the same protocol error for an answer that does not decode.
package extcall

import (
	"context"
	"fmt"

	"github.com/northstar-mcp/mcpclient"
)

// Call sends method with params through c and decodes the result into out, when out is not nil.
// An answer that does not decode fails with mcpclient.CodeProtocol, naming the request, as the
// client's own calls do; any other error is Do's.
func Call(ctx context.Context, c mcpclient.Caller, method string, params, out any, opts []mcpclient.CallOption) (*mcpclient.Response, error) {
	req, err := c.NewRequest(method, params, opts...)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(ctx, req)
	if err != nil {
		return nil, err
	}
	if out == nil {
		return resp, nil
	}
	if err := resp.Decode(out); err != nil {
		return nil, &mcpclient.Error{Code: mcpclient.CodeProtocol, Request: resp.Request, Attempts: resp.Attempts,
			Err: fmt.Errorf("decoding the %s result: %w", method, err)}
	}
	return resp, nil
}
