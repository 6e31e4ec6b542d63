package oauth

import (
	"context"
	"crypto"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// A Grant is how an [Authorizer] obtains tokens: [AuthorizationCode] for a user at a browser,
// [ClientCredentials] for a service acting as itself, [JWTBearer] for a workload holding an
// identity token, [EnterpriseManaged] for a user signed in to an enterprise identity provider.
type Grant interface {
	// obtain gets a new token from the authorization server of env.
	obtain(ctx context.Context, env *grantEnv) (*Credentials, error)
	// configured reports whether obtain presents credentials configured for one authorization
	// server (a client secret or id, a key, an assertion, an identity), which no other may see.
	configured() bool
}

// grantEnv is what a grant works with: the authorization server, the resource, the scopes.
type grantEnv struct {
	meta     *ServerMetadata
	resource string   // the MCP server's resource identifier (RFC 8707)
	scopes   []string // asked for; none means the server's default
	prior    *Credentials
	client   *http.Client // for the authorization server; carries DPoP proofs when enabled
	a        *Authorizer
}

// tokenContext makes golang.org/x/oauth2 send its token requests with env's client.
func (env *grantEnv) tokenContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, env.client)
}

// ErrGrant reports a token request the authorization server refused; errors.As gives the
// *oauth2.RetrieveError with its error code (invalid_grant, invalid_scope, ...).
var ErrGrant = errors.New("oauth: the authorization server refused the token request")

func grantError(err error) error {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		return err
	}
	msg := ErrGrant.Error()
	if re.Response != nil {
		msg += fmt.Sprintf(": HTTP %d", re.Response.StatusCode)
	}
	if re.ErrorCode != "" {
		msg += fmt.Sprintf(": %q", re.ErrorCode)
	}
	if re.ErrorDescription != "" {
		msg += fmt.Sprintf(" %q", truncate(re.ErrorDescription, 200))
	}
	return &refusedGrant{msg: msg, re: re}
}

// refusedGrant is ErrGrant with the server's *oauth2.RetrieveError, whose own text quotes the
// response body, which a server may have filled with the request, secret included: the
// message keeps the status, the error code and its description, and nothing else.
type refusedGrant struct {
	msg string
	re  *oauth2.RetrieveError
}

func (e *refusedGrant) Error() string   { return e.msg }
func (e *refusedGrant) Unwrap() []error { return []error{ErrGrant, e.re} }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// clientAuth is how the client authenticates at the token endpoint.
type clientAuth struct {
	id, secret string
	method     string // client_secret_basic, client_secret_post, private_key_jwt, none
	key        crypto.Signer
	alg        string
}

// style is the oauth2 AuthStyle for the method; private_key_jwt and none send the client id
// in the body.
func (c clientAuth) style() oauth2.AuthStyle {
	if c.method == "client_secret_basic" {
		return oauth2.AuthStyleInHeader
	}
	return oauth2.AuthStyleInParams
}

// secretFor is the secret oauth2 sends: none for the methods that send none.
func (c clientAuth) secretFor() string {
	switch c.method {
	case "client_secret_basic", "client_secret_post":
		return c.secret
	}
	return ""
}

// assertionParams adds a private_key_jwt client assertion (RFC 7523 §2.2) to params.
func (c clientAuth) assertionParams(params url.Values, issuer string) error {
	if c.method != "private_key_jwt" {
		return nil
	}
	jwt, err := clientAssertion(c.key, c.alg, c.id, issuer)
	if err != nil {
		return err
	}
	params.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
	params.Set("client_assertion", jwt)
	return nil
}

// pickAuthMethod chooses how a client with (or without) a secret authenticates, among the
// methods the server supports; RFC 8414 makes client_secret_basic the default.
func pickAuthMethod(meta *ServerMetadata, hasSecret bool) string {
	if !hasSecret {
		return "none"
	}
	supported := meta.TokenEndpointAuthMethodsSupported
	if len(supported) == 0 || supports(supported, "client_secret_basic") {
		return "client_secret_basic"
	}
	if supports(supported, "client_secret_post") {
		return "client_secret_post"
	}
	return "client_secret_basic"
}

