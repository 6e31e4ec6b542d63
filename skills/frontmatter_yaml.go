package skills

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A SKILL.md's frontmatter is the server's text, read before anything vouches for what it
// stands for. General YAML parsers cannot be bounded: merge keys make a mapping of 2^n members
// from n lines, and the parsers at hand take time and memory quadratic in the nesting or in the
// number of keys, with no option to cap either. The frontmatter of a skill is a mapping of a
// few fields (name, description, license, compatibility, metadata, allowed-tools) holding
// strings, a map of strings, at most a list: so the client reads it with a parser of its own,
// for the YAML a frontmatter is written in, that costs time and memory linear in the text and
// refuses what is beyond its bounds.
//
// It reads block mappings and sequences (indentless ones too), flow mappings and sequences,
// plain, single- and double-quoted scalars, literal and folded block scalars, comments, and
// anchors with their aliases, which share the anchored value rather than copy it. Plain
// scalars resolve as the YAML 1.2 core schema says (null, booleans, integers, floats); keys
// stay strings. It refuses, as no frontmatter of a skill needs them and readers disagree on
// them: merge keys ("<<"), tags, directives, complex keys ("?"), single-pair mappings in flow
// sequences, plain scalars over several lines of a flow collection, duplicate keys, tabs in
// indentation and text that is not UTF-8 or holds control characters.

// The bounds of a frontmatter.
const (
	// maxFrontmatterBytes bounds the frontmatter's length.
	maxFrontmatterBytes = 64 << 10
	// maxFrontmatterDepth bounds the nesting of collections: a skill's needs two or three.
	maxFrontmatterDepth = 32
	// maxFrontmatterNodes bounds the values a frontmatter stands for, counted as a reader that
	// expands its aliases would: without aliases no frontmatter within maxFrontmatterBytes
	// reaches it, so it bounds alias expansion alone.
	maxFrontmatterNodes = 1 << 16
)

// errFrontmatterBounds is the cause of a refusal of a frontmatter beyond the client's bounds.
var errFrontmatterBounds = errors.New("the frontmatter is beyond the client's bounds")

// parseFrontmatter parses text, a SKILL.md's YAML frontmatter, which must be a mapping.
func parseFrontmatter(ctx context.Context, text []byte) (map[string]any, error) {
	if len(text) > maxFrontmatterBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", errFrontmatterBounds, len(text), maxFrontmatterBytes)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("the check was stopped: %w", err)
	}
	src, err := normalizeFrontmatter(text)
	if err != nil {
		return nil, err
	}
	p := &fmParser{ctx: ctx, src: src}
	m, err := p.document()
	if err != nil {
		if p.ctx.Err() != nil && errors.Is(err, p.ctx.Err()) {
			return nil, fmt.Errorf("the check was stopped: %w", err)
		}
		return nil, fmt.Errorf("the frontmatter, line %d: %w", 1+bytes.Count(p.src[:min(p.pos, len(p.src))], []byte("\n")), err)
	}
	return m, nil
}

// normalizeFrontmatter checks that text is UTF-8 without control characters, and returns it
// with its line breaks as "\n" and a last one added: every line of the frontmatter ends with
// one in the SKILL.md.
func normalizeFrontmatter(text []byte) ([]byte, error) {
	if !utf8.Valid(text) {
		return nil, errors.New("the frontmatter is not UTF-8")
	}
	src := make([]byte, 0, len(text)+1)
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '\r' && i+1 < len(text) && text[i+1] == '\n':
			continue
		case c < 0x20 && c != '\n' && c != '\t', c == 0x7f:
			return nil, fmt.Errorf("the frontmatter holds the control character %#02x", c)
		}
		src = append(src, c)
	}
	if len(src) == 0 || src[len(src)-1] != '\n' {
		src = append(src, '\n')
	}
	return src, nil
}

type fmAnchor struct {
	v     any
	nodes int
}

// fmParser reads src by recursive descent. Every line is read once per level of nesting it is
// in, and the nesting is bounded, so the time is linear in src; every value it makes holds
// bytes of src, or shares an anchored value, so the memory is too.
type fmParser struct {
	ctx       context.Context
	src       []byte // ends with "\n"; holds no NUL, so 0 stands for its end
	pos       int
	lineStart int // the offset of the line pos is on
	anchors   map[string]fmAnchor
}

