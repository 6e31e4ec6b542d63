// Package oauth authorizes an MCP client with the servers that require it, as the MCP
// authorization specification describes: it finds the server's authorization server from the
// protected resource metadata (RFC 9728), reads that server's metadata (RFC 8414 or OpenID
// discovery), registers the client (a client ID metadata document, a pre-registered client, or
// dynamic registration, RFC 7591), and obtains tokens bound to the MCP server (resource
// indicators, RFC 8707) by the grant the caller chose: the authorization code flow with PKCE for
// a user at a browser, client credentials for a service acting as itself, a JWT bearer assertion
// for a workload with an identity token, or an enterprise identity provider's ID-JAG.
//
// An [Authorizer] plugs into transport.HTTP and transport.SSE (their Authorizer field). The
// transport asks it for credentials before each request and, when the server answers 401 or 403
// before running anything, lets it authorize and sends the same bytes again: the MCP request
// keeps its id, and the server sees it run once.
//
// Configured credentials (a client secret or key, a workload's assertion, an enterprise
// identity, a pre-registered client) are bound to one authorization server: Config.Issuer when
// set, else the first one a token was obtained from, kept with the stored credentials. An MCP
// server that later names another gets an [IssuerChangedError], and nothing is sent there, so
// that a compromised or impersonated MCP server cannot collect the credentials (RFC 9700 §4.4).
// The first contact is trusted as the MCP server says unless the issuer is pinned: set
// Config.Issuer to the authorization server you expect, or have Config.ConfirmIssuer show it.
//
// Discovery fetches the URLs the server names: its resource metadata, its authorization
// server's metadata, and the endpoints those name. A client inside a network talking to a server
// on the internet lets that server make it request internal addresses (server-side request
// forgery); [Config.RefusePrivateAddresses] refuses loopback, private and link-local addresses
// for those requests, checked when connecting.
//
// [Loopback] keeps the state and PKCE challenge of an authorization off the browser opener's
// command line, which every local user can read: the browser gets a one-time local start URL.
package oauth

import (
	"context"
	"net/url"
	"time"

	"golang.org/x/oauth2"
)

// Credentials is what a [TokenStore] keeps for one MCP server: the token, and the client
// registration it was obtained with, so that a restarted program neither registers again nor
// sends the user back to the browser while a refresh token still works.
type Credentials struct {
	// Token is the latest token: its access token, the refresh token if one was issued, and
	// its expiry.
	Token *oauth2.Token `json:"token,omitempty"`
	// Scopes are the scopes granted (or, when the server did not say, asked for).
	Scopes []string `json:"scopes,omitempty"`
	// Issuer is the authorization server that issued the token and registered the client. A
	// token from another issuer than the one the MCP server names now is not used, and the
	// grant's configured credentials are bound to this issuer unless Config.Issuer pins one.
	Issuer string `json:"issuer,omitempty"`
	// Resource is the resource indicator the token was issued for (RFC 8707), which a refresh
	// names again.
	Resource string `json:"resource,omitempty"`
	// Client is the registration with Issuer, if the client registered.
	Client *ClientInfo `json:"client,omitempty"`
}

// ClientInfo is a client's registration with an authorization server.
type ClientInfo struct {
	ID     string `json:"client_id"`
	Secret string `json:"client_secret,omitempty"`
	// AuthMethod is how the client authenticates at the token endpoint: "client_secret_basic",
	// "client_secret_post", "private_key_jwt" or "none".
	AuthMethod string `json:"token_endpoint_auth_method,omitempty"`
	// SecretExpiresAt is when a registered secret stops working; zero: never.
	SecretExpiresAt time.Time `json:"client_secret_expires_at,omitzero"`
	// RedirectURI is the one redirect URI a dynamically registered client was registered with:
	// the authorization server accepts no other, so a client whose redirect URI changed (a
	// loopback listener on another port) registers again.
	RedirectURI string `json:"redirect_uri,omitempty"`
}

// A TokenStore keeps credentials between requests and, for a durable store, between runs.
// Implementations must be safe for concurrent use. The key is the MCP server's resource
// identifier (its canonical URL): credentials are never looked up for another server.
type TokenStore interface {
	// Load returns the credentials saved under key, or (nil, nil) when there are none.
	Load(ctx context.Context, key string) (*Credentials, error)
	// Save replaces the credentials under key; nil deletes them.
	Save(ctx context.Context, key string, c *Credentials) error
}

// A RedirectHandler takes the user through the authorization server's login and consent: it
// sends them to an authorization URL and waits until the authorization server redirects back.
type RedirectHandler interface {
	// RedirectURI is the redirect URI the client registers and sends; it must not change
	// between calls.
	RedirectURI(ctx context.Context) (string, error)
	// Authorize shows the user authURL and returns the query parameters of the redirect that
	// ends the authorization (code, state and iss, or error and error_description). It returns
	// an error if the user did not come back before ctx ended.
	Authorize(ctx context.Context, authURL string) (url.Values, error)
}
