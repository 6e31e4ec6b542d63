package sse_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/northstar-mcp/mcpclient/internal/sse"
)

type result struct {
	events   []sse.Event
	err      error
	lastID   string
	retry    time.Duration
	hasRetry bool
}

func readAll(r io.Reader, maxEventSize int) result {
	rd := sse.NewReader(r, maxEventSize)
	var res result
	for {
		ev, err := rd.Next()
		if err != nil {
			res.err = err
			break
		}
		res.events = append(res.events, ev)
	}
	res.lastID = rd.LastEventID()
	res.retry, res.hasRetry = rd.Retry()
	return res
}

// diff describes how got differs from want, or returns "". An error in got matches one it wraps
// in want.
func diff(want, got result) string {
	var b strings.Builder
	if len(want.events) != len(got.events) {
		fmt.Fprintf(&b, "%d events, want %d\n", len(got.events), len(want.events))
	}
	for i := range min(len(want.events), len(got.events)) {
		w, g := want.events[i], got.events[i]
		if w.Type != g.Type || !bytes.Equal(w.Data, g.Data) || w.ID != g.ID {
			fmt.Fprintf(&b, "event %d = {%q %q %q}, want {%q %q %q}\n", i, g.Type, g.Data, g.ID, w.Type, w.Data, w.ID)
		}
	}
	if !sameErr(want.err, got.err) {
		fmt.Fprintf(&b, "err = %v, want %v\n", got.err, want.err)
	}
	if want.lastID != got.lastID {
		fmt.Fprintf(&b, "LastEventID = %q, want %q\n", got.lastID, want.lastID)
	}
	if want.retry != got.retry || want.hasRetry != got.hasRetry {
		fmt.Fprintf(&b, "Retry = %v, %v; want %v, %v\n", got.retry, got.hasRetry, want.retry, want.hasRetry)
	}
	return b.String()
}

func sameErr(a, b error) bool {
	for _, target := range []error{io.EOF, sse.ErrEventTooLarge} {
		if errors.Is(a, target) || errors.Is(b, target) {
			return errors.Is(a, target) && errors.Is(b, target)
		}
	}
	return errors.Is(b, a)
}

// variants cut the same input into reads differently; the result must not depend on it.
var variants = []struct {
	name string
	wrap func(io.Reader) io.Reader
}{
	{"whole", func(r io.Reader) io.Reader { return r }},
	{"OneByteReader", iotest.OneByteReader},
	{"HalfReader", iotest.HalfReader},
	// The last data comes together with io.EOF, which the unterminated-remainder logic must see.
	{"DataErrReader", iotest.DataErrReader},
	{"OneByteDataErrReader", func(r io.Reader) io.Reader { return iotest.DataErrReader(iotest.OneByteReader(r)) }},
}

func msg(data string) sse.Event { return sse.Event{Data: []byte(data)} }

