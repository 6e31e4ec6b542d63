package mcpclient_test

// Security. Each test checks one promise with a typed error where there is a
// refusal, and that the client (or the transport, where the refusal is at Connect) is usable
// afterwards.
//
// Related tests elsewhere, whose cases are not repeated here:
//   - TestHTTPCredentialsStayWithTheirOrigin (http_test.go): a redirect at initialize to another
//     port is refused; TestHTTPHeaderFuncAndSameOriginRedirect (http_test.go): credentials are kept
//     on a same-origin redirect. Here: another host that net/http itself would trust with them (a
//     subdomain), mid-session, HeaderFunc, the caller's own headers, the session id, the GET
//     stream, DELETE, the legacy transport and the origins a caller allows.
//   - TestLegacySSEEndpointMustBeSameOrigin (legacy_test.go): an endpoint on another port is
//     refused. Here: other schemes, hosts and URL tricks, and a good endpoint afterwards.
//   - transport/stdio_test.go: TestCommandCloseLeavesNoOrphan (Close kills the server and its
//     grandchild, no zombie), TestCommandServerDeathKillsItsGroup, TestCommandDetachedDescendant,
//     TestCommandCloseEscalates, at the transport level. Here: through the Client (Close, Detach,
//     a failed Connect).

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

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
				mcp := mcptest.NewTestHTTPServer(t, mcptest.WithTool(unsafeTool, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
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
			mcp := mcptest.NewTestHTTPServer(t, mcptest.WithTool(unsafeTool, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
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

// TestSecuritySessionIDMustBeVisibleASCII: an Mcp-Session-Id outside 0x21-0x7E is refused at
// initialize, as a protocol violation (CodeProtocol), and never sent.
func TestSecuritySessionIDMustBeVisibleASCII(t *testing.T) {
	for name, bad := range map[string]string{
		"space":     "abc def",
		"tab":       "abc\tdef",
		"utf-8":     "séance",
		"high byte": "abc\x80def",
	} {
		t.Run(name, func(t *testing.T) {
			var badInit, expire atomic.Bool
			var seenMu sync.Mutex
			var seen []string // every Mcp-Session-Id the server received
			srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
				if sid, ok := r.Header["Mcp-Session-Id"]; ok {
					seenMu.Lock()
					seen = append(seen, sid...)
					seenMu.Unlock()
				}
				switch {
				case r.Method == "initialize" && badInit.Load():
					r.W.Header().Set("Mcp-Session-Id", bad)
					r.JSON(testpeer.Result(r.ID, testpeer.InitResult))
					return true
				case r.Method == "ping" && expire.CompareAndSwap(true, false):
					http.Error(r.W, "no such session", http.StatusNotFound)
					return true
				}
				return false
			})
			tr := &transport.HTTP{URL: srv.URL}
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, transport.ErrInvalidSessionID) {
					t.Fatalf("%s: error %v, want ErrInvalidSessionID", what, err)
				}
				if mcpclient.CodeOf(err) != mcpclient.CodeProtocol {
					t.Errorf("%s: error %v has code %v, want %v: the server's answer is not valid MCP",
						what, err, mcpclient.CodeOf(err), mcpclient.CodeProtocol)
				}
				if strings.Contains(err.Error(), bad) {
					t.Errorf("%s: the error shows the session id: %v", what, err)
				}
			}

			// At Connect: refused at once (asking again gets the same id).
			badInit.Store(true)
			_, err := mcpclient.Connect(testCtx(t), tr, noWait)
			check("connect", err)
			if e := asError(t, err); e.Attempts > 1 {
				t.Errorf("initialize sent %d times, want 1", e.Attempts)
			}

			// On a reconnect after the session expired: the call fails, the next one works.
			badInit.Store(false)
			c := connect(t, tr)
			badInit.Store(true)
			expire.Store(true)
			check("reconnect", c.Ping(testCtx(t)))
			badInit.Store(false)
			if err := c.Ping(testCtx(t)); err != nil {
				t.Fatalf("ping once the server behaves: %v", err)
			}
			if c.SessionID() != testpeer.SessionID {
				t.Errorf("session id %q, want %q", c.SessionID(), testpeer.SessionID)
			}
			c.Close()
			seenMu.Lock()
			defer seenMu.Unlock()
			for _, sid := range seen {
				if sid != testpeer.SessionID {
					t.Errorf("the client sent session id %q", sid)
				}
			}
		})
	}
}

