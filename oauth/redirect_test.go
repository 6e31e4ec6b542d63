package oauth

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// testClient does not keep connections, so none outlives a test for goleak to find.
func testClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
}

// get requests uri, sending host as the Host header if it is not empty, and returns the status.
func get(t *testing.T, method, uri, host string) int {
	t.Helper()
	req, err := http.NewRequest(method, uri, nil)
	if err != nil {
		t.Error(err) // not Fatal: called from Open's goroutine
		return 0
	}
	if host != "" {
		req.Host = host
	}
	resp, err := testClient().Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, uri, err)
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func authURLWithState(state string) string {
	return "https://as.example/authorize?" + url.Values{"state": {state}, "client_id": {"c"}}.Encode()
}

func TestLoopbackRedirectURI(t *testing.T) {
	defer goleak.VerifyNone(t)
	l := &Loopback{}
	defer l.Close()
	uri, err := l.RedirectURI(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "http" || u.Hostname() != "127.0.0.1" || u.Port() == "" || u.Port() == "0" || u.Path != "/callback" {
		t.Fatalf("RedirectURI = %q; want http://127.0.0.1:PORT/callback", uri)
	}
	if again, _ := l.RedirectURI(t.Context()); again != uri {
		t.Fatalf("second RedirectURI = %q; first was %q", again, uri)
	}
	// The port is held: nobody else gets it before Authorize.
	if ln, err := net.Listen("tcp4", u.Host); err == nil {
		ln.Close()
		t.Fatal("the port was not held after RedirectURI")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp4", u.Host)
	if err != nil {
		t.Fatalf("port still held after Close: %v", err)
	}
	ln.Close()
	if again, _ := l.RedirectURI(t.Context()); again != uri {
		t.Fatalf("RedirectURI after Close = %q; want the same %q", again, uri)
	}
}

func TestLoopbackCustomPath(t *testing.T) {
	l := &Loopback{Path: "oauth/cb"}
	defer l.Close()
	uri, err := l.RedirectURI(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(uri, "/oauth/cb") {
		t.Fatalf("RedirectURI = %q; want path /oauth/cb", uri)
	}
}

// TestLoopbackRejectsForgeries sends, while Authorize waits, every request that must not end
// the wait, then the real callback.
func TestLoopbackRejectsForgeries(t *testing.T) {
	defer goleak.VerifyNone(t)
	const state = "s3cret-state"
	l := &Loopback{}
	uri, err := l.RedirectURI(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(strings.TrimSuffix(uri, "/callback"), "http://")
	l.Open = func(ctx context.Context, authURL string) error {
		if authURL != authURLWithState(state) {
			t.Errorf("Open got %q", authURL)
		}
		for _, c := range []struct {
			method, uri, host string
			want              int
		}{
			{"GET", uri + "?code=evil&state=wrong", "", http.StatusBadRequest},
			{"GET", uri + "?code=evil", "", http.StatusBadRequest},
			{"GET", uri + "?code=evil&state=" + state + "&state=" + state, "", http.StatusBadRequest},
			{"GET", uri + "?code=evil&state=" + state, "evil.example:" + strings.Split(host, ":")[1], http.StatusBadRequest},
			{"GET", uri + "?code=evil&state=" + state, "localhost:" + strings.Split(host, ":")[1], http.StatusBadRequest},
			{"POST", uri + "?code=evil&state=" + state, "", http.StatusMethodNotAllowed},
			{"GET", "http://" + host + "/other?code=evil&state=" + state, "", http.StatusNotFound},
			{"GET", uri + "?code=good&state=" + state + "&iss=https%3A%2F%2Fas.example", "", http.StatusOK},
		} {
			if got := get(t, c.method, c.uri, c.host); got != c.want {
				t.Errorf("%s %s (Host %q) = %d; want %d", c.method, c.uri, c.host, got, c.want)
			}
		}
		return nil
	}
	q, err := l.Authorize(t.Context(), authURLWithState(state))
	if err != nil {
		t.Fatal(err)
	}
	if q.Get("code") != "good" || q.Get("state") != state || q.Get("iss") != "https://as.example" {
		t.Fatalf("Authorize = %v; want the real callback's parameters", q)
	}

	// The server is gone: a second callback reaches nothing.
	resp, err := testClient().Get(uri + "?code=again&state=" + state)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a callback after Authorize returned got %s", resp.Status)
	}
}

func TestLoopbackErrorCallback(t *testing.T) {
	defer goleak.VerifyNone(t)
	l := &Loopback{}
	var page string
	l.Open = func(ctx context.Context, authURL string) error {
		uri, _ := l.RedirectURI(ctx)
		resp, err := testClient().Get(uri + "?error=access_denied&error_description=%3Cb%3Eno%3C%2Fb%3E&state=st")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		page = string(b)
		return nil
	}
	q, err := l.Authorize(t.Context(), authURLWithState("st"))
	if err != nil {
		t.Fatal(err)
	}
	if q.Get("error") != "access_denied" {
		t.Fatalf("Authorize = %v; want the error parameters", q)
	}
	if !strings.Contains(page, "access_denied") || strings.Contains(page, "<b>") {
		t.Fatalf("error page %q does not show the error, escaped", page)
	}
}

func TestLoopbackReusesPort(t *testing.T) {
	defer goleak.VerifyNone(t)
	l := &Loopback{}
	uri, err := l.RedirectURI(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	l.Open = func(ctx context.Context, authURL string) error {
		u, _ := url.Parse(authURL)
		get(t, "GET", uri+"?code=c&state="+u.Query().Get("state"), "")
		return nil
	}
	for _, state := range []string{"one", "two"} { // the second binds the port again
		q, err := l.Authorize(t.Context(), authURLWithState(state))
		if err != nil || q.Get("state") != state {
			t.Fatalf("Authorize %s = %v, %v", state, q, err)
		}
		if again, _ := l.RedirectURI(t.Context()); again != uri {
			t.Fatalf("RedirectURI changed from %q to %q", uri, again)
		}
	}
}

func TestLoopbackCancel(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("user gave up")
	l := &Loopback{Open: func(context.Context, string) error {
		cancel(cause)
		return nil
	}}
	q, err := l.Authorize(ctx, authURLWithState("st"))
	if q != nil || !errors.Is(err, cause) {
		t.Fatalf("Authorize = %v, %v; want the context's cause", q, err)
	}
}

func TestLoopbackOpenError(t *testing.T) {
	defer goleak.VerifyNone(t)
	boom := errors.New("no display")
	l := &Loopback{Open: func(context.Context, string) error { return boom }}
	if _, err := l.Authorize(t.Context(), authURLWithState("st")); !errors.Is(err, boom) {
		t.Fatalf("Authorize = %v; want Open's error", err)
	}
}

func TestLoopbackOneAuthorizeAtATime(t *testing.T) {
	defer goleak.VerifyNone(t)
	waiting := make(chan struct{})
	l := &Loopback{Open: func(context.Context, string) error {
		close(waiting)
		return nil
	}}
	var wg sync.WaitGroup
	var firstErr error
	wg.Go(func() { _, firstErr = l.Authorize(t.Context(), authURLWithState("st")) })
	<-waiting
	if _, err := l.Authorize(t.Context(), authURLWithState("st2")); !errors.Is(err, ErrAuthorizeInProgress) {
		t.Errorf("concurrent Authorize = %v; want ErrAuthorizeInProgress", err)
	}
	// Close ends the waiting Authorize.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if !errors.Is(firstErr, net.ErrClosed) {
		t.Fatalf("Authorize after Close = %v; want net.ErrClosed", firstErr)
	}
}

func TestLoopbackNeedsState(t *testing.T) {
	l := &Loopback{Open: func(context.Context, string) error {
		t.Error("Open called for a URL without state")
		return nil
	}}
	defer l.Close()
	if _, err := l.Authorize(t.Context(), "https://as.example/authorize?client_id=c"); err == nil {
		t.Fatal("Authorize accepted an authorization URL without state")
	}
}

func TestOpenBrowserRefusesOtherSchemes(t *testing.T) {
	for _, u := range []string{"file:///etc/passwd", "javascript:alert(1)", "ms-settings:", "/relative", "-flag", "http://"} {
		if err := OpenBrowser(t.Context(), u); !errors.Is(err, ErrUnsafeURL) {
			t.Errorf("OpenBrowser(%q) = %v; want ErrUnsafeURL", u, err)
		}
	}
}

const headlessRedirect = "http://127.0.0.1:9/callback"

func TestHeadless(t *testing.T) {
	defer goleak.VerifyNone(t)
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		to := q.Get("redirect_uri") + "?" + url.Values{"code": {"c0de"}, "state": {q.Get("state")}}.Encode()
		http.Redirect(w, r, to, http.StatusFound)
	}))
	defer as.Close()
	h := &Headless{RedirectURL: headlessRedirect, Client: testClient()}
	if uri, err := h.RedirectURI(t.Context()); uri != headlessRedirect || err != nil {
		t.Fatalf("RedirectURI = %q, %v", uri, err)
	}
	authURL := as.URL + "/authorize?" + url.Values{"redirect_uri": {headlessRedirect}, "state": {"st"}}.Encode()
	q, err := h.Authorize(t.Context(), authURL)
	if err != nil {
		t.Fatal(err)
	}
	if q.Get("code") != "c0de" || q.Get("state") != "st" {
		t.Fatalf("Authorize = %v", q)
	}
	if h.Client.CheckRedirect != nil {
		t.Fatal("Authorize changed the caller's client")
	}
}

