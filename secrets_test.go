package mcpclient_test

// Secrets stay out of logs and errors: headers, session ids, and an endpoint URL's user name,
// password, query and fragment, even when the URL is mistyped or unparsable.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cenkalti/backoff/v4"
	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/transport"
)

func TestSecuritySecretsNeverLogged(t *testing.T) {
	t.Parallel()
	const (
		token    = "tok-5ecret-authorization"
		cookie   = "c00kie-5ecret"
		password = "pa55word-5ecret"
	)
	run := func(t *testing.T, tr transport.Transport, logs *lockedBuffer, secret []string, exercise func(c *mcpclient.Client) []error) {
		logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c := connect(t, tr, mcpclient.WithLogger(logger))
		errs := exercise(c)
		c.Close()
		out := logs.String()
		if !strings.Contains(out, `msg="mcpclient: retrying"`) || !strings.Contains(out, "EOF") {
			t.Fatalf("no retry after a reset was logged: the test exercises nothing\n%s", out)
		}
		for _, s := range secret {
			if strings.Contains(out, s) {
				t.Errorf("the logs show the secret %q:\n%s", s, out)
			}
			for _, err := range errs {
				if err != nil && strings.Contains(err.Error(), s) {
					t.Errorf("an error shows the secret %q: %v", s, err)
				}
			}
		}
	}

	t.Run("streamable http", func(t *testing.T) {
		var sessions atomic.Int32
		var resetOnce, failOnce, expireOnce, junkOnce = testpeer.Once(), testpeer.Once(), testpeer.Once(), testpeer.Once()
		srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
			switch r.Method {
			case "initialize":
				r.W.Header().Set("Mcp-Session-Id", fmt.Sprintf("sess-5ecret-%d", sessions.Add(1)))
				r.JSON(testpeer.Result(r.ID, testpeer.InitResult))
				return true
			case "ping":
				switch {
				case resetOnce():
					r.HangUp() // uncertain: the ping is re-issued, and the retry logged
					return true
				case expireOnce():
					http.Error(r.W, "gone", http.StatusNotFound) // a new session, a new id
					return true
				}
			case "tools/call":
				switch {
				case failOnce():
					r.W.Header().Set("Retry-After", "0")
					http.Error(r.W, "busy", http.StatusServiceUnavailable)
					return true
				case junkOnce():
					event := r.SSE()
					event("", `{not json`)
					event("", testpeer.Result(json.RawMessage(`"nobody"`), `{}`))
					event("", testpeer.Result(r.ID, testpeer.ToolResult))
					return true
				}
			}
			return false
		})
		logs := new(lockedBuffer)
		// A token in the URL's query is as secret as one in a header.
		u := strings.Replace(srv.URL, "http://", "http://user:"+password+"@", 1) + "/mcp?api_key=query-5ecret"
		tr := &transport.HTTP{
			URL:    u,
			Header: http.Header{"Cookie": {"sid=" + cookie}},
			HeaderFunc: func(_ context.Context, h http.Header) error {
				h.Set("Authorization", "Bearer "+token)
				return nil
			},
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		}
		run(t, tr, logs, []string{token, cookie, password, "sess-5ecret", "query-5ecret"}, func(c *mcpclient.Client) []error {
			var errs []error
			errs = append(errs, c.Ping(testCtx(t)), c.Ping(testCtx(t)))
			_, err := c.CallTool(testCtx(t), "reserve", nil)
			errs = append(errs, err)
			_, err = c.CallTool(testCtx(t), "reserve", nil)
			errs = append(errs, err)
			for _, err := range errs {
				if err != nil {
					t.Errorf("call: %v", err)
				}
			}
			if sessions.Load() < 2 {
				t.Errorf("%d sessions, want a second one after the expiry", sessions.Load())
			}
			return errs
		})
	})

	// The legacy transport's session id is in the endpoint's query, which net/http puts in the
	// errors of failed requests.
	t.Run("legacy", func(t *testing.T) {
		const session = "legacy-sess-5ecret"
		resetPing, resetCall := testpeer.Once(), testpeer.Once()
		srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
			if (r.Method == "ping" && resetPing()) || (r.Method == "tools/call" && resetCall()) {
				r.HangUp()
				return true
			}
			return false
		}, testpeer.Legacy(session))
		logs := new(lockedBuffer)
		tr := &transport.SSE{
			URL:        srv.URL + "/sse",
			Header:     http.Header{"Cookie": {"sid=" + cookie}},
			HeaderFunc: func(_ context.Context, h http.Header) error { h.Set("Authorization", "Bearer "+token); return nil },
			Logger:     slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		}
		run(t, tr, logs, []string{token, cookie, session}, func(c *mcpclient.Client) []error {
			err := c.Ping(testCtx(t)) // reset once, re-issued: the retry is logged with its cause
			if err != nil {
				t.Errorf("ping: %v", err)
			}
			// An unsafe call whose connection was reset: the caller gets the error, and may log it.
			_, callErr := c.CallTool(testCtx(t), "reserve", nil)
			if !errors.Is(callErr, mcpclient.ErrOutcomeUnknown) {
				t.Errorf("call: %v, want ErrOutcomeUnknown", callErr)
			}
			return []error{err, callErr}
		})
	})
}

