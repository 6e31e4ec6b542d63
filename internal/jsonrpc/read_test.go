package jsonrpc

import (
	"bytes"
	"encoding/json"
	"github.com/northstar-mcp/mcpclient/internal/cputime"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// walk reads data with Whole, Members, Elements, String and Skip as a hand-written decoder
// would, descending into every object and array and decoding every string.
func walk(data []byte) bool {
	var value func(i, depth int) (int, bool)
	value = func(i, depth int) (int, bool) {
		switch data[i] {
		case '{':
			return Members(data, i, depth+1, func(_ []byte, v int) (int, bool) { return value(v, depth+1) })
		case '[':
			return Elements(data, i, depth+1, func(v int) (int, bool) { return value(v, depth+1) })
		case '"':
			end, _, ok := String(data, i)
			return end, ok
		}
		return Skip(data, i, depth)
	}
	return Whole(data, func(i int) (int, bool) { return value(i, 0) })
}

// mayRefuse reports whether a valid document holds what the readers leave to encoding/json:
// an escape (in a key, or a string encoding/json repairs) or invalid UTF-8.
func mayRefuse(data []byte) bool {
	return bytes.IndexByte(data, '\\') >= 0 || !utf8.Valid(data)
}

func TestWalkAgreesWithValid(t *testing.T) {
	for _, s := range scanSeeds {
		if got, want := walk([]byte(s)), valid([]byte(s)); got != want && !(want && mayRefuse([]byte(s))) {
			t.Errorf("walk(%q) = %v, valid = %v", s, got, want)
		}
	}
	for _, depth := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		for _, open := range []string{"[", `{"a":`} {
			close := map[string]string{"[": "]", `{"a":`: "}"}[open]
			doc := []byte(strings.Repeat(open, depth) + `"x"` + strings.Repeat(close, depth))
			if got, want := walk(doc), valid(doc); got != want {
				t.Errorf("%d levels of %s: walk = %v, valid = %v", depth, open, got, want)
			}
		}
	}
}

// FuzzWalk holds the readers to valid: they accept no invalid document, and refuse a valid one
// only for what they leave to encoding/json.
func FuzzWalk(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, want := walk(data), valid(data)
		if got != want && !(want && mayRefuse(data)) {
			t.Fatalf("walk(%q) = %v, valid = %v", data, got, want)
		}
	})
}

// surrogateEscape matches what may be an escaped half of a surrogate pair.
var surrogateEscape = regexp.MustCompile(`\\u[dD][89a-fA-F]`)

// FuzzString holds String to json.Unmarshal into a string: whatever it reads, encoding/json
// reads the same, and it refuses a string encoding/json reads only when encoding/json would
// repair it (invalid UTF-8, a surrogate half alone).
func FuzzString(f *testing.F) {
	for _, s := range []string{`""`, `"a"`, `"a\nb\u00e9\ud83d\ude00"`, `"\ud800"`, `"\ud800\u0041"`, `"\udc00\ud800"`,
		"\"\xff\"", `"é"`, `"\"`, `"\x"`, `"\u12"`, `5`, `null`, `"a" `, `"` + strings.Repeat("abc\\n", 40) + `"`,
		`"\b\f\n\r\t\/\\\"\u0000\u001F\uFFFD\uD83D\uDE00"`, `"\ud83d\\ude00"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		end, got, ok := String(data, 0)
		if !ok {
			var want string
			if data[0] == '"' && json.Unmarshal(data, &want) == nil && utf8.Valid(data) && !surrogateEscape.Match(data) {
				t.Fatalf("String(%q) refuses what encoding/json reads as %q", data, want)
			}
			return
		}
		var want string
		if err := json.Unmarshal(data[:end], &want); err != nil {
			t.Fatalf("String(%q) = %q, encoding/json refuses %q: %v", data, got, data[:end], err)
		}
		if got != want {
			t.Fatalf("String(%q) = %q, encoding/json reads %q", data, got, want)
		}
	})
}

func TestStringDecodesEscapesItself(t *testing.T) {
	for s, want := range map[string]string{
		`"a\nb"`: "a\nb",
		`"\b\f\n\r\t\/\\\"\u0000\u001F\u00e9\uFFFD\uD83D\uDE00"`: "\b\f\n\r\t/\\\"\x00\x1fé\uFFFD😀",
		`"` + strings.Repeat(`line\n`, 50) + `"`:                 strings.Repeat("line\n", 50),
	} {
		if _, got, ok := String([]byte(s), 0); !ok || got != want {
			t.Errorf("String(%.40q) = %q, %v; want %q", s, got, ok, want)
		}
	}
	for _, s := range []string{`"\ud800"`, `"\ud800\u0041"`, `"\udc00\ud800"`, `"\ud83d\\ude00"`, "\"\xff\""} {
		if _, got, ok := String([]byte(s), 0); ok {
			t.Errorf("String(%s) = %q; encoding/json's repair is its own", s, got)
		}
	}
}

// BenchmarkString reads a 1 MiB string: plain letters, lines of 80 bytes (a newline escaped
// ending each), and JSON text (a quote escaped every few bytes).
func BenchmarkString(b *testing.B) {
	for _, tc := range []struct{ name, pattern string }{
		{"plain", "abcdefghijklmnopqrstuvwxyz"},
		{"lines", strings.Repeat("abcdefghijklmnopqrstuvwxyz", 4)[:79] + "\n"},
		{"json", `{"id":1234,"name":"item","tags":["a","bc"],"ok":true},`},
		{"utf8", "日本語のテキスト、"},
	} {
		text := strings.Repeat(tc.pattern, 1<<20/len(tc.pattern))
		quoted, _ := json.Marshal(text)
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(quoted)))
			cpu0, cpuOK := cputime.Process()
			for b.Loop() {
				if _, s, ok := String(quoted, 0); !ok || len(s) != len(text) {
					b.Fatal(ok, len(s))
				}
			}
			if cpu1, _ := cputime.Process(); cpuOK {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}
