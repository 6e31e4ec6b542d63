package mcpclient

import (
	"encoding/json"
	"reflect"
	"testing"
)

// insertMeta must give what setMeta's decode-and-encode gives, as a decoder reads it.
func FuzzInsertMetaMatchesDecoding(f *testing.F) {
	for _, s := range []string{``, `{}`, ` { } `, `{"name":"t","arguments":{"a":1}}`, `{"_meta":{}}`,
		`{"_meta":{"x":1},"a":[1,2]}`, `{"_meta":{"progressToken":"p"}}`, `{"_meta":5}`, `{"_meta":{ }, "b":null}`,
		`{"a":1,"_meta":{"y":"z"},"_meta":{"w":2}}`, `[1]`, `{"a\u0062":1}`, `{"a":}`} {
		f.Add([]byte(s), "progressToken")
	}
	f.Fuzz(func(t *testing.T, params []byte, key string) {
		set := map[string]json.RawMessage{key: json.RawMessage(`"v"`), "io.modelcontextprotocol/protocolVersion": json.RawMessage(`"2026-07-28"`)}
		fast, ok := insertMeta(params, set)
		if !ok {
			return
		}
		slow, err := setMetaByDecoding(params, set)
		if err != nil {
			t.Fatalf("insertMeta(%q) = %s, decoding refuses it: %v", params, fast, err)
		}
		var a, b any
		if err := json.Unmarshal(fast, &a); err != nil {
			t.Fatalf("insertMeta(%q) = %s, not JSON: %v", params, fast, err)
		}
		json.Unmarshal(slow, &b)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("insertMeta(%q) = %s, decoding gives %s", params, fast, slow)
		}
	})
}

// nameAndURI must read params as decoding them into the struct standardHeaders used did.
func FuzzNameAndURIMatchesDecoding(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"name":"t","arguments":{"a":1}}`, `{"uri":"file:///x"}`, `{"Name":"t"}`,
		`{"name":5}`, `{"uri":5,"name":"a"}`, `{"name":null}`, `{"na\u006de":"x"}`, `{"name":"a","name":"b"}`, `[]`, `{"name":"\u00e9\ud800"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		name, uri, ok := nameAndURI(params)
		var p struct {
			Name string `json:"name"`
			URI  string `json:"uri"`
		}
		err := json.Unmarshal(params, &p)
		if ok != (err == nil) || ok && (name != p.Name || uri != p.URI) {
			t.Fatalf("nameAndURI(%q) = %q %q %v; decoding: %q %q %v", params, name, uri, ok, p.Name, p.URI, err)
		}
	})
}
