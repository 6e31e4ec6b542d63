package oauth

import (
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// captureStderr runs f with os.Stderr going to a pipe and returns what f wrote there.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	var out []byte
	var wg sync.WaitGroup
	wg.Go(func() { out, _ = io.ReadAll(r) })
	defer func() { // also when f ends the test
		os.Stderr = saved
		w.Close()
		wg.Wait()
		r.Close()
	}()
	f()
	os.Stderr = saved
	w.Close()
	wg.Wait()
	return string(out)
}

// The authorization URL comes from the authorization server's metadata: the default Open
// prints it with every character a terminal could act on escaped.
func TestLoopbackDefaultOpenEscapesURL(t *testing.T) {
	defer goleak.VerifyNone(t)
	t.Setenv("PATH", t.TempDir()) // no browser opener to find
	l := &Loopback{}
	uri, err := l.RedirectURI(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	authURL := "https://as.example/authorize\u009b31m\u202eevil?" +
		url.Values{"state": {"st"}, "client_id": {"c"}, "x": {"\x1b]0;pwned\x07"}}.Encode()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { get(t, "GET", uri+"?code=c&state=st", "") }) // queued on the held listener
	printed := captureStderr(t, func() {
		if _, err := l.Authorize(t.Context(), authURL); err != nil {
			t.Error(err)
		}
	})
	if strings.ContainsAny(printed, "\u009b\u202e\x1b\x07") {
		t.Fatalf("the default Open printed controls raw: %q", printed)
	}
	if !strings.Contains(printed, `https://as.example/authorize\u009b31m\u202eevil?`) {
		t.Fatalf("the default Open printed %q; want the URL, escaped", printed)
	}
}

// Controls the URL parser refuses cannot reach the terminal through Authorize; the printing
// escapes them all the same.
func TestPrintAuthURLEscapesControls(t *testing.T) {
	var b strings.Builder
	printAuthURL(&b, "https://as.example/\x1b[2J\x07\u009b\u202e")
	if got := b.String(); strings.ContainsAny(got, "\u009b\u202e\x1b\x07") || !strings.Contains(got, `\x1b[2J\x07\u009b\u202e`) {
		t.Fatalf("printAuthURL wrote %q", got)
	}
}
