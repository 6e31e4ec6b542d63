package mcpclient

import (
	"encoding/json"
	"testing"
)

// resultTypeOf must read a result's resultType as decoding the result into a struct with a
// string field does, and fail where that decoding fails.
func FuzzResultTypeOf(f *testing.F) {
	for _, s := range []string{`{"resultType":"complete","content":[]}`, `{"content":[{"type":"text","text":"x"}]}`,
		`{"resultType":"input_\u0072equired"}`, `{"resultType":5}`, `{"resultType":null}`, `{"ResultType":"a"}`,
		`{"resultType":"a","resultType":"b"}`, "{\"resultType\":\"\xff\"}", `{"resultType":"\ud800"}`, `[]`, `{"resultType":"a"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, result []byte) {
		got, ok := resultTypeOf(result)
		var r struct {
			ResultType string `json:"resultType"`
		}
		err := json.Unmarshal(result, &r)
		if ok != (err == nil) || ok && got != r.ResultType {
			t.Fatalf("resultTypeOf(%q) = %q, %v; decoding gives %q, %v", result, got, ok, r.ResultType, err)
		}
	})
}
