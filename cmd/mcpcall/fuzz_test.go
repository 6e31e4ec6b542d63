package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/northstar-mcp/mcpclient/internal/termsafe"
	"github.com/northstar-mcp/mcpclient/transport"
)

// isIFS reports the characters a POSIX shell splits words on by default.
func isIFS(r rune) bool { return r == ' ' || r == '\t' || r == '\n' }

// singleQuote quotes a word for splitCommand the way a shell script would.
func singleQuote(w string) string {
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

func FuzzSplitCommand(f *testing.F) {
	for _, seed := range []string{
		"",
		"   \t\n",
		"node server.js --stdio",
		"a b  c",
		`'a b' "c d"`,
		`a\ b`,
		`"a\"b" 'it''s'`,
		`"a\nb" "\$HOME" "\x"`,
		`x "" y ''`,
		"a\\\nb",
		`'it'\''s'`,
		`'open`,
		`"open`,
		`trailing\`,
		"é ü\u00a0x\r\ny",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := splitCommand(s)
		if !strings.ContainsAny(s, `'"\`) {
			if err != nil {
				t.Fatalf("splitCommand(%q): %v without quotes or backslashes", s, err)
			}
			// A shell splits on space, tab and newline only; where no other Unicode space
			// occurs, that is strings.Fields.
			want := strings.FieldsFunc(s, isIFS)
			if !equalWords(words, want) {
				t.Fatalf("splitCommand(%q) = %q, want %q", s, words, want)
			}
			if !strings.ContainsFunc(s, func(r rune) bool { return !isIFS(r) && strings.TrimSpace(string(r)) == "" }) {
				if fields := strings.Fields(s); !equalWords(words, fields) {
					t.Fatalf("splitCommand(%q) = %q, strings.Fields = %q", s, words, fields)
				}
			}
		}
		if err != nil {
			return
		}
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = singleQuote(w)
		}
		line := strings.Join(quoted, " ")
		again, err := splitCommand(line)
		if err != nil || !equalWords(again, words) {
			t.Fatalf("splitCommand(%q) = %q; re-quoted as %q it splits to %q, %v", s, words, line, again, err)
		}
	})
}

