package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

func TestMain(m *testing.M) {
	if os.Getenv("MCPCALL_AS_MAIN") != "" {
		main() // this binary is mcpcall, for the tests that kill it
	}
	if os.Getenv("MCPCALL_FAKE_STDIO") != "" {
		fakeStdioServer()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
}

// fakeStdioServer answers initialize, tools/call (echoing its arguments) and nothing else.
func fakeStdioServer() {
	if os.Getenv("MCPCALL_FAKE_STDIO") == "hostile" {
		fmt.Fprint(os.Stderr, "starting\n"+terminalAttack+"\n\x1b[31mred\x1b[0m\tdone\n")
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || m.ID == nil {
			continue
		}
		var result string
		switch m.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"fake","version":"0"}}`
		case "tools/call":
			result = `{"content":[{"type":"text","text":` + jsonString(m.Params) + `}]}`
		default:
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`+"\n", m.ID)
			continue
		}
		fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", m.ID, result)
	}
}

func jsonString(raw json.RawMessage) string {
	b, _ := json.Marshal(string(raw))
	return string(b)
}

type result struct {
	code           int
	stdout, stderr string
}

func call(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

func echoTool(_ context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(string(c.Arguments))}}, nil
}

func failingTool(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	return nil, fmt.Errorf("no rooms left")
}

var stderrLine = regexp.MustCompile(`^mcpcall: [a-z -]+: request ("[^"]*"|\d+) session "[^"]*" attempts \d+: .+\n$`)

func checkStderr(t *testing.T, r result) {
	t.Helper()
	if !stderrLine.MatchString(r.stderr) {
		t.Errorf("stderr is not one line naming class, request, session and attempts: %q", r.stderr)
	}
}

func TestResult(t *testing.T) {
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echoTool))
	dir := t.TempDir()
	file := filepath.Join(dir, "params.json")
	os.WriteFile(file, []byte(`{"name":"echo","arguments":{"from":"file"}}`), 0o600)
	for _, tt := range []struct {
		name  string
		args  []string
		stdin string
		want  string
	}{
		{"literal", []string{"tools/call", `{"name":"echo","arguments":{"from":"arg"}}`}, "", `{\"from\":\"arg\"}`},
		{"file", []string{"tools/call", "@" + file}, "", `{\"from\":\"file\"}`},
		{"stdin", []string{"tools/call", "-"}, `{"name":"echo","arguments":{"from":"stdin"}}`, `{\"from\":\"stdin\"}`},
		{"default params", []string{"ping"}, "", `{}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, tt.stdin, append([]string{"-url", srv.URL}, tt.args...)...)
			if r.code != exitOK || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			if strings.Count(r.stdout, "\n") != 1 || !strings.HasSuffix(r.stdout, "\n") || !strings.Contains(r.stdout, tt.want) {
				t.Errorf("stdout %q is not one JSON line with %s", r.stdout, tt.want)
			}
			if !json.Valid([]byte(r.stdout)) {
				t.Errorf("stdout %q is not JSON", r.stdout)
			}
		})
	}
	if n := srv.Sessions(); n != 0 {
		t.Errorf("%d sessions left open: mcpcall must DELETE its session", n)
	}
}

// A tool result of megabytes, as files and images make, is printed whole with the default
// limits, over an SSE answer.
func TestLargeResult(t *testing.T) {
	text := strings.Repeat("QUJD", 10<<18) // 10 MiB of base64
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithSSEResponses(10*time.Millisecond),
		mcptest.WithTool(mcpclient.Tool{Name: "file"}, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(text)}}, nil
		}))
	r := call(t, "", "-url", srv.URL, "tools/call", `{"name":"file"}`)
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("exit %d, stderr %.300q", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, `"text":"`+text+`"`) {
		t.Errorf("stdout (%d bytes) lacks the result's text", len(r.stdout))
	}
}

func TestGeneratedIDsAreUniqueStrings(t *testing.T) {
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echoTool))
	var mu sync.Mutex
	var ids []string
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := new(bytes.Buffer)
		body.ReadFrom(r.Body)
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(body.Bytes(), &m) == nil && m.ID != nil {
			mu.Lock()
			ids = append(ids, string(m.ID))
			mu.Unlock()
		}
		r.Body = ioNopCloser(body)
		srv.ServeHTTP(w, r)
	}))
	defer rec.Close()
	for range 2 {
		if r := call(t, "", "-url", rec.URL, "ping"); r.code != exitOK {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if !strings.HasPrefix(id, `"`) || seen[id] {
			t.Fatalf("ids %v: want distinct JSON strings", ids)
		}
		seen[id] = true
	}
	// server/discover, initialize and ping; then, in this same process, which remembers the
	// server is older, initialize and ping.
	if len(ids) != 5 {
		t.Errorf("%d requests", len(ids))
	}
}

