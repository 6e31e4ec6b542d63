package jsonrpc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/bits"
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

// What a string holds, as scanString found it.
type stringFlags uint8

const (
	escaped  stringFlags = 1 << iota // a backslash escape
	nonASCII                         // a byte of 0x80 or above
)

// scanString validates the string starting with the quote at data[i] and returns the index
// after its closing quote, and whether it holds escapes and bytes above ASCII. Bytes of 0x80
// and above pass unchecked, as encoding/json lets them (it replaces invalid UTF-8 when it
// decodes).
//
// It reads a string in one of two ways, and changes as the string goes. Short runs between
// escapes (a key, an id, JSON text quoted in JSON) are read a word at a time, which finds a
// quote, a backslash or a control character in one step and costs no call. A run that goes on
// past shortRun bytes (the text of a large tool result) is read with bytes.IndexByte, which
// finds the closing quote and then each backslash before it far faster than any loop in Go,
// and the bytes between are checked for control characters 32 at a time.
func scanString(data []byte, i int) (int, stringFlags, error) {
	var flags stringFlags
	i++
	from := i      // where the current run began: after the opening quote or the last escape
	closing := -1  // the next quote at or after i, once looked for
	byWord := true // read the run a word at a time
	for {
		if byWord {
			// The lowest byte special flags is a quote, a backslash or a control character:
			// where it flags wrongly, it is above one of them.
			var high, found uint64
			for len(data)-i >= 8 && i-from < shortRun {
				w := binary.LittleEndian.Uint64(data[i:])
				if found = special(w); found != 0 {
					k := bits.TrailingZeros64(found) / 8
					high |= w & (1<<(8*k) - 1)
					i += k
					break
				}
				high |= w
				i += 8
			}
			if found == 0 {
				if i-from >= shortRun {
					byWord = false
					if high&msb != 0 {
						flags |= nonASCII
					}
					continue
				}
				// the last few bytes of data
				for i < len(data) && data[i] != '"' && data[i] != '\\' && data[i] >= 0x20 {
					high |= uint64(data[i])
					i++
				}
				if i == len(data) {
					return 0, 0, errSyntax
				}
			}
			if high&msb != 0 {
				flags |= nonASCII
			}
			switch data[i] {
			case '"':
				return i + 1, flags, nil
			case '\\':
				flags |= escaped
				if i+1 < len(data) && shortEscape[data[i+1]] {
					i += 2 // skipEscape, inlined by hand for escapes that come every few bytes
				} else {
					var err error
					if i, err = skipUnicodeEscape(data, i); err != nil {
						return 0, 0, err
					}
				}
				from = i
				continue
			}
			return 0, 0, errSyntax // a control character
		}
		if closing < i {
			q := bytes.IndexByte(data[i:], '"')
			if q < 0 {
				return 0, 0, errSyntax
			}
			closing = i + q
		}
		run := data[i:closing]
		b := bytes.IndexByte(run, '\\')
		if b >= 0 {
			run = run[:b]
		}
		switch controlOrHigh(run) {
		case hasControl:
			return 0, 0, errSyntax
		case hasHigh:
			flags |= nonASCII
		}
		if b < 0 {
			return closing + 1, flags, nil
		}
		flags |= escaped
		byWord = i+b-from < shortRun
		var err error
		if i, err = skipEscape(data, i+b); err != nil {
			return 0, 0, err
		}
		from = i
	}
}

// shortRun is the length from which scanString reads a run with bytes.IndexByte.
const shortRun = 64

// special reports, in the high bit of each byte, which bytes of w end a run of plain string
// bytes: a quote, a backslash or a control character. A borrow can flag a byte wrongly, but only
// above one flagged rightly.
func special(w uint64) uint64 {
	quote := w ^ (lsb * '"')
	backslash := w ^ (lsb * '\\')
	zero := func(x uint64) uint64 { return (x - lsb) &^ x & msb }
	control := (w - lsb*0x20) &^ w & msb
	return zero(quote) | zero(backslash) | control
}

func skipString(data []byte, i int) (int, error) {
	end, _, err := scanString(data, i)
	return end, err
}

// What controlOrHigh found in a run of string bytes.
const (
	plainASCII = iota
	hasHigh    // no control character, and a byte of 0x80 or above
	hasControl // a byte below 0x20, which JSON forbids raw in a string
)

