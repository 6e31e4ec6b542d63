package oauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/northstar-mcp/mcpclient/internal/flight"
	"github.com/northstar-mcp/mcpclient/transport"
)

// Config configures an [Authorizer].
type Config struct {
	// Grant obtains tokens. Required.
	Grant Grant
	// Store keeps the credentials; nil means a MemoryStore, which forgets them with the
	// process. A CLI uses a FileStore, so that the user signs in once.
	Store TokenStore
	// HTTPClient sends the requests to the metadata, registration and token endpoints; nil
	// means a client with a 30-second timeout. Its redirects are not followed to another origin.
	HTTPClient *http.Client
	// RefusePrivateAddresses, for an MCP server on the internet, keeps it from pointing the
	// client into the network the client runs in: the requests to the URLs the server names
	// (its resource metadata, the authorization server's metadata, registration and token
	// endpoints) refuse to connect to a loopback, private or link-local address, with an error
	// wrapping ErrPrivateAddress. The address is checked when connecting, after resolution, so
	// DNS rebinding cannot get around it. It has no effect while the MCP server's URL itself
	// names such an address (an IP in those ranges, or localhost), and an identity provider
	// the program configured (EnterpriseManaged) is exempt. HTTPClient's Transport must be nil
	// or an *http.Transport; through its proxy, only addresses written in the URL are checked.
	RefusePrivateAddresses bool
	// DPoP, if set, binds the tokens to this key (RFC 9449): each request carries a proof of
	// possession, so that a stolen token is useless without the key.
	DPoP *DPoPKey
	// Resource is the MCP endpoint's URL; empty means the URL of the first request the
	// Authorizer sees. The Authorizer only ever sends tokens to that origin.
	Resource string
	// Logger receives debug records of discovery and authorization; never tokens or secrets.
	Logger *slog.Logger
	// Issuer pins the authorization server: the issuer identifier of the only one the
	// Authorizer works with, from the first request on. Empty means the first one the MCP
	// server names and a token is obtained from, kept with the stored credentials
	// (Credentials.Issuer). Either way the grant's configured credentials (a client secret, a
	// private key's assertion, a workload's JWT, an enterprise identity) are bound to that
	// issuer and never presented to another: when the MCP server names another, the
	// authorization fails with an *IssuerChangedError. Only a user flow that configures no
	// client (AuthorizationCode registering dynamically or with a client ID metadata document)
	// follows an unpinned server to a new authorization server, for it presents nothing there
	// that was made for the old one. To follow a move deliberately, pin the new issuer, or delete
	// the stored credentials.
	Issuer string
	// ConfirmIssuer, if set, is called before the Authorizer first trusts an authorization
	// server it is not bound to yet (the first contact when Issuer is empty, or a user flow
	// following the MCP server to a new one), once its metadata has been checked and before
	// anything is sent to it or the user is sent there. An error refuses that server, and is
	// returned. A CLI shows the issuer here, so that the user sees whom they are to trust.
	ConfirmIssuer func(ctx context.Context, issuer string) error
	// StepUpRetryAfter is how long a step-up the authorization server did not grant (a 403
	// insufficient_scope for scopes it refused, or granted fewer of) is not asked again for the
	// same resource and scopes: a repeat fails at once with a *StepUpRefusedError instead of
	// sending the user to sign in for the same answer. Zero means 10 minutes; negative, never
	// remembered.
	StepUpRetryAfter time.Duration
}

// An Authorizer authorizes the requests of one MCP server: set it as the Authorizer of a
// transport.HTTP or transport.SSE. It obtains a token when the server first refuses a request
// for want of one, refreshes it when it expires, asks for more scopes when the server says
// the token's are insufficient (step-up), and keeps the credentials in its TokenStore.
// Concurrent requests refused together share one authorization.
//
// The server's refusal must come before it runs anything (a 401 or 403), which is what the
// transport counts on to send the same request again once authorized.
type Authorizer struct {
	cfg Config
	hc  *http.Client
	log *slog.Logger

	mu       sync.Mutex
	endpoint *url.URL     // the MCP endpoint; guarded by mu
	key      string       // the store's key for it; guarded by mu
	creds    *Credentials // the current credentials; guarded by mu
	loaded   bool         // creds were read from the store; guarded by mu
	nonces   *dpopNonces
	stepUps  *stepUpMemory
	// flights is the authorization running, if any, that concurrent refused requests share.
	flights flight.Group[struct{}, struct{}]
}

