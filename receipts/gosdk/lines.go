package receiptsgosdk

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"
)

// readBufferSize is the read buffer of a connection: a line longer than it is gathered in a
// buffer of its own, up to the limit.
const readBufferSize = 64 << 10

// A lineReader cuts a newline-delimited stream into lines, holding at most max bytes of one
// line (plus one read buffer).
type lineReader struct {
	br  *bufio.Reader
	max int
	buf []byte // the line being gathered; a large one is dropped once returned
	err error  // what ended the stream after a last line without a newline
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, readBufferSize), max: max}
}

// next returns the next line with its terminator, whole, or a last line that the stream ended
// without a newline. A line longer than max comes back as its head (more than max bytes, not
// whole): the caller then takes the rest with rest or skipRest. line is valid until the next
// call. err is what ended the stream, returned after every byte read before it.
func (l *lineReader) next() (line []byte, whole bool, err error) {
	if cap(l.buf) > readBufferSize {
		l.buf = nil // a large line's buffer is not kept while the stream is quiet
	}
	l.buf = l.buf[:0]
	if l.err != nil {
		return nil, false, l.err
	}
	for {
		chunk, err := l.br.ReadSlice('\n')
		if err == nil && len(l.buf) == 0 && len(chunk) <= l.max {
			return chunk, true, nil // the common case: the line fit the read buffer
		}
		l.buf = append(l.buf, chunk...)
		switch {
		case err == bufio.ErrBufferFull:
			if len(l.buf) > l.max {
				return l.buf, false, nil
			}
			continue
		case err != nil && len(l.buf) == 0:
			return nil, false, err
		case err != nil:
			// The stream ended after a last line without a newline; the next call returns err.
			l.err = err
			if len(l.buf) > l.max {
				return l.buf, false, nil
			}
			return l.buf, true, nil
		}
		if len(l.buf) > l.max {
			return l.buf, false, nil
		}
		return l.buf, true, nil
	}
}

// rest hands the remainder of a line longer than max to each, piece by piece, up to and with its
// newline; the pieces are valid only during the call. It ends at the line's end, at the first
// error of each, or when the stream ends (err then is the stream's).
func (l *lineReader) rest(each func([]byte) error) error {
	if n := len(l.buf); l.err != nil || n > 0 && l.buf[n-1] == '\n' {
		return nil // the head was the whole line
	}
	for {
		chunk, err := l.br.ReadSlice('\n')
		if len(chunk) > 0 {
			if werr := each(chunk); werr != nil {
				return werr
			}
		}
		switch err {
		case nil:
			return nil
		case bufio.ErrBufferFull:
			continue
		}
		l.err = err
		return err
	}
}

// skipRest drops the remainder of a line longer than max.
func (l *lineReader) skipRest() error {
	return l.rest(func([]byte) error { return nil })
}

// withoutEOL is a line without its newline and one carriage return before it: the bytes the
// fingerprint covers.
func withoutEOL(line []byte) []byte {
	line = bytes.TrimSuffix(line, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r"))
}

type kind int

const (
	kindOther kind = iota // no JSON-RPC message this adapter reads: a batch, malformed JSON
	kindRequest
	kindNotification
	kindResponse
)

// A message is what the adapter reads of one line.
type message struct {
	kind   kind
	id     json.RawMessage // the id's JSON text, as received
	method string
	params json.RawMessage
	// errCode is the JSON-RPC error code of an error response; hasErr says there is one.
	errCode int
	hasErr  bool
}

// parseMessage reads one line as one JSON-RPC message. Member names match exactly, the last of
// duplicates counting, as JSON-RPC peers read them.
func parseMessage(line []byte) message {
	if t := bytes.TrimLeft(line, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return message{}
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(line, &obj) != nil {
		return message{}
	}
	id, hasID := obj["id"]
	if rawMethod, ok := obj["method"]; ok {
		var m message
		if json.Unmarshal(rawMethod, &m.method) != nil {
			return message{}
		}
		m.params = obj["params"]
		if !hasID {
			m.kind = kindNotification
			return m
		}
		if string(id) == "null" {
			return message{}
		}
		m.kind, m.id = kindRequest, id
		return m
	}
	_, hasResult := obj["result"]
	rawErr, hasErr := obj["error"]
	if !hasID || hasResult == hasErr {
		return message{}
	}
	m := message{kind: kindResponse, id: id}
	if hasErr {
		var e struct {
			Code *int `json:"code"`
		}
		if json.Unmarshal(rawErr, &e) == nil && e.Code != nil {
			m.errCode, m.hasErr = *e.Code, true
		}
	}
	return m
}

// canonicalID names the request an id denotes, however it is written: a server answers "\u0031"
// as "1", and 1.0 as 1. ok is false for what is no string nor number.
func canonicalID(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return "s" + s, true
	}
	if !json.Valid(raw) {
		return "", false
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return "n" + strconv.FormatInt(n, 10), true
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return "", false
	}
	if f == float64(int64(f)) {
		return "n" + strconv.FormatInt(int64(f), 10), true
	}
	return "n" + strconv.FormatFloat(f, 'g', -1, 64), true
}

// A head is what the start of a line longer than the limit says of it.
type head struct {
	id       json.RawMessage // nil when the head does not reach it
	method   string
	response bool // a result or error member came first
}

// request reports whether the head names a request's method: one that may have opted in.
func (h head) request() bool {
	return !h.response && h.method != "" && !strings.HasPrefix(h.method, "notifications/")
}

// scanHead reads the members of a JSON object from a truncated line, as far as they are whole.
func scanHead(line []byte) head {
	var h head
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return h
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return h
		}
		key, ok := tok.(string)
		if !ok {
			return h
		}
		var raw json.RawMessage
		if key == "result" || key == "error" {
			h.response = true
			return h
		}
		if dec.Decode(&raw) != nil {
			return h
		}
		switch key {
		case "id":
			h.id = raw
		case "method":
			var m string
			if json.Unmarshal(raw, &m) == nil {
				h.method = m
			}
		}
	}
}
