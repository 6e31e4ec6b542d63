package mcpclient

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
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
	// tags, numbers, keys that are no strings and bytes that are no UTF-8; these add the
	// near misses of the closing line.
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
		fm, body, ok := SplitFrontmatter(doc)
		m := suiteFrontmatter.FindSubmatchIndex(doc)
		if ok != (m != nil) {
			t.Fatalf("SplitFrontmatter(%q) ok %v; the suite's expression matches: %v", doc, ok, m != nil)
		}
		if ok && (!bytes.Equal(fm, doc[m[2]:m[3]]) || !bytes.Equal(body, doc[m[1]:])) {
			t.Fatalf("SplitFrontmatter(%q) = %q, %q; the suite reads %q, %q", doc, fm, body, doc[m[2]:m[3]], doc[m[1]:])
		}

		start := time.Now()
		if e := compareFrontmatter(doc, want); e != nil && e.Check != SkillCheckFrontmatter {
			t.Fatalf("compareFrontmatter: %v", e)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("compareFrontmatter took %v", d)
		}

		// A frontmatter is equal to itself rendered as JSON, the way a server renders it into
		// the entry.
		if self, ok := asEntryFrontmatter(fm); ok {
			if e := compareFrontmatter(doc, self); e != nil {
				t.Fatalf("the frontmatter of %q differs from its own JSON %v: %v", doc, self, e)
			}
		}

		// What the checks let through is the file, unchanged; what they refuse is not returned.
		p := &skillPlan{skill: &Skill{URI: "skill://s/SKILL.md"}, dir: "skill://s/", frontmatter: want}
		sum := sha256.Sum256([]byte(string(doc))) // the text as JSON carries it
		entry := SkillFile{URI: "skill://s/SKILL.md", Size: int64(len(string(doc))), Digest: "sha256:" + hex.EncodeToString(sum[:])}
		got, verr := p.verify(entry.URI, &entry, []ResourceContents{{URI: entry.URI, Text: string(doc)}})
		switch {
		case (got == nil) == (verr == nil):
			t.Fatalf("verify returned %v and %v", got, verr)
		case got != nil && (string(got.Data) != string(doc) || !got.Verified):
			t.Fatalf("verify returned %+v for %q", got, doc)
		case verr != nil && verr.Check != SkillCheckFrontmatter:
			t.Fatalf("verify of a file that matches its entry: %v", verr)
		}
	})
}

// asEntryFrontmatter renders the YAML frontmatter fm as JSON and decodes it as an entry's
// frontmatter; ok is false when fm is no mapping, or holds what JSON cannot (NaN, keys that
// are no strings), or stands for a value too large to render.
func asEntryFrontmatter(fm []byte) (map[string]any, bool) {
	m, err := parseYAMLMapping(fm)
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

// TestFrontmatterAliasFanOut: a frontmatter whose aliases stand for 10^10 strings is compared,
// and shown in the error, without being expanded.
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
	done := make(chan *SkillVerificationError, 1)
	go func() { done <- compareFrontmatter([]byte(b.String()), want) }()
	select {
	case e := <-done:
		if e == nil || e.Field != "l0" || len(e.Got) > maxShown+len("…") {
			t.Errorf("refusal %v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the comparison expands the aliases")
	}
}