func equalWords(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzParseArgs fuzzes the PARAMS argument (inline, from stdin with -, from a file with @) and
// the flag values. parseArgs must not panic, and what it accepts must be usable: exactly one
// endpoint, the method given, at least one attempt, a positive timeout and params that are a
// JSON object.
func FuzzParseArgs(f *testing.F) {
	f.Add(uint8(0), "http://127.0.0.1:1/mcp", "tools/call", `{"name":"echo","arguments":{"x":1}}`, []byte(nil), "3", "5s", "auto", `"req-1"`, "X-A: b", uint8(0xff))
	f.Add(uint8(1), "http://127.0.0.1:1/sse", "ping", "", []byte(nil), "1", "1m", "never", "", "", uint8(0))
	f.Add(uint8(2), `node "server.js" --x 'a b'`, "tools/list", "-", []byte(" {\"cursor\":\"c\"}\n"), "0", "0s", "always", "7", "bad", uint8(0x3f))
	f.Add(uint8(2), "srv", "resources/read", "@", []byte(`{"uri":"file:///x"}`), "-1", "-5s", "sometimes", "", "K:", uint8(0x7f))
	f.Add(uint8(0), "http://h/mcp", "m", "[]", []byte(nil), "x", "forever", "", "", "", uint8(0x80))
	f.Add(uint8(0), "http://h/mcp", "m", "\u00a0{}\v", []byte(nil), "2", "1h", "auto", "", "", uint8(0x80))
	f.Add(uint8(0), "http://h/mcp", "-m", "{\"a\":\"\xff\"}", []byte(nil), "99999999999999999999", "1ns", "auto", "", "", uint8(0x80))
	f.Add(uint8(1), "", "m", "{} {}", []byte(nil), "", "", "", "", "", uint8(0x80))
	f.Add(uint8(0), "http://h/mcp", "m", "-", []byte("null"), "", "", "", "", "", uint8(0x80))
	f.Add(uint8(0), "http://h/mcp", "m", "-", []byte("{\"a\":"), "", "", "", "", "", uint8(0x80))
	f.Add(uint8(0), "htps://u:p@h/mcp?t=1", "ping", "", []byte(nil), "", "", "", "", "Authorization: Bearer t\r\nX-B: c", uint8(0x10))
	f.Add(uint8(1), "http://h:99999/sse", "tools/call", `{"arguments":{}}`, []byte(nil), "", "", "", "X A: b", "", uint8(0xa0))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, endpointKind uint8, endpoint, method, params string, input []byte,
		attempts, timeout, retry, id, header string, present uint8) {
		var args []string
		flagArg := func(bit uint, name, v string) {
			if present&(1<<bit) != 0 {
				args = append(args, "-"+name+"="+v)
			}
		}
		args = append(args, "-"+[]string{"url", "sse", "cmd"}[endpointKind%3]+"="+endpoint)
		flagArg(0, "attempts", attempts)
		flagArg(1, "timeout", timeout)
		flagArg(2, "retry", retry)
		flagArg(3, "id", id)
		flagArg(4, "header", header)
		flagArg(5, "header", id) // a second, repeated -header
		if present&(1<<6) != 0 && endpointKind%3 != 0 {
			args = append(args, "-url="+endpoint) // two endpoints
		}
		args = append(args, method)
		inline := present&(1<<7) != 0 || params == "-" || strings.HasPrefix(params, "@")
		switch {
		case params == "-":
		case strings.HasPrefix(params, "@"):
			// Never read a file the fuzzer names: read the input from a file of our own.
			file, err := os.CreateTemp(dir, "params")
			if err != nil {
				t.Fatal(err)
			}
			defer os.Remove(file.Name())
			if _, err := file.Write(input); err != nil {
				t.Fatal(err)
			}
			file.Close()
			params = "@" + file.Name()
		}
		if inline {
			args = append(args, params)
		}

		o, err := parseArgs(args, bytes.NewReader(input), io.Discard, io.Discard)
		if err != nil {
			if o != nil {
				t.Fatalf("parseArgs(%q) returned options with error %v", args, err)
			}
			return
		}
		if !json.Valid(o.params) || len(o.params) == 0 || o.params[0] != '{' {
			t.Fatalf("parseArgs(%q): params %q is not a JSON object", args, o.params)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(o.params, &obj); err != nil || obj == nil {
			t.Fatalf("parseArgs(%q): params %q do not decode as an object: %v", args, o.params, err)
		}
		n := 0
		for _, e := range []string{o.url, o.sse, o.cmd} {
			if e != "" {
				n++
			}
		}
		switch {
		case n != 1:
			t.Fatalf("parseArgs(%q) accepted %d endpoints", args, n)
		case o.attempts < 1:
			t.Fatalf("parseArgs(%q) accepted %d attempts", args, o.attempts)
		case o.timeout <= 0:
			t.Fatalf("parseArgs(%q) accepted timeout %v", args, o.timeout)
		}
		for _, e := range []string{o.url, o.sse} {
			if u, err := url.Parse(e); e != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
				t.Fatalf("parseArgs(%q) accepted the endpoint %q", args, e)
			}
		}
		if o.method == "" {
			t.Fatalf("parseArgs(%q) accepted an empty METHOD", args)
		}
		// Building the transport and the policy must not panic either; neither connects. A
		// transport built carries no header net/http would refuse to send.
		tr, err := o.transport(newTerminal(io.Discard))
		if err == nil && tr == nil {
			t.Fatalf("parseArgs(%q): transport() returned nil and no error", args)
		}
		var sent http.Header
		switch tr := tr.(type) {
		case *transport.HTTP:
			sent = tr.Header
		case *transport.SSE:
			sent = tr.Header
		}
		for k, vs := range sent {
			for _, v := range vs {
				if strings.ContainsAny(k, " :\r\n\x00") || strings.ContainsAny(v, "\r\n\x00") {
					t.Fatalf("parseArgs(%q): transport() accepted the header %q: %q", args, k, v)
				}
			}
		}
		_, _ = o.policy()

		if len(method) > 1 && method[0] == '-' {
			return // METHOD was read as a flag, so the arguments after it shifted
		}
		if method == "call" {
			return // the short form of a tool call, which FuzzToolArguments covers
		}
		var want []byte
		switch {
		case !inline:
			want = []byte("{}")
		case params == "-" || strings.HasPrefix(params, "@"):
			want = bytes.TrimSpace(input)
		default:
			want = bytes.TrimSpace([]byte(params))
		}
		switch {
		case !bytes.Equal(o.params, want):
			t.Fatalf("parseArgs(%q): params %q, want %q", args, o.params, want)
		case o.method != method:
			t.Fatalf("parseArgs(%q): method %q, want %q", args, o.method, method)
		case o.idSet != (present&(1<<3) != 0) || (o.idSet && o.id != id):
			t.Fatalf("parseArgs(%q): id %q (set %v), want %q", args, o.id, o.idSet, id)
		}
	})
}