// at returns the byte at i, or 0 past the end.
func (p *fmParser) at(i int) byte {
	if i < len(p.src) {
		return p.src[i]
	}
	return 0
}

func (p *fmParser) col() int { return p.pos - p.lineStart }

func blankByte(c byte) bool { return c == ' ' || c == '\t' }

// spaceOrEnd reports whether c ends a token in block context: a blank, a line break, the end.
func spaceOrEnd(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == 0 }

// skipBlanks skips spaces and tabs within the line, reporting whether it skipped any.
func (p *fmParser) skipBlanks() bool {
	start := p.pos
	for blankByte(p.at(p.pos)) {
		p.pos++
	}
	return p.pos > start
}

// newLine moves past the line break at pos, checking the context once a line.
func (p *fmParser) newLine() error {
	p.pos++
	p.lineStart = p.pos
	return p.ctx.Err()
}

// lineEnd reads the rest of the line, which may hold only blanks and a comment, and moves to the
// next line.
func (p *fmParser) lineEnd() error {
	blanks := p.skipBlanks() || p.pos == p.lineStart
	if p.at(p.pos) == '#' && blanks {
		p.pos += bytes.IndexByte(p.src[p.pos:], '\n')
	}
	if p.at(p.pos) != '\n' {
		return fmt.Errorf("unexpected %q after the value", p.rest(10))
	}
	return p.newLine()
}

// rest returns up to n bytes of the line from pos, for an error.
func (p *fmParser) rest(n int) string {
	end := p.pos + bytes.IndexByte(p.src[p.pos:], '\n')
	if end < p.pos {
		end = len(p.src)
	}
	return string(p.src[p.pos:min(end, p.pos+n)])
}

// peekLine moves to the first character of the next line, from the start of the current one,
// that holds more than blanks and a comment, and returns its indentation; ok is false at the
// end. It may be called again on the same line.
func (p *fmParser) peekLine() (indent int, ok bool, err error) {
	p.pos = p.lineStart
	for {
		for p.at(p.pos) == ' ' {
			p.pos++
		}
		indent = p.col()
		p.skipBlanks()
		switch c := p.at(p.pos); {
		case c == 0:
			return 0, false, nil
		case c == '\n' || c == '#':
			p.pos += bytes.IndexByte(p.src[p.pos:], '\n')
			if err := p.newLine(); err != nil {
				return 0, false, err
			}
			continue
		case p.pos != p.lineStart+indent:
			return 0, false, errors.New("a tab in the indentation")
		case indent == 0 && p.documentMarker():
			return 0, false, errors.New("a document marker in the frontmatter")
		}
		return indent, true, nil
	}
}

// documentMarker reports whether the line at pos begins with "---" or "...".
func (p *fmParser) documentMarker() bool {
	s := p.src[p.pos:]
	return (bytes.HasPrefix(s, []byte("---")) || bytes.HasPrefix(s, []byte("..."))) && spaceOrEnd(p.at(p.pos+3))
}

func (p *fmParser) document() (map[string]any, error) {
	indent, ok, err := p.peekLine()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("the frontmatter is empty, no mapping")
	}
	if _, ok := p.mappingKey(); !ok {
		return nil, errors.New("the frontmatter is no YAML mapping")
	}
	p.anchors = make(map[string]fmAnchor)
	m, _, err := p.blockMapping(indent, 1)
	if err != nil {
		return nil, err
	}
	if _, ok, err := p.peekLine(); err != nil || ok {
		return nil, cmpErr(err, fmt.Errorf("unexpected %q after the mapping", p.rest(10)))
	}
	return m, nil
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// addNodes adds n to the count of values total stands for, refusing a count beyond the bound.
func addNodes(total *int, n int) error {
	*total += n
	if *total > maxFrontmatterNodes {
		return fmt.Errorf("%w: its aliases stand for more than %d values", errFrontmatterBounds, maxFrontmatterNodes)
	}
	return nil
}

func checkDepth(depth int) error {
	if depth > maxFrontmatterDepth {
		return fmt.Errorf("%w: collections nested more than %d deep", errFrontmatterBounds, maxFrontmatterDepth)
	}
	return nil
}

