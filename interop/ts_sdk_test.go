package interop_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/transport"
)

// tsSDKVersion is the @modelcontextprotocol/server (TypeScript SDK v2) release under test;
// TS_SDK_VERSION overrides it.
const tsSDKVersion = "2.4.0"

func tsSDKVersionToUse() string {
	if v := os.Getenv("TS_SDK_VERSION"); v != "" {
		return v
	}
	return tsSDKVersion
}

// tsSDKDir installs the SDK with ts-sdk.sh, once per test binary, and returns the directory
// holding its node_modules, or why it cannot be had.
var tsSDKDir = sync.OnceValues(func() (string, error) {
	for _, tool := range []string{"node", "npm", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("%s not found in PATH", tool)
		}
	}
	cmd := exec.Command("bash", "ts-sdk.sh", tsSDKVersionToUse())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("bash ts-sdk.sh: %v\n%s", err, stderr.String())
	}
	dir := strings.TrimSpace(string(out))
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		return "", fmt.Errorf("ts-sdk.sh printed %q: %v", dir, err)
	}
	return dir, nil
})

// tsSDKModes are the ways testdata/ts-sdk-server.mjs serves: stdio through serveStdio, and
// createMcpHandler behind node:http in each of its response modes for 2026-07-28 requests.
var tsSDKModes = []struct{ name, mode, responseMode string }{
	{"stdio", "stdio", ""},
	{"streamable-http auto", "http", "auto"},
	{"streamable-http json", "http", "json"},
	{"streamable-http sse", "http", "sse"},
}

// tsSDKRevisions: "server's choice" lets the client negotiate (server/discover first);
// 2025-11-25 pins the client to the 2025 handshake, which the SDK serves through its legacy
// path (a pinned instance over stdio, a stateless per-request instance over HTTP).
var tsSDKRevisions = []string{"server's choice", mcpclient.ProtocolVersion20251125}

