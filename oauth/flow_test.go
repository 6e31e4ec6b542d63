package oauth_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/oauth"
	"github.com/northstar-mcp/mcpclient/transport"
)

func echo(_ context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("ok")}}, nil
}

// protected is an MCP server protected by a new authorization server.
func protected(t *testing.T, asOpts []mcptest.AuthOption, opts ...mcptest.Option) (*mcptest.AuthServer, *mcptest.HTTPServer) {
	t.Helper()
	as := mcptest.NewTestAuthServer(t, asOpts...)
	srv := mcptest.NewTestHTTPServer(t, append([]mcptest.Option{
		mcptest.WithAuthorization(as),
		mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echo),
		mcptest.WithTool(mcpclient.Tool{Name: "admin"}, echo),
	}, opts...)...)
	return as, srv
}

// userFlow is the authorization code grant as a test runs it: no browser, the authorization
// server's redirect followed by Headless.
func userFlow() oauth.AuthorizationCode {
	return oauth.AuthorizationCode{Redirect: &oauth.Headless{RedirectURL: "http://127.0.0.1:1/callback"}, ClientName: "test"}
}

func connect(t *testing.T, srv *mcptest.HTTPServer, cfg oauth.Config) (*mcpclient.Client, error) {
	t.Helper()
	auth, err := oauth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := mcpclient.Connect(context.Background(), &transport.HTTP{URL: srv.URL, Authorizer: auth},
		mcpclient.WithRetryPolicy(mcptest.FastRetryPolicy()))
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

func call(c *mcpclient.Client, tool string) error {
	_, err := c.CallTool(context.Background(), tool, map[string]any{})
	return err
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The whole user flow: the 401 of the first request, discovery, dynamic registration, PKCE,
// the resource indicator; then a tool call refused for a revoked token is authorized anew and
// sent again under the same id, and runs once.
func TestAuthorizationCodeEndToEnd(t *testing.T) {
	as, srv := protected(t, nil)
	c, err := connect(t, srv, oauth.Config{Grant: userFlow()})
	if err != nil {
		t.Fatal(err)
	}
	if err := call(c, "echo"); err != nil {
		t.Fatal(err)
	}
	st := as.Stats()
	if st.Registrations != 1 || st.Authorizations != 1 || st.Resource != srv.URL {
		t.Fatalf("after connecting: %+v, want one registration, one authorization, resource %s", st, srv.URL)
	}

	as.RevokeAll()
	if err := call(c, "echo"); err != nil {
		t.Fatal(err)
	}
	var refused, served []mcpclient.ID
	for _, r := range srv.Requests() {
		if r.RPCMethod != "tools/call" {
			continue
		}
		if r.Refused != 0 {
			refused = append(refused, r.ID)
		} else {
			served = append(served, r.ID)
		}
	}
	if len(refused) != 1 || len(served) != 2 || served[1] != refused[0] {
		t.Fatalf("tools/call refused %v, served %v: want the refused id served once after", refused, served)
	}
	if n := srv.ExecutionsOf("echo", refused[0]); n != 1 {
		t.Fatalf("the refused call ran %d times", n)
	}
	if st := as.Stats(); st.Registrations != 1 || st.Authorizations != 2 {
		t.Fatalf("after the revocation: %+v, want the registration kept and a second authorization", st)
	}
}

// Tokens outlive the Authorizer in its store: another one with the same store (a restarted
// program with a file store) signs in no more.
func TestStoredCredentialsReused(t *testing.T) {
	as, srv := protected(t, nil)
	store := oauth.NewMemoryStore()
	if _, err := connect(t, srv, oauth.Config{Grant: userFlow(), Store: store}); err != nil {
		t.Fatal(err)
	}
	c, err := connect(t, srv, oauth.Config{Grant: userFlow(), Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if err := call(c, "echo"); err != nil {
		t.Fatal(err)
	}
	if st := as.Stats(); st.Authorizations != 1 || st.Tokens != 1 {
		t.Fatalf("%+v: want the first authorization's token reused", st)
	}
}

// An expired token is refreshed, with no new authorization; a refresh the server refuses is
// followed by a new authorization, not by an error.
func TestRefresh(t *testing.T) {
	t.Run("expired", func(t *testing.T) {
		as, srv := protected(t, nil)
		c, err := connect(t, srv, oauth.Config{Grant: userFlow()})
		if err != nil {
			t.Fatal(err)
		}
		as.ExpireAll()
		if err := call(c, "echo"); err != nil {
			t.Fatal(err)
		}
		if st := as.Stats(); st.Refreshes != 1 || st.Authorizations != 1 {
			t.Fatalf("%+v: want one refresh and no second authorization", st)
		}
	})
	t.Run("refused", func(t *testing.T) {
		as, srv := protected(t, []mcptest.AuthOption{mcptest.WithAuthMisbehavior(mcptest.RefuseRefresh)})
		c, err := connect(t, srv, oauth.Config{Grant: userFlow()})
		if err != nil {
			t.Fatal(err)
		}
		as.ExpireAll()
		if err := call(c, "echo"); err != nil {
			t.Fatal(err)
		}
		if st := as.Stats(); st.Authorizations != 2 {
			t.Fatalf("%+v: want a new authorization after the refused refresh", st)
		}
	})
}

// A 403 insufficient_scope asks for the scopes held and those the server names; a scope the
// authorization server never grants ends the call after a bounded number of authorizations,
// as unauthorized, with nothing run.
func TestStepUp(t *testing.T) {
	t.Run("granted", func(t *testing.T) {
		// Every request needs read, which the challenge names, so the client asks for it alone.
		as := mcptest.NewTestAuthServer(t, mcptest.WithAuthScopes("read", "admin"))
		srv := mcptest.NewTestHTTPServer(t, mcptest.WithAuthorization(as, "read"),
			mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echo),
			mcptest.WithTool(mcpclient.Tool{Name: "admin"}, echo),
			mcptest.WithToolScopes("admin", "admin"))
		c, err := connect(t, srv, oauth.Config{Grant: userFlow()})
		if err != nil {
			t.Fatal(err)
		}
		if err := call(c, "echo"); err != nil {
			t.Fatal(err)
		}
		if err := call(c, "admin"); err != nil {
			t.Fatal(err)
		}
		st := as.Stats()
		if st.Authorizations != 2 || !slices.Contains(st.Scopes, "admin") || !slices.Contains(st.Scopes, "read") {
			t.Fatalf("%+v: want a second authorization asking for admin", st)
		}
	})
	t.Run("never granted", func(t *testing.T) {
		as, srv := protected(t, []mcptest.AuthOption{mcptest.WithAuthScopes("read")},
			mcptest.WithToolScopes("admin", "admin"))
		c, err := connect(t, srv, oauth.Config{Grant: userFlow()})
		if err != nil {
			t.Fatal(err)
		}
		before := as.Stats().Authorizations
		err = call(c, "admin")
		if !errors.Is(err, mcpclient.ErrUnauthorized) || mcpclient.CodeOf(err) != mcpclient.CodeUnauthorized {
			t.Fatalf("err = %v, want ErrUnauthorized", err)
		}
		if n := as.Stats().Authorizations - before; n < 1 || n > 3 {
			t.Fatalf("%d authorizations for one call, want between 1 and 3", n)
		}
		if n := srv.Executions("admin"); n != 0 {
			t.Fatalf("the refused tool ran %d times", n)
		}
	})
}

// What the client refuses of an authorization server, each ending Connect as unauthorized
// with the reason in the chain.
func TestRefusedAuthorizationServers(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    mcptest.AuthMisbehavior
		want error
	}{
		{"iss missing", mcptest.OmitIss, oauth.ErrIssuerMismatch},
		{"iss wrong", mcptest.WrongIss, oauth.ErrIssuerMismatch},
		{"no PKCE", mcptest.NoPKCE, oauth.ErrNoPKCE},
		{"denied", mcptest.DenyAuthorization, oauth.ErrAuthorizationDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as, srv := protected(t, []mcptest.AuthOption{mcptest.WithAuthMisbehavior(tc.m)})
			_, err := connect(t, srv, oauth.Config{Grant: userFlow()})
			if !errors.Is(err, tc.want) || mcpclient.CodeOf(err) != mcpclient.CodeUnauthorized {
				t.Fatalf("err = %v (code %v), want %v and CodeUnauthorized", err, mcpclient.CodeOf(err), tc.want)
			}
			if st := as.Stats(); st.Tokens != 0 {
				t.Fatalf("%+v: a token was issued", st)
			}
		})
	}
}

// A service acting as itself: client credentials, by the method the server takes.
func TestClientCredentials(t *testing.T) {
	for _, methods := range [][]string{{"client_secret_basic"}, {"client_secret_post"}} {
		t.Run(methods[0], func(t *testing.T) {
			as, srv := protected(t, []mcptest.AuthOption{
				mcptest.WithAuthClient("svc", "s3cret"), mcptest.WithTokenEndpointAuthMethods(methods...)})
			c, err := connect(t, srv, oauth.Config{Grant: oauth.ClientCredentials{ClientID: "svc", ClientSecret: "s3cret"}})
			if err != nil {
				t.Fatal(err)
			}
			if err := call(c, "echo"); err != nil {
				t.Fatal(err)
			}
			if st := as.Stats(); st.ClientCredentials != 1 || st.Resource != srv.URL {
				t.Fatalf("%+v: want one client credentials grant for %s", st, srv.URL)
			}
		})
	}
	t.Run("wrong secret", func(t *testing.T) {
		_, srv := protected(t, []mcptest.AuthOption{mcptest.WithAuthClient("svc", "s3cret")})
		_, err := connect(t, srv, oauth.Config{Grant: oauth.ClientCredentials{ClientID: "svc", ClientSecret: "guess"}})
		if !errors.Is(err, oauth.ErrGrant) || mcpclient.CodeOf(err) != mcpclient.CodeUnauthorized {
			t.Fatalf("err = %v, want ErrGrant and CodeUnauthorized", err)
		}
	})
}

// Requests refused together share one authorization.
func TestConcurrentRefusalsShareOneAuthorization(t *testing.T) {
	as, srv := protected(t, []mcptest.AuthOption{mcptest.WithAuthMisbehavior(mcptest.RefuseRefresh)})
	c, err := connect(t, srv, oauth.Config{Grant: userFlow()})
	if err != nil {
		t.Fatal(err)
	}
	as.RevokeAll()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() { errs <- call(c, "echo") })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := as.Stats().Authorizations; n != 2 {
		t.Fatalf("%d authorizations, want 2: the first, and one for all the refused calls", n)
	}
}

// Nothing secret reaches the log, at the debug level, through a whole flow with a revocation.
func TestSecretsNeverLogged(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	as, srv := protected(t, nil)
	c, err := connect(t, srv, oauth.Config{Grant: userFlow(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	as.ExpireAll()
	if err := call(c, "echo"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	if !strings.Contains(out, "oauth:") {
		t.Fatalf("nothing logged: the test checks nothing")
	}
	for _, s := range as.Secrets() {
		if strings.Contains(out, s) {
			t.Fatalf("the log holds a secret:\n%s", out)
		}
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// The Authorizer gives its token to no other origin than the MCP server's.
func TestNoTokenForAnotherOrigin(t *testing.T) {
	_, srv := protected(t, nil)
	auth, err := oauth.New(oauth.Config{Grant: userFlow(), Resource: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := mcpclient.Connect(ctx, &transport.HTTP{URL: srv.URL, Authorizer: auth})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://evil.example/mcp", nil)
	if err := auth.Authorize(ctx, req); !errors.Is(err, oauth.ErrCrossOrigin) || req.Header.Get("Authorization") != "" {
		t.Fatalf("Authorize for another origin: %v, Authorization %q", err, req.Header.Get("Authorization"))
	}
}
