package oauth_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/oauth2"

	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/oauth"
)

// fakeServer is an MCP endpoint (/mcp) and its authorization server on one origin, with a
// token endpoint the test writes; meta adjusts the authorization server's metadata.
type fakeServer struct {
	*httptest.Server
	token    http.HandlerFunc
	idpToken http.HandlerFunc
	meta     func(m map[string]any)
	prm      func(m map[string]any)
}

func newFakeServer(t *testing.T) *fakeServer {
	f := &fakeServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		m := map[string]any{"resource": f.URL + "/mcp", "authorization_servers": []string{f.URL}}
		if f.prm != nil {
			f.prm(m)
		}
		json.NewEncoder(w).Encode(m)
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		m := map[string]any{
			"issuer": f.URL, "token_endpoint": f.URL + "/token", "authorization_endpoint": f.URL + "/authorize",
			"code_challenge_methods_supported": []string{"S256"},
			"grant_types_supported":            []string{"client_credentials", oauth.JWTBearerGrantType},
		}
		if f.meta != nil {
			f.meta(m)
		}
		json.NewEncoder(w).Encode(m)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) { f.token(w, r) })
	mux.HandleFunc("POST /idp/token", func(w http.ResponseWriter, r *http.Request) { f.idpToken(w, r) })
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

func writeToken(w http.ResponseWriter, tokenType string) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"access_token": "at-1", "token_type": tokenType, "expires_in": 3600})
}

// authorizeOnce has a answer the MCP endpoint's first refusal, then returns the request it
// authorizes next.
func authorizeOnce(t *testing.T, f *fakeServer, a *oauth.Authorizer) (*http.Request, error) {
	t.Helper()
	ctx := context.Background()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.URL+"/mcp?x=1", nil)
	if err := a.Authorize(ctx, req); err != nil {
		return nil, err
	}
	refusal := &http.Response{StatusCode: http.StatusUnauthorized, Header: http.Header{
		"Www-Authenticate": {`Bearer resource_metadata="` + f.URL + `/.well-known/oauth-protected-resource/mcp"`}}}
	if err := a.Reauthorize(ctx, req, refusal); err != nil {
		return nil, err
	}
	next, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.URL+"/mcp?x=1", nil)
	return next, a.Authorize(ctx, next)
}

func mustNew(t *testing.T, cfg oauth.Config) *oauth.Authorizer {
	t.Helper()
	a, err := oauth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// private_key_jwt: the assertion is signed by the client's key, issued by and about the client,
// for the authorization server.
func TestClientCredentialsPrivateKeyJWT(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	f := newFakeServer(t)
	f.token = func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if r.Form.Get("grant_type") != "client_credentials" || r.Form.Get("resource") != f.URL+"/mcp" ||
			r.Form.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
			http.Error(w, "bad request: "+r.Form.Encode(), http.StatusBadRequest)
			return
		}
		tok, err := jwt.ParseSigned(r.Form.Get("client_assertion"), []jose.SignatureAlgorithm{jose.ES256})
		var claims jwt.Claims
		if err == nil {
			err = tok.Claims(&key.PublicKey, &claims)
		}
		if err == nil {
			err = claims.Validate(jwt.Expected{Issuer: "svc", Subject: "svc", AnyAudience: jwt.Audience{f.URL}})
		}
		if err != nil || claims.ID == "" {
			http.Error(w, "bad assertion", http.StatusUnauthorized)
			return
		}
		writeToken(w, "Bearer")
	}
	a := mustNew(t, oauth.Config{Grant: oauth.ClientCredentials{ClientID: "svc", PrivateKey: key}})
	req, err := authorizeOnce(t, f, a)
	if err != nil {
		t.Fatal(err)
	}
	if got := req.Header.Get("Authorization"); got != "Bearer at-1" {
		t.Fatalf("Authorization %q", got)
	}
}

func TestJWTBearer(t *testing.T) {
	f := newFakeServer(t)
	f.token = func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if r.Form.Get("grant_type") != oauth.JWTBearerGrantType || r.Form.Get("assertion") != "workload-jwt" {
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		writeToken(w, "Bearer")
	}
	a := mustNew(t, oauth.Config{Grant: oauth.JWTBearer{ClientID: "wl", Assertion: func(context.Context) (string, error) { return "workload-jwt", nil }}})
	if _, err := authorizeOnce(t, f, a); err != nil {
		t.Fatal(err)
	}
}

