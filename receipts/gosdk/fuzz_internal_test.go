package receiptsgosdk

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
	"testing/iotest"
)

// FuzzLineReader: whatever the stream and the limit, the lines, heads and pieces the reader
// returns are the stream's bytes in order, none lost or added; no whole line is longer than the
// limit; and reading what it returns never panics.
func FuzzLineReader(f *testing.F) {
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\"}\n{\"id\":1,\"result\":{}}\r\n"), 8, false)
	f.Add([]byte("no newline at the end"), 4, true)
	f.Add([]byte("\n\n\r\n"), 1, false)
	f.Add([]byte(`{"id":"\u0031","method":"x","params":{"_meta":{}}}`+"\n"+`{"result":1,"id":1.0}`), 16, true)
	f.Fuzz(func(t *testing.T, stream []byte, max int, oneByteReads bool) {
		if max <= 0 || max > 1<<16 {
			max = 1 + max&0xfff
			if max <= 0 {
				max = 1
			}
		}
		var src io.Reader = bytes.NewReader(stream)
		if oneByteReads {
			src = iotest.OneByteReader(src)
		}
		l := newLineReader(src, max)
		var got []byte
		for {
			line, whole, err := l.next()
			if whole && len(line) > max {
				t.Fatalf("a whole line of %d bytes past the limit %d", len(line), max)
			}
			if whole && err == nil && len(line) > 0 {
				if i := bytes.IndexByte(line, '\n'); i >= 0 && i != len(line)-1 {
					t.Fatalf("a line with a newline inside: %q", line)
				}
			}
			got = append(got, line...)
			if len(line) > 0 {
				readLine(line, whole)
			}
			if len(line) > 0 && !whole {
				l.rest(func(piece []byte) error {
					got = append(got, piece...)
					return nil
				})
			}
			if err != nil {
				break
			}
		}
		if !bytes.Equal(got, stream) {
			t.Fatalf("read back\n%q\nfrom\n%q", got, stream)
		}
	})
}

// readLine reads a line as the adapter does, checking what must hold of any input.
func readLine(line []byte, whole bool) {
	if !whole {
		h := scanHead(line)
		_ = h.request()
		return
	}
	m := parseMessage(line)
	if m.kind == kindRequest || m.kind == kindResponse {
		canon, ok := canonicalID(m.id)
		if ok {
			// The canonical id of an id re-encoded as the server would must be the same.
			var v any
			if json.Unmarshal(m.id, &v) == nil {
				again, _ := json.Marshal(v)
				if c2, ok2 := canonicalID(again); ok2 && c2 != canon {
					if _, isString := v.(string); isString {
						panic("a string id re-encoded names another request: " + string(m.id))
					}
				}
			}
		}
	}
	_ = withoutEOL(line)
}
