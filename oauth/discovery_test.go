package oauth

import (
	"net/http"
	"net/url"
	"reflect"
	"testing"
)

func TestChallengeParsing(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   authChallenge
	}{
		{`Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource", scope="files:read files:write"`,
			authChallenge{resourceMetadata: "https://mcp.example/.well-known/oauth-protected-resource", scope: "files:read files:write"}},
		{`Bearer error="insufficient_scope", scope="a b", error_description="needs \"b\", and more"`,
			authChallenge{scope: "a b", err: "insufficient_scope"}},
		// Another scheme first, a token68, then ours; commas inside quotes.
		{`Basic realm="x, y", Negotiate abc123==, bearer scope=admin, error=invalid_token`,
			authChallenge{scope: "admin", err: "invalid_token"}},
		{`DPoP error="use_dpop_nonce", algs="ES256"`, authChallenge{err: "use_dpop_nonce"}},
		// Garbage and an unterminated quote lose nothing before them.
		{`Bearer scope="ok", ===, resource_metadata="https://x/unterminated`, authChallenge{scope: "ok"}},
		{``, authChallenge{}},
	} {
		h := http.Header{}
		if tc.header != "" {
			h.Set("WWW-Authenticate", tc.header)
		}
		if got := readChallenge(h); got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.header, got, tc.want)
		}
	}
}

func TestWellKnownOrder(t *testing.T) {
	endpoint, _ := url.Parse("https://mcp.example/tenant/mcp")
	got, _ := prmURLs(endpoint, "")
	want := []string{"https://mcp.example/.well-known/oauth-protected-resource/tenant/mcp", "https://mcp.example/.well-known/oauth-protected-resource"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PRM: %q", got)
	}
	if got, _ := prmURLs(endpoint, "/meta"); !reflect.DeepEqual(got, []string{"https://mcp.example/meta"}) {
		t.Errorf("PRM from the challenge: %q", got)
	}
	if _, err := prmURLs(endpoint, "http://mcp.example/meta"); err == nil {
		t.Error("an https server's metadata over http was accepted")
	}
	issuer, _ := url.Parse("https://auth.example/tenant1")
	want = []string{
		"https://auth.example/.well-known/oauth-authorization-server/tenant1",
		"https://auth.example/.well-known/openid-configuration/tenant1",
		"https://auth.example/tenant1/.well-known/openid-configuration",
	}
	if got := metadataURLs(issuer); !reflect.DeepEqual(got, want) {
		t.Errorf("issuer with a path: %q", got)
	}
	issuer, _ = url.Parse("https://auth.example")
	want = []string{"https://auth.example/.well-known/oauth-authorization-server", "https://auth.example/.well-known/openid-configuration"}
	if got := metadataURLs(issuer); !reflect.DeepEqual(got, want) {
		t.Errorf("issuer without a path: %q", got)
	}
}

func TestResourceCovers(t *testing.T) {
	endpoint, _ := url.Parse("https://mcp.example:443/api/mcp")
	for resource, want := range map[string]bool{
		"https://mcp.example/api/mcp":     true,
		"https://MCP.example/api/mcp/":    true,
		"https://mcp.example/api":         true,
		"https://mcp.example":             true,
		"https://mcp.example/ap":          false, // a prefix of a segment is no parent
		"https://mcp.example/api/mcp/sub": false,
		"https://evil.example/api/mcp":    false,
		"http://mcp.example/api/mcp":      false,
		"https://mcp.example:8443/api":    false,
		"https://mcp.example/api?x=1":     false,
		"not a url\x7f":                   false,
	} {
		if got := resourceCovers(resource, endpoint); got != want {
			t.Errorf("%q covers %s: %v", resource, endpoint, got)
		}
	}
}