func TestSecurityLegacyEndpointMustBeSameOrigin(t *testing.T) {
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
	const (
		home  = "mcp.example.test"
		moved = "moved.example.test"
	)
	var port string
	mcp := mcptest.NewTestHTTPServer(t)
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

// stdioServerEnv makes the test binary run as a stdio MCP server (see runStdioServer).
const stdioServerEnv = "MCPCLIENT_SECURITY_STDIO_SERVER"

func init() {
	if mode := os.Getenv(stdioServerEnv); mode != "" {
		runStdioServer(mode, os.Getenv(stdioServerEnv+"_PIDS"))
		os.Exit(0)
	}
}

// runStdioServer answers initialize (with a revision nobody speaks if mode is "bad-version"),
// ping, and tools/call spawn, which starts a `sleep 300` in the server's process group. It
// appends "server <pid>" and "grandchild <pid>" lines to pidFile, and exits at the end of stdin.
func runStdioServer(mode, pidFile string) {
	note := func(what string, pid int) {
		f, err := os.OpenFile(pidFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			fmt.Fprintf(f, "%s %d\n", what, pid)
			f.Close()
		}
	}
	note("server", os.Getpid())
	version := "2025-11-25"
	if mode == "bad-version" {
		version = "1999-01-01"
	}
	testpeer.Serve(os.Stdin, os.Stdout, func(p *testpeer.Conn, m testpeer.Msg) bool {
		if m.Method != "tools/call" {
			return false
		}
		cmd := exec.Command("sleep", "300")
		if err := cmd.Start(); err != nil {
			p.Send(testpeer.Error(m.ID, -32603, "spawn failed"))
			return true
		}
		note("grandchild", cmd.Process.Pid)
		p.Send(testpeer.Result(m.ID, testpeer.ToolResult))
		return true
	}, testpeer.WithInit(`{"protocolVersion":"`+version+`","capabilities":{},"serverInfo":{"name":"stdio","version":"0"}}`))
}

// pidsIn reads the pids runStdioServer noted.
func pidsIn(t *testing.T, pidFile string) map[string][]int {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pids := make(map[string][]int)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		what, n, _ := strings.Cut(line, " ")
		pid, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("pid file line %q", line)
		}
		pids[what] = append(pids[what], pid)
	}
	return pids
}

// gone reports whether pid no longer runs: it does not exist, or it is a zombie (a killed
// grandchild waits for init to reap it).
func gone(pid int) bool {
	if p, err := os.FindProcess(pid); err != nil || p.Signal(syscall.Signal(0)) != nil {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && f[0] == "Z"
}

func TestSecurityStdioChildrenDoNotOutliveTheClient(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("checks processes through /proc")
	}
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep command:", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	command := func(t *testing.T, mode string) (*transport.Command, string) {
		pidFile := t.TempDir() + "/pids"
		// A race-enabled binary sleeps a second at exit unless told not to.
		env := append(os.Environ(), stdioServerEnv+"="+mode, stdioServerEnv+"_PIDS="+pidFile, "GORACE=atexit_sleep_ms=0")
		return &transport.Command{Path: exe, Env: env}, pidFile
	}
	assertGone := func(t *testing.T, pidFile string, wantGrandchild bool) {
		t.Helper()
		pids := pidsIn(t, pidFile)
		if len(pids["server"]) == 0 || (wantGrandchild && len(pids["grandchild"]) == 0) {
			t.Fatalf("pids %v", pids)
		}
		for what, list := range pids {
			for _, pid := range list {
				waitFor(t, fmt.Sprintf("%s %d to end", what, pid), func() bool { return gone(pid) })
			}
		}
	}
	for _, end := range []string{"Close", "Detach"} {
		t.Run(end, func(t *testing.T) {
			cmd, pidFile := command(t, "ok")
			c := connect(t, cmd)
			if _, err := c.CallTool(testCtx(t), "spawn", nil); err != nil {
				t.Fatal(err)
			}
			pids := pidsIn(t, pidFile)
			if gone(pids["grandchild"][0]) {
				t.Fatal("the grandchild is not running")
			}
			if end == "Close" {
				c.Close()
			} else {
				c.Detach() // stdio has no session to leave behind: the process ends all the same
			}
			assertGone(t, pidFile, true)
		})
	}
	t.Run("failed connect", func(t *testing.T) {
		cmd, pidFile := command(t, "bad-version")
		_, err := mcpclient.Connect(testCtx(t), cmd, noWait)
		if !errors.Is(err, mcpclient.ErrUnsupportedVersion) {
			t.Fatalf("error %v, want ErrUnsupportedVersion", err)
		}
		assertGone(t, pidFile, false)
		// The transport is usable for a server that speaks a known revision.
		good, _ := command(t, "ok")
		stillUsable(t, connect(t, good))
	})
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

func TestSecuritySecretsNeverLogged(t *testing.T) {
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
