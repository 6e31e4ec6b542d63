package mcptest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// noRedirects is a client that shows the authorization server's redirects instead of
// following them.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// authCodeFor runs an authorization request of the pre-registered public client "app" and
// returns the code the redirect carries.
func authCodeFor(t *testing.T, as *AuthServer, challenge string) url.Values {
	t.Helper()
	q := url.Values{
		"client_id": {"app"}, "redirect_uri": {"http://127.0.0.1:5/cb"}, "response_type": {"code"},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}, "state": {"st"},
		"resource": {"http://mcp.test"},
	}
	resp, err := noRedirects.Get(as.URL + "/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		t.Fatalf("authorize answered %d, no redirect", resp.StatusCode)
	}
	return loc.Query()
}

func exchange(t *testing.T, as *AuthServer, form url.Values) (int, map[string]any) {
	t.Helper()
	resp, err := http.PostForm(as.URL+"/token", form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

func TestAuthServerCodeGrant(t *testing.T) {
	as := NewTestAuthServer(t, WithAuthClient("app", ""))
	const verifier = "a-verifier-of-enough-length-for-pkce-0123456789"
	back := authCodeFor(t, as, s256(verifier))
	if back.Get("state") != "st" || back.Get("iss") != as.URL || back.Get("code") == "" {
		t.Fatalf("redirect query %v", back)
	}
	form := url.Values{
		"grant_type": {"authorization_code"}, "client_id": {"app"}, "code": {back.Get("code")},
		"redirect_uri": {"http://127.0.0.1:5/cb"}, "resource": {"http://mcp.test"},
	}

	wrong := cloneForm(form)
	wrong.Set("code_verifier", "another-verifier-of-enough-length-0123456789")
	if status, body := exchange(t, as, wrong); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("a wrong verifier: %d %v", status, body)
	}
	// The refused exchange used the code up: a code is tried once.
	form.Set("code_verifier", verifier)
	if status, body := exchange(t, as, form); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("a used code: %d %v", status, body)
	}

	back = authCodeFor(t, as, s256(verifier))
	form.Set("code", back.Get("code"))
	status, body := exchange(t, as, form)
	if status != http.StatusOK || body["access_token"] == nil || body["refresh_token"] == nil || body["token_type"] != "Bearer" {
		t.Fatalf("exchange: %d %v", status, body)
	}
	if status, body := exchange(t, as, form); status != http.StatusBadRequest {
		t.Fatalf("the code again: %d %v", status, body)
	}

	refresh := url.Values{"grant_type": {"refresh_token"}, "client_id": {"app"}, "refresh_token": {body["refresh_token"].(string)}}
	if status, b := exchange(t, as, refresh); status != http.StatusOK || b["refresh_token"] == body["refresh_token"] {
		t.Fatalf("refresh: %d %v, want a rotated refresh token", status, b)
	}
	if status, _ := exchange(t, as, refresh); status != http.StatusBadRequest {
		t.Fatalf("a rotated refresh token used again: %d", status)
	}
}

func cloneForm(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// An authorization request the server cannot trust to redirect is answered in place.
func TestAuthServerRefusesUnknownRedirects(t *testing.T) {
	as := NewTestAuthServer(t, WithAuthClient("app", ""))
	for name, q := range map[string]url.Values{
		"unknown client":         {"client_id": {"nobody"}, "redirect_uri": {"http://127.0.0.1:5/cb"}},
		"not loopback":           {"client_id": {"app"}, "redirect_uri": {"https://evil.example/cb"}},
		"no redirect_uri at all": {"client_id": {"app"}},
	} {
		resp, err := noRedirects.Get(as.URL + "/authorize?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
			t.Errorf("%s: %d, Location %q", name, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
}

func TestAuthServerClientCredentials(t *testing.T) {
	as := NewTestAuthServer(t, WithAuthClient("svc", "s3cret"), WithAuthClient("app", ""))
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {"svc"}, "client_secret": {"s3cret"}}
	if status, body := exchange(t, as, form); status != http.StatusOK || body["refresh_token"] != nil {
		t.Fatalf("client credentials: %d %v, want a token without refresh token", status, body)
	}
	form.Set("client_secret", "guess")
	if status, _ := exchange(t, as, form); status != http.StatusUnauthorized {
		t.Fatalf("a wrong secret: %d", status)
	}
	if status, _ := exchange(t, as, url.Values{"grant_type": {"client_credentials"}, "client_id": {"app"}}); status != http.StatusUnauthorized {
		t.Fatalf("a public client: %d", status)
	}
}

// A protected HTTPServer serves its resource metadata, refuses what lacks a valid token for
// it, and records the refusals.
func TestWithAuthorization(t *testing.T) {
	now := time.Now()
	as := NewTestAuthServer(t, WithAuthClient("svc", "s3cret"), WithAuthClock(func() time.Time { return now }))
	srv := NewTestHTTPServer(t, WithAuthorization(as, "mcp"))

	resp, err := http.Get(srv.URL + "/.well-known/oauth-protected-resource")
	if err != nil {
		t.Fatal(err)
	}
	var prm struct {
		Resource string   `json:"resource"`
		Servers  []string `json:"authorization_servers"`
	}
	json.NewDecoder(resp.Body).Decode(&prm)
	resp.Body.Close()
	if prm.Resource != srv.URL || len(prm.Servers) != 1 || prm.Servers[0] != as.URL {
		t.Fatalf("metadata %+v", prm)
	}

	post := func(token string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp = post("")
	if resp.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(resp.Header.Get("WWW-Authenticate"), `resource_metadata="`+srv.URL+`/.well-known/oauth-protected-resource"`) ||
		!strings.Contains(resp.Header.Get("WWW-Authenticate"), `scope="mcp"`) {
		t.Fatalf("no token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}

	token := func(resource, scope string) string {
		_, body := exchange(t, as, url.Values{"grant_type": {"client_credentials"}, "client_id": {"svc"},
			"client_secret": {"s3cret"}, "resource": {resource}, "scope": {scope}})
		return body["access_token"].(string)
	}
	if resp := post(token("http://elsewhere.test", "mcp")); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a token for another resource: %d", resp.StatusCode)
	}
	if resp := post(token(srv.URL, "")); resp.StatusCode != http.StatusForbidden ||
		!strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="insufficient_scope"`) {
		t.Fatalf("a token without the scope: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	good := token(srv.URL, "mcp")
	if resp := post(good); resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		t.Fatalf("a good token: %d", resp.StatusCode)
	}
	now = now.Add(2 * time.Hour)
	if resp := post(good); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an expired token: %d", resp.StatusCode)
	}
	var refused int
	for _, r := range srv.Requests() {
		if r.Refused != 0 && r.RPCMethod == "ping" {
			refused++
		}
	}
	if refused != 4 {
		t.Fatalf("%d refusals recorded, want 4", refused)
	}
}
