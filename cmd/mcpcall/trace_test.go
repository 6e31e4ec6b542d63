package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// traceLine is one line of the -v trace: direction, then what the transport knows.
var traceLine = regexp.MustCompile(`^mcpcall: (->|<-) \S`)

// linesOf splits stderr into its lines.
func linesOf(stderr string) []string {
	return strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
}

// traced returns the trace lines of stderr that go in direction dir and hold every one of parts.
func traced(stderr, dir string, parts ...string) []string {
	var found []string
next:
	for _, l := range linesOf(stderr) {
		if !strings.HasPrefix(l, "mcpcall: "+dir+" ") {
			continue
		}
		for _, p := range parts {
			if !strings.Contains(l, p) {
				continue next
			}
		}
		found = append(found, l)
	}
	return found
}

// -v traces the request and response frames, with the HTTP method, endpoint and status, and
// shows neither the bearer token of the Authorization header nor a token in the URL's query.
func TestVerboseTracesFrames(t *testing.T) {
	const bearer, queryToken = "b3arer-S3CRET", "qu3ry-S3CRET"
	for name, opts := range map[string][]mcptest.Option{
		"JSON answers": nil,
		"SSE answers":  {mcptest.WithSSEResponses(time.Millisecond)},
	} {
		t.Run(name, func(t *testing.T) {
			srv := mcptest.NewTestHTTPServer(t, append(opts, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echoTool))...)
			endpoint := srv.URL + "?access_token=" + queryToken
			r := call(t, "", "-v", "-url", endpoint, "-header", "Authorization: Bearer "+bearer,
				"tools/call", `{"name":"echo","arguments":{"room":12}}`)
			if r.code != exitOK || !strings.Contains(r.stdout, `{\"room\":12}`) {
				t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
			}
			for _, secret := range []string{bearer, queryToken} {
				if strings.Contains(r.stderr, secret) {
					t.Errorf("stderr shows %q:\n%s", secret, r.stderr)
				}
			}
			for _, l := range linesOf(r.stderr) {
				if !traceLine.MatchString(l) {
					t.Errorf("stderr line %q is no trace line", l)
				}
			}
			checkTerminalSafe(t, "stderr", r.stderr)
			sent := traced(r.stderr, "->", "POST "+srv.URL+"?access_token=xxxxx", "(Authorization: Bearer xxxxx)", `"method":"tools/call"`, `"arguments":{"room":12}`)
			if len(sent) != 1 {
				t.Errorf("want one line of the request sent, got %q in:\n%s", sent, r.stderr)
			}
			got := traced(r.stderr, "<-", "200 POST "+srv.URL, `"result":`, `{\"room\":12}`)
			if len(got) != 1 {
				t.Errorf("want one line of the answer received, got %q in:\n%s", got, r.stderr)
			}
			// The handshake and the end of the session are frames and requests too.
			for dir, part := range map[string]string{"->": `"method":"initialize"`, "<-": `"protocolVersion"`} {
				if len(traced(r.stderr, dir, part)) == 0 {
					t.Errorf("no %s line with %s in:\n%s", dir, part, r.stderr)
				}
			}
			if len(traced(r.stderr, "->", "DELETE "+srv.URL)) != 1 {
				t.Errorf("the session's end is not traced:\n%s", r.stderr)
			}
		})
	}
}

// An Authorization header without a scheme is a credential whole: the trace shows none of it.
func TestVerboseMasksABareCredential(t *testing.T) {
	srv := mcptest.NewTestHTTPServer(t)
	for _, value := range []string{"R4W-S3CRET", "R4W-S3CRET trailing"} {
		r := call(t, "", "-v", "-url", srv.URL, "-header", "Authorization: "+value, "ping")
		if r.code != exitOK {
			t.Fatalf("exit %d stderr %q", r.code, r.stderr)
		}
		if strings.Contains(r.stderr, "R4W-S3CRET") || len(traced(r.stderr, "->", "(Authorization: xxxxx)")) == 0 {
			t.Errorf("Authorization %q traced as:\n%s", value, r.stderr)
		}
	}
}

// Without -v nothing is traced.
func TestQuietWithoutVerbose(t *testing.T) {
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echoTool))
	r := call(t, "", "-url", srv.URL, "tools/call", `{"name":"echo"}`)
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
}

// The legacy transport's endpoint event names the session in its query: the trace masks it.
func TestVerboseLegacySSE(t *testing.T) {
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echoTool))
	r := call(t, "", "-v", "-sse", srv.URL+"/sse", "tools/call", `{"name":"echo","arguments":{"via":"sse"}}`)
	if r.code != exitOK {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	// One endpoint event for each connection: the client tries the stateless revision first.
	endpoints := traced(r.stderr, "<-", "200 GET "+srv.URL+"/sse", " endpoint ")
	if len(endpoints) == 0 {
		t.Fatalf("no endpoint event in:\n%s", r.stderr)
	}
	for _, l := range endpoints {
		m := regexp.MustCompile(`[?&]([A-Za-z]+)=([^&\s]*)`).FindAllStringSubmatch(l, -1)
		if len(m) == 0 {
			t.Errorf("the endpoint %q has no query: the test checks nothing", l)
		}
		for _, kv := range m {
			if kv[2] != "xxxxx" {
				t.Errorf("the endpoint event shows %s=%s", kv[1], kv[2])
			}
		}
	}
	if len(traced(r.stderr, "->", "POST "+srv.URL, `"arguments":{"via":"sse"}`)) != 1 ||
		len(traced(r.stderr, "<-", "200 GET "+srv.URL+"/sse sse", `{\"via\":\"sse\"}`)) != 1 {
		t.Errorf("the call's frames are not traced:\n%s", r.stderr)
	}
}

