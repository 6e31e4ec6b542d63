package receipts

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"

	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
)

// MarkReplay returns response with the replay flag set in its result's _meta
// (ReplayMetaKey: true), every other byte as it was. An error response, and anything that is
// no response with an object result, comes back unchanged: the HTTP header HeaderReplay marks
// those.
func MarkReplay(response []byte) []byte {
	out, _ := setPath(response, []string{"result", "_meta", ReplayMetaKey}, []byte("true"))
	return out
}

// Declare returns response, an initialize or server/discover response, with decl set as
// result.capabilities.extensions[ExtensionID], every other byte as it was. ok is false, and
// response comes back unchanged, when it has no object result to declare in.
func Declare(response []byte, decl Declaration) (out []byte, ok bool) {
	value, err := json.Marshal(decl)
	if err != nil {
		return response, false
	}
	return setPath(response, []string{"result", "capabilities", "extensions", ExtensionID}, value)
}

// setPath sets the member at path, through nested objects from the object doc, to value,
// creating the objects on the way that are missing (or null), except the first: path[0] must
// be an object member of doc already. The bytes around the change are
// kept, so a number keeps its text and a member its place. Keys are matched after unescaping,
// and the last of duplicate keys is the one changed, as encoding/json reads them. ok is false,
// with doc unchanged, when doc is no valid object or a value on the way is neither object nor
// null.
func setPath(doc []byte, path []string, value []byte) (out []byte, ok bool) {
	start := len(doc) - len(bytes.TrimLeft(doc, " \t\r\n"))
	end := len(bytes.TrimRight(doc, " \t\r\n"))
	if start >= end || doc[start] != '{' {
		return doc, false
	}
	obj, ok := setMember(doc[start:end], path, value, true)
	if !ok {
		return doc, false
	}
	out = make([]byte, 0, len(doc)-(end-start)+len(obj))
	out = append(out, doc[:start]...)
	out = append(out, obj...)
	return append(out, doc[end:]...), true
}

// A member is where a member's value lies in its object.
type member struct {
	key        string
	start, end int
}

// scanObject returns the members of obj, exactly one JSON object, and the offset of its
// opening brace.
func scanObject(obj []byte) (members []member, open int, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, 0, false
	}
	open = int(dec.InputOffset()) - 1
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, 0, false
		}
		key, isKey := tok.(string)
		if !isKey {
			return nil, 0, false
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, 0, false
		}
		end := int(dec.InputOffset())
		members = append(members, member{key: key, start: end - len(raw), end: end})
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, 0, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, 0, false // something after the object
	}
	return members, open, true
}

// setMember sets path in obj; with mustExist, path[0] must be an object member already.
func setMember(obj []byte, path []string, value []byte, mustExist bool) ([]byte, bool) {
	members, open, ok := scanObject(obj)
	if !ok {
		return nil, false
	}
	var found *member
	for i := range members {
		if members[i].key == path[0] {
			found = &members[i]
		}
	}
	if found == nil {
		if mustExist {
			return nil, false
		}
		return insertMember(obj, open, len(members) == 0, path[0], nest(path[1:], value)), true
	}
	var replacement []byte
	old := obj[found.start:found.end]
	switch {
	case len(path) == 1:
		replacement = value
	case old[0] == '{':
		if replacement, ok = setMember(old, path[1:], value, false); !ok {
			return nil, false
		}
	case string(old) == "null" && !mustExist:
		replacement = nest(path[1:], value)
	default:
		return nil, false
	}
	return splice(obj, found.start, found.end, replacement), true
}

// nest returns value wrapped in one object per key of path: {"a":{"b":value}}.
func nest(path []string, value []byte) []byte {
	if len(path) == 0 {
		return value
	}
	return insertMember([]byte("{}"), 0, true, path[0], nest(path[1:], value))
}

// insertMember inserts "key":value as the first member of the object whose opening brace is at
// obj[open].
func insertMember(obj []byte, open int, empty bool, key string, value []byte) []byte {
	k, _ := json.Marshal(key) // a string always marshals
	m := make([]byte, 0, len(k)+len(value)+2)
	m = append(append(append(m, k...), ':'), value...)
	if !empty {
		m = append(m, ',')
	}
	return splice(obj, open+1, open+1, m)
}

func splice(b []byte, start, end int, with []byte) []byte {
	out := make([]byte, 0, len(b)-(end-start)+len(with))
	out = append(out, b[:start]...)
	out = append(out, with...)
	return append(out, b[end:]...)
}

// isResponseTo reports whether frame is one JSON-RPC response to the request whose id has the
// JSON text id.
func isResponseTo(frame []byte, id string) bool {
	if trimmed := bytes.TrimLeft(frame, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return false // a batch answers more than one request
	}
	msgs, err := jsonrpc.Decode(frame)
	if err != nil || len(msgs) != 1 || msgs[0].Kind() != jsonrpc.KindResponse {
		return false
	}
	return sameID(msgs[0].ID, []byte(id))
}

// sameID reports whether two JSON ids name the same request: the same string, or the same
// number however it is written (a server that decodes 1.0 answers 1).
func sameID(a, b []byte) bool {
	a, b = bytes.TrimSpace(a), bytes.TrimSpace(b)
	if bytes.Equal(a, b) {
		return true
	}
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	if a[0] == '"' && b[0] == '"' {
		var sa, sb string
		return json.Unmarshal(a, &sa) == nil && json.Unmarshal(b, &sb) == nil && sa == sb
	}
	if a[0] == '"' || b[0] == '"' || !json.Valid(a) || !json.Valid(b) {
		return false
	}
	fa, errA := strconv.ParseFloat(string(a), 64)
	fb, errB := strconv.ParseFloat(string(b), 64)
	return errA == nil && errB == nil && fa == fb
}
