// Package headers holds the HTTP header rules of the stateless MCP revisions (2026-07-28 and
// later) as pure functions: the headers that name a request (Mcp-Method, Mcp-Name,
// MCP-Protocol-Version), and the Mcp-Param-* headers a tool's x-mcp-header declarations ask for.
package headers

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// A Param is a tool argument the stateless revisions mirror into an HTTP header: the
// inputSchema property at path declares "x-mcp-header": name, and the call carries
// Mcp-Param-<name> with the argument's value.
type Param struct {
	path []string
	name string
	typ  string // integer, string or boolean
}

// ErrInvalidDeclaration reports a tool whose x-mcp-header declarations break the rules: such a
// tool is left out of listings, as the protocol requires.
var ErrInvalidDeclaration = errors.New("mcpclient: invalid x-mcp-header declaration")

var headerToken = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// schemaData are the keywords whose values are data, not schemas: an x-mcp-header inside them
// is no declaration.
var schemaData = map[string]bool{"const": true, "enum": true, "default": true, "examples": true}

// Declarations reads the x-mcp-header declarations of an inputSchema. A declaration must be a
// non-empty token, unique regardless of case, on a property of type integer, string or boolean,
// reached from the root through properties alone.
func Declarations(inputSchema json.RawMessage) ([]Param, error) {
	if len(inputSchema) == 0 {
		return nil, nil
	}
	var root any
	if err := json.Unmarshal(inputSchema, &root); err != nil {
		return nil, nil // not ours to judge: the schema is the server's
	}
	var params []Param
	seen := map[string]bool{}
	var walk func(node any, path []string, onChain bool) error
	walk = func(node any, path []string, onChain bool) error {
		switch n := node.(type) {
		case []any:
			for _, v := range n {
				if err := walk(v, path, false); err != nil {
					return err
				}
			}
		case map[string]any:
			if decl, ok := n["x-mcp-header"]; ok {
				name, _ := decl.(string)
				typ, _ := n["type"].(string)
				switch {
				case !onChain || len(path) == 0:
					return fmt.Errorf("%w: %q is not on a property reached through properties", ErrInvalidDeclaration, decl)
				case name == "" || !headerToken.MatchString(name):
					return fmt.Errorf("%w: %q is not an HTTP token", ErrInvalidDeclaration, decl)
				case seen[strings.ToLower(name)]:
					return fmt.Errorf("%w: %q declared twice", ErrInvalidDeclaration, name)
				case typ != "integer" && typ != "string" && typ != "boolean":
					return fmt.Errorf("%w: %q is on a property of type %v", ErrInvalidDeclaration, name, n["type"])
				}
				seen[strings.ToLower(name)] = true
				params = append(params, Param{path: append([]string(nil), path...), name: name, typ: typ})
			}
			for k, v := range n {
				switch {
				case k == "x-mcp-header" || schemaData[k]:
				case k == "properties":
					props, ok := v.(map[string]any)
					if !ok {
						continue
					}
					for name, sub := range props {
						if err := walk(sub, append(path, name), onChain); err != nil {
							return err
						}
					}
				default:
					if err := walk(v, path, false); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	if err := walk(root, nil, true); err != nil {
		return nil, err
	}
	return params, nil
}

// ParamValues computes the Mcp-Param-* headers of a call with arguments args. An argument that
// is absent or null sends no header; false, 0 and "" are sent.
func ParamValues(params []Param, args json.RawMessage) (map[string]string, error) {
	values, err := paramTexts(params, args)
	if err != nil || values == nil {
		return nil, err
	}
	h := make(map[string]string, len(values))
	for name, v := range values {
		h["Mcp-Param-"+name] = EncodeValue(v)
	}
	return h, nil
}

// paramTexts returns the text each declared argument present in args has in its header, by
// header name.
func paramTexts(params []Param, args json.RawMessage) (map[string]string, error) {
	if len(params) == 0 || len(args) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, err
	}
	texts := map[string]string{}
	for _, p := range params {
		v, ok := root, true
		for _, key := range p.path {
			obj, isObj := v.(map[string]any)
			if v, ok = obj[key]; !isObj || !ok {
				break
			}
		}
		if !ok || v == nil {
			continue
		}
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case bool:
			s = strconv.FormatBool(x)
		case json.Number:
			n, err := integerText(x)
			if err != nil {
				return nil, fmt.Errorf("argument %s for header %s: %w", strings.Join(p.path, "."), p.name, err)
			}
			s = n
		default:
			return nil, fmt.Errorf("argument %s for header %s is no string, integer or boolean", strings.Join(p.path, "."), p.name)
		}
		texts[p.name] = s
	}
	return texts, nil
}

// ErrMismatch reports a request whose headers do not say what its body says: the server side of
// the header rules, answered with HeaderMismatch.
var ErrMismatch = errors.New("header does not match the body")

// DecodeValue reads a header value as EncodeValue wrote it: surrounding whitespace is not part
// of the value, and =?base64?…?= carries it in padded standard Base64, which must decode.
// Anything else is the value as it is.
func DecodeValue(v string) (string, error) {
	v = strings.Trim(v, " \t")
	if len(v) < len("=?base64??=") || !strings.HasPrefix(v, "=?base64?") || !strings.HasSuffix(v, "?=") {
		return v, nil
	}
	b, err := base64.StdEncoding.Strict().DecodeString(v[len("=?base64?") : len(v)-len("?=")])
	if err != nil {
		return "", fmt.Errorf("%w: invalid Base64 in %q", ErrMismatch, v)
	}
	return string(b), nil
}

// CheckParams checks the Mcp-Param-* headers of a call with arguments args against the tool's
// declarations: every declared argument present in args must be in its header, with its value,
// and a header must not name an argument the body lacks.
func CheckParams(params []Param, args json.RawMessage, h http.Header) error {
	texts, err := paramTexts(params, args)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMismatch, err)
	}
	for _, p := range params {
		name := "Mcp-Param-" + p.name
		vals := h.Values(name)
		want, inBody := texts[p.name]
		switch {
		case !inBody && len(vals) == 0:
		case !inBody:
			return fmt.Errorf("%w: %s is sent without its argument", ErrMismatch, name)
		case len(vals) == 0:
			return fmt.Errorf("%w: %s is missing", ErrMismatch, name)
		case len(vals) > 1:
			return fmt.Errorf("%w: %s is sent twice", ErrMismatch, name)
		default:
			got, err := DecodeValue(vals[0])
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("%w: %s says %q, the argument %q", ErrMismatch, name, got, want)
			}
		}
	}
	return nil
}

