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
// block. Results of the ordinary shape (known keys written plainly, once each) are read here
// instead, in one pass that checks each value where it lies, so that a large text is scanned
// once and copied once; anything else (escaped or differently cased keys, duplicate keys, a size
// that is no plain integer, a type encoding/json would refuse, a string it would repair) is left
// to json.Unmarshal, which also says what is wrong. FuzzDecodeCallToolResult holds the two to
// the same result.
func decodeCallToolResult(raw []byte, res *CallToolResult) error {
	if r, ok := decodeCallToolResultFast(raw); ok {
		*res = r
		return nil
	}
	*res = CallToolResult{}
	return json.Unmarshal(raw, res)
}

// Nesting depths, as the scanner counts them, of the result object, its content array and a
// content block.
const (
	resultDepth  = 1
	contentDepth = 2
	blockDepth   = 3
)

func decodeCallToolResultFast(raw []byte) (res CallToolResult, ok bool) {
	var seen [4]bool
	ok = jsonrpc.Whole(raw, func(v int) (int, bool) {
		return jsonrpc.Members(raw, v, resultDepth, func(key []byte, v int) (int, bool) {
			switch string(key) {
			case "content":
				if once(&seen[0]) {
					return decodeContents(raw, v, &res.Content)
				}
			case "structuredContent":
				if once(&seen[1]) {
					return rawValue(raw, v, resultDepth, &res.StructuredContent)
				}
			case "isError":
				if once(&seen[2]) {
					return decodeBool(raw, v, &res.IsError)
				}
			case "_meta":
				if once(&seen[3]) {
					return rawValue(raw, v, resultDepth, &res.Meta)
				}
			default:
				if unrelatedKey(key, "content", "structuredContent", "isError", "_meta") {
					return jsonrpc.Skip(raw, v, resultDepth)
				}
			}
			return 0, false
		})
	})
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

// rawValue reads the value at data[v], in a container at nesting depth depth, into a
// json.RawMessage of its own (encoding/json copies it, and keeps null as null).
func rawValue(data []byte, v, depth int, field *json.RawMessage) (int, bool) {
	end, ok := jsonrpc.Skip(data, v, depth)
	if ok {
		*field = bytes.Clone(data[v:end])
	}
	return end, ok
}

// null reads a null at data[v].
func null(data []byte, v int) (int, bool) {
	if len(data)-v >= 4 && string(data[v:v+4]) == "null" {
		return v + 4, true
	}
	return 0, false
}

func decodeContents(data []byte, v int, out *[]Content) (int, bool) {
	if data[v] == 'n' {
		*out = nil
		return null(data, v)
	}
	blocks := []Content{} // an empty array decodes to an empty slice, not nil
	end, ok := jsonrpc.Elements(data, v, contentDepth, func(e int) (int, bool) {
		blocks = append(blocks, Content{})
		if data[e] == 'n' {
			return null(data, e)
		}
		return decodeContent(data, e, &blocks[len(blocks)-1])
	})
	if ok {
		*out = blocks
	}
	return end, ok
}

var contentKeys = []string{"type", "text", "data", "mimeType", "uri", "name", "title", "description", "size", "resource", "annotations", "_meta"}

func decodeContent(data []byte, v int, c *Content) (int, bool) {
	var seen [12]bool
	return jsonrpc.Members(data, v, blockDepth, func(key []byte, v int) (int, bool) {
		switch string(key) {
		case "type":
			if once(&seen[0]) {
				return decodeType(data, v, &c.Type)
			}
		case "text":
			if once(&seen[1]) {
				return decodeString(data, v, &c.Text)
			}
		case "data":
			if once(&seen[2]) {
				return decodeString(data, v, &c.Data)
			}
		case "mimeType":
			if once(&seen[3]) {
				return decodeString(data, v, &c.MIMEType)
			}
		case "uri":
			if once(&seen[4]) {
				return decodeString(data, v, &c.URI)
			}
		case "name":
			if once(&seen[5]) {
				return decodeString(data, v, &c.Name)
			}
		case "title":
			if once(&seen[6]) {
				return decodeString(data, v, &c.Title)
			}
		case "description":
			if once(&seen[7]) {
				return decodeString(data, v, &c.Description)
			}
		case "size":
			if once(&seen[8]) {
				return decodeSize(data, v, &c.Size)
			}
		case "resource":
			if once(&seen[9]) {
				return rawValue(data, v, blockDepth, &c.Resource)
			}
		case "annotations":
			if once(&seen[10]) {
				return rawValue(data, v, blockDepth, &c.Annotations)
			}
		case "_meta":
			if once(&seen[11]) {
				return rawValue(data, v, blockDepth, &c.Meta)
			}
		default:
			if unrelatedKey(key, contentKeys...) {
				return jsonrpc.Skip(data, v, blockDepth)
			}
		}
		return 0, false
	})
}

// contentTypes are the content block types MCP defines: a block's type is read without a string
// of its own when it is one of them.
var contentTypes = [...]string{"text", "image", "audio", "resource_link", "resource"}

func decodeType(data []byte, v int, field *string) (int, bool) {
	for _, t := range contentTypes {
		if end := v + len(t) + 2; end <= len(data) && data[v] == '"' && data[end-1] == '"' && string(data[v+1:end-1]) == t {
			*field = t
			return end, true
		}
	}
	return decodeString(data, v, field)
}

// decodeString sets a string field from a JSON value as encoding/json does: null leaves it as it
// was.
func decodeString(data []byte, v int, field *string) (int, bool) {
	if data[v] == 'n' {
		return null(data, v)
	}
	end, s, ok := jsonrpc.String(data, v)
	if ok {
		*field = s
	}
	return end, ok
}

func decodeBool(data []byte, v int, field *bool) (int, bool) {
	switch {
	case len(data)-v >= 4 && string(data[v:v+4]) == "true":
		*field = true
		return v + 4, true
	case len(data)-v >= 5 && string(data[v:v+5]) == "false":
		*field = false
		return v + 5, true
	}
	return null(data, v)
}

// decodeSize takes null and plain integers; encoding/json refuses fractions and exponents for an
// int64, and the fallback says so.
func decodeSize(data []byte, v int, field **int64) (int, bool) {
	if data[v] == 'n' {
		*field = nil
		return null(data, v)
	}
	end, ok := jsonrpc.Skip(data, v, blockDepth)
	if !ok || data[v] != '-' && (data[v] < '0' || data[v] > '9') {
		return 0, false
	}
	num := data[v:end]
	if bytes.ContainsAny(num, ".eE") {
		return 0, false
	}
	n, err := strconv.ParseInt(string(num), 10, 64)
	if err != nil {
		return 0, false
	}
	*field = &n
	return end, true
}
