package headers

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"testing"
)

func TestEncodeHeaderValue(t *testing.T) {
	for in, want := range map[string]string{
		"us-west1":            "us-west1",
		"":                    "",
		"us west 1":           "us west 1",
		"Hello, 世界":           "=?base64?SGVsbG8sIOS4lueVjA==?=",
		" padded ":            "=?base64?IHBhZGRlZCA=?=",
		" us-west1":           "=?base64?IHVzLXdlc3Qx?=",
		"us-west1 ":           "=?base64?dXMtd2VzdDEg?=",
		"line1\nline2":        "=?base64?bGluZTEKbGluZTI=?=",
		"\tindented":          "=?base64?CWluZGVudGVk?=",
		"=?base64?literal?=":  "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=",
		"file:///a%20b.txt":   "file:///a%20b.txt",
		"https://x/r?id=123":  "https://x/r?id=123",
		"=?base64?":           "=?base64?",
		"SELECT * FROM users": "SELECT * FROM users",
	} {
		if got := EncodeValue(in); got != want {
			t.Errorf("EncodeValue(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHeaderParams(t *testing.T) {
	valid := []struct {
		schema string
		want   []Param
	}{
		{`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`,
			[]Param{{path: []string{"region"}, name: "Region", typ: "string"}}},
		{`{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"integer","x-mcp-header":"B"}}}}}`,
			[]Param{{path: []string{"a", "b"}, name: "B", typ: "integer"}}},
		{`{"type":"object","properties":{"x":{"type":"string","default":{"x-mcp-header":"ignored"},"enum":["a"]}}}`, nil},
		{`{"type":"object"}`, nil},
		{``, nil},
	}
	for _, tt := range valid {
		got, err := Declarations(json.RawMessage(tt.schema))
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Declarations(%s) = %+v, %v; want %+v", tt.schema, got, err, tt.want)
		}
	}
	for _, schema := range []string{
		`{"properties":{"r":{"type":"string","x-mcp-header":""}}}`,
		`{"properties":{"r":{"type":"string","x-mcp-header":"Region Primary"}}}`,
		`{"properties":{"r":{"type":"string","x-mcp-header":"Region:Primary"}}}`,
		`{"properties":{"r":{"type":"string","x-mcp-header":"Région"}}}`,
		`{"properties":{"r":{"type":"string","x-mcp-header":"Region\t1"}}}`,
		`{"properties":{"r":{"type":"string","x-mcp-header":7}}}`,
		`{"properties":{"a":{"type":"string","x-mcp-header":"Dup"},"b":{"type":"string","x-mcp-header":"dup"}}}`,
		`{"properties":{"n":{"type":"number","x-mcp-header":"N"}}}`,
		`{"properties":{"o":{"type":"object","x-mcp-header":"O"}}}`,
		`{"properties":{"m":{"x-mcp-header":"M"}}}`,
		`{"properties":{"m":{"type":["string","null"],"x-mcp-header":"M"}}}`,
		`{"properties":{"l":{"type":"array","items":{"type":"string","x-mcp-header":"L"}}}}`,
		`{"properties":{"u":{"anyOf":[{"type":"string","x-mcp-header":"U"}]}}}`,
		`{"$defs":{"d":{"type":"string","x-mcp-header":"D"}},"properties":{"d":{"$ref":"#/$defs/d"}}}`,
		`{"type":"string","x-mcp-header":"Root"}`,
	} {
		if _, err := Declarations(json.RawMessage(schema)); !errors.Is(err, ErrInvalidDeclaration) {
			t.Errorf("Declarations(%s) accepted the declaration (err %v)", schema, err)
		}
	}
}

func TestParamHeaders(t *testing.T) {
	params := []Param{
		{path: []string{"region"}, name: "Region", typ: "string"},
		{path: []string{"priority"}, name: "Priority", typ: "integer"},
		{path: []string{"verbose"}, name: "Verbose", typ: "boolean"},
		{path: []string{"empty"}, name: "Empty", typ: "string"},
		{path: []string{"nested", "zone"}, name: "Zone", typ: "string"},
		{path: []string{"absent"}, name: "Absent", typ: "string"},
	}
	got, err := ParamValues(params, json.RawMessage(`{"region":" us-west1","priority":42,"verbose":false,"empty":"","nested":{"zone":"b"},"query":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"Mcp-Param-Region":   "=?base64?IHVzLXdlc3Qx?=",
		"Mcp-Param-Priority": "42",
		"Mcp-Param-Verbose":  "false",
		"Mcp-Param-Empty":    "",
		"Mcp-Param-Zone":     "b",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("paramHeaders = %v, want %v", got, want)
	}
	got, err = ParamValues(params, json.RawMessage(`{"region":"r","verbose":null,"priority":4.2e1}`))
	if err != nil || got["Mcp-Param-Priority"] != "42" || len(got) != 2 {
		t.Errorf("null is omitted and 4.2e1 is sent as 42: %v, %v", got, err)
	}
	for _, args := range []string{`{"priority":9007199254740992}`, `{"priority":1.5}`, `{"region":["a"]}`} {
		if _, err := ParamValues(params, json.RawMessage(args)); err == nil {
			t.Errorf("ParamValues(%s) accepted a value a header cannot carry", args)
		}
	}
}

func TestDecodeValueReadsWhatEncodeValueWrites(t *testing.T) {
	for _, v := range []string{"us-west1", "", "Hello, 世界", " padded ", "=?base64?literal?=", "line1\nline2", "=?base64?"} {
		got, err := DecodeValue(EncodeValue(v))
		if err != nil || got != v {
			t.Errorf("DecodeValue(EncodeValue(%q)) = %q, %v", v, got, err)
		}
	}
	for in, want := range map[string]string{
		"  us-west1  ":          "us-west1",
		"SGVsbG8=":              "SGVsbG8=", // no wrapper: literal
		"=?base64?SGVsbG8=":     "=?base64?SGVsbG8=",
		"\t=?base64?SGVsbG8=?=": "Hello",
	} {
		if got, err := DecodeValue(in); err != nil || got != want {
			t.Errorf("DecodeValue(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"=?base64?SGVsbG8?=", "=?base64?SGVs!!!bG8=?=", "=?base64?SGVsbG8==?="} {
		if _, err := DecodeValue(bad); !errors.Is(err, ErrMismatch) {
			t.Errorf("DecodeValue(%q) = %v, want ErrMismatch", bad, err)
		}
	}
}

func TestCheckParams(t *testing.T) {
	params, err := Declarations(json.RawMessage(`{"type":"object","properties":{
		"region":{"type":"string","x-mcp-header":"Region"},
		"n":{"type":"integer","x-mcp-header":"N"},
		"plain":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		return h
	}
	for _, c := range []struct {
		name string
		args string
		h    http.Header
		ok   bool
	}{
		{"all present", `{"region":"eu","n":3,"plain":"x"}`, hdr("Mcp-Param-Region", "eu", "Mcp-Param-N", "3"), true},
		{"header names any case", `{"region":"eu"}`, hdr("mcp-param-region", " eu "), true},
		{"base64 form", `{"region":"Hello"}`, hdr("Mcp-Param-Region", "=?base64?SGVsbG8=?="), true},
		{"absent argument, absent header", `{"plain":"x"}`, hdr(), true},
		{"no arguments", ``, hdr(), true},
		{"missing header", `{"region":"eu"}`, hdr(), false},
		{"other value", `{"region":"eu"}`, hdr("Mcp-Param-Region", "us"), false},
		{"case differs", `{"region":"eu"}`, hdr("Mcp-Param-Region", "EU"), false},
		{"header without argument", `{}`, hdr("Mcp-Param-Region", "eu"), false},
		{"bad padding", `{"region":"Hello"}`, hdr("Mcp-Param-Region", "=?base64?SGVsbG8?="), false},
		{"sent twice", `{"region":"eu"}`, hdr("Mcp-Param-Region", "eu", "Mcp-Param-Region", "eu"), false},
		{"integer text", `{"n":3.0}`, hdr("Mcp-Param-N", "3"), true},
	} {
		err := CheckParams(params, json.RawMessage(c.args), c.h)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrMismatch)) {
			t.Errorf("%s: CheckParams = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}
