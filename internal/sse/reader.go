package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"time"
)

// Event is one dispatched event.
type Event struct {
	Type string // the event: field; "" means the default type "message"
	Data []byte // the data: lines joined by "\n" (no trailing newline); the caller's to keep
	ID   string // the last event id in effect when the event was dispatched
}

// ErrEventTooLarge reports an event larger than the reader's limit. The stream cannot be
// resynchronized after it: the caller must treat the stream as broken (and must not reconnect
// forever to the same oversized event). The transport package exports it as ErrMessageTooLarge,
// for every message over a size limit, whence its text.
var ErrEventTooLarge = errors.New("transport: message exceeds the size limit")

const (
	defaultMaxEventSize = 1 << 20
	initialBufferSize   = 4 << 10
	// keptBufferSize is the most buffer an idle reader keeps after a large event, and the size
	// at which a long data line starts to go straight to its event instead of growing the buffer.
	keptBufferSize = 64 << 10
	// maxEmptyReads is how many reads that return nothing and no error the reader takes before
	// it gives up with io.ErrNoProgress, as bufio does.
	maxEmptyReads = 100
)

// Reader parses an event stream. It is not safe for concurrent use.
//
// It frames lines itself, in one pass: every byte is searched once for CR and once for LF (with
// bytes.IndexByte), lines are parsed in place in the read buffer, and a data line is copied once,
// into the event. r3labs' EventStreamReader searches its whole buffer again after every read, so
// an event of a few MiB that arrives in network-sized reads costs time quadratic in its size;
// BenchmarkFraming measures both.
type Reader struct {
	src io.Reader
	max int
	err error // sticky: returned once the complete lines read before it are parsed

	buf        []byte
	start, end int // buf[start:end] is read and not yet parsed
	// The next CR and LF at or after start, or -1 when there is none up to crFrom and lfFrom:
	// each search resumes where the last one ended, so no byte is searched twice.
	crAt, lfAt     int
	crFrom, lfFrom int
	skipLF         bool // the last line ended with CR: an LF right after it is the same line break
	sniffed        bool // the BOM, if any, is gone
	srcErr         error
	emptyReads     int

	block int // bytes of the current block: its lines and the line breaks between them
	// A data line longer than half of a buffer of keptBufferSize goes into data as it arrives,
	// instead of growing the buffer to hold it whole: dataLine says the line being read is one, lineLen how many
	// of its bytes have gone.
	dataLine bool
	lineLen  int

	typ      string
	data     []byte
	idBuf    string // the spec's "last event ID buffer"
	lastID   string // the buffer as of the last dispatch
	retry    time.Duration
	hasRetry bool
}

// NewReader reads events from r. maxEventSize bounds one event block in bytes (<= 0: a default of
// 1 MiB): its lines and the line breaks between them, each line break counted as one byte, not
// counting the blank line that ends the event.
func NewReader(r io.Reader, maxEventSize int) *Reader {
	if maxEventSize <= 0 {
		maxEventSize = defaultMaxEventSize
	}
	return &Reader{src: r, max: maxEventSize, crAt: -1, lfAt: -1}
}

// Next returns the next event that has data. Events with empty data (such as MCP's priming events,
// which carry only an id) are not returned, but their id: and retry: fields take effect. An event cut
// off by the end of the stream (no blank line after it) is discarded, per the spec. At the end of
// the stream Next returns io.EOF; an oversized event gives an error wrapping ErrEventTooLarge; read
// errors are returned as they are (wrapped with %w).
func (r *Reader) Next() (Event, error) {
	for r.err == nil {
		line, ok := r.line()
		if !ok {
			r.fill()
			continue
		}
		full := r.lineLen + len(line)
		if full == 0 {
			r.block = 0
			if ev, ok := r.dispatch(); ok {
				return ev, nil
			}
			continue
		}
		if r.block += full; r.block > full {
			r.block++ // the line break before this line
		}
		if r.block > r.max {
			r.tooLarge()
			break
		}
		if r.dataLine {
			r.data = append(appendDoubling(r.data, line), '\n')
			r.dataLine, r.lineLen = false, 0
			continue
		}
		r.field(line)
	}
	return Event{}, r.err
}