// statelessServer is a 2026-07-28 server: it answers server/discover, and refuses every other
// method. It records the methods it received.
func statelessServer(t *testing.T) (url string, methods func() []string) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.NewDecoder(r.Body).Decode(&m)
		mu.Lock()
		got = append(got, m.Method)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if m.Method == "server/discover" {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"supportedVersions":["2026-07-28"],"capabilities":{}}}`, m.ID)
			return
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, m.ID)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

func TestPingAStatelessServer(t *testing.T) {
	url, methods := statelessServer(t)
	r := call(t, "", "-url", url, "ping")
	if r.code != exitOK || r.stdout != "{}\n" || r.stderr != "" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if got := methods(); len(got) != 2 || got[0] != "server/discover" || got[1] != "server/discover" {
		t.Errorf("the server received %q, want server/discover to connect and one more as the ping", got)
	}
}

func TestHeaderFlag(t *testing.T) {
	srv := mcptest.NewTestHTTPServer(t)
	got := make(chan string, 8)
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("X-Trace") + "|" + r.Header.Get("Authorization")
		srv.ServeHTTP(w, r)
	}))
	defer rec.Close()
	r := call(t, "", "-url", rec.URL, "-header", "X-Trace: t1", "-header", "Authorization: Bearer k", "ping")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if h := <-got; h != "t1|Bearer k" {
		t.Errorf("headers %q", h)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"ping"},
		{"-url", "http://x", "-cmd", "y", "ping"},
		{"-url", "http://x"},
		{"-url", "http://x", "tools/call", "[1]"},
		{"-url", "http://x", "tools/call", "{nope"},
		{"-url", "http://x", "tools/call", "@/does/not/exist"},
		{"-url", "http://x", "-attempts", "0", "ping"},
		{"-url", "http://x", "-retry", "sometimes", "ping"},
		{"-url", "http://x", "-header", "no colon", "ping"},
		{"-url", "http://x", "-timeout", "0s", "ping"},
		{"-cmd", `"unterminated`, "ping"},
		{"-cmd", "srv", "-auth", "ping"},
		{"-url", "http://x", "-token-file", "/tmp/t.json", "ping"},
		{"-nope"},
	} {
		r := call(t, "", args...)
		if r.code != exitLocal || r.stdout != "" || r.stderr == "" {
			t.Errorf("%q: exit %d stdout %q stderr %q, want 1", args, r.code, r.stdout, r.stderr)
		}
	}
}

// TestUsageErrorsSendNothing: what can only fail the same way every time is refused before
// connecting, with exit 1 ("not executed", exit 3, reads as "retry later"), and the message
// shows no secret of the endpoint or the headers.
func TestUsageErrorsSendNothing(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "unexpected", http.StatusTeapot)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	secrets := []string{"pa55word", "SECRET"}
	for name, args := range map[string][]string{
		"mistyped scheme":      {"-url", "htps://alice:pa55word@" + host + "/mcp?access_token=SECRET", "ping"},
		"other scheme":         {"-sse", "ftp://" + host + "/sse", "ping"},
		"no host":              {"-url", "http:///mcp?access_token=SECRET", "ping"},
		"no slashes":           {"-url", "http:alice:pa55word@" + host + "/mcp", "ping"},
		"unparsable":           {"-url", "http://alice:pa55word@[::1/mcp?token=SECRET", "ping"},
		"port out of range":    {"-url", "http://127.0.0.1:99999/mcp", "ping"},
		"CRLF in header":       {"-url", srv.URL, "-header", "Authorization: Bearer SECRET\r\nX-Injected: 1", "ping"},
		"LF in header":         {"-url", srv.URL, "-header", "X-A: a\nX-Injected: 1", "ping"},
		"NUL in header":        {"-url", srv.URL, "-header", "X-A: SECRET\x00", "ping"},
		"space in header name": {"-url", srv.URL, "-header", "X A: b", "ping"},
		"colon in header name": {"-sse", srv.URL + "/sse", "-header", "X(A): b", "ping"},
		"empty method":         {"-url", srv.URL, ""},
		"tool without name":    {"-url", srv.URL, "tools/call", `{"arguments":{"room":"12"}}`},
		"no such program":      {"-cmd", "/does/not/exist/mcp-server --stdio", "ping"},
	} {
		t.Run(name, func(t *testing.T) {
			r := call(t, "", args...)
			if r.code != exitLocal || r.stdout != "" || r.stderr == "" {
				t.Errorf("exit %d stdout %q stderr %q, want 1", r.code, r.stdout, r.stderr)
			}
			if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "mcpcall: usage: ") {
				t.Errorf("stderr %q is not one usage line", r.stderr)
			}
			for _, s := range secrets {
				if strings.Contains(r.stderr, s) {
					t.Errorf("stderr shows %q: %s", s, r.stderr)
				}
			}
			if n := requests.Swap(0); n != 0 {
				t.Errorf("%d requests reached the server", n)
			}
		})
	}
}

