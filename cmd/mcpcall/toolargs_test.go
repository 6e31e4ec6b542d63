package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestToolArguments(t *testing.T) {
	for _, tt := range []struct {
		words []string
		want  string
	}{
		{nil, `{}`},
		{[]string{"room=12", "guests=2"}, `{"room":12,"guests":2}`},
		{[]string{"name=alice"}, `{"name":"alice"}`},
		{[]string{"b=true", "f=false", "n=null"}, `{"b":true,"f":false,"n":null}`},
		{[]string{"x=1.5e3", "neg=-3"}, `{"x":1.5e3,"neg":-3}`},
		{[]string{`s="12"`}, `{"s":"12"}`},
		{[]string{"zip=007", "date=2026-01-01", "v=1.2.3"}, `{"zip":"007","date":"2026-01-01","v":"1.2.3"}`},
		{[]string{"empty="}, `{"empty":""}`},
		{[]string{"sp= 12 "}, `{"sp":12}`},
		{[]string{"sp= a b "}, `{"sp":" a b "}`},
		{[]string{`o={"a": [1, 2]}`, "l=[]"}, `{"o":{"a":[1,2]},"l":[]}`},
		{[]string{`q="open`, "t=True"}, `{"q":"\"open","t":"True"}`},
		{[]string{"eq=a=b", "u=é✓"}, `{"eq":"a=b","u":"é✓"}`},
		{[]string{"j:=12", `k:="x"`, "m:={ }"}, `{"j":12,"k":"x","m":{}}`},
		{[]string{`we"ird key=1`}, `{"we\"ird key":1}`},
		{[]string{"z=1", "a=2"}, `{"z":1,"a":2}`}, // the words' order
	} {
		got, err := toolArguments(tt.words)
		if err != nil || string(got) != tt.want {
			t.Errorf("toolArguments(%q) = %s, %v; want %s", tt.words, got, err, tt.want)
		}
	}
	for _, tt := range []struct {
		words []string
		index int
		key   string
		want  error
	}{
		{[]string{"room"}, 1, "", errArgNoEquals},
		{[]string{"a=1", "=1"}, 2, "", errArgEmptyKey},
		{[]string{":=1"}, 1, "", errArgEmptyKey},
		{[]string{"a=1", "a:=2"}, 2, "a", errArgDuplicate},
		{[]string{"a:=nope"}, 1, "a", errArgNotJSON},
		{[]string{"a:="}, 1, "a", errArgNotJSON},
		{[]string{"a=\xff"}, 1, "", errArgNotUTF8},
	} {
		_, err := toolArguments(tt.words)
		var ae *argError
		if !errors.Is(err, tt.want) || !errors.As(err, &ae) || ae.Index != tt.index || ae.Key != tt.key {
			t.Errorf("toolArguments(%q): %v, want %v at #%d key %q", tt.words, err, tt.want, tt.index, tt.key)
		}
	}
	// The error names the key and never the value, which may be a credential.
	if _, err := toolArguments([]string{"token:=S3CRET"}); err == nil || strings.Contains(err.Error(), "S3CRET") || !strings.Contains(err.Error(), `"token"`) {
		t.Errorf("error %v", err)
	}
}

// FuzzToolArguments: no word makes toolArguments panic or return anything but a JSON object; a
// value that is not JSON comes back as the very string, and KEY:=JSON as that JSON.
func FuzzToolArguments(f *testing.F) {
	for _, seed := range [][3]string{
		{"room", "12", "x"}, {"name", "alice", `"q"`}, {"", "", ""}, {"a:", "=b", "{"},
		{"k", "\xff", "[1,"}, {"é", " true ", "null"}, {"a=b", "c", "{\"a\":1}"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, key, value, other string) {
		words := []string{key + "=" + value, "other:=" + other}
		got, err := toolArguments(words)
		if err == nil {
			var obj map[string]json.RawMessage
			if !json.Valid(got) || json.Unmarshal(got, &obj) != nil || obj == nil {
				t.Fatalf("toolArguments(%q) = %q: no JSON object", words, got)
			}
		}
		plainKey := key != "" && !strings.Contains(key, "=") && !strings.HasSuffix(key, ":") && key != "other" && utf8.ValidString(key)
		if !plainKey || !utf8.ValidString(value) {
			return
		}
		got, err = toolArguments([]string{key + "=" + value})
		if err != nil {
			t.Fatalf("toolArguments(%q=%q): %v", key, value, err)
		}
		var obj map[string]any
		if err := json.Unmarshal(got, &obj); err != nil || len(obj) != 1 {
			t.Fatalf("toolArguments(%q=%q) = %s: %v", key, value, got, err)
		}
		if !json.Valid([]byte(value)) {
			if s, ok := obj[key].(string); !ok || s != value {
				t.Fatalf("toolArguments(%q=%q) = %s: the plain string does not come back", key, value, got)
			}
		}
		// Any string, given as JSON with :=, comes back as that string.
		quoted, _ := json.Marshal(value)
		got, err = toolArguments([]string{key + ":=" + string(quoted)})
		var back map[string]string
		if err != nil || json.Unmarshal(got, &back) != nil || back[key] != value {
			t.Fatalf("toolArguments(%q:=%s) = %s, %v", key, quoted, got, err)
		}
	})
}
