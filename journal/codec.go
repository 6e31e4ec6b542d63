package journal

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/northstar-mcp/mcpclient"
)

// Values are written in a compact binary form: a request's bytes are most of its record, and JSON
// would write them in base64, a third larger, and spend the writer's time formatting and parsing
// times and field names. A binary value starts with its format's number, which no JSON value
// starts with; JSON values, which earlier versions wrote, are still read.
const binaryFormat byte = 1

// encoder appends values to b.
type encoder struct{ b []byte }

func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }

func (e *encoder) bytes(p []byte) {
	e.uvarint(uint64(len(p)))
	e.b = append(e.b, p...)
}

func (e *encoder) string(s string) {
	e.uvarint(uint64(len(s)))
	e.b = append(e.b, s...)
}

// flags writes up to eight booleans as the bits of one byte, the first the lowest.
func (e *encoder) flags(bits ...bool) {
	var f byte
	for i, set := range bits {
		if set {
			f |= 1 << i
		}
	}
	e.b = append(e.b, f)
}

// id writes id as its JSON text, the zero id as none.
func (e *encoder) id(id mcpclient.ID) {
	if id.IsZero() {
		e.uvarint(0)
		return
	}
	e.string(id.JSON())
}

// time writes t to the nanosecond with its zone's offset, which is what JSON kept of it.
func (e *encoder) time(t time.Time) {
	_, offset := t.Zone()
	e.varint(t.Unix())
	e.uvarint(uint64(t.Nanosecond()))
	e.varint(int64(offset))
}

// header writes h with its names in order, so that equal headers encode alike.
func (e *encoder) header(h http.Header) {
	e.uvarint(uint64(len(h)))
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		e.string(name)
		e.uvarint(uint64(len(h[name])))
		for _, v := range h[name] {
			e.string(v)
		}
	}
}

// errTruncated reports a binary value shorter than its fields say.
var errTruncated = errors.New("truncated value")

// decoder reads what an encoder wrote, from b; the first error sticks and every later read
// returns a zero value.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errTruncated)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errTruncated)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// length reads a length and checks that the value holds that many more bytes.
func (d *decoder) length() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail(errTruncated)
		return 0
	}
	return int(n)
}

// bytes returns a copy: the value it reads from lives in the file's memory map, which outlives no
// transaction.
func (d *decoder) bytes() []byte {
	n := d.length()
	if d.err != nil || n == 0 {
		return nil
	}
	p := slices.Clone(d.b[:n])
	d.b = d.b[n:]
	return p
}

func (d *decoder) string() string {
	n := d.length()
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) fixed(p []byte) {
	if len(d.b) < len(p) {
		d.fail(errTruncated)
		return
	}
	copy(p, d.b)
	d.b = d.b[len(p):]
}

func (d *decoder) flags(bits ...*bool) {
	if len(d.b) == 0 {
		d.fail(errTruncated)
		return
	}
	for i, b := range bits {
		*b = d.b[0]&(1<<i) != 0
	}
	d.b = d.b[1:]
}

func (d *decoder) id() mcpclient.ID {
	var id mcpclient.ID
	if text := d.bytes(); text != nil {
		if err := id.UnmarshalJSON(text); err != nil {
			d.fail(err)
		}
	}
	return id
}

// time reads a time as time.Parse would return its RFC 3339 text: in UTC at offset zero, in the
// local zone when it has the offset then, else in a zone of the offset alone.
func (d *decoder) time() time.Time {
	sec, nsec, offset := d.varint(), d.uvarint(), d.varint()
	if d.err != nil || nsec >= uint64(time.Second) {
		d.fail(errTruncated)
		return time.Time{}
	}
	t := time.Unix(sec, int64(nsec))
	if offset == 0 {
		return t.UTC()
	}
	if _, local := t.Zone(); int64(local) == offset {
		return t
	}
	return t.In(time.FixedZone("", int(offset)))
}

func (d *decoder) header() http.Header {
	n := d.length() // each name takes a byte at least
	if n == 0 {
		return nil
	}
	h := make(http.Header, n)
	for range n {
		name := d.string()
		values := make([]string, d.length())
		for i := range values {
			values[i] = d.string()
		}
		h[name] = values
	}
	return h
}

// end checks that the value was read to its last byte.
func (d *decoder) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = errors.New("trailing bytes")
	}
	if d.err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, d.err)
	}
	return nil
}

// appendFrozen appends rec's fields that never change to b.
func appendFrozen(b []byte, rec *mcpclient.JournalRecord) []byte {
	// Room for all of it at once: the frame is most of it, and growing past it copies it again.
	size := 96 + len(rec.Method) + len(rec.Frame) + len(rec.Version) + len(rec.Server) + len(rec.Reason)
	for name, values := range rec.Header {
		size += 4 + len(name)
		for _, v := range values {
			size += 2 + len(v)
		}
	}
	e := encoder{slices.Grow(b, size)}
	e.b = append(e.b, binaryFormat)
	e.id(rec.ID)
	e.string(rec.Method)
	e.bytes(rec.Frame)
	e.b = append(e.b, rec.Fingerprint[:]...)
	e.header(rec.Header)
	e.string(rec.Version)
	e.string(rec.Server)
	e.time(rec.Created)
	e.id(rec.Supersedes)
	e.string(rec.Reason)
	e.flags(rec.Idempotent, rec.Reissue)
	return e.b
}

// decodeFrozen reads what appendFrozen wrote, or the JSON of earlier versions, into rec.
func decodeFrozen(raw []byte, rec *mcpclient.JournalRecord) error {
	if len(raw) == 0 || raw[0] != binaryFormat {
		return decodeJSON(raw, rec)
	}
	d := decoder{b: raw[1:]}
	rec.ID = d.id()
	rec.Method = d.string()
	rec.Frame = d.bytes()
	d.fixed(rec.Fingerprint[:])
	rec.Header = d.header()
	rec.Version = d.string()
	rec.Server = d.string()
	rec.Created = d.time()
	rec.Supersedes = d.id()
	rec.Reason = d.string()
	d.flags(&rec.Idempotent, &rec.Reissue)
	return d.end()
}

// appendStanding appends st to b.
func appendStanding(b []byte, st *standing) []byte {
	e := encoder{append(b, binaryFormat)}
	e.varint(int64(st.State))
	e.flags(st.Reached, st.Open)
	e.varint(int64(st.Attempts))
	e.string(string(st.Receipts.Scope))
	e.string(st.Receipts.Epoch)
	e.time(st.Updated)
	e.id(st.SupersededBy)
	e.varint(st.SettledAt)
	return e.b
}

// decodeStanding reads what appendStanding wrote, or the JSON of earlier versions, into st.
func decodeStanding(raw []byte, st *standing) error {
	if len(raw) == 0 || raw[0] != binaryFormat {
		return decodeJSON(raw, st)
	}
	d := decoder{b: raw[1:]}
	st.State = mcpclient.State(d.varint())
	d.flags(&st.Reached, &st.Open)
	st.Attempts = int(d.varint())
	st.Receipts.Scope = mcpclient.ReceiptScope(d.string())
	st.Receipts.Epoch = d.string()
	st.Updated = d.time()
	st.SupersededBy = d.id()
	st.SettledAt = d.varint()
	return d.end()
}

func decodeJSON(raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return nil
}