func TestReader(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		want     []sse.Event
		lastID   string
		retry    time.Duration
		hasRetry bool
	}{
		{name: "empty stream", in: ""},
		{name: "one event", in: "data: hello\n\n", want: []sse.Event{msg("hello")}},
		{name: "two events", in: "data: a\n\ndata: b\n\n", want: []sse.Event{msg("a"), msg("b")}},
		{name: "multi-line data", in: "data: a\ndata: b\ndata: c\n\n", want: []sse.Event{msg("a\nb\nc")}},
		{name: "comments only", in: ": hi\n\n:\n\n: keepalive\n\n"},
		{name: "comment between fields", in: "data: a\n: ignored\ndata: b\n\n", want: []sse.Event{msg("a\nb")}},
		{name: "colon in value", in: "data: {\"a\":1}\n\n", want: []sse.Event{msg(`{"a":1}`)}},
		{name: "no space after colon", in: "data:x\n\n", want: []sse.Event{msg("x")}},
		{name: "only one space removed", in: "data:  x\n\n", want: []sse.Event{msg(" x")}},
		{name: "tab is not removed", in: "data:\tx\n\n", want: []sse.Event{msg("\tx")}},
		{name: "data without colon appends an empty line", in: "data\ndata\n\n", want: []sse.Event{msg("\n")}},
		{name: "data without colon after data", in: "data: a\ndata\n\n", want: []sse.Event{msg("a\n")}},
		{name: "data without colon before data", in: "data\ndata: b\n\n", want: []sse.Event{msg("\nb")}},
		{name: "data: and data:  are both empty lines", in: "data:\ndata: \ndata:x\n\n", want: []sse.Event{msg("\n\nx")}},
		// The spec dispatches a single empty data line with data ""; Next skips it.
		{name: "single empty data line", in: "data:\n\ndata: \n\ndata\n\n"},
		{name: "field names are case-sensitive", in: "Data: a\nDATA: b\n\n"},
		{name: "space before colon is part of the name", in: "data : a\n\n"},
		{name: "unknown fields are ignored", in: "foo: bar\nfoo\ndata: a\n\n", want: []sse.Event{msg("a")}},
		{name: "blank line without fields dispatches nothing", in: "\n\n\n\ndata: a\n\n\n\n", want: []sse.Event{msg("a")}},

		{name: "event type", in: "event: ping\ndata: a\n\n", want: []sse.Event{{Type: "ping", Data: []byte("a")}}},
		{name: "event type resets between events", in: "event: ping\ndata: a\n\ndata: b\n\n",
			want: []sse.Event{{Type: "ping", Data: []byte("a")}, msg("b")}},
		{name: "event type resets after an event without data", in: "event: ping\n\ndata: b\n\n", want: []sse.Event{msg("b")}},
		{name: "last event field wins", in: "event: a\nevent: b\ndata: x\n\n", want: []sse.Event{{Type: "b", Data: []byte("x")}}},
		{name: "event without colon is the empty type", in: "event: a\nevent\ndata: x\n\n", want: []sse.Event{msg("x")}},
		{name: "explicit message type is kept", in: "event: message\ndata: x\n\n", want: []sse.Event{{Type: "message", Data: []byte("x")}}},

		{name: "id", in: "id: 7\ndata: a\n\n", want: []sse.Event{{Data: []byte("a"), ID: "7"}}, lastID: "7"},
		{name: "id persists", in: "id: 7\ndata: a\n\ndata: b\n\n",
			want: []sse.Event{{Data: []byte("a"), ID: "7"}, {Data: []byte("b"), ID: "7"}}, lastID: "7"},
		{name: "id applies to the whole block wherever it is", in: "data: a\nid: 7\n\n", want: []sse.Event{{Data: []byte("a"), ID: "7"}}, lastID: "7"},
		{name: "id with empty value resets", in: "id: 7\ndata: a\n\nid:\ndata: b\n\n",
			want: []sse.Event{{Data: []byte("a"), ID: "7"}, msg("b")}},
		{name: "id without colon resets", in: "id: 7\n\nid\n\n"},
		{name: "id with one space resets", in: "id: 7\n\nid: \n\n"},
		{name: "id with NUL is ignored", in: "id: 1\n\nid: a\x00b\ndata: x\n\n", want: []sse.Event{{Data: []byte("x"), ID: "1"}}, lastID: "1"},
		{name: "id with only NUL is ignored", in: "id: 1\n\nid:\x00\n\n", lastID: "1"},
		{name: "id keeps spaces after the first", in: "id:  7 \ndata: a\n\n", want: []sse.Event{{Data: []byte("a"), ID: " 7 "}}, lastID: " 7 "},
		{name: "priming event with empty data", in: "id: 42\ndata: \n\n", lastID: "42"},
		{name: "priming event without data", in: "id: 42\n\n", lastID: "42"},
		{name: "priming then message", in: "id: 1\ndata: \n\nid: 2\nevent: message\ndata: {}\n\n",
			want: []sse.Event{{Type: "message", Data: []byte("{}"), ID: "2"}}, lastID: "2"},

		{name: "retry", in: "retry: 1000\n\n", retry: time.Second, hasRetry: true},
		{name: "retry without space", in: "retry:1000\n\n", retry: time.Second, hasRetry: true},
		{name: "retry leading zeros", in: "retry: 007\n\n", retry: 7 * time.Millisecond, hasRetry: true},
		{name: "retry zero", in: "retry: 0\n\n", hasRetry: true},
		{name: "retry letters", in: "retry: abc\n\n"},
		{name: "retry decimal", in: "retry: 10.5\n\n"},
		{name: "retry negative", in: "retry: -1\n\n"},
		{name: "retry plus sign", in: "retry: +5\n\n"},
		{name: "retry with a second space", in: "retry:  5\n\n"},
		{name: "retry with trailing space", in: "retry: 5 \n\n"},
		{name: "retry empty", in: "retry:\n\nretry\n\n"},
		{name: "invalid retry keeps the previous one", in: "retry: 1000\nretry: x\n\n", retry: time.Second, hasRetry: true},
		{name: "later retry wins", in: "retry: 1000\n\nretry: 5\n\n", retry: 5 * time.Millisecond, hasRetry: true},
		{name: "retry too large saturates", in: "retry: 99999999999999999999999\n\n", retry: math.MaxInt64, hasRetry: true},
		{name: "retry on an event with data", in: "retry: 5\ndata: a\n\n", want: []sse.Event{msg("a")}, retry: 5 * time.Millisecond, hasRetry: true},

		{name: "BOM", in: "\uFEFFdata: a\n\n", want: []sse.Event{msg("a")}},
		{name: "only one BOM is stripped", in: "\uFEFF\uFEFFdata: a\n\ndata: b\n\n", want: []sse.Event{msg("b")}},
		{name: "BOM later is data", in: "data: a\n\n\uFEFFdata: b\n\ndata: \uFEFF\n\n", want: []sse.Event{msg("a"), msg("\uFEFF")}},
		{name: "partial BOM is kept", in: "\xEF\xBBdata: a\n\ndata: b\n\n", want: []sse.Event{msg("b")}},
		{name: "partial BOM alone", in: "\xEF"},
		{name: "BOM alone", in: "\uFEFF"},
		{name: "BOM then blank line", in: "\uFEFF\ndata: a\n\n", want: []sse.Event{msg("a")}},

		{name: "CRLF", in: "data: a\r\ndata: b\r\n\r\n", want: []sse.Event{msg("a\nb")}},
		{name: "CR", in: "data: a\rdata: b\r\r", want: []sse.Event{msg("a\nb")}},
		{name: "CR then CRLF", in: "data: a\r\r\ndata: b\n\n", want: []sse.Event{msg("a"), msg("b")}},
		{name: "LF then CRLF", in: "data: a\n\r\ndata: b\n\n", want: []sse.Event{msg("a"), msg("b")}},
		{name: "CRLF then LF", in: "data: a\r\n\ndata: b\n\n", want: []sse.Event{msg("a"), msg("b")}},
		// r3labs does not split at the next two: its blank-line patterns miss LF CR and CRLF CR.
		{name: "CRLF then CR", in: "data: a\r\n\rdata: b\n\n", want: []sse.Event{msg("a"), msg("b")}},
		{name: "LF then CR", in: "data: a\n\rdata: b\n\n", want: []sse.Event{msg("a"), msg("b")}},
		{name: "LF then CR at the end", in: "data: a\n\r", want: []sse.Event{msg("a")}},
		{name: "CRLF then CR at the end", in: "data: a\r\n\r", want: []sse.Event{msg("a")}},
		{name: "CR ends the last blank line", in: "data: a\r\r", want: []sse.Event{msg("a")}},
		{name: "mixed line breaks", in: "data: a\rdata: b\ndata: c\r\n\rid: 1\r\n\n:x\n\r\ndata: d\r\r",
			want: []sse.Event{msg("a\nb\nc"), {Data: []byte("d"), ID: "1"}}, lastID: "1"},
		{name: "CR inside what looks like a value ends the line", in: "data: a\rb\n\n", want: []sse.Event{msg("a")}},

		{name: "ends exactly at a blank line", in: "data: a\n\n", want: []sse.Event{msg("a")}},
		{name: "ends mid-line", in: "data: a\n\ndata: b", want: []sse.Event{msg("a")}},
		{name: "ends after a line but before the blank line", in: "data: a\n\ndata: b\n", want: []sse.Event{msg("a")}},
		{name: "ends with extra blank lines", in: "data: a\n\n\n\n\n", want: []sse.Event{msg("a")}},
		{name: "only an unterminated event", in: "data: a"},
		{name: "unterminated CRLF event", in: "data: a\r\n"},
		{name: "id of an unterminated event does not take effect", in: "id: 1\n\nid: 2\ndata: x\n", lastID: "1"},
		{name: "retry of a complete line in an unterminated event takes effect", in: "data: x\nretry: 5\n", retry: 5 * time.Millisecond, hasRetry: true},
		{name: "retry cut off by the end of the stream does not", in: "retry: 5"},
	}
	for _, tt := range tests {
		want := result{events: tt.want, err: io.EOF, lastID: tt.lastID, retry: tt.retry, hasRetry: tt.hasRetry}
		t.Run(tt.name, func(t *testing.T) {
			// Also checks the fuzzer's oracle against the table.
			if d := diff(want, specParse([]byte(tt.in))); d != "" {
				t.Errorf("specParse(%q):\n%s", tt.in, d)
			}
			for _, v := range variants {
				if d := diff(want, readAll(v.wrap(strings.NewReader(tt.in)), 0)); d != "" {
					t.Errorf("%s(%q):\n%s", v.name, tt.in, d)
				}
			}
		})
	}
}

