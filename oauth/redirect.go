package oauth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"html"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/northstar-mcp/mcpclient/internal/termsafe"
)

var (
	// ErrAuthorizeInProgress is returned by [Loopback.Authorize] while another Authorize on the
	// same Loopback is running: both would wait for the one callback on one port.
	ErrAuthorizeInProgress = errors.New("oauth: an authorization is already waiting on this loopback redirect")
	// ErrUnsafeURL is wrapped by [OpenBrowser] for a URL that is not http or https.
	ErrUnsafeURL = errors.New("oauth: refusing to open a URL that is not http or https")
)

// Loopback is a [RedirectHandler] for command-line programs and desktop agents: the redirect
// URI is an HTTP server on the loopback interface (RFC 8252, section 7.3), and the user
// authorizes in their browser, which the authorization server sends back to that server.
//
// The authorization URL carries the flow's state and PKCE challenge, which must stay between
// this program and the user's browser: whoever reads them can sign in with their own account
// and send the callback, which this program would take for the user's (RFC 9700, section 4.5).
// A browser is started with a command line, and every local user can read command lines (in
// /proc, with ps), so the browser is given a start URL instead: a random path on the loopback
// server that redirects to the authorization URL, once, and only while Authorize waits (see
// [Loopback.StartURL]). The callback too is taken once, with the state of this flow only; the
// PKCE verifier, which never leaves this program, binds the code to it besides. The redirect
// URI itself stays the same from flow to flow, since a registration records it.
//
// Set the fields before first use and do not copy a Loopback after it. Call Close when done if
// RedirectURI may have been called without a later Authorize.
type Loopback struct {
	// Port is the port to listen on. Zero picks a free port on first use and keeps it, so the
	// redirect URI, which a registration may have recorded, stays the same.
	Port int
	// Path is the redirect URI's path; empty means "/callback".
	Path string
	// Open shows the user authURL, usually by opening a browser. It runs while Authorize
	// waits, and its context ends when Authorize returns; an error from it ends Authorize. A
	// command Open starts should be given [Loopback.StartURL], not authURL, since a command
	// line is not private ([OpenBrowser] keeps either off it). Nil prints authURL on standard
	// error, escaped for the terminal, and tries OpenBrowser with the start URL, carrying on
	// without a browser since the user can copy the URL.
	Open func(ctx context.Context, authURL string) error

	mu      sync.Mutex
	port    int          // once bound; never changes after
	uri     string       // the redirect URI, fixed with port
	path    string       // the path served, fixed with port
	ln      net.Listener // held from RedirectURI until Authorize takes it or Close
	running bool
	cancel  context.CancelCauseFunc // ends the running Authorize
	start   string                  // the running Authorize's start URL
}

// StartURL returns the start URL of the running Authorize, for Open to hand to a browser:
// http://127.0.0.1:PORT/start/TOKEN, with a random TOKEN made for this authorization, which
// redirects the first request to the authorization URL and refuses every later one. Unlike
// the authorization URL, it shows nothing of the state or the PKCE challenge to whoever reads
// the browser's command line. It is empty while no Authorize runs.
func (l *Loopback) StartURL() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.start
}

// RedirectURI returns http://127.0.0.1:PORT/PATH. The first call binds the port, on 127.0.0.1
// only: a numeric address, since "localhost" can resolve elsewhere and a wildcard address
// would take callbacks (and codes) from the network. The listener is kept until Authorize uses
// it, so no other program can take the port in between.
func (l *Loopback) RedirectURI(ctx context.Context) (string, error) {
	l.mu.Lock()
	uri := l.uri
	l.mu.Unlock()
	if uri != "" {
		return uri, nil
	}
	ln, err := listenLoopback(ctx, l.Port)
	if err != nil {
		return "", err
	}
	l.mu.Lock()
	if l.uri != "" { // another call bound first; its port is the one to keep
		uri = l.uri
		l.mu.Unlock()
		ln.Close()
		return uri, nil
	}
	path := l.Path
	if path == "" {
		path = "/callback"
	} else if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	l.ln, l.path = ln, path
	l.port = ln.Addr().(*net.TCPAddr).Port
	l.uri = (&url.URL{Scheme: "http", Host: loopbackHost(l.port), Path: path}).String()
	uri = l.uri
	l.mu.Unlock()
	return uri, nil
}