// mappingKey reads, without moving, the implicit key of a block mapping at pos: a quoted or
// plain scalar on the line, followed by ":" and a blank or the line's end. ok is false when the
// line holds no such key there.
func (p *fmParser) mappingKey() (key fmKey, ok bool) {
	save := p.pos
	defer func() { p.pos = save }()
	switch c := p.at(p.pos); c {
	case '"', '\'':
		s, err := p.quoted(-1, false)
		if err != nil {
			return fmKey{}, false
		}
		key.text = s
	default:
		if !p.plainStart(false) {
			return fmKey{}, false
		}
		start := p.pos
		for {
			c := p.at(p.pos)
			if c == '\n' || c == 0 {
				return fmKey{}, false
			}
			if c == ':' && spaceOrEnd(p.at(p.pos+1)) {
				break
			}
			if c == '#' && blankByte(p.at(p.pos-1)) {
				return fmKey{}, false
			}
			p.pos++
		}
		key.text = strings.TrimRight(string(p.src[start:p.pos]), " \t")
		key.plain = true
	}
	p.skipBlanks()
	if p.at(p.pos) != ':' || !spaceOrEnd(p.at(p.pos+1)) {
		return fmKey{}, false
	}
	key.end = p.pos + 1
	return key, true
}

type fmKey struct {
	text  string
	plain bool
	end   int // the offset after its ":"
}

// plainStart reports whether a plain scalar may begin at pos.
func (p *fmParser) plainStart(flow bool) bool {
	c := p.at(p.pos)
	switch c {
	case '-', '?', ':':
		next := p.at(p.pos + 1)
		return !spaceOrEnd(next) && !(flow && strings.IndexByte(",[]{}", next) >= 0)
	case 0, '\n', ' ', '\t', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
		return false
	}
	return true
}

// seqEntry reports whether a block sequence entry, "-" and a blank or the line's end, is at pos.
func (p *fmParser) seqEntry() bool {
	return p.at(p.pos) == '-' && spaceOrEnd(p.at(p.pos+1))
}

// blockMapping reads the block mapping whose first key is at pos, at column indent.
func (p *fmParser) blockMapping(indent, depth int) (map[string]any, int, error) {
	if err := checkDepth(depth); err != nil {
		return nil, 0, err
	}
	m := make(map[string]any)
	nodes := 1
	for {
		key, ok := p.mappingKey()
		if !ok {
			return nil, 0, fmt.Errorf("%q is no key of the mapping", p.rest(20))
		}
		if key.text == "<<" {
			return nil, 0, errors.New("a merge key (<<): readers disagree on it, and it can stand for a mapping without bound")
		}
		if _, dup := m[key.text]; dup {
			return nil, 0, fmt.Errorf("the key %q twice", key.text)
		}
		p.pos = key.end
		v, n, err := p.value(indent, depth, false, true)
		if err != nil {
			return nil, 0, err
		}
		m[key.text] = v
		if err := addNodes(&nodes, n); err != nil {
			return nil, 0, err
		}
		next, ok, err := p.peekLine()
		switch {
		case err != nil:
			return nil, 0, err
		case !ok || next < indent:
			p.pos = p.lineStart
			return m, nodes, nil
		case next > indent:
			return nil, 0, errors.New("unexpected indentation")
		}
	}
}

// blockSequence reads the block sequence whose first entry is at pos, at column indent.
func (p *fmParser) blockSequence(indent, depth int) ([]any, int, error) {
	if err := checkDepth(depth); err != nil {
		return nil, 0, err
	}
	var s []any
	nodes := 1
	for {
		if !p.seqEntry() {
			p.pos = p.lineStart
			return s, nodes, nil
		}
		p.pos++
		v, n, err := p.value(indent, depth, true, false)
		if err != nil {
			return nil, 0, err
		}
		s = append(s, v)
		if err := addNodes(&nodes, n); err != nil {
			return nil, 0, err
		}
		next, ok, err := p.peekLine()
		switch {
		case err != nil:
			return nil, 0, err
		case !ok || next < indent:
			p.pos = p.lineStart
			return s, nodes, nil
		case next > indent:
			return nil, 0, errors.New("unexpected indentation")
		}
	}
}

