package jsonrpc

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// The scanner validates JSON and finds the extent of values in one pass. encoding/json calls a
// state function for every byte, twice over for a RawMessage field (once to validate the frame,
// once to skip the field); a tool result of a few MiB is almost all string bytes, which this
// scanner checks eight at a time. It accepts exactly what json.Valid accepts (the fuzz test
// holds it to that), so the envelope can be read without encoding/json and the result is left
// for one json.Unmarshal into the caller's type.

// maxDepth is encoding/json's nesting limit: deeper input is invalid for it, and so here.
const maxDepth = 10000

var errSyntax = errors.New("jsonrpc: invalid JSON")

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return i
}

// skipValue validates the value at data[i] (no leading space) and returns the index after it.
func skipValue(data []byte, i, depth int) (int, error) {
	if i >= len(data) {
		return 0, errSyntax
	}
	switch c := data[i]; {
	case c == '"':
		return skipString(data, i)
	case c == '{':
		return skipObject(data, i, depth+1)
	case c == '[':
		return skipArray(data, i, depth+1)
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(data, i)
	case c == 't':
		return skipLiteral(data, i, "true")
	case c == 'f':
		return skipLiteral(data, i, "false")
	case c == 'n':
		return skipLiteral(data, i, "null")
	}
	return 0, errSyntax
}

func skipLiteral(data []byte, i int, lit string) (int, error) {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return 0, errSyntax
	}
	return i + len(lit), nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// skipNumber follows JSON's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func skipNumber(data []byte, i int) (int, error) {
	if data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && isDigit(data[i]):
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	default:
		return 0, errSyntax
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i >= len(data) || !isDigit(data[i]) {
			return 0, errSyntax
		}
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || !isDigit(data[i]) {
			return 0, errSyntax
		}
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	}
	return i, nil
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// special reports, in the high bit of each byte, which bytes of w end a run of plain string
// bytes: a quote, a backslash or a control character (below 0x20, which JSON forbids raw).
func special(w uint64) uint64 {
	quote := w ^ (lsb * '"')
	backslash := w ^ (lsb * '\\')
	zero := func(x uint64) uint64 { return (x - lsb) &^ x & msb }
	control := (w - lsb*0x20) &^ w & msb
	return zero(quote) | zero(backslash) | control
}

// longString is the length from which skipString looks for the closing quote first.
const longString = 64

// hasControl reports whether b holds a byte below 0x20.
func hasControl(b []byte) bool {
	for len(b) >= 8 {
		w := binary.LittleEndian.Uint64(b)
		if (w-lsb*0x20)&^w&msb != 0 {
			return true
		}
		b = b[8:]
	}
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}

// skipString validates the string starting with the quote at data[i] and returns the index
// after its closing quote. Bytes of 0x80 and above pass unchecked, as encoding/json lets them
// (it replaces invalid UTF-8 when it decodes).
func skipString(data []byte, i int) (int, error) {
	i++
	// A long string, such as the text of a large tool result, is checked at the speed of
	// bytes.IndexByte when it has no escapes: find the closing quote, then make sure the run
	// before it holds no backslash and no control character. The loop below takes the rest.
	if q := bytes.IndexByte(data[i:], '"'); q >= longString {
		run := data[i : i+q]
		if bytes.IndexByte(run, '\\') < 0 && !hasControl(run) {
			return i + q + 1, nil
		}
	}
	for {
		for len(data)-i >= 8 && special(binary.LittleEndian.Uint64(data[i:])) == 0 {
			i += 8
		}
		if i >= len(data) {
			return 0, errSyntax
		}
		switch c := data[i]; {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			var err error
			if i, err = skipEscape(data, i); err != nil {
				return 0, err
			}
		case c < 0x20:
			return 0, errSyntax
		default:
			i++
		}
	}
}

func skipEscape(data []byte, i int) (int, error) {
	if i+1 >= len(data) {
		return 0, errSyntax
	}
	switch data[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 2, nil
	case 'u':
		if len(data)-i < 6 {
			return 0, errSyntax
		}
		for _, h := range data[i+2 : i+6] {
			if !isDigit(h) && (h|0x20 < 'a' || h|0x20 > 'f') {
				return 0, errSyntax
			}
		}
		return i + 6, nil
	}
	return 0, errSyntax
}

func skipObject(data []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return 0, errSyntax
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return 0, errSyntax
		}
		var err error
		if i, err = skipString(data, i); err != nil {
			return 0, err
		}
		i = skipSpace(data, i)
		if i >= len(data) || data[i] != ':' {
			return 0, errSyntax
		}
		if i, err = skipValue(data, skipSpace(data, i+1), depth); err != nil {
			return 0, err
		}
		i = skipSpace(data, i)
		if i >= len(data) {
			return 0, errSyntax
		}
		switch data[i] {
		case '}':
			return i + 1, nil
		case ',':
			i = skipSpace(data, i+1)
		default:
			return 0, errSyntax
		}
	}
}

func skipArray(data []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return 0, errSyntax
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = skipValue(data, i, depth); err != nil {
			return 0, err
		}
		i = skipSpace(data, i)
		if i >= len(data) {
			return 0, errSyntax
		}
		switch data[i] {
		case ']':
			return i + 1, nil
		case ',':
			i = skipSpace(data, i+1)
		default:
			return 0, errSyntax
		}
	}
}

// valid reports whether data is one JSON value, with nothing but space around it.
func valid(data []byte) bool {
	i, err := skipValue(data, skipSpace(data, 0), 0)
	return err == nil && skipSpace(data, i) == len(data)
}

// EachMember calls f with the key (as written, without its quotes) and the extent of the value
// of each member of the JSON object obj, in order. It reports false, having called f for none
// or some of them, when obj is not one valid object, or when a key is written with escapes, which
// only a decoder can compare.
func EachMember(obj []byte, f func(key []byte, start, end int)) bool {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return skipSpace(obj, i+1) == len(obj)
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return false
		}
		keyEnd, err := skipString(obj, i)
		if err != nil {
			return false
		}
		key := obj[i+1 : keyEnd-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			return false
		}
		i = skipSpace(obj, keyEnd)
		if i >= len(obj) || obj[i] != ':' {
			return false
		}
		start := skipSpace(obj, i+1)
		if i, err = skipValue(obj, start, 1); err != nil {
			return false
		}
		f(key, start, i)
		i = skipSpace(obj, i)
		if i >= len(obj) {
			return false
		}
		switch obj[i] {
		case '}':
			return skipSpace(obj, i+1) == len(obj)
		case ',':
			i = skipSpace(obj, i+1)
		default:
			return false
		}
	}
}

// EachElement calls f with the extent of each element of the JSON array arr, in order. It
// reports false, having called f for none or some of them, when arr is not one valid array.
func EachElement(arr []byte, f func(start, end int)) bool {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return false
	}
	i = skipSpace(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return skipSpace(arr, i+1) == len(arr)
	}
	for {
		start := i
		var err error
		if i, err = skipValue(arr, start, 1); err != nil {
			return false
		}
		f(start, i)
		i = skipSpace(arr, i)
		if i >= len(arr) {
			return false
		}
		switch arr[i] {
		case ']':
			return skipSpace(arr, i+1) == len(arr)
		case ',':
			i = skipSpace(arr, i+1)
		default:
			return false
		}
	}
}
