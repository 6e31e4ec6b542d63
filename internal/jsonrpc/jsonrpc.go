// Package jsonrpc reads and writes JSON-RPC 2.0 envelopes for the client and for mcptest.
//
// It knows the envelope only: ids, params, results and errors stay raw JSON for the caller to
// interpret.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Version is the only JSON-RPC version MCP speaks.
const Version = "2.0"

// A Message is any JSON-RPC message: request, notification or response. Which one it is follows
// from the fields present (see Kind).
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// Kind tells the three message shapes apart.
type Kind int

const (
	KindInvalid Kind = iota
	KindRequest
	KindNotification
	KindResponse
)

// Kind classifies m. A message that fits no shape (a response with both result and error, a
// request without a method) is KindInvalid.
func (m *Message) Kind() Kind {
	if m.JSONRPC != Version {
		return KindInvalid
	}
	switch {
	case m.Method != "" && m.Result == nil && m.Error == nil:
		if m.ID == nil {
			return KindNotification
		}
		return KindRequest
	case m.Method == "" && m.ID != nil && (m.Result == nil) != (m.Error == nil):
		return KindResponse
	}
	return KindInvalid
}

// ErrMalformed reports bytes that are not a JSON-RPC message.
var ErrMalformed = errors.New("jsonrpc: malformed message")

// Decode parses one frame, which may hold a single message or a batch (a JSON array, as the
// 2025-03-26 revision allowed). Messages are returned in order; their raw fields alias frame,
// which the caller must therefore not change afterwards.
//
// It reads frames as encoding/json would decode them into []Message or Message (the fuzz test
// holds it to that), in one validating pass for the frames servers send; anything unusual (an
// escaped or differently cased key, a string field that is not plain ASCII, a malformed frame)
// is left to encoding/json itself.
func Decode(frame []byte) ([]Message, error) {
	if msgs, ok := decodeFast(frame); ok {
		return msgs, nil
	}
	return decodeStd(frame)
}

// decodeStd is Decode by encoding/json.
func decodeStd(frame []byte) ([]Message, error) {
	trimmed := bytes.TrimLeft(frame, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("%w: empty frame", ErrMalformed)
	}
	if trimmed[0] == '[' {
		var batch []Message
		if err := json.Unmarshal(trimmed, &batch); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		if len(batch) == 0 {
			return nil, fmt.Errorf("%w: empty batch", ErrMalformed)
		}
		for i := range batch {
			batch[i].normalize()
		}
		return batch, nil
	}
	var m Message
	if err := json.Unmarshal(trimmed, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	m.normalize()
	return []Message{m}, nil
}

// decodeFast is Decode for the frames it can read exactly as decodeStd does; ok is false for
// the others, malformed ones included (decodeStd then says what is wrong).
func decodeFast(frame []byte) (msgs []Message, ok bool) {
	i := skipSpace(frame, 0)
	if i == len(frame) {
		return nil, false
	}
	var end int
	switch frame[i] {
	case '{':
		var m Message
		if end, ok = decodeObject(frame, i, 1, &m); !ok {
			return nil, false
		}
		msgs = []Message{m}
	case '[':
		var err error
		end, err = elements(frame, i, 1, func(start, end int) bool {
			var m Message
			switch frame[start] {
			case '{':
				if _, ok := decodeObject(frame, start, 2, &m); !ok {
					return false
				}
			case 'n': // null: encoding/json leaves the element the zero Message
			default:
				return false
			}
			msgs = append(msgs, m)
			return true
		})
		if err != nil || len(msgs) == 0 {
			return nil, false // an empty batch is decodeStd's error
		}
	case 'n':
		if end, ok = literalAt(frame, i, "null"); !ok {
			return nil, false
		}
		msgs = []Message{{}} // as json.Unmarshal of null into a Message: nothing set
	default:
		return nil, false
	}
	if skipSpace(frame, end) != len(frame) {
		return nil, false
	}
	for i := range msgs {
		msgs[i].normalize()
	}
	return msgs, true
}

func literalAt(data []byte, i int, lit string) (int, bool) {
	end, err := skipLiteral(data, i, lit)
	return end, err == nil
}

// decodeObject reads the object at data[i], at nesting depth depth, into m and returns the index after it. Like
// encoding/json, a later member wins over an earlier one of the same name, unknown members are
// skipped, and null leaves a string field as it was.
func decodeObject(data []byte, i, depth int, m *Message) (int, bool) {
	end, err := members(data, i, depth, func(key []byte, start, end int) bool {
		value := data[start:end]
		switch string(key) {
		case "jsonrpc":
			return setString(&m.JSONRPC, value)
		case "method":
			return setString(&m.Method, value)
		case "id":
			m.ID = value
		case "params":
			m.Params = value
		case "result":
			m.Result = value
		case "error":
			m.Error = value
		default:
			return plainUnknownKey(key)
		}
		return true
	})
	return end, err == nil
}

// setString sets a string field from a JSON value the way encoding/json would, for plain
// ASCII strings without escapes and for null; other values are left to encoding/json.
func setString(field *string, value []byte) bool {
	if string(value) == "null" {
		return true
	}
	if len(value) < 2 || value[0] != '"' {
		return false // not a string: encoding/json's type error
	}
	s := value[1 : len(value)-1]
	if string(s) == Version {
		*field = Version // every message has it: no string of its own
		return true
	}
	for _, c := range s {
		if c == '\\' || c >= 0x80 {
			return false // escapes and UTF-8 repair are encoding/json's to do
		}
	}
	*field = string(s)
	return true
}

// plainUnknownKey reports whether key surely names none of Message's fields for encoding/json,
// which matches keys after unescaping them and ignoring case (with Unicode folding: "K" is the
// Kelvin sign's fold and "s" the long s's).
func plainUnknownKey(key []byte) bool {
	for _, c := range key {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	for _, name := range [...]string{"jsonrpc", "id", "method", "params", "result", "error"} {
		if bytes.EqualFold(key, []byte(name)) {
			return false
		}
	}
	return true
}

// normalize forgives one common slip: servers that send "error": null beside a result. An
// error that is null is no error, so such a response is read as its result.
func (m *Message) normalize() {
	if bytes.Equal(m.Error, []byte("null")) {
		m.Error = nil
	}
}

// AppendRequest appends a request envelope. id is the id's JSON text; an empty id makes a
// notification. params, if not empty, must be valid JSON.
func AppendRequest(b []byte, id, method string, params []byte) []byte {
	if len(params) > 0 {
		b = append(AppendRequestHead(b, id, method), params...)
		return append(b, '}')
	}
	return append(appendRequestStart(b, id, method), '}')
}

// AppendRequestHead appends what AppendRequest writes before params that are not empty.
func AppendRequestHead(b []byte, id, method string) []byte {
	return append(appendRequestStart(b, id, method), `,"params":`...)
}

func appendRequestStart(b []byte, id, method string) []byte {
	b = append(b, `{"jsonrpc":"2.0"`...)
	if id != "" {
		b = append(b, `,"id":`...)
		b = append(b, id...)
	}
	b = append(b, `,"method":`...)
	return appendString(b, method)
}

// AppendResult appends a successful response envelope.
func AppendResult(b []byte, id, result []byte) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}')
}

