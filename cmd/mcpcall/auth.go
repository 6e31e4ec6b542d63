package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/northstar-mcp/mcpclient/internal/redact"

	"github.com/northstar-mcp/mcpclient/oauth"
)

// openBrowser opens the authorization URL; tests replace it with a client that follows the
// authorization server's redirect as a browser would.
var openBrowser = oauth.OpenBrowser

// authorizer is the -auth Authorizer: the authorization code flow through the user's browser,
// back to a listener on 127.0.0.1, and the tokens in a 0600 file, so that the next run needs
// no browser while the refresh token lasts.
func (o *options) authorizer(term *terminal) (*oauth.Authorizer, error) {
	path := o.tokenFile
	if path == "" {
		p, err := oauth.DefaultFileStorePath()
		if err != nil {
			return nil, fmt.Errorf("-auth: %w (give -token-file)", err)
		}
		path = p
	}
	redirect := &oauth.Loopback{}
	redirect.Open = func(ctx context.Context, url string) error {
		// The terminal is the user's alone, and the user needs the URL whole; the
		// terminal escaping applies all the same.
		fmt.Fprintf(term, "mcpcall: open this URL to authorize: %s\n", url)
		// The opener's command line is readable by every local user, so it gets the
		// one-time start URL, which shows no state or PKCE challenge. Without a browser
		// here (an SSH session), the user opens the printed URL elsewhere: the wait goes on.
		if err := openBrowser(ctx, redirect.StartURL()); err != nil {
			// An opener's error may quote the URLs it followed, the callback with the
			// authorization code among them.
			fmt.Fprintf(term, "mcpcall: no browser opened (%v); waiting for the sign-in\n", redactedError(err))
		}
		return nil
	}
	return oauth.New(oauth.Config{
		Grant:  oauth.AuthorizationCode{Redirect: redirect, ClientName: "mcpcall"},
		Store:  oauth.NewFileStore(path),
		Issuer: o.authIssuer,
		// The MCP server names its authorization server, and the user is about to sign in
		// there: they see whom they trust before the browser opens. The issuer comes from the
		// server, so it is escaped like anything else the server says.
		ConfirmIssuer: func(_ context.Context, issuer string) error {
			term.printf("mcpcall: the server's authorization server is %s", issuer)
			return nil
		},
	})
}

// redactedError returns the text of err with the URL a *url.Error in its chain names masked
// (its userinfo, query values and fragment), wherever the text quotes it.
func redactedError(err error) string {
	text := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) && ue.URL != "" {
		masked := redact.URL(ue.URL)
		// url.Error quotes the URL as %q does.
		text = strings.ReplaceAll(text, strconv.Quote(ue.URL), strconv.Quote(masked))
		text = strings.ReplaceAll(text, ue.URL, masked)
	}
	return text
}