func TestReaderEventTooLarge(t *testing.T) {
	const limit = 32
	fits := "data: " + strings.Repeat("x", limit-len("data: "))
	tests := []struct {
		name     string
		in       string
		want     []sse.Event
		limit    int
		complete bool // no event is too large
	}{
		{name: "block of exactly the limit", in: fits + "\n\n", want: []sse.Event{msg(fits[6:])}, limit: limit, complete: true},
		{name: "one byte over", in: fits + "x\n\n", limit: limit},
		{name: "line breaks count as one byte", in: "data: a\r\n" + fits[:limit-len("data: a\n")] + "\r\n\r\n",
			want: []sse.Event{msg("a\n" + fits[6:limit-len("data: a\n")])}, limit: limit, complete: true},
		{name: "the whole block counts, not the data", in: ": " + strings.Repeat("c", limit) + "\ndata: a\n\n", limit: limit},
		{name: "events before the large one are returned", in: "data: a\n\n" + fits + "x\n\ndata: b\n\n", want: []sse.Event{msg("a")}, limit: limit},
		{name: "unterminated oversized event", in: fits + "xyz", limit: limit},
		// Under OneByteReader this takes minutes if r3labs gets to search the block after every byte.
		{name: "default limit", in: "data: " + strings.Repeat("x", 1<<20-6) + "\n\n", want: []sse.Event{msg(strings.Repeat("x", 1<<20-6))}, complete: true},
		{name: "default limit exceeded", in: "data: " + strings.Repeat("x", 1<<20-5) + "\n\n"},
		{name: "negative limit means the default", in: "data: " + strings.Repeat("x", 1<<20-5) + "\n\n", limit: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErr := sse.ErrEventTooLarge
			if tt.complete {
				wantErr = io.EOF
			}
			for _, v := range variants {
				got := readAll(v.wrap(strings.NewReader(tt.in)), tt.limit)
				if d := diff(result{events: tt.want, err: wantErr}, got); d != "" {
					t.Errorf("%s:\n%s", v.name, d)
				}
			}
		})
	}
}