// AppendError appends an error response envelope. errObj must be a JSON object with code and
// message.
func AppendError(b []byte, id, errObj []byte) []byte {
	if len(id) == 0 {
		id = []byte("null")
	}
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"error":`...)
	b = append(b, errObj...)
	return append(b, '}')
}

// appendString appends s as encoding/json marshals it. A method name is plain, which
// json.Marshal writes between quotes as it is; marshalling it would cost three allocations per
// request.
func appendString(b []byte, s string) []byte {
	if PlainString(s) {
		return append(append(append(b, '"'), s...), '"')
	}
	enc, _ := json.Marshal(s) // a Go string always marshals
	return append(b, enc...)
}

// PlainString reports whether s needs no escaping as a JSON string: json.Marshal writes it
// between quotes as it is (ASCII from 0x20 to 0x7e but for quote, backslash, <, > and &). It
// takes bytes as they are, without a copy into a string.
func PlainString[T string | []byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// ResponseIDs returns the ids of the response-shaped objects (an id, no method) in a frame that
// Decode refused, as far as it can read them: a server that writes "jsonrpc":2.0 still names the
// call it answers, and that call should fail at once rather than wait for an answer that has
// come. It returns nil for a frame that is not a JSON object or array of objects.
func ResponseIDs(frame []byte) []json.RawMessage {
	trimmed := bytes.TrimLeft(frame, " \t\r\n")
	var objs []map[string]json.RawMessage
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if json.Unmarshal(trimmed, &objs) != nil {
			return nil
		}
	} else {
		var obj map[string]json.RawMessage
		if json.Unmarshal(trimmed, &obj) != nil {
			return nil
		}
		objs = append(objs, obj)
	}
	var ids []json.RawMessage
	for _, o := range objs {
		id, hasID := o["id"]
		if _, hasMethod := o["method"]; hasID && !hasMethod && !bytes.Equal(id, []byte("null")) {
			ids = append(ids, id)
		}
	}
	return ids
}
