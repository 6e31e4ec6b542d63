package mcpclient

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

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
