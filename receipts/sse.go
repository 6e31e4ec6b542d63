package receipts

import "bytes"

// An eventSplitter cuts an event stream, written to it in pieces of any size, into its blocks:
// the lines of one event and the blank line that ends it. It keeps the raw bytes of the block
// being read, up to max; a longer block is dropped (its bytes are passed on if held), and
// counted as overflowed.
//
// Every byte written goes into exactly one block, in order, so a writer that forwards the
// blocks it gets (and the passed bytes) forwards the stream byte for byte. Lines end in CRLF,
// LF or CR, as the HTML standard reads them; the LF of a CRLF may arrive in the next write, and
// is then the first byte of the next block, which changes nothing of the stream's meaning.
type eventSplitter struct {
	max  int
	hold bool // the blocks are held: bytes of an overflowing block go to pass
	// block is called with each complete block's raw bytes, which it must not keep.
	block func(raw []byte)
	// pass is called, when held, with bytes of a block too large to hold, as they come.
	pass func(p []byte)

	raw      []byte
	over     bool
	overflew bool // some block overflowed
	lineLen  int
	prevCR   bool
}

func (s *eventSplitter) Write(p []byte) {
	start := 0
	for i, c := range p {
		end := false
		switch c {
		case '\r':
			end = s.lineLen == 0
			s.lineLen, s.prevCR = 0, true
		case '\n':
			if s.prevCR {
				s.prevCR = false // the LF of a CRLF: its line ended at the CR
				continue
			}
			end = s.lineLen == 0
			s.lineLen = 0
		default:
			s.lineLen++
			s.prevCR = false
		}
		if end {
			s.take(p[start : i+1])
			s.endBlock()
			start = i + 1
		}
	}
	s.take(p[start:])
}

func (s *eventSplitter) take(p []byte) {
	switch {
	case len(p) == 0:
	case s.over:
		if s.hold {
			s.pass(p)
		}
	case len(s.raw)+len(p) > s.max:
		s.over, s.overflew = true, true
		if s.hold {
			s.pass(s.raw)
			s.pass(p)
		}
		s.raw = s.raw[:0]
	default:
		s.raw = append(s.raw, p...)
	}
}

func (s *eventSplitter) endBlock() {
	if !s.over {
		s.block(s.raw)
	}
	s.raw, s.over = s.raw[:0], false
}

// flush passes on, when held, the bytes of a block the stream never ended.
func (s *eventSplitter) flush() {
	if s.hold && !s.over && len(s.raw) > 0 {
		s.pass(s.raw)
	}
	s.raw = s.raw[:0]
}

// eachLine calls f with each line of raw and the line break after it ("" for a last line
// without one).
func eachLine(raw []byte, f func(line, lineBreak []byte)) {
	for len(raw) > 0 {
		i := bytes.IndexAny(raw, "\r\n")
		if i < 0 {
			f(raw, nil)
			return
		}
		n := 1
		if raw[i] == '\r' && i+1 < len(raw) && raw[i+1] == '\n' {
			n = 2
		}
		f(raw[:i], raw[i:i+n])
		raw = raw[i+n:]
	}
}

// field splits an event stream line into its field name and value; comment is true for a
// comment line.
func field(line []byte) (name, value []byte, comment bool) {
	if len(line) > 0 && line[0] == ':' {
		return nil, nil, true
	}
	name, value, found := bytes.Cut(line, []byte(":"))
	if found && len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	return name, value, false
}

// eventData returns the data of a block: its data lines joined by LF. ok is false when it has
// none, and so dispatches no event.
func eventData(raw []byte) (data []byte, ok bool) {
	eachLine(raw, func(line, _ []byte) {
		name, value, comment := field(line)
		if comment || string(name) != "data" {
			return
		}
		if ok {
			data = append(data, '\n')
		}
		data, ok = append(data, value...), true
	})
	return data, ok
}

// replaceData returns raw, a block, with its data replaced by data: the first data line
// becomes data's lines, the other data lines go, every other line stays as it was.
func replaceData(raw, data []byte) []byte {
	out := make([]byte, 0, len(raw)+len(data)+16)
	done := false
	eachLine(raw, func(line, lineBreak []byte) {
		name, _, comment := field(line)
		if comment || string(name) != "data" || len(line) == 0 {
			out = append(append(out, line...), lineBreak...)
			return
		}
		if done {
			return
		}
		done = true
		for l := range bytes.Lines(data) {
			out = append(append(out, "data: "...), bytes.TrimRight(l, "\n")...)
			out = append(out, '\n')
		}
	})
	return out
}

// appendEvent appends one event of the default type whose data is data.
func appendEvent(out, data []byte) []byte {
	out = append(out, "event: message\n"...)
	for l := range bytes.Lines(data) {
		out = append(append(out, "data: "...), bytes.TrimRight(l, "\n")...)
		out = append(out, '\n')
	}
	return append(out, '\n')
}
