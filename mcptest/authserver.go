package mcptest

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// An AuthServer is an OAuth 2.1 authorization server on a loopback port, for the tests of
// clients that authorize: it publishes its metadata (RFC 8414), registers clients dynamically
// (RFC 7591), approves every authorization request at once (no login page: a client following
// the redirect, as oauth.Headless does, gets the code), and issues opaque tokens bound to the
// resource the client named (RFC 8707) for the authorization code grant with PKCE S256, refresh
// tokens (rotated at each use) and client credentials. An HTTPServer made with WithAuthorization
// refuses requests without one of its tokens, as a protected MCP server does.
//
// It is written from the RFCs, not from any client's code, so that a client tested against it
// is checked against the protocol rather than against itself.
type AuthServer struct {
	// URL is the issuer identifier, the server's origin.
	URL string

	ts  *httptest.Server
	cfg authConfig

	mu      sync.Mutex
	clients map[string]*authClient // by client_id
	codes   map[string]*authCode
	access  map[string]*authToken
	refresh map[string]*authToken
	stats   AuthStats
	secrets []string // every code, token and client secret issued
}

// AuthStats counts what an AuthServer did.
type AuthStats struct {
	// Registrations counts dynamic client registrations.
	Registrations int
	// Authorizations counts authorization requests answered with a code.
	Authorizations int
	// Tokens counts access tokens issued, by any grant.
	Tokens int
	// Refreshes counts refresh token grants that issued a token.
	Refreshes int
	// ClientCredentials counts client credentials grants that issued a token.
	ClientCredentials int
	// Scopes are the scopes of the latest authorization request, as the client asked them.
	Scopes []string
	// Resource is the resource indicator of the latest authorization or token request.
	Resource string
}

type authClient struct {
	id, secret   string
	redirectURIs []string // empty for a pre-registered client: any loopback redirect URI
	method       string   // token_endpoint_auth_method
}

type authCode struct {
	client, redirectURI, challenge, resource string
	scopes                                   []string
	expires                                  time.Time
}

type authToken struct {
	client, resource string
	scopes           []string
	expires          time.Time // zero for refresh tokens
}

type authConfig struct {
	lifetime    time.Duration
	now         func() time.Time
	scopes      []string
	methods     []string
	noRefresh   bool
	misbehavior AuthMisbehavior
	clients     []*authClient
}

// An AuthOption configures an AuthServer.
type AuthOption func(*authConfig)

// WithAuthClient pre-registers a client: a confidential one with secret (which may use the
// client credentials grant), a public one without. A pre-registered client may use any loopback
// redirect URI, as RFC 8252 has native apps do.
func WithAuthClient(id, secret string) AuthOption {
	return func(c *authConfig) {
		method := "client_secret_basic"
		if secret == "" {
			method = "none"
		}
		c.clients = append(c.clients, &authClient{id: id, secret: secret, method: method})
	}
}

// WithAuthScopes sets the scopes the server supports (scopes_supported); it grants no other,
// whatever a client asks. Default: none listed, every scope asked granted.
func WithAuthScopes(scopes ...string) AuthOption {
	return func(c *authConfig) { c.scopes = slices.Clone(scopes) }
}

// WithTokenLifetime sets how long an access token is valid. Default one hour.
func WithTokenLifetime(d time.Duration) AuthOption {
	return func(c *authConfig) {
		if d > 0 {
			c.lifetime = d
		}
	}
}

// WithAuthClock replaces the server's clock, so that a test expires tokens without waiting.
func WithAuthClock(now func() time.Time) AuthOption {
	return func(c *authConfig) {
		if now != nil {
			c.now = now
		}
	}
}

// WithTokenEndpointAuthMethods sets the token endpoint auth methods the server advertises and
// accepts. Default client_secret_basic, client_secret_post and none.
func WithTokenEndpointAuthMethods(methods ...string) AuthOption {
	return func(c *authConfig) { c.methods = slices.Clone(methods) }
}

// WithoutRefreshTokens makes the server issue no refresh tokens.
func WithoutRefreshTokens() AuthOption { return func(c *authConfig) { c.noRefresh = true } }

// AuthMisbehavior is a set of ways an AuthServer breaks the protocol, for the tests of what a
// client refuses.
type AuthMisbehavior uint

