package mcpclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/northstar-mcp/mcpclient/internal/cputime"
	"reflect"
	"strings"
	"testing"

	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
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
		` { "content" : [ { "type" : "text" , "text" : "a" } , null ] } `, `{"content":[{"type":"image","data":"AAAA"},{"type":"text\u0020"},{"type":"resource_link"}]}`,
		`{"content":[{"_meta":[[[[1]]]],"annotations":{"a":[{}]}}],"x":[1,{"y":null}]}`, `{"content":[5]}`, `{"content":["x"]}`,
		`{"content":[{"size":-12}]}`, `{"content":[{"size":"12"}]}`, `{"isError":false,"isError":true}`, `{"content":[{"text":"` + strings.Repeat("long text ", 20) + `"}]}`,
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

// The scanner counts nesting as encoding/json does: a result nested as deep as it allows
// decodes, one level deeper fails, whether the depth is in a content block or beside it.
func TestDecodeCallToolResultStopsAtEncodingJSONsDepth(t *testing.T) {
	const maxDepth = 10000
	for _, tc := range []struct {
		head, tail string
		around     int // levels the head opens
	}{{`{"content":[{"_meta":`, `}]}`, 3}, {`{"structuredContent":`, `}`, 1}} {
		for _, depth := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
			n := depth - tc.around
			raw := []byte(tc.head + strings.Repeat("[", n) + strings.Repeat("]", n) + tc.tail)
			var got, want CallToolResult
			gotErr, wantErr := decodeCallToolResult(raw, &got), json.Unmarshal(raw, &want)
			if (gotErr == nil) != (wantErr == nil) {
				t.Errorf("%s at depth %d: error %v, json.Unmarshal's %v", tc.head, depth, gotErr, wantErr)
			}
			switch _, ok := decodeCallToolResultFast(raw); {
			case ok && wantErr != nil:
				t.Errorf("%s at depth %d: the scanner accepts what encoding/json refuses", tc.head, depth)
			case !ok && wantErr == nil:
				t.Errorf("%s at depth %d went to encoding/json", tc.head, depth)
			}
		}
	}
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

// answerFrame is a tools/call answer whose result is one text block of size bytes, framed as a
// server sends it. The text is plain letters, or lines of 80 bytes (a newline, escaped in JSON,
// ending each), or JSON (whose quotes are escaped in JSON, every few bytes).
func answerFrame(size int, kind string) []byte {
	pattern := "abcdefghijklmnopqrstuvwxyz"
	switch kind {
	case "lines":
		pattern = strings.Repeat("abcdefghijklmnopqrstuvwxyz", 4)[:79] + "\n"
	case "json":
		pattern = `{"id":1234,"name":"item","tags":["a","bc"],"ok":true},`
	}
	text := bytes.Repeat([]byte(pattern), size/len(pattern)+1)[:size]
	quoted, _ := json.Marshal(string(text))
	frame := []byte(`{"jsonrpc":"2.0","id":"0123456789abcdef0123456789abcdef-00001","result":{"content":[{"type":"text","text":`)
	frame = append(frame, quoted...)
	return append(frame, `}]}}`...)
}

// decodeAnswer decodes a tools/call answer the way the client does: the envelope routed by its
// id, then the result.
func decodeAnswer(frame []byte) (*CallToolResult, error) {
	msgs, err := jsonrpc.Decode(frame)
	if err != nil {
		return nil, err
	}
	if len(msgs) != 1 || msgs[0].Kind() != jsonrpc.KindResponse {
		return nil, fmt.Errorf("no response: %q", frame)
	}
	if _, err := idKey(msgs[0].ID); err != nil {
		return nil, err
	}
	var res CallToolResult
	if err := decodeCallToolResult(msgs[0].Result, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// An answerDecoder decodes a tools/call answer of one text block and returns the text's length.
type answerDecoder struct {
	name   string
	decode func(frame []byte) (int, error)
}

// answerDecoders are the decoders BenchmarkDecodeAnswer compares: the client's, and the floor's,
// one json.Unmarshal of the frame into a small struct. Where the standard library has
// encoding/json/jsontext (Go 1.27 and later), its token reader and
// encoding/json/v2 join them.
var answerDecoders = []answerDecoder{
	{"ours", func(frame []byte) (int, error) {
		res, err := decodeAnswer(frame)
		if err != nil || len(res.Content) != 1 {
			return 0, fmt.Errorf("%v, %+v", err, res)
		}
		return len(res.Content[0].Text), nil
	}},
	{"floor", func(frame []byte) (int, error) {
		var answer textAnswer
		if err := json.Unmarshal(frame, &answer); err != nil || len(answer.Result.Content) != 1 {
			return 0, fmt.Errorf("%v, %d blocks", err, len(answer.Result.Content))
		}
		return len(answer.Result.Content[0].Text), nil
	}},
}

// textAnswer is what the floor decodes of a tools/call answer.
type textAnswer struct {
	Result struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
}

// BenchmarkDecodeAnswer compares the client's decoding of a whole tools/call answer with others
// (answerDecoders). Besides wall time it reports the
// process's CPU time per answer (cpu-ns/op), garbage collection included.
func BenchmarkDecodeAnswer(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 20, 16 << 20} {
		for _, text := range []string{"plain", "lines", "json"} {
			var frame []byte // built for the benchmarks that run
			for _, client := range answerDecoders {
				b.Run(fmt.Sprintf("size=%dKiB/text=%s/client=%s", size>>10, text, client.name), func(b *testing.B) {
					if frame == nil {
						frame = answerFrame(size, text)
					}
					b.SetBytes(int64(len(frame)))
					b.ReportAllocs()
					cpu0, cpuOK := cputime.Process()
					for b.Loop() {
						if n, err := client.decode(frame); err != nil || n != size {
							b.Fatalf("%d bytes of text, %v", n, err)
						}
					}
					if cpu1, _ := cputime.Process(); cpuOK {
						b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
					}
				})
			}
		}
	}
}
