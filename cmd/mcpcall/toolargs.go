package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The short form of a tool call, mcpcall call TOOL KEY=VALUE..., takes the tool's arguments as
// words, so that the usual ones need no JSON:
//
//	KEY=VALUE   VALUE as JSON when it is JSON (12, 1.5, true, false, null, "12", [1,2],
//	            {"a":1}), else as the string it is (alice, 007, 2026-01-01, "open)
//	KEY:=JSON   JSON that must parse: a typo in it is an error, not a string
//
// The first '=' ends KEY, so a value may hold '='; a KEY cannot, nor end in ':'.

// Why a KEY=VALUE word is refused.
var (
	errArgNoEquals  = errors.New("not KEY=VALUE or KEY:=JSON")
	errArgEmptyKey  = errors.New("the key is empty")
	errArgDuplicate = errors.New("the key is given twice")
	errArgNotJSON   = errors.New("KEY:=JSON needs valid JSON after :=")
	errArgNotUTF8   = errors.New("the word is not UTF-8, which JSON requires")
)

// An argError names the word of the tool's arguments that was refused, and why. It quotes the
// key alone: the value may be a credential.
type argError struct {
	Index int    // from 1, among the KEY=VALUE words
	Key   string // "" when none could be read
	Err   error  // one of the errArg sentinels
}

func (e *argError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("tool argument #%d: %v", e.Index, e.Err)
	}
	return fmt.Sprintf("tool argument #%d (%q): %v", e.Index, e.Key, e.Err)
}

func (e *argError) Unwrap() error { return e.Err }

// toolArguments makes the JSON object of a tool's arguments from KEY=VALUE and KEY:=JSON words,
// its members in the words' order.
func toolArguments(words []string) (json.RawMessage, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	seen := make(map[string]bool, len(words))
	for i, w := range words {
		key, value, explicit, err := splitArg(w)
		if err != nil {
			return nil, &argError{Index: i + 1, Key: key, Err: err}
		}
		if seen[key] {
			return nil, &argError{Index: i + 1, Key: key, Err: errArgDuplicate}
		}
		seen[key] = true
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(key) // a string that is UTF-8 always marshals
		b.Write(k)
		b.WriteByte(':')
		switch {
		case json.Valid([]byte(value)):
			json.Compact(&b, []byte(value))
		case explicit:
			return nil, &argError{Index: i + 1, Key: key, Err: errArgNotJSON}
		default:
			v, _ := json.Marshal(value)
			b.Write(v)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// splitArg splits KEY=VALUE or KEY:=JSON at the first '='.
func splitArg(w string) (key, value string, explicit bool, err error) {
	if !utf8.ValidString(w) {
		return "", "", false, errArgNotUTF8
	}
	key, value, ok := strings.Cut(w, "=")
	if !ok {
		return "", "", false, errArgNoEquals
	}
	key, explicit = strings.CutSuffix(key, ":")
	if key == "" {
		return "", "", false, errArgEmptyKey
	}
	return key, value, explicit, nil
}
