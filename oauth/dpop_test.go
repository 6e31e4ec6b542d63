package oauth

import (
	"net/url"
	"testing"
)

// The htu claim is compared with the URI the server received, and a request line always has a
// path: an origin without one is "/" there, so the proof must say "/" too.
func TestProofURI(t *testing.T) {
	for in, want := range map[string]string{
		"https://as.example":                 "https://as.example/",
		"https://as.example/":                "https://as.example/",
		"https://as.example/token?a=1#frag":  "https://as.example/token",
		"https://as.example:8443/t%2Fk":      "https://as.example:8443/t%2Fk",
		"http://127.0.0.1:9000?grant=client": "http://127.0.0.1:9000/",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := proofURI(u); got != want {
			t.Errorf("proofURI(%q) = %q, want %q", in, got, want)
		}
	}
}
