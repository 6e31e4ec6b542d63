package mcpclient

import (
	"encoding/json"
	"fmt"
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

// decodeCallToolResult must decode what json.Unmarshal decodes, to the same value, and fail
// where it fails.
func FuzzDecodeCallToolResult(f *testing.F) {
	for _, s := range []string{
		`{"content":[{"type":"text","text":"hello"}]}`,
		`{"content":[{"type":"text","text":"a\nb\u00e9\ud83d\ude00"},{"type":"image","data":"AAAA","mimeType":"image/png","_meta":{"x":1}}],"isError":true,"structuredContent":{"a":[1,2]},"_meta":null}`,
		`{"content":[{"type":"resource_link","uri":"file:///a","name":"a","title":"A","description":"d","size":12,"annotations":{"audience":["user"]}}]}`,
		`{"content":[{"type":"resource","resource":{"uri":"x","text":"y"}}]}`,
		`{"content":[]}`, `{"content":null}`, `{"content":[null]}`, `{}`, `null`, `[]`, `{"content":{}}`,
		`{"content":[{"size":1.5}]}`, `{"content":[{"size":99999999999999999999}]}`, `{"content":[{"size":-0}]}`, `{"content":[{"size":null}]}`,
		`{"Content":[]}`, `{"content":[{"Text":"x"}]}`, `{"content":[],"content":[{"text":"b"}]}`, `{"content":[{"text":"a","text":"b"}]}`,
		`{"isError":"yes"}`, `{"isError":null}`, `{"content":[{"text":5}]}`, "{\"content\":[{\"text\":\"\xff\"}]}", `{"other":1,"content":[{"other":{"type":"x"},"type":"text"}]}`,
		`{"_meta":{"a":1},"structuredContent":null}`, `{"\u0063ontent":[]}`, `{"contents":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // the client decodes results of frames that decoded
		}
		var got, want CallToolResult
		gotErr := decodeCallToolResult(raw, &got)
		wantErr := json.Unmarshal(raw, &want)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%q: error %v, json.Unmarshal's %v", raw, gotErr, wantErr)
		}
		if gotErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %#v\nwant %#v", raw, got, want)
		}
	})
}

func TestDecodeCallToolResultReadsOrdinaryResultsItself(t *testing.T) {
	for _, s := range []string{
		`{"content":[{"type":"text","text":"hello"}]}`,
		`{"content":[{"type":"text","text":"a\nb"}],"isError":false,"structuredContent":{"n":1}}`,
	} {
		if _, ok := decodeCallToolResultFast([]byte(s)); !ok {
			t.Errorf("%s went to encoding/json", s)
		}
	}
}

func BenchmarkDecodeCallToolResult(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 20} {
		text := make([]byte, size)
		for i := range text {
			text[i] = 'a' + byte(i%26)
		}
		raw := []byte(`{"content":[{"type":"text","text":"` + string(text) + `"}]}`)
		for _, bc := range []struct {
			name   string
			decode func([]byte, *CallToolResult) error
		}{{"scanner", decodeCallToolResult}, {"encoding-json", func(b []byte, r *CallToolResult) error { return json.Unmarshal(b, r) }}} {
			b.Run(fmt.Sprintf("size=%dKiB/%s", size>>10, bc.name), func(b *testing.B) {
				b.SetBytes(int64(len(raw)))
				b.ReportAllocs()
				for b.Loop() {
					var res CallToolResult
					if err := bc.decode(raw, &res); err != nil || len(res.Content[0].Text) != size {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
