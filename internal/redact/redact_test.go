package redact_test

import (
	"strings"
	"testing"

	"github.com/northstar-mcp/mcpclient/internal/redact"
)

func TestURL(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"https://host/mcp", "https://host/mcp"},
		{"https://host:8443/mcp?session=", "https://host:8443/mcp?session=xxxxx"},
		{"http://alice:pass@host/mcp?access_token=SECRET&b=2", "http://xxxxx@host/mcp?access_token=xxxxx&b=xxxxx"},
		{"http://SECRET@host/mcp", "http://xxxxx@host/mcp"},
		{"https://host/mcp?SECRET", "https://host/mcp?xxxxx"},
		{"https://host/mcp#access_token=SECRET", "https://host/mcp#xxxxx"},
		{"https://host/message?sessionId=SECRET", "https://host/message?sessionId=xxxxx"},
		// Parsed, but not an endpoint: the same parts are hidden.
		{"htps://alice:pass@host/mcp?access_token=SECRET", "htps://xxxxx@host/mcp?access_token=xxxxx"},
		{"host/mcp?token=SECRET", "host/mcp?token=xxxxx"},
		// Opaque: the scheme's slashes are missing.
		{"htps:alice:pass@host/mcp?token=SECRET", "xxxxx@host/mcp?token=xxxxx"},
		// Unparsable.
		{"http://alice:pass@[::1/mcp?token=SECRET", "http://xxxxx@[::1/mcp?token=xxxxx"},
		{"http://alice:pass@host:SECRET/mcp", "http://xxxxx@host:SECRET/mcp"},
		// A '?' or '#' in the password: all of it may be userinfo or query.
		{"http://alice:p?ss#w/rd@host:x/mcp?token=SECRET#frag", "http://xxxxx?xxxxx#xxxxx"},
		{"http://ho st/mcp?to=a@b&token=SECRET", "http://xxxxx?to=xxxxx&token=xxxxx"},
		{"http://alice:pass@ho st/", "http://xxxxx@ho st/"},
		{"http://ho st/mcp?token=SECRET&SECRET", "http://ho st/mcp?token=xxxxx&xxxxx"},
		{"alice:pass@ho\nst", "xxxxx@ho\nst"},
	} {
		if got := redact.URL(tt.in); got != tt.want {
			t.Errorf("URL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzURL: whatever the scheme, host, path and query, and however mistyped, a password, a user
// name or a query value never shows in the redaction.
func FuzzURL(f *testing.F) {
	for _, seed := range [][3]string{
		{"http", "host/mcp", ""},
		{"htps", "host/mcp", "a=1"},
		{"http", "[::1/mcp", "token=x"},
		{"", "host:9/mcp", ""},
		{"http", "ho st", "k"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	const secret = "S3CRET"
	f.Fuzz(func(t *testing.T, scheme, rest, query string) {
		if strings.Contains(scheme+rest+query, secret) || strings.ContainsAny(scheme, "/@") {
			return
		}
		for _, s := range []string{
			scheme + "://alice:" + secret + "@" + rest,
			scheme + "://" + secret + "@" + rest,
			scheme + ":alice:" + secret + "@" + rest,
			scheme + "//alice:" + secret + "@" + rest,
			scheme + "://" + rest + "?" + query + "&k=" + secret,
			scheme + "://" + rest + "?" + query + "&" + secret,
			scheme + "://" + rest + "#" + secret,
		} {
			if got := redact.URL(s); strings.Contains(got, secret) {
				t.Fatalf("URL(%q) = %q shows the secret", s, got)
			}
		}
	})
}