const (
	// OmitIss leaves the iss parameter out of authorization responses while the metadata
	// promises it (RFC 9207).
	OmitIss AuthMisbehavior = 1 << iota
	// WrongIss names another issuer in authorization responses.
	WrongIss
	// DenyAuthorization answers every authorization request with error=access_denied, as when
	// the user refuses consent.
	DenyAuthorization
	// NoPKCE advertises no code_challenge_methods_supported.
	NoPKCE
	// RefuseRefresh answers every refresh token grant with invalid_grant.
	RefuseRefresh
)

// WithAuthMisbehavior makes the server misbehave in the ways of m.
func WithAuthMisbehavior(m AuthMisbehavior) AuthOption {
	return func(c *authConfig) { c.misbehavior |= m }
}

// NewAuthServer returns a started authorization server; Close stops it.
func NewAuthServer(opts ...AuthOption) *AuthServer {
	a := &AuthServer{
		cfg: authConfig{
			lifetime: time.Hour,
			now:      time.Now,
			methods:  []string{"client_secret_basic", "client_secret_post", "none"},
		},
		clients: make(map[string]*authClient),
		codes:   make(map[string]*authCode),
		access:  make(map[string]*authToken),
		refresh: make(map[string]*authToken),
	}
	for _, o := range opts {
		o(&a.cfg)
	}
	for _, c := range a.cfg.clients {
		a.clients[c.id] = c
		if c.secret != "" {
			a.secrets = append(a.secrets, c.secret)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", a.metadata)
	mux.HandleFunc("POST /register", a.register)
	mux.HandleFunc("GET /authorize", a.authorize)
	mux.HandleFunc("POST /token", a.token)
	a.ts = httptest.NewServer(mux)
	a.URL = a.ts.URL
	return a
}

// NewTestAuthServer returns a started authorization server closed by tb's cleanup.
func NewTestAuthServer(tb testing.TB, opts ...AuthOption) *AuthServer {
	tb.Helper()
	a := NewAuthServer(opts...)
	tb.Cleanup(a.Close)
	return a
}

// Close stops the server.
func (a *AuthServer) Close() { a.ts.Close() }

// Stats returns what the server did so far.
func (a *AuthServer) Stats() AuthStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.stats
	s.Scopes = slices.Clone(s.Scopes)
	return s
}

// Secrets returns every code, token and client secret the server issued or was configured with,
// for a test to check that none of them leaks into logs or errors.
func (a *AuthServer) Secrets() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.secrets)
}

// RevokeAll revokes every access and refresh token, as a server does when the user signs out
// everywhere: the next request of a client is refused, and its refresh fails.
func (a *AuthServer) RevokeAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.access)
	clear(a.refresh)
}

// ExpireAll makes every access token expired, as time passing would: the client's next
// request is refused unless it refreshes first.
func (a *AuthServer) ExpireAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	past := a.cfg.now().Add(-time.Second)
	for _, t := range a.access {
		t.expires = past
	}
}

