package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// AuthorizationCode obtains tokens for a user through their browser: the OAuth authorization
// code flow with PKCE (S256), the resource indicator and the iss check (RFC 9207).
//
// The client registers as the MCP authorization specification prefers: with a client ID
// metadata document where the authorization server accepts them and ClientMetadataURL is
// set, else as the pre-registered client ClientID, else by dynamic client registration
// (RFC 7591). A registration is kept with the tokens (see TokenStore), per authorization
// server: a server that moves to another authorization server gets a new one.
type AuthorizationCode struct {
	// Redirect takes the user to the authorization server and back: Loopback for a CLI or a
	// desktop agent, Headless for tests.
	Redirect RedirectHandler
	// ClientID and ClientSecret name a client registered beforehand with the authorization
	// server (leave them empty to register dynamically).
	ClientID     string
	ClientSecret string
	// ClientMetadataURL is the https URL of the client's metadata document, used as its
	// client_id where the authorization server supports client ID metadata documents.
	ClientMetadataURL string
	// ClientName is the name shown to the user at dynamic registration.
	ClientName string
	// ApplicationType is the OpenID application type sent at dynamic registration: "native"
	// (the default: CLIs, desktop apps, loopback redirects) or "web".
	ApplicationType string
	// NoOfflineAccess leaves out the offline_access scope, which otherwise is asked for where
	// the authorization server lists it, so that a refresh token spares the user the browser.
	NoOfflineAccess bool
}

// Errors of the authorization code flow.
var (
	// ErrAuthorizationDenied: the authorization server redirected back with an error (the user
	// refused consent, say); the error code and description follow in the message.
	ErrAuthorizationDenied = errors.New("oauth: authorization denied")
	// ErrStateMismatch: the redirect carried another state than the request sent: not the
	// answer to this authorization (a forged or replayed redirect).
	ErrStateMismatch = errors.New("oauth: state mismatch")
	// ErrNoRegistration: the client has no way to register with the authorization server (no
	// client id configured, no metadata document it accepts, no registration endpoint).
	ErrNoRegistration = errors.New("oauth: no way to register the client")
)

// configured is true for a pre-registered client: its id and secret are a registration with one
// authorization server. A client registering dynamically, or named by its metadata document
// (public by design), brings nothing made for another server.
func (g AuthorizationCode) configured() bool { return g.ClientID != "" || g.ClientSecret != "" }

func (g AuthorizationCode) obtain(ctx context.Context, env *grantEnv) (*Credentials, error) {
	if g.Redirect == nil {
		return nil, errors.New("oauth: AuthorizationCode needs a Redirect handler")
	}
	meta := env.meta
	if !supports(meta.CodeChallengeMethodsSupported, "S256") {
		return nil, fmt.Errorf("%w (%s advertises %q)", ErrNoPKCE, meta.Issuer, meta.CodeChallengeMethodsSupported)
	}
	redirectURI, err := g.Redirect.RedirectURI(ctx)
	if err != nil {
		return nil, err
	}
	client, err := g.register(ctx, env, redirectURI)
	if err != nil {
		return nil, err
	}
	scopes := env.scopes
	if !g.NoOfflineAccess && supports(meta.ScopesSupported, "offline_access") && !slices.Contains(scopes, "offline_access") {
		scopes = append(slices.Clip(scopes), "offline_access")
	}
	auth := clientAuth{id: client.ID, secret: client.Secret, method: client.AuthMethod}
	if auth.method == "" {
		auth.method = pickAuthMethod(meta, client.Secret != "")
	}
	if auth.method == "private_key_jwt" {
		return nil, errors.New("oauth: private_key_jwt is not supported for the authorization code grant")
	}
	cfg := &oauth2.Config{
		ClientID:     auth.id,
		ClientSecret: auth.secretFor(),
		Endpoint:     oauth2.Endpoint{AuthURL: meta.AuthorizationEndpoint, TokenURL: meta.TokenEndpoint, AuthStyle: auth.style()},
		RedirectURL:  redirectURI,
		Scopes:       scopes,
	}
	// state and the verifier are made for this authorization and die with it: a redirect
	// replayed later matches nothing.
	state, verifier := randomString(32), oauth2.GenerateVerifier()
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier)}
	if env.resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", env.resource))
	}
	back, err := g.Redirect.Authorize(ctx, cfg.AuthCodeURL(state, opts...))
	if err != nil {
		return nil, fmt.Errorf("oauth: authorization not completed: %w", err)
	}
	if e := back.Get("error"); e != "" {
		return nil, fmt.Errorf("%w: %s %s", ErrAuthorizationDenied, e, back.Get("error_description"))
	}
	if back.Get("state") != state {
		return nil, ErrStateMismatch
	}
	// RFC 9207: the redirect names who answered. It must be the issuer asked, compared as
	// strings; a server that promises the parameter must send it.
	iss, sent := back["iss"]
	switch {
	case sent && (len(iss) != 1 || iss[0] != meta.Issuer):
		return nil, fmt.Errorf("%w: the authorization response came from %q, not %q", ErrIssuerMismatch, iss, meta.Issuer)
	case !sent && meta.AuthorizationResponseIssParameterSupported:
		return nil, fmt.Errorf("%w: %s promised an iss parameter and sent none", ErrIssuerMismatch, meta.Issuer)
	}
	code := back.Get("code")
	if code == "" {
		return nil, errors.New("oauth: the authorization response carries no code")
	}
	exchange := []oauth2.AuthCodeOption{oauth2.VerifierOption(verifier)}
	if env.resource != "" {
		exchange = append(exchange, oauth2.SetAuthURLParam("resource", env.resource))
	}
	tok, err := cfg.Exchange(env.tokenContext(ctx), code, exchange...)
	if err != nil {
		return nil, grantError(err)
	}
	creds := env.credentials(tok, client)
	if len(creds.Scopes) == 0 {
		creds.Scopes = scopes
	}
	return creds, nil
}

