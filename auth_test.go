package mcpclient_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// rotatingAuthorizer hands out "Bearer tN" and moves to the next token when refused; refuse
// makes Reauthorize fail.
type rotatingAuthorizer struct {
	n       atomic.Int32
	reauths atomic.Int32
	refuse  error
}

func (a *rotatingAuthorizer) Authorize(_ context.Context, req *http.Request) error {
	req.Header.Set("Authorization", fmt.Sprintf("Bearer t%d", a.n.Load()))
	return nil
}

func (a *rotatingAuthorizer) Reauthorize(context.Context, *http.Request, *http.Response) error {
	a.reauths.Add(1)
	if a.refuse != nil {
		return a.refuse
	}
	a.n.Add(1)
	return nil
}

// tokenGate lets through to next the requests carrying the current token and refuses the others
// with 401, before the MCP handler sees them; expire moves the current token on, as a token
// expiring does. It records the bodies of the tools/call requests that reached the gate.
type tokenGate struct {
	next  http.Handler
	mu    sync.Mutex
	token string
	calls []string
}

func (g *tokenGate) expire(next string) {
	g.mu.Lock()
	g.token = next
	g.mu.Unlock()
}

func (g *tokenGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	g.mu.Lock()
	if strings.Contains(string(body), `"tools/call"`) {
		g.calls = append(g.calls, string(body))
	}
	ok := r.Header.Get("Authorization") == "Bearer "+g.token
	g.mu.Unlock()
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		http.Error(w, "expired", http.StatusUnauthorized)
		return
	}
	g.next.ServeHTTP(w, r)
}

// A token that expires between calls costs a refusal before execution; the client authorizes
// and sends the same bytes under the same id: the tool runs once, the ledger holds one request.
func TestExpiredTokenResendsTheSameRequest(t *testing.T) {
	var runs atomic.Int32
	mcp := mcptest.NewTestHTTPServer(t, mcptest.WithTool(unsafeTool, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		runs.Add(1)
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("ok")}}, nil
	}))
	gate := &tokenGate{next: mcp, token: "t0"}
	srv := httptest.NewServer(gate)
	t.Cleanup(srv.Close)
	a := new(rotatingAuthorizer)
	c := connect(t, &transport.HTTP{URL: srv.URL, Authorizer: a})
	gate.expire("t1")
	res, err := c.CallTool(testCtx(t), "reserve", nil)
	if err != nil || res.Text() != "ok" {
		t.Fatalf("call: %v", err)
	}
	if runs.Load() != 1 || a.reauths.Load() != 1 {
		t.Errorf("%d runs, %d authorizations", runs.Load(), a.reauths.Load())
	}
	gate.mu.Lock()
	calls := gate.calls
	gate.mu.Unlock()
	if len(calls) != 2 || calls[0] != calls[1] {
		t.Fatalf("sent %q, want the same bytes twice", calls)
	}
	if n := c.Ledger().Len(); n != 1 {
		t.Errorf("ledger holds %d requests", n)
	}
}

// An authorization that cannot be had ends the call at once with CodeUnauthorized and the cause:
// nothing ran, and the retry policy does not send it again.
func TestUnauthorizedEndsTheCall(t *testing.T) {
	var runs atomic.Int32
	mcp := mcptest.NewTestHTTPServer(t, mcptest.WithTool(unsafeTool, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		runs.Add(1)
		return &mcpclient.CallToolResult{}, nil
	}))
	gate := &tokenGate{next: mcp, token: "t0"}
	srv := httptest.NewServer(gate)
	t.Cleanup(srv.Close)
	revoked := errors.New("refresh token revoked: sign in again")
	a := &rotatingAuthorizer{refuse: revoked}
	c := connect(t, &transport.HTTP{URL: srv.URL, Authorizer: a})
	gate.expire("t9")
	_, err := c.CallTool(testCtx(t), "reserve", nil)
	var e *mcpclient.Error
	if !errors.As(err, &e) || e.Code != mcpclient.CodeUnauthorized || !errors.Is(err, mcpclient.ErrUnauthorized) || !errors.Is(err, revoked) {
		t.Fatalf("err %v, want CodeUnauthorized with the cause", err)
	}
	if e.Attempts != 1 || runs.Load() != 0 || a.reauths.Load() != 1 {
		t.Errorf("%d attempts, %d runs, %d authorizations", e.Attempts, runs.Load(), a.reauths.Load())
	}
}

// A server that wants credentials the client does not have refuses the handshake: Connect fails
// at once with CodeUnauthorized instead of dialing as often as the retry policy allows.
func TestConnectWithoutCredentialsFailsAtOnce(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="http://example/.well-known/oauth-protected-resource"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	_, err := mcpclient.Connect(testCtx(t), &transport.HTTP{URL: srv.URL}, noWait)
	if mcpclient.CodeOf(err) != mcpclient.CodeUnauthorized || !errors.Is(err, mcpclient.ErrUnauthorized) {
		t.Fatalf("err %v", err)
	}
	if n := hits.Load(); n > 2 {
		t.Errorf("%d requests: the refusal was retried", n)
	}
}
