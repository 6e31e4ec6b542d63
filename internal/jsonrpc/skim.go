package jsonrpc

import (
	"bytes"
	"encoding/json"
)

// A Skimmer reads a frame too large to keep, a piece at a time, and keeps only what tells whose
// answer it was: the ids of its responses, and whether every message in it was a request, a
// notification or a response whose id could be read. It holds a few small buffers whatever the
// frame's size, and reads a frame's members as encoding/json would decode them into a Message
// (a later member wins over an earlier one, keys match ignoring case, a null method leaves the
// method unset), without validating the frame: on malformed JSON its answer is a best effort.
//
// The zero value is ready to use. Feed the frame to Write in order, then ask Responses.
type Skimmer struct {
	depth   int  // nesting depth of the position; message objects are at msgDepth
	batch   bool // the frame is an array of messages
	started bool // the frame's value has begun
	ended   bool // and has ended
	bad     bool // the frame is no message or batch of messages

	str   bool // inside a string
	esc   bool // inside a string, right after a backslash
	state memberState

	key     []byte // the member name being read, while it is short enough to matter
	keyLong bool
	field   field // what the member being read sets

	val     []byte // the id or method being read, while it is short enough to use
	valLong bool
	valStr  bool // it is a string

	cur struct {
		id     []byte // the id member's value
		idLong bool   // too long, or no scalar: no usable id
		idSet  bool
		method bool // a method name that is not empty
	}

	ids         []json.RawMessage
	unanswering bool // a message that is no request, no notification, and no response with a usable id
}

type memberState uint8

const (
	beforeKey memberState = iota // expecting a member name, or the end of the object
	inKey
	afterKey   // expecting ':'
	beforeVal  // expecting a value
	inScalar   // in a number or a literal
	afterValue // expecting ',' or the end of the object
)

type field uint8

const (
	otherField field = iota
	idField
	methodField
)

// Limits of what a Skimmer keeps.
const (
	// skimKeyMax: a longer member name cannot be "id" or "method", whatever its escapes.
	skimKeyMax = 64
	// skimIDMax bounds an id the Skimmer reads; a response with a longer id names no request it
	// can report (the client's ids are 38 bytes).
	skimIDMax = 1024
	// skimBatchMax bounds the responses of a batch it remembers.
	skimBatchMax = 1024
)

