package main

import (
	"fmt"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/northstar-mcp/mcpclient/internal/termsafe"
)

// Text from the server (error messages, HTTP bodies, a stdio server's stderr, results) must
// never be able to forge what mcpcall reports, so everything written to the terminal goes
// through termsafe, which keeps printable characters only and escapes the rest.

// terminal is mcpcall's stderr: its own report lines and a stdio server's stderr, each with
// controls escaped, written one at a time.
type terminal struct {
	mu sync.Mutex
	w  io.Writer
	// partial is the start of a character split between two writes of the server's stderr:
	// at most utf8.UTFMax-1 bytes.
	partial []byte
	// midLine reports that the server's stderr last wrote something other than a newline.
	midLine bool
	buf     []byte
	// traceEnded silences the -v trace once the final line is due: a stream still read while
	// the client closes must not write after it.
	traceEnded bool
}

func newTerminal(w io.Writer) *terminal { return &terminal{w: w} }

// Write passes on a stdio server's stderr (or the flag package's messages): newlines and tabs
// stay, so that its lines stay lines; every other control is escaped.
func (t *terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	data := append(t.partial, p...)
	complete := len(data)
	// A character cut at the end of p waits for its rest.
	for i := len(data) - 1; i >= 0 && i >= len(data)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				complete = i
			}
			break
		}
	}
	t.partial = append([]byte(nil), data[complete:]...)
	if complete == 0 {
		return len(p), nil
	}
	t.buf = termsafe.Append(t.buf[:0], data[:complete], true)
	t.midLine = data[complete-1] != '\n'
	if _, err := t.w.Write(t.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// printf writes one line of mcpcall's own, on a line of its own: a newline in it is escaped
// too, so that nothing it quotes can make it look like two.
func (t *terminal) printf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.printfLocked(format, args...)
}

func (t *terminal) printfLocked(format string, args ...any) {
	t.endServerLine()
	t.buf = termsafe.Append(t.buf[:0], []byte(fmt.Sprintf(format, args...)), false)
	t.buf = append(t.buf, '\n')
	t.w.Write(t.buf)
}

// trace writes one line of the -v trace, unless the trace has ended.
func (t *terminal) trace(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.traceEnded {
		t.printfLocked(format, args...)
	}
}

// endTrace ends the -v trace: nothing traced later is written.
func (t *terminal) endTrace() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.traceEnded = true
}

// close ends what the server's stderr left unfinished.
func (t *terminal) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.endServerLine()
}

// endServerLine writes the bytes of an unfinished character, escaped, and ends an unfinished
// line of the server's stderr.
func (t *terminal) endServerLine() {
	t.buf = termsafe.Append(t.buf[:0], t.partial, true)
	if len(t.partial) > 0 || t.midLine {
		t.buf = append(t.buf, '\n')
	}
	t.partial, t.midLine = nil, false
	if len(t.buf) > 0 {
		t.w.Write(t.buf)
	}
}
