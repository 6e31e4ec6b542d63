package jsonrpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// scanSeeds are frames and fragments that reach every branch of the scanner and of
// decodeFast: each is also a seed of both fuzz tests.
var scanSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}]}}`,
	`{"jsonrpc":"2.0","id":"a-b","result":{"x":[1,-2.5e+3,0.1,1E9,true,false,null,"\u00e9\n\"\\\/\b\f\r\t"]}}`,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`,
	`{"jsonrpc":"2.0","id":1,"result":{},"error":null}`,
	`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":0.5}}`,
	` [ {"jsonrpc":"2.0","id":1,"result":{}} , null , {"jsonrpc":"2.0","method":"m"} ] `,
	`[]`, `null`, `  `, `5`, `"x"`, `[5]`, `[{}]`, `{}`, `{"id":1}{"id":2}`,
	`{"ID":1}`, `{"Method":"m"}`, `{"jſonrpc":"2.0"}`, `{"i\u0064":1}`, `{"other":{"id":1},"id":2}`,
	`{"method":"m","method":null}`, `{"method":5}`, `{"jsonrpc":2.0}`, `{"method":"\u006d"}`,
	`{"method":"é"}`, "{\"method\":\"\xff\"}", `{"id":1,"id":2}`,
	`{"id":01}`, `{"id":1.}`, `{"id":-}`, `{"id":1e}`, `{"id":.5}`, `{"id":tru}`, `{"id":nul}`,
	`{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12G4"}`, "{\"a\":\"\x01\"}", `{"a" 1}`, `{"a":1,}`,
	`{"a":[1,]}`, `{"a":[1 2]}`, `{,}`, `{"a":1`, `[`, `"unterminated`, `{"a":"12345678\"9"}`,
	`{"text":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\"}`,
}

func stdValid(data []byte) bool { return json.Valid(data) }

func TestValidAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range scanSeeds {
		if got, want := valid([]byte(s)), stdValid([]byte(s)); got != want {
			t.Errorf("valid(%q) = %v, json.Valid says %v", s, got, want)
		}
	}
}

func TestValidStopsAtEncodingJSONsDepth(t *testing.T) {
	for _, depth := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		for _, open := range []string{"[", `{"a":`} {
			close := map[string]string{"[": "]", `{"a":`: "}"}[open]
			doc := []byte(strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth))
			if got, want := valid(doc), stdValid(doc); got != want {
				t.Errorf("%d levels of %s: valid = %v, json.Valid = %v", depth, open, got, want)
			}
			frame := []byte(`{"jsonrpc":"2.0","id":1,"result":` + string(doc) + `}`)
			_, fastOK := decodeFast(frame)
			_, stdErr := decodeStd(frame)
			if fastOK && stdErr != nil {
				t.Errorf("%d levels of %s in a result: decodeFast accepts what encoding/json refuses (%v)", depth, open, stdErr)
			}
		}
	}
}

// A string run is checked eight bytes at a time: a quote, backslash or control character at
// every offset of a word must still be seen.
func TestSkipStringFindsSpecialBytesAtEveryOffset(t *testing.T) {
	for n := range 150 {
		for _, c := range []byte{'"', '\\', 0x00, 0x1f, 0x20, 0x7f, 0x80, 0xff} {
			s := append(append([]byte(`"`), bytes.Repeat([]byte("a"), n)...), c)
			s = append(s, `bcdefghijklmnop`...)
			s = append(append(s, bytes.Repeat([]byte("q"), n%70)...), '"')
			if got, want := valid(s), stdValid(s); got != want {
				t.Errorf("byte %#x after %d bytes: valid = %v, json.Valid = %v", c, n, got, want)
			}
		}
	}
}

// controlOrHigh looks at 32 bytes at a time, then 8, then one: a control character or a byte
// above ASCII must be seen at every offset of every length, and a control character after a
// byte above ASCII too.
func TestControlOrHighAtEveryOffset(t *testing.T) {
	naive := func(b []byte) int {
		class := plainASCII
		for _, c := range b {
			switch {
			case c < 0x20:
				return hasControl
			case c >= 0x80:
				class = hasHigh
			}
		}
		return class
	}
	for n := range 100 {
		for at := range n {
			for _, c := range []byte{0x00, 0x1f, 0x20, 0x7f, 0x80, 0xff} {
				for _, before := range []byte{'a', 0x80} {
					b := bytes.Repeat([]byte("a"), n)
					b[at/2] = before
					b[at] = c
					if got, want := controlOrHigh(b), naive(b); got != want {
						t.Errorf("%d bytes, %#x at %d, %#x at %d: %d, want %d", n, before, at/2, c, at, got, want)
					}
				}
			}
		}
	}
}

