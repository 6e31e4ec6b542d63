package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/receipts"
)

// The tools the server scenarios call. A server under test (--url) must have them, as the
// official suite's scenarios expect theirs. Every one counts its runs per "key" argument, a
// counter shared by the four; each answers with the text "runs=N" (N the counter after its
// run) and nothing else the scenarios read:
//
//   - receipts_count {key}: adds one run, answers at once.
//   - receipts_slow {key, ms}: sleeps ms milliseconds (default 800), then adds one run and
//     answers; the scenarios on waiting and disconnects use it. It must not stop when its
//     client disconnects, where the server declares disconnect "continue".
//   - receipts_fail {key}: adds one run, then fails with JSON-RPC error -32000, data
//     {"runs": N}: an outcome, kept like a result.
//   - receipts_runs {key}: reads the counter without adding to it (readOnlyHint), for the
//     scenarios to tell how often the others ran.
const (
	toolCount = "receipts_count"
	toolSlow  = "receipts_slow"
	toolFail  = "receipts_fail"
	toolRuns  = "receipts_runs"
)

// defaultSlow is how long receipts_slow sleeps unless told.
const defaultSlow = 800 * time.Millisecond

// counters are the fixtures' run counters, by key.
type counters struct {
	mu   sync.Mutex
	runs map[string]int
}

func (c *counters) add(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs[key]++
	return c.runs[key]
}

func (c *counters) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[key]
}

type fixtureArgs struct {
	Key string `json:"key"`
	MS  int    `json:"ms"`
}

func runsResult(n int) *mcpclient.CallToolResult {
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(fmt.Sprintf("runs=%d", n))}}
}

var keySchema = json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"},"ms":{"type":"integer"}},"required":["key"]}`)

// fixtureTools are the mcptest options that register the four tools over c.
func fixtureTools(c *counters) []mcptest.Option {
	args := func(call *mcptest.ToolCall) (fixtureArgs, error) {
		var a fixtureArgs
		if err := json.Unmarshal(call.Arguments, &a); err != nil || a.Key == "" {
			return a, mcptest.ProtocolError(mcpclient.RPCInvalidParams, "arguments need a key", nil)
		}
		return a, nil
	}
	readOnly := true
	return []mcptest.Option{
		mcptest.WithTool(mcpclient.Tool{Name: toolCount, InputSchema: keySchema}, func(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			a, err := args(call)
			if err != nil {
				return nil, err
			}
			return runsResult(c.add(a.Key)), nil
		}),
		mcptest.WithTool(mcpclient.Tool{Name: toolSlow, InputSchema: keySchema}, func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			a, err := args(call)
			if err != nil {
				return nil, err
			}
			d := defaultSlow
			if a.MS > 0 {
				d = time.Duration(a.MS) * time.Millisecond
			}
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return runsResult(c.add(a.Key)), nil
		}),
		mcptest.WithTool(mcpclient.Tool{Name: toolFail, InputSchema: keySchema}, func(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			a, err := args(call)
			if err != nil {
				return nil, err
			}
			n := c.add(a.Key)
			return nil, mcptest.ProtocolError(-32000, "receipts_fail ran", map[string]int{"runs": n})
		}),
		mcptest.WithTool(mcpclient.Tool{Name: toolRuns, InputSchema: keySchema, Annotations: &mcpclient.ToolAnnotations{ReadOnlyHint: &readOnly}},
			func(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
				a, err := args(call)
				if err != nil {
					return nil, err
				}
				return runsResult(c.get(a.Key)), nil
			}),
	}
}

// A target is a server the server scenarios run against.
type target struct {
	name string
	url  string
}

// targetNames are the in-process targets, in the order they run: a server that keeps no
// receipts (mcptest in ModeNone, standing for any SDK's server) wrapped by receipts.HTTP, and
// mcptest's own receipts; each answering with JSON bodies and, "+sse", with event streams.
var targetNames = []string{"middleware", "middleware+sse", "mcptest", "mcptest+sse"}

// startTargets serves the in-process targets; stop ends them.
func startTargets() (targets []target, stop func()) {
	var closers []func()
	for _, name := range targetNames {
		opts := append(fixtureTools(&counters{runs: map[string]int{}}),
			mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728, mcpclient.ProtocolVersion20251125))
		middleware := name == "middleware" || name == "middleware+sse"
		if middleware {
			opts = append(opts, mcptest.WithMode(mcptest.ModeNone))
		}
		if name == "middleware+sse" || name == "mcptest+sse" {
			opts = append(opts, mcptest.WithSSEResponses(0))
		}
		inner := mcptest.NewUnstartedHTTPServer(opts...)
		var h http.Handler = inner
		if middleware {
			h = receipts.HTTP(inner, receipts.Options{})
		}
		ts := httptest.NewServer(h)
		closers = append(closers, func() { ts.Close(); inner.Close() })
		targets = append(targets, target{name: name, url: ts.URL + "/mcp"})
	}
	return targets, func() {
		for _, c := range closers {
			c()
		}
	}
}