// value reads the value after a mapping's ":" or a sequence's "-" at pos, of a collection at
// column indent: on the rest of the line, or on the lines after it. compact allows a sequence
// or a mapping to begin on the line ("- - a", "- a: b"); indentless allows a sequence at indent
// itself on the next lines, as the value of a mapping's key. It ends at the start of a line.
func (p *fmParser) value(indent, depth int, compact, indentless bool) (any, int, error) {
	p.skipBlanks()
	anchor := ""
	if p.at(p.pos) == '&' {
		anchor = p.name()
		if anchor == "" {
			return nil, 0, errors.New("an anchor without a name")
		}
		if !spaceOrEnd(p.at(p.pos)) {
			return nil, 0, errors.New("an anchor not followed by a blank")
		}
		p.skipBlanks()
	}
	var v any
	var n int
	var err error
	switch c := p.at(p.pos); {
	case c == '!':
		return nil, 0, errors.New("a tag: the frontmatter of a skill needs none")
	case c == '*':
		if anchor != "" {
			return nil, 0, errors.New("an alias with an anchor")
		}
		if v, n, err = p.alias(); err != nil {
			return nil, 0, err
		}
		return v, n, p.lineEnd()
	case c == '\n' || c == '#' && blankByte(p.at(p.pos-1)):
		if err = p.lineEnd(); err != nil {
			return nil, 0, err
		}
		var next int
		var ok bool
		next, ok, err = p.peekLine()
		switch {
		case err != nil:
			return nil, 0, err
		case ok && next > indent:
			v, n, err = p.blockNode(indent, next, depth, anchor == "")
		case ok && next == indent && indentless && p.seqEntry():
			v, n, err = p.blockSequence(indent, depth+1)
		default:
			p.pos = p.lineStart
			v, n = nil, 1
		}
	case compact && anchor == "" && p.seqEntry():
		v, n, err = p.blockSequence(p.col(), depth+1)
	case compact && anchor == "":
		if _, ok := p.mappingKey(); ok {
			v, n, err = p.blockMapping(p.col(), depth+1)
			break
		}
		v, n, err = p.inline(indent, depth)
	default:
		v, n, err = p.inline(indent, depth)
	}
	if err != nil {
		return nil, 0, err
	}
	if anchor != "" {
		p.anchors[anchor] = fmAnchor{v, n}
	}
	return v, n, nil
}

// blockNode reads the node that begins a line, at column col, in a collection at column
// parent. props is false when the node already has an anchor, on the line before: a node has
// one at most, which also keeps a run of lines holding anchors from recursing a level each.
func (p *fmParser) blockNode(parent, col, depth int, props bool) (any, int, error) {
	switch c := p.at(p.pos); {
	case (c == '&' || c == '*') && !props:
		return nil, 0, errors.New("a second anchor, or an alias with an anchor")
	case c == '&' || c == '*' || c == '!':
		return p.value(parent, depth, false, false)
	case p.seqEntry():
		return p.blockSequence(col, depth+1)
	}
	if _, ok := p.mappingKey(); ok {
		return p.blockMapping(col, depth+1)
	}
	return p.inline(parent, depth)
}

// name reads the name of an anchor or alias after its "&" or "*".
func (p *fmParser) name() string {
	p.pos++
	start := p.pos
	for c := p.at(p.pos); !spaceOrEnd(c) && strings.IndexByte(",[]{}", c) < 0; c = p.at(p.pos) {
		p.pos++
	}
	return string(p.src[start:p.pos])
}

func (p *fmParser) alias() (any, int, error) {
	name := p.name()
	a, ok := p.anchors[name]
	if !ok {
		return nil, 0, fmt.Errorf("the alias *%s names no anchor before it", name)
	}
	return a.v, a.nodes, nil
}

// inline reads a scalar or flow collection that begins at pos, in a collection at column
// indent, and the rest of its last line.
func (p *fmParser) inline(indent, depth int) (any, int, error) {
	switch c := p.at(p.pos); c {
	case '|', '>':
		s, err := p.blockScalar(indent)
		return s, 1, err
	case '[', '{':
		v, n, err := p.flow(indent, depth+1)
		if err != nil {
			return nil, 0, err
		}
		return v, n, p.lineEnd()
	case '"', '\'':
		s, err := p.quoted(indent, false)
		if err != nil {
			return nil, 0, err
		}
		return s, 1, p.lineEnd()
	}
	if !p.plainStart(false) {
		return nil, 0, fmt.Errorf("unexpected %q", p.rest(10))
	}
	s, err := p.plainBlock(indent)
	if err != nil {
		return nil, 0, err
	}
	return resolvePlain(s), 1, nil
}

