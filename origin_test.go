package mcpclient_test

// Requests, their bodies and credentials stay with the endpoint's origin: a redirect to another
// origin is refused before it is followed unless the caller allows that origin, a legacy
// endpoint must be of the stream's origin, and the caller's TLS configuration decides which
// servers are trusted. Where a refusal comes at Connect, the transport is usable afterwards.
//
// Most servers here are fronts of their own before an mcptest server, not scripted servers of
// internal/testpeer: what they do to the requests (redirect them, rewrite the legacy endpoint,
// stand for several origins at one address, serve TLS) is what the tests are about.

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// sameAddr returns an HTTP client that reaches every host name at srv's address, so that one test
// server can stand for several origins.
func sameAddr(srv *httptest.Server) *http.Client {
	addr := srv.Listener.Addr().String()
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
}

// A redirect of a request to another origin is refused before the redirected request is sent:
// neither its body nor its credentials leave the endpoint's origin, and the request, not
// delivered, is sent again.
func TestSecurityCredentialsStayWithTheirOrigin(t *testing.T) {
	t.Parallel()
	const (
		home  = "mcp.example.test"
		token = "Bearer secret-token"
	)
	// net/http forwards Authorization and Cookie to a subdomain of the original host; an MCP
	// endpoint's requests and credentials are for its origin only.
	for _, other := range []string{"evil." + home, "other.example.test"} {
		for _, kind := range []string{"http", "legacy"} {
			t.Run(kind+" to "+other, func(t *testing.T) {
				var port string
				var homeMu sync.Mutex
				var homeAuth []string
				var elsewhere atomic.Int32
				var runs atomic.Int32
				first := testpeer.Once()
				mcp := mcptest.NewTestHTTPServer(t, mcptest.WithAllowedHosts(home), mcptest.WithTool(unsafeTool, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
					runs.Add(1)
					return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("ok")}}, nil
				}))
				front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Host != home+":"+port {
						elsewhere.Add(1)
						http.Error(w, "forbidden", http.StatusForbidden)
						return
					}
					homeMu.Lock()
					homeAuth = append(homeAuth, r.Header.Get("Authorization"))
					homeMu.Unlock()
					body, _ := io.ReadAll(r.Body)
					r.Body = io.NopCloser(bytes.NewReader(body))
					if r.Method == http.MethodPost && bytes.Contains(body, []byte(`"tools/call"`)) && first() {
						// 307 keeps the method, the body and (within net/http's rules) the headers.
						http.Redirect(w, r, "http://"+other+":"+port+"/steal", http.StatusTemporaryRedirect)
						return
					}
					mcp.ServeHTTP(w, r)
				}))
				_, port, _ = net.SplitHostPort(front.Listener.Addr().String())
				front.Start()
				t.Cleanup(front.Close)
				client := sameAddr(front)
				defer client.CloseIdleConnections()
				header := http.Header{"Cookie": {"session=cookie-secret"}, "Proxy-Authorization": {"Basic cHJveHk6c2VjcmV0"}, "X-Api-Key": {"key-secret"}}
				headerFunc := func(_ context.Context, h http.Header) error {
					h.Set("Authorization", token)
					return nil
				}
				var tr transport.Transport = &transport.HTTP{URL: "http://" + home + ":" + port + "/mcp", Client: client, Header: header, HeaderFunc: headerFunc}
				if kind == "legacy" {
					tr = &transport.SSE{URL: "http://" + home + ":" + port + "/sse", Client: client, Header: header, HeaderFunc: headerFunc}
				}
				var retried []error
				c := connect(t, tr, mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{
					OnRetry: func(_ int, err error, _ time.Duration) { retried = append(retried, err) },
				}))
				res, err := c.CallTool(testCtx(t), "reserve", nil)
				if err != nil || res.Text() != "ok" {
					t.Fatalf("call: %v, want the endpoint's own answer to the resend", err)
				}
				if len(retried) != 1 || !errors.Is(retried[0], transport.ErrCrossOriginRedirect) {
					t.Errorf("retried after %v, want one refused redirect", retried)
				}
				if n := elsewhere.Load(); n != 0 {
					t.Errorf("%d requests reached %s", n, other)
				}
				if n := runs.Load(); n != 1 {
					t.Errorf("the tool ran %d times", n)
				}
				stillUsable(t, c)
				homeMu.Lock()
				defer homeMu.Unlock()
				for i, a := range homeAuth {
					if a != token {
						t.Errorf("request %d to the endpoint's own origin carried Authorization %q", i, a)
					}
				}
			})
		}
	}
}