var _ transport.Authorizer = (*Authorizer)(nil)

// ErrCrossOrigin reports a request to another origin than the MCP server's: the Authorizer
// sends its tokens nowhere else.
var ErrCrossOrigin = errors.New("oauth: request to another origin than the MCP server's")

// ErrIssuerChanged reports an MCP server that names another authorization server than the
// one the configured credentials are bound to (Config.Issuer, or the issuer of the stored
// credentials): nothing was sent to the other one. errors.As gives the *IssuerChangedError.
var ErrIssuerChanged = errors.New("oauth: the MCP server names another authorization server than the credentials are bound to")

// IssuerChangedError is ErrIssuerChanged with both issuers.
type IssuerChangedError struct {
	// Want is the issuer the credentials are bound to, Got the one the MCP server names now.
	Want, Got string
	// Pinned is true when Want is Config.Issuer, false when it is the stored credentials'.
	Pinned bool
}

func (e *IssuerChangedError) Error() string {
	how := "bound to"
	if e.Pinned {
		how = "pinned to"
	}
	return fmt.Sprintf("oauth: the MCP server names the authorization server %q, the credentials are %s %q: nothing was sent to it", e.Got, how, e.Want)
}

func (e *IssuerChangedError) Unwrap() error { return ErrIssuerChanged }

// New returns an Authorizer for cfg.
func New(cfg Config) (*Authorizer, error) {
	if cfg.Grant == nil {
		return nil, errors.New("oauth: Config.Grant is required")
	}
	a := &Authorizer{cfg: cfg, hc: cfg.HTTPClient, log: cfg.Logger, nonces: newDPoPNonces(), stepUps: newStepUpMemory(cfg.StepUpRetryAfter)}
	if a.hc == nil {
		a.hc = &http.Client{Timeout: 30 * time.Second}
	}
	a.hc = sameOriginRedirects(a.hc)
	if cfg.RefusePrivateAddresses {
		hc, err := refusePrivateAddresses(a.hc, a.serverOnPrivateAddress, cfg.Grant)
		if err != nil {
			return nil, err
		}
		a.hc = hc
	}
	if a.cfg.Store == nil {
		a.cfg.Store = NewMemoryStore()
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Resource != "" {
		u, err := url.Parse(cfg.Resource)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("oauth: Resource %q is no http(s) URL", cfg.Resource)
		}
		a.setEndpoint(u)
	}
	return a, nil
}

// sameOriginRedirects copies c so that it follows no redirect to another origin: a metadata or
// token request carries secrets (a client secret, a code, a refresh token).
func sameOriginRedirects(c *http.Client) *http.Client {
	cp := *c
	next := c.CheckRedirect
	cp.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) > 0 && !sameOrigin(req.URL, via[0].URL) {
			return fmt.Errorf("%w: redirect to %s", ErrCrossOrigin, redactURL(req.URL.String()))
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("oauth: stopped after 10 redirects")
		}
		return nil
	}
	return &cp
}

func (a *Authorizer) setEndpoint(u *url.URL) {
	e := &url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	a.endpoint, a.key = e, canonicalResource(e)
}

