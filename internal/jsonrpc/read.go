package jsonrpc

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Members, Elements, Skip and String let a hand-written decoder read a JSON document in one
// validating pass: each value is checked as it is read, where it lies, so a string nested a few
// levels down is scanned once, not once for every object around it. They report false for an
// invalid document and for what only encoding/json can decode exactly (keys written with
// escapes, strings it would repair); a decoder then leaves the whole document to encoding/json,
// which also says what is wrong.
//
// Indexes are into the document; a value's index is that of its first byte, space skipped.
// Nesting depth counts as encoding/json counts it: the document's outermost object or array is
// at depth 1, and deeper than maxDepth is invalid.

// Whole reads the document data with read, which is given the index of its value and returns
// the index after it, and reports whether the value was read and nothing but space surrounds it.
func Whole(data []byte, read func(value int) (end int, ok bool)) bool {
	i := skipSpace(data, 0)
	if i == len(data) {
		return false
	}
	end, ok := read(i)
	return ok && skipSpace(data, end) == len(data)
}

// Members reads the object at data[i], which is at nesting depth depth, and returns the index
// after it. For each member in order it calls read with the member's key (as written, without
// its quotes) and the index of its value; read must read the value, at depth depth, and return
// the index after it.
func Members(data []byte, i, depth int, read func(key []byte, value int) (end int, ok bool)) (int, bool) {
	if i >= len(data) || data[i] != '{' || depth > maxDepth {
		return 0, false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return 0, false
		}
		keyEnd, flags, err := scanString(data, i)
		if err != nil || flags&escaped != 0 {
			return 0, false
		}
		key := data[i+1 : keyEnd-1]
		i = skipSpace(data, keyEnd)
		if i >= len(data) || data[i] != ':' {
			return 0, false
		}
		value := skipSpace(data, i+1)
		if value == len(data) {
			return 0, false
		}
		var ok bool
		if i, ok = read(key, value); !ok {
			return 0, false
		}
		if i, err = next(data, i, '}'); err != nil {
			return 0, false
		}
		if data[i-1] == '}' {
			return i, true
		}
	}
}

// Elements reads the array at data[i], which is at nesting depth depth, and returns the index
// after it. It calls read with the index of each element in order; read must read the element,
// at depth depth, and return the index after it.
func Elements(data []byte, i, depth int, read func(value int) (end int, ok bool)) (int, bool) {
	if i >= len(data) || data[i] != '[' || depth > maxDepth {
		return 0, false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return i + 1, true
	}
	for {
		if i == len(data) {
			return 0, false
		}
		var ok bool
		if i, ok = read(i); !ok {
			return 0, false
		}
		var err error
		if i, err = next(data, i, ']'); err != nil {
			return 0, false
		}
		if data[i-1] == ']' {
			return i, true
		}
	}
}

// Skip validates the value at data[i], which lies in a container at nesting depth depth (0 for
// a document's value), and returns the index after it.
func Skip(data []byte, i, depth int) (int, bool) {
	end, err := skipValue(data, i, depth)
	return end, err == nil
}

// String reads the string at data[i] as encoding/json decodes it into a Go string, and returns
// the index after it. It reports false for any other value, and for a string that holds invalid
// UTF-8 or an escaped half of a surrogate pair without its other half, which encoding/json
// replaces.
func String(data []byte, i int) (end int, s string, ok bool) {
	if i >= len(data) || data[i] != '"' {
		return 0, "", false
	}
	end, flags, err := scanString(data, i)
	if err != nil {
		return 0, "", false
	}
	inner := data[i+1 : end-1]
	// An escape is ASCII, so no UTF-8 sequence spans one: the runs between escapes are valid
	// when the whole is.
	if flags&nonASCII != 0 && !utf8.Valid(inner) {
		return 0, "", false
	}
	if flags&escaped == 0 {
		return end, string(inner), true
	}
	s, ok = unescape(inner)
	return end, s, ok
}

// unescape decodes the escapes of inner, a string's bytes between its quotes that scanString
// found valid. It reports false for a surrogate half that pairs with nothing.
//
// Escapes come a few bytes apart in JSON quoted in JSON, and far apart in text: after a short
// run the next backslash is looked for a word at a time, in place, after a long one with
// bytes.IndexByte, whose call costs more than a few words but which runs far faster.
func unescape(inner []byte) (string, bool) {
	var b strings.Builder
	b.Grow(len(inner)) // an escape is never shorter than what it stands for
	byWord := false
	for {
		k := -1
		if byWord {
			k = backslashInWords(inner)
		}
		if k < 0 {
			if k = bytes.IndexByte(inner, '\\'); k < 0 {
				b.Write(inner)
				return b.String(), true
			}
		}
		byWord = k < wordsLooked*8
		b.Write(inner[:k])
		c := inner[k+1]
		inner = inner[k+2:]
		switch c {
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r := hex4(inner)
			inner = inner[4:]
			if utf16.IsSurrogate(r) {
				if len(inner) < 6 || inner[0] != '\\' || inner[1] != 'u' {
					return "", false
				}
				if r = utf16.DecodeRune(r, hex4(inner[2:])); r == utf8.RuneError {
					return "", false
				}
				inner = inner[6:]
			}
			b.WriteRune(r)
		default: // '"', '\\' and '/' stand for themselves
			b.WriteByte(c)
		}
	}
}

// wordsLooked is how many words backslashInWords looks at.
const wordsLooked = 4

// backslashInWords returns the index of the first backslash in the first wordsLooked words of
// b, or -1 when there is none there or b is shorter.
func backslashInWords(b []byte) int {
	for i := 0; i < wordsLooked*8 && len(b)-i >= 8; i += 8 {
		x := binary.LittleEndian.Uint64(b[i:]) ^ (lsb * '\\')
		if found := (x - lsb) &^ x & msb; found != 0 {
			return i + bits.TrailingZeros64(found)/8 // the lowest flag is never wrong
		}
	}
	return -1
}

// hex4 reads the four hexadecimal digits of a \u escape scanString found valid.
func hex4(h []byte) rune {
	var r rune
	for _, c := range h[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}
