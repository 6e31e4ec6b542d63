package sse_test

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient/internal/sse"
)

// specParse follows the spec's algorithm line by line over the whole stream, without any block
// framing, so that the Reader's framing can be checked against it. Like Next it leaves out
// events whose data is empty.
func specParse(in []byte) result {
	in = bytes.TrimPrefix(in, []byte("\uFEFF"))
	res := result{err: io.EOF}
	var typ, idBuf string
	var data []byte
	for {
		i := bytes.IndexAny(in, "\r\n")
		if i < 0 {
			break // the end of the stream discards an unfinished line
		}
		line := string(in[:i])
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			i++
		}
		in = in[i+1:]

		if line == "" {
			res.lastID = idBuf
			if len(data) > 1 { // more than a single empty data line
				res.events = append(res.events, sse.Event{Type: typ, Data: bytes.Clone(data[:len(data)-1]), ID: idBuf})
			}
			typ, data = "", nil
			continue
		}
		if line[0] == ':' {
			continue
		}
		name, value := line, ""
		if j := strings.IndexByte(line, ':'); j >= 0 {
			name, value = line[:j], strings.TrimPrefix(line[j+1:], " ")
		}
		switch name {
		case "event":
			typ = value
		case "data":
			data = append(data, value+"\n"...)
		case "id":
			if !strings.Contains(value, "\x00") {
				idBuf = value
			}
		case "retry":
			if value != "" && strings.Trim(value, "0123456789") == "" {
				ms, err := strconv.ParseInt(value, 10, 64)
				res.retry, res.hasRetry = time.Duration(ms)*time.Millisecond, true
				if err != nil || ms > math.MaxInt64/int64(time.Millisecond) {
					res.retry = math.MaxInt64
				}
			}
		}
	}
	return res
}

func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"id: 1\ndata: \n\nid: 2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
		"retry: 3000\nid: 0\ndata:\n\n: keepalive\n\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n",
		"\uFEFFevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":\"a\",\"result\":{}}\r\n\r\n",
		"data: a\r\n\rdata: b\n\rdata: c\r\rdata: d",
		"id: x\x00y\ndata:  x\ndata\nretry:  5\nretry: 10.5\nretry:-1\n\nid\nretry: 99999999999999999999\n",
		"data: " + strings.Repeat("x", 70) + "\n\ndata: b\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		want := specParse(in)
		for _, limit := range []int{0, 64} {
			maxSize := limit
			if limit == 0 {
				maxSize = 1 << 20
			}
			got := readAll(bytes.NewReader(in), limit)
			for _, v := range variants[1:] {
				if d := diff(got, readAll(v.wrap(bytes.NewReader(in)), limit)); d != "" {
					t.Fatalf("limit %d: %s differs from reading at once:\n%s", limit, v.name, d)
				}
			}
			for i, ev := range got.events {
				if len(ev.Data) == 0 || len(ev.Data) > maxSize {
					t.Errorf("event %d: %d bytes of data, want 1 to %d", i, len(ev.Data), maxSize)
				}
				if bytes.IndexByte(ev.Data, '\r') >= 0 || strings.ContainsAny(ev.Type+ev.ID, "\r\n") {
					t.Errorf("event %d = %q: a line break survived", i, ev)
				}
				if strings.IndexByte(ev.ID, 0) >= 0 {
					t.Errorf("event %d: ID %q contains NUL", i, ev.ID)
				}
			}
			switch {
			case got.err == io.EOF:
				if d := diff(want, got); d != "" {
					t.Fatalf("limit %d: differs from the spec:\n%s", limit, d)
				}
			case errors.Is(got.err, sse.ErrEventTooLarge):
				if len(in) <= maxSize {
					t.Fatalf("limit %d: %v on %d bytes of input", limit, got.err, len(in))
				}
				prefix := want.events[:min(len(got.events), len(want.events))]
				if d := diff(result{events: prefix}, result{events: got.events}); d != "" {
					t.Fatalf("limit %d: events before the error differ from the spec:\n%s", limit, d)
				}
			default:
				t.Fatalf("limit %d: unexpected error %v", limit, got.err)
			}
		}
	})
}