// plainBlock reads a plain scalar in block context, folding the lines indented beyond indent
// that continue it, and moves to the line after it.
func (p *fmParser) plainBlock(indent int) (string, error) {
	var b strings.Builder
	breaks := 0
	for first := true; ; first = false {
		start := p.pos
		comment := false
	line:
		for {
			switch c := p.at(p.pos); {
			case c == '\n':
				break line
			case c == ':' && spaceOrEnd(p.at(p.pos+1)):
				return "", errors.New("a mapping value where a plain scalar is (quote it)")
			case c == '#' && blankByte(p.at(p.pos-1)):
				comment = true
				break line
			}
			p.pos++
		}
		text := strings.TrimRight(string(p.src[start:p.pos]), " \t")
		switch {
		case first:
		case breaks == 0:
			b.WriteByte(' ')
		default:
			b.WriteString(strings.Repeat("\n", breaks))
		}
		b.WriteString(text)
		p.pos += bytes.IndexByte(p.src[p.pos:], '\n')
		if err := p.newLine(); err != nil {
			return "", err
		}
		if comment {
			return b.String(), nil
		}
		// The next line continues the scalar if it is indented beyond indent and is no comment;
		// blank lines between count as line breaks.
		breaks = 0
		for {
			i := p.pos
			for p.at(i) == ' ' {
				i++
			}
			j := i
			for blankByte(p.at(j)) {
				j++
			}
			if p.at(j) == '\n' {
				breaks++
				p.pos = j
				if err := p.newLine(); err != nil {
					return "", err
				}
				continue
			}
			if p.at(j) == 0 || p.at(j) == '#' || i-p.lineStart <= indent || (i-p.lineStart == 0 && p.documentMarkerAt(i)) {
				return b.String(), nil
			}
			p.pos = j
			break
		}
	}
}

func (p *fmParser) documentMarkerAt(i int) bool {
	save := p.pos
	p.pos = i
	defer func() { p.pos = save }()
	return p.documentMarker()
}

// quoted reads a single- or double-quoted scalar at pos. Its lines after the first must be
// indented beyond indent (-1: it must stay on one line, as a key does).
func (p *fmParser) quoted(indent int, flow bool) (string, error) {
	q := p.at(p.pos)
	p.pos++
	var b strings.Builder
	for {
		c := p.at(p.pos)
		switch {
		case c == 0:
			return "", errors.New("a quoted scalar without its closing quote")
		case c == q && q == '\'' && p.at(p.pos+1) == '\'':
			b.WriteByte('\'')
			p.pos += 2
		case c == q:
			p.pos++
			return b.String(), nil
		case c == '\\' && q == '"':
			if p.at(p.pos+1) == '\n' {
				if indent < 0 {
					return "", errors.New("a key over several lines")
				}
				p.pos++
				if err := p.fold(indent, nil); err != nil {
					return "", err
				}
				continue
			}
			if err := p.escape(&b); err != nil {
				return "", err
			}
		case c == '\n' || blankByte(c):
			// Blanks before a line break are dropped, as are those after it.
			i := p.pos
			for blankByte(p.at(i)) {
				i++
			}
			if p.at(i) != '\n' {
				b.WriteString(string(p.src[p.pos:i]))
				p.pos = i
				continue
			}
			if indent < 0 {
				return "", errors.New("a key over several lines")
			}
			p.pos = i
			if err := p.fold(indent, &b); err != nil {
				return "", err
			}
		default:
			b.WriteByte(c)
			p.pos++
		}
	}
}

