package mcptest

import (
	"net/url"
	"regexp"
	"strings"
	"sync"
)

// MatchURITemplate reports whether uri is an expansion of the RFC 6570 level-1 template (simple
// string expansion, "file:///logs/{date}/{name}"), and returns the values of its variables,
// percent-decoded. A variable matches one or more unreserved characters or percent-encoded
// octets, what level-1 expansion produces: never a "/", "?" or "#". A template with an
// expression beyond level 1 ("{+path}", "{?q}", "{a,b}") matches nothing.
func MatchURITemplate(template, uri string) (vars map[string]string, ok bool) {
	m := compileTemplate(template)
	if m.re == nil {
		return nil, false
	}
	sub := m.re.FindStringSubmatch(uri)
	if sub == nil {
		return nil, false
	}
	vars = make(map[string]string, len(m.names))
	for i, name := range m.names {
		v, err := url.PathUnescape(sub[i+1])
		if err != nil {
			return nil, false
		}
		if prev, seen := vars[name]; seen && prev != v {
			return nil, false // a variable used twice must expand the same way
		}
		vars[name] = v
	}
	return vars, true
}

type templateMatcher struct {
	re    *regexp.Regexp // nil: the template is beyond level 1
	names []string
}

var (
	templateCacheMu sync.Mutex
	templateCache   = map[string]templateMatcher{}
)

var varName = regexp.MustCompile(`^(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})(?:\.?(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*$`)

// levelOneValue is what a level-1 expansion of a variable consists of.
const levelOneValue = `((?:[A-Za-z0-9\-._~]|%[0-9A-Fa-f]{2})+)`

func compileTemplate(template string) templateMatcher {
	templateCacheMu.Lock()
	defer templateCacheMu.Unlock()
	if m, ok := templateCache[template]; ok {
		return m
	}
	var m templateMatcher
	var b strings.Builder
	b.WriteString("^")
	rest := template
	valid := true
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			b.WriteString(regexp.QuoteMeta(rest))
			break
		}
		b.WriteString(regexp.QuoteMeta(rest[:open]))
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			valid = false
			break
		}
		name := rest[open+1 : open+end]
		if !varName.MatchString(name) {
			valid = false
			break
		}
		m.names = append(m.names, name)
		b.WriteString(levelOneValue)
		rest = rest[open+end+1:]
	}
	b.WriteString("$")
	if valid {
		m.re = regexp.MustCompile(b.String())
	}
	if len(templateCache) < 1024 {
		templateCache[template] = m
	}
	return m
}