// Every request of a session stays within the endpoint's origin: a tool call, the GET stream and
// the DELETE redirected elsewhere are refused before anything reaches the other origin, with an
// error naming both origins and no more of their URLs. An origin the caller allows is trusted as
// the endpoint's own: the requests go there with their credentials, and its answers count.
func TestSecurityRedirectsStayWithinTheOrigin(t *testing.T) {
	t.Parallel()
	const (
		home  = "mcp.example.test"
		other = "other.example.test"
		token = "Bearer secret-token"
	)
	type seen struct{ method, auth, session string }
	for _, allowed := range []bool{false, true} {
		t.Run(fmt.Sprint("allowed=", allowed), func(t *testing.T) {
			var port string
			var mu sync.Mutex
			var elsewhere []seen
			var runs atomic.Int32
			mcp := mcptest.NewTestHTTPServer(t, mcptest.WithAllowedHosts(home, other), mcptest.WithTool(unsafeTool, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
				runs.Add(1)
				return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("ok")}}, nil
			}))
			front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Host != home+":"+port {
					// The same server stands for the deployment's other origin.
					mu.Lock()
					elsewhere = append(elsewhere, seen{r.Method, r.Header.Get("Authorization"), r.Header.Get("Mcp-Session-Id")})
					mu.Unlock()
					mcp.ServeHTTP(w, r)
					return
				}
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				if r.Method != http.MethodPost || bytes.Contains(body, []byte(`"tools/call"`)) {
					http.Redirect(w, r, "http://user:pass@"+other+":"+port+"/mcp?key=secret", http.StatusTemporaryRedirect)
					return
				}
				mcp.ServeHTTP(w, r)
			}))
			_, port, _ = net.SplitHostPort(front.Listener.Addr().String())
			front.Start()
			t.Cleanup(front.Close)
			client := sameAddr(front)
			defer client.CloseIdleConnections()
			tr := &transport.HTTP{URL: "http://" + home + ":" + port + "/mcp", Client: client, Header: http.Header{"Authorization": {token}}}
			if allowed {
				tr.AllowedRedirectOrigins = []string{"http://" + other + ":" + port}
			}
			c := connect(t, tr, mcpclient.WithServerStream(), mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{MaxAttempts: 1}))
			res, err := c.CallTool(testCtx(t), "reserve", nil)
			sid := c.SessionID()
			c.Close()
			mu.Lock()
			defer mu.Unlock()
			if allowed {
				if err != nil || res.Text() != "ok" {
					t.Fatalf("call: %v, want the allowed origin's answer", err)
				}
				methods := map[string]bool{}
				for _, s := range elsewhere {
					methods[s.method] = true
					if s.auth != token || s.session != sid {
						t.Errorf("%s to the allowed origin carried Authorization %q and session %q, want the endpoint's", s.method, s.auth, s.session)
					}
				}
				for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
					if !methods[m] {
						t.Errorf("no %s reached the allowed origin", m)
					}
				}
				return
			}
			var redirect *transport.CrossOriginRedirectError
			if !errors.Is(err, mcpclient.ErrNotDelivered) || !errors.As(err, &redirect) || !errors.Is(err, transport.ErrCrossOriginRedirect) {
				t.Fatalf("call: %v, want ErrNotDelivered with a refused redirect", err)
			}
			if want := (transport.CrossOriginRedirectError{From: "http://" + home + ":" + port, To: "http://" + other + ":" + port}); *redirect != want {
				t.Errorf("refused %+v, want %+v", *redirect, want)
			}
			if msg := redirect.Error(); strings.ContainsAny(msg, "@?") || strings.Contains(msg, "pass") || strings.Contains(msg, "secret") {
				t.Errorf("the error shows more than the origins: %s", msg)
			}
			if len(elsewhere) != 0 || runs.Load() != 0 {
				t.Errorf("the other origin saw %v, the tool ran %d times", elsewhere, runs.Load())
			}
		})
	}
}

