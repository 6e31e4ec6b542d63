// Package redact hides the secrets a URL may carry before it is named in an error or a log.
package redact

import (
	"net/url"
	"strings"
)

// Mask stands in for every secret a redaction removes.
const Mask = "xxxxx"

// URL returns s with its userinfo (user name and password: a token often goes in either), the
// values of its query and its fragment replaced by Mask. The scheme, host, path and query keys
// stay, for the reader to tell which endpoint it was.
//
// A string that is no URL with a host (a mistyped endpoint: "htps:alice:pass@host") is
// redacted conservatively: everything up to the last "@" is taken for userinfo (after the
// scheme's "//", if it has one), and the query and fragment begin at the first '?' and '#'.
func URL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" || u.Host == "" {
		// An opaque URL keeps everything after the scheme as it is, userinfo included; one
		// without a host may have it in its path.
		return unparsed(s)
	}
	if u.User != nil {
		u.User = url.User(Mask)
	}
	if u.RawQuery != "" {
		u.RawQuery = query(u.RawQuery)
	}
	if u.Fragment != "" || u.RawFragment != "" {
		u.Fragment, u.RawFragment = Mask, ""
	}
	return u.String()
}

// unparsed redacts a string that is no URL with a host, trusting none of its structure.
func unparsed(s string) string {
	head, tail := s, ""
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		head, tail = s[:i], s[i:]
	}
	// A password may hold '/', '?' or '#' when nobody escaped it: the last '@' ends what may be
	// userinfo, even if that hides the host too. It begins after a "//" that comes before the
	// first '@', or else at the start.
	start := 0
	if i := strings.Index(head, "//"); i >= 0 && (!strings.Contains(head, "@") || i < strings.IndexByte(head, '@')) {
		start = i + len("//")
	}
	switch {
	case strings.Contains(head, "@"):
		at := strings.LastIndexByte(head, '@')
		head = head[:start] + Mask + head[at:]
	case strings.Contains(tail, "@"):
		head = head[:start] + Mask
	}
	tail, _, hasFragment := strings.Cut(tail, "#")
	if q, ok := strings.CutPrefix(tail, "?"); ok {
		tail = "?" + query(q)
	}
	if hasFragment {
		tail += "#" + Mask
	}
	return head + tail
}

// query masks the value of each key=value pair of a raw query, and each part without '=',
// which may be a bare token. Keys stay, in their order, when they look like names.
func query(raw string) string {
	parts := strings.Split(raw, "&")
	for i, p := range parts {
		k, _, ok := strings.Cut(p, "=")
		switch {
		case ok && isName(k):
			parts[i] = k + "=" + Mask
		case p != "":
			parts[i] = Mask
		}
	}
	return strings.Join(parts, "&")
}

// isName reports whether a query key looks like a parameter's name rather than text that lost
// its way there (a misplaced "user:password@").
func isName(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	for _, c := range []byte(k) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '_', c == '-', c == '.', c == '[', c == ']', c == '%':
		default:
			return false
		}
	}
	return true
}