// Enterprise-managed: the ID token is exchanged at the identity provider for an ID-JAG naming
// the authorization server and the resource, which the authorization server takes as a JWT
// bearer grant. An identity provider that issues anything else is refused.
func TestEnterpriseManaged(t *testing.T) {
	for _, tc := range []struct {
		name      string
		issued    string
		wantError bool
	}{
		{"id-jag", "urn:ietf:params:oauth:token-type:id-jag", false},
		{"another token type", "urn:ietf:params:oauth:token-type:access_token", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t)
			f.idpToken = func(w http.ResponseWriter, r *http.Request) {
				r.ParseForm()
				if r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" ||
					r.Form.Get("requested_token_type") != "urn:ietf:params:oauth:token-type:id-jag" ||
					r.Form.Get("audience") != f.URL || r.Form.Get("resource") != f.URL+"/mcp" ||
					r.Form.Get("subject_token") != "user-id-token" ||
					r.Form.Get("subject_token_type") != "urn:ietf:params:oauth:token-type:id_token" {
					http.Error(w, "bad exchange: "+r.Form.Encode(), http.StatusBadRequest)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(map[string]any{"access_token": "the-jag", "issued_token_type": tc.issued, "token_type": "N_A"})
			}
			var asked atomic.Int32
			f.token = func(w http.ResponseWriter, r *http.Request) {
				asked.Add(1)
				r.ParseForm()
				if r.Form.Get("grant_type") != oauth.JWTBearerGrantType || r.Form.Get("assertion") != "the-jag" {
					http.Error(w, "bad grant", http.StatusBadRequest)
					return
				}
				writeToken(w, "Bearer")
			}
			a := mustNew(t, oauth.Config{Grant: oauth.EnterpriseManaged{
				IDPTokenEndpoint: f.URL + "/idp/token", IDPClientID: "idp-client",
				IDToken:  func(context.Context) (string, error) { return "user-id-token", nil },
				ClientID: "mcp-client", ClientSecret: "sec",
			}})
			_, err := authorizeOnce(t, f, a)
			if tc.wantError != (err != nil) {
				t.Fatalf("err = %v", err)
			}
			if tc.wantError && asked.Load() != 0 {
				t.Fatalf("the other token was presented to the authorization server")
			}
		})
	}
}

// proofClaims verifies a DPoP proof as a server does and returns its claims.
func proofClaims(t *testing.T, proof string) (map[string]any, *jose.JSONWebKey) {
	t.Helper()
	tok, err := jwt.ParseSigned(proof, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatalf("proof: %v", err)
	}
	h := tok.Headers[0]
	if h.ExtraHeaders["typ"] != "dpop+jwt" || h.JSONWebKey == nil || !h.JSONWebKey.IsPublic() {
		t.Fatalf("proof header %+v", h)
	}
	var claims map[string]any
	if err := tok.Claims(h.JSONWebKey.Key, &claims); err != nil {
		t.Fatalf("proof signature: %v", err)
	}
	return claims, h.JSONWebKey
}

