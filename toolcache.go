package mcpclient

import (
	"bytes"
	"fmt"
	"slices"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/northstar-mcp/mcpclient/internal/headers"
)

// toolCache holds the last complete tools/list: for ListTools, for the Mcp-Param-* headers of a
// call, and for checking each tool's structuredContent against its outputSchema.
// notifications/tools/list_changed empties it, and a listing that began before the notification
// is not stored: its pages may predate the change.
type toolCache struct {
	mu sync.Mutex
	// gen counts the invalidations; a listing stores its tools only under the gen it began in.
	gen     uint64
	valid   bool
	list    []*Tool
	byName  map[string]*Tool
	schemas map[string]*jsonschema.Schema // compiled on first use; nil entry: not checkable
	headers map[string][]headers.Param    // the x-mcp-header declarations of each tool
}

// generation returns the gen a listing beginning now passes to store.
func (t *toolCache) generation() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.gen
}

// store installs a complete listing that began in generation gen, unless the cache was emptied
// since.
func (t *toolCache) store(list []*Tool, gen uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if gen != t.gen {
		return
	}
	t.valid, t.list = true, list
	t.byName = make(map[string]*Tool, len(list))
	t.headers = make(map[string][]headers.Param)
	for _, tool := range list {
		t.byName[tool.Name] = tool
		if params, err := headers.Declarations(tool.InputSchema); err == nil && len(params) > 0 {
			t.headers[tool.Name] = params
		}
	}
	t.schemas = make(map[string]*jsonschema.Schema)
}

// headerParamsOf returns the x-mcp-header declarations of a listed tool.
func (t *toolCache) headerParamsOf(name string) []headers.Param {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.headers[name]
}

func (t *toolCache) invalidate() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen++
	t.valid, t.list, t.byName, t.schemas, t.headers = false, nil, nil, nil, nil
}

func (t *toolCache) all() ([]*Tool, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.list), t.valid
}

// outputSchema returns the compiled outputSchema of a listed tool, or nil when the tool is not
// listed, declares none, or has one that cannot be compiled without fetching what it refers to.
func (t *toolCache) outputSchema(name string) *jsonschema.Schema {
	t.mu.Lock()
	defer t.mu.Unlock()
	if sch, done := t.schemas[name]; done {
		return sch
	}
	tool := t.byName[name]
	if tool == nil || len(tool.OutputSchema) == 0 {
		return nil
	}
	sch, _ := compileSchema(tool.OutputSchema) // unusable schemas are not checked
	t.schemas[name] = sch
	return sch
}

// noLoader refuses every reference outside the schema itself: a server's schema must not make
// the client fetch URLs or read files.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("mcpclient: schema reference %q not followed", url)
}

func compileSchema(raw []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	const loc = "mcp:///outputSchema.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

// checkStructured checks a tool's result against the outputSchema the cached listing gives the
// tool. A tool the cache does not hold (never listed, or listed before a list_changed emptied
// the cache) is not checked, and nothing here lists the tools to find its schema.
func (t *toolCache) checkStructured(name string, res *CallToolResult) error {
	if res.IsError {
		return nil
	}
	sch := t.outputSchema(name)
	if sch == nil {
		return nil
	}
	if len(res.StructuredContent) == 0 {
		return fmt.Errorf("%w: tool %s returned none", ErrStructuredContent, name)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(res.StructuredContent))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStructuredContent, err)
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("%w: %v", ErrStructuredContent, err)
	}
	return nil
}