// controlOrHigh classifies b, eight bytes to a word. A byte below 0x20 borrows when 0x20 is
// taken from it; a byte of 0x80 or above has its high bit set already. A borrow can flag the
// byte above it wrongly, but only above a byte that is flagged rightly, so whether any byte is
// flagged is exact.
func controlOrHigh(b []byte) int {
	for len(b) >= 32 {
		c := (*[32]byte)(b)
		w0 := binary.LittleEndian.Uint64(c[0:])
		w1 := binary.LittleEndian.Uint64(c[8:])
		w2 := binary.LittleEndian.Uint64(c[16:])
		w3 := binary.LittleEndian.Uint64(c[24:])
		if ((w0-lsb*0x20)|w0|(w1-lsb*0x20)|w1|(w2-lsb*0x20)|w2|(w3-lsb*0x20)|w3)&msb != 0 {
			break
		}
		b = b[32:]
	}
	// The rest, once a byte of 0x80 or above or a control character is in sight: control
	// characters alone end the run, so they are looked for apart.
	var high uint64
	for len(b) >= 32 {
		c := (*[32]byte)(b)
		w0 := binary.LittleEndian.Uint64(c[0:])
		w1 := binary.LittleEndian.Uint64(c[8:])
		w2 := binary.LittleEndian.Uint64(c[16:])
		w3 := binary.LittleEndian.Uint64(c[24:])
		if ((w0-lsb*0x20)&^w0|(w1-lsb*0x20)&^w1|(w2-lsb*0x20)&^w2|(w3-lsb*0x20)&^w3)&msb != 0 {
			return hasControl
		}
		high |= w0 | w1 | w2 | w3
		b = b[32:]
	}
	for len(b) >= 8 {
		w := binary.LittleEndian.Uint64(b)
		if (w-lsb*0x20)&^w&msb != 0 {
			return hasControl
		}
		high |= w
		b = b[8:]
	}
	for _, c := range b {
		if c < 0x20 {
			return hasControl
		}
		high |= uint64(c)
	}
	if high&msb != 0 {
		return hasHigh
	}
	return plainASCII
}

// skipEscape validates the escape at data[i] (a backslash) and returns the index after it.
func skipEscape(data []byte, i int) (int, error) {
	if i+1 < len(data) && shortEscape[data[i+1]] {
		return i + 2, nil
	}
	return skipUnicodeEscape(data, i)
}

// shortEscape holds the bytes that follow a backslash in a two-byte escape.
var shortEscape = [256]bool{'"': true, '\\': true, '/': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}

func skipUnicodeEscape(data []byte, i int) (int, error) {
	if len(data)-i < 6 || data[i+1] != 'u' {
		return 0, errSyntax
	}
	for _, h := range data[i+2 : i+6] {
		if !isDigit(h) && (h|0x20 < 'a' || h|0x20 > 'f') {
			return 0, errSyntax
		}
	}
	return i + 6, nil
}

func skipObject(data []byte, i, depth int) (int, error) { return members(data, i, depth, nil) }

func skipArray(data []byte, i, depth int) (int, error) { return elements(data, i, depth, nil) }

// errStopped ends a walk whose callback said stop.
var errStopped = errors.New("jsonrpc: walk stopped")

// members validates the object at data[i], at nesting depth depth, and returns the index after
// it. f, if set, is called with each member's key (as written, without its quotes) and the extent
// of its value, in order; the walk stops with errStopped when f returns false.
func members(data []byte, i, depth int, f func(key []byte, start, end int) bool) (int, error) {
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
		keyEnd, err := skipString(data, i)
		if err != nil {
			return 0, err
		}
		key := data[i+1 : keyEnd-1]
		i = skipSpace(data, keyEnd)
		if i >= len(data) || data[i] != ':' {
			return 0, errSyntax
		}
		start := skipSpace(data, i+1)
		if i, err = skipValue(data, start, depth); err != nil {
			return 0, err
		}
		if f != nil && !f(key, start, i) {
			return 0, errStopped
		}
		if i, err = next(data, i, '}'); err != nil || data[i-1] == '}' {
			return i, err
		}
	}
}

// elements is members for the array at data[i]: f gets the extent of each element.
func elements(data []byte, i, depth int, f func(start, end int) bool) (int, error) {
	if depth > maxDepth {
		return 0, errSyntax
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return i + 1, nil
	}
	for {
		start := i
		var err error
		if i, err = skipValue(data, start, depth); err != nil {
			return 0, err
		}
		if f != nil && !f(start, i) {
			return 0, errStopped
		}
		if i, err = next(data, i, ']'); err != nil || data[i-1] == ']' {
			return i, err
		}
	}
}

// next reads what follows a member or element: the closing bracket, whose index plus one it
// returns, or a comma, after which it returns the index of the next value.
func next(data []byte, i int, closing byte) (int, error) {
	i = skipSpace(data, i)
	switch {
	case i >= len(data):
		return 0, errSyntax
	case data[i] == closing:
		return i + 1, nil
	case data[i] == ',':
		return skipSpace(data, i+1), nil
	}
	return 0, errSyntax
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
	end, err := members(obj, i, 1, func(key []byte, start, end int) bool {
		if bytes.IndexByte(key, '\\') >= 0 {
			return false
		}
		f(key, start, end)
		return true
	})
	return err == nil && skipSpace(obj, end) == len(obj)
}

// EachElement calls f with the extent of each element of the JSON array arr, in order. It
// reports false, having called f for none or some of them, when arr is not one valid array.
func EachElement(arr []byte, f func(start, end int)) bool {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return false
	}
	end, err := elements(arr, i, 1, func(start, end int) bool { f(start, end); return true })
	return err == nil && skipSpace(arr, end) == len(arr)
}
