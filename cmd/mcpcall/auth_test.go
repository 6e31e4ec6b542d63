package main

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// -auth signs in through the browser once, back to the loopback listener, and keeps the tokens
// in a 0600 file, so that the next run needs no browser. The test's browser follows the
// authorization server's redirect as a user who approves.
func TestAuthFlow(t *testing.T) {
	var opened int
	restore := openBrowser
	t.Cleanup(func() { openBrowser = restore })
	openBrowser = func(ctx context.Context, url string) error {
		opened++
		// The opener's command line is readable by every local user: it gets the loopback
		// listener's start URL, never the state or the PKCE challenge.
		if !strings.HasPrefix(url, "http://127.0.0.1:") || strings.Contains(url, "state=") || strings.Contains(url, "code_challenge") {
			t.Errorf("the browser opener got %q; want the local start URL", url)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}

	as := mcptest.NewTestAuthServer(t)
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithAuthorization(as),
		mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echoTool))
	tokens := filepath.Join(t.TempDir(), "tokens.json")

	r := call(t, "", "-url", srv.URL, "-auth", "-token-file", tokens, "tools/call", `{"name":"echo","arguments":{"n":1}}`)
	if r.code != exitOK || !strings.Contains(r.stdout, `\"n\":1`) || !strings.Contains(r.stderr, "open this URL to authorize: "+as.URL) {
		t.Fatalf("first run: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	fi, err := os.Stat(tokens)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", fi, err)
	}
	r = call(t, "", "-url", srv.URL, "-auth", "-token-file", tokens, "tools/call", `{"name":"echo","arguments":{"n":2}}`)
	if r.code != exitOK || opened != 1 || as.Stats().Authorizations != 1 {
		t.Fatalf("second run: exit %d, browser opened %d times, %d authorizations: %q", r.code, opened, as.Stats().Authorizations, r.stderr)
	}
}

// Without -auth a protected server's refusal is "not executed", and nothing is stored.
func TestProtectedServerWithoutAuth(t *testing.T) {
	as := mcptest.NewTestAuthServer(t)
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithAuthorization(as))
	r := call(t, "", "-url", srv.URL, "ping")
	if r.code != exitNotExecuted || !strings.Contains(r.stderr, "unauthorized") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	checkStderr(t, r)
}

// approvingBrowser replaces the browser for the test with one that follows the authorization
// server's redirect as a user who approves; it counts the URLs opened.
func approvingBrowser(t *testing.T) *int {
	opened := new(int)
	restore := openBrowser
	t.Cleanup(func() { openBrowser = restore })
	openBrowser = func(ctx context.Context, url string) error {
		*opened++
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	return opened
}

// The user sees the authorization server they are about to trust before the browser opens.
func TestAuthShowsTheIssuerFirst(t *testing.T) {
	approvingBrowser(t)
	as := mcptest.NewTestAuthServer(t)
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithAuthorization(as),
		mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echoTool))
	r := call(t, "", "-url", srv.URL, "-auth", "-token-file", filepath.Join(t.TempDir(), "tokens.json"), "ping")
	shown := strings.Index(r.stderr, "mcpcall: the server's authorization server is "+as.URL+"\n")
	opened := strings.Index(r.stderr, "open this URL")
	if r.code != exitOK || shown < 0 || opened < shown {
		t.Fatalf("exit %d, stderr %q: want the issuer shown before the URL", r.code, r.stderr)
	}
}

// -auth-issuer pins the authorization server: a server naming another is refused before the
// browser opens, naming both.
func TestAuthIssuerPinned(t *testing.T) {
	opened := approvingBrowser(t)
	as := mcptest.NewTestAuthServer(t)
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithAuthorization(as),
		mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echoTool))
	r := call(t, "", "-url", srv.URL, "-auth", "-auth-issuer", "https://as.example", "-token-file", filepath.Join(t.TempDir(), "tokens.json"), "ping")
	if r.code != exitNotExecuted || *opened != 0 || as.Stats().Authorizations != 0 ||
		!strings.Contains(r.stderr, "https://as.example") || !strings.Contains(r.stderr, as.URL) {
		t.Fatalf("exit %d, browser opened %d times, stderr %q", r.code, *opened, r.stderr)
	}
	if r := call(t, "", "-url", srv.URL, "-auth-issuer", "https://as.example", "ping"); r.code == exitOK {
		t.Fatalf("-auth-issuer without -auth accepted")
	}
}

// A server's refusal for want of authorization, without -auth, says in the report line that
// -auth signs in; with -auth given, it does not.
func TestUnauthorizedNamesTheAuthFlag(t *testing.T) {
	as := mcptest.NewTestAuthServer(t)
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithAuthorization(as))
	for _, endpoint := range [][]string{{"-url", srv.URL}, {"-sse", srv.URL + "/sse"}} {
		r := call(t, "", append(endpoint, "ping")...)
		if r.code != exitNotExecuted || !strings.Contains(r.stderr, "unauthorized") {
			t.Fatalf("%s: exit %d: %s", endpoint[0], r.code, r.stderr)
		}
		checkStderr(t, r)
		if !strings.Contains(r.stderr, "run again with -auth to sign in") {
			t.Errorf("%s: stderr %q does not name -auth", endpoint[0], r.stderr)
		}
	}
	// The user who gave -auth and was refused all the same (another authorization server
	// than the one pinned) is not told to give it.
	approvingBrowser(t)
	r := call(t, "", "-url", srv.URL, "-auth", "-auth-issuer", "https://as.example", "-token-file", filepath.Join(t.TempDir(), "tokens.json"), "ping")
	if r.code != exitNotExecuted || !strings.Contains(r.stderr, "unauthorized") || strings.Contains(r.stderr, "run again with -auth") {
		t.Errorf("with -auth: exit %d stderr %q", r.code, r.stderr)
	}
}

// A browser opener's error may quote the URLs it followed, up to the callback with its
// authorization code: the line that says no browser opened masks their queries.
func TestAuthBrowserErrorShowsNoSecret(t *testing.T) {
	restore := openBrowser
	t.Cleanup(func() { openBrowser = restore })
	openBrowser = func(ctx context.Context, start string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, start, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		// Signed in, and failing all the same, as an opener that lost its way may.
		return &url.Error{Op: "Get", URL: resp.Request.URL.String(), Err: errors.New("the window closed")}
	}
	as := mcptest.NewTestAuthServer(t)
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithAuthorization(as))
	r := call(t, "", "-url", srv.URL, "-auth", "-token-file", filepath.Join(t.TempDir(), "tokens.json"), "ping")
	if r.code != exitOK || !strings.Contains(r.stderr, "no browser opened") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "code=xxxxx") {
		t.Errorf("the opener's error does not show the callback: the test checks nothing: %q", r.stderr)
	}
	for _, s := range as.Secrets() {
		if strings.Contains(r.stderr, s) {
			t.Errorf("stderr shows the secret %q: %q", s, r.stderr)
		}
	}
}