func TestSecurityLegacyEndpointMustBeSameOrigin(t *testing.T) {
	t.Parallel()
	mcp := mcptest.NewTestHTTPServer(t)
	var endpoint atomic.Value // string: the endpoint event to send instead of mcptest's, if any
	endpoint.Store("")
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e := endpoint.Load().(string); e != "" && r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: endpoint\ndata: %s\n\n", e)
			return
		}
		mcp.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	_, port, _ := net.SplitHostPort(front.Listener.Addr().String())
	tr := &transport.SSE{URL: front.URL + "/sse"}
	for name, e := range map[string]string{
		"scheme-relative": "//evil.example.invalid/message?sessionId=1",
		"other scheme":    "https://127.0.0.1:" + port + "/message?sessionId=1",
		"other host name": "http://localhost:" + port + "/message?sessionId=1",
		"userinfo trick":  "http://127.0.0.1:" + port + "@evil.example.invalid/message?sessionId=1",
		"backslash trick": "http://evil.example.invalid\\@127.0.0.1:" + port + "/message",
	} {
		t.Run(name, func(t *testing.T) {
			endpoint.Store(e)
			_, err := mcpclient.Connect(testCtx(t), tr, mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{MaxAttempts: 1}))
			if !errors.Is(err, mcpclient.ErrNotDelivered) {
				t.Fatalf("error %v, want ErrNotDelivered", err)
			}
			// An unparsable endpoint is refused too, before anything is sent.
			if !errors.Is(err, transport.ErrCrossOriginEndpoint) && !strings.Contains(err.Error(), "no URL") {
				t.Fatalf("error %v, want a refusal of the endpoint", err)
			}
			// The same transport connects once the server names its own origin.
			endpoint.Store("")
			c := connect(t, tr)
			if err := c.Ping(testCtx(t)); err != nil {
				t.Fatalf("ping: %v", err)
			}
		})
	}
}

// The legacy endpoint is read against the URL the stream came from after its redirects: a stream
// moved to an allowed origin has its endpoint there, and an endpoint of another origin than the
// stream's is refused, the configured one included. A redirect of the stream to an origin not
// allowed is refused before the GET reaches it: an open redirect on the SSE URL does not let
// another origin choose the endpoint and session the caller's credentials go to.
func TestSecurityLegacyEndpointIsReadAgainstTheStreamsOrigin(t *testing.T) {
	t.Parallel()
	const (
		home  = "mcp.example.test"
		moved = "moved.example.test"
	)
	var port string
	mcp := mcptest.NewTestHTTPServer(t, mcptest.WithAllowedHosts(home, moved))
	var endpoint atomic.Value // string: the endpoint event the moved stream sends instead of mcptest's, if any
	endpoint.Store("")
	var mu sync.Mutex
	var seen []string // host, method and path of every request
	front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.Host)
		mu.Lock()
		seen = append(seen, host+" "+r.Method+" "+r.URL.Path)
		mu.Unlock()
		switch {
		case host == home && r.URL.Path == "/sse":
			http.Redirect(w, r, "http://"+moved+":"+port+"/sse", http.StatusTemporaryRedirect)
			return
		case host == moved && r.Method == http.MethodGet && endpoint.Load() != "":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: endpoint\ndata: %s\n\n", endpoint.Load())
			return
		}
		mcp.ServeHTTP(w, r)
	}))
	_, port, _ = net.SplitHostPort(front.Listener.Addr().String())
	front.Start()
	t.Cleanup(front.Close)
	client := sameAddr(front)
	defer client.CloseIdleConnections()
	requests := func() []string {
		mu.Lock()
		defer mu.Unlock()
		r := seen
		seen = nil
		return r
	}
	tr := &transport.SSE{URL: "http://" + home + ":" + port + "/sse", Client: client}
	once := mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{MaxAttempts: 1})

	_, err := mcpclient.Connect(testCtx(t), tr, once)
	if !errors.Is(err, mcpclient.ErrNotDelivered) || !errors.Is(err, transport.ErrCrossOriginRedirect) {
		t.Fatalf("connect: %v, want the redirect of the stream refused", err)
	}
	if got := requests(); !slices.Equal(got, []string{home + " GET /sse"}) {
		t.Errorf("requests %q, want the GET of the stream only", got)
	}

	tr.AllowedRedirectOrigins = []string{"http://" + moved + ":" + port}
	c := connect(t, tr)
	if err := c.Ping(testCtx(t)); err != nil {
		t.Fatalf("ping: %v", err)
	}
	c.Close()
	for _, r := range requests() {
		if r != home+" GET /sse" && !strings.HasPrefix(r, moved+" ") {
			t.Errorf("%s: the endpoint of a stream that moved is where the stream is", r)
		}
	}

	endpoint.Store("http://" + home + ":" + port + "/message?sessionId=chosen-elsewhere")
	_, err = mcpclient.Connect(testCtx(t), tr, once)
	if !errors.Is(err, mcpclient.ErrNotDelivered) || !errors.Is(err, transport.ErrCrossOriginEndpoint) {
		t.Fatalf("connect: %v, want the endpoint on another origin than the stream's refused", err)
	}
	for _, r := range requests() {
		if strings.Contains(r, "POST") {
			t.Errorf("%s: a message was sent to the endpoint the moved stream named", r)
		}
	}
}