// DPoP: the token request carries a proof, and is sent again, intact, with the nonce the
// authorization server asks for; the resource requests carry proofs bound to the token, each
// with its own jti, and the resource server's nonce once it asked for one.
func TestDPoP(t *testing.T) {
	key, err := oauth.GenerateDPoPKey()
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeServer(t)
	f.meta = func(m map[string]any) { m["dpop_signing_alg_values_supported"] = []string{"ES256"} }
	var tokenRequests atomic.Int32
	f.token = func(w http.ResponseWriter, r *http.Request) {
		tokenRequests.Add(1)
		r.ParseForm()
		claims, jwk := proofClaims(t, r.Header.Get("DPoP"))
		if claims["htm"] != "POST" || claims["htu"] != f.URL+"/token" || claims["ath"] != nil {
			http.Error(w, "bad proof", http.StatusBadRequest)
			return
		}
		if claims["nonce"] != "as-nonce" {
			w.Header().Set("DPoP-Nonce", "as-nonce")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":"use_dpop_nonce"}`))
			return
		}
		if id, _, _ := r.BasicAuth(); r.Form.Get("grant_type") != "client_credentials" || id != "svc" {
			http.Error(w, "the retried body lost its fields: "+r.Form.Encode(), http.StatusBadRequest)
			return
		}
		thumb, _ := jwk.Thumbprint(crypto.SHA256)
		if base64.RawURLEncoding.EncodeToString(thumb) != key.Thumbprint() {
			http.Error(w, "thumbprint", http.StatusBadRequest)
			return
		}
		writeToken(w, "DPoP")
	}
	a := mustNew(t, oauth.Config{Grant: oauth.ClientCredentials{ClientID: "svc", ClientSecret: "s"}, DPoP: key})
	req, err := authorizeOnce(t, f, a)
	if err != nil {
		t.Fatal(err)
	}
	if n := tokenRequests.Load(); n != 2 {
		t.Fatalf("%d token requests, want 2 (one refused for the nonce)", n)
	}
	if got := req.Header.Get("Authorization"); got != "DPoP at-1" {
		t.Fatalf("Authorization %q", got)
	}
	sum := sha256.Sum256([]byte("at-1"))
	first, _ := proofClaims(t, req.Header.Get("DPoP"))
	// A nonce is a server's, and here one origin serves both the token and the resource.
	if first["htm"] != "POST" || first["htu"] != f.URL+"/mcp" || first["ath"] != base64.RawURLEncoding.EncodeToString(sum[:]) || first["nonce"] != "as-nonce" {
		t.Fatalf("resource proof claims %v", first)
	}

	// The resource server asks for its own nonce.
	refusal := &http.Response{StatusCode: http.StatusUnauthorized, Header: http.Header{
		"Www-Authenticate": {`DPoP error="use_dpop_nonce"`}, "Dpop-Nonce": {"rs-nonce"}}}
	if err := a.Reauthorize(context.Background(), req, refusal); err != nil {
		t.Fatal(err)
	}
	again, _ := http.NewRequest(http.MethodPost, f.URL+"/mcp", nil)
	if err := a.Authorize(context.Background(), again); err != nil {
		t.Fatal(err)
	}
	second, _ := proofClaims(t, again.Header.Get("DPoP"))
	if second["nonce"] != "rs-nonce" || second["jti"] == first["jti"] {
		t.Fatalf("second proof %v after %v: want the nonce and a new jti", second, first)
	}
	if tokenRequests.Load() != 2 {
		t.Fatalf("a nonce refusal cost a new token")
	}
}

// A server that does not take the key's algorithm is refused before any token request.
func TestDPoPAlgorithmNotSupported(t *testing.T) {
	key, _ := oauth.GenerateDPoPKey()
	f := newFakeServer(t)
	f.meta = func(m map[string]any) { m["dpop_signing_alg_values_supported"] = []string{"RS256"} }
	f.token = func(w http.ResponseWriter, r *http.Request) { t.Error("token requested"); writeToken(w, "DPoP") }
	a := mustNew(t, oauth.Config{Grant: oauth.ClientCredentials{ClientID: "svc", ClientSecret: "s"}, DPoP: key})
	if _, err := authorizeOnce(t, f, a); err == nil {
		t.Fatal("authorized")
	}
}

// A token endpoint that redirects to another origin gets no secret sent there.
func TestTokenRequestNotRedirectedAcrossOrigins(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	f := newFakeServer(t)
	f.token = func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/token", http.StatusTemporaryRedirect)
	}
	a := mustNew(t, oauth.Config{Grant: oauth.ClientCredentials{ClientID: "svc", ClientSecret: "s3cret"}})
	_, err := authorizeOnce(t, f, a)
	if !errors.Is(err, oauth.ErrCrossOrigin) || elsewhere.Load() != 0 {
		t.Fatalf("err = %v, %d requests to the other origin", err, elsewhere.Load())
	}
}

