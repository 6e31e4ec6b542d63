package jsonrpc_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
)

func kindName(k jsonrpc.Kind) string {
	switch k {
	case jsonrpc.KindInvalid:
		return "invalid"
	case jsonrpc.KindRequest:
		return "request"
	case jsonrpc.KindNotification:
		return "notification"
	case jsonrpc.KindResponse:
		return "response"
	}
	return "unknown"
}

// sameMessage reports whether a and b have the same fields, byte for byte, with the same
// fields present.
func sameMessage(a, b jsonrpc.Message) bool {
	same := func(x, y json.RawMessage) bool { return bytes.Equal(x, y) && (x == nil) == (y == nil) }
	return a.JSONRPC == b.JSONRPC && a.Method == b.Method && same(a.ID, b.ID) &&
		same(a.Params, b.Params) && same(a.Result, b.Result) && same(a.Error, b.Error)
}

func decodeOne(t *testing.T, frame string) jsonrpc.Message {
	t.Helper()
	msgs, err := jsonrpc.Decode([]byte(frame))
	if err != nil {
		t.Fatalf("Decode(%s): %v", frame, err)
	}
	if len(msgs) != 1 {
		t.Fatalf("Decode(%s) returned %d messages, want 1", frame, len(msgs))
	}
	return msgs[0]
}

func TestDecodeSingle(t *testing.T) {
	for _, tc := range []struct {
		name, frame string
		want        jsonrpc.Message
	}{
		{
			"request",
			`{"jsonrpc":"2.0","id":"b3c1","method":"tools/call","params":{"name":"x"}}`,
			jsonrpc.Message{JSONRPC: "2.0", ID: json.RawMessage(`"b3c1"`), Method: "tools/call", Params: json.RawMessage(`{"name":"x"}`)},
		},
		{
			"leading whitespace and raw fields kept verbatim",
			" \r\n\t{ \"jsonrpc\" : \"2.0\", \"id\" : 42 , \"result\" : { \"a\" : [1, 2] } }\n",
			jsonrpc.Message{JSONRPC: "2.0", ID: json.RawMessage(`42`), Result: json.RawMessage(`{ "a" : [1, 2] }`)},
		},
		{
			"error response",
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"method not found"}}`,
			jsonrpc.Message{JSONRPC: "2.0", ID: json.RawMessage(`7`), Error: json.RawMessage(`{"code":-32601,"message":"method not found"}`)},
		},
		{
			"notification with unknown fields",
			`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1},"extra":true}`,
			jsonrpc.Message{JSONRPC: "2.0", Method: "notifications/progress", Params: json.RawMessage(`{"progress":1}`)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decodeOne(t, tc.frame)
			if !sameMessage(got, tc.want) {
				t.Errorf("Decode = %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestDecodeBatch(t *testing.T) {
	frame := ` [ {"jsonrpc":"2.0","id":1,"result":{}},
		{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}},
		{"jsonrpc":"2.0","id":"s1","method":"ping"} ]`
	msgs, err := jsonrpc.Decode([]byte(frame))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	want := []struct {
		kind   jsonrpc.Kind
		id     string
		method string
	}{
		{jsonrpc.KindResponse, `1`, ""},
		{jsonrpc.KindNotification, "", "notifications/message"},
		{jsonrpc.KindRequest, `"s1"`, "ping"},
	}
	if len(msgs) != len(want) {
		t.Fatalf("got %d messages, want %d", len(msgs), len(want))
	}
	for i, w := range want {
		m := msgs[i]
		if k := m.Kind(); k != w.kind || string(m.ID) != w.id || m.Method != w.method {
			t.Errorf("message %d: kind %s id %q method %q, want %s %q %q", i, kindName(k), m.ID, m.Method, kindName(w.kind), w.id, w.method)
		}
	}
}

func TestDecodeMalformed(t *testing.T) {
	for _, tc := range []struct{ name, frame string }{
		{"nil", ""},
		{"whitespace", " \t\r\n "},
		{"empty batch", "[]"},
		{"empty batch with spaces", " [ \n ] "},
		{"truncated object", `{"jsonrpc":"2.0","id":1`},
		{"truncated batch", `[{"jsonrpc":"2.0","id":1,"result":{}}`},
		{"trailing garbage", `{"jsonrpc":"2.0","id":1,"result":{}} x`},
		{"two objects", `{"jsonrpc":"2.0"}{"jsonrpc":"2.0"}`},
		{"not json", `hello`},
		{"string", `"jsonrpc"`},
		{"number", `42`},
		{"batch of numbers", `[1,2]`},
		{"batch of batches", `[[{"jsonrpc":"2.0","method":"x"}]]`},
		{"numeric version", `{"jsonrpc":2.0,"method":"x"}`},
		{"numeric method", `{"jsonrpc":"2.0","method":1}`},
		{"bad escape", `{"jsonrpc":"2.0","method":"\x"}`},
		{"single quotes", `{'jsonrpc':'2.0'}`},
		{"deep nesting", `{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs, err := jsonrpc.Decode([]byte(tc.frame))
			if !errors.Is(err, jsonrpc.ErrMalformed) {
				t.Errorf("Decode(%.60q) = %v, %v; want ErrMalformed", tc.frame, msgs, err)
			}
			if msgs != nil {
				t.Errorf("Decode returned messages with an error: %v", msgs)
			}
		})
	}
}

