package headers

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
)

// FuzzDecodeValue: whatever a client sends in a header, decoding it never panics, fails only
// with ErrMismatch, and reads back what EncodeValue wrote.
func FuzzDecodeValue(f *testing.F) {
	for _, s := range []string{"", "us-west1", "=?base64?SGVsbG8=?=", "=?base64?SGVsbG8?=", " =?base64??= ", "Hello, 世界", "=?base64?"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if _, err := DecodeValue(v); err != nil && !errors.Is(err, ErrMismatch) {
			t.Fatalf("DecodeValue(%q): %v, not ErrMismatch", v, err)
		}
		if got, err := DecodeValue(EncodeValue(v)); err != nil || got != v {
			t.Fatalf("DecodeValue(EncodeValue(%q)) = %q, %v", v, got, err)
		}
	})
}

// FuzzCheckParams: arguments and headers from a client never make the check panic, and the
// headers ParamValues computes for arguments always pass it.
func FuzzCheckParams(f *testing.F) {
	f.Add(`{"region":"eu","n":3,"ok":true}`, "eu")
	f.Add(`{"region":null}`, "")
	f.Add(`[1,2]`, "=?base64?ZXU=?=")
	f.Add(`{"n":1e400}`, "x")
	params, err := Declarations(json.RawMessage(`{"type":"object","properties":{
		"region":{"type":"string","x-mcp-header":"Region"},
		"n":{"type":"integer","x-mcp-header":"N"},
		"ok":{"type":"boolean","x-mcp-header":"Ok"}}}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, args, region string) {
		h := http.Header{}
		h.Set("Mcp-Param-Region", region)
		if err := CheckParams(params, json.RawMessage(args), h); err != nil && !errors.Is(err, ErrMismatch) {
			t.Fatalf("CheckParams: %v, not ErrMismatch", err)
		}
		values, err := ParamValues(params, json.RawMessage(args))
		if err != nil {
			return
		}
		h = http.Header{}
		for k, v := range values {
			h.Set(k, v)
		}
		if err := CheckParams(params, json.RawMessage(args), h); err != nil {
			t.Fatalf("the headers ParamValues computed for %s fail the check: %v", args, err)
		}
	})
}