func TestReaderErrorsAreSticky(t *testing.T) {
	rd := sse.NewReader(strings.NewReader("data: "+strings.Repeat("x", 100)+"\n\ndata: b\n\n"), 16)
	for range 3 {
		if _, err := rd.Next(); !errors.Is(err, sse.ErrEventTooLarge) {
			t.Fatalf("Next() error = %v, want ErrEventTooLarge", err)
		}
	}
	rd = sse.NewReader(strings.NewReader("data: a\n\n"), 0)
	if _, err := rd.Next(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := rd.Next(); err != io.EOF {
			t.Fatalf("Next() error = %v, want io.EOF itself", err)
		}
	}
}

// script returns its steps one Read each, then io.EOF.
type script []struct {
	data string
	err  error
}

func (s *script) Read(p []byte) (int, error) {
	if len(*s) == 0 {
		return 0, io.EOF
	}
	step := &(*s)[0]
	n := copy(p, step.data)
	step.data = step.data[n:]
	if step.data != "" {
		return n, nil
	}
	err := step.err
	*s = (*s)[1:]
	return n, err
}

func TestReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		r       func() io.Reader
		want    []sse.Event
		retry   time.Duration
		wantErr error
	}{
		{name: "error after data", r: func() io.Reader {
			return &script{{data: "data: a\n\ndata: b"}, {err: boom}}
		}, want: []sse.Event{msg("a")}, wantErr: boom},
		{name: "error together with data", r: func() io.Reader {
			return &script{{data: "data: a\n\ndata: b\n", err: boom}}
		}, want: []sse.Event{msg("a")}, wantErr: boom},
		{name: "error right after a complete event", r: func() io.Reader {
			return &script{{data: "data: a\n\n", err: boom}}
		}, want: []sse.Event{msg("a")}, wantErr: boom},
		{name: "error at once", r: func() io.Reader { return iotest.ErrReader(boom) }, wantErr: boom},
		{name: "error while looking for the BOM", r: func() io.Reader {
			return &script{{data: "\xEF\xBB", err: boom}}
		}, wantErr: boom},
		// r3labs reports context.Canceled as io.EOF, which would look like a clean end.
		{name: "context canceled is not EOF", r: func() io.Reader {
			return &script{{data: "data: a\n\ndata: b"}, {err: context.Canceled}}
		}, want: []sse.Event{msg("a")}, wantErr: context.Canceled},
		{name: "error after all events", r: func() io.Reader {
			return &script{{data: "data: a\n\n"}, {data: "data: b\n\n"}, {err: iotest.ErrTimeout}}
		}, want: []sse.Event{msg("a"), msg("b")}, wantErr: iotest.ErrTimeout},
		{name: "complete retry line before the error counts", r: func() io.Reader {
			return &script{{data: "retry: 5\ndata: x"}, {err: boom}}
		}, retry: 5 * time.Millisecond, wantErr: boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Not the DataErrReader variants: iotest.DataErrReader drops data its source returns
			// together with an error other than io.EOF.
			for _, v := range variants[:3] {
				got := readAll(v.wrap(tt.r()), 0)
				want := result{events: tt.want, err: tt.wantErr, retry: tt.retry, hasRetry: tt.retry != 0}
				if d := diff(want, got); d != "" {
					t.Errorf("%s:\n%s", v.name, d)
				}
				if got.err == io.EOF || errors.Is(got.err, io.EOF) {
					t.Errorf("%s: err = %v, want a read error", v.name, got.err)
				}
			}
		})
	}
}