// JSON that parses but is no message must never pass for a valid one, whether Decode refuses it
// or returns it as KindInvalid for the caller to drop.
func TestDecodeNonMessagesAreNotValid(t *testing.T) {
	for _, frame := range []string{`null`, `{}`, `[null]`, `[{}]`, `{"id":1}`, `[{"jsonrpc":"2.0"},null]`} {
		msgs, err := jsonrpc.Decode([]byte(frame))
		if err != nil {
			if !errors.Is(err, jsonrpc.ErrMalformed) {
				t.Errorf("Decode(%s) error %v is not ErrMalformed", frame, err)
			}
			continue
		}
		for i, m := range msgs {
			if k := m.Kind(); k != jsonrpc.KindInvalid {
				t.Errorf("Decode(%s) message %d is a %s", frame, i, kindName(k))
			}
		}
	}
}

func TestKind(t *testing.T) {
	for _, tc := range []struct {
		name, frame string
		want        jsonrpc.Kind
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, jsonrpc.KindRequest},
		{"request with string id and params", `{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{}}`, jsonrpc.KindRequest},
		{"request with null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, jsonrpc.KindRequest},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, jsonrpc.KindNotification},
		{"notification with params", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":0.5}}`, jsonrpc.KindNotification},
		{"response with result", `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`, jsonrpc.KindResponse},
		{"response with error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"bad"}}`, jsonrpc.KindResponse},
		{"response with null result", `{"jsonrpc":"2.0","id":1,"result":null}`, jsonrpc.KindResponse},
		{"response with empty-string result", `{"jsonrpc":"2.0","id":"x","result":""}`, jsonrpc.KindResponse},
		{"error response with null id", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`, jsonrpc.KindResponse},
		{"result and error", `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}`, jsonrpc.KindInvalid},
		{"null result and error", `{"jsonrpc":"2.0","id":1,"result":null,"error":{"code":1,"message":"x"}}`, jsonrpc.KindInvalid},
		{"response without id", `{"jsonrpc":"2.0","result":{}}`, jsonrpc.KindInvalid},
		{"neither result nor error", `{"jsonrpc":"2.0","id":1}`, jsonrpc.KindInvalid},
		{"version 1.0", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, jsonrpc.KindInvalid},
		{"version missing", `{"id":1,"result":{}}`, jsonrpc.KindInvalid},
		{"version empty", `{"jsonrpc":"","method":"x"}`, jsonrpc.KindInvalid},
		{"version 2.00", `{"jsonrpc":"2.00","method":"x"}`, jsonrpc.KindInvalid},
		{"method and result", `{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}`, jsonrpc.KindInvalid},
		{"method and error", `{"jsonrpc":"2.0","id":1,"method":"ping","error":{"code":1,"message":"x"}}`, jsonrpc.KindInvalid},
		{"notification with result", `{"jsonrpc":"2.0","method":"x","result":{}}`, jsonrpc.KindInvalid},
		{"empty object", `{}`, jsonrpc.KindInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := decodeOne(t, tc.frame)
			if got := m.Kind(); got != tc.want {
				t.Errorf("Kind(%s) = %s, want %s", tc.frame, kindName(got), kindName(tc.want))
			}
		})
	}
}

// A zero Message and hand-built ones classify without decoding.
func TestKindOfBuiltMessages(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    jsonrpc.Message
		want jsonrpc.Kind
	}{
		{"zero", jsonrpc.Message{}, jsonrpc.KindInvalid},
		{"request", jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: json.RawMessage(`1`), Method: "ping"}, jsonrpc.KindRequest},
		{"notification", jsonrpc.Message{JSONRPC: jsonrpc.Version, Method: "x"}, jsonrpc.KindNotification},
		{"response", jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: json.RawMessage(`1`), Result: json.RawMessage(`null`)}, jsonrpc.KindResponse},
	} {
		if got := tc.m.Kind(); got != tc.want {
			t.Errorf("%s: Kind = %s, want %s", tc.name, kindName(got), kindName(tc.want))
		}
	}
}

func TestAppendRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame []byte
		want  jsonrpc.Message
		kind  jsonrpc.Kind
	}{
		{
			"request with id and params",
			jsonrpc.AppendRequest(nil, `"b3c1-42"`, "tools/call", []byte(`{"name":"reserve_room","arguments":{"n":2}}`)),
			jsonrpc.Message{JSONRPC: "2.0", ID: json.RawMessage(`"b3c1-42"`), Method: "tools/call", Params: json.RawMessage(`{"name":"reserve_room","arguments":{"n":2}}`)},
			jsonrpc.KindRequest,
		},
		{
			"request with integer id, no params",
			jsonrpc.AppendRequest(nil, `7`, "ping", nil),
			jsonrpc.Message{JSONRPC: "2.0", ID: json.RawMessage(`7`), Method: "ping"},
			jsonrpc.KindRequest,
		},
		{
			"notification with params",
			jsonrpc.AppendRequest(nil, "", "notifications/cancelled", []byte(`{"requestId":"a"}`)),
			jsonrpc.Message{JSONRPC: "2.0", Method: "notifications/cancelled", Params: json.RawMessage(`{"requestId":"a"}`)},
			jsonrpc.KindNotification,
		},
		{
			"notification without params",
			jsonrpc.AppendRequest(nil, "", "notifications/initialized", nil),
			jsonrpc.Message{JSONRPC: "2.0", Method: "notifications/initialized"},
			jsonrpc.KindNotification,
		},
		{
			"method needing escapes",
			jsonrpc.AppendRequest(nil, `1`, "we\"ird\\ <méthode>\n\x00", []byte(`[]`)),
			jsonrpc.Message{JSONRPC: "2.0", ID: json.RawMessage(`1`), Method: "we\"ird\\ <méthode>\n\x00", Params: json.RawMessage(`[]`)},
			jsonrpc.KindRequest,
		},
		{
			"empty params slice is omitted",
			jsonrpc.AppendRequest(nil, `2`, "ping", []byte{}),
			jsonrpc.Message{JSONRPC: "2.0", ID: json.RawMessage(`2`), Method: "ping"},
			jsonrpc.KindRequest,
		},
		{
			"result",
			jsonrpc.AppendResult(nil, []byte(`"r1"`), []byte(`{"content":[]}`)),
			jsonrpc.Message{JSONRPC: "2.0", ID: json.RawMessage(`"r1"`), Result: json.RawMessage(`{"content":[]}`)},
			jsonrpc.KindResponse,
		},
		{
			"null result",
			jsonrpc.AppendResult(nil, []byte(`3`), []byte(`null`)),
			jsonrpc.Message{JSONRPC: "2.0", ID: json.RawMessage(`3`), Result: json.RawMessage(`null`)},
			jsonrpc.KindResponse,
		},
		{
			"error",
			jsonrpc.AppendError(nil, []byte(`9`), []byte(`{"code":-32601,"message":"method not found"}`)),
			jsonrpc.Message{JSONRPC: "2.0", ID: json.RawMessage(`9`), Error: json.RawMessage(`{"code":-32601,"message":"method not found"}`)},
			jsonrpc.KindResponse,
		},
		{
			"error without id writes null",
			jsonrpc.AppendError(nil, nil, []byte(`{"code":-32700,"message":"parse error"}`)),
			jsonrpc.Message{JSONRPC: "2.0", ID: json.RawMessage(`null`), Error: json.RawMessage(`{"code":-32700,"message":"parse error"}`)},
			jsonrpc.KindResponse,
		},
		{
			"error with empty id slice writes null",
			jsonrpc.AppendError(nil, []byte{}, []byte(`{"code":-32700,"message":"parse error"}`)),
			jsonrpc.Message{JSONRPC: "2.0", ID: json.RawMessage(`null`), Error: json.RawMessage(`{"code":-32700,"message":"parse error"}`)},
			jsonrpc.KindResponse,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !json.Valid(tc.frame) {
				t.Fatalf("invalid JSON: %s", tc.frame)
			}
			got := decodeOne(t, string(tc.frame))
			if !sameMessage(got, tc.want) {
				t.Errorf("round trip of %s\n got %+v\nwant %+v", tc.frame, got, tc.want)
			}
			if k := got.Kind(); k != tc.kind {
				t.Errorf("Kind = %s, want %s", kindName(k), kindName(tc.kind))
			}
		})
	}
}

func TestAppendKeepsPrefix(t *testing.T) {
	prefix := []byte(`[`)
	b := jsonrpc.AppendRequest(append([]byte(nil), prefix...), `1`, "ping", nil)
	b = append(b, ',')
	b = jsonrpc.AppendResult(b, []byte(`2`), []byte(`{}`))
	b = append(b, ',')
	b = jsonrpc.AppendError(b, nil, []byte(`{"code":1,"message":"x"}`))
	b = append(b, ']')
	msgs, err := jsonrpc.Decode(b)
	if err != nil {
		t.Fatalf("Decode(%s): %v", b, err)
	}
	want := []jsonrpc.Kind{jsonrpc.KindRequest, jsonrpc.KindResponse, jsonrpc.KindResponse}
	if len(msgs) != len(want) {
		t.Fatalf("got %d messages from %s", len(msgs), b)
	}
	for i, k := range want {
		if got := msgs[i].Kind(); got != k {
			t.Errorf("message %d: %s, want %s", i, kindName(got), kindName(k))
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":"6f1c8e2a-1d7b-4c3e-9a55-0b7e0a9c2d11","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcpclient","version":"0.1.0"}}}`,
		`{"jsonrpc":"2.0","id":"6f1c8e2a-1d7b-4c3e-9a55-0b7e0a9c2d11","result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"fake","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"method not found"}}`,
		`{"jsonrpc":"2.0","id":1,"result":null}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":0.5}}]`,
		`{"jsonrpc":"2.0","id":"x","result":{"content":[{"type":"text","text":"\u00e9\ud83d\ude00"}],"isError":false}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error","data":{"code":"MCP_REQUEST_ID_REUSED"}}}`,
		`[]`,
		`null`,
		"  \n",
		`{"jsonrpc":"2.0","id":1,"result":{}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		msgs, err := jsonrpc.Decode(frame)
		if err != nil {
			if !errors.Is(err, jsonrpc.ErrMalformed) {
				t.Fatalf("Decode error %v is not ErrMalformed", err)
			}
			if msgs != nil {
				t.Fatalf("Decode returned %d messages with an error", len(msgs))
			}
			return
		}
		if len(msgs) == 0 {
			t.Fatal("Decode returned no messages and no error")
		}
		for i := range msgs {
			m := &msgs[i]
			k := m.Kind()
			if k < jsonrpc.KindInvalid || k > jsonrpc.KindResponse {
				t.Fatalf("message %d: Kind %d out of range", i, k)
			}
			enc, err := json.Marshal(m)
			if err != nil {
				t.Fatalf("message %d: re-encoding %+v: %v", i, m, err)
			}
			// Re-encoding keeps the shape: the message decodes again to the same kind.
			again, err := jsonrpc.Decode(enc)
			if err != nil || len(again) != 1 {
				t.Fatalf("message %d: re-encoded %s does not decode: %v", i, enc, err)
			}
			if k2 := again[0].Kind(); k2 != k {
				t.Fatalf("message %d: kind %d, after re-encoding (%s) kind %d", i, k, enc, k2)
			}
		}
	})
}

func TestResponseIDsOfRefusedFrames(t *testing.T) {
	for _, tc := range []struct {
		frame string
		want  []string
	}{
		{`{"jsonrpc":2.0,"id":"a","result":{}}`, []string{`"a"`}},
		{`[{"jsonrpc":2.0,"id":1,"result":{}},{"jsonrpc":2.0,"method":"x","id":2},{"id":null,"error":{}}]`, []string{`1`}},
		{`{"jsonrpc":2.0,"method":"notifications/x"}`, nil},
		{`not json`, nil},
		{`[1,2]`, nil},
		{`"string"`, nil},
	} {
		if _, err := jsonrpc.Decode([]byte(tc.frame)); err == nil {
			t.Errorf("Decode(%s) succeeded; the case needs a refused frame", tc.frame)
		}
		var got []string
		for _, id := range jsonrpc.ResponseIDs([]byte(tc.frame)) {
			got = append(got, string(id))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("ResponseIDs(%s) = %v, want %v", tc.frame, got, tc.want)
		}
	}
}

func TestDecodeAllocatesNoVersionString(t *testing.T) {
	with, without := []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), []byte(`{"id":1,"result":{}}`)
	allocsWith := testing.AllocsPerRun(100, func() { jsonrpc.Decode(with) })
	allocsWithout := testing.AllocsPerRun(100, func() { jsonrpc.Decode(without) })
	if allocsWith != allocsWithout {
		t.Errorf("Decode makes %v allocations with \"jsonrpc\":\"2.0\", %v without", allocsWith, allocsWithout)
	}
}

// A request's method is written as json.Marshal writes the string, whatever it holds.
func FuzzAppendRequestMethod(f *testing.F) {
	for _, s := range []string{"tools/call", "", "a\"b", "<x>&", "é", "\u2028", "\x7f", "\x00", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, method string) {
		enc, _ := json.Marshal(method)
		want := `{"jsonrpc":"2.0","method":` + string(enc) + `}`
		if got := jsonrpc.AppendRequest(nil, "", method, nil); string(got) != want {
			t.Fatalf("AppendRequest of method %q = %s, want %s", method, got, want)
		}
	})
}