// TestMisconfigurationIsALocalError: a transport that cannot connect because of how it was
// configured will fail the same way on every run, whatever mcpcall checked before.
func TestMisconfigurationIsALocalError(t *testing.T) {
	err := &mcpclient.Error{Code: mcpclient.CodeNotDelivered, Attempts: 1,
		Err: &transport.Error{Outcome: transport.NotDelivered, Err: fmt.Errorf("%w: no such program", transport.ErrMisconfigured)}}
	if code := exitCode(err); code != exitLocal {
		t.Errorf("exit %d for %v, want 1", code, err)
	}
}

// terminalAttack retitles the terminal (OSC), erases the line, returns the cursor and writes a
// verdict of its own, then opens a CSI with the C1 control U+009B and starts a second line.
const terminalAttack = "\x1b]0;pwned\x07\x1b[2K\rmcpcall: ok\u009b31m\x7f\xff\u2028\nmcpcall: ok"

// checkTerminalSafe fails the test if out holds anything a terminal could take for a control:
// a C0 control but newline and tab, DEL, a C1 control, a line or paragraph separator, or bytes
// that are no UTF-8 (a terminal in an 8-bit mode reads 0x9b as CSI).
func checkTerminalSafe(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s is not UTF-8: %q", what, out)
	}
	for _, r := range out {
		if (r < 0x20 && r != '\n' && r != '\t') || (0x7f <= r && r <= 0x9f) || r == 0x2028 || r == 0x2029 {
			t.Errorf("%s holds %U: %q", what, r, out)
			return
		}
	}
}

// hostileServer answers initialize, and every other request with an HTTP error whose body, or
// a JSON-RPC error whose message, carries terminalAttack; a tools/call "result" has it in its
// text, raw where JSON allows it.
func hostileServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&m) != nil {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		quoted, _ := json.Marshal(terminalAttack) // JSON escapes the C0 controls only
		switch {
		case m.ID == nil:
			w.WriteHeader(http.StatusAccepted)
		case m.Method == "initialize":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"hostile","version":"0"}}}`, m.ID)
		case m.Method == "http/error":
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, terminalAttack)
		case m.Method == "tools/call" && m.Params.Name == "result":
			// Raw C1, DEL, U+2028 and an invalid byte are valid inside a JSON string for
			// encoding/json.
			raw := strings.NewReplacer(`\u007f`, "\x7f", `\ufffd`, "\xff", `\u2028`, "\u2028").Replace(string(quoted))
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":%s}],"isError":true}}`, m.ID, raw)
		default:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":%s,"data":%s}}`, m.ID, quoted, quoted)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestServerTextCannotDriveTheTerminal: text from the server reaches stderr with its controls
