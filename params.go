package mcpclient

import (
	"bytes"
	"slices"
	"strconv"

	"encoding/json"
	"fmt"
	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
)

// setMeta sets keys of params._meta, keeping the other params and _meta keys.
func setMeta(params json.RawMessage, set map[string]json.RawMessage) (json.RawMessage, error) {
	if out, ok := insertMeta(params, set); ok {
		return out, nil
	}
	return setMetaByDecoding(params, set)
}

func setMetaByDecoding(params json.RawMessage, set map[string]json.RawMessage) (json.RawMessage, error) {
	fields, err := paramFields(params)
	if err != nil {
		return nil, err
	}
	meta := map[string]json.RawMessage{}
	if m, ok := fields["_meta"]; ok {
		if err := json.Unmarshal(m, &meta); err != nil {
			return nil, fmt.Errorf("params._meta must be a JSON object: %w", err)
		}
	}
	for k, v := range set {
		meta[k] = v
	}
	m, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	fields["_meta"] = m
	return json.Marshal(fields)
}

// setParams sets top-level keys of params; a nil value removes its key.
func setParams(params json.RawMessage, set map[string]json.RawMessage) (json.RawMessage, error) {
	fields, err := paramFields(params)
	if err != nil {
		return nil, err
	}
	for k, v := range set {
		if v == nil {
			delete(fields, k)
		} else {
			fields[k] = v
		}
	}
	return json.Marshal(fields)
}

func paramFields(params json.RawMessage) (map[string]json.RawMessage, error) {
	fields := map[string]json.RawMessage{}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &fields); err != nil {
			return nil, fmt.Errorf("params must be a JSON object: %w", err)
		}
	}
	return fields, nil
}

// insertMeta is setMeta for the common case, in one pass over params: an object with no _meta,
// or with a _meta object that has none of the keys set, gets set's members written into it.
// Decoding params and encoding them again, as setMeta otherwise must, scans arguments of any
// size three more times, on every request of a stateless revision. ok is false for the other
// cases; set's values must be valid JSON.
func insertMeta(params json.RawMessage, set map[string]json.RawMessage) (out json.RawMessage, ok bool) {
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	metaStart, metaEnd := -1, -1
	ok = jsonrpc.EachMember(params, func(key []byte, start, end int) {
		if string(key) == "_meta" {
			metaStart, metaEnd = start, end // the last one is the one a decoder keeps
		}
	})
	if !ok {
		return nil, false
	}
	keys := make([]string, 0, len(set))
	size := 0
	for k, v := range set {
		if !plainJSONString(k) {
			return nil, false // strconv's quoting is JSON's only for plain strings
		}
		keys = append(keys, k)
		size += len(k) + len(v) + 4
	}
	slices.Sort(keys)
	members := func(b []byte) []byte {
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(strconv.AppendQuote(b, k), ':')
			b = append(b, set[k]...)
		}
		return b
	}
	// at is where the new members go: after the opening brace of _meta, or of params.
	at, object := 0, params
	if metaStart >= 0 {
		meta := params[metaStart:metaEnd]
		if meta[0] != '{' {
			return nil, false
		}
		clash := false
		if !jsonrpc.EachMember(meta, func(key []byte, _, _ int) { _, hit := set[string(key)]; clash = clash || hit }) || clash {
			return nil, false
		}
		at, object = metaStart, meta
	} else {
		at = bytes.IndexByte(params, '{')
	}
	inside := bytes.TrimLeft(object[bytes.IndexByte(object, '{')+1:], " \t\r\n")
	empty := inside[0] == '}'
	out = make([]byte, 0, len(params)+size+len(`"_meta":{},`))
	out = append(out, params[:at+1]...)
	if metaStart < 0 {
		out = append(out, `"_meta":{`...)
		out = append(members(out), '}')
	} else {
		out = members(out)
	}
	if !empty {
		out = append(out, ',')
	}
	return append(out, params[at+1:]...), true
}
