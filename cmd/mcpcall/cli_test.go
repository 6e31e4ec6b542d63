package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

func TestHelp(t *testing.T) {
	for _, flag := range []string{"-h", "--help", "-help"} {
		r := call(t, "", flag)
		if r.code != exitOK || r.stderr != "" {
			t.Errorf("%s: exit %d stderr %q, want 0 and nothing", flag, r.code, r.stderr)
		}
		for _, want := range []string{"usage: mcpcall [flags] METHOD", "call TOOL [KEY=VALUE", "-tool TOOL", "  -v\t", "  -auth\n", "  -args "} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%s: stdout lacks %q:\n%s", flag, want, r.stdout)
			}
		}
	}
	// Help wins over the rest of the line, whatever it holds.
	if r := call(t, "", "-url", "http://x", "-h", "ping"); r.code != exitOK || !strings.HasPrefix(r.stdout, "usage: ") {
		t.Errorf("-h after a flag: exit %d stdout %q", r.code, r.stdout)
	}
}

// A usage error is the contract's exit 1, on stderr with the usage; stdout stays empty, for
// scripts that read it.
func TestUsageErrorGoesToStderr(t *testing.T) {
	r := call(t, "", "-nope", "ping")
	if r.code != exitLocal || r.stdout != "" {
		t.Fatalf("exit %d stdout %q", r.code, r.stdout)
	}
	if !strings.Contains(r.stderr, "flag provided but not defined: -nope") || !strings.Contains(r.stderr, "usage: mcpcall") ||
		!strings.HasSuffix(r.stderr, "mcpcall: usage: flag provided but not defined: -nope\n") {
		t.Errorf("stderr %q", r.stderr)
	}
}

// reportedID is the id the report line names.
var reportedID = regexp.MustCompile(`^mcpcall: [a-z -]+: request ("[^"]*"|\d+) `)

// The report line names the id the error names: that of the *mcpclient.Error's request, which
// is the id the server received, and, when opening the session failed, the id of the handshake
// request the error quotes.
func TestReportNamesTheErrorsID(t *testing.T) {
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echoTool),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "echo", Times: -1}))
	var mu sync.Mutex
	var toolIDs []string
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := new(bytes.Buffer)
		body.ReadFrom(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(body.Bytes(), &m) == nil && (m.Method == "tools/call" || m.Method == "no/such/method") {
			mu.Lock()
			toolIDs = append(toolIDs, string(m.ID))
			mu.Unlock()
		}
		r.Body = io.NopCloser(body)
		srv.ServeHTTP(w, r)
	}))
	defer rec.Close()
	for name, tt := range map[string]struct {
		args  []string
		code  int
		class string
	}{
		"generated id":  {[]string{"-url", rec.URL, "tools/call", `{"name":"echo"}`}, exitUnknown, "outcome unknown"},
		"-id":           {[]string{"-url", rec.URL, "-id", "order-9", "tools/call", `{"name":"echo"}`}, exitUnknown, "outcome unknown"},
		"-v":            {[]string{"-v", "-url", rec.URL, "tools/call", `{"name":"echo"}`}, exitUnknown, "outcome unknown"},
		"short form -v": {[]string{"-v", "-url", rec.URL, "call", "echo", "n=1"}, exitUnknown, "outcome unknown"},
		// The session ends with a DELETE, which -v traces: before the report.
		"-v, session ended": {[]string{"-v", "-url", rec.URL, "no/such/method"}, exitFailed, "server error"},
	} {
		t.Run(name, func(t *testing.T) {
			mu.Lock()
			toolIDs = nil
			mu.Unlock()
			r := call(t, "", tt.args...)
			if r.code != tt.code {
				t.Fatalf("exit %d stderr %q", r.code, r.stderr)
			}
			lines := linesOf(r.stderr)
			last := lines[len(lines)-1]
			checkStderr(t, result{stderr: last + "\n"})
			m := reportedID.FindStringSubmatch(last)
			if m == nil {
				t.Fatalf("the last line %q is not the report", last)
			}
			mu.Lock()
			sent := toolIDs
			mu.Unlock()
			if len(sent) != 1 || m[1] != sent[0] {
				t.Errorf("the report names %s, the server received %q", m[1], sent)
			}
			if !strings.Contains(last, tt.class+" for request "+m[1]) {
				t.Errorf("the report names %s, the error another: %q", m[1], last)
			}
		})
	}
	t.Run("session refused", func(t *testing.T) {
		bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "who are you", http.StatusUnauthorized)
		}))
		defer bad.Close()
		r := call(t, "", "-url", bad.URL, "ping")
		checkStderr(t, r)
		m := reportedID.FindStringSubmatch(r.stderr)
		if m == nil || m[1] == `""` || !strings.Contains(r.stderr, "for request "+m[1]+":") {
			t.Errorf("the report does not name the id its error names: %q", r.stderr)
		}
	})
}