func TestHeadlessRefuses(t *testing.T) {
	defer goleak.VerifyNone(t)
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/elsewhere":
			http.Redirect(w, r, "https://attacker.example/callback?code=c0de", http.StatusFound)
		case "/otherpath":
			http.Redirect(w, r, "http://127.0.0.1:9/other?code=c0de", http.StatusFound)
		case "/nolocation":
			w.WriteHeader(http.StatusFound)
		case "/login":
			io.WriteString(w, "<html>please log in"+strings.Repeat(" padding", 1000)+"</html>")
		}
	}))
	defer as.Close()
	h := &Headless{RedirectURL: headlessRedirect, Client: testClient()}
	for path, want := range map[string]error{
		"/elsewhere":  ErrRedirectMismatch,
		"/otherpath":  ErrRedirectMismatch,
		"/nolocation": ErrNotRedirected,
		"/login":      ErrNotRedirected,
	} {
		q, err := h.Authorize(t.Context(), as.URL+path+"?state=st")
		if q != nil || !errors.Is(err, want) {
			t.Errorf("%s: Authorize = %v, %v; want %v", path, q, err, want)
			continue
		}
		if strings.Contains(err.Error(), "c0de") {
			t.Errorf("%s: error %q repeats the code", path, err)
		}
		if len(err.Error()) > 400 {
			t.Errorf("%s: error is %d bytes long; the body excerpt is not bounded", path, len(err.Error()))
		}
	}
	if _, err := h.Authorize(t.Context(), as.URL+"/login"); err == nil || !strings.Contains(err.Error(), "200 OK") {
		t.Errorf("error %v does not give the status", err)
	}
}

func TestHeadlessNeedsRedirectURL(t *testing.T) {
	if _, err := (&Headless{}).RedirectURI(t.Context()); err == nil {
		t.Fatal("RedirectURI with no RedirectURL succeeded")
	}
}