// current returns the current credentials, reading the store the first time.
func (a *Authorizer) current(ctx context.Context, req *http.Request) (*Credentials, error) {
	a.mu.Lock()
	if a.endpoint == nil {
		a.setEndpoint(req.URL)
	}
	if !sameOrigin(req.URL, a.endpoint) {
		a.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrCrossOrigin, redactURL(req.URL.String()))
	}
	if a.loaded {
		c := a.creds
		a.mu.Unlock()
		return c, nil
	}
	key := a.key
	a.mu.Unlock()
	c, err := a.cfg.Store.Load(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("oauth: token store: %w", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.loaded {
		a.creds, a.loaded = c, true
	}
	return a.creds, nil
}

// Authorize gives req the current token, refreshing it first if it has expired. With no token
// yet, req goes without one: the server's refusal says where to get one.
func (a *Authorizer) Authorize(ctx context.Context, req *http.Request) error {
	c, err := a.current(ctx, req)
	if err != nil {
		return err
	}
	if c != nil && c.Token != nil && !c.Token.Valid() && c.Token.RefreshToken != "" {
		if err := a.await(ctx, c, func(ctx context.Context) error { return a.refresh(ctx, c) }); err == nil {
			c, _ = a.current(ctx, req)
		} // else: the server's refusal of the expired token starts a new authorization
	}
	if c == nil || c.Token == nil || c.Token.AccessToken == "" {
		return nil
	}
	return a.present(req, c.Token)
}

// present sets the token on req: as a DPoP-bound token with a fresh proof, or as a bearer.
func (a *Authorizer) present(req *http.Request, tok *oauth2.Token) error {
	if strings.EqualFold(tok.TokenType, "DPoP") {
		if a.cfg.DPoP == nil {
			return errors.New("oauth: a DPoP-bound token and no DPoP key")
		}
		return a.cfg.DPoP.authorize(req, tok.AccessToken, a.nonces)
	}
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	return nil
}

// Reauthorize answers the server's refusal of req: it remembers a DPoP nonce the server asks
// for, refreshes an expired token, or authorizes anew (with more scopes, for a 403
// insufficient_scope). It returns nil when req is to be sent again.
func (a *Authorizer) Reauthorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	if nonce, ok := dpopNonceChallenge(resp); ok && a.cfg.DPoP != nil {
		a.nonces.set(req.URL, nonce)
		return nil
	}
	c, err := a.current(ctx, req)
	if err != nil {
		return err
	}
	used := presented(req)
	if c != nil && c.Token != nil && c.Token.AccessToken != used {
		return nil // renewed since req was sent
	}
	ch := readChallenge(resp.Header)
	stepUp := resp.StatusCode == http.StatusForbidden || ch.err == "insufficient_scope"
	if resp.StatusCode == http.StatusForbidden && ch.err != "insufficient_scope" {
		return fmt.Errorf("%w: the server forbids the request (%s)", transport.ErrUnauthorized, cmpOr(ch.err, "403"))
	}
	return a.await(ctx, c, func(ctx context.Context) error { return a.authorize(ctx, ch, stepUp, c) })
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// presented is the token req carried, if any.
func presented(req *http.Request) string {
	h := req.Header.Get("Authorization")
	if i := strings.IndexByte(h, ' '); i > 0 {
		return strings.TrimSpace(h[i+1:])
	}
	return ""
}

// await runs renew unless an authorization already runs, in which case it waits for that one;
// renew is skipped too when the credentials changed since seen. A waiter whose authorization
// panicked, or failed because the context of the request that ran it ended, runs its own.
func (a *Authorizer) await(ctx context.Context, seen *Credentials, renew func(context.Context) error) error {
	for {
		_, err := a.flights.Do(ctx, nil, struct{}{}, func() (struct{}, error) {
			a.mu.Lock()
			changed := a.creds != seen
			a.mu.Unlock()
			if changed {
				return struct{}{}, nil
			}
			return struct{}{}, renew(ctx)
		})
		switch {
		case errors.Is(err, flight.ErrPanicked):
			continue // the panic is the business of the request that ran the authorization
		case err != nil && err == ctx.Err():
			return context.Cause(ctx)
		}
		return err
	}
}

// save makes c the current credentials and stores them.
func (a *Authorizer) save(ctx context.Context, c *Credentials) error {
	a.mu.Lock()
	a.creds, a.loaded = c, true
	key := a.key
	a.mu.Unlock()
	if err := a.cfg.Store.Save(ctx, key, c); err != nil {
		return fmt.Errorf("oauth: token store: %w", err)
	}
	return nil
}

// tokenClient is the client for the authorization server's token endpoint: with DPoP, one
// that adds a proof to each request.
func (a *Authorizer) tokenClient() *http.Client {
	if a.cfg.DPoP == nil {
		return a.hc
	}
	cp := *a.hc
	base := cp.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	cp.Transport = a.cfg.DPoP.transport(base, a.nonces)
	return &cp
}

// refresh trades c's refresh token for a new token at the server that issued it.
func (a *Authorizer) refresh(ctx context.Context, c *Credentials) error {
	if a.cfg.Issuer != "" && !sameIssuer(a.cfg.Issuer, c.Issuer) {
		return &IssuerChangedError{Want: a.cfg.Issuer, Got: c.Issuer, Pinned: true}
	}
	meta, _, err := fetchServerMetadata(ctx, a.hc, c.Issuer)
	if err != nil {
		return err
	}
	if meta == nil {
		return fmt.Errorf("%w for %s", ErrNoMetadata, c.Issuer)
	}
	a.mu.Lock()
	endpoint := a.endpoint
	a.mu.Unlock()
	if err := checkEndpoints(endpoint, meta); err != nil {
		return err
	}
	return a.refreshAt(ctx, c, meta, cmpOr(c.Resource, a.resourceFor()))
}

// refreshAt trades c's refresh token at the authorization server of meta for a token for
// resource.
func (a *Authorizer) refreshAt(ctx context.Context, c *Credentials, meta *ServerMetadata, resource string) error {
	env := &grantEnv{meta: meta, resource: resource, client: a.tokenClient(), a: a}
	auth := clientAuth{}
	if c.Client != nil {
		auth = clientAuth{id: c.Client.ID, secret: c.Client.Secret, method: c.Client.AuthMethod}
		if auth.method == "" {
			auth.method = pickAuthMethod(meta, c.Client.Secret != "")
		}
	}
	tok, err := env.tokenRequest(ctx, auth, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {c.Token.RefreshToken}})
	if err != nil {
		return err
	}
	if tok.RefreshToken == "" {
		tok.RefreshToken = c.Token.RefreshToken // the server kept the old one valid
	}
	n := *c
	n.Token = tok
	if s, ok := tok.Extra("scope").(string); ok && s != "" {
		n.Scopes = strings.Fields(s)
	}
	a.log.Debug("oauth: token refreshed", "issuer", c.Issuer)
	return a.save(ctx, &n)
}

