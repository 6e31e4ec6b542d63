package transport_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient/transport"
)

// tokenAuthorizer hands out "Bearer t<N>", N counting its authorizations; fail makes
// Reauthorize fail.
type tokenAuthorizer struct {
	mu      sync.Mutex
	n       int
	reauths int
	fail    error
}

func (a *tokenAuthorizer) Authorize(_ context.Context, req *http.Request) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	req.Header.Set("Authorization", fmt.Sprintf("Bearer t%d", a.n))
	return nil
}

func (a *tokenAuthorizer) Reauthorize(_ context.Context, _ *http.Request, resp *http.Response) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reauths++
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		return fmt.Errorf("asked to reauthorize a %d", resp.StatusCode)
	}
	if a.fail != nil {
		return a.fail
	}
	a.n++
	return nil
}

// guarded serves MCP answers to requests carrying the token want and refuses the others with
// 401; it records every POST body and the Authorization it came with.
type guarded struct {
	mu     sync.Mutex
	want   string
	bodies []string
	auths  []string
	gets   int
}

func (g *guarded) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	g.mu.Lock()
	want := g.want
	if r.Method == http.MethodPost {
		g.bodies = append(g.bodies, string(body))
		g.auths = append(g.auths, r.Header.Get("Authorization"))
	} else if r.Method == http.MethodGet {
		g.gets++
	}
	g.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+want {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="http://example/.well-known/oauth-protected-resource"`)
		http.Error(w, "no", http.StatusUnauthorized)
		return
	}
	switch r.Method {
	case http.MethodPost:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func ping() *transport.Message {
	return &transport.Message{Frame: []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), ID: "1", Method: "ping"}
}

// A request refused for want of credentials goes again, the same bytes, once the Authorizer has
// new ones.
func TestRefusedRequestIsResentAfterAuthorizing(t *testing.T) {
	g := &guarded{want: "t2"}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	a := new(tokenAuthorizer)
	c, q := httpConn(t, &transport.HTTP{URL: srv.URL, Authorizer: a})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Send(ctx, ping()); err != nil {
		t.Fatal(err)
	}
	if f, err := q.Receive(ctx); err != nil || !strings.Contains(string(f), `"result"`) {
		t.Fatalf("delivered %s, %v", f, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if strings.Join(g.auths, ",") != "Bearer t0,Bearer t1,Bearer t2" {
		t.Errorf("authorizations sent: %v", g.auths)
	}
	for _, b := range g.bodies {
		if b != string(ping().Frame) {
			t.Errorf("resent %q, want the same bytes", b)
		}
	}
}

// A server that refuses every new token costs a bounded number of round trips, and the request
// fails NotDelivered with ErrUnauthorized.
func TestEndlessRefusalIsBounded(t *testing.T) {
	g := &guarded{want: "never"}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	a := new(tokenAuthorizer)
	c, _ := httpConn(t, &transport.HTTP{URL: srv.URL, Authorizer: a})
	err := c.Send(context.Background(), ping())
	var te *transport.Error
	if !errors.As(err, &te) || te.Outcome != transport.NotDelivered || !errors.Is(err, transport.ErrUnauthorized) {
		t.Fatalf("err %v, want NotDelivered with ErrUnauthorized", err)
	}
	if len(g.bodies) > 4 || a.reauths > 3 {
		t.Errorf("%d sends and %d authorizations for one request", len(g.bodies), a.reauths)
	}
}

// An authorization that cannot be had ends the request NotDelivered, its cause in the chain.
func TestFailedAuthorizationEndsTheRequest(t *testing.T) {
	g := &guarded{want: "t1"}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	abandoned := errors.New("the user closed the browser")
	c, _ := httpConn(t, &transport.HTTP{URL: srv.URL, Authorizer: &tokenAuthorizer{fail: abandoned}})
	err := c.Send(context.Background(), ping())
	var te *transport.Error
	if !errors.As(err, &te) || te.Outcome != transport.NotDelivered || !errors.Is(err, transport.ErrUnauthorized) || !errors.Is(err, abandoned) {
		t.Fatalf("err %v", err)
	}
	if len(g.bodies) != 1 {
		t.Errorf("%d sends", len(g.bodies))
	}
}

// Without an Authorizer a 401 or a 403 is a refusal at the door: nothing ran.
func TestRefusalWithoutAuthorizerIsNotDelivered(t *testing.T) {
	for _, code := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "no", code)
		}))
		c, _ := httpConn(t, &transport.HTTP{URL: srv.URL})
		err := c.Send(context.Background(), ping())
		var te *transport.Error
		if !errors.As(err, &te) || te.Outcome != transport.NotDelivered || !errors.Is(err, transport.ErrUnauthorized) {
			t.Errorf("%d: err %v", code, err)
		}
		c.Close()
		srv.Close()
	}
}

// A 403 without a challenge is no matter of credentials: the Authorizer is not asked.
func TestForbiddenWithoutChallengeIsNotReauthorized(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "origin refused", http.StatusForbidden)
	}))
	t.Cleanup(srv.Close)
	a := new(tokenAuthorizer)
	c, _ := httpConn(t, &transport.HTTP{URL: srv.URL, Authorizer: a})
	if err := c.Send(context.Background(), ping()); !errors.Is(err, transport.ErrUnauthorized) {
		t.Fatalf("err %v", err)
	}
	if a.reauths != 0 {
		t.Errorf("reauthorized %d times", a.reauths)
	}
}

// The legacy transport authorizes its stream and its POSTs, and resends a refused POST.
func TestLegacyTransportAuthorizes(t *testing.T) {
	var mu sync.Mutex
	var posts []string
	var streamAuth string
	want := "Bearer t1"
	ready := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		if r.Method == http.MethodGet {
			if auth != want {
				w.Header().Set("WWW-Authenticate", "Bearer")
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			mu.Lock()
			streamAuth = auth
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "event: endpoint\ndata: /messages\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-ready:
				fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n")
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
			}
			<-r.Context().Done()
			return
		}
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		posts = append(posts, auth+" "+string(body))
		mu.Unlock()
		if auth != "Bearer t2" {
			w.Header().Set("WWW-Authenticate", "Bearer")
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		close(ready)
	}))
	t.Cleanup(srv.Close)
	a := new(tokenAuthorizer)
	q := new(queueRecv)
	conn, err := (&transport.SSE{URL: srv.URL, Authorizer: a}).Connect(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Send(context.Background(), ping()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if streamAuth != want {
		t.Errorf("stream opened with %q", streamAuth)
	}
	frame := string(ping().Frame)
	if len(posts) != 2 || posts[0] != "Bearer t1 "+frame || posts[1] != "Bearer t2 "+frame {
		t.Errorf("posts %q", posts)
	}
}

// queueRecv is a Receiver that drops what it is given.
type queueRecv struct{}

func (queueRecv) Deliver([]byte, string) bool { return true }
func (queueRecv) Fail(error)                  {}
