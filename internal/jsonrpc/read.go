package jsonrpc

import (
	"encoding/json"
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
// the index after it. It reports false for any other value, and for a string holding invalid
// UTF-8, which encoding/json repairs.
func String(data []byte, i int) (end int, s string, ok bool) {
	if i >= len(data) || data[i] != '"' {
		return 0, "", false
	}
	end, flags, err := scanString(data, i)
	if err != nil {
		return 0, "", false
	}
	inner := data[i+1 : end-1]
	if flags&nonASCII != 0 && !utf8.Valid(inner) {
		return 0, "", false
	}
	if flags&escaped != 0 {
		return end, s, json.Unmarshal(data[i:end], &s) == nil
	}
	return end, string(inner), true
}