// quietTLSServer is an httptest TLS server that does not log the handshakes refused by clients
// that do not trust it.
func quietTLSServer(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func TestSecurityTLSConfigPassesThrough(t *testing.T) {
	t.Parallel()
	srv := quietTLSServer(t, testpeer.NewHTTP(t, nil))

	// The default client does not trust the test CA: nothing is sent.
	_, err := mcpclient.Connect(testCtx(t), &transport.HTTP{URL: srv.URL}, mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{MaxAttempts: 1}))
	var unknownCA x509.UnknownAuthorityError
	if !errors.Is(err, mcpclient.ErrNotDelivered) || !errors.As(err, &unknownCA) {
		t.Fatalf("error %v, want ErrNotDelivered for a certificate of an unknown authority", err)
	}

	// The caller's client, with the test CA in its TLS config, is the one used, and so is its
	// TLS config on a cross-check: a client that demands a server name the certificate lacks
	// fails.
	stillUsable(t, connect(t, &transport.HTTP{URL: srv.URL, Client: srv.Client()}))

	strict := srv.Client()
	tlsConfig := strict.Transport.(*http.Transport).TLSClientConfig.Clone()
	tlsConfig.ServerName = "not-in-the-certificate.example"
	strict = &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	defer strict.CloseIdleConnections()
	_, err = mcpclient.Connect(testCtx(t), &transport.HTTP{URL: srv.URL, Client: strict}, mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{MaxAttempts: 1}))
	var hostErr x509.HostnameError
	if !errors.Is(err, mcpclient.ErrNotDelivered) || !errors.As(err, &hostErr) {
		t.Fatalf("error %v, want ErrNotDelivered for the caller's ServerName", err)
	}

	// The legacy transport passes the caller's client through too.
	mcp := mcptest.NewTestHTTPServer(t)
	legacy := quietTLSServer(t, mcp)
	_, err = mcpclient.Connect(testCtx(t), &transport.SSE{URL: legacy.URL + "/sse"}, mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{MaxAttempts: 1}))
	if !errors.Is(err, mcpclient.ErrNotDelivered) || !errors.As(err, &unknownCA) {
		t.Fatalf("legacy: error %v, want ErrNotDelivered for a certificate of an unknown authority", err)
	}
	c := connect(t, &transport.SSE{URL: legacy.URL + "/sse", Client: legacy.Client()})
	if err := c.Ping(testCtx(t)); err != nil {
		t.Fatalf("legacy ping: %v", err)
	}
}

