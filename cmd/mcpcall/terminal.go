package main

import (
	"fmt"
	"io"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// A terminal acts on more than the C0 controls: ESC starts sequences that retitle the window,
// move the cursor and erase lines, C1 controls (U+0080 to U+009F, or the bytes 0x80 to 0x9F in
// an 8-bit locale) do the same in one character, and bidirectional formatting characters reorder
// what is shown. Text from the server (error messages, HTTP bodies, a stdio server's stderr,
// results) must never be able to forge what mcpcall reports, so everything written to the
// terminal is restricted to printable characters (unicode.IsPrint: letters, marks, numbers,
// punctuation, symbols and the ASCII space) with anything else escaped.

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
	t.buf = appendEscaped(t.buf[:0], data[:complete], true)
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
	t.endServerLine()
	t.buf = appendEscaped(t.buf[:0], []byte(fmt.Sprintf(format, args...)), false)
	t.buf = append(t.buf, '\n')
	t.w.Write(t.buf)
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
	t.buf = appendEscaped(t.buf[:0], t.partial, true)
	if len(t.partial) > 0 || t.midLine {
		t.buf = append(t.buf, '\n')
	}
	t.partial, t.midLine = nil, false
	if len(t.buf) > 0 {
		t.w.Write(t.buf)
	}
}

// appendEscaped appends s to dst with every byte that is not part of a printable UTF-8
// character escaped as Go would quote it (\r, \x1b, \u009b, \u202e), and newlines and tabs kept
// if keepLines is set.
func appendEscaped(dst, s []byte, keepLines bool) []byte {
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		switch {
		case r == utf8.RuneError && size == 1:
			dst = fmt.Appendf(dst, `\x%02x`, s[0])
		case keepLines && (r == '\n' || r == '\t'):
			dst = append(dst, byte(r))
		case unicode.IsPrint(r):
			dst = append(dst, s[:size]...)
		case r == '\n':
			dst = append(dst, `\n`...)
		case r == '\r':
			dst = append(dst, `\r`...)
		case r == '\t':
			dst = append(dst, `\t`...)
		case r < utf8.RuneSelf:
			dst = fmt.Appendf(dst, `\x%02x`, r)
		case r <= 0xffff:
			dst = fmt.Appendf(dst, `\u%04x`, r)
		default:
			dst = fmt.Appendf(dst, `\U%08x`, r)
		}
		s = s[size:]
	}
	return dst
}

// terminalJSON escapes, inside the strings of compact JSON, every character a terminal could
// act on. encoding/json escapes only the C0 controls: DEL, the C1 controls, U+2028, U+2029 and
// the bidirectional formatting characters are valid in a JSON string as they are, and invalid
// UTF-8 passes through json.Compact. They become \u escapes (invalid bytes U+FFFD, as
// encoding/json decodes them), which every JSON reader decodes to the same text. Outside its
// strings, compact JSON is printable ASCII, so the whole text can be scanned at once.
func terminalJSON(compact []byte) []byte {
	i := 0
	for i < len(compact) && compact[i] < 0x7f {
		i++
	}
	if i == len(compact) {
		return compact
	}
	out := append(make([]byte, 0, len(compact)+64), compact[:i]...)
	for s := compact[i:]; len(s) > 0; {
		r, size := utf8.DecodeRune(s)
		switch {
		case r == utf8.RuneError && size == 1:
			out = append(out, `\ufffd`...)
		case r < 0x7f || unicode.IsPrint(r):
			out = append(out, s[:size]...)
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, hi, lo)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		s = s[size:]
	}
	return out
}
