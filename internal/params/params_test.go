package params

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// Compose must give what decoding params and encoding them again gives, as a decoder reads it.
func FuzzComposeMatchesDecoding(f *testing.F) {
	for _, s := range []string{``, `{}`, ` { } `, `{"name":"t","arguments":{"a":1}}`, `{"_meta":{}}`,
		`{"_meta":{"x":1},"a":[1,2]}`, `{"_meta":{"progressToken":"p"}}`, `{"_meta":5}`, `{"_meta":{ }, "b":null}`,
		`{"a":1,"_meta":{"y":"z"},"_meta":{"w":2}}`, `[1]`, `{"a\u0062":1}`, `{"a":}`, `{"requestState":"s"}`} {
		f.Add([]byte(s), "progressToken", true, true)
	}
	f.Fuzz(func(t *testing.T, params []byte, key string, withTop, withMeta bool) {
		var top, meta map[string]json.RawMessage
		if withTop {
			top = map[string]json.RawMessage{"requestState": json.RawMessage(`"s"`), "inputResponses": json.RawMessage(`{"k":{}}`)}
		}
		if withMeta {
			meta = map[string]json.RawMessage{key: json.RawMessage(`"v"`), "io.modelcontextprotocol/protocolVersion": json.RawMessage(`"2026-07-28"`)}
		}
		fast, ok := compose(nil, params, top, meta)
		if !ok {
			return
		}
		if len(top) > 0 || len(meta) > 0 {
			// Behind a frame's start, the same params, and room for the frame's end.
			// Members encoded once and members encoded per request write the same bytes.
			for _, m := range []Members{*NewMembers(meta), {Set: meta}} {
				buf, ok := ComposeAfter([]byte(`{"id":1,"params":`), params, top, m)
				if !ok || string(buf[:17]) != `{"id":1,"params":` || !bytes.Equal(buf[17:], fast) || cap(buf) == len(buf) {
					t.Fatalf("ComposeAfter(%q) = %q (ok %v, cap %d, encoded %q), compose gives %s", params, buf, ok, cap(buf), m.encoded, fast)
				}
			}
		}
		slow, err := composeByDecoding(params, top, meta)
		if err != nil {
			t.Fatalf("compose(%q) = %s, decoding refuses it: %v", params, fast, err)
		}
		var a, b any
		if err := json.Unmarshal(fast, &a); err != nil {
			t.Fatalf("compose(%q) = %s, not JSON: %v", params, fast, err)
		}
		json.Unmarshal(slow, &b)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("compose(%q) = %s, decoding gives %s", params, fast, slow)
		}
	})
}

// Read must read params as decoding them into a struct with name, uri and arguments does.
func FuzzReadMatchesDecoding(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"name":"t","arguments":{"a":1}}`, `{"uri":"file:///x"}`, `{"Name":"t"}`,
		`{"name":5}`, `{"uri":5,"name":"a"}`, `{"name":null}`, `{"na\u006de":"x"}`, `{"name":"a","name":"b"}`, `[]`,
		`{"name":"\u00e9\ud800"}`, `{"arguments":null}`, `{"Arguments":{"b":2},"arguments":{"a":1}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		got, ok := Read(params)
		var p struct {
			Name      string          `json:"name"`
			URI       string          `json:"uri"`
			Arguments json.RawMessage `json:"arguments"`
		}
		err := json.Unmarshal(params, &p)
		if len(params) == 0 {
			err = nil
		}
		if ok != (err == nil) || ok && (got.Name != p.Name || got.URI != p.URI || string(got.Arguments) != string(p.Arguments)) {
			t.Fatalf("Read(%q) = %+v %v; decoding: %+v %v", params, got, ok, p, err)
		}
	})
}

func TestComposeWritesInOrder(t *testing.T) {
	cases := []struct{ params, want string }{
		{``, `{"inputResponses":{},"_meta":{"m":1}}`},
		{`{}`, `{"inputResponses":{},"_meta":{"m":1}}`},
		{`{"name":"t"}`, `{"inputResponses":{},"_meta":{"m":1},"name":"t"}`},
		{`{"name":"t","_meta":{"x":2}}`, `{"inputResponses":{},"name":"t","_meta":{"m":1,"x":2}}`},
		{`{"_meta":{ }}`, `{"inputResponses":{},"_meta":{"m":1 }}`},
	}
	top := map[string]json.RawMessage{"inputResponses": json.RawMessage(`{}`)}
	meta := map[string]json.RawMessage{"m": json.RawMessage(`1`)}
	for _, tc := range cases {
		got, err := Compose(json.RawMessage(tc.params), top, meta)
		if err != nil || string(got) != tc.want {
			t.Errorf("Compose(%q) = %s, %v; want %s", tc.params, got, err, tc.want)
		}
	}
}