// Metadata that is not the server's is refused: resource metadata for another resource, and
// authorization server metadata for another issuer.
func TestForeignMetadataRefused(t *testing.T) {
	t.Run("resource", func(t *testing.T) {
		f := newFakeServer(t)
		f.prm = func(m map[string]any) { m["resource"] = "https://other.example/mcp" }
		f.token = func(w http.ResponseWriter, r *http.Request) { t.Error("token requested") }
		a := mustNew(t, oauth.Config{Grant: oauth.ClientCredentials{ClientID: "svc", ClientSecret: "s"}})
		if _, err := authorizeOnce(t, f, a); !errors.Is(err, oauth.ErrResourceMismatch) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("issuer", func(t *testing.T) {
		f := newFakeServer(t)
		f.meta = func(m map[string]any) { m["issuer"] = "https://evil.example" }
		f.token = func(w http.ResponseWriter, r *http.Request) { t.Error("token requested") }
		a := mustNew(t, oauth.Config{Grant: oauth.ClientCredentials{ClientID: "svc", ClientSecret: "s"}})
		if _, err := authorizeOnce(t, f, a); !errors.Is(err, oauth.ErrIssuerMismatch) || !strings.Contains(err.Error(), "evil") {
			t.Fatalf("err = %v", err)
		}
	})
}

// A token endpoint that echoes the request in its error body puts the client's secret in the
// answer; the error the caller logs keeps the status and the server's error code, and nothing
// else of the body.
func TestGrantErrorHoldsNoSecret(t *testing.T) {
	for name, body := range map[string]func(form string) string{
		"error code": func(form string) string { return `{"error":"invalid_client","echo":"` + form + `"}` },
		"plain text": func(form string) string { return "bad request: " + form },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeServer(t)
			f.meta = func(m map[string]any) { m["token_endpoint_auth_methods_supported"] = []string{"client_secret_post"} }
			f.token = func(w http.ResponseWriter, r *http.Request) {
				r.ParseForm()
				w.WriteHeader(http.StatusBadRequest)
				w.Write([]byte(body(r.Form.Encode())))
			}
			a := mustNew(t, oauth.Config{Grant: oauth.ClientCredentials{ClientID: "svc", ClientSecret: "s3cret-value"}})
			_, err := authorizeOnce(t, f, a)
			var re *oauth2.RetrieveError
			if !errors.Is(err, oauth.ErrGrant) || !errors.As(err, &re) {
				t.Fatalf("err = %v, want ErrGrant with the RetrieveError", err)
			}
			if strings.Contains(err.Error(), "s3cret-value") || !strings.Contains(err.Error(), "400") {
				t.Fatalf("error text %q", err)
			}
		})
	}
}

// A server that moves to another authorization server refuses the old one's tokens: the client
// must not refresh with the old one (its fresh token would be refused again) but register and
// authorize with the new one. The move is followed only because this user flow registers
// dynamically and the issuer is not pinned: nothing configured for the old server goes to the
// new one (a fresh registration, the user's consent at the new server's own page). With a
// pinned issuer or any configured credential the same move is refused, see
// TestConfiguredCredentialsStayWithTheirIssuer and TestPinnedIssuerRefusesAnotherAtFirstContact.
func TestAuthorizationServerMigration(t *testing.T) {
	as1, as2 := mcptest.NewTestAuthServer(t), mcptest.NewTestAuthServer(t)
	f := newFakeServer(t)
	current := as1.URL
	f.prm = func(m map[string]any) { m["authorization_servers"] = []string{current} }
	a := mustNew(t, oauth.Config{Grant: userFlow()})
	if _, err := authorizeOnce(t, f, a); err != nil {
		t.Fatal(err)
	}
	current = as2.URL
	req, err := authorizeOnce(t, f, a)
	if err != nil {
		t.Fatal(err)
	}
	if st := as1.Stats(); st.Refreshes != 0 || st.Tokens != 1 {
		t.Fatalf("old server: %+v, want no refresh", st)
	}
	if st := as2.Stats(); st.Registrations != 1 || st.Tokens != 1 {
		t.Fatalf("new server: %+v, want a registration and a token", st)
	}
	if !slices.Contains(as2.Secrets(), strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")) {
		t.Fatalf("the request carries no token of the new server")
	}
}