func TestScanStringReportsEscapesAndBytesAboveASCII(t *testing.T) {
	long := strings.Repeat("x", 100)
	for _, tc := range []struct {
		s     string
		flags stringFlags
	}{
		{`""`, 0},
		{`"plain"`, 0},
		{`"` + long + `"`, 0},
		{`"a\nb"`, escaped},
		{`"` + long + `\"` + long + `"`, escaped},
		{`"\\"`, escaped},
		{`"é"`, nonASCII},
		{`"` + long + `é` + long + `\u00e9"`, escaped | nonASCII},
		{"\"\xff\"", nonASCII},
	} {
		end, flags, err := scanString([]byte(tc.s+`,`), 0)
		if err != nil || end != len(tc.s) || flags != tc.flags {
			t.Errorf("scanString(%.40q) = %d, %b, %v; want %d, %b", tc.s, end, flags, err, len(tc.s), tc.flags)
		}
	}
}

// scanString switches between reading a word at a time and searching with bytes.IndexByte as
// the runs between escapes grow and shrink: whichever way it reads, a byte that ends a run or
// makes the string invalid must be seen wherever it falls, and the flags must be right.
func TestScanStringAcrossRunLengths(t *testing.T) {
	escapes := []string{`\n`, `\"`, `\\`, `\u00e9`}
	for _, gaps := range [][]int{{0, 0, 0}, {1, 7, 8, 9}, {63, 64, 65}, {200, 0, 3, 200}, {100, 1, 100, 1}, {64, 64, 64, 64}} {
		var base []byte
		for k, g := range gaps {
			base = append(base, bytes.Repeat([]byte("a"), g)...)
			base = append(base, escapes[k%len(escapes)]...)
		}
		base = append(base, bytes.Repeat([]byte("b"), 70)...)
		for at := 0; at <= len(base); at++ {
			for _, c := range []byte{0x01, 0x1f, 0x80, '"', '\\'} {
				str := slices.Concat([]byte(`"`), base[:at], []byte{c}, base[at:], []byte(`"`))
				got, want := valid(str), stdValid(str)
				if got != want {
					t.Fatalf("%q: valid = %v, json.Valid = %v", str, got, want)
				}
				if !got {
					continue
				}
				end, flags, err := scanString(append(str, ','), 0)
				wantFlags := stringFlags(0)
				if bytes.IndexByte(str[1:len(str)-1], '\\') >= 0 {
					wantFlags |= escaped
				}
				if bytes.IndexFunc(str, func(r rune) bool { return r >= 0x80 }) >= 0 {
					wantFlags |= nonASCII
				}
				if err != nil || end != len(str) || flags != wantFlags {
					t.Fatalf("scanString(%q) = %d, %b, %v; want %d, %b", str, end, flags, err, len(str), wantFlags)
				}
			}
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := valid(data), stdValid(data); got != want {
			t.Fatalf("valid(%q) = %v, json.Valid = %v", data, got, want)
		}
	})
}

// FuzzDecodeFastMatchesEncodingJSON holds decodeFast to decodeStd: whatever it accepts, it
// decodes to the same messages, and it accepts nothing encoding/json refuses.
func FuzzDecodeFastMatchesEncodingJSON(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		fast, ok := decodeFast(frame)
		if !ok {
			return
		}
		std, err := decodeStd(frame)
		if err != nil {
			t.Fatalf("decodeFast accepts %q, encoding/json refuses it: %v", frame, err)
		}
		if !reflect.DeepEqual(describe(fast), describe(std)) {
			t.Fatalf("%q:\nfast %v\nstd  %v", frame, describe(fast), describe(std))
		}
	})
}

// describe prints messages with nil and empty raw fields told apart.
func describe(msgs []Message) []string {
	raw := func(r json.RawMessage) string {
		if r == nil {
			return "<nil>"
		}
		return string(r)
	}
	var out []string
	for _, m := range msgs {
		out = append(out, fmt.Sprintf("jsonrpc=%q id=%s method=%q params=%s result=%s error=%s",
			m.JSONRPC, raw(m.ID), m.Method, raw(m.Params), raw(m.Result), raw(m.Error)))
	}
	return out
}