// Close releases the port held since RedirectURI and ends a running Authorize. The redirect
// URI stays the same: a later Authorize binds the port again.
func (l *Loopback) Close() error {
	l.mu.Lock()
	ln := l.ln
	l.ln = nil
	if l.cancel != nil {
		l.cancel(fmt.Errorf("oauth: loopback redirect closed: %w", net.ErrClosed))
	}
	l.mu.Unlock()
	if ln != nil {
		return ln.Close()
	}
	return nil
}

// Authorize serves the redirect URI and the start URL, calls Open, and returns the query
// parameters of the one callback that carries authURL's state. Requests with another Host
// header (a DNS rebinding page), another method, or a wrong or missing state are answered 400
// and ignored, so a hostile local page can neither end the wait nor substitute its own code.
// After the callback, or when ctx ends (Authorize then returns its cause), the server is shut
// down, the start URL with it, and nothing it started outlives Authorize.
func (l *Loopback) Authorize(ctx context.Context, authURL string) (url.Values, error) {
	u, err := url.Parse(authURL)
	if err != nil {
		return nil, fmt.Errorf("oauth: authorization URL: %w", err)
	}
	state := u.Query().Get("state")
	if state == "" {
		return nil, errors.New("oauth: authorization URL has no state, so a forged callback could not be told from the real one")
	}
	if _, err := l.RedirectURI(ctx); err != nil {
		return nil, err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	l.mu.Lock()
	if l.running {
		l.mu.Unlock()
		return nil, ErrAuthorizeInProgress
	}
	ln, port, path := l.ln, l.port, l.path
	host := loopbackHost(port)
	startPath := "/start/" + randomString(32)
	start := (&url.URL{Scheme: "http", Host: host, Path: startPath}).String()
	l.running, l.cancel, l.start = true, cancel, start
	l.ln = nil
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.running, l.cancel, l.start = false, nil, ""
		l.mu.Unlock()
	}()
	if ln == nil { // released by an earlier Authorize or by Close
		if ln, err = listenLoopback(ctx, port); err != nil {
			return nil, err
		}
	}

	result := make(chan url.Values, 1)
	var answered, started atomic.Bool
	var conns sync.WaitGroup // connections, so that Authorize can wait for their goroutines
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Host == host && subtle.ConstantTimeCompare([]byte(r.URL.Path), []byte(startPath)) == 1 {
				serveStart(w, r, authURL, &started)
				return
			}
			q, ok := checkCallback(w, r, host, path, state)
			if !ok {
				return
			}
			if !answered.CompareAndSwap(false, true) {
				http.Error(w, "This authorization has already completed.", http.StatusBadRequest)
				return
			}
			writeCallbackPage(w, q)
			result <- q
		}),
	}
	localServer(srv, &conns)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	open := l.Open
	if open == nil {
		open = func(ctx context.Context, authURL string) error {
			printAuthURL(os.Stderr, authURL)
			_ = OpenBrowser(ctx, start) // the user has the URL either way
			return nil
		}
	}
	openCtx, stopOpen := context.WithCancel(ctx)
	opened := make(chan error, 1)
	go func() { opened <- open(openCtx, authURL) }()

	var q url.Values
	openDone, serveDone := false, false
	for q == nil && err == nil {
		select {
		case q = <-result:
		case <-ctx.Done():
			err = context.Cause(ctx)
		case e := <-opened:
			openDone = true
			opened = nil // a nil channel: not selected again
			if e != nil {
				err = fmt.Errorf("oauth: showing the authorization URL: %w", e)
			}
		case e := <-served:
			serveDone = true
			err = fmt.Errorf("oauth: loopback redirect server: %w", e)
		}
	}

	if q != nil {
		// Shutdown lets the browser receive its page before the connection closes; the
		// bound keeps a stalled connection from holding Authorize.
		sctx, c := context.WithTimeout(ctx, 5*time.Second)
		_ = srv.Shutdown(sctx)
		c()
	}
	_ = srv.Close()
	if !serveDone {
		<-served
	}
	conns.Wait() // every Add happened in Serve, which has returned
	stopOpen()
	if !openDone {
		<-opened
	}
	return q, err
}

// serveStart redirects the first GET to authURL, reporting that it did, and refuses every
// later one: a second request is a reload at best, or someone else who read the start URL.
func serveStart(w http.ResponseWriter, r *http.Request, authURL string, started *atomic.Bool) (redirected bool) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "Method not allowed.", http.StatusMethodNotAllowed)
		return false
	}
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	if !started.CompareAndSwap(false, true) {
		http.Error(w, "This sign-in link has already been used. If that was not you, stop the program "+
			"and sign in again.", http.StatusGone)
		return false
	}
	h.Set("Location", authURL)
	w.WriteHeader(http.StatusFound)
	return true
}

