package transport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// chunkedReader hands out its data in reads of the sizes sizes cycles through, never more than
// the caller's buffer, and records the size of every buffer it was given.
type chunkedReader struct {
	data    []byte
	sizes   []int
	i       int
	buffers []int
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	c.buffers = append(c.buffers, len(p))
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(c.sizes[c.i%len(c.sizes)], len(p), len(c.data))
	c.i++
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// readChunks returns every chunk a lineReader makes of r's data, and the error it ends with.
func readChunks(t *testing.T, r io.Reader) ([]string, error) {
	t.Helper()
	l := &lineReader{src: r}
	defer l.release()
	var chunks []string
	for {
		chunk, err := l.next()
		if err != nil {
			return chunks, err
		}
		if len(chunk) == 0 {
			t.Fatal("an empty chunk")
		}
		chunks = append(chunks, string(chunk))
	}
}

// A lineReader returns each line whole, with its newline, however the reads cut it, as long as
// it fits the large buffer; a longer line comes in pieces of that size; the bytes after the last
// newline come last.
func TestLineReaderCutsLines(t *testing.T) {
	lengths := []int{0, 1, idleReadSize - 2, idleReadSize - 1, idleReadSize, mediumReadSize - 1, mediumReadSize,
		mediumReadSize + 1, largeReadSize - 1, largeReadSize, largeReadSize + 1, 3*largeReadSize + 7, 100}
	var input strings.Builder
	var lines []string
	for i, n := range lengths {
		line := strings.Repeat(string(rune('a'+i)), n) + "\n"
		if i == 4 {
			line = strings.Repeat("x", n-1) + "\r\n"
		}
		lines = append(lines, line)
		input.WriteString(line)
	}
	input.WriteString("tail without newline")
	for _, sizes := range [][]int{{1 << 30}, {1}, {idleReadSize}, {7, 300, 5000}, {mediumReadSize}, {largeReadSize + 3}} {
		t.Run(fmt.Sprint(sizes), func(t *testing.T) {
			chunks, err := readChunks(t, &chunkedReader{data: []byte(input.String()), sizes: sizes})
			if !errors.Is(err, io.EOF) {
				t.Fatalf("ended with %v, want EOF", err)
			}
			if got := strings.Join(chunks, ""); got != input.String() {
				t.Fatalf("the chunks make %d bytes, want the %d read", len(got), input.Len())
			}
			k := 0
			for _, line := range lines {
				if len(line) > largeReadSize {
					for rest := line; rest != ""; k++ {
						n := min(len(rest), largeReadSize)
						if chunks[k] != rest[:n] {
							t.Fatalf("a piece of a long line: %d bytes, want %d", len(chunks[k]), n)
						}
						rest = rest[n:]
					}
					continue
				}
				if chunks[k] != line {
					t.Fatalf("chunk %d is %d bytes, want the line of %d", k, len(chunks[k]), len(line))
				}
				k++
			}
			if chunks[k] != "tail without newline" || k+1 != len(chunks) {
				t.Fatalf("the last chunks: %q", chunks[k:])
			}
		})
	}
}

func TestLineReaderRandomReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		var input bytes.Buffer
		var want []string
		for range rng.IntN(20) {
			line := strings.Repeat("y", rng.IntN(3*mediumReadSize)) + "\n"
			want = append(want, line)
			input.WriteString(line)
		}
		sizes := []int{1 + rng.IntN(10), 1 + rng.IntN(2000), 1 + rng.IntN(20000)}
		got, err := readChunks(t, &chunkedReader{data: input.Bytes(), sizes: sizes})
		if !errors.Is(err, io.EOF) || strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("reads of %v: %d chunks (%v), want the %d lines", sizes, len(got), err, len(want))
		}
	}
}

// Between lines the reader waits for its peer with its small buffer only.
func TestLineReaderWaitsWithTheSmallBuffer(t *testing.T) {
	long := strings.Repeat("z", 3*largeReadSize) + "\n"
	src := &chunkedReader{data: []byte("short\n" + long + "short\n" + strings.Repeat("m", 2*idleReadSize) + "\n"), sizes: []int{1 << 30}}
	l := &lineReader{src: src}
	for range 7 { // the long line comes in four pieces
		if _, err := l.next(); err != nil {
			t.Fatal(err)
		}
	}
	read := len(src.buffers)
	if _, err := l.next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last line: %v", err)
	}
	if got := src.buffers[read:]; len(got) != 1 || got[0] != idleReadSize {
		t.Errorf("the read after the last line was given buffers of %v bytes, want one of %d", got, idleReadSize)
	}
	if l.medium != nil || l.large != nil {
		t.Error("the reader holds a pooled buffer between lines")
	}
	l.release()
}