func (a *AuthServer) metadata(w http.ResponseWriter, _ *http.Request) {
	m := map[string]any{
		"issuer":                                         a.URL,
		"authorization_endpoint":                         a.URL + "/authorize",
		"token_endpoint":                                 a.URL + "/token",
		"registration_endpoint":                          a.URL + "/register",
		"response_types_supported":                       []string{"code"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token", "client_credentials"},
		"token_endpoint_auth_methods_supported":          a.cfg.methods,
		"authorization_response_iss_parameter_supported": true,
	}
	if a.cfg.misbehavior&NoPKCE == 0 {
		m["code_challenge_methods_supported"] = []string{"S256"}
	}
	if len(a.cfg.scopes) > 0 {
		m["scopes_supported"] = a.cfg.scopes
	}
	writeJSON(w, http.StatusOK, m)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func oauthError(w http.ResponseWriter, status int, code, description string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="token"`)
	}
	writeJSON(w, status, map[string]string{"error": code, "error_description": description})
}

// randomToken is 32 random bytes, base64url: unguessable, and nothing a client can parse.
func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// maxAuthRequestBody bounds a registration or token request.
const maxAuthRequestBody = 64 << 10

func (a *AuthServer) register(w http.ResponseWriter, r *http.Request) {
	var req struct {
		RedirectURIs []string `json:"redirect_uris"`
		AuthMethod   string   `json:"token_endpoint_auth_method"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxAuthRequestBody)).Decode(&req); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata", "the body is no JSON object")
		return
	}
	if len(req.RedirectURIs) == 0 {
		oauthError(w, http.StatusBadRequest, "invalid_redirect_uri", "redirect_uris is required")
		return
	}
	for _, u := range req.RedirectURIs {
		if p, err := url.Parse(u); err != nil || p.Scheme == "" || p.Host == "" || p.Fragment != "" {
			oauthError(w, http.StatusBadRequest, "invalid_redirect_uri", "a redirect URI is no absolute URL")
			return
		}
	}
	method := req.AuthMethod
	if method == "" {
		method = "client_secret_basic" // RFC 7591's default
	}
	if !slices.Contains(a.cfg.methods, method) {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata", "unsupported token_endpoint_auth_method")
		return
	}
	c := &authClient{id: "client-" + randomToken()[:16], redirectURIs: req.RedirectURIs, method: method}
	resp := map[string]any{
		"client_id":                  c.id,
		"redirect_uris":              c.redirectURIs,
		"token_endpoint_auth_method": method,
		"client_id_issued_at":        a.cfg.now().Unix(),
	}
	if method != "none" {
		c.secret = randomToken()
		resp["client_secret"] = c.secret
		resp["client_secret_expires_at"] = 0
	}
	a.mu.Lock()
	a.clients[c.id] = c
	a.stats.Registrations++
	if c.secret != "" {
		a.secrets = append(a.secrets, c.secret)
	}
	a.mu.Unlock()
	writeJSON(w, http.StatusCreated, resp)
}

// redirectAllowed reports whether c may be sent back to uri: one of its registered redirect
// URIs, compared exactly; for a pre-registered client, any loopback URI.
func (c *authClient) redirectAllowed(uri string) bool {
	if len(c.redirectURIs) > 0 {
		return slices.Contains(c.redirectURIs, uri)
	}
	u, err := url.Parse(uri)
	return err == nil && u.Scheme == "http" && (u.Hostname() == "127.0.0.1" || u.Hostname() == "::1" || u.Hostname() == "localhost")
}

// grant is the scopes of asked the server grants: those it supports, or all without a list.
func (a *AuthServer) grant(asked []string) []string {
	if len(a.cfg.scopes) == 0 {
		return asked
	}
	var out []string
	for _, s := range asked {
		if slices.Contains(a.cfg.scopes, s) {
			out = append(out, s)
		}
	}
	return out
}

func (a *AuthServer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a.mu.Lock()
	c := a.clients[q.Get("client_id")]
	a.mu.Unlock()
	redirectURI := q.Get("redirect_uri")
	// An unknown client or redirect URI gets no redirect: sending the user to an unverified
	// URI is the open redirector the spec forbids.
	if c == nil {
		http.Error(w, "unknown client_id", http.StatusBadRequest)
		return
	}
	if !c.redirectAllowed(redirectURI) {
		http.Error(w, "redirect_uri is not registered for this client", http.StatusBadRequest)
		return
	}
	back, _ := url.Parse(redirectURI)
	params := back.Query()
	answer := func(p url.Values) {
		for k, v := range p {
			params[k] = v
		}
		if s := q.Get("state"); s != "" {
			params.Set("state", s)
		}
		switch {
		case a.cfg.misbehavior&OmitIss != 0:
		case a.cfg.misbehavior&WrongIss != 0:
			params.Set("iss", a.URL+"/other")
		default:
			params.Set("iss", a.URL)
		}
		back.RawQuery = params.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	}
	fail := func(code, description string) {
		answer(url.Values{"error": {code}, "error_description": {description}})
	}
	switch {
	case a.cfg.misbehavior&DenyAuthorization != 0:
		fail("access_denied", "the user refused")
		return
	case q.Get("response_type") != "code":
		fail("unsupported_response_type", "only code")
		return
	case q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256":
		fail("invalid_request", "PKCE with S256 is required")
		return
	}
	asked := strings.Fields(q.Get("scope"))
	code := randomToken()
	a.mu.Lock()
	a.codes[code] = &authCode{
		client:      c.id,
		redirectURI: redirectURI,
		challenge:   q.Get("code_challenge"),
		resource:    q.Get("resource"),
		scopes:      a.grant(asked),
		expires:     a.cfg.now().Add(time.Minute),
	}
	a.stats.Authorizations++
	a.stats.Scopes = asked
	a.stats.Resource = q.Get("resource")
	a.secrets = append(a.secrets, code)
	a.mu.Unlock()
	answer(url.Values{"code": {code}})
}