// checkCallback answers and rejects every request but the expected callback.
func checkCallback(w http.ResponseWriter, r *http.Request, host, path, state string) (url.Values, bool) {
	// A page on another site whose name resolves to 127.0.0.1 (DNS rebinding) sends its own
	// Host; the browser sent to the redirect URI sends exactly this one.
	if r.Host != host {
		http.Error(w, "Bad request.", http.StatusBadRequest)
		return nil, false
	}
	if r.URL.Path != path {
		http.NotFound(w, r)
		return nil, false
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "Method not allowed.", http.StatusMethodNotAllowed)
		return nil, false
	}
	q := r.URL.Query()
	if got := q["state"]; len(got) != 1 || subtle.ConstantTimeCompare([]byte(got[0]), []byte(state)) != 1 {
		http.Error(w, "This is not the authorization this program is waiting for.", http.StatusBadRequest)
		return nil, false
	}
	return q, true
}

func writeCallbackPage(w http.ResponseWriter, q url.Values) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Connection", "close")
	title, msg := "Authorized", "You can close this tab and return to the application."
	if e := q.Get("error"); e != "" {
		title = "Authorization failed"
		msg = e
		if d := q.Get("error_description"); d != "" {
			msg += ": " + d
		}
		msg += ". You can close this tab."
	}
	fmt.Fprintf(w, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>%s</title></head>"+
		"<body><h1>%s</h1><p>%s</p></body></html>\n", title, title, html.EscapeString(msg))
}

func loopbackHost(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

func listenLoopback(ctx context.Context, port int) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp4", loopbackHost(port))
	if err != nil {
		return nil, fmt.Errorf("oauth: loopback redirect: %w", err)
	}
	return ln, nil
}

// printAuthURL shows the user authURL with every character a terminal could act on escaped:
// the authorization server chose it, and could otherwise rewrite what the user reads.
func printAuthURL(w io.Writer, authURL string) {
	fmt.Fprintf(w, "Open this URL in a browser to authorize:\n\n    %s\n\n", termsafe.Line(authURL))
}

// OpenBrowser opens rawURL in the user's browser: xdg-open on Linux and the BSDs, open on
// macOS, the URL protocol handler on Windows. It refuses anything but an http or https URL,
// since the URL comes from a server and another scheme could start a local program.
//
// The opener's command line can be read by every local user, and an authorization URL's state
// and PKCE challenge must stay private. So a URL is served, once, as a redirect from a random
// path on a loopback port, and only that local URL goes on the command line; OpenBrowser then
// returns once the browser has fetched it. Only a loopback URL with no query, fragment or
// userinfo, such as [Loopback.StartURL], goes to the opener as it is, and OpenBrowser returns
// when the opener exits, which it normally does once the browser has the URL. The opener is
// killed, and the wait ends, if ctx ends first.
func OpenBrowser(ctx context.Context, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: %.64q", ErrUnsafeURL, rawURL)
	}
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil && ip.IsLoopback() &&
		u.User == nil && u.RawQuery == "" && !u.ForceQuery && u.Fragment == "" {
		return runOpener(ctx, u.String())
	}
	return openThroughLocalRedirect(ctx, u.String())
}

// browserFetchWait bounds how long OpenBrowser waits for the browser to fetch the local URL
// once the opener has succeeded.
const browserFetchWait = time.Minute

// openThroughLocalRedirect hands the opener a one-time local URL that redirects to target, and
// waits until the browser has fetched it.
func openThroughLocalRedirect(ctx context.Context, target string) error {
	ln, err := listenLoopback(ctx, 0)
	if err != nil {
		return err
	}
	host := loopbackHost(ln.Addr().(*net.TCPAddr).Port)
	path := "/open/" + randomString(32)
	fetched := make(chan struct{})
	var used atomic.Bool
	var conns sync.WaitGroup
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Host != host || subtle.ConstantTimeCompare([]byte(r.URL.Path), []byte(path)) != 1 {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Connection", "close")
			if serveStart(w, r, target, &used) {
				close(fetched)
			}
		}),
	}
	localServer(srv, &conns)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		// The browser gets its redirect before the server goes; a stalled connection does
		// not hold OpenBrowser.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
		_ = srv.Close()
		<-served
		conns.Wait() // every Add happened in Serve, which has returned
	}()

	local := (&url.URL{Scheme: "http", Host: host, Path: path}).String()
	if err := runOpener(ctx, local); err != nil {
		return err
	}
	wait := time.NewTimer(browserFetchWait)
	defer wait.Stop()
	select {
	case <-fetched:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-wait.C:
		return fmt.Errorf("oauth: the browser did not fetch the URL within %v", browserFetchWait)
	}
}