func (r *Reader) tooLarge() {
	r.err = fmt.Errorf("sse: an event over the limit of %d bytes: %w", r.max, ErrEventTooLarge)
	r.releaseBuffer()
}

// buffers holds read buffers of initialBufferSize: most streams are one answer long, and a
// buffer per stream is most of what reading a small answer allocates. Nothing handed out
// aliases a buffer (events get their data copied out), so one can go back as soon as its reader
// has stopped.
var buffers = sync.Pool{New: func() any { return new([initialBufferSize]byte) }}

func (r *Reader) releaseBuffer() {
	if len(r.buf) == initialBufferSize {
		buffers.Put((*[initialBufferSize]byte)(r.buf))
	}
	r.buf = nil
}

// line returns the next complete line in the buffer, without its line break.
func (r *Reader) line() ([]byte, bool) {
	if !r.sniffed {
		if r.end-r.start < len(bom) && r.srcErr == nil && bytes.HasPrefix(bom, r.buf[r.start:r.end]) {
			return nil, false // it may yet be a BOM
		}
		r.sniffed = true
		if bytes.HasPrefix(r.buf[r.start:r.end], bom) {
			r.start += len(bom)
		}
	}
	if r.skipLF && r.start < r.end {
		r.skipLF = false
		if r.buf[r.start] == '\n' {
			r.start++
		}
	}
	cr := r.search('\r', &r.crAt, &r.crFrom)
	lf := r.search('\n', &r.lfAt, &r.lfFrom)
	end := lf
	if cr >= 0 && (lf < 0 || cr < lf) {
		end = cr
	}
	if end < 0 {
		return nil, false
	}
	line := r.buf[r.start:end]
	r.skipLF = end == cr
	r.start = end + 1
	return line, true
}

var bom = []byte("\uFEFF")

// search returns the index of the first c in buf[start:end], or -1, resuming the last search.
func (r *Reader) search(c byte, at, from *int) int {
	if *at >= r.start {
		return *at
	}
	*from = max(*from, r.start)
	if i := bytes.IndexByte(r.buf[*from:r.end], c); i >= 0 {
		*at = *from + i
		return *at
	}
	*at, *from = -1, r.end
	return -1
}

// fill reads more of the stream, or sets r.err when there is no more to parse: the unfinished
// last line and event are dropped at the end of the stream, and a partial line that already
// makes its block too large ends the reader, whether or not more comes.
func (r *Reader) fill() {
	pending := r.end - r.start
	if partial := r.lineLen + pending; partial > 0 && r.block+partial+min(r.block, 1) > r.max {
		r.tooLarge()
		return
	}
	if r.srcErr != nil {
		r.err = r.srcErr
		if r.err != io.EOF {
			r.err = fmt.Errorf("sse: reading the event stream: %w", r.err)
		}
		r.releaseBuffer()
		return
	}
	r.streamDataLine()
	r.makeRoom()
	n, err := r.src.Read(r.buf[r.end:])
	r.end += n
	switch {
	case err != nil:
		r.srcErr = err
	case n == 0:
		if r.emptyReads++; r.emptyReads >= maxEmptyReads {
			r.srcErr = io.ErrNoProgress
		}
	default:
		r.emptyReads = 0
	}
}

// streamDataLine moves the part of a long data line that is in the full buffer to the event's
// data, so that the buffer need not grow to hold the line.
func (r *Reader) streamDataLine() {
	partial := r.buf[r.start:r.end]
	if r.end < len(r.buf) || len(partial) <= len(r.buf)/2 || len(r.buf) < keptBufferSize {
		return
	}
	if !r.dataLine {
		// Six bytes tell whether the space after "data:" is there to drop.
		if len(partial) < len("data: ") || string(partial[:len("data:")]) != "data:" {
			return
		}
		r.dataLine, r.lineLen = true, len("data:")
		partial = partial[len("data:"):]
		if partial[0] == ' ' {
			partial, r.lineLen = partial[1:], r.lineLen+1
		}
	}
	r.data = appendDoubling(r.data, partial)
	r.lineLen += len(partial)
	r.start = r.end // no line break in what went: the searches stay where they ended
}

