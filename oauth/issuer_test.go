package oauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/oauth"
)

// foreignServer is an authorization server that would take anything: it publishes metadata,
// registers any client, approves every authorization and issues a token for every grant. It
// records every request, so that a test can tell whether a credential reached it.
type foreignServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string // each request's URL, headers and body
}

func newForeignServer(t *testing.T) *foreignServer {
	f := &foreignServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{
			"issuer": f.URL, "token_endpoint": f.URL + "/token", "authorization_endpoint": f.URL + "/authorize",
			"registration_endpoint":            f.URL + "/register",
			"code_challenge_methods_supported": []string{"S256"},
			"grant_types_supported":            []string{"authorization_code", "client_credentials", oauth.JWTBearerGrantType},
		})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		back, _ := url.Parse(r.URL.Query().Get("redirect_uri"))
		back.RawQuery = url.Values{"code": {"c"}, "state": {r.URL.Query().Get("state")}, "iss": {f.URL}}.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /register", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"client_id": "foreign-client"})
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) { writeToken(w, "Bearer") })
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		var b strings.Builder
		b.WriteString(r.URL.String() + "\n")
		r.Header.Write(&b)
		b.Write(body)
		f.mu.Lock()
		f.requests = append(f.requests, b.String())
		f.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

// carrying returns the requests that held any of the needles, in clear or as the Basic
// authorization a client secret travels in.
func (f *foreignServer) carrying(needles ...string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.requests {
		for _, n := range needles {
			if strings.Contains(r, n) || strings.Contains(r, url.QueryEscape(n)) || strings.Contains(basicDecoded(r), n) {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

// basicDecoded is the decoded Basic credentials of a recorded request, if any.
func basicDecoded(recorded string) string {
	for _, line := range strings.Split(recorded, "\n") {
		if v, ok := strings.CutPrefix(line, "Authorization: Basic "); ok {
			r := &http.Request{Header: http.Header{"Authorization": {"Basic " + strings.TrimSpace(v)}}}
			id, secret, _ := r.BasicAuth()
			return id + ":" + secret
		}
	}
	return ""
}

// wantIssuerChanged checks that err is the typed refusal naming both issuers.
func wantIssuerChanged(t *testing.T, err error, want, got string) {
	t.Helper()
	var ic *oauth.IssuerChangedError
	if !errors.Is(err, oauth.ErrIssuerChanged) || !errors.As(err, &ic) {
		t.Fatalf("err = %v, want ErrIssuerChanged", err)
	}
	if ic.Want != want || ic.Got != got || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), got) {
		t.Fatalf("%+v (%q), want %s -> %s named", ic, err, want, got)
	}
}

// Configured credentials stay with the authorization server they first worked with: when the
// MCP server's metadata names another one afterwards, none of them is presented there, and the
// authorization fails naming both issuers (RFC 9700 §4.4, mix-up).
func TestConfiguredCredentialsStayWithTheirIssuer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		grant   func(f *fakeServer) oauth.Grant
		secrets []string
		// as1 is the first authorization server's issuer; empty: the fake server's own origin.
		as1 func(t *testing.T) string
	}{
		{
			name: "client credentials secret",
			grant: func(*fakeServer) oauth.Grant {
				return oauth.ClientCredentials{ClientID: "svc", ClientSecret: "cc-s3cret"}
			},
			secrets: []string{"cc-s3cret"},
		},
		{
			name: "JWT bearer assertion",
			grant: func(*fakeServer) oauth.Grant {
				return oauth.JWTBearer{ClientID: "wl", Assertion: func(context.Context) (string, error) { return "workload-jwt", nil }}
			},
			secrets: []string{"workload-jwt"},
		},
		{
			name: "enterprise managed",
			grant: func(f *fakeServer) oauth.Grant {
				return oauth.EnterpriseManaged{
					IDPTokenEndpoint: f.URL + "/idp/token", IDPClientID: "idp-client",
					IDToken:  func(context.Context) (string, error) { return "user-id-token", nil },
					ClientID: "mcp-client", ClientSecret: "em-s3cret",
				}
			},
			secrets: []string{"em-s3cret", "the-jag", "user-id-token"},
		},
		{
			name: "code flow with a pre-registered secret",
			grant: func(*fakeServer) oauth.Grant {
				g := userFlow()
				g.ClientID, g.ClientSecret = "app", "app-s3cret"
				return g
			},
			secrets: []string{"app-s3cret"},
			as1: func(t *testing.T) string {
				return mcptest.NewTestAuthServer(t, mcptest.WithAuthClient("app", "app-s3cret")).URL
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t)
			f.token = func(w http.ResponseWriter, r *http.Request) { writeToken(w, "Bearer") }
			var exchangesForOthers int
			f.idpToken = func(w http.ResponseWriter, r *http.Request) {
				r.ParseForm()
				if r.Form.Get("audience") != f.URL {
					exchangesForOthers++
				}
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(map[string]any{"access_token": "the-jag", "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag", "token_type": "N_A"})
			}
			first := f.URL
			if tc.as1 != nil {
				first = tc.as1(t)
			}
			foreign := newForeignServer(t)
			current := first
			f.prm = func(m map[string]any) { m["authorization_servers"] = []string{current} }

			a := mustNew(t, oauth.Config{Grant: tc.grant(f)})
			if _, err := authorizeOnce(t, f, a); err != nil {
				t.Fatal(err)
			}
			current = foreign.URL
			_, err := authorizeOnce(t, f, a)
			wantIssuerChanged(t, err, first, foreign.URL)
			if got := foreign.carrying(tc.secrets...); len(got) != 0 {
				t.Fatalf("the other authorization server received the credential:\n%s", got)
			}
			if exchangesForOthers != 0 {
				t.Fatalf("the identity provider was asked for an assertion for the other authorization server")
			}
		})
	}
}

