// Package params reads and writes the params object of a JSON-RPC request exactly as
// encoding/json would, in one pass where it can.
//
// The client builds every request's params from the caller's object and members of its own
// (_meta fields, the answers of a multi round-trip request), and reads from the caller's object
// only what headers and retry decisions need (a tool's or prompt's name, a resource's URI, a
// tool's arguments). Decoding the object and encoding it again would scan arguments of any size
// several times per request; the one-pass paths here fall back to encoding/json for anything
// unusual, and fuzzers hold them to it.
package params

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
)

// Fields is what a request needs to know of its params object.
type Fields struct {
	// Name and URI are params.name and params.uri, as encoding/json decodes them into string
	// fields ("" when absent).
	Name, URI string
	// Arguments is params.arguments as written, or nil.
	Arguments json.RawMessage
}

// Read reads name, uri and arguments from params. ok is false when encoding/json would refuse to
// decode params into a struct with string fields name and uri (not an object, a name that is a
// number, ...). Empty params are an empty object.
func Read(params json.RawMessage) (f Fields, ok bool) {
	if len(params) == 0 {
		return Fields{}, true
	}
	var rawName, rawURI []byte
	folded := false
	if jsonrpc.EachMember(params, func(k []byte, start, end int) {
		switch {
		case string(k) == "name":
			rawName = params[start:end]
		case string(k) == "uri":
			rawURI = params[start:end]
		case string(k) == "arguments":
			f.Arguments = params[start:end]
		case bytes.EqualFold(k, []byte("name")) || bytes.EqualFold(k, []byte("uri")) || bytes.EqualFold(k, []byte("arguments")):
			folded = true
		}
	}) && !folded {
		if rawName != nil && json.Unmarshal(rawName, &f.Name) != nil || rawURI != nil && json.Unmarshal(rawURI, &f.URI) != nil {
			return Fields{}, false
		}
		return f, true
	}
	// Escaped keys, keys in another case, or no object: encoding/json's rules for them.
	var p struct {
		Name      string          `json:"name"`
		URI       string          `json:"uri"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(params, &p) != nil {
		return Fields{}, false
	}
	return Fields{Name: p.Name, URI: p.URI, Arguments: p.Arguments}, true
}

// Compose returns params with the members of top set at its top level and those of meta set in
// its _meta object, every other member kept. Empty params are an empty object; the values of top
// and meta must be valid JSON. params is not modified.
func Compose(params json.RawMessage, top, meta map[string]json.RawMessage) (json.RawMessage, error) {
	if len(top) == 0 && len(meta) == 0 {
		return params, nil
	}
	if out, ok := compose(nil, params, top, meta); ok {
		return out, nil
	}
	return composeByDecoding(params, top, meta)
}

// ComposeAfter is Compose for a caller that frames the params: it writes head, then the params
// Compose would return, into one new buffer with a byte to spare behind them, and returns the
// buffer. ok is false when top and meta are empty, or the params need what only Compose does;
// the caller then calls Compose.
func ComposeAfter(head []byte, params json.RawMessage, top map[string]json.RawMessage, meta Members) (buf []byte, ok bool) {
	if len(top) == 0 && len(meta.Set) == 0 {
		return nil, false
	}
	return composeEncoded(head, params, top, meta.Set, meta.encoded)
}

// Members is a set of _meta members together with their encoding, written once in key order.
// The members every request of a session carries do not change, and sorting and quoting them
// again for each request would be most of what composing its params costs.
type Members struct {
	// Set is the members; never modified once the Members is made.
	Set map[string]json.RawMessage
	// encoded is what compose writes for Set, the members in key order, comma-separated; nil
	// when Set is empty or a key needs escaping (compose then writes them from Set).
	encoded []byte
}

// Encoded returns the members as compose writes them into a _meta object: in key order,
// comma-separated, without braces. It is nil when compose writes them from Set each time.
func (m Members) Encoded() []byte { return m.encoded }

// NewMembers returns set with its encoding. set must not be modified afterwards.
func NewMembers(set map[string]json.RawMessage) *Members {
	m := &Members{Set: set}
	if keys, size, ok := sortedKeys(set); ok && len(keys) > 0 {
		m.encoded = appendMembers(make([]byte, 0, size), keys, set)
	}
	return m
}

// appendMembers appends the members of set named by keys, in that order, comma-separated.
func appendMembers(b []byte, keys []string, set map[string]json.RawMessage) []byte {
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendMember(b, k, set[k])
	}
	return b
}

// compose is Compose in one pass over params, for the common case: an object whose top level has
// none of top's keys, with no _meta or a _meta object that has none of meta's keys. ok is false
// for the other cases. The result follows head in its buffer, with a byte to spare behind it.
func compose(head []byte, params json.RawMessage, top, meta map[string]json.RawMessage) (out json.RawMessage, ok bool) {
	return composeEncoded(head, params, top, meta, nil)
}

// composeEncoded is compose with meta's members already encoded (see Members), or nil to encode
// them here.
func composeEncoded(head []byte, params json.RawMessage, top, meta map[string]json.RawMessage, metaEncoded []byte) (out json.RawMessage, ok bool) {
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	metaStart, metaEnd := -1, -1
	clash := false
	ok = jsonrpc.EachMember(params, func(key []byte, start, end int) {
		if string(key) == "_meta" {
			metaStart, metaEnd = start, end // the last one is the one a decoder keeps
		}
		_, hit := top[string(key)]
		clash = clash || hit
	})
	if !ok || clash {
		return nil, false
	}
	topKeys, topSize, ok := sortedKeys(top)
	if !ok {
		return nil, false
	}
	var metaKeys []string
	metaSize := len(metaEncoded)
	if metaEncoded == nil {
		if metaKeys, metaSize, ok = sortedKeys(meta); !ok {
			return nil, false
		}
	}
	writeMeta := func(b []byte) []byte {
		if metaEncoded != nil {
			return append(b, metaEncoded...)
		}
		return appendMembers(b, metaKeys, meta)
	}
	if metaStart >= 0 && len(meta) > 0 {
		m := params[metaStart:metaEnd]
		if m[0] != '{' {
			return nil, false
		}
		clash := false
		if !jsonrpc.EachMember(m, func(key []byte, _, _ int) { _, hit := meta[string(key)]; clash = clash || hit }) || clash {
			return nil, false
		}
	}
	out = append(make([]byte, 0, len(head)+len(params)+topSize+metaSize+len(`,"_meta":{}`)+1), head...)
	open := bytes.IndexByte(params, '{')
	rest := bytes.TrimLeft(params[open+1:], " \t\r\n")
	emptyObject := rest[0] == '}'
	out = append(out, params[:open+1]...)
	wrote := false
	sep := func() {
		if wrote {
			out = append(out, ',')
		}
		wrote = true
	}
	for _, k := range topKeys {
		sep()
		out = appendMember(out, k, top[k])
	}
	if metaStart < 0 && len(meta) > 0 {
		sep()
		out = append(writeMeta(append(out, `"_meta":{`...)), '}')
	}
	if metaStart < 0 || len(meta) == 0 {
		if wrote && !emptyObject {
			out = append(out, ',')
		}
		return append(out, params[open+1:]...), true
	}
	// The client's _meta members go first in the object's own _meta.
	if wrote && !emptyObject {
		out = append(out, ',')
	}
	out = writeMeta(append(out, params[open+1:metaStart+1]...))
	if m := bytes.TrimLeft(params[metaStart+1:metaEnd], " \t\r\n"); m[0] != '}' {
		out = append(out, ',')
	}
	return append(out, params[metaStart+1:]...), true
}

// sortedKeys returns the keys of set in order, with the bytes their members take. ok is false
// when a key needs escaping beyond what strconv's quoting does as JSON does.
func sortedKeys(set map[string]json.RawMessage) (keys []string, size int, ok bool) {
	keys = make([]string, 0, len(set))
	for k, v := range set {
		if !jsonrpc.PlainString(k) {
			return nil, 0, false
		}
		keys = append(keys, k)
		size += len(k) + len(v) + 4
	}
	slices.Sort(keys)
	return keys, size, true
}

func appendMember(b []byte, k string, v json.RawMessage) []byte {
	b = append(strconv.AppendQuote(b, k), ':')
	return append(b, v...)
}

func composeByDecoding(params json.RawMessage, top, meta map[string]json.RawMessage) (json.RawMessage, error) {
	fields := map[string]json.RawMessage{}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &fields); err != nil {
			return nil, fmt.Errorf("params must be a JSON object: %w", err)
		}
	}
	for k, v := range top {
		fields[k] = v
	}
	if len(meta) > 0 {
		m := map[string]json.RawMessage{}
		if raw, ok := fields["_meta"]; ok {
			if err := json.Unmarshal(raw, &m); err != nil {
				return nil, fmt.Errorf("params._meta must be a JSON object: %w", err)
			}
		}
		for k, v := range meta {
			m[k] = v
		}
		raw, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		fields["_meta"] = raw
	}
	return json.Marshal(fields)
}