func TestDecodeFastMatchesEncodingJSONOnSeeds(t *testing.T) {
	accepted := 0
	for _, s := range scanSeeds {
		fast, ok := decodeFast([]byte(s))
		std, err := decodeStd([]byte(s))
		if !ok {
			continue
		}
		accepted++
		if err != nil {
			t.Errorf("decodeFast accepts %q, encoding/json refuses it: %v", s, err)
			continue
		}
		if !reflect.DeepEqual(describe(fast), describe(std)) {
			t.Errorf("%q:\nfast %v\nstd  %v", s, describe(fast), describe(std))
		}
	}
	// The point of decodeFast is that ordinary frames never need encoding/json.
	if accepted < 8 {
		t.Errorf("decodeFast accepted only %d seeds", accepted)
	}
	for _, s := range []string{`{"ID":1}`, `{"i\u0064":1}`, `{"method":"é"}`, `{"jſonrpc":"2.0"}`, `{"method":5}`} {
		if _, ok := decodeFast([]byte(s)); ok {
			t.Errorf("decodeFast read %s itself; encoding/json's rules for it are its own", s)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	text := strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789", 1<<20/36)
	frame := []byte(`{"jsonrpc":"2.0","id":"6f1c8e2a-1d7b-4c3e-9a55-0b7e0a9c2d11","result":{"content":[{"type":"text","text":"` + text + `"}]}}`)
	for _, bc := range []struct {
		name   string
		decode func([]byte) ([]Message, error)
	}{{"fast", Decode}, {"encoding-json", decodeStd}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				if _, err := bc.decode(frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// skimmed feeds frame to a Skimmer in pieces cut every step bytes (all at once for 0).
func skimmed(frame []byte, step int) ([]string, bool) {
	var s Skimmer
	if step <= 0 {
		step = len(frame) + 1
	}
	for i := 0; i < len(frame); i += step {
		s.Write(frame[i:min(i+step, len(frame))])
	}
	raw, ok := s.Responses()
	var ids []string
	for _, id := range raw {
		ids = append(ids, string(id))
	}
	return ids, ok
}

// skimOracle is what a Skimmer must say of a frame Decode accepts: the ids of its responses,
// and whether every message is a request, a notification or a response with a usable id.
func skimOracle(msgs []Message) (ids []string, ok bool) {
	ok = true
	for _, m := range msgs {
		switch {
		case m.Method != "":
		case len(m.ID) > 0 && len(m.ID) <= skimIDMax && string(m.ID) != "null" && m.ID[0] != '{' && m.ID[0] != '[':
			ids = append(ids, string(m.ID))
		default:
			ok = false
		}
	}
	if len(ids) > skimBatchMax {
		return ids[:skimBatchMax], false
	}
	return ids, ok
}

func TestSkimmer(t *testing.T) {
	big := strings.Repeat(`x\"\\`, 1<<14)
	for _, tc := range []struct {
		frame string
		ids   []string
		ok    bool
	}{
		{`{"jsonrpc":"2.0","id":"a","result":{"text":"` + big + `"}}`, []string{`"a"`}, true},
		{`{"result":{"text":"` + big + `","id":"inner"},"jsonrpc":"2.0","id" : 42 }`, []string{`42`}, true},
		{`{"jsonrpc":"2.0","id":"b","error":{"code":1,"message":"` + big + `"}}`, []string{`"b"`}, true},
		{`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + big + `"}}`, nil, true},
		{`{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{"data":"` + big + `"}}`, nil, true},
		{`[{"jsonrpc":"2.0","id":1,"result":{"a":[1,{"b":"` + big + `"}]}},{"jsonrpc":"2.0","method":"m"},{"id":"\u0032","result":2}]`, []string{`1`, `"\u0032"`}, true},
		{`{"I\u0044":"c","result":"` + big + `"}`, []string{`"c"`}, true},
		{`{"jsonrpc":"2.0","result":"` + big + `"}`, nil, false},                      // no id
		{`{"jsonrpc":"2.0","id":null,"error":{"message":"` + big + `"}}`, nil, false}, // null id
		{`{"id":{"a":1},"result":"` + big + `"}`, nil, false},
		{`{"id":"` + strings.Repeat("i", skimIDMax) + `","result":1}`, nil, false},
		{`{"jsonrpc":"2.0","id":1,"result":"` + big, nil, false}, // cut off
		{big, nil, false},
		{`"` + big + `"`, nil, false},
		{`{"id":1,"result":1} {"id":2,"result":2}`, []string{`1`}, false},
		{`{"method":5,"result":"` + big + `"}`, nil, false},
		{`{"method":"m","method":null,"id":3}`, nil, true},
		{`{"method":"","id":3,"result":1}`, []string{`3`}, true},
	} {
		for _, step := range []int{0, 1, 7, 4096} {
			ids, ok := skimmed([]byte(tc.frame), step)
			if !slices.Equal(ids, tc.ids) || ok != tc.ok {
				t.Errorf("Skimmer(%.80s…) in pieces of %d = %v, %v; want %v, %v", tc.frame, step, ids, ok, tc.ids, tc.ok)
			}
		}
	}
}

// FuzzSkimmer holds the Skimmer to Decode: of every frame Decode accepts, in pieces of any
// size, it reports the responses' ids, and whether every message is accounted for, as the
// decoded messages say.
func FuzzSkimmer(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, frame []byte, step uint8) {
		ids, ok := skimmed(frame, int(step))
		msgs, err := Decode(frame)
		if err != nil {
			return
		}
		wantIDs, wantOK := skimOracle(msgs)
		if !slices.Equal(ids, wantIDs) || ok != wantOK {
			t.Fatalf("Skimmer(%q) in pieces of %d = %v, %v; Decode says %v, %v", frame, step, ids, ok, wantIDs, wantOK)
		}
	})
}