// Write reads the next piece of the frame.
func (s *Skimmer) Write(p []byte) {
	for i := 0; i < len(p) && !s.bad; i++ {
		if s.str {
			if !s.capturing() && !s.esc {
				// The bulk of a large frame is string content nobody keeps: jump over it.
				j := bytes.IndexAny(p[i:], `"\`)
				if j < 0 {
					return
				}
				i += j
			}
			s.stringByte(p[i])
			continue
		}
		s.byte(p[i])
	}
}

// capturing reports whether the string being read is kept: a member name, an id or a method.
func (s *Skimmer) capturing() bool {
	return s.depth == s.msgDepth() && (s.state == inKey || s.field != otherField)
}

func (s *Skimmer) msgDepth() int {
	if s.batch {
		return 2
	}
	return 1
}

func (s *Skimmer) stringByte(c byte) {
	atMember := s.depth == s.msgDepth()
	end := !s.esc && c == '"'
	switch {
	case s.esc:
		s.esc = false
	case c == '\\':
		s.esc = true
	}
	if !atMember {
		s.str = !end
		return
	}
	switch {
	case s.state == inKey:
		if end {
			s.str = false
			s.endKey()
			return
		}
		if len(s.key) < skimKeyMax {
			s.key = append(s.key, c)
		} else {
			s.keyLong = true
		}
	case s.field != otherField:
		s.keep(c)
		if end {
			s.str = false
			s.endValue()
		}
	case end:
		s.str = false
		s.endValue()
	}
}

// keep adds c to the id or method being read.
func (s *Skimmer) keep(c byte) {
	if len(s.val) < skimIDMax {
		s.val = append(s.val, c)
	} else {
		s.valLong = true
	}
}

func (s *Skimmer) byte(c byte) {
	if isSpace(c) {
		if s.state == inScalar && s.depth == s.msgDepth() {
			s.endValue()
		}
		return
	}
	switch {
	case s.ended:
		s.bad = true // something after the frame's value
	case !s.started:
		s.started = true
		switch c {
		case '{':
			s.depth = 1
			s.beginMessage()
		case '[':
			s.batch, s.depth = true, 1
		default:
			s.bad = true // a scalar: no message
		}
	case s.depth < s.msgDepth(): // between the messages of a batch
		switch c {
		case '{':
			s.depth++
			s.beginMessage()
		case ',':
		case ']':
			s.depth--
			s.ended = true
		default:
			s.bad = true // an element that is no object
		}
	case s.depth > s.msgDepth(): // inside a member's value
		switch c {
		case '"':
			s.str = true
		case '{', '[':
			s.depth++
		case '}', ']':
			s.depth-- // back at the message, after the value
		}
	default:
		s.member(c)
	}
}

func (s *Skimmer) beginMessage() {
	s.state = beforeKey
	s.cur.id, s.cur.idLong, s.cur.idSet, s.cur.method = nil, false, false, false
}

// member reads c at the level of a message's members.
func (s *Skimmer) member(c byte) {
	if s.state == inScalar {
		switch c {
		case ',', '}':
			s.endValue()
		default:
			if s.field != otherField {
				s.keep(c)
			}
			return
		}
	}
	switch s.state {
	case beforeKey, afterValue:
		switch {
		case c == '"' && s.state == beforeKey:
			s.str, s.state = true, inKey
			s.key, s.keyLong = s.key[:0], false
		case c == ',' && s.state == afterValue:
			s.state = beforeKey
		case c == '}':
			s.endMessage()
		default:
			s.bad = true
		}
	case afterKey:
		if c != ':' {
			s.bad = true
			return
		}
		s.state = beforeVal
	case beforeVal:
		s.val, s.valLong, s.valStr = s.val[:0], false, c == '"'
		switch c {
		case '"':
			s.str = true
			if s.field != otherField {
				s.keep(c)
			}
		case '{', '[':
			s.depth++
			s.state = afterValue
			s.setComposite()
		default:
			s.state = inScalar
			if s.field != otherField {
				s.keep(c)
			}
		}
	}
}

// endKey decides what the member whose name was just read sets.
func (s *Skimmer) endKey() {
	s.state, s.field = afterKey, otherField
	if s.keyLong {
		return
	}
	name := s.key
	if bytes.IndexByte(name, '\\') >= 0 {
		var unq string
		if json.Unmarshal(append(append([]byte{'"'}, name...), '"'), &unq) != nil {
			return
		}
		name = []byte(unq)
	}
	switch {
	case bytes.EqualFold(name, []byte("id")):
		s.field = idField
	case bytes.EqualFold(name, []byte("method")):
		s.field = methodField
	}
}

// setComposite records an object or array as the value of the member being read.
func (s *Skimmer) setComposite() {
	switch s.field {
	case idField:
		s.cur.id, s.cur.idLong, s.cur.idSet = s.cur.id[:0], true, true // no usable id
	case methodField:
		s.bad = true // no string: encoding/json refuses the message
	}
	s.field = otherField
}

// endValue finishes a member's string or scalar value.
func (s *Skimmer) endValue() {
	s.state = afterValue
	switch s.field {
	case idField:
		s.cur.id = append(s.cur.id[:0], s.val...)
		s.cur.idLong, s.cur.idSet = s.valLong, true
	case methodField:
		switch {
		case s.valStr:
			s.cur.method = len(s.val) > 2 || s.valLong // more than the quotes
		case string(s.val) == "null":
			// null leaves the method as it was
		default:
			s.bad = true // no string: encoding/json refuses the message
		}
	}
	s.field = otherField
}

func (s *Skimmer) endMessage() {
	s.depth--
	if s.depth == 0 {
		s.ended = true
	}
	switch {
	case s.cur.method:
	case s.cur.idSet && !s.cur.idLong && len(s.cur.id) > 0 && string(s.cur.id) != "null" && len(s.ids) < skimBatchMax:
		s.ids = append(s.ids, json.RawMessage(bytes.Clone(s.cur.id)))
	default:
		s.unanswering = true
	}
}

// Responses returns the ids of the frame's responses, as raw JSON, and reports whether the
// frame was read whole and every message in it accounted for: a request or a notification
// (which answer nothing), or a response whose id was read. It is false for a frame that is not
// JSON-RPC as far as the Skimmer can tell, that ended early, or that holds a message whose id
// it could not read (null, too long, missing): one that may answer a request it cannot name.
func (s *Skimmer) Responses() (ids []json.RawMessage, ok bool) {
	return s.ids, s.ended && !s.bad && !s.unanswering
}