// A stdio server's frames are traced too, between the lines of its stderr.
func TestVerboseStdio(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("MCPCALL_FAKE_STDIO", "1")
	r := call(t, "", "-v", "-cmd", fmt.Sprintf("'%s' -test.run=NONE", exe), "tools/call", `{"name":"echo","arguments":{"a":1}}`)
	if r.code != exitOK {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if len(traced(r.stderr, "->", "stdio", `"method":"tools/call"`, `"arguments":{"a":1}`)) != 1 ||
		len(traced(r.stderr, "<-", "stdio", `"result":`, `\"arguments\":{\"a\":1}`)) != 1 ||
		len(traced(r.stderr, "->", "stdio", `"method":"notifications/initialized"`)) != 1 {
		t.Errorf("the frames are not traced:\n%s", r.stderr)
	}
}

// -auth with -v: what the OAuth flow handles (the code, the tokens, a client secret) shows
// nowhere, though the MCP requests carry the access token.
func TestVerboseAuthShowsNoSecret(t *testing.T) {
	approvingBrowser(t)
	as := mcptest.NewTestAuthServer(t)
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithAuthorization(as),
		mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echoTool))
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	for run := range 2 { // signing in, then with the stored tokens
		r := call(t, "", "-v", "-url", srv.URL, "-auth", "-token-file", tokens, "tools/call", `{"name":"echo"}`)
		if r.code != exitOK {
			t.Fatalf("run %d: exit %d stderr %q", run, r.code, r.stderr)
		}
		secrets := as.Secrets()
		if len(secrets) == 0 {
			t.Fatal("the authorization server issued nothing: the test checks nothing")
		}
		for _, s := range secrets {
			if strings.Contains(r.stderr, s) {
				t.Errorf("run %d: stderr shows the secret %q:\n%s", run, s, r.stderr)
			}
		}
		if len(traced(r.stderr, "->", "(Authorization: Bearer xxxxx)", `"method":"tools/call"`)) == 0 {
			t.Errorf("run %d: the tool call is not traced with its masked credential:\n%s", run, r.stderr)
		}
	}
	if as.Stats().Authorizations != 1 {
		t.Errorf("%d authorizations, want the one of the first run", as.Stats().Authorizations)
	}
}

// A refusal without a frame is traced with its status and the start of its text.
func TestVerboseHTTPError(t *testing.T) {
	as := mcptest.NewTestAuthServer(t)
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithAuthorization(as))
	r := call(t, "", "-v", "-url", srv.URL, "ping")
	if r.code != exitNotExecuted {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if len(traced(r.stderr, "<-", "401 POST "+srv.URL)) == 0 {
		t.Errorf("the 401 is not traced:\n%s", r.stderr)
	}
	lines := linesOf(r.stderr)
	checkStderr(t, result{stderr: lines[len(lines)-1] + "\n"})
}

// tracedEvents reads SSE as it is cut into reads: an event split anywhere, CRLF line ends, a
// data field over several lines, an event too long to show whole.
func TestTracedEvents(t *testing.T) {
	big := strings.Repeat("x", maxTracedFrame+10)
	stream := "id: 1\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n: keepalive\n\nevent: endpoint\ndata: /m?sessionId=S3CRET\n\nid: 2\ndata: \"" + big + "\"\n\n"
	for _, cut := range []int{1, 2, 3, 7, 64, len(stream)} {
		var out strings.Builder
		term := newTerminal(&out)
		e := &tracedEvents{ReadCloser: nopReadCloser{strings.NewReader(stream)}, t: &tracer{term: term}, what: "200 GET u sse"}
		buf := make([]byte, cut)
		for {
			if _, err := e.Read(buf); err != nil {
				break
			}
		}
		e.Close()
		lines := linesOf(out.String())
		want := []string{
			"mcpcall: <- 200 GET u sse id=1 {\"a\":\\n1}",
			"mcpcall: <- 200 GET u sse id=1 endpoint /m?sessionId=xxxxx",
			fmt.Sprintf("mcpcall: <- 200 GET u sse id=2 \"%s … (%d bytes not shown of %d)", big[:maxTracedFrame-1], 12, maxTracedFrame+12),
			"mcpcall: <- 200 GET u sse stream ended",
		}
		if len(lines) != len(want) {
			t.Fatalf("reads of %d: %d lines, want %d:\n%.500s", cut, len(lines), len(want), out.String())
		}
		for i := range want {
			if lines[i] != want[i] {
				t.Errorf("reads of %d: line %d\n%.200q\nwant\n%.200q", cut, i, lines[i], want[i])
			}
		}
	}
}

type nopReadCloser struct{ *strings.Reader }

func (nopReadCloser) Close() error { return nil }