// tokenRequest sends a token request of any grant (params holds grant_type and the grant's
// own parameters), authenticated as auth, through golang.org/x/oauth2.
func (env *grantEnv) tokenRequest(ctx context.Context, auth clientAuth, params url.Values) (*oauth2.Token, error) {
	params = cloneValues(params)
	if env.resource != "" && params.Get("resource") == "" {
		params.Set("resource", env.resource)
	}
	if err := auth.assertionParams(params, env.meta.Issuer); err != nil {
		return nil, err
	}
	cfg := clientcredentials.Config{
		ClientID:       auth.id,
		ClientSecret:   auth.secretFor(),
		TokenURL:       env.meta.TokenEndpoint,
		Scopes:         env.scopes,
		EndpointParams: params,
		AuthStyle:      auth.style(),
	}
	if params.Get("grant_type") == "refresh_token" {
		cfg.Scopes = nil // a refresh keeps the grant's scopes
	}
	tok, err := cfg.Token(env.tokenContext(ctx))
	if err != nil {
		return nil, grantError(err)
	}
	return tok, nil
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v)+1)
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// credentials wraps a token the server issued for env into Credentials.
func (env *grantEnv) credentials(tok *oauth2.Token, client *ClientInfo) *Credentials {
	scopes := env.scopes
	if s, ok := tok.Extra("scope").(string); ok && s != "" {
		scopes = strings.Fields(s)
	}
	return &Credentials{Token: tok, Scopes: scopes, Issuer: env.meta.Issuer, Resource: env.resource, Client: client}
}