// appendDoubling is append that doubles the capacity when it must grow: append grows large
// slices by a quarter, which copies an event of megabytes, arriving in reads of kilobytes, several
// times over.
func appendDoubling(b, more []byte) []byte {
	if len(b)+len(more) > cap(b) {
		b = append(make([]byte, 0, max(2*cap(b), len(b)+len(more))), b...)
	}
	return append(b, more...)
}

// makeRoom leaves free space at the end of buf: the unparsed bytes move to its start, into a
// buffer twice as large when they fill more than half of it.
func (r *Reader) makeRoom() {
	pending := r.end - r.start
	switch {
	case r.buf == nil, pending == 0 && len(r.buf) > keptBufferSize:
		r.buf = buffers.Get().(*[initialBufferSize]byte)[:]
	case r.end < len(r.buf):
		return
	case pending > len(r.buf)/2:
		r.buf = append(make([]byte, 0, 2*len(r.buf)), r.buf[r.start:r.end]...)[:2*len(r.buf)]
	default:
		copy(r.buf, r.buf[r.start:r.end])
	}
	shift := r.start
	r.start, r.end = 0, pending
	for _, i := range []*int{&r.crAt, &r.lfAt} {
		if *i >= 0 {
			*i -= shift
		}
	}
	r.crFrom, r.lfFrom = max(r.crFrom-shift, 0), max(r.lfFrom-shift, 0)
}

func (r *Reader) field(line []byte) {
	if line[0] == ':' {
		return
	}
	name, value, found := bytes.Cut(line, []byte(":"))
	if found {
		value = bytes.TrimPrefix(value, []byte(" "))
	}
	switch string(name) {
	case "event":
		r.typ = string(value)
	case "data":
		r.data = append(append(slices.Grow(r.data, len(value)+1), value...), '\n')
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.idBuf = string(value)
		}
	case "retry":
		if d, ok := parseRetry(value); ok {
			r.retry, r.hasRetry = d, true
		}
	}
}

// parseRetry saturates instead of rejecting huge values: the spec accepts any run of digits.
func parseRetry(v []byte) (time.Duration, bool) {
	if len(v) == 0 {
		return 0, false
	}
	const limit = math.MaxInt64 / int64(time.Millisecond)
	var ms int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		if ms <= limit {
			ms = ms*10 + int64(c-'0')
		}
	}
	if ms > limit {
		return math.MaxInt64, true
	}
	return time.Duration(ms) * time.Millisecond, true
}

func (r *Reader) dispatch() (Event, bool) {
	r.lastID = r.idBuf
	typ, data := r.typ, r.data
	r.typ = ""
	// len 1 is a single empty data: line, MCP's priming event: the spec dispatches it with empty
	// data, but there is nothing in it for a caller to decode.
	if len(data) <= 1 {
		r.data = r.data[:0]
		return Event{}, false
	}
	r.data = nil // the event's now
	return Event{Type: typ, Data: data[:len(data)-1], ID: r.lastID}, true
}

// LastEventID returns the last event id buffer (set by any id: field, even on events with no data;
// an id: field with an empty value resets it to ""). It changes only when an event is dispatched,
// so an id: in an event cut off by the end of the stream does not count: resuming from it would
// skip that event.
func (r *Reader) LastEventID() string { return r.lastID }

// Resume starts the reader from the state a broken stream left: the last event id and the
// reconnection time it had set, as an EventSource keeps them across reconnections. Call it before
// the first Next.
func (r *Reader) Resume(lastEventID string, retry time.Duration, hasRetry bool) {
	r.idBuf, r.lastID = lastEventID, lastEventID
	r.retry, r.hasRetry = retry, hasRetry
}

// Retry returns the reconnection time from the last valid retry: field, and whether one was seen.
// A value too large for a time.Duration gives the largest one.
func (r *Reader) Retry() (time.Duration, bool) { return r.retry, r.hasRetry }
