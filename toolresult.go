package mcpclient

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
)

// decodeCallToolResult decodes a tools/call result exactly as json.Unmarshal would.
//
// It is the hottest decode of the client, and encoding/json spends on it a validating pass over
// bytes jsonrpc.Decode has already validated, then reflection for every field of every content
// block: a third of a small call's decoding, a fifth of a large one's. Results of the ordinary
// shape (known keys written plainly, once each) are read here with the scanner instead, strings
// without escapes converted as they are; anything else (escaped or differently cased keys,
// duplicate keys, a size that is no plain integer, a type encoding/json would refuse) is left to
// json.Unmarshal, which also says what is wrong. FuzzDecodeCallToolResult holds the two to the
// same result.
func decodeCallToolResult(raw []byte, res *CallToolResult) error {
	if r, ok := decodeCallToolResultFast(raw); ok {
		*res = r
		return nil
	}
	*res = CallToolResult{}
	return json.Unmarshal(raw, res)
}

func decodeCallToolResultFast(raw []byte) (res CallToolResult, ok bool) {
	var seen [4]bool
	ok = true
	ok = jsonrpc.EachMember(raw, func(key []byte, start, end int) {
		if !ok {
			return
		}
		v := raw[start:end]
		switch string(key) {
		case "content":
			ok = once(&seen[0]) && decodeContents(v, &res.Content)
		case "structuredContent":
			ok = once(&seen[1])
			res.StructuredContent = bytes.Clone(v)
		case "isError":
			ok = once(&seen[2]) && decodeBool(v, &res.IsError)
		case "_meta":
			ok = once(&seen[3])
			res.Meta = bytes.Clone(v)
		default:
			ok = unrelatedKey(key, "content", "structuredContent", "isError", "_meta")
		}
	}) && ok
	return res, ok
}

// once reports whether the key is seen for the first time: encoding/json merges a repeated key's
// values in ways not worth copying.
func once(seen *bool) bool {
	if *seen {
		return false
	}
	*seen = true
	return true
}

// unrelatedKey reports whether encoding/json surely matches key to none of names: it matches
// case-insensitively, with Unicode folding for the bytes above ASCII.
func unrelatedKey(key []byte, names ...string) bool {
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	for _, n := range names {
		if bytes.EqualFold(key, []byte(n)) {
			return false
		}
	}
	return true
}

func decodeContents(v []byte, out *[]Content) bool {
	if string(v) == "null" {
		*out = nil
		return true
	}
	blocks := []Content{} // an empty array decodes to an empty slice, not nil
	ok := true
	ok = jsonrpc.EachElement(v, func(start, end int) {
		if !ok {
			return
		}
		var c Content
		if e := v[start:end]; string(e) != "null" {
			ok = decodeContent(e, &c)
		}
		blocks = append(blocks, c)
	}) && ok
	if !ok {
		return false
	}
	*out = blocks
	return true
}

var contentKeys = []string{"type", "text", "data", "mimeType", "uri", "name", "title", "description", "size", "resource", "annotations", "_meta"}

func decodeContent(v []byte, c *Content) bool {
	var seen [12]bool
	ok := true
	return jsonrpc.EachMember(v, func(key []byte, start, end int) {
		if !ok {
			return
		}
		val := v[start:end]
		var field *string
		switch string(key) {
		case "type":
			ok, field = once(&seen[0]), &c.Type
		case "text":
			ok, field = once(&seen[1]), &c.Text
		case "data":
			ok, field = once(&seen[2]), &c.Data
		case "mimeType":
			ok, field = once(&seen[3]), &c.MIMEType
		case "uri":
			ok, field = once(&seen[4]), &c.URI
		case "name":
			ok, field = once(&seen[5]), &c.Name
		case "title":
			ok, field = once(&seen[6]), &c.Title
		case "description":
			ok, field = once(&seen[7]), &c.Description
		case "size":
			ok = once(&seen[8]) && decodeSize(val, &c.Size)
		case "resource":
			ok = once(&seen[9])
			c.Resource = bytes.Clone(val)
		case "annotations":
			ok = once(&seen[10])
			c.Annotations = bytes.Clone(val)
		case "_meta":
			ok = once(&seen[11])
			c.Meta = bytes.Clone(val)
		default:
			ok = unrelatedKey(key, contentKeys...)
		}
		if ok && field != nil {
			ok = decodeString(val, field)
		}
	}) && ok
}

// decodeString sets a string field from a JSON value as encoding/json does: null leaves it,
// a string without escapes is its bytes once they are valid UTF-8 (encoding/json would replace
// invalid sequences), and a string with escapes is unquoted by encoding/json itself.
func decodeString(v []byte, field *string) bool {
	switch {
	case string(v) == "null":
		return true
	case len(v) < 2 || v[0] != '"':
		return false
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		*field = string(inner)
		return true
	}
	return json.Unmarshal(v, field) == nil
}

func decodeBool(v []byte, field *bool) bool {
	switch string(v) {
	case "true":
		*field = true
	case "false":
		*field = false
	case "null":
	default:
		return false
	}
	return true
}

// decodeSize takes null and plain integers; encoding/json refuses fractions and exponents for an
// int64, and the fallback says so.
func decodeSize(v []byte, field **int64) bool {
	if string(v) == "null" {
		*field = nil
		return true
	}
	if bytes.ContainsAny(v, ".eE") {
		return false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return false
	}
	*field = &n
	return true
}
