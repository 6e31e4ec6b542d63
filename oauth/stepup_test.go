package oauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient/oauth"
)

// inProcess serves requests with h without a network, so that a synctest bubble's clock runs
// while requests are served.
type inProcess struct{ h http.Handler }

func (p inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil {
		r.Body = http.NoBody
	}
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// signIns is a RedirectHandler standing for a user who signs in, or refuses consent to the
// scopes deny matches; it counts the sign-ins.
type signIns struct {
	n    atomic.Int32
	deny func(scope string) bool
}

func (s *signIns) RedirectURI(context.Context) (string, error) {
	return "http://127.0.0.1:1/callback", nil
}

func (s *signIns) Authorize(_ context.Context, authURL string) (url.Values, error) {
	s.n.Add(1)
	u, err := url.Parse(authURL)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	if s.deny != nil && s.deny(q.Get("scope")) {
		return url.Values{"error": {"access_denied"}, "state": {q.Get("state")}}, nil
	}
	return url.Values{"code": {"c"}, "state": {q.Get("state")}}, nil
}

// A step-up the authorization server will not grant costs the user one sign-in, not one per
// call: a repeat within StepUpRetryAfter fails at once, saying when it will be tried again; after
// that, it is tried again.
func TestImpossibleStepUpNotRepeated(t *testing.T) {
	for _, tc := range []struct {
		name string
		// reportScope: the token response names the scopes granted (fewer than asked).
		reportScope bool
		deny        bool
		ttl         time.Duration
	}{
		{name: "granted fewer, said so", reportScope: true},
		{name: "granted fewer silently", ttl: time.Minute},
		{name: "refused", reportScope: true, deny: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t)
			var issued atomic.Int32
			f.token = func(w http.ResponseWriter, r *http.Request) {
				m := map[string]any{"access_token": fmt.Sprintf("at-%d", issued.Add(1)), "token_type": "Bearer", "expires_in": 3600}
				if tc.reportScope {
					m["scope"] = "read"
				}
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(m)
			}
			handler := f.Config.Handler
			synctest.Test(t, func(t *testing.T) {
				user := &signIns{}
				if tc.deny {
					user.deny = func(scope string) bool { return strings.Contains(scope, "admin") }
				}
				a := mustNew(t, oauth.Config{
					Grant:            oauth.AuthorizationCode{Redirect: user, ClientID: "app"},
					HTTPClient:       &http.Client{Transport: inProcess{handler}},
					StepUpRetryAfter: tc.ttl,
				})
				ttl := tc.ttl
				if ttl == 0 {
					ttl = 10 * time.Minute
				}
				ctx := context.Background()
				prmURL := f.URL + "/.well-known/oauth-protected-resource/mcp"
				// send has the MCP server answer refusal to a request with the current token, and
				// returns what Reauthorize made of it and of the refusals of its resends.
				send := func(refusal string) error {
					for range 3 { // the transport's bound on authorizations per request
						req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.URL+"/mcp", nil)
						if err := a.Authorize(ctx, req); err != nil {
							return err
						}
						status := http.StatusForbidden
						if refusal == "" {
							if req.Header.Get("Authorization") != "" {
								return nil // served
							}
							status = http.StatusUnauthorized
						}
						resp := &http.Response{StatusCode: status, Header: http.Header{
							"Www-Authenticate": {`Bearer ` + refusal + ` resource_metadata="` + prmURL + `"`}}}
						if err := a.Reauthorize(ctx, req, resp); err != nil {
							return err
						}
					}
					return errors.New("still refused")
				}
				if err := send(""); err != nil || user.n.Load() != 1 {
					t.Fatalf("signing in: %v, %d sign-ins", err, user.n.Load())
				}
				needAdmin := `error="insufficient_scope", scope="admin",`
				start := time.Now()
				err := send(needAdmin)
				if !errors.Is(err, oauth.ErrStepUpRefused) || user.n.Load() != 2 {
					t.Fatalf("the first step-up: %v, %d sign-ins; want ErrStepUpRefused after one more", err, user.n.Load())
				}
				err = send(needAdmin)
				var refused *oauth.StepUpRefusedError
				if !errors.As(err, &refused) || !refused.Recently || user.n.Load() != 2 {
					t.Fatalf("the repeat: %v, %d sign-ins; want a refusal without one", err, user.n.Load())
				}
				if !refused.RetryAt.Equal(start.Add(ttl)) || !strings.Contains(err.Error(), "admin") ||
					!strings.Contains(err.Error(), "recently") || refused.Resource != f.URL+"/mcp" {
					t.Fatalf("the repeat: %+v %q; want it to say when it is retried (%v) and for what", refused, err, start.Add(ttl))
				}
				time.Sleep(ttl)
				if err := send(needAdmin); !errors.Is(err, oauth.ErrStepUpRefused) || user.n.Load() != 3 {
					t.Fatalf("after %v: %v, %d sign-ins; want the step-up tried again", ttl, err, user.n.Load())
				}
			})
		})
	}
}

// A token endpoint that refuses the scopes (invalid_scope) is remembered as a failed step-up;
// one that fails (HTTP 500) is not, and the next call asks again.
func TestStepUpRefusalAtTheTokenEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int
		body       string
		remembered bool
	}{
		{"invalid_scope", http.StatusBadRequest, `{"error":"invalid_scope"}`, true},
		{"server failure", http.StatusInternalServerError, `{"error":"server_error"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t)
			var requests atomic.Int32
			f.token = func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				r.ParseForm()
				if strings.Contains(r.Form.Get("scope"), "admin") {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(tc.status)
					w.Write([]byte(tc.body))
					return
				}
				writeToken(w, "Bearer")
			}
			a := mustNew(t, oauth.Config{Grant: oauth.ClientCredentials{ClientID: "svc", ClientSecret: "s"}})
			req, err := authorizeOnce(t, f, a)
			if err != nil {
				t.Fatal(err)
			}
			refusal := &http.Response{StatusCode: http.StatusForbidden, Header: http.Header{
				"Www-Authenticate": {`Bearer error="insufficient_scope", scope="admin", resource_metadata="` + f.URL + `/.well-known/oauth-protected-resource/mcp"`}}}
			for i := range 2 {
				err := a.Reauthorize(context.Background(), req, refusal)
				if err == nil || errors.Is(err, oauth.ErrStepUpRefused) != tc.remembered {
					t.Fatalf("step-up %d: %v", i+1, err)
				}
			}
			want := int32(3)
			if tc.remembered {
				want = 2
			}
			if n := requests.Load(); n != want {
				t.Fatalf("%d token requests, want %d", n, want)
			}
		})
	}
}