// register returns the client's registration with the authorization server of env: the one
// kept from before if it is that server's, else one made now.
func (g AuthorizationCode) register(ctx context.Context, env *grantEnv, redirectURI string) (*ClientInfo, error) {
	meta := env.meta
	if p := env.prior; p != nil && p.Client != nil && p.Issuer == meta.Issuer &&
		(p.Client.SecretExpiresAt.IsZero() || time.Now().Before(p.Client.SecretExpiresAt)) &&
		(p.Client.RedirectURI == "" || p.Client.RedirectURI == redirectURI) {
		return p.Client, nil
	}
	switch {
	case g.ClientMetadataURL != "" && meta.ClientIDMetadataDocumentSupported:
		return &ClientInfo{ID: g.ClientMetadataURL, AuthMethod: "none"}, nil
	case g.ClientID != "":
		return &ClientInfo{ID: g.ClientID, Secret: g.ClientSecret}, nil
	case meta.RegistrationEndpoint != "":
		return g.registerDynamically(ctx, env, redirectURI)
	}
	return nil, fmt.Errorf("%w with %s", ErrNoRegistration, meta.Issuer)
}

// registerDynamically registers a public client (RFC 7591).
func (g AuthorizationCode) registerDynamically(ctx context.Context, env *grantEnv, redirectURI string) (*ClientInfo, error) {
	appType := g.ApplicationType
	if appType == "" {
		appType = "native"
	}
	name := g.ClientName
	if name == "" {
		name = "mcpclient"
	}
	doc := map[string]any{
		"client_name":                name,
		"redirect_uris":              []string{redirectURI},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
		"application_type":           appType,
	}
	if len(env.scopes) > 0 {
		doc["scope"] = strings.Join(env.scopes, " ")
	}
	body, _ := json.Marshal(doc)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, env.meta.RegistrationEndpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := env.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("oauth: registration: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		var e struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		decodeJSON(resp, &e)
		return nil, fmt.Errorf("oauth: registration refused: HTTP %d %s %s", resp.StatusCode, e.Error, e.Description)
	}
	var r struct {
		ClientID        string `json:"client_id"`
		ClientSecret    string `json:"client_secret"`
		AuthMethod      string `json:"token_endpoint_auth_method"`
		SecretExpiresAt int64  `json:"client_secret_expires_at"`
	}
	if err := decodeJSON(resp, &r); err != nil {
		return nil, fmt.Errorf("oauth: registration response: %w", err)
	}
	if r.ClientID == "" {
		return nil, errors.New("oauth: registration response carries no client_id")
	}
	info := &ClientInfo{ID: r.ClientID, Secret: r.ClientSecret, AuthMethod: r.AuthMethod, RedirectURI: redirectURI}
	if r.SecretExpiresAt > 0 {
		info.SecretExpiresAt = time.Unix(r.SecretExpiresAt, 0)
	}
	return info, nil
}