// fold moves past the line break at pos, and the blank lines after it, inside a quoted scalar,
// writing to b (when not nil) what they fold to: a space for a lone break, a line break for
// each blank line otherwise. The next line must be indented beyond indent.
func (p *fmParser) fold(indent int, b *strings.Builder) error {
	breaks := 0
	for {
		if err := p.newLine(); err != nil {
			return err
		}
		i := p.pos
		for p.at(i) == ' ' {
			i++
		}
		for blankByte(p.at(i)) {
			i++
		}
		if p.at(i) == '\n' {
			breaks++
			p.pos = i
			continue
		}
		if p.at(i) == 0 {
			return errors.New("a quoted scalar without its closing quote")
		}
		if ind := i - p.lineStart; ind <= indent || ind == 0 && p.documentMarkerAt(i) {
			return errors.New("a quoted scalar's line not indented beyond its collection")
		}
		p.pos = i
		if b != nil {
			if breaks == 0 {
				b.WriteByte(' ')
			} else {
				b.WriteString(strings.Repeat("\n", breaks))
			}
		} else {
			// An escaped line break: the lines join as they are, but blank lines between
			// still count.
			if breaks > 0 {
				return errors.New("blank lines after an escaped line break")
			}
		}
		return nil
	}
}

var fmEscapes = map[byte]string{
	'0': "\x00", 'a': "\a", 'b': "\b", 't': "\t", '\t': "\t", 'n': "\n", 'v': "\v", 'f': "\f",
	'r': "\r", 'e': "\x1b", ' ': " ", '"': "\"", '/': "/", '\\': "\\", 'N': "\u0085",
	'_': "\u00a0", 'L': "\u2028", 'P': "\u2029",
}

// escape reads the escape sequence at pos, in a double-quoted scalar, writing what it stands
// for to b.
func (p *fmParser) escape(b *strings.Builder) error {
	c := p.at(p.pos + 1)
	if s, ok := fmEscapes[c]; ok {
		b.WriteString(s)
		p.pos += 2
		return nil
	}
	digits := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
	if digits == 0 {
		return fmt.Errorf("the escape \\%c", c)
	}
	start := p.pos + 2
	if start+digits > len(p.src) {
		return errors.New("a short escape")
	}
	r, err := strconv.ParseUint(string(p.src[start:start+digits]), 16, 32)
	if err != nil || r > utf8.MaxRune || (r >= 0xd800 && r < 0xe000) {
		return fmt.Errorf("the escape \\%c%s", c, p.src[start:start+digits])
	}
	b.WriteRune(rune(r))
	p.pos = start + digits
	return nil
}

// blockScalar reads a literal (|) or folded (>) block scalar whose header is at pos, in a
// collection at column indent, and moves to the line after it.
func (p *fmParser) blockScalar(indent int) (string, error) {
	folded := p.at(p.pos) == '>'
	p.pos++
	chomp, explicit := byte(0), 0
	for range 2 {
		switch c := p.at(p.pos); {
		case (c == '-' || c == '+') && chomp == 0:
			chomp = c
			p.pos++
		case c >= '1' && c <= '9' && explicit == 0:
			explicit = int(c - '0')
			p.pos++
		}
	}
	if !spaceOrEnd(p.at(p.pos)) {
		return "", fmt.Errorf("the block scalar header %q", p.rest(10))
	}
	if err := p.lineEnd(); err != nil {
		return "", err
	}
	contentIndent := -1
	if explicit > 0 {
		contentIndent = max(indent, 0) + explicit
	}
	var lines []string
	for p.at(p.pos) != 0 {
		i := p.pos
		for p.at(i) == ' ' {
			i++
		}
		ind := i - p.lineStart
		end := p.pos + bytes.IndexByte(p.src[p.pos:], '\n')
		blank := strings.TrimLeft(string(p.src[i:end]), " \t") == ""
		if contentIndent < 0 && !blank {
			if ind <= indent {
				break
			}
			contentIndent = ind
		}
		switch {
		case blank && (contentIndent < 0 || ind <= contentIndent):
			lines = append(lines, "")
		case ind < contentIndent:
			p.pos = p.lineStart
			return foldBlock(lines, folded, chomp), nil
		case ind == 0 && p.documentMarkerAt(i):
			return "", errors.New("a document marker in the frontmatter")
		default:
			lines = append(lines, string(p.src[p.lineStart+contentIndent:end]))
		}
		p.pos = end
		if err := p.newLine(); err != nil {
			return "", err
		}
	}
	p.pos = p.lineStart
	return foldBlock(lines, folded, chomp), nil
}

