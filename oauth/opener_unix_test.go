//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package oauth

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// fakeOpener puts first on PATH a browser opener (xdg-open, or open on macOS) that writes its
// arguments, one a line, to the FIFO it returns, and exits.
func fakeOpener(t *testing.T) (fifo string) {
	t.Helper()
	dir := t.TempDir()
	fifo = filepath.Join(dir, "argv")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO: %v", err)
	}
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > '" + fifo + "'\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	return fifo
}

// noRedirects is a client that shows redirects instead of following them.
func noRedirects() *http.Client {
	c := testClient()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// The command line of the browser opener can be read by every local user: the default Open
// gives it a local start URL, which forwards the browser once to the authorization URL, and
// never the state or the PKCE challenge.
func TestLoopbackDefaultOpenKeepsSecretsOffTheCommandLine(t *testing.T) {
	defer goleak.VerifyNone(t)
	fifo := fakeOpener(t)
	const state, challenge = "st4te-only-this-flow-knows", "ch4llenge-of-this-flow"
	authURL := "https://as.example/authorize?" + url.Values{
		"state": {state}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}, "client_id": {"c"},
	}.Encode()

	argvc, giveUp := readArgv(fifo)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type result struct {
		q   url.Values
		err error
	}
	done := make(chan result, 1)
	l := &Loopback{}
	uri, err := l.RedirectURI(ctx)
	if err != nil {
		t.Fatal(err)
	}
	captureStderr(t, func() {
		go func() {
			q, err := l.Authorize(ctx, authURL)
			done <- result{q, err}
		}()
		var argv []string
		select {
		case argv = <-argvc:
		case r := <-done:
			giveUp()
			<-argvc
			t.Fatalf("Authorize returned %v, %v without running the opener", r.q, r.err)
		}
		defer func() {
			cancel() // if the callback below was refused
			if r := <-done; t.Failed() {
				t.Logf("Authorize = %v, %v", r.q, r.err)
			}
		}()

		if len(argv) != 1 {
			t.Fatalf("opener argv = %q; want one URL", argv)
		}
		start := argv[0]
		if strings.Contains(start, state) || strings.Contains(start, challenge) {
			t.Fatalf("opener argv %q carries the state or the PKCE challenge", start)
		}
		su, err := url.Parse(start)
		if err != nil || su.Scheme != "http" || su.Host != strings.TrimPrefix(strings.TrimSuffix(uri, "/callback"), "http://") ||
			!strings.HasPrefix(su.Path, "/start/") || len(su.Path) < len("/start/")+32 {
			t.Fatalf("opener argv %q; want http://127.0.0.1:PORT/start/<token> on the redirect URI's port", start)
		}
		if l.StartURL() != start {
			t.Errorf("StartURL() = %q; the opener got %q", l.StartURL(), start)
		}

		// Guessing, or a page reaching 127.0.0.1 by another name, gets nothing.
		for _, c := range []struct {
			uri, host string
			want      int
		}{
			{"http://" + su.Host + "/start/" + strings.Repeat("A", len(su.Path)-len("/start/")), "", http.StatusNotFound},
			{start, "evil.example:" + su.Port(), http.StatusBadRequest},
		} {
			if got := get(t, "GET", c.uri, c.host); got != c.want {
				t.Errorf("GET %s (Host %q) = %d; want %d", c.uri, c.host, got, c.want)
			}
		}

		resp, err := noRedirects().Get(start)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != authURL {
			t.Fatalf("GET start = %s, Location %q; want a redirect to %q", resp.Status, resp.Header.Get("Location"), authURL)
		}
		if resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("start redirect Cache-Control %q; want no-store", resp.Header.Get("Cache-Control"))
		}
		resp, err = noRedirects().Get(start)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusGone || resp.Header.Get("Location") != "" {
			t.Fatalf("second GET start = %s, Location %q; want it used up", resp.Status, resp.Header.Get("Location"))
		}

		if got := get(t, "GET", uri+"?code=c0de&state="+state, ""); got != http.StatusOK {
			t.Fatalf("callback = %d", got)
		}
		r := <-done
		done <- r // for the deferred wait
		if r.err != nil || r.q.Get("code") != "c0de" {
			t.Fatalf("Authorize = %v, %v", r.q, r.err)
		}
		if l.StartURL() != "" {
			t.Errorf("StartURL() = %q after Authorize returned; want none", l.StartURL())
		}
		if _, err := testClient().Get(start); err == nil {
			t.Error("the start URL still answers after Authorize returned")
		}
	})
}

