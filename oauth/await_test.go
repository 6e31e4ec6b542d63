package oauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient/oauth"
)

// The tests here are about the one authorization that requests refused together share: that it
// ends on every path, a panic in the caller's code included, and that a request waiting for it
// stops for its own reasons only. Each runs in a synctest bubble, with the servers in memory, so
// a request that would wait to its deadline fails the test at once on the fake clock.

const (
	awaitMCP    = "https://mcp.example/mcp"
	awaitIssuer = "https://as.example"
)

// handlerTransport serves its requests with h, in memory: a round trip ends when h has written
// its response, or when the request's context ends.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	done := make(chan *http.Response, 1)
	go func() {
		rec := httptest.NewRecorder()
		t.h.ServeHTTP(rec, req)
		done <- rec.Result()
	}()
	select {
	case resp := <-done:
		return resp, nil
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
}

// awaitServers is an MCP server's metadata and its authorization server, whose token endpoint
// holds the token requests for which hold says so (n is 1 for the first) until release closes.
type awaitServers struct {
	tokens  atomic.Int32
	hold    func(n int) bool
	release chan struct{}
}

func newAwaitServers(hold func(n int) bool) *awaitServers {
	return &awaitServers{hold: hold, release: make(chan struct{})}
}

func (s *awaitServers) client() *http.Client {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"resource": awaitMCP, "authorization_servers": []string{awaitIssuer}})
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{
			"issuer": awaitIssuer, "token_endpoint": awaitIssuer + "/token",
			"grant_types_supported": []string{"client_credentials"},
		})
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		if s.hold(int(s.tokens.Add(1))) {
			<-s.release
		}
		writeToken(w, "Bearer")
	})
	return &http.Client{Transport: handlerTransport{mux}}
}

// panickyStore is a MemoryStore whose Save panics the first time.
type panickyStore struct {
	*oauth.MemoryStore
	panicked atomic.Bool
}

var errStoreBug = errors.New("a bug in the caller's token store (test)")

func (s *panickyStore) Save(ctx context.Context, key string, c *oauth.Credentials) error {
	if s.panicked.CompareAndSwap(false, true) {
		panic(errStoreBug)
	}
	return s.MemoryStore.Save(ctx, key, c)
}

func newAwaitAuthorizer(t *testing.T, s *awaitServers, store oauth.TokenStore) *oauth.Authorizer {
	return mustNew(t, oauth.Config{
		Grant:      oauth.ClientCredentials{ClientID: "svc", ClientSecret: "secret"},
		Store:      store,
		HTTPClient: s.client(),
		Resource:   awaitMCP,
	})
}

// reauthorize answers a's 401 for a request to the MCP server, under ctx; the error arrives on
// the channel, with the time it took, or the panic it raised.
type reauthorized struct {
	err     error
	panic   any
	elapsed time.Duration
}

func (r reauthorized) String() string {
	return fmt.Sprintf("error %v, panic %v, after %v", r.err, r.panic, r.elapsed)
}

func reauthorize(ctx context.Context, a *oauth.Authorizer) <-chan reauthorized {
	out := make(chan reauthorized, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		var r reauthorized
		start := time.Now()
		defer func() {
			r.panic, r.elapsed = recover(), time.Since(start)
			out <- r
		}()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, awaitMCP, nil)
		refusal := &http.Response{StatusCode: http.StatusUnauthorized, Header: http.Header{
			"Www-Authenticate": {`Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource/mcp"`}}}
		r.err = a.Reauthorize(ctx, req, refusal)
	}()
	return out
}

// authorizedWith checks that a's next request carries the token the authorization server issued.
func authorizedWith(t *testing.T, a *oauth.Authorizer) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, awaitMCP, nil)
	if err := a.Authorize(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := req.Header.Get("Authorization"); got != "Bearer at-1" {
		t.Errorf("Authorization %q, want the issued token", got)
	}
}

// A panic during an authorization takes down the request whose authorization ran it, and only
// that: the request waiting for it is not left waiting, and ends authorized.
func TestAuthorizationPanicReleasesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newAwaitServers(func(n int) bool { return n == 1 })
		a := newAwaitAuthorizer(t, s, &panickyStore{MemoryStore: oauth.NewMemoryStore()})
		leader := reauthorize(context.Background(), a)
		synctest.Wait() // the token request is held
		waiter := reauthorize(context.Background(), a)
		synctest.Wait() // the waiter waits for the authorization
		close(s.release)
		if r := <-leader; r.panic != errStoreBug {
			t.Fatalf("the request whose authorization ran the store: %v, want its panic", r)
		}
		if r := <-waiter; r.err != nil || r.panic != nil || r.elapsed != 0 {
			t.Fatalf("the waiter: %v, want it authorized at once", r)
		}
		authorizedWith(t, a)
	})
}

// A request waiting for an authorization stops when its own context ends, with its own
// context's error; the authorization goes on.
func TestAuthorizationWaiterEndsWithItsOwnContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newAwaitServers(func(n int) bool { return n == 1 })
		a := newAwaitAuthorizer(t, s, nil)
		leader := reauthorize(context.Background(), a)
		synctest.Wait()
		errMine := errors.New("the waiter's own reason (test)")
		ctx, cancel := context.WithCancelCause(context.Background())
		waiter := reauthorize(ctx, a)
		synctest.Wait()
		cancel(errMine)
		if r := <-waiter; r.err != errMine || r.elapsed != 0 {
			t.Errorf("the cancelled waiter: %v, want its own context's cause at once", r)
		}
		close(s.release)
		if r := <-leader; r.err != nil || r.panic != nil {
			t.Errorf("the authorizing request: %v, want it authorized", r)
		}
		authorizedWith(t, a)
	})
}

// A request waiting for an authorization that failed because the authorizing request's own
// context ended does not take that cancellation for its own: it authorizes itself.
func TestAuthorizationWaiterDoesNotInheritTheLeadersCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newAwaitServers(func(n int) bool { return n == 1 })
		defer close(s.release)
		a := newAwaitAuthorizer(t, s, nil)
		ctx, cancel := context.WithCancel(context.Background())
		leader := reauthorize(ctx, a)
		synctest.Wait()
		waiter := reauthorize(context.Background(), a)
		synctest.Wait()
		cancel()
		if r := <-leader; !errors.Is(r.err, context.Canceled) {
			t.Errorf("the authorizing request: %v, want context.Canceled", r)
		}
		if r := <-waiter; r.err != nil || r.panic != nil || r.elapsed != 0 {
			t.Errorf("the waiter: %v, want it authorized at once", r)
		}
		if n := s.tokens.Load(); n != 2 {
			t.Errorf("%d token requests, want 2: the cancelled one and the waiter's", n)
		}
		authorizedWith(t, a)
	})
}