// authenticate finds the client of a token request and checks its credentials, by the methods
// the server accepts.
func (a *AuthServer) authenticate(r *http.Request) (*authClient, bool) {
	id, secret, basic := r.BasicAuth()
	method := "client_secret_basic"
	if basic {
		var err1, err2 error
		id, err1 = url.QueryUnescape(id)
		secret, err2 = url.QueryUnescape(secret)
		if err1 != nil || err2 != nil {
			return nil, false
		}
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		method = "client_secret_post"
		if secret == "" {
			method = "none"
		}
	}
	a.mu.Lock()
	c := a.clients[id]
	a.mu.Unlock()
	switch {
	case c == nil || !slices.Contains(a.cfg.methods, method):
		return nil, false
	case c.secret == "":
		return c, method == "none"
	}
	return c, method != "none" && subtle.ConstantTimeCompare([]byte(secret), []byte(c.secret)) == 1
}

func (a *AuthServer) token(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxAuthRequestBody)
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "the body is no form")
		return
	}
	c, ok := a.authenticate(r)
	if !ok {
		oauthError(w, http.StatusUnauthorized, "invalid_client", "client authentication failed")
		return
	}
	f := r.PostForm
	now := a.cfg.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stats.Resource = f.Get("resource")
	switch f.Get("grant_type") {
	case "authorization_code":
		code, ok := a.codes[f.Get("code")]
		delete(a.codes, f.Get("code")) // single use, whatever happens next
		switch {
		case !ok || code.client != c.id || now.After(code.expires):
			oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown, used or expired code")
		case f.Get("redirect_uri") != code.redirectURI:
			oauthError(w, http.StatusBadRequest, "invalid_grant", "redirect_uri differs from the authorization request's")
		case s256(f.Get("code_verifier")) != code.challenge:
			oauthError(w, http.StatusBadRequest, "invalid_grant", "code_verifier does not match the code_challenge")
		case f.Get("resource") != code.resource:
			oauthError(w, http.StatusBadRequest, "invalid_target", "resource differs from the authorization request's")
		default:
			a.issue(w, c.id, code.resource, code.scopes, true)
		}
	case "refresh_token":
		old, ok := a.refresh[f.Get("refresh_token")]
		switch {
		case a.cfg.misbehavior&RefuseRefresh != 0 || !ok || old.client != c.id:
			oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown or revoked refresh token")
		case f.Get("resource") != "" && f.Get("resource") != old.resource:
			oauthError(w, http.StatusBadRequest, "invalid_target", "resource differs from the grant's")
		default:
			delete(a.refresh, f.Get("refresh_token")) // rotated
			a.stats.Refreshes++
			a.issue(w, c.id, old.resource, old.scopes, true)
		}
	case "client_credentials":
		if c.secret == "" {
			oauthError(w, http.StatusUnauthorized, "unauthorized_client", "a public client has no credentials of its own")
			return
		}
		a.stats.ClientCredentials++
		a.issue(w, c.id, f.Get("resource"), a.grant(strings.Fields(f.Get("scope"))), false)
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "")
	}
}

// issue answers a token request with a new access token (and refresh token); a.mu is held.
func (a *AuthServer) issue(w http.ResponseWriter, client, resource string, scopes []string, withRefresh bool) {
	tok := randomToken()
	a.access[tok] = &authToken{client: client, resource: resource, scopes: scopes, expires: a.cfg.now().Add(a.cfg.lifetime)}
	a.stats.Tokens++
	a.secrets = append(a.secrets, tok)
	resp := map[string]any{
		"access_token": tok,
		"token_type":   "Bearer",
		"expires_in":   int(a.cfg.lifetime / time.Second),
		"scope":        strings.Join(scopes, " "),
	}
	if withRefresh && !a.cfg.noRefresh {
		rt := randomToken()
		a.refresh[rt] = &authToken{client: client, resource: resource, scopes: scopes}
		a.secrets = append(a.secrets, rt)
		resp["refresh_token"] = rt
	}
	writeJSON(w, http.StatusOK, resp)
}