// The short forms send the tools/call the long one does.
func TestToolCallForms(t *testing.T) {
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(mcpclient.Tool{Name: "reserve"}, echoTool))
	for name, args := range map[string][]string{
		"long":          {"tools/call", `{"name":"reserve","arguments":{"room":12,"guests":2,"name":"alice"}}`},
		"call":          {"call", "reserve", "room=12", "guests=2", "name=alice"},
		"call :=":       {"call", "reserve", "room:=12", "guests=2", `name:="alice"`},
		"-tool -args":   {"-tool", "reserve", "-args", `{"room":12,"guests":2,"name":"alice"}`},
		"-tool words":   {"-tool", "reserve", "room=12", "guests=2", "name=alice"},
		"-args -tool":   {"-args", ` {"room": 12, "guests": 2, "name": "alice"} `, "-tool", "reserve"},
		"-id then call": {"-id", "r-1", "call", "reserve", "room=12", "guests=2", "name=alice"},
	} {
		t.Run(name, func(t *testing.T) {
			r := call(t, "", append([]string{"-url", srv.URL}, args...)...)
			if r.code != exitOK || r.stderr != "" {
				t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
			}
			var res struct {
				Content []struct{ Text string } `json:"content"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || len(res.Content) != 1 {
				t.Fatalf("stdout %q: %v", r.stdout, err)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(res.Content[0].Text), &got); err != nil ||
				got["room"] != 12.0 || got["guests"] != 2.0 || got["name"] != "alice" || len(got) != 3 {
				t.Errorf("the tool got %s", res.Content[0].Text)
			}
		})
	}
	if r := call(t, "", "-url", srv.URL, "call", "reserve"); r.code != exitOK || !strings.Contains(r.stdout, `{}`) {
		t.Errorf("call without arguments: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if n := srv.Executions("reserve"); n != 8 {
		t.Errorf("%d executions, want 8", n)
	}
}

func TestToolCallFormUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"call"},
		{"call", ""},
		{"call", "reserve", "room"},
		{"call", "reserve", "a=1", "a=2"},
		{"call", "reserve", "a:=nope"},
		{"call", "res\xffrve"},
		{"-args", `{"a":1}`, "call", "reserve"},
		{"-args", `{}`, "ping"},
		{"-tool", "reserve", "-args", "[1]"},
		{"-tool", "reserve", "-args", "{nope"},
		{"-tool", "reserve", "-args", `{"a":1}`, "b=2"},
		{"-tool", "reserve", "tools/call"},
	} {
		r := call(t, "", append([]string{"-url", "http://127.0.0.1:1"}, args...)...)
		if r.code != exitLocal || r.stdout != "" || !strings.HasPrefix(r.stderr, "mcpcall: usage: ") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%q: exit %d stdout %q stderr %q, want one usage line and 1", args, r.code, r.stdout, r.stderr)
		}
	}
}
