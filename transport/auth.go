package transport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// An Authorizer gives the requests of the HTTP and SSE transports their credentials and obtains
// new ones when the server refuses a request for want of them. Package oauth implements it.
// Implementations must be safe for concurrent use: concurrent calls are refused together, and
// should share one authorization rather than start one each.
type Authorizer interface {
	// Authorize sets the credentials of one request, its Authorization header (and a DPoP
	// proof, for sender-constrained tokens). It is called for every request sent, a resend
	// included. An error fails the request as NotDelivered.
	Authorize(ctx context.Context, req *http.Request) error
	// Reauthorize is told that the server answered req with resp, a 401, or a 403 with a
	// WWW-Authenticate challenge, before running anything. It returns nil when new
	// credentials are in place and the request is to be sent again, or an error when they
	// cannot be had (the user abandoned the authorization, a refresh token was revoked): the
	// request then fails as NotDelivered with that error, which should wrap ErrUnauthorized.
	// resp's body is closed by the caller once Reauthorize returns.
	Reauthorize(ctx context.Context, req *http.Request, resp *http.Response) error
}

// ErrUnauthorized reports a request the server refused for its credentials (HTTP 401, or 403
// with a WWW-Authenticate challenge) and that the transport could not authorize: no Authorizer,
// one that failed, or a server that kept refusing new credentials. The request did not run.
var ErrUnauthorized = errors.New("transport: unauthorized")

// maxAuthorizations bounds how many times one request is authorized anew and sent again: a
// server that refuses every new token (a scope it will never grant, say) costs a bounded number
// of round trips, never a loop.
const maxAuthorizations = 3

// challenged reports whether resp refuses its request for want of credentials: a 401, or a 403
// that says what it wants (insufficient_scope). A 403 without a challenge (an Origin the
// server refuses) is no matter of credentials.
func challenged(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return true
	case http.StatusForbidden:
		return resp.Header.Get("WWW-Authenticate") != ""
	}
	return false
}

// authorize sets req's credentials when there is an Authorizer.
func authorize(ctx context.Context, a Authorizer, req *http.Request) error {
	if a == nil {
		return nil
	}
	return a.Authorize(ctx, req)
}

// reauthorize answers a refusal of req for its credentials: nil when the request is to be sent
// again, the error that ends it otherwise. rounds is how many times the request was
// reauthorized before. It closes resp's body.
func reauthorize(ctx context.Context, a Authorizer, req *http.Request, resp *http.Response, rounds int) error {
	defer drain(resp.Body)
	status := &StatusError{StatusCode: resp.StatusCode}
	switch {
	case a == nil:
		status.Body = readStart(resp.Body)
		return fmt.Errorf("%w: %w", ErrUnauthorized, status)
	case rounds >= maxAuthorizations:
		status.Body = readStart(resp.Body)
		return fmt.Errorf("%w: still refused after %d authorizations: %w", ErrUnauthorized, rounds, status)
	}
	if err := a.Reauthorize(ctx, req, resp); err != nil {
		if errors.Is(err, ErrUnauthorized) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrUnauthorized, err)
	}
	return nil
}

// doAuthorized sends the request newReq makes, authorized, and while the server refuses it for
// its credentials and the Authorizer obtains new ones, makes and sends it again. It returns the
// last response, or the error that ended the exchange.
func doAuthorized(ctx context.Context, client *http.Client, a Authorizer, newReq func() (*http.Request, error)) (*http.Response, error) {
	for rounds := 0; ; rounds++ {
		req, err := newReq()
		if err != nil {
			return nil, err
		}
		if err := authorize(ctx, a, req); err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil || !challenged(resp) {
			return resp, err
		}
		if err := reauthorize(ctx, a, req, resp, rounds); err != nil {
			return nil, err
		}
	}
}