// TestTSSDK runs the client against a server built with the TypeScript SDK v2
// (testdata/ts-sdk-server.mjs), over stdio and Streamable HTTP, negotiated and pinned to 2025.
func TestTSSDK(t *testing.T) {
	dir, err := tsSDKDir()
	if err != nil {
		t.Skipf("@modelcontextprotocol/server unavailable (needs node and npm, and the npm registry on first use): %v", err)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "ts-sdk-server.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	noOrphans(t)
	name := "ts-sdk " + tsSDKVersionToUse()
	for _, m := range tsSDKModes {
		t.Run(m.name, func(t *testing.T) {
			for _, rev := range tsSDKRevisions {
				t.Run(rev, func(t *testing.T) { runTSSDK(t, name, dir, script, m.name, m.mode, m.responseMode, rev) })
			}
		})
	}
}

func runTSSDK(t *testing.T, name, dir, script, transportName, mode, responseMode, rev string) {
	cb := newCombo(t, name, transportName, rev)
	var url string
	var hc *http.Client
	if mode == "http" {
		cmd := exec.Command("node", script, dir, "http", "0", responseMode)
		url = startListening(t, cb, cmd) + "/mcp"
		cb.wire = &wireLog{}
		hc = cb.wire.client(t)
	}
	newTransport := func() transport.Transport {
		if mode == "http" {
			return &transport.HTTP{URL: url, Client: hc}
		}
		return &transport.Command{Path: "node", Args: []string{script, dir, "stdio"}, Stderr: cb,
			CloseTimeout: 3 * time.Second, TermTimeout: 2 * time.Second}
	}
	var opts []mcpclient.Option
	want := mcpclient.ProtocolVersion20260728
	if rev != "server's choice" {
		opts = append(opts, mcpclient.WithProtocolVersion(rev))
		want = rev
	}

	c, retries, err := cb.connect(t, newTransport(), opts...)
	if err != nil {
		t.Fatalf("Connect: %s\nHTTP exchanges:\n%s", errorChain(err), cb.wire.since(0))
	}
	cb.setNegotiated(c.ProtocolVersion())

	cb.check("negotiation", func(t *testing.T) {
		if got := c.ProtocolVersion(); got != want {
			t.Errorf("ProtocolVersion() = %q, want %q", got, want)
		}
		if si := c.ServerInfo(); si.Name != "mcpclient-interop-ts-sdk" || si.Version != "1.0.0" {
			t.Errorf("ServerInfo() = %+v", si)
		}
		caps := c.ServerCapabilities()
		if caps.Tools == nil || caps.Resources == nil || caps.Prompts == nil {
			t.Errorf("ServerCapabilities() = %+v", caps)
		}
		if got := c.InitializeResult().Instructions; got != "A test server for the mcpclient interop tests." {
			t.Errorf("instructions = %q", got)
		}
		if sid := c.SessionID(); sid != "" {
			// Both of the SDK's HTTP legs are stateless, and stdio has no sessions.
			t.Errorf("SessionID() = %q, want none", sid)
		}
	})

	cb.check("ping", func(t *testing.T) {
		if err := c.Ping(ctxFor(t)); err != nil {
			t.Fatalf("Ping: %s", errorChain(err))
		}
	})

	var tools []*mcpclient.Tool
	cb.check("tools/list: schemas and annotations", func(t *testing.T) {
		var err error
		if tools, err = c.CachedTools(ctxFor(t)); err != nil {
			t.Fatalf("ListTools: %s", errorChain(err))
		}
		if names := toolNames(tools); !slices.Equal(names, []string{"echo", "add", "increment", "fail"}) {
			t.Errorf("tools = %v", names)
		}
		add, inc := findTool(tools, "add"), findTool(tools, "increment")
		if add == nil || len(add.OutputSchema) == 0 || add.Annotations == nil || add.Annotations.IdempotentHint == nil || !*add.Annotations.IdempotentHint {
			t.Errorf("add = %+v, want an outputSchema and idempotentHint", add)
		}
		if inc == nil || inc.Annotations == nil || inc.Annotations.DestructiveHint == nil || !*inc.Annotations.DestructiveHint {
			t.Errorf("increment = %+v, want destructiveHint", inc)
		}
		if e := findTool(tools, "echo"); e == nil || !strings.Contains(string(e.InputSchema), `"message"`) {
			t.Errorf("echo = %+v", e)
		}
	})

	cb.check("tools/call echo, add (structuredContent), increment", func(t *testing.T) {
		if res := callTool(t, c, "echo", map[string]string{"message": "hi"}); res.IsError || res.Text() != "Echo: hi" {
			t.Errorf("echo = %+v", res)
		}
		res := callTool(t, c, "add", map[string]any{"a": 1, "b": 2})
		if res.IsError || res.Text() != "1 + 2 = 3" || !jsonEqual(res.StructuredContent, []byte(`{"sum":3}`)) {
			t.Errorf("add = %+v (structuredContent %s)", res, res.StructuredContent)
		}
		first := counterOf(t, callTool(t, c, "increment", map[string]any{"by": 1}))
		if second := counterOf(t, callTool(t, c, "increment", map[string]any{"by": 1})); second != first+1 {
			t.Errorf("increment ran to %d then %d", first, second)
		}
	})

	if mode == "http" {
		cb.check("answer framing of tools/call", func(t *testing.T) {
			start := cb.wire.len()
			callTool(t, c, "echo", map[string]string{"message": "framing"})
			ex := cb.wire.since(start)
			sse := strings.Contains(ex, "Content-Type: text/event-stream")
			json := strings.Contains(ex, "Content-Type: application/json]")
			if rev != "server's choice" {
				cb.note("2025-11-25 (stateless legacy leg), %s handler: tools/call answered as %s", responseMode, map[bool]string{true: "an event stream", false: "JSON"}[sse])
				return
			}
			// A handler that sends nothing before its result is answered with a JSON body,
			// unless the handler is told to always stream.
			if wantSSE := responseMode == "sse"; sse != wantSSE || json == wantSSE {
				t.Errorf("responseMode %s: tools/call answered with event stream %v, JSON %v; exchanges:\n%s", responseMode, sse, json, ex)
			}
		})
	}

	cb.check("errors: handler failure, invalid arguments, unknown tool, resource, prompt", func(t *testing.T) {
		r0 := retries.n.Load()
		res, err := c.CallTool(ctxFor(t), "fail", map[string]any{"reason": "interop"})
		if err != nil || !res.IsError || !strings.Contains(res.Text(), "failed on purpose: interop") {
			t.Errorf("fail = %+v, %v; want an isError result carrying the handler's message", res, err)
		}
		definite := func(what string, res *mcpclient.CallToolResult, err error) {
			t.Helper()
			switch {
			case err == nil && res.IsError:
				cb.note("%s: isError result %q", what, res.Text())
			case err != nil && mcpclient.IsWireError(err):
				cb.note("%s: %s", what, wireErrorOf(err))
			default:
				t.Errorf("%s: %+v, %v; want an isError result or a JSON-RPC error", what, res, err)
			}
		}
		res, err = c.CallTool(ctxFor(t), "add", map[string]any{"a": "x", "b": 2})
		definite("invalid arguments", res, err)
		res, err = c.CallTool(ctxFor(t), "no-such-tool", noArgs)
		definite("unknown tool", res, err)
		if _, err := c.ReadResource(ctxFor(t), "interop://no-such-resource"); err == nil || !mcpclient.IsWireError(err) {
			t.Errorf("ReadResource of an unknown URI: %v, want a JSON-RPC error", err)
		} else {
			cb.note("unknown resource: %s", wireErrorOf(err))
		}
		if _, err := c.GetPrompt(ctxFor(t), "no-such-prompt", nil); err == nil || !mcpclient.IsWireError(err) {
			t.Errorf("GetPrompt of an unknown prompt: %v, want a JSON-RPC error", err)
		} else {
			cb.note("unknown prompt: %s", wireErrorOf(err))
		}
		if n := retries.n.Load() - r0; n != 0 {
			t.Errorf("%d retries for definite failures", n)
		}
	})

	cb.check("pinned id: idempotent resend answered, unsafe resend refused", func(t *testing.T) {
		stamp := time.Now().UnixNano()
		id := mcpclient.StringID(fmt.Sprintf("interop-ts-add-%d", stamp))
		args := map[string]any{"a": 2, "b": 3}
		for i := range 2 {
			// The second send relies on the listing's idempotentHint alone.
			res, err := c.CallTool(ctxFor(t), "add", args, mcpclient.WithRequestID(id))
			if err != nil || res.Text() != "2 + 3 = 5" {
				t.Errorf("add under a pinned id, send %d: %v, %v", i+1, res, err)
			}
		}
		if e, _ := c.Ledger().Lookup(id); e.Attempts != 2 || e.State != mcpclient.StateAnswered {
			t.Errorf("ledger entry of add = %+v", e)
		}
		id = mcpclient.StringID(fmt.Sprintf("interop-ts-increment-%d", stamp))
		before := counterOf(t, callTool(t, c, "increment", map[string]any{"by": 1}, mcpclient.WithRequestID(id)))
		_, err := c.CallTool(ctxFor(t), "increment", map[string]any{"by": 1}, mcpclient.WithRequestID(id))
		if !errors.Is(err, mcpclient.ErrAlreadyAnswered) || mcpclient.IsWireError(err) {
			t.Errorf("increment resent under its answered id: %v, want a local ErrAlreadyAnswered", err)
		}
		if after := counterOf(t, callTool(t, c, "increment", map[string]any{"by": 0})); after != before {
			t.Errorf("counter %d after the refused resend, was %d", after, before)
		}
	})

	cb.check("resources: list, templates, read", func(t *testing.T) {
		resources, err := mcpclient.Collect(c.Resources(ctxFor(t)))
		if err != nil {
			t.Fatalf("ListResources: %s", errorChain(err))
		}
		if len(resources) != 1 || resources[0].URI != "interop://readme" || resources[0].MIMEType != "text/plain" {
			t.Errorf("resources = %+v", resources)
		}
		templates, err := mcpclient.Collect(c.ResourceTemplates(ctxFor(t)))
		if err != nil {
			t.Fatalf("ListResourceTemplates: %s", errorChain(err))
		}
		if len(templates) != 1 || templates[0].URITemplate != "interop://greeting/{name}" {
			t.Errorf("templates = %+v", templates)
		}
		read, err := c.ReadResource(ctxFor(t), "interop://readme")
		if err != nil {
			t.Fatalf("ReadResource: %s", errorChain(err))
		}
		if len(read.Contents) != 1 || read.Contents[0].Text != "This server exists for the interop tests." {
			t.Errorf("ReadResource(readme) = %+v", read)
		}
		read, err = c.ReadResource(ctxFor(t), "interop://greeting/Ada")
		if err != nil {
			t.Fatalf("ReadResource(template): %s", errorChain(err))
		}
		if len(read.Contents) != 1 || read.Contents[0].Text != "Hello, Ada!" || read.Contents[0].URI != "interop://greeting/Ada" {
			t.Errorf("ReadResource(greeting) = %+v", read)
		}
	})

	cb.check("prompts: list, get", func(t *testing.T) {
		prompts, err := mcpclient.Collect(c.Prompts(ctxFor(t)))
		if err != nil {
			t.Fatalf("ListPrompts: %s", errorChain(err))
		}
		if len(prompts) != 1 || prompts[0].Name != "review" || len(prompts[0].Arguments) != 1 || prompts[0].Arguments[0].Name != "code" {
			t.Errorf("prompts = %+v", prompts)
		}
		got, err := c.GetPrompt(ctxFor(t), "review", map[string]string{"code": "x := 1"})
		if err != nil {
			t.Fatalf("GetPrompt: %s", errorChain(err))
		}
		if len(got.Messages) != 1 || got.Messages[0].Role != "user" || got.Messages[0].Content.Text != "Please review:\nx := 1" {
			t.Errorf("GetPrompt = %+v", got)
		}
	})

	cb.check("concurrent calls", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 8 {
			wg.Go(func() {
				res, err := c.CallTool(ctxFor(t), "add", map[string]any{"a": i, "b": i})
				switch want := fmt.Sprintf("%d + %d = %d", i, i, 2*i); {
				case err != nil:
					errs <- fmt.Errorf("add(%d, %d): %s", i, i, errorChain(err))
				case res.Text() != want:
					errs <- fmt.Errorf("add(%d, %d) = %q", i, i, res.Text())
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	cb.check("Close", func(t *testing.T) {
		start := time.Now()
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Close took %v", d)
		}
		if _, err := c.CallTool(ctxFor(t), "echo", map[string]string{"message": "x"}); !errors.Is(err, mcpclient.ErrClosed) {
			t.Errorf("CallTool after Close: %v, want ErrClosed", err)
		}
	})
}

// counterOf reads the counter out of the increment tool's answer, "counter=<n>".
func counterOf(t *testing.T, res *mcpclient.CallToolResult) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimPrefix(res.Text(), "counter="))
	if res.IsError || err != nil {
		t.Fatalf("increment = %+v", res)
	}
	return n
}

// wireErrorOf is the JSON-RPC error inside err, without the request id, so that the same
// answer reads the same in every combination's notes.
func wireErrorOf(err error) string {
	var r *mcpclient.RPCError
	if !errors.As(err, &r) {
		return err.Error()
	}
	return fmt.Sprintf("JSON-RPC error %d %q", r.Code, r.Message)
}
