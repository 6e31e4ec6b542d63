package termsafe_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/northstar-mcp/mcpclient/internal/termsafe"
)

// attack retitles the terminal (OSC), erases the line, returns the cursor and writes a forged
// line, with a C1 CSI, DEL, an invalid byte, a line separator and a right-to-left override.
const attack = "\x1b]0;pwned\x07\x1b[2K\rok\u009b31m\x7f\xff\u2028\u202e\nok"

func TestLine(t *testing.T) {
	for in, want := range map[string]string{
		"":                         "",
		"https://as.example/a?b=c": "https://as.example/a?b=c",
		"é日本\U0001F600":            "é日本\U0001F600",
		attack:                     `\x1b]0;pwned\x07\x1b[2K\rok\u009b31m\x7f\xff\u2028\u202e\nok`,
		"a\tb":                     `a\tb`,
		"\U000E0001":               `\U000e0001`,
	} {
		if got := termsafe.Line(in); got != want {
			t.Errorf("Line(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestAppendKeepsLines(t *testing.T) {
	got := string(termsafe.Append([]byte("> "), []byte("one\ttwo\n\x1b[2Kthree\n"), true))
	if want := "> one\ttwo\n\\x1b[2Kthree\n"; got != want {
		t.Fatalf("Append = %q; want %q", got, want)
	}
}

// FuzzEscape: whatever the input, Append and Line give printable UTF-8 (and newlines and tabs
// where lines are kept), and JSON gives JSON that decodes to what went in.
func FuzzEscape(f *testing.F) {
	for _, seed := range []string{
		"",
		"plain text\n",
		attack,
		"é日本\u202eevil\u2066\U0001F600\U000E0001",
		"\xe6\x97",
		`{"text":"a` + "\u009b\x7f\xff\u2028\U0010FFFF" + `"}`,
		`["\u001b","\ud800"]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
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
		printable("Append", termsafe.Append(nil, s, false), false)
		lines := termsafe.Append(nil, s, true)
		printable("Append keeping lines", lines, true)
		if bytes.Count(lines, []byte("\n")) != bytes.Count(s, []byte("\n")) {
			t.Fatalf("Append keeping lines of %q gave %q: lines added or lost", s, lines)
		}
		printable("Line", []byte(termsafe.Line(string(s))), false)

		var compact bytes.Buffer
		if json.Compact(&compact, s) != nil {
			return
		}
		out := termsafe.JSON(compact.Bytes())
		printable("JSON", out, false)
		var want, got any
		if err := json.Unmarshal(compact.Bytes(), &want); err != nil {
			return
		}
		if err := json.Unmarshal(out, &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("JSON %q decodes to %v, %v; the input %q to %v", out, got, err, s, want)
		}
	})
}