// A pinned issuer is the only one the Authorizer works with, from the first contact on, and
// whatever the grant: even a user flow registering dynamically goes nowhere else.
func TestPinnedIssuerRefusesAnotherAtFirstContact(t *testing.T) {
	for name, grant := range map[string]oauth.Grant{
		"client credentials": oauth.ClientCredentials{ClientID: "svc", ClientSecret: "cc-s3cret"},
		"dynamic user flow":  userFlow(),
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeServer(t)
			foreign := newForeignServer(t)
			f.prm = func(m map[string]any) { m["authorization_servers"] = []string{foreign.URL} }
			a := mustNew(t, oauth.Config{Grant: grant, Issuer: f.URL})
			_, err := authorizeOnce(t, f, a)
			wantIssuerChanged(t, err, f.URL, foreign.URL)
			if got := foreign.carrying("cc-s3cret", "/register", "/authorize", "/token"); len(got) != 0 {
				t.Fatalf("the other authorization server was used:\n%s", got)
			}
		})
	}
}

// Of the authorization servers a resource lists, the one the credentials are bound to is used.
func TestPinnedIssuerChosenAmongSeveral(t *testing.T) {
	f := newFakeServer(t)
	f.token = func(w http.ResponseWriter, r *http.Request) { writeToken(w, "Bearer") }
	foreign := newForeignServer(t)
	f.prm = func(m map[string]any) { m["authorization_servers"] = []string{foreign.URL, f.URL} }
	a := mustNew(t, oauth.Config{Grant: oauth.ClientCredentials{ClientID: "svc", ClientSecret: "cc-s3cret"}, Issuer: f.URL})
	if _, err := authorizeOnce(t, f, a); err != nil {
		t.Fatal(err)
	}
	if got := foreign.carrying("cc-s3cret"); len(got) != 0 {
		t.Fatalf("the other authorization server received the secret:\n%s", got)
	}
}

// The binding is kept with the stored credentials: a restarted program with the same store
// does not present its secret to another issuer either.
func TestIssuerBindingOutlivesTheAuthorizer(t *testing.T) {
	f := newFakeServer(t)
	f.token = func(w http.ResponseWriter, r *http.Request) { writeToken(w, "Bearer") }
	foreign := newForeignServer(t)
	current := f.URL
	f.prm = func(m map[string]any) { m["authorization_servers"] = []string{current} }
	store := oauth.NewMemoryStore()
	grant := oauth.ClientCredentials{ClientID: "svc", ClientSecret: "cc-s3cret"}
	if _, err := authorizeOnce(t, f, mustNew(t, oauth.Config{Grant: grant, Store: store})); err != nil {
		t.Fatal(err)
	}
	current = foreign.URL
	_, err := authorizeOnce(t, f, mustNew(t, oauth.Config{Grant: grant, Store: store}))
	wantIssuerChanged(t, err, f.URL, foreign.URL)
	if got := foreign.carrying("cc-s3cret"); len(got) != 0 {
		t.Fatalf("the other authorization server received the secret:\n%s", got)
	}
}

// ConfirmIssuer is asked before an authorization server is first trusted, and its refusal
// sends nothing there.
func TestConfirmIssuer(t *testing.T) {
	f := newFakeServer(t)
	var asked []string
	f.token = func(w http.ResponseWriter, r *http.Request) { t.Error("token requested"); writeToken(w, "Bearer") }
	refused := errors.New("not this one")
	a := mustNew(t, oauth.Config{
		Grant: oauth.ClientCredentials{ClientID: "svc", ClientSecret: "cc-s3cret"},
		ConfirmIssuer: func(_ context.Context, issuer string) error {
			asked = append(asked, issuer)
			return refused
		},
	})
	if _, err := authorizeOnce(t, f, a); !errors.Is(err, refused) {
		t.Fatalf("err = %v", err)
	}
	if len(asked) != 1 || asked[0] != f.URL {
		t.Fatalf("asked %q", asked)
	}
}