func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// protection is what WithAuthorization puts in front of an HTTPServer.
type protection struct {
	as     *AuthServer
	scopes []string            // needed by every request
	tools  map[string][]string // needed by tools/call of a tool, besides
}

// WithAuthorization protects an HTTPServer with as: it publishes protected resource metadata
// (RFC 9728) naming as at /.well-known/oauth-protected-resource, and refuses every request
// without a valid token as issued for this server, with 401 and a challenge pointing there,
// before the MCP server sees it, so that the refused request runs nothing. A token lacking one
// of scopes (or of a tool's, see WithToolScopes) is refused with 403 insufficient_scope.
func WithAuthorization(as *AuthServer, scopes ...string) Option {
	return optionFunc(func(s *Server) {
		if s.auth == nil {
			s.auth = &protection{tools: make(map[string][]string)}
		}
		s.auth.as, s.auth.scopes = as, slices.Clone(scopes)
	})
}

// WithToolScopes makes calls of tool need scopes too, on a server with WithAuthorization: a
// token without them is refused with 403 insufficient_scope naming what it lacks, so that the
// client steps up.
func WithToolScopes(tool string, scopes ...string) Option {
	return optionFunc(func(s *Server) {
		if s.auth == nil {
			s.auth = &protection{tools: make(map[string][]string)}
		}
		s.auth.tools[tool] = slices.Clone(scopes)
	})
}

const resourceMetadataPath = "/.well-known/oauth-protected-resource"

// guard answers r itself when it is a metadata request or lacks authorization, and reports
// whether it did.
func (p *protection) guard(h *HTTPServer, w http.ResponseWriter, r *http.Request) bool {
	if p == nil || p.as == nil {
		return false
	}
	resource := h.URL
	if r.URL.Path == resourceMetadataPath || strings.HasPrefix(r.URL.Path, resourceMetadataPath+"/") {
		m := map[string]any{"resource": resource, "authorization_servers": []string{p.as.URL}}
		if len(p.as.cfg.scopes) > 0 {
			m["scopes_supported"] = p.as.cfg.scopes
		}
		writeJSON(w, http.StatusOK, m)
		return true
	}
	need := slices.Clone(p.scopes)
	var call struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody))
		r.Body.Close()
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return true
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if json.Unmarshal(body, &call) == nil && call.Method == "tools/call" {
			need = append(need, p.tools[call.Params.Name]...)
		}
	}
	challenge := func(status int, params string) {
		rec := HTTPRequest{Method: r.Method, RPCMethod: call.Method, Header: r.Header.Clone(), Refused: status}
		if len(call.ID) > 0 {
			json.Unmarshal(call.ID, &rec.ID)
		}
		h.remember(rec)
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer resource_metadata="%s%s"%s`, h.URL, resourceMetadataPath, params))
		http.Error(w, http.StatusText(status), status)
	}
	scopeParam := ""
	if len(need) > 0 {
		scopeParam = fmt.Sprintf(`, scope="%s"`, strings.Join(need, " "))
	}
	bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		challenge(http.StatusUnauthorized, scopeParam)
		return true
	}
	p.as.mu.Lock()
	t := p.as.access[bearer]
	var valid bool
	var lacking []string
	if t != nil {
		valid = p.as.cfg.now().Before(t.expires) && strings.TrimSuffix(t.resource, "/") == strings.TrimSuffix(resource, "/")
		for _, s := range need {
			if !slices.Contains(t.scopes, s) {
				lacking = append(lacking, s)
			}
		}
	}
	p.as.mu.Unlock()
	switch {
	case !valid:
		challenge(http.StatusUnauthorized, `, error="invalid_token"`+scopeParam)
		return true
	case len(lacking) > 0:
		challenge(http.StatusForbidden, `, error="insufficient_scope"`+scopeParam)
		return true
	}
	return false
}