// foldBlock joins the lines of a block scalar, each of which ended with a line break.
func foldBlock(lines []string, folded bool, chomp byte) string {
	last := len(lines)
	for last > 0 && lines[last-1] == "" {
		last--
	}
	var b strings.Builder
	prevMore := true // no line yet: leading blank lines are kept
	pending := 0
	for _, l := range lines[:last] {
		if l == "" {
			pending++
			continue
		}
		more := blankByte(l[0])
		switch {
		case b.Len() == 0 && prevMore:
			b.WriteString(strings.Repeat("\n", pending))
		case !folded:
			b.WriteString(strings.Repeat("\n", pending+1))
		case !prevMore && !more && pending == 0:
			b.WriteByte(' ')
		case !prevMore && !more:
			b.WriteString(strings.Repeat("\n", pending))
		default:
			b.WriteString(strings.Repeat("\n", pending+1))
		}
		b.WriteString(l)
		prevMore, pending = more, 0
	}
	switch {
	case chomp == '-':
	case chomp == '+':
		if last > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(strings.Repeat("\n", len(lines)-last))
	case last > 0:
		b.WriteByte('\n')
	}
	return b.String()
}

// flow reads the flow sequence or mapping at pos, in a block collection at column indent.
func (p *fmParser) flow(indent, depth int) (any, int, error) {
	if err := checkDepth(depth); err != nil {
		return nil, 0, err
	}
	mapping := p.at(p.pos) == '{'
	closing := byte(']')
	if mapping {
		closing = '}'
	}
	p.pos++
	var s []any
	var m map[string]any
	if mapping {
		m = make(map[string]any)
	}
	nodes := 1
	for {
		if err := p.flowSpace(indent); err != nil {
			return nil, 0, err
		}
		if p.at(p.pos) == closing {
			p.pos++
			if mapping {
				return m, nodes, nil
			}
			if s == nil {
				s = []any{}
			}
			return s, nodes, nil
		}
		if !mapping {
			v, n, err := p.flowNode(indent, depth)
			if err != nil {
				return nil, 0, err
			}
			s = append(s, v)
			if err := addNodes(&nodes, n); err != nil {
				return nil, 0, err
			}
			if err := p.flowSpace(indent); err != nil {
				return nil, 0, err
			}
			if p.at(p.pos) == ':' {
				return nil, 0, errors.New("a mapping in a flow sequence")
			}
		} else {
			var key string
			quotedKey := false
			switch c := p.at(p.pos); {
			case c == '"' || c == '\'':
				k, err := p.quoted(indent, true)
				if err != nil {
					return nil, 0, err
				}
				key, quotedKey = k, true
			case p.plainStart(true):
				key = p.plainFlow()
			default:
				return nil, 0, fmt.Errorf("%q is no key of the flow mapping", p.rest(10))
			}
			if key == "<<" {
				return nil, 0, errors.New("a merge key (<<): readers disagree on it, and it can stand for a mapping without bound")
			}
			if _, dup := m[key]; dup {
				return nil, 0, fmt.Errorf("the key %q twice", key)
			}
			if err := p.flowSpace(indent); err != nil {
				return nil, 0, err
			}
			var v any
			n := 1
			if c := p.at(p.pos); c == ':' && (quotedKey || spaceOrEnd(p.at(p.pos+1)) || strings.IndexByte(",[]{}", p.at(p.pos+1)) >= 0) {
				p.pos++
				if err := p.flowSpace(indent); err != nil {
					return nil, 0, err
				}
				if c := p.at(p.pos); c != ',' && c != '}' {
					var err error
					if v, n, err = p.flowNode(indent, depth); err != nil {
						return nil, 0, err
					}
				}
			}
			m[key] = v
			if err := addNodes(&nodes, n); err != nil {
				return nil, 0, err
			}
		}
		if err := p.flowSpace(indent); err != nil {
			return nil, 0, err
		}
		switch p.at(p.pos) {
		case ',':
			p.pos++
		case closing:
		default:
			return nil, 0, fmt.Errorf("unexpected %q in a flow collection", p.rest(10))
		}
	}
}