// TestSecurityEndpointSecretsNeverShown: the password, user name and query of an endpoint URL
// stay out of errors and logs, whether the URL is mistyped, unparsable, unreachable or fails
// in the middle of a session.
func TestSecurityEndpointSecretsNeverShown(t *testing.T) {
	secrets := []string{"alice", "pa55word", "SECRET"}
	dead := httptest.NewServer(http.NotFoundHandler())
	deadHost := dead.Listener.Addr().String()
	dead.Close()
	check := func(t *testing.T, err error, logs *lockedBuffer) {
		t.Helper()
		for _, s := range secrets {
			if err != nil && strings.Contains(err.Error(), s) {
				t.Errorf("the error shows %q: %v", s, err)
			}
			if out := logs.String(); strings.Contains(out, s) {
				t.Errorf("the logs show %q:\n%s", s, out)
			}
		}
	}
	connect := func(tr transport.Transport, logs *lockedBuffer, opts ...mcpclient.Option) (*mcpclient.Client, error) {
		logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		return mcpclient.Connect(testCtx(t), tr, append([]mcpclient.Option{mcpclient.WithLogger(logger),
			mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{MaxAttempts: 2, NewBackOff: func() backoff.BackOff { return &backoff.ZeroBackOff{} }}),
		}, opts...)...)
	}
	for name, u := range map[string]string{
		"mistyped scheme": "htps://alice:pa55word@mcp.example.invalid/mcp?access_token=SECRET",
		"no slashes":      "https:alice:pa55word@mcp.example.invalid/mcp?access_token=SECRET",
		"unparsable":      "http://alice:pa55word@[::1/mcp?token=SECRET",
		"bad port":        "http://alice:pa55word/@mcp.example.invalid/mcp?token=SECRET",
		"refused dial":    "http://alice:pa55word@" + deadHost + "/mcp?access_token=SECRET&SECRET",
	} {
		for _, kind := range []string{"http", "legacy"} {
			t.Run(kind+" "+name, func(t *testing.T) {
				logs := new(lockedBuffer)
				logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
				var tr transport.Transport = &transport.HTTP{URL: u, Logger: logger}
				if kind == "legacy" {
					tr = &transport.SSE{URL: u, Logger: logger}
				}
				c, err := connect(tr, logs)
				if err == nil {
					c.Close()
					t.Fatal("connected")
				}
				if !errors.Is(err, mcpclient.ErrNotDelivered) {
					t.Errorf("error %v, want ErrNotDelivered", err)
				}
				check(t, err, logs)
			})
		}
	}

	// A session whose GET stream and DELETE fail: both are logged.
	t.Run("http session", func(t *testing.T) {
		srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
			if r.HTTPMethod == http.MethodGet || r.HTTPMethod == http.MethodDelete {
				r.HangUp()
				return true
			}
			return false
		})
		logs := new(lockedBuffer)
		u := strings.Replace(srv.URL, "http://", "http://alice:pa55word@", 1) + "/mcp?access_token=SECRET"
		tr := &transport.HTTP{URL: u, MaxResumes: 1,
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
		c, err := connect(tr, logs, mcpclient.WithServerStream())
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		out := logs.String()
		if !strings.Contains(out, "no server stream") || !strings.Contains(out, "DELETE of the session failed") {
			t.Fatalf("the failures of the GET stream and the DELETE were not logged: the test exercises nothing\n%s", out)
		}
		check(t, nil, logs)
	})
}

// lockedBuffer is a bytes.Buffer for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