// maxSafeInteger is the largest integer a header may carry: 2^53 - 1, exact in every JSON
// implementation.
const maxSafeInteger = 1<<53 - 1

// integerText writes a JSON number as a decimal integer, never in exponent form.
func integerText(n json.Number) (string, error) {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		if i > maxSafeInteger || i < -maxSafeInteger {
			return "", fmt.Errorf("%d is beyond ±(2^53-1)", i)
		}
		return strconv.FormatInt(i, 10), nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > maxSafeInteger {
		return "", fmt.Errorf("%s is no integer within ±(2^53-1)", n)
	}
	return strconv.FormatInt(int64(f), 10), nil
}

// Standard returns the headers every request of a stateless revision carries over HTTP: its
// method and revision, and the name (tools/call, prompts/get), URI (resources/read) or task id
// (the methods of the tasks extension) it is about. The values share one array, each header's slice capped at its one value.
func Standard(method, name, uri, version string) http.Header {
	vals := make([]string, 0, 3)
	h := make(http.Header, 3)
	set := func(k, v string) {
		vals = append(vals, v)
		n := len(vals)
		h[k] = vals[n-1 : n : n]
	}
	set("Mcp-Method", method)
	set("Mcp-Protocol-Version", version)
	switch method {
	case "tools/call", "prompts/get":
		set("Mcp-Name", EncodeValue(name))
	case "resources/read":
		set("Mcp-Name", EncodeValue(uri))
	case "tasks/get", "tasks/update", "tasks/cancel":
		set("Mcp-Name", EncodeValue(name)) // the task's id
	}
	return h
}

// EncodeValue writes a value as an HTTP header may carry it: as it is when it is visible ASCII
// (spaces allowed) without surrounding whitespace, else as =?base64?…?=, as is any value that
// would read as that form.
func EncodeValue(v string) string {
	plain := len(v) == 0 || (v[0] != ' ' && v[len(v)-1] != ' ')
	for i := 0; plain && i < len(v); i++ {
		plain = v[i] >= 0x20 && v[i] <= 0x7e
	}
	if plain && !(len(v) >= len("=?base64??=") && v[:9] == "=?base64?" && v[len(v)-2:] == "?=") {
		return v
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
}
