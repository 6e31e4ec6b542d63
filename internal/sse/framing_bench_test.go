package sse

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

// chunked hands out its input at most n bytes per Read, as a network body does.
type chunked struct {
	data []byte
	n    int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), c.n)], c.data)
	c.data = c.data[k:]
	return k, nil
}

// BenchmarkFraming reads a stream of one event, a JSON-RPC answer of each size, arriving in 16 KiB reads,
// with this package's Reader and with the r3labs EventStreamReader it replaced.
func BenchmarkFraming(b *testing.B) {
	type reader interface{ Next() (Event, error) }
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20, 16 << 20} {
		stream := []byte("id: 1\nevent: message\ndata: " + `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` +
			string(bytes.Repeat([]byte("x"), size)) + `"}]}}` + "\n\n")
		for _, impl := range []struct {
			name string
			open func(io.Reader) reader
		}{
			{"linear", func(r io.Reader) reader { return NewReader(r, 64<<20) }},
			{"r3labs", func(r io.Reader) reader { return newR3labsReader(r, 64<<20) }},
		} {
			b.Run(fmt.Sprintf("size=%dKiB/reader=%s", size>>10, impl.name), func(b *testing.B) {
				b.SetBytes(int64(len(stream)))
				b.ReportAllocs()
				for b.Loop() {
					// To the end of the stream, as a response stream is read.
					r := impl.open(&chunked{stream, 16 << 10})
					ev, err := r.Next()
					if err != nil || len(ev.Data) < size {
						b.Fatalf("%d bytes, %v", len(ev.Data), err)
					}
					if _, err := r.Next(); err != io.EOF {
						b.Fatalf("after the event: %v", err)
					}
				}
			})
		}
	}
}
