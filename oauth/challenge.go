package oauth

import (
	"net/http"
	"strings"
)

// A challenge is one challenge of a WWW-Authenticate header (RFC 9110 §11.6.1): its scheme,
// lowercased, and its auth-params, with lowercased names.
type challenge struct {
	scheme string
	params map[string]string
}

// challenges parses every WWW-Authenticate field of h. Malformed parts are skipped: a server's
// header is a hint, and a bad one must not hide the good challenges beside it.
func challenges(h http.Header) []challenge {
	var out []challenge
	for _, v := range h.Values("WWW-Authenticate") {
		out = append(out, parseChallenges(v)...)
	}
	return out
}

// parseChallenges parses one WWW-Authenticate field value: a comma-separated list of challenges,
// each a scheme followed by auth-params (name=token or name="quoted string"), or a token68.
func parseChallenges(v string) []challenge {
	var out []challenge
	var cur *challenge
	s := v
	for {
		s = strings.TrimLeft(s, " \t,")
		if s == "" {
			break
		}
		tok := token(s)
		if tok == "" {
			// Not a token: skip to the next comma.
			i := strings.IndexByte(s, ',')
			if i < 0 {
				break
			}
			s = s[i:]
			continue
		}
		rest := strings.TrimLeft(s[len(tok):], " \t")
		if strings.HasPrefix(rest, "=") && cur != nil && !strings.HasPrefix(rest, "==") {
			// An auth-param of the current challenge.
			val, after, ok := paramValue(strings.TrimLeft(rest[1:], " \t"))
			if !ok {
				s = after
				continue
			}
			cur.params[strings.ToLower(tok)] = val
			s = after
			continue
		}
		// A new challenge: scheme, then perhaps a token68 (which we have no use for).
		out = append(out, challenge{scheme: strings.ToLower(tok), params: map[string]string{}})
		cur = &out[len(out)-1]
		s = rest
		if t68 := token68(s); t68 != "" {
			after := strings.TrimLeft(s[len(t68):], " \t")
			if after == "" || after[0] == ',' {
				s = after
			}
		}
	}
	return out
}

// paramValue reads a token or a quoted string at the start of s and returns it with the rest
// of s.
func paramValue(s string) (val, rest string, ok bool) {
	if strings.HasPrefix(s, `"`) {
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			switch c := s[i]; c {
			case '\\':
				if i+1 < len(s) {
					i++
					b.WriteByte(s[i])
				}
			case '"':
				return b.String(), s[i+1:], true
			default:
				b.WriteByte(c)
			}
		}
		return "", "", false // unterminated
	}
	tok := token(s)
	if tok == "" {
		i := strings.IndexByte(s, ',')
		if i < 0 {
			return "", "", false
		}
		return "", s[i:], false
	}
	return tok, s[len(tok):], true
}

// token returns the RFC 9110 token at the start of s.
func token(s string) string {
	i := 0
	for i < len(s) && isTokenChar(s[i]) {
		i++
	}
	return s[:i]
}

// token68 returns the token68 at the start of s, trailing '=' included.
func token68(s string) string {
	i := 0
	for i < len(s) && (isAlnum(s[i]) || strings.IndexByte("-._~+/", s[i]) >= 0) {
		i++
	}
	if i == 0 {
		return ""
	}
	for i < len(s) && s[i] == '=' {
		i++
	}
	return s[:i]
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isTokenChar(c byte) bool {
	return isAlnum(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// authChallenge is what the client takes from a refusal: the challenge of the scheme it
// presents (Bearer or DPoP), or the first.
type authChallenge struct {
	resourceMetadata string
	scope            string
	err              string
}

func readChallenge(h http.Header) authChallenge {
	var pick *challenge
	all := challenges(h)
	for i := range all {
		if all[i].scheme == "bearer" || all[i].scheme == "dpop" {
			if pick == nil || all[i].params["resource_metadata"] != "" && pick.params["resource_metadata"] == "" {
				pick = &all[i]
			}
		}
	}
	if pick == nil && len(all) > 0 {
		pick = &all[0]
	}
	if pick == nil {
		return authChallenge{}
	}
	return authChallenge{
		resourceMetadata: pick.params["resource_metadata"],
		scope:            pick.params["scope"],
		err:              pick.params["error"],
	}
}