// randomString is n random bytes, base64url.
func randomString(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ClientCredentials obtains tokens for a service acting as itself (the OAuth client
// credentials grant): a server-side agent with no user at hand. It authenticates with a
// client secret (client_secret_basic, or client_secret_post where the server supports only
// that) or with a private key (private_key_jwt, RFC 7523).
type ClientCredentials struct {
	ClientID     string
	ClientSecret string
	// PrivateKey, instead of a secret, signs a client assertion; SigningAlgorithm is its JWS
	// algorithm (default: ES256 for a P-256 key, RS256 for RSA, EdDSA for Ed25519). Parse a PEM
	// file with ParsePrivateKey.
	PrivateKey       crypto.Signer
	SigningAlgorithm string
}

func (ClientCredentials) configured() bool { return true }

func (g ClientCredentials) obtain(ctx context.Context, env *grantEnv) (*Credentials, error) {
	if g.ClientID == "" {
		return nil, errors.New("oauth: ClientCredentials needs a ClientID")
	}
	auth := clientAuth{id: g.ClientID, secret: g.ClientSecret}
	switch {
	case g.PrivateKey != nil:
		auth.method, auth.key = "private_key_jwt", g.PrivateKey
		alg, err := signingAlgorithm(g.PrivateKey, g.SigningAlgorithm)
		if err != nil {
			return nil, err
		}
		auth.alg = alg
	default:
		auth.method = pickAuthMethod(env.meta, g.ClientSecret != "")
	}
	tok, err := env.tokenRequest(ctx, auth, url.Values{"grant_type": {"client_credentials"}})
	if err != nil {
		return nil, err
	}
	return env.credentials(tok, &ClientInfo{ID: g.ClientID, AuthMethod: auth.method}), nil
}

// JWTBearerGrantType is the grant type of a JWT bearer assertion (RFC 7523).
const JWTBearerGrantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// JWTBearer obtains tokens with a JWT the workload already holds (workload identity
// federation: a Kubernetes service account token, a cloud instance identity), as a JWT bearer
// assertion (RFC 7523). A refused assertion is reported, never retried with another grant.
type JWTBearer struct {
	// ClientID identifies the client, if the authorization server wants one.
	ClientID string
	// Assertion returns the JWT to present; it is called for every token request, so that a
	// rotated identity token is read fresh.
	Assertion func(ctx context.Context) (string, error)
}

// configured is true: the assertion is a bearer credential, which another authorization server
// could replay at the one it was made for.
func (JWTBearer) configured() bool { return true }

func (g JWTBearer) obtain(ctx context.Context, env *grantEnv) (*Credentials, error) {
	if g.Assertion == nil {
		return nil, errors.New("oauth: JWTBearer needs an Assertion")
	}
	assertion, err := g.Assertion(ctx)
	if err != nil {
		return nil, fmt.Errorf("oauth: the workload assertion: %w", err)
	}
	tok, err := env.tokenRequest(ctx, clientAuth{id: g.ClientID, method: "none"},
		url.Values{"grant_type": {JWTBearerGrantType}, "assertion": {assertion}})
	if err != nil {
		return nil, err
	}
	return env.credentials(tok, &ClientInfo{ID: g.ClientID, AuthMethod: "none"}), nil
}

// EnterpriseManaged obtains tokens for a user signed in to an enterprise identity provider,
// without a browser (Identity Assertion Authorization Grant): the user's ID token is exchanged
// at the identity provider for an ID-JAG (RFC 8693 token exchange), which the MCP server's
// authorization server takes as a JWT bearer assertion.
type EnterpriseManaged struct {
	// IDPTokenEndpoint is the identity provider's token endpoint, IDPClientID the client's id
	// there, IDPClientSecret its secret if it has one.
	IDPTokenEndpoint string
	IDPClientID      string
	IDPClientSecret  string
	// IDToken returns the user's ID token from the identity provider.
	IDToken func(ctx context.Context) (string, error)
	// ClientID and ClientSecret authenticate the client at the MCP server's authorization server.
	ClientID     string
	ClientSecret string
}

// Token types of the identity assertion grant.
const (
	tokenExchangeGrantType = "urn:ietf:params:oauth:grant-type:token-exchange"
	idJAGTokenType         = "urn:ietf:params:oauth:token-type:id-jag"
	idTokenType            = "urn:ietf:params:oauth:token-type:id_token"
)

// configured is true: besides the client's secret, the identity provider would mint an ID-JAG
// for whichever audience the MCP server named.
func (EnterpriseManaged) configured() bool { return true }

func (g EnterpriseManaged) obtain(ctx context.Context, env *grantEnv) (*Credentials, error) {
	if g.IDToken == nil || g.IDPTokenEndpoint == "" {
		return nil, errors.New("oauth: EnterpriseManaged needs IDPTokenEndpoint and IDToken")
	}
	if len(env.meta.GrantTypesSupported) > 0 && !supports(env.meta.GrantTypesSupported, JWTBearerGrantType) {
		return nil, fmt.Errorf("oauth: the authorization server %s does not take JWT bearer grants", env.meta.Issuer)
	}
	idToken, err := g.IDToken(ctx)
	if err != nil {
		return nil, fmt.Errorf("oauth: the ID token: %w", err)
	}
	// Step one, at the identity provider: the ID token for an ID-JAG naming the authorization
	// server and the resource.
	idp := &grantEnv{meta: &ServerMetadata{Issuer: g.IDPTokenEndpoint, TokenEndpoint: g.IDPTokenEndpoint}, resource: env.resource, scopes: env.scopes, client: env.client}
	jag, err := idp.tokenRequest(ctx, clientAuth{id: g.IDPClientID, secret: g.IDPClientSecret, method: pickAuthMethod(idp.meta, g.IDPClientSecret != "")}, url.Values{
		"grant_type":           {tokenExchangeGrantType},
		"requested_token_type": {idJAGTokenType},
		"audience":             {env.meta.Issuer},
		"subject_token":        {idToken},
		"subject_token_type":   {idTokenType},
	})
	if err != nil {
		return nil, fmt.Errorf("oauth: token exchange at the identity provider: %w", err)
	}
	if t, _ := jag.Extra("issued_token_type").(string); t != "" && t != idJAGTokenType {
		return nil, fmt.Errorf("oauth: the identity provider issued a %q, not an ID-JAG", t)
	}
	// Step two, at the MCP server's authorization server: the ID-JAG as a JWT bearer grant.
	auth := clientAuth{id: g.ClientID, secret: g.ClientSecret, method: pickAuthMethod(env.meta, g.ClientSecret != "")}
	tok, err := env.tokenRequest(ctx, auth, url.Values{"grant_type": {JWTBearerGrantType}, "assertion": {jag.AccessToken}})
	if err != nil {
		return nil, err
	}
	return env.credentials(tok, &ClientInfo{ID: g.ClientID, AuthMethod: auth.method}), nil
}