// escaped, on the one line of the report, and stdout stays JSON without raw controls.
func TestServerTextCannotDriveTheTerminal(t *testing.T) {
	url := hostileServer(t)
	for name, args := range map[string][]string{
		"HTTP error body": {"-url", url, "http/error"},
		"JSON-RPC error":  {"-url", url, "rpc/error"},
		"tool error":      {"-url", url, "tools/call", `{"name":"result"}`},
	} {
		t.Run(name, func(t *testing.T) {
			r := call(t, "", args...)
			if r.code != exitFailed {
				t.Fatalf("exit %d stdout %q stderr %q, want 2", r.code, r.stdout, r.stderr)
			}
			checkStderr(t, r)
			checkTerminalSafe(t, "stderr", r.stderr)
			checkTerminalSafe(t, "stdout", r.stdout)
			if strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("stderr is not one line: %q", r.stderr)
			}
			if !strings.Contains(r.stderr, "pwned") && r.stdout == "" {
				t.Errorf("stderr %q lacks the server's text: the test exercises nothing", r.stderr)
			}
		})
	}
	t.Run("stdout", func(t *testing.T) {
		r := call(t, "", "-url", url, "tools/call", `{"name":"result"}`)
		var got struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got.Content) != 1 {
			t.Fatalf("stdout %q is not the result: %v", r.stdout, err)
		}
		// The same text, escaped: a decoder reads what the server sent (an invalid byte as
		// U+FFFD, as encoding/json reads it).
		if want := strings.ToValidUTF8(terminalAttack, "\ufffd"); got.Content[0].Text != want {
			t.Errorf("stdout decodes to %q, want %q", got.Content[0].Text, want)
		}
	})
}

// TestServerStderrCannotDriveTheTerminal: a stdio server's stderr is passed on line by line,
// with the controls in it escaped.
func TestServerStderrCannotDriveTheTerminal(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("MCPCALL_FAKE_STDIO", "hostile")
	r := call(t, "", "-cmd", fmt.Sprintf("'%s' -test.run=NONE", exe), "tools/call", `{"name":"echo"}`)
	if r.code != exitOK {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	checkTerminalSafe(t, "stderr", r.stderr)
	if !strings.HasPrefix(r.stderr, "starting\n") || !strings.HasSuffix(r.stderr, "\tdone\n") || strings.Count(r.stderr, "\n") != 4 {
		t.Errorf("the server's stderr lines are not passed on: %q", r.stderr)
	}
}

func TestDefiniteFailures(t *testing.T) {
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(mcpclient.Tool{Name: "full"}, failingTool))
	t.Run("JSON-RPC error", func(t *testing.T) {
		r := call(t, "", "-url", srv.URL, "no/such/method")
		if r.code != exitFailed || r.stdout != "" {
			t.Fatalf("exit %d stdout %q", r.code, r.stdout)
		}
		checkStderr(t, r)
	})
	t.Run("tool error is printed", func(t *testing.T) {
		r := call(t, "", "-url", srv.URL, "tools/call", `{"name":"full"}`)
		if r.code != exitFailed || !strings.Contains(r.stdout, `"isError":true`) {
			t.Fatalf("exit %d stdout %q", r.code, r.stdout)
		}
		checkStderr(t, r)
	})
	t.Run("HTTP 4xx", func(t *testing.T) {
		bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "bad request", http.StatusBadRequest)
		}))
		defer bad.Close()
		r := call(t, "", "-url", bad.URL, "ping")
		if r.code != exitFailed {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		checkStderr(t, r)
	})
}

func TestNotExecuted(t *testing.T) {
	t.Run("503", func(t *testing.T) {
		srv := mcptest.NewTestHTTPServer(t,
			mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echoTool),
			mcptest.WithFault(mcptest.Fault{Kind: mcptest.Fail, Tool: "echo", Times: -1}))
		r := call(t, "", "-url", srv.URL, "-attempts", "2", "tools/call", `{"name":"echo"}`)
		if r.code != exitNotExecuted || r.stdout != "" || !strings.Contains(r.stderr, "attempts 2") {
			t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		checkStderr(t, r)
		if srv.Executions("echo") != 0 {
			t.Error("executed")
		}
	})
	t.Run("401 and 403", func(t *testing.T) {
		for _, code := range []int{http.StatusUnauthorized, http.StatusForbidden} {
			bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "who are you", code)
			}))
			r := call(t, "", "-url", bad.URL, "ping")
			bad.Close()
			if r.code != exitNotExecuted || !strings.Contains(r.stderr, "unauthorized") {
				t.Fatalf("%d: exit %d: %s", code, r.code, r.stderr)
			}
			checkStderr(t, r)
		}
	})
	t.Run("refused dial", func(t *testing.T) {
		dead := httptest.NewServer(http.NotFoundHandler())
		url := dead.URL
		dead.Close()
		r := call(t, "", "-url", url, "-attempts", "1", "ping")
		if r.code != exitNotExecuted {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		checkStderr(t, r)
	})
	t.Run("never retries", func(t *testing.T) {
		srv := mcptest.NewTestHTTPServer(t,
			mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echoTool),
			mcptest.WithFault(mcptest.Fault{Kind: mcptest.Fail, Tool: "echo"}))
		r := call(t, "", "-url", srv.URL, "-retry", "never", "tools/call", `{"name":"echo"}`)
		if r.code != exitNotExecuted || !strings.Contains(r.stderr, "attempts 1") {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
	})
}