// resourceFor is the resource identifier sent in authorization and token requests.
func (a *Authorizer) resourceFor() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.key
}

// authorize runs discovery and the grant: the protected resource metadata (from the
// challenge, else the well-known locations), its authorization server's metadata, then the
// grant, for the scopes the challenge names (joined with those held, on a step-up), else
// those the resource supports.
func (a *Authorizer) authorize(ctx context.Context, ch authChallenge, stepUp bool, prior *Credentials) error {
	a.mu.Lock()
	endpoint := a.endpoint
	resource := a.key
	a.mu.Unlock()
	prm, err := fetchResourceMetadata(ctx, a.hc, endpoint, ch.resourceMetadata)
	if err != nil {
		return err
	}
	bound, pinned := a.boundIssuer(prior)
	var meta *ServerMetadata
	if prm == nil {
		// A server of the 2025-03-26 revision: its origin is its authorization server, whose
		// metadata, if any, is at the root; without it, the default endpoints.
		origin := (&url.URL{Scheme: endpoint.Scheme, Host: endpoint.Host}).String()
		if err := a.admitIssuer(bound, pinned, origin); err != nil {
			return err
		}
		m, found, err := fetchServerMetadata(ctx, a.hc, origin)
		switch {
		case err != nil:
			return err
		case found:
			meta = m
		default:
			meta = fallbackMetadata(endpoint)
		}
	} else {
		issuer := prm.AuthorizationServers[0]
		if i := slices.IndexFunc(prm.AuthorizationServers, func(s string) bool { return sameIssuer(s, bound) }); bound != "" && i >= 0 {
			issuer = prm.AuthorizationServers[i]
		}
		// Checked before the first request to the issuer: even its metadata is not fetched.
		if err := a.admitIssuer(bound, pinned, issuer); err != nil {
			return err
		}
		m, found, err := fetchServerMetadata(ctx, a.hc, issuer)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w for %s", ErrNoMetadata, issuer)
		}
		meta = m
		resource = canonicalResource(mustParse(prm.Resource))
	}
	if err := checkEndpoints(endpoint, meta); err != nil {
		return err
	}
	if (bound == "" || !sameIssuer(bound, meta.Issuer)) && a.cfg.ConfirmIssuer != nil {
		if err := a.cfg.ConfirmIssuer(ctx, meta.Issuer); err != nil {
			return err
		}
	}
	if a.cfg.DPoP != nil && !dpopAlgSupported(a.cfg.DPoP, meta.DPoPSigningAlgValuesSupported) {
		return fmt.Errorf("oauth: %s does not accept DPoP proofs signed with %s", meta.Issuer, a.cfg.DPoP.Algorithm())
	}
	var scopes []string
	switch {
	case ch.scope != "":
		scopes = strings.Fields(ch.scope)
		if stepUp && prior != nil {
			scopes = union(prior.Scopes, scopes)
		}
	case prm != nil:
		scopes = prm.ScopesSupported
	}
	switch {
	case prior != nil && !sameIssuer(prior.Issuer, meta.Issuer):
		// The server moved (admitIssuer let it, for a user flow with nothing configured): the
		// old issuer's tokens, refreshed or not, are refused now.
		a.log.Debug("oauth: the authorization server changed", "from", prior.Issuer, "to", meta.Issuer)
	case !stepUp && prior != nil && prior.Token != nil && prior.Token.RefreshToken != "":
		// A refresh spares the user the browser; a step-up needs new consent.
		err := a.refreshAt(ctx, prior, meta, resource)
		if err == nil {
			return nil
		}
		a.log.Debug("oauth: refresh failed, authorizing anew", "err", err)
	}
	var stepKey string
	if stepUp {
		// A step-up the authorization server would not grant costs the user a sign-in each time
		// it is asked: once failed, it is not asked again for a while.
		stepKey = stepUpKey(resource, scopes)
		if until, ok := a.stepUps.refusedUntil(stepKey, time.Now()); ok {
			return &StepUpRefusedError{Resource: resource, Scopes: scopes, RetryAt: until, Recently: true}
		}
		if a.stepUps.wasAttempt(prior, stepKey) {
			// The token of a step-up for these very scopes is refused for want of them: the
			// authorization server granted fewer than it let on.
			return a.stepUpFailed(stepKey, resource, scopes, nil)
		}
	}
	env := &grantEnv{meta: meta, resource: resource, scopes: scopes, prior: prior, client: a.tokenClient(), a: a}
	a.log.Debug("oauth: authorizing", "issuer", meta.Issuer, "scopes", scopes, "step_up", stepUp)
	c, err := a.cfg.Grant.obtain(ctx, env)
	if err != nil {
		if stepUp && scopeRefused(err) {
			return a.stepUpFailed(stepKey, resource, scopes, err)
		}
		return err
	}
	if err := a.save(ctx, c); err != nil {
		return err
	}
	if stepUp {
		if !covers(c.Scopes, scopes) {
			return a.stepUpFailed(stepKey, resource, scopes, nil)
		}
		a.stepUps.attempted(c, stepKey)
	}
	return nil
}

// boundIssuer is the issuer the credentials are bound to, if any: Config.Issuer (pinned), else
// that of the credentials held.
func (a *Authorizer) boundIssuer(held *Credentials) (issuer string, pinned bool) {
	if a.cfg.Issuer != "" {
		return a.cfg.Issuer, true
	}
	if held != nil {
		return held.Issuer, false
	}
	return "", false
}

// admitIssuer refuses an issuer other than the bound one, unless nothing pins the issuer and
// the grant presents nothing configured (a user flow registering anew with each server).
func (a *Authorizer) admitIssuer(bound string, pinned bool, issuer string) error {
	if bound == "" || sameIssuer(bound, issuer) {
		return nil
	}
	if pinned || a.cfg.Grant.configured() {
		return &IssuerChangedError{Want: bound, Got: issuer, Pinned: pinned}
	}
	return nil
}

// sameIssuer compares issuer identifiers as metadata discovery does: a trailing slash aside.
func sameIssuer(a, b string) bool {
	return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
}

func mustParse(s string) *url.URL {
	u, _ := url.Parse(s)
	if u == nil {
		u = new(url.URL)
	}
	return u
}

// union is a's scopes followed by b's not in a.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