// runOpener starts the platform's URL opener with rawURL and waits for it.
func runOpener(ctx context.Context, rawURL string) error {
	var name string
	var args []string
	switch runtime.GOOS {
	case "darwin":
		name = "open"
	case "windows":
		name, args = "rundll32", []string{"url.dll,FileProtocolHandler"}
	default:
		name = "xdg-open"
	}
	if err := exec.CommandContext(ctx, name, append(args, rawURL)...).Run(); err != nil {
		if ctx.Err() != nil { // killed for it: the context's end is the reason
			err = context.Cause(ctx)
		}
		return fmt.Errorf("oauth: opening a browser with %s: %w", name, err)
	}
	return nil
}

var (
	// ErrNotRedirected is wrapped by [Headless.Authorize] when the authorization endpoint
	// answers with something other than a redirect.
	ErrNotRedirected = errors.New("oauth: authorization endpoint did not redirect")
	// ErrRedirectMismatch is wrapped by [Headless.Authorize] when the authorization endpoint
	// redirects somewhere other than the redirect URI.
	ErrRedirectMismatch = errors.New("oauth: authorization endpoint redirected away from the redirect URI")
)

// Headless is a [RedirectHandler] for tests and for authorization servers that redirect at once,
// with no user to log in: Authorize fetches the authorization URL and takes the redirect it
// answers with, without following it.
type Headless struct {
	// RedirectURL is the redirect URI; required.
	RedirectURL string
	// Client fetches the authorization URL; nil means a client with a 30-second timeout. Its
	// CheckRedirect is replaced, on a copy.
	Client *http.Client
}

// RedirectURI returns RedirectURL.
func (h *Headless) RedirectURI(context.Context) (string, error) {
	if h.RedirectURL == "" {
		return "", errors.New("oauth: Headless.RedirectURL is empty")
	}
	return h.RedirectURL, nil
}

// Authorize fetches authURL and returns the query parameters of the redirect it answers with,
// which must go to RedirectURL (same scheme, host and path). Any other answer is an error
// wrapping [ErrNotRedirected] or [ErrRedirectMismatch].
func (h *Headless) Authorize(ctx context.Context, authURL string) (url.Values, error) {
	want, err := url.Parse(h.RedirectURL)
	if err != nil || h.RedirectURL == "" {
		return nil, fmt.Errorf("oauth: Headless.RedirectURL %q is not a URL", h.RedirectURL)
	}
	c := http.Client{Timeout: 30 * time.Second}
	if h.Client != nil {
		c = *h.Client
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return nil, fmt.Errorf("oauth: authorization URL: %w", err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("oauth: fetching the authorization URL: %w", err)
	}
	defer func() {
		// Draining a little lets the connection be reused; a huge body is not worth reading.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}()

	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
	default:
		excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		return nil, fmt.Errorf("%w: %s: %q", ErrNotRedirected, resp.Status, excerpt)
	}
	loc := resp.Header.Get("Location")
	if loc == "" {
		return nil, fmt.Errorf("%w: %s with no Location", ErrNotRedirected, resp.Status)
	}
	got, err := resp.Request.URL.Parse(loc)
	if err != nil {
		return nil, fmt.Errorf("%w: bad Location: %w", ErrNotRedirected, err)
	}
	if !sameEndpoint(got, want) {
		// The query is left out: it may carry a code.
		return nil, fmt.Errorf("%w: sent to %s://%s%s, not %s://%s%s", ErrRedirectMismatch,
			got.Scheme, got.Host, got.EscapedPath(), want.Scheme, want.Host, want.EscapedPath())
	}
	return got.Query(), nil
}

func sameEndpoint(a, b *url.URL) bool {
	pathOf := func(u *url.URL) string {
		if u.Path == "" {
			return "/"
		}
		return u.Path
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Host, b.Host) &&
		pathOf(a) == pathOf(b)
}

// localServer sets up srv, a server on a loopback listener that the flow owns: it counts its
// connections in conns, so that their goroutines can be waited for, and writes no log lines,
// which could carry request details.
func localServer(srv *http.Server, conns *sync.WaitGroup) {
	srv.ReadHeaderTimeout = 10 * time.Second
	srv.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			conns.Done()
		}
	}
	srv.ErrorLog = log.New(io.Discard, "", 0)
}
