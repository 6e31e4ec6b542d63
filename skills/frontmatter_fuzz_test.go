package skills

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
)

// suiteFrontmatter is the MCP conformance suite's reading of a SKILL.md's frontmatter, which
// SplitFrontmatter must agree with: an optional byte order mark, a line "---", the frontmatter,
// and the first line that is "---" with trailing spaces or tabs.
var suiteFrontmatter = regexp.MustCompile(`\A(?:\x{FEFF})?---\r?\n((?s:.)*?)\r?\n---[ \t]*(?:\r?\n|\z)`)

// FuzzSkillFrontmatter checks the reading of a SKILL.md a server sends: SplitFrontmatter agrees
// with the suite's expression; comparing the frontmatter with an entry neither panics nor walks
// the whole of a value that YAML aliases make huge; a frontmatter compares equal to its own
// rendering as JSON; and a SKILL.md is returned only when it passed every check.
func FuzzSkillFrontmatter(f *testing.F) {
	// The seed corpus, in testdata/fuzz/FuzzSkillFrontmatter, holds the conformance suite's
	// SKILL.md, a tampered one, the edges of the delimiter lines, alias fan-out, merge keys,
	// tags, numbers, keys that are no strings, bytes that are no UTF-8, and the frontmatters
	// beyond the bounds (a merge-key bomb, deep nestings); these add the near misses of the
	// closing line.
	for _, seed := range []string{
		"---\nname: a\n--- x\n---\r",
		"--- \nname: a\n---\n",
		"---\nname: a\r---\n",
	} {
		f.Add([]byte(seed))
	}
	want, err := decodeObject(json.RawMessage(`{"name":"pdf-processing","description":"Extract, fill, and assemble PDF documents","metadata":{"n":[1,2.5,"x",null,true]}}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		// Every input, however hostile, is read within a budget of time and memory.
		d, alloc := measured(func() { checkFrontmatterInput(t, doc, want) })
		if d > time.Second || alloc > 64<<20 {
			t.Fatalf("%d bytes took %v and allocated %d bytes", len(doc), d, alloc)
		}
	})
}

// checkFrontmatterInput checks the reading of one SKILL.md, doc.
func checkFrontmatterInput(t *testing.T, doc []byte, want map[string]any) {
	fm, body, ok := SplitFrontmatter(doc)
	m := suiteFrontmatter.FindSubmatchIndex(doc)
	if ok != (m != nil) {
		t.Fatalf("SplitFrontmatter(%q) ok %v; the suite's expression matches: %v", doc, ok, m != nil)
	}
	if ok && (!bytes.Equal(fm, doc[m[2]:m[3]]) || !bytes.Equal(body, doc[m[1]:])) {
		t.Fatalf("SplitFrontmatter(%q) = %q, %q; the suite reads %q, %q", doc, fm, body, doc[m[2]:m[3]], doc[m[1]:])
	}

	if e := compareFrontmatter(t.Context(), doc, want); e != nil && e.Check != CheckFrontmatter {
		t.Fatalf("compareFrontmatter: %v", e)
	}

	// A frontmatter is equal to itself rendered as JSON, the way a server renders it into
	// the entry.
	if self, ok := asEntryFrontmatter(fm); ok {
		if e := compareFrontmatter(t.Context(), doc, self); e != nil {
			t.Fatalf("the frontmatter of %q differs from its own JSON %v: %v", doc, self, e)
		}
	}

	// What the checks let through is the file, unchanged; what they refuse is not returned.
	p := &skillPlan{skill: &Skill{URI: "skill://s/SKILL.md"}, dir: "skill://s/", frontmatter: want}
	sum := sha256.Sum256([]byte(string(doc))) // the text as JSON carries it
	entry := File{URI: "skill://s/SKILL.md", Size: int64(len(string(doc))), Digest: "sha256:" + hex.EncodeToString(sum[:])}
	got, verr := p.verify(t.Context(), entry.URI, &entry, []mcpclient.ResourceContents{{URI: entry.URI, Text: string(doc)}})
	switch {
	case (got == nil) == (verr == nil):
		t.Fatalf("verify returned %v and %v", got, verr)
	case got != nil && (string(got.Data) != string(doc) || !got.Verified):
		t.Fatalf("verify returned %+v for %q", got, doc)
	case verr != nil && verr.Check != CheckFrontmatter:
		t.Fatalf("verify of a file that matches its entry: %v", verr)
	}
}

// asEntryFrontmatter renders the YAML frontmatter fm as JSON and decodes it as an entry's
// frontmatter; ok is false when fm is no mapping, or holds what JSON cannot (NaN, keys that
// are no strings), or stands for a value too large to render.
func asEntryFrontmatter(fm []byte) (map[string]any, bool) {
	m, err := parseFrontmatter(context.Background(), fm)
	if err != nil || !small(m, 1000) {
		return nil, false
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, false
	}
	out, err := decodeObject(raw)
	return out, err == nil
}

// small reports whether v, walked whole, has at most budget nodes.
func small(v any, budget int) bool {
	n := 0
	var walk func(v any) bool
	walk = func(v any) bool {
		if n++; n > budget {
			return false
		}
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				if !walk(e) {
					return false
				}
			}
		case map[string]any:
			for _, e := range v {
				if !walk(e) {
					return false
				}
			}
		}
		return true
	}
	return walk(v)
}

// TestFrontmatterAliasFanOut: a frontmatter whose aliases stand for 10^10 strings is refused
// for its bounds, without being expanded; one whose aliases stand for a few is read, sharing
// the anchored values.
func TestFrontmatterAliasFanOut(t *testing.T) {
	var b strings.Builder
	b.WriteString("---\nname: x\nl0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", "))
	}
	b.WriteString("---\n")
	want, err := decodeObject(json.RawMessage(`{"name":"x","l9":[[1]]}`))
	if err != nil {
		t.Fatal(err)
	}
	if e := compareFrontmatter(t.Context(), []byte(b.String()), want); e == nil || e.Field != "" || !errors.Is(e, errFrontmatterBounds) {
		t.Errorf("refusal %v, want one for the frontmatter's bounds", e)
	}

	small := "---\nname: x\nl0: &l0 [lol, lol]\nl1: &l1 [*l0, *l0]\nl2: [*l1, *l1]\n---\n"
	want, err = decodeObject(json.RawMessage(`{"name":"x","l0":["lol","lol"],"l1":[["lol","lol"],["lol","lol"]],"l2":[[["lol","lol"],["lol","lol"]],[["lol","lol"],["lol","lol"]]]}`))
	if err != nil {
		t.Fatal(err)
	}
	if e := compareFrontmatter(t.Context(), []byte(small), want); e != nil {
		t.Errorf("a small fan-out: %v", e)
	}
}

// mergeKeyBomb is a frontmatter of about 1 KiB whose merge keys, each merging the mapping
// before it twice, stand for a mapping of 2^levels members.
func mergeKeyBomb(levels int) string {
	var b strings.Builder
	b.WriteString("---\nname: x\na0: &a0 {k: v}\n")
	for i := 1; i < levels; i++ {
		fmt.Fprintf(&b, "a%d: &a%d {<<: [*a%d, *a%d], k%d: v}\n", i, i, i-1, i-1, i)
	}
	b.WriteString("---\n")
	return b.String()
}

// Hostile frontmatters, which cost a general YAML parser exponential time or quadratic memory:
// merge keys that double a mapping at each level, nestings deeper than any skill needs in flow
// and block style, aliases standing for millions of values, and one over 64 KiB are refused for
// the bounds; a mapping of thousands of keys is read, in linear time, and refused for the
// field it lacks.
var frontmatterBombs = map[string]string{
	"merge keys":        mergeKeyBomb(30),
	"flow sequences":    "---\nname: x\na: " + strings.Repeat("[", 16000) + strings.Repeat("]", 16000) + "\n---\n",
	"flow mappings":     "---\nname: x\na: " + strings.Repeat("{a: ", 8000) + strings.Repeat("}", 8000) + "\n---\n",
	"block sequences":   "---\nname: x\na:\n" + strings.Repeat("- ", 16000) + "x\n---\n",
	"block mappings":    "---\n" + nestedBlockMappings(250) + "---\n",
	"many keys":         "---\n" + manyKeys(4000) + "---\n",
	"anchors, aliases":  "---\na: &a [x, x, x, x, x, x, x, x]\nb: [" + strings.Repeat("*a, ", 8000) + "]\n---\n",
	"beyond 64 KiB":     "---\nname: x\ndescription: " + strings.Repeat("y", 64<<10) + "\n---\n",
	"alias of an alias": "---\na: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n---\n",
}

func nestedBlockMappings(depth int) string {
	var b strings.Builder
	for i := range depth {
		b.WriteString(strings.Repeat(" ", i))
		b.WriteString("a:\n")
	}
	return b.String()
}

func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "k%d: v\n", i)
	}
	return b.String()
}

// measured runs f and returns how long it took and how many bytes it allocated.
func measured(f func()) (time.Duration, uint64) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	f()
	d := time.Since(start)
	runtime.ReadMemStats(&after)
	return d, after.TotalAlloc - before.TotalAlloc
}

// TestFrontmatterBombsRefused: a frontmatter beyond the bounds is refused as a frontmatter
// failure, quickly and in little memory, whatever it stands for.
func TestFrontmatterBombsRefused(t *testing.T) {
	want, err := decodeObject(json.RawMessage(`{"name":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	for name, doc := range frontmatterBombs {
		var e *VerificationError
		d, alloc := measured(func() { e = compareFrontmatter(t.Context(), []byte(doc), want) })
		if e == nil || e.Check != CheckFrontmatter || !errors.Is(e, ErrVerification) {
			t.Errorf("%s (%d bytes): %v, want a frontmatter refusal", name, len(doc), e)
		}
		if d > time.Second || alloc > 16<<20 {
			t.Errorf("%s (%d bytes): refused in %v, allocating %d bytes", name, len(doc), d, alloc)
		}
		t.Logf("%s (%d bytes): %v in %v, %d KiB", name, len(doc), e, d, alloc>>10)
	}
}

// TestFrontmatterCancelled: a context already ended stops the parse of a frontmatter, which is
// refused with the context's error in the chain.
func TestFrontmatterCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	doc := "---\nname: x\n" + manyKeys(1000) + "---\n"
	e := compareFrontmatter(ctx, []byte(doc), map[string]any{"name": "x"})
	if e == nil || !errors.Is(e, context.Canceled) || e.Check != CheckFrontmatter {
		t.Fatalf("a cancelled parse: %v", e)
	}
}

// TestFrontmatterYAML: the frontmatter parser reads the YAML a skill's frontmatter is written
// in as YAML readers do, and refuses what it does not read.
func TestFrontmatterYAML(t *testing.T) {
	for _, tt := range []struct{ yaml, json string }{
		{"name: a\ndescription: b c", `{"name":"a","description":"b c"}`},
		{"a: 'it''s'\nb: \"x\\ty\\u00e9\\\"\"", `{"a":"it's","b":"x\ty\u00e9\""}`},
		{"a: >\n  one\n  two\n\n  three\n    more\nb: x", `{"a":"one two\nthree\n  more\n","b":"x"}`},
		{"a: |-\n  one\n   two\n\nb: x", `{"a":"one\n two","b":"x"}`},
		{"a: |+\n  one\n\n", `{"a":"one\n\n"}`},
		{"a: |2\n    x\n", `{"a":"  x\n"}`},
		{"a: plain\n  continued\n\n  after blank  # comment\nb: 1", `{"a":"plain continued\nafter blank","b":1}`},
		{"a: \"folded\n  quoted\"\nb: 'x\n\n  y'", `{"a":"folded quoted","b":"x\ny"}`},
		{"a: \"esc\\\n    aped\"", `{"a":"escaped"}`},
		{"metadata:\n  version: 2\n  tags: [pdf, \"forms\", {k: v}]\n  m: {a: 1, b, \"c\":x}", `{"metadata":{"version":2,"tags":["pdf","forms",{"k":"v"}],"m":{"a":1,"b":null,"c":"x"}}}`},
		{"a:\n- x\n- y: 1\n  z: 2\n- - n\n  - m\nb: ~", `{"a":["x",{"y":1,"z":2},["n","m"]],"b":null}`},
		{"a:\n  - x # comment\n  -\n  - [ ]\n# comment\nb: [a,\n  b, ]", `{"a":["x",null,[]],"b":["a","b"]}`},
		{"a: &x {k: v}\nb: *x\nc: &y\n  - 1\nd: *y", `{"a":{"k":"v"},"b":{"k":"v"},"c":[1],"d":[1]}`},
		{"i: 12\nj: -0x1F\nk: 0x1F\nl: 0o17\nm: +1.5e3\nn: .5\no: true\np: False\nq: 1_000\nr: yes\ns: 2024-01-02", `{"i":12,"j":"-0x1F","k":31,"l":15,"m":1500,"n":0.5,"o":true,"p":false,"q":"1_000","r":"yes","s":"2024-01-02"}`},
		{"url: http://example.com/a#b\nk: a:b\n\"quoted key\": 1\n'x': 2", `{"url":"http://example.com/a#b","k":"a:b","quoted key":1,"x":2}`},
		{"  a: 1\n  b: 2", `{"a":1,"b":2}`},
		{"a:\n\nb:", `{"a":null,"b":null}`},
	} {
		m, err := parseFrontmatter(t.Context(), []byte(tt.yaml))
		if err != nil {
			t.Errorf("%q: %v", tt.yaml, err)
			continue
		}
		got, err := json.Marshal(m)
		want, _ := decodeObject(json.RawMessage(tt.json))
		if err != nil || !sameValue(want, m) {
			t.Errorf("%q = %s, want %s", tt.yaml, got, tt.json)
		}
	}
	for _, doc := range []string{
		"", "# only a comment", "- a", "a", "a: b: c", "a: 1\na: 2", "<<: {a: 1}", "'<<': {a: 1}", "a: {<<: {b: 1}}",
		"a: !!str x", "%YAML 1.2\na: b", "? a\n: b", "a: [b: c]", "a: [x\n  y]", "a:\n\t- b", "a: \"unclosed",
		"a: [unclosed", "a: *nothing", "a: b\n  c: d", "a:\n  b: 1\n c: 2", "a: 1\n--- b\n", "a: 1\n...\n",
		"a: \"x\ny\"", "a: [x,\ny]", "a: 1\r2", "a: \x01", "a: \"\\q\"", "a: \"\\ud800\"", "a: &x &y b",
		"a:\n  &x\n  &y b", "[a]: b", "a: [,]", "a: 1 # c\n  b",
	} {
		if m, err := parseFrontmatter(t.Context(), []byte(doc)); err == nil {
			t.Errorf("%q read as %v, want a refusal", doc, m)
		}
	}
}