// zeroReader is not in the table because iotest.DataErrReader would spin on it.
type zeroReader struct{}

func TestReaderNoProgress(t *testing.T) {
	if got := readAll(zeroReader{}, 0); !errors.Is(got.err, io.ErrNoProgress) {
		t.Fatalf("err = %v, want io.ErrNoProgress", got.err)
	}
}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestReaderDataIsCopied(t *testing.T) {
	// Events bigger than the scanner's initial buffer, so that it grows and reuses memory.
	var in strings.Builder
	var want []sse.Event
	for i := range 50 {
		data := strings.Repeat(string(rune('a'+i%26)), 1000+i)
		fmt.Fprintf(&in, "data: %s\n\n", data)
		want = append(want, msg(data))
	}
	for _, v := range variants {
		got := readAll(v.wrap(strings.NewReader(in.String())), 0)
		if d := diff(result{events: want, err: io.EOF}, got); d != "" {
			t.Errorf("%s:\n%s", v.name, d)
		}
	}
}

func TestResumeCarriesTheStreamState(t *testing.T) {
	r := sse.NewReader(strings.NewReader("data: a\n\nid:\ndata: b\n\n"), 0)
	r.Resume("s1/4", 250*time.Millisecond, true)
	if r.LastEventID() != "s1/4" {
		t.Fatalf("LastEventID %q before any event", r.LastEventID())
	}
	ev, err := r.Next()
	if err != nil || ev.ID != "s1/4" {
		t.Fatalf("first event %+v %v: want the resumed id", ev, err)
	}
	if d, ok := r.Retry(); !ok || d != 250*time.Millisecond {
		t.Errorf("retry %v %v", d, ok)
	}
	ev, err = r.Next()
	if err != nil || ev.ID != "" || r.LastEventID() != "" {
		t.Fatalf("an empty id: field must still reset the id: %+v %v", ev, err)
	}
}