// FuzzTerminal: whatever the server sends, what reaches the terminal is printable UTF-8 (and
// newlines and tabs, where a stdio server's lines are passed on), whichever way its stderr was
// cut into writes; and stdout's JSON decodes to what the server sent.
func FuzzTerminal(f *testing.F) {
	for _, seed := range []string{
		"",
		"plain text\n",
		terminalAttack,
		"é日本\u202eevil\u2066\U0001F600\U000E0001",
		"\xe6\x97",
		`{"text":"a` + "\u009b\x7f\xff\u2028\U0010FFFF" + `"}`,
		`["\u001b","\ud800"]`,
	} {
		f.Add([]byte(seed), uint(len(seed)/2))
	}
	f.Fuzz(func(t *testing.T, s []byte, cut uint) {
		printable := func(what string, out []byte, keepLines bool) {
			t.Helper()
			if !utf8.Valid(out) {
				t.Fatalf("%s of %q is not UTF-8: %q", what, s, out)
			}
			for _, r := range string(out) {
				if !unicode.IsPrint(r) && !(keepLines && (r == '\n' || r == '\t')) {
					t.Fatalf("%s of %q holds %U: %q", what, s, r, out)
				}
			}
		}
		line := termsafe.Append(nil, s, false)
		printable("the report line", line, false)

		var once, split bytes.Buffer
		term := newTerminal(&once)
		term.Write(s)
		term.close()
		printable("the server's stderr", once.Bytes(), true)
		if bytes.Count(once.Bytes(), []byte("\n")) != bytes.Count(s, []byte("\n"))+boolInt(len(s) > 0 && s[len(s)-1] != '\n') {
			t.Fatalf("the server's stderr %q became %q: lines added or lost", s, once.Bytes())
		}
		k := int(cut % uint(len(s)+1))
		term = newTerminal(&split)
		term.Write(s[:k])
		term.Write(s[k:])
		term.close()
		if !bytes.Equal(once.Bytes(), split.Bytes()) {
			t.Fatalf("%q written at once is %q, cut at %d %q", s, once.Bytes(), k, split.Bytes())
		}

		var compact bytes.Buffer
		if json.Compact(&compact, s) != nil {
			return
		}
		out := termsafe.JSON(compact.Bytes())
		printable("stdout", out, false)
		var want, got any
		if err := json.Unmarshal(compact.Bytes(), &want); err != nil {
			return
		}
		if err := json.Unmarshal(out, &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("stdout %q decodes to %v, %v; the server sent %q, %v", out, got, err, s, want)
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
