// Package termsafe escapes text bound for a terminal so that whoever wrote it cannot act on the
// terminal.
//
// A terminal acts on more than the C0 controls: ESC starts sequences that retitle the window,
// move the cursor and erase lines, C1 controls (U+0080 to U+009F, or the bytes 0x80 to 0x9F in
// an 8-bit locale) do the same in one character, and bidirectional formatting characters reorder
// what is shown. Text from a server (error messages, HTTP bodies, a stdio server's stderr,
// results, an authorization URL) must never be able to forge what a program reports, so it is
// restricted to printable characters (unicode.IsPrint: letters, marks, numbers, punctuation,
// symbols and the ASCII space) with anything else escaped.
package termsafe

import (
	"fmt"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Append appends s to dst with every byte that is not part of a printable UTF-8 character
// escaped as Go would quote it (\r, \x1b, \u009b, \u202e), and newlines and tabs kept if
// keepLines is set.
func Append(dst, s []byte, keepLines bool) []byte {
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

// Line returns s escaped to show on one line: newlines and tabs are escaped too, so that
// nothing in s can make it look like two.
func Line(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return string(Append(make([]byte, 0, len(s)+16), []byte(s), false))
		}
	}
	return s // printable ASCII, the common case
}

// JSON escapes, inside the strings of compact JSON, every character a terminal could act on.
// encoding/json escapes only the C0 controls: DEL, the C1 controls, U+2028, U+2029 and the
// bidirectional formatting characters are valid in a JSON string as they are, and invalid UTF-8
// passes through json.Compact. They become \u escapes (invalid bytes U+FFFD, as encoding/json
// decodes them), which every JSON reader decodes to the same text. Outside its strings, compact
// JSON is printable ASCII, so the whole text can be scanned at once.
func JSON(compact []byte) []byte {
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