func TestOutcomeUnknownLeavesTheSession(t *testing.T) {
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echoTool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "echo"}))
	r := call(t, "", "-url", srv.URL, "tools/call", `{"name":"echo"}`)
	if r.code != exitUnknown || r.stdout != "" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	checkStderr(t, r)
	if srv.Sessions() != 1 {
		t.Errorf("%d sessions: after exit 4 the session must be left alone", srv.Sessions())
	}
}

func TestSameIDResendReadsTheReceipt(t *testing.T) {
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echoTool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "echo"}))
	r := call(t, "", "-url", srv.URL, "-id", "order-7", "tools/call", `{"name":"echo","arguments":{"n":1}}`)
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	r2 := call(t, "", "-url", srv.URL, "-id", `"order-7"`, "tools/call", `{"name":"echo","arguments":{"n":1}}`)
	if r2.code != exitOK || r2.stdout != r.stdout {
		t.Fatalf("resend: exit %d stdout %q, want %q", r2.code, r2.stdout, r.stdout)
	}
	if n := srv.ExecutionsOf("echo", mcpclient.StringID("order-7")); n != 1 {
		t.Errorf("executions %d", n)
	}
}

func TestConflict(t *testing.T) {
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echoTool))
	if r := call(t, "", "-url", srv.URL, "-id", "x", "tools/call", `{"name":"echo","arguments":{"n":1}}`); r.code != exitOK {
		t.Fatalf("first: exit %d: %s", r.code, r.stderr)
	}
	sessions := srv.Sessions()
	r := call(t, "", "-url", srv.URL, "-id", "x", "tools/call", `{"name":"echo","arguments":{"n":2}}`)
	if r.code != exitConflict || r.stdout != "" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	checkStderr(t, r)
	if !strings.Contains(r.stderr, `request "x"`) {
		t.Errorf("stderr %q does not name the id", r.stderr)
	}
	if srv.Sessions() != sessions+1 {
		t.Errorf("after exit 5 the session must be left alone")
	}
	if srv.Executions("echo") != 1 {
		t.Errorf("executions %d", srv.Executions("echo"))
	}
}

func TestStdioServer(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("MCPCALL_FAKE_STDIO", "1")
	r := call(t, "", "-cmd", fmt.Sprintf("'%s' -test.run=NONE", exe), "tools/call", `{"name":"echo","arguments":{"a":1}}`)
	if r.code != exitOK || !strings.Contains(r.stdout, `{\"name\":\"echo\",\"arguments\":{\"a\":1}}`) {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestSplitCommand(t *testing.T) {
	for in, want := range map[string][]string{
		`a b  c`:             {"a", "b", "c"},
		`'a b' "c d"`:        {"a b", "c d"},
		`a\ b`:               {"a b"},
		`"a\"b" 'it''s'`:     {`a"b`, "its"},
		`"a\nb"`:             {`a\nb`},
		`x "" y`:             {"x", "", "y"},
		"a\\\nb":             {"ab"},
		`node server.js --x`: {"node", "server.js", "--x"},
	} {
		got, err := splitCommand(in)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) || len(got) != len(want) {
			t.Errorf("splitCommand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`'open`, `"open`, `trailing\`} {
		if _, err := splitCommand(bad); err == nil {
			t.Errorf("splitCommand(%q) accepted", bad)
		}
	}
}

type nopCloser struct{ *bytes.Buffer }

func (nopCloser) Close() error { return nil }

func ioNopCloser(b *bytes.Buffer) nopCloser { return nopCloser{b} }

func TestLegacySSEEndpoint(t *testing.T) {
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echoTool))
	r := call(t, "", "-sse", srv.URL+"/sse", "tools/call", `{"name":"echo","arguments":{"via":"sse"}}`)
	if r.code != exitOK || !strings.Contains(r.stdout, `{\"via\":\"sse\"}`) {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestTimeoutAfterSendingIsOutcomeUnknown(t *testing.T) {
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echoTool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.Delay, Tool: "echo", Delay: time.Minute}))
	r := call(t, "", "-url", srv.URL, "-timeout", "300ms", "tools/call", `{"name":"echo"}`)
	if r.code != exitUnknown || r.stdout != "" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	checkStderr(t, r)
}
