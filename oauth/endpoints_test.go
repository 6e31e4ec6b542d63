package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
)

// A metadata document served over https that sends the client to an http token endpoint would
// put the code, the client secret and the tokens on the wire in clear.
func TestPlaintextEndpointOfHTTPSResourceRefused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		resource string
		meta     ServerMetadata
		wantErr  bool
	}{
		{"https resource, http token endpoint", "https://mcp.example.com/mcp",
			ServerMetadata{Issuer: "https://as.example.com", AuthorizationEndpoint: "https://as.example.com/authorize", TokenEndpoint: "http://as.example.com/token"}, true},
		{"https resource, http registration", "https://mcp.example.com/mcp",
			ServerMetadata{Issuer: "https://as.example.com", TokenEndpoint: "https://as.example.com/token", RegistrationEndpoint: "http://as.example.com/register"}, true},
		{"https resource, http issuer", "https://mcp.example.com/mcp",
			ServerMetadata{Issuer: "http://as.example.com", TokenEndpoint: "https://as.example.com/token"}, true},
		{"https resource, endpoint no URL", "https://mcp.example.com/mcp",
			ServerMetadata{Issuer: "https://as.example.com", TokenEndpoint: "javascript:alert(1)"}, true},
		{"https resource, http loopback AS", "https://mcp.example.com/mcp",
			ServerMetadata{Issuer: "http://127.0.0.1:9000", TokenEndpoint: "http://localhost:9000/token"}, false},
		{"http resource chose plaintext", "http://mcp.internal:8080/mcp",
			ServerMetadata{Issuer: "http://as.internal", TokenEndpoint: "http://as.internal/token"}, false},
		{"all https", "https://mcp.example.com/mcp",
			ServerMetadata{Issuer: "https://as.example.com", AuthorizationEndpoint: "https://as.example.com/a", TokenEndpoint: "https://as.example.com/t", RegistrationEndpoint: "https://as.example.com/r"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkEndpoints(mustParse(tc.resource), &tc.meta)
			if tc.wantErr != (err != nil) || tc.wantErr && !errors.Is(err, ErrInsecureEndpoint) {
				t.Fatalf("checkEndpoints = %v, want error %v (ErrInsecureEndpoint)", err, tc.wantErr)
			}
		})
	}
}

// A client registered dynamically for one redirect URI cannot use another (the authorization
// server compares them exactly): a Loopback that got another port registers again.
func TestRegistrationRedoneForAnotherRedirectURI(t *testing.T) {
	var registrations atomic.Int32
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var doc struct {
			RedirectURIs []string `json:"redirect_uris"`
		}
		json.NewDecoder(r.Body).Decode(&doc)
		n := registrations.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"client_id": "client-" + string(rune('0'+n)), "redirect_uris": doc.RedirectURIs})
	}))
	defer as.Close()
	meta := &ServerMetadata{Issuer: as.URL, RegistrationEndpoint: as.URL + "/register"}
	g := AuthorizationCode{}
	env := &grantEnv{meta: meta, client: as.Client()}

	first, err := g.register(context.Background(), env, "http://127.0.0.1:4001/callback")
	if err != nil {
		t.Fatal(err)
	}
	env.prior = &Credentials{Issuer: as.URL, Client: first}
	same, err := g.register(context.Background(), env, "http://127.0.0.1:4001/callback")
	if err != nil {
		t.Fatal(err)
	}
	if same.ID != first.ID || registrations.Load() != 1 {
		t.Fatalf("same redirect URI: client %q after %d registrations, want %q after 1", same.ID, registrations.Load(), first.ID)
	}
	moved, err := g.register(context.Background(), env, "http://127.0.0.1:4002/callback")
	if err != nil {
		t.Fatal(err)
	}
	if moved.ID == first.ID || registrations.Load() != 2 {
		t.Fatalf("another redirect URI: client %q after %d registrations, want a new one", moved.ID, registrations.Load())
	}
	if _, err := url.Parse(moved.RedirectURI); err != nil || moved.RedirectURI != "http://127.0.0.1:4002/callback" {
		t.Fatalf("RedirectURI = %q", moved.RedirectURI)
	}
}