// readArgv returns a channel that gets the opener's arguments from fifo, and a function that
// ends the wait when the opener never ran.
func readArgv(fifo string) (<-chan []string, func()) {
	argvc := make(chan []string, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			argvc <- nil
			return
		}
		b, _ := io.ReadAll(f)
		f.Close()
		argvc <- strings.Fields(string(b))
	}()
	giveUp := func() {
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
	}
	return argvc, giveUp
}

// OpenBrowser given an authorization URL by a program of its own keeps the URL's query off the
// command line all the same: the opener gets a one-time local URL that redirects to it.
func TestOpenBrowserKeepsQueryOffTheCommandLine(t *testing.T) {
	for _, as := range []string{"https://as.example", "http://127.0.0.1:9"} {
		t.Run(as, func(t *testing.T) { testOpenBrowserKeepsQueryOffTheCommandLine(t, as) })
	}
}

func testOpenBrowserKeepsQueryOffTheCommandLine(t *testing.T, as string) {
	defer goleak.VerifyNone(t)
	fifo := fakeOpener(t)
	const state, challenge = "st4te-only-this-flow-knows", "ch4llenge-of-this-flow"
	authURL := as + "/authorize?" + url.Values{
		"state": {state}, "code_challenge": {challenge}, "code_challenge_method": {"S256"},
	}.Encode()
	argvc, giveUp := readArgv(fifo)
	done := make(chan error, 1)
	go func() { done <- OpenBrowser(t.Context(), authURL) }()
	var argv []string
	select {
	case argv = <-argvc:
	case err := <-done:
		giveUp()
		<-argvc
		t.Fatalf("OpenBrowser = %v without running the opener", err)
	}
	if len(argv) != 1 || strings.Contains(argv[0], state) || strings.Contains(argv[0], challenge) ||
		!strings.HasPrefix(argv[0], "http://127.0.0.1:") || strings.Contains(argv[0], "?") {
		<-done
		t.Fatalf("opener argv = %q; want one local URL without the state or the challenge", argv)
	}
	resp, err := noRedirects().Get(argv[0])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != authURL {
		t.Fatalf("GET %s = %s, Location %q; want a redirect to %q", argv[0], resp.Status, resp.Header.Get("Location"), authURL)
	}
	if err := <-done; err != nil {
		t.Fatalf("OpenBrowser = %v after the browser had the URL", err)
	}
	if _, err := testClient().Get(argv[0]); err == nil {
		t.Fatal("the local URL still answers after OpenBrowser returned")
	}
}

// The start URL of a Loopback is local already, and shows nothing: it goes to the opener as it is.
func TestOpenBrowserPassesLocalURL(t *testing.T) {
	defer goleak.VerifyNone(t)
	fifo := fakeOpener(t)
	const local = "http://127.0.0.1:9/start/token"
	argvc, _ := readArgv(fifo)
	if err := OpenBrowser(t.Context(), local); err != nil {
		t.Fatal(err)
	}
	if argv := <-argvc; len(argv) != 1 || argv[0] != local {
		t.Fatalf("opener argv = %q; want %q", argv, local)
	}
}

// A browser that never fetches the local URL does not hold OpenBrowser past its context.
func TestOpenBrowserEndsWithContext(t *testing.T) {
	defer goleak.VerifyNone(t)
	fifo := fakeOpener(t)
	argvc, giveUp := readArgv(fifo)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- OpenBrowser(ctx, "https://as.example/authorize?state=st") }()
	select {
	case <-argvc:
	case err := <-done:
		giveUp()
		<-argvc
		t.Fatalf("OpenBrowser = %v without running the opener", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("OpenBrowser = %v; want the context's end", err)
	}
}
