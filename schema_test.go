package mcpclient_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/transport"
)

// richInputSchema uses the JSON Schema 2020-12 vocabulary a client that decodes schemas into
// structs of its own would lose ($schema, $defs, $anchor, composition and conditionals), in a
// key order no encoder would choose, with whitespace, escapes and numbers whose spelling a
// re-encoding would change (0.10, 1e3, -0.0, an integer beyond float64).
const richInputSchema = `{ "$schema" : "https://json-schema.org/draft/2020-12/schema",
	"type":"object",
	"$defs": {
		"address": {"$anchor": "addr", "type": "object",
			"properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
			"additionalProperties": false}
	},
	"properties": {
		"zeta": {"$ref": "#addr"},
		"alpha": {"type": "number", "multipleOf": 0.10, "maximum": 1e3, "minimum": -0.0, "default": 1.50},
		"big": {"const": 12345678901234567890},
		"esc": {"const": "<\u00e9>\/&"}
	},
	"allOf": [ {"anyOf": [{"required": ["zeta"]}, {"required": ["alpha"]}]} ],
	"oneOf": [{"required": ["big"]}, {"not": {"required": ["big"]}}],
	"if": {"properties": {"alpha": {"const": 0}}}, "then": {"required": ["esc"]}, "else": {"required": []},
	"additionalProperties"  :false
}`

// richOutputSchema is an outputSchema that CallTool compiles to check results against.
const richOutputSchema = `{"type":"object","$defs":{"n":{"type":"integer","minimum":0E0}},
 "properties":{"count":{"$ref":"#/$defs/n"}} ,"required":["count"]}`

// TestToolSchemasReachTheCallerByteForByte: a tool's inputSchema and outputSchema are the
// server's bytes, from a page, a complete listing and the cached listing alike, before and
// after CallTool compiled the outputSchema, over each transport.
func TestToolSchemasReachTheCallerByteForByte(t *testing.T) {
	t.Parallel()
	listing := `{"tools":[{"name":"rich","inputSchema":` + richInputSchema + `,"outputSchema":` + richOutputSchema + `}]}`
	call := `{"content":[],"structuredContent":{"count":3}}`
	stateless := func(s string) string { return `{"resultType":"complete",` + s[1:] }
	// The scripted servers answer tools/list with the listing's bytes, and send the arguments
	// of a call of the tool echo to echoed.
	httpScript := func(list, result string, echoed chan<- string) testpeer.HTTPScript {
		return func(r *testpeer.Request) bool {
			switch r.Method {
			case "tools/list":
				r.Answer(list)
				return true
			case "tools/call":
				if string(r.Param("name")) == `"echo"` {
					echoed <- string(r.Param("arguments"))
				}
				r.Answer(result)
				return true
			}
			return false
		}
	}
	backends := []struct {
		name string
		dial func(t *testing.T, echoed chan<- string) transport.Transport
	}{
		{"http", func(t *testing.T, echoed chan<- string) transport.Transport {
			return &transport.HTTP{URL: testpeer.NewHTTP(t, httpScript(listing, call, echoed)).URL}
		}},
		{"stateless http", func(t *testing.T, echoed chan<- string) transport.Transport {
			return &transport.HTTP{URL: testpeer.NewHTTP(t, httpScript(stateless(listing), stateless(call), echoed), testpeer.Stateless()).URL}
		}},
		{"stdio lines", func(t *testing.T, _ chan<- string) transport.Transport {
			return testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
				if m.Method != "tools/list" {
					return false
				}
				// One line: the schemas' own newlines would split the frame.
				p.Send(testpeer.Result(m.ID, strings.NewReplacer("\n", " ", "\t", " ").Replace(listing)))
				return true
			}, testpeer.Lines(0)).Transport()
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			echoed := make(chan string, 1)
			c := connect(t, b.dial(t, echoed))
			ctx := testCtx(t)
			wantIn, wantOut := richInputSchema, richOutputSchema
			if b.name == "stdio lines" {
				flat := strings.NewReplacer("\n", " ", "\t", " ")
				wantIn, wantOut = flat.Replace(wantIn), flat.Replace(wantOut)
			}
			check := func(how string, tools []*mcpclient.Tool) {
				t.Helper()
				if len(tools) != 1 {
					t.Fatalf("%s: %d tools", how, len(tools))
				}
				if !bytes.Equal(tools[0].InputSchema, []byte(wantIn)) {
					t.Errorf("%s: inputSchema\n%s\nwant\n%s", how, tools[0].InputSchema, wantIn)
				}
				if !bytes.Equal(tools[0].OutputSchema, []byte(wantOut)) {
					t.Errorf("%s: outputSchema\n%s\nwant\n%s", how, tools[0].OutputSchema, wantOut)
				}
			}
			page, err := c.ListToolsPage(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			check("ListToolsPage", page.Tools)
			all, err := mcpclient.Collect(c.Tools(ctx))
			if err != nil {
				t.Fatal(err)
			}
			check("Tools", all)
			cached, err := c.CachedTools(ctx)
			if err != nil {
				t.Fatal(err)
			}
			check("CachedTools", cached)
			if b.name == "stdio lines" {
				return
			}
			// Compiles the outputSchema from the cached tool and checks the result against it.
			if _, err := c.CallTool(ctx, "rich", nil); err != nil {
				t.Fatal(err)
			}
			cached, err = c.CachedTools(ctx)
			if err != nil {
				t.Fatal(err)
			}
			check("CachedTools after CallTool", cached)
			// Passed back as a tool's argument, as the conformance suite's echo asks, the schema
			// is the same JSON value: encoding/json compacts it, reordering and respelling
			// nothing.
			if _, err := c.CallTool(ctx, "echo", map[string]json.RawMessage{"schema": cached[0].InputSchema}); err != nil {
				t.Fatal(err)
			}
			if got, want := decodeNumbers(t, []byte(<-echoed)), decodeNumbers(t, []byte(`{"schema":`+wantIn+`}`)); !reflect.DeepEqual(got, want) {
				t.Errorf("echoed arguments %v, want %v", got, want)
			}
		})
	}
}

// decodeNumbers decodes a JSON value keeping its numbers as they are spelled.
func decodeNumbers(t *testing.T, raw []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return v
}