// flowSpace skips blanks, comments and line breaks inside a flow collection; a line it moves to
// must be indented beyond indent.
func (p *fmParser) flowSpace(indent int) error {
	for {
		blanks := p.skipBlanks()
		switch c := p.at(p.pos); {
		case c == '#' && (blanks || blankByte(p.at(p.pos-1)) || p.pos == p.lineStart):
			p.pos += bytes.IndexByte(p.src[p.pos:], '\n')
		case c == '\n':
			if err := p.newLine(); err != nil {
				return err
			}
			for p.at(p.pos) == ' ' {
				p.pos++
			}
			i := p.pos
			p.skipBlanks()
			if c := p.at(p.pos); c != '\n' && c != 0 && c != '#' {
				if ind := i - p.lineStart; ind <= indent || ind == 0 && p.documentMarkerAt(i) {
					return errors.New("a flow collection's line not indented beyond its collection")
				}
			}
		case c == 0:
			return errors.New("a flow collection without its closing bracket")
		default:
			return nil
		}
	}
}

// flowNode reads a node inside a flow collection.
func (p *fmParser) flowNode(indent, depth int) (any, int, error) {
	anchor := ""
	if p.at(p.pos) == '&' {
		if anchor = p.name(); anchor == "" {
			return nil, 0, errors.New("an anchor without a name")
		}
		if err := p.flowSpace(indent); err != nil {
			return nil, 0, err
		}
	}
	var v any
	n := 1
	var err error
	switch c := p.at(p.pos); {
	case c == '*' && anchor == "":
		v, n, err = p.alias()
	case c == '!':
		err = errors.New("a tag: the frontmatter of a skill needs none")
	case c == '[' || c == '{':
		v, n, err = p.flow(indent, depth+1)
	case c == '"' || c == '\'':
		v, err = p.quoted(indent, true)
	case p.plainStart(true):
		v = resolvePlain(p.plainFlow())
	default:
		err = fmt.Errorf("unexpected %q in a flow collection", p.rest(10))
	}
	if err != nil {
		return nil, 0, err
	}
	if anchor != "" {
		p.anchors[anchor] = fmAnchor{v, n}
	}
	return v, n, nil
}

// plainFlow reads a plain scalar inside a flow collection: it ends at the line's end.
func (p *fmParser) plainFlow() string {
	start := p.pos
	for {
		c := p.at(p.pos)
		if c == '\n' || c == 0 || strings.IndexByte(",[]{}", c) >= 0 ||
			c == ':' && (spaceOrEnd(p.at(p.pos+1)) || strings.IndexByte(",[]{}", p.at(p.pos+1)) >= 0) ||
			c == '#' && blankByte(p.at(p.pos-1)) {
			break
		}
		p.pos++
	}
	return strings.TrimRight(string(p.src[start:p.pos]), " \t")
}

// resolvePlain gives a plain scalar its value by the YAML 1.2 core schema: null, a boolean, an
// integer (as a *big.Int, exact however long), a float, or else the string.
func resolvePlain(s string) any {
	switch s {
	case "", "~", "null", "Null", "NULL":
		return nil
	case "true", "True", "TRUE":
		return true
	case "false", "False", "FALSE":
		return false
	case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF":
		return math.Inf(1)
	case "-.inf", "-.Inf", "-.INF":
		return math.Inf(-1)
	case ".nan", ".NaN", ".NAN":
		return math.NaN()
	}
	if i, ok := coreInt(s); ok {
		return i
	}
	if coreFloat(s) {
		f, err := strconv.ParseFloat(s, 64)
		if err == nil || errors.Is(err, strconv.ErrRange) {
			return f
		}
	}
	return s
}

func coreInt(s string) (*big.Int, bool) {
	base, digits := 10, s
	switch {
	case strings.HasPrefix(s, "0x"):
		base, digits = 16, s[2:]
	case strings.HasPrefix(s, "0o"):
		base, digits = 8, s[2:]
	default:
		digits = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	}
	if digits == "" {
		return nil, false
	}
	for i := range len(digits) {
		if c := digits[i]; !(c >= '0' && c <= '9' || base == 16 && (c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F')) || base == 8 && c > '7' {
			return nil, false
		}
	}
	if base == 10 {
		digits = s
	}
	i, ok := new(big.Int).SetString(strings.TrimPrefix(digits, "+"), base)
	return i, ok
}

// coreFloat reports whether s is a float of the core schema:
// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
func coreFloat(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if n := digits(); n == 0 {
		if i >= len(s) || s[i] != '.' {
			return false
		}
		i++
		if digits() == 0 {
			return false
		}
	} else if i < len(s) && s[i] == '.' {
		i++
		digits()
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}
