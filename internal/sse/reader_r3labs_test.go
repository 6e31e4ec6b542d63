package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"

	r3sse "github.com/r3labs/sse/v2"
)

// r3labsReader is the Reader this package had before it framed lines itself: r3labs/sse's
// EventStreamReader behind a normalizer. BenchmarkFraming measures the two.
type r3labsReader struct {
	in     *normalizer
	blocks *r3sse.EventStreamReader
	max    int
	err    error // sticky: the scanner underneath cannot continue after an error either

	buf []byte // the lines of the current block, each terminated by "\n"
	pos int    // start of the first unparsed line in buf

	fields Reader // parses the fields and dispatches, as the Reader does
}

func newR3labsReader(r io.Reader, maxEventSize int) *r3labsReader {
	if maxEventSize <= 0 {
		maxEventSize = defaultMaxEventSize
	}
	maxEventSize = min(maxEventSize, math.MaxInt-2)
	in := newNormalizer(r)
	return &r3labsReader{
		in: in,
		// The scanner needs room for the "\n\n" after the block before it can cut the block off.
		blocks: r3sse.NewEventStreamReader(in, maxEventSize+2),
		max:    maxEventSize,
	}
}

func (r *r3labsReader) Next() (Event, error) {
	for {
		for r.pos < len(r.buf) {
			line, rest, ok := bytes.Cut(r.buf[r.pos:], []byte("\n"))
			if !ok {
				// The stream ended inside this line, so the line never happened.
				r.pos = len(r.buf)
				break
			}
			r.pos = len(r.buf) - len(rest)
			if len(line) > 0 {
				r.field(line)
			} else if ev, ok := r.dispatch(); ok {
				return ev, nil
			}
		}
		if r.err != nil {
			return Event{}, r.err
		}
		block, err := r.blocks.ReadEvent()
		if err != nil {
			r.err = r.readErr(err)
			r.buf, r.pos = r.buf[:0], 0
			continue
		}
		// Copied because the scanner reuses its buffer on the next ReadEvent.
		r.buf, r.pos = append(r.buf[:0], block...), 0
		// r3labs consumed the line break and blank line that end a block, so they are put back.
		// But it also hands out whatever is left when the input stops, and that remainder was not
		// ended by anything: its complete lines still count (a retry: takes effect as soon as its
		// line ends), its unfinished last line and its event never happen.
		if !r.in.stopped {
			r.buf = append(r.buf, '\n', '\n')
		}
	}
}

func (r *r3labsReader) readErr(err error) error {
	if errors.Is(err, bufio.ErrTooLong) {
		return fmt.Errorf("%w (%d bytes)", ErrEventTooLarge, r.max)
	}
	// r3labs turns a context.Canceled read error into io.EOF, which would make a cancelled
	// stream look complete; the normalizer kept the error the source really returned.
	if r.in.err != nil {
		err = r.in.err
	}
	if err == io.EOF {
		return io.EOF
	}
	return fmt.Errorf("sse: reading the event stream: %w", err)
}

func (r *r3labsReader) field(line []byte) { r.fields.field(line) }

func (r *r3labsReader) dispatch() (Event, bool) { return r.fields.dispatch() }

// normalizer sits between the source and r3labs. It strips the BOM, turns every CR, LF and CRLF
// into "\n", and drops blank lines that directly follow a blank line (they would dispatch empty
// buffers, which changes nothing). r3labs then only has to find "\n\n", which it always does;
// on raw input it misses the blank lines in "\n\r" and in "\r\n\r" not followed by "\n", merging
// two events (or, at the end of the stream, dropping a complete one with the remainder).
//
// It also never returns data together with an error, and records whether it has returned an
// error: the scanner reads only when its buffer holds no complete block, so a block it hands out
// after it has seen the error can only be the unterminated remainder of the stream.
type normalizer struct {
	src     io.Reader
	err     error // the source's error, held back until the bytes read with it are passed on
	stopped bool  // err has been returned

	sniffed bool
	head    [3]byte
	pending []byte // bytes read while looking for the BOM, not yet passed on

	cr bool // the last byte was CR: an LF right after it belongs to the same line break
	nl int  // "\n" passed on since the last other byte, at most 2
}

func newNormalizer(src io.Reader) *normalizer {
	// nl starts at 2 because blank lines at the very start of the stream dispatch nothing either.
	return &normalizer{src: src, nl: 2}
}

func (n *normalizer) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for !n.sniffed {
		k := len(n.pending)
		if n.err == nil && k < len(bom) && bytes.Equal(n.pending, bom[:k]) {
			m, err := n.src.Read(n.head[k:])
			n.pending, n.err = n.head[:k+m], err
			if m == 0 && err == nil {
				return 0, nil // let the scanner count reads that make no progress
			}
			continue
		}
		n.sniffed = true
		if bytes.Equal(n.pending, bom) {
			n.pending = nil
		}
	}
	// Until a block is complete the scanner can do nothing with the bytes but search them again
	// for one, from the start of the block: handing them over read by read would make a large
	// event that trickles in cost time quadratic in its size. So keep reading until a block ends
	// or p is full (the scanner must grow its buffer, or fail with ErrTooLong).
	k := 0
	for k < len(p) {
		var m int
		if len(n.pending) > 0 {
			m = copy(p[k:], n.pending)
			n.pending = n.pending[m:]
		} else if n.err == nil {
			m, n.err = n.src.Read(p[k:])
			if m == 0 && n.err == nil {
				break // let the scanner count reads that make no progress
			}
		} else {
			break
		}
		c, ended := n.normalize(p[k : k+m])
		k += c
		if ended {
			break
		}
	}
	if k > 0 || n.err == nil {
		return k, nil
	}
	n.stopped = true
	return 0, n.err
}

// normalize rewrites b in place (the result is never longer) and reports whether a blank line
// ended a block in it.
func (n *normalizer) normalize(b []byte) (k int, ended bool) {
	for _, c := range b {
		if n.cr && c == '\n' {
			n.cr = false
			continue
		}
		n.cr = c == '\r'
		if c == '\r' {
			c = '\n'
		}
		if c == '\n' {
			if n.nl == 2 {
				continue
			}
			n.nl++
			ended = ended || n.nl == 2
		} else {
			n.nl = 0
		}
		b[k] = c
		k++
	}
	return k, ended
}