// A redirect to another origin is refused before anything reaches it: the request, not
// delivered, and its credentials stay with the endpoint's origin.
func TestHTTPCredentialsStayWithTheirOrigin(t *testing.T) {
	t.Parallel()
	var reached atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		http.Error(w, "nope", http.StatusNotFound)
	}))
	defer target.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()

	tr := &transport.HTTP{URL: redirector.URL, Header: http.Header{"Authorization": {"Bearer secret"}, "Cookie": {"s=1"}}}
	_, err := mcpclient.Connect(context.Background(), tr)
	var redirect *transport.CrossOriginRedirectError
	if !errors.Is(err, mcpclient.ErrNotDelivered) || !errors.As(err, &redirect) {
		t.Fatalf("error %v, want ErrNotDelivered with the refused redirect", err)
	}
	if redirect.From != redirector.URL || redirect.To != target.URL {
		t.Errorf("refused %+v, want from %s to %s", *redirect, redirector.URL, target.URL)
	}
	// The server will redirect again: Connect does not try again.
	if e := asError(t, err); e.Attempts != 1 {
		t.Errorf("%d attempts, want 1", e.Attempts)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("%d requests reached the other origin", n)
	}
}

func TestHTTPHeaderFuncAndSameOriginRedirect(t *testing.T) {
	t.Parallel()
	srv := mcptest.NewTestHTTPServer(t)
	var mu sync.Mutex
	var auth []string
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/mcp", http.StatusPermanentRedirect) // same origin
			return
		}
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		srv.ServeHTTP(w, r)
	}))
	defer front.Close()
	n := 0
	tr := &transport.HTTP{URL: front.URL + "/old", HeaderFunc: func(_ context.Context, h http.Header) error {
		n++
		h.Set("Authorization", "Bearer fresh")
		return nil
	}}
	c, err := mcpclient.Connect(context.Background(), tr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n < 3 || len(auth) < 3 {
		t.Fatalf("HeaderFunc ran %d times, server saw %d requests", n, len(auth))
	}
	for i, a := range auth {
		if a != "Bearer fresh" {
			t.Errorf("request %d after a same-origin redirect: Authorization %q", i, a)
		}
	}
}

func TestLegacySSEEndpointMustBeSameOrigin(t *testing.T) {
	t.Parallel()
	elsewhere := httptest.NewServer(http.NotFoundHandler())
	defer elsewhere.Close()
	stream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("event: endpoint\ndata: " + elsewhere.URL + "/message\n\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer stream.Close()
	_, err := mcpclient.Connect(context.Background(), &transport.SSE{URL: stream.URL},
		mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{MaxAttempts: 1}))
	if !errors.Is(err, transport.ErrCrossOriginEndpoint) || !errors.Is(err, mcpclient.ErrNotDelivered) {
		t.Fatalf("error %v, want a not-delivered cross-origin refusal", err)
	}
}

func TestHostileRedirectLoop(t *testing.T) {
	t.Parallel()
	var hops atomic.Int32
	first := testpeer.Once()
	srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		if r.Method != "tools/call" || (r.HTTP.URL.Query().Get("hop") == "" && !first()) {
			return false
		}
		n := hops.Add(1)
		// 307 keeps the method and the body: every hop delivers the request again.
		http.Redirect(r.W, r.HTTP, fmt.Sprintf("/?hop=%d", n), http.StatusTemporaryRedirect)
		return true
	})
	c := connect(t, &transport.HTTP{URL: srv.URL})
	_, err := c.CallTool(testCtx(t), "reserve", nil)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "redirects") {
		t.Fatalf("error %v, want ErrOutcomeUnknown after too many redirects", err)
	}
	if n := hops.Load(); n != 10 {
		t.Errorf("%d redirects followed, want 10", n)
	}
	if e := asError(t, err); e.Attempts != 1 {
		t.Errorf("%d attempts, want 1", e.Attempts)
	}
	stillUsable(t, c)
}
