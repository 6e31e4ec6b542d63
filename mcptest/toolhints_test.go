package mcptest_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// hintsOf returns a tool's hints as "name=value" for those set, "name=-" for those absent.
func hintsOf(a *mcpclient.ToolAnnotations) map[string]string {
	show := func(p *bool) string {
		switch {
		case p == nil:
			return "-"
		case *p:
			return "true"
		}
		return "false"
	}
	if a == nil {
		a = &mcpclient.ToolAnnotations{}
	}
	return map[string]string{
		"readOnly": show(a.ReadOnlyHint), "destructive": show(a.DestructiveHint),
		"idempotent": show(a.IdempotentHint), "openWorld": show(a.OpenWorldHint),
	}
}

// The hint options reach the client in tools/list, as set, true or false; a hint no option
// sets stays absent, or as the tool's own annotations give it, and those annotations, the
// caller's, are left as they were.
func TestToolHintsReachTheClient(t *testing.T) {
	no := false
	own := &mcpclient.ToolAnnotations{Title: "Own", ReadOnlyHint: &no, IdempotentHint: &no}
	var runs int
	var mu sync.Mutex
	srv := mcptest.NewTestServer(t,
		mcptest.WithTool(mcpclient.Tool{Name: "all"}, echo(&runs, &mu),
			mcptest.ReadOnlyHint(true), mcptest.DestructiveHint(false), mcptest.IdempotentHint(true), mcptest.OpenWorldHint(false)),
		mcptest.WithTool(mcpclient.Tool{Name: "inverse"}, echo(&runs, &mu),
			mcptest.ReadOnlyHint(false), mcptest.DestructiveHint(true), mcptest.IdempotentHint(false), mcptest.OpenWorldHint(true)),
		mcptest.WithTool(mcpclient.Tool{Name: "mixed", Annotations: own}, echo(&runs, &mu), mcptest.IdempotentHint(true)),
		mcptest.WithTool(mcpclient.Tool{Name: "none"}, echo(&runs, &mu)))
	srv.AddTool(mcpclient.Tool{Name: "added"}, echo(&runs, &mu), mcptest.OpenWorldHint(false))
	c := mcptest.NewClient(t, srv)
	tools, err := c.CachedTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"all":     {"readOnly": "true", "destructive": "false", "idempotent": "true", "openWorld": "false"},
		"inverse": {"readOnly": "false", "destructive": "true", "idempotent": "false", "openWorld": "true"},
		"mixed":   {"readOnly": "false", "destructive": "-", "idempotent": "true", "openWorld": "-"},
		"none":    {"readOnly": "-", "destructive": "-", "idempotent": "-", "openWorld": "-"},
		"added":   {"readOnly": "-", "destructive": "-", "idempotent": "-", "openWorld": "false"},
	}
	if len(tools) != len(want) {
		t.Fatalf("%d tools listed, want %d", len(tools), len(want))
	}
	for _, tool := range tools {
		got := hintsOf(tool.Annotations)
		for name, w := range want[tool.Name] {
			if got[name] != w {
				t.Errorf("%s: %sHint %s, want %s", tool.Name, name, got[name], w)
			}
		}
		if tool.Name == "none" && tool.Annotations != nil {
			t.Errorf("none: annotations %+v, want none", *tool.Annotations)
		}
		if tool.Name == "mixed" && tool.Annotations.Title != "Own" {
			t.Errorf("mixed: title %q, want the tool's own", tool.Annotations.Title)
		}
	}
	if *own.IdempotentHint || own.DestructiveHint != nil {
		t.Errorf("the caller's annotations changed: %+v", hintsOf(own))
	}
}

// The client reads readOnlyHint and idempotentHint to decide whether a call whose delivery may
// have been lost, to a server that keeps no receipts, may be re-issued under a new id: the
// hints the options set are the ones it goes by.
func TestToolHintsDecideWhetherTheClientRepeatsACall(t *testing.T) {
	for _, c := range []struct {
		name  string
		hints []mcptest.ToolOption
		safe  bool
	}{
		{"read-only", []mcptest.ToolOption{mcptest.ReadOnlyHint(true)}, true},
		{"idempotent", []mcptest.ToolOption{mcptest.IdempotentHint(true), mcptest.DestructiveHint(true)}, true},
		{"neither", []mcptest.ToolOption{mcptest.ReadOnlyHint(false), mcptest.IdempotentHint(false)}, false},
		{"not destructive", []mcptest.ToolOption{mcptest.DestructiveHint(false), mcptest.OpenWorldHint(false)}, false},
		{"no hints", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var runs int
			var mu sync.Mutex
			srv := mcptest.NewTestServer(t, mcptest.WithMode(mcptest.ModeNone),
				mcptest.WithTool(mcpclient.Tool{Name: "echo"}, echo(&runs, &mu), c.hints...))
			cl := mcptest.NewClient(t, srv)
			if _, err := cl.CachedTools(context.Background()); err != nil { // the hints the client goes by
				t.Fatal(err)
			}
			srv.Inject(mcptest.Fault{Kind: mcptest.DropBeforeExecution, Tool: "echo"})
			res, err := cl.CallTool(context.Background(), "echo", map[string]int{"n": 1})
			switch {
			case c.safe && (err != nil || res.Text() != `{"n":1}` || runs != 1):
				t.Errorf("a tool safe to repeat: %v, %v, %d runs; want it re-issued and run once", res, err, runs)
			case !c.safe && (!errors.Is(err, mcpclient.ErrOutcomeUnknown) || runs != 0):
				t.Errorf("a tool not safe to repeat: %v, %d runs; want ErrOutcomeUnknown and no run", err, runs)
			}
		})
	}
}
