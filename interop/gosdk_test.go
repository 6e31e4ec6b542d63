package interop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/interop/internal/gosdkserver"
	"github.com/northstar-mcp/mcpclient/transport"
)

const gosdkName = "go-sdk v1.8.0"

// gosdkRevisions are the server's SupportedProtocolVersions settings: "all" is the SDK's whole
// list (2026-07-28 down to 2024-11-05); the others restrict it to one revision, which the
// server must then negotiate.
var gosdkRevisions = []string{"all", "2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// modernRevision is the first stateless revision: server/discover instead of initialize, no
// sessions, no ping, multi round-trip requests instead of server-to-client requests.
const modernRevision = "2026-07-28"

// wantRevision is the revision the client should end up with: the server's only one, or the
// newest both speak over the transport. The go-sdk serves 2026-07-28 over stdio and stateless
// Streamable HTTP only; "" means no expectation (the server allows only a revision the
// transport cannot carry).
func wantRevision(m gosdkMode, rev string) string {
	modernOK := m.kind == "stdio" || m.stateless
	switch {
	case rev == "all" && modernOK:
		return modernRevision
	case rev == "all":
		return "2025-11-25"
	case rev == modernRevision && !modernOK:
		return ""
	}
	return rev
}

type gosdkMode struct {
	name      string
	kind      string // "streamable", "legacy" or "stdio"
	json      bool   // StreamableHTTPOptions.JSONResponse
	stateless bool   // StreamableHTTPOptions.Stateless
}

func (m gosdkMode) stateful() bool { return m.kind == "streamable" && !m.stateless }

var gosdkModes = []gosdkMode{
	{name: "streamable-http json", kind: "streamable", json: true},
	{name: "streamable-http sse", kind: "streamable"},
	{name: "streamable-http stateless", kind: "streamable", stateless: true},
	{name: "streamable-http stateless json", kind: "streamable", stateless: true, json: true},
	{name: "legacy http+sse", kind: "legacy"},
	{name: "stdio", kind: "stdio"},
}

// TestGoSDK runs the client against the official go-sdk's server over every transport it has,
// at every protocol revision.
func TestGoSDK(t *testing.T) {
	noOrphans(t)
	bin := buildGoSDKServer(t)
	for _, m := range gosdkModes {
		t.Run(m.name, func(t *testing.T) {
			for _, rev := range gosdkRevisions {
				t.Run(rev, func(t *testing.T) { runGoSDK(t, bin, m, rev) })
			}
		})
	}
}

// buildGoSDKServer builds the gosdkserver program into a temporary directory.
func buildGoSDKServer(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build gosdkserver: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "gosdkserver")
	cmd := exec.Command(goBin, "build", "-o", bin, "./gosdkserver")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./gosdkserver: %v\n%s", err, out)
	}
	return bin
}

// gosdkEnv is one server under test and how to reach it.
type gosdkEnv struct {
	mode gosdkMode
	srv  *mcp.Server  // in process; nil for stdio
	url  string       // HTTP endpoint
	hc   *http.Client // recording client, shared by the transports and raw probes
	bin  string
	args []string
	cb   *combo
}

func (e *gosdkEnv) transport() transport.Transport {
	switch e.mode.kind {
	case "streamable":
		return &transport.HTTP{URL: e.url, Client: e.hc}
	case "legacy":
		return &transport.SSE{URL: e.url, Client: e.hc}
	}
	return &transport.Command{Path: e.bin, Args: e.args, Stderr: e.cb,
		CloseTimeout: 3 * time.Second, TermTimeout: 2 * time.Second}
}

func runGoSDK(t *testing.T, bin string, m gosdkMode, rev string) {
	cb := newCombo(t, gosdkName, m.name, rev)
	var versions []string
	if rev != "all" {
		versions = []string{rev}
	}
	want := wantRevision(m, rev)
	env := &gosdkEnv{mode: m, cb: cb, bin: bin}
	switch m.kind {
	case "streamable", "legacy":
		env.srv = gosdkserver.New(gosdkserver.Options{Versions: versions})
		get := func(*http.Request) *mcp.Server { return env.srv }
		var h http.Handler
		if m.kind == "legacy" {
			h = mcp.NewSSEHandler(get, nil)
		} else {
			h = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{JSONResponse: m.json, Stateless: m.stateless})
		}
		hs := httptest.NewServer(h) // 127.0.0.1 only
		t.Cleanup(func() {
			for ss := range env.srv.Sessions() {
				ss.Close()
			}
			hs.Close()
		})
		cb.wire = &wireLog{}
		env.hc = cb.wire.client(t)
		env.url = hs.URL
	case "stdio":
		env.args = []string{"-allow-exit"}
		if versions != nil {
			env.args = append(env.args, "-versions", rev)
		}
	}

	c, retries, err := cb.connect(t, env.transport())
	if err != nil && want == "" {
		// The server allows only a revision this transport cannot carry: failing is right, but
		// the server answered, so the failure is definite, not "not delivered".
		cb.check("connect refused definitely", func(t *testing.T) {
			var e *mcpclient.Error
			errors.As(err, &e)
			cb.note("server restricted to %s over %s: Connect failed: %s", rev, m.name, errorChain(err))
			if e == nil || e.Code == mcpclient.CodeNotDelivered || e.Attempts > 1 {
				t.Errorf("Connect: %s\nwant a definite failure after one attempt: the server answered every request (see the exchanges)\n%s",
					errorChain(err), cb.wire.since(0))
			}
		})
		return
	}
	if err != nil {
		t.Fatalf("Connect: %s\nHTTP exchanges:\n%s", errorChain(err), cb.wire.since(0))
	}
	negotiated := c.ProtocolVersion()
	cb.setNegotiated(negotiated)
	modern := negotiated >= modernRevision
	if want == "" {
		cb.note("server restricted to %s, which this transport cannot carry: the client negotiated %q", rev, negotiated)
	}
	// stateful: the session has an Mcp-Session-Id.
	stateful := m.stateful() && !modern
	// serverRequests: the server can send requests to the client (stateless servers cannot).
	serverRequests := !m.stateless

	cb.check("initialize", func(t *testing.T) {
		if got := c.ProtocolVersion(); want != "" && got != want {
			t.Errorf("ProtocolVersion() = %q, want %q", got, want)
		}
		if si := c.ServerInfo(); si.Name != gosdkserver.Name || si.Version != gosdkserver.Version {
			t.Errorf("ServerInfo() = %+v", si)
		}
		caps := c.ServerCapabilities()
		if caps.Tools == nil || caps.Resources == nil || caps.Prompts == nil {
			t.Errorf("ServerCapabilities() = %+v, want tools, resources and prompts", caps)
		}
		if got := c.InitializeResult().Instructions; got != gosdkserver.Instructions {
			t.Errorf("Instructions = %q", got)
		}
		if scope := c.Receipts(); scope != "" {
			t.Errorf("Receipts() = %q; the go-sdk declares none", scope)
		}
		sid := c.SessionID()
		if stateful != (sid != "") {
			t.Errorf("SessionID() = %q; want one exactly when the server is stateful Streamable HTTP", sid)
		}
	})

	cb.check("ping", func(t *testing.T) {
		// In 2026-07-28, which has no ping, Ping is a server/discover.
		if err := c.Ping(ctxFor(t)); err != nil {
			t.Fatalf("Ping in %s: %s", negotiated, errorChain(err))
		}
	})

	wantTools := []string{"add", "ask", "badstruct", "echo", "executions", "fail", "log", "pingback", "progress", "slow", "touch"}
	if m.kind == "stdio" {
		wantTools = append(wantTools, "exit")
	}
	slices.Sort(wantTools)
	cb.check("tools/list paginated", func(t *testing.T) {
		page, err := c.ListToolsPage(ctxFor(t), "")
		if err != nil {
			t.Fatalf("ListToolsPage: %s", errorChain(err))
		}
		if len(page.Tools) != gosdkserver.PageSize || page.NextCursor == "" {
			t.Errorf("first page: %d tools, cursor %q; want %d and a cursor", len(page.Tools), page.NextCursor, gosdkserver.PageSize)
		}
		tools, err := c.CachedTools(ctxFor(t))
		if err != nil {
			t.Fatalf("ListTools: %s", errorChain(err))
		}
		names := toolNames(tools)
		slices.Sort(names)
		if !slices.Equal(names, wantTools) {
			t.Errorf("ListTools names = %v, want %v", names, wantTools)
		}
		var iterated []string
		for tl, err := range c.Tools(ctxFor(t)) {
			if err != nil {
				t.Fatalf("Tools: %s", errorChain(err))
			}
			iterated = append(iterated, tl.Name)
		}
		slices.Sort(iterated)
		if !slices.Equal(iterated, wantTools) {
			t.Errorf("Tools iterator names = %v, want %v", iterated, wantTools)
		}
		add := findTool(tools, "add")
		if add == nil || !strings.Contains(string(add.OutputSchema), `"sum"`) || !strings.Contains(string(add.InputSchema), `"a"`) {
			t.Errorf("add tool = %+v; want input and output schemas", add)
		}
		if echo := findTool(tools, "echo"); echo == nil || echo.Annotations == nil || echo.Annotations.ReadOnlyHint == nil || !*echo.Annotations.ReadOnlyHint {
			t.Errorf("echo tool annotations = %+v; want readOnlyHint", echo)
		}
	})

	executionsOf := func(t *testing.T, c *mcpclient.Client) gosdkserver.Executions {
		t.Helper()
		res := callTool(t, c, "executions", nil)
		var e gosdkserver.Executions
		if err := json.Unmarshal(res.StructuredContent, &e); err != nil {
			t.Fatalf("executions structuredContent %s: %v", res.StructuredContent, err)
		}
		return e
	}
	executions := func(t *testing.T) gosdkserver.Executions { t.Helper(); return executionsOf(t, c) }

	cb.check("tools/call add", func(t *testing.T) {
		res := callTool(t, c, "add", map[string]any{"a": 1, "b": 2})
		if res.IsError || res.Text() != "3" {
			t.Errorf("add(1, 2) = %+v; want text 3", res)
		}
		if !jsonEqual(res.StructuredContent, []byte(`{"sum":3}`)) {
			t.Errorf("add(1, 2) structuredContent = %s; want {\"sum\":3}", res.StructuredContent)
		}
	})

	cb.check("tools/call fail: isError, not retried", func(t *testing.T) {
		before := executions(t)
		r0 := retries.n.Load()
		res := callTool(t, c, "fail", nil)
		if !res.IsError || !strings.Contains(res.Text(), "deliberate failure") {
			t.Errorf("fail = %+v; want an isError result", res)
		}
		req, err := c.NewRequest("tools/call", mcpclient.CallToolParams{Name: "fail"})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(ctxFor(t), req)
		if err != nil {
			t.Fatalf("Do(fail): %s", errorChain(err))
		}
		if resp.Attempts != 1 {
			t.Errorf("Do(fail) attempts = %d, want 1", resp.Attempts)
		}
		if e, ok := c.Ledger().Lookup(req.ID()); !ok || e.State != mcpclient.StateAnswered || e.Attempts != 1 {
			t.Errorf("ledger entry of the fail call = %+v, %v; want answered after 1 attempt", e, ok)
		}
		if got := executions(t).Fail - before.Fail; got != 2 {
			t.Errorf("fail ran %d times for 2 calls", got)
		}
		if n := retries.n.Load() - r0; n != 0 {
			t.Errorf("%d retries", n)
		}
	})

	cb.check("tools/call unknown tool: JSON-RPC error, not retried", func(t *testing.T) {
		r0 := retries.n.Load()
		res, err := c.CallTool(ctxFor(t), "no-such-tool", nil)
		switch {
		case err == nil && res.IsError:
			cb.note("unknown tool: isError result %q", res.Text())
		case err == nil:
			t.Errorf("unknown tool answered %+v", res)
		default:
			var rpc *mcpclient.RPCError
			var e *mcpclient.Error
			if !errors.As(err, &rpc) || !errors.As(err, &e) || e.Code != mcpclient.CodeServerError || e.Attempts != 1 {
				t.Errorf("unknown tool: %s; want a server error after 1 attempt", errorChain(err))
			} else if rev == "all" {
				cb.note("unknown tool: JSON-RPC error %d %q", rpc.Code, rpc.Message)
			}
		}
		if n := retries.n.Load() - r0; n != 0 {
			t.Errorf("%d retries", n)
		}
	})

	cb.check("pinned id: reuse refused locally, a resend after the answer refused without receipts", func(t *testing.T) {
		id := mcpclient.StringID(fmt.Sprintf("interop-pinned-%d", time.Now().UnixNano()))
		before := executions(t)
		res := callTool(t, c, "add", map[string]any{"a": 2, "b": 3}, mcpclient.WithRequestID(id))
		if res.Text() != "5" {
			t.Errorf("add(2, 3) = %q", res.Text())
		}
		_, err := c.CallTool(ctxFor(t), "add", map[string]any{"a": 4, "b": 4}, mcpclient.WithRequestID(id))
		if !errors.Is(err, mcpclient.ErrRequestIDReused) || mcpclient.IsWireError(err) {
			t.Errorf("other content under a used id: %v; want a local ErrRequestIDReused", err)
		}
		if got := executions(t).Add - before.Add; got != 1 {
			t.Errorf("add ran %d times after the refused reuse, want 1: the refusal must not reach the server", got)
		}
		// The same content under the same id is a resend of an answered request: the go-sdk
		// keeps no receipts and would run add again, so the client refuses it before sending.
		_, err = c.CallTool(ctxFor(t), "add", map[string]any{"a": 2, "b": 3}, mcpclient.WithRequestID(id))
		var answered *mcpclient.AnsweredError
		if !errors.Is(err, mcpclient.ErrAlreadyAnswered) || !errors.As(err, &answered) || answered.Record.ID != id {
			t.Errorf("resend of the answered add(2, 3): %v; want ErrAlreadyAnswered with its record", err)
		}
		if got := executions(t).Add - before.Add; got != 1 {
			t.Errorf("add ran %d times after the refused resend, want 1", got)
		}
		if e, _ := c.Ledger().Lookup(id); e.Attempts != 1 || e.State != mcpclient.StateAnswered {
			t.Errorf("ledger entry = %+v; want answered after 1 attempt", e)
		}
		if rev == "all" {
			cb.note("same id + same content after completion: refused locally (ErrAlreadyAnswered); the go-sdk keeps no receipts and would run add again")
		}
		// A numeric pinned id is routed as well.
		res = callTool(t, c, "add", map[string]any{"a": 1, "b": 1}, mcpclient.WithRequestID(mcpclient.IntID(time.Now().UnixNano()%1_000_000_000)))
		if res.Text() != "2" {
			t.Errorf("add(1, 1) under a numeric id = %q", res.Text())
		}
	})

	cb.check("NewRequest/Do, Resend, Supersede", func(t *testing.T) {
		before := executions(t)
		req, err := c.NewRequest("tools/call", mcpclient.CallToolParams{Name: "add", Arguments: map[string]any{"a": 10, "b": 20}})
		if err != nil {
			t.Fatal(err)
		}
		var res mcpclient.CallToolResult
		resp, err := c.Do(ctxFor(t), req)
		if err != nil {
			t.Fatalf("Do: %s", errorChain(err))
		}
		if resp.Decode(&res); res.Text() != "30" || resp.Request.ID() != req.ID() {
			t.Errorf("Do(add 10 20) = %s", resp.Result)
		}
		// Without receipts a Resend of the answered request would run it again: refused.
		if _, err := c.Resend(ctxFor(t), req); !errors.Is(err, mcpclient.ErrAlreadyAnswered) {
			t.Errorf("Resend of the answered add(10, 20): %v; want ErrAlreadyAnswered", err)
		}
		if _, err := c.Supersede(ctxFor(t), req, mcpclient.Inspection{}, nil); !errors.Is(err, mcpclient.ErrInspectionRequired) {
			t.Errorf("Supersede without an inspection: %v, want ErrInspectionRequired", err)
		}
		resp, err = c.Supersede(ctxFor(t), req, mcpclient.Inspection{Checked: "the executions tool", Found: "add ran once"},
			mcpclient.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1, "b": 1}})
		if err != nil {
			t.Fatalf("Supersede: %s", errorChain(err))
		}
		if resp.Decode(&res); res.Text() != "2" || resp.Request.Supersedes() != req.ID() || resp.Request.ID() == req.ID() {
			t.Errorf("Supersede = %s under %v superseding %v", resp.Result, resp.Request.ID(), resp.Request.Supersedes())
		}
		if !strings.Contains(string(resp.Request.Params()), `"supersedes"`) {
			t.Errorf("superseding params %s lack _meta.supersedes", resp.Request.Params())
		}
		if got := executions(t).Add - before.Add; got != 2 {
			t.Errorf("add ran %d times for Do, the refused Resend and Supersede, want 2", got)
		}
	})

	cb.check("resources and prompts via Do", func(t *testing.T) {
		// The client has no typed API for resources and prompts yet: the generic Do carries them.
		var resources struct {
			Resources []struct{ URI, Name string } `json:"resources"`
		}
		do(t, c, "resources/list", nil, &resources)
		if len(resources.Resources) != 1 || resources.Resources[0].URI != gosdkserver.GreetingURI {
			t.Errorf("resources/list = %+v", resources)
		}
		var read struct {
			Contents []struct{ URI, Text string } `json:"contents"`
		}
		do(t, c, "resources/read", map[string]string{"uri": gosdkserver.GreetingURI}, &read)
		if len(read.Contents) != 1 || read.Contents[0].Text != gosdkserver.GreetingText {
			t.Errorf("resources/read = %+v", read)
		}
		var templates struct {
			ResourceTemplates []struct {
				URITemplate string `json:"uriTemplate"`
			} `json:"resourceTemplates"`
		}
		do(t, c, "resources/templates/list", nil, &templates)
		if len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate != gosdkserver.ItemTemplate {
			t.Errorf("resources/templates/list = %+v", templates)
		}
		do(t, c, "resources/read", map[string]string{"uri": "interop://items/7"}, &read)
		if len(read.Contents) != 1 || read.Contents[0].Text != "item interop://items/7" {
			t.Errorf("resources/read of a template = %+v", read)
		}
		var prompts struct {
			Prompts []struct{ Name string } `json:"prompts"`
		}
		do(t, c, "prompts/list", nil, &prompts)
		if len(prompts.Prompts) != 1 || prompts.Prompts[0].Name != gosdkserver.PromptName {
			t.Errorf("prompts/list = %+v", prompts)
		}
		var prompt struct {
			Messages []struct {
				Role    string
				Content mcpclient.Content
			} `json:"messages"`
		}
		do(t, c, "prompts/get", map[string]any{"name": gosdkserver.PromptName, "arguments": map[string]string{"name": "Ada"}}, &prompt)
		if len(prompt.Messages) != 1 || prompt.Messages[0].Content.Text != "Hello, Ada!" {
			t.Errorf("prompts/get = %+v", prompt)
		}
	})

	cb.check("concurrent calls", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 8 {
			wg.Go(func() {
				res, err := c.CallTool(ctxFor(t), "add", map[string]any{"a": i, "b": i})
				switch {
				case err != nil:
					errs <- fmt.Errorf("add(%d, %d): %s", i, i, errorChain(err))
				case res.Text() != fmt.Sprint(2*i):
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

	cb.check("server-to-client ping, client with WithServerStream", func(t *testing.T) {
		// Without handlers the client opens the GET stream only when asked to: a server that
		// pings its clients there needs WithServerStream.
		c, _, err := cb.connect(t, env.transport(), mcpclient.WithServerStream())
		if err != nil {
			t.Fatalf("Connect: %s", errorChain(err))
		}
		defer c.Close()
		res, err := c.CallTool(ctxFor(t), "pingback", nil)
		if err != nil {
			t.Fatalf("pingback: %s", errorChain(err))
		}
		if !serverRequests || modern {
			// The go-sdk rejects server-to-client requests in stateless mode, and 2026-07-28 has no
			// ping: nothing to test.
			if rev == "all" {
				cb.note("%s/%s: server-to-client ping: %q", m.name, negotiated, res.Text())
			}
			return
		}
		if res.IsError || res.Text() != "pong" {
			t.Errorf("pingback = %q (isError %v): the client did not answer the server's ping", res.Text(), res.IsError)
		}
	})

	cb.check("notifications/progress and server ping, client with a handler", func(t *testing.T) {
		var progress atomic.Int64
		c2, _, err := cb.connect(t, env.transport(), mcpclient.WithNotificationHandler("notifications/progress",
			func(ctx context.Context, method string, params json.RawMessage) { progress.Add(1) }))
		if err != nil {
			t.Fatalf("Connect: %s", errorChain(err))
		}
		defer c2.Close()
		if stateful && m.json {
			// Server messages go to the GET stream here, which the client opens in the
			// background once Connect has returned: until it is up, the go-sdk drops them
			// ("stream not connected"). Wait for it rather than race it.
			if !waitFor(2*time.Second, func() bool { return cb.wire.streamOpen(c2.SessionID()) }) {
				t.Errorf("the client opened no GET stream for session %s", c2.SessionID())
			}
		}
		var res mcpclient.CallToolResult
		resp := do(t, c2, "tools/call", mcpclient.CallToolParams{Name: "progress", Meta: json.RawMessage(`{"progressToken":"interop-progress"}`)}, &res)
		if res.IsError && !m.stateless {
			t.Errorf("progress tool: %s", resp.Result)
		}
		got := waitFor(2*time.Second, func() bool { return progress.Load() >= 2 })
		switch {
		case m.stateless:
			if rev == "all" {
				cb.note("stateless: %d of 2 progress notifications reached the client (result %q)", progress.Load(), res.Text())
			}
		case !got:
			t.Errorf("%d of 2 progress notifications arrived", progress.Load())
		}
		res2, err := c2.CallTool(ctxFor(t), "pingback", nil)
		if err != nil {
			t.Fatalf("pingback: %s", errorChain(err))
		}
		if serverRequests && !modern && (res2.IsError || res2.Text() != "pong") {
			t.Errorf("pingback = %q (isError %v)", res2.Text(), res2.IsError)
		}
	})

	gosdkFeatures(t, cb, env, c, negotiated, stateful, serverRequests, executionsOf)

	if m.kind == "streamable" {
		cb.check("raw probe: id reuse and in-flight duplicate", func(t *testing.T) {
			probeIDReuse(t, cb, env, c, rev == "all" || rev == modernRevision)
		})
	}

	if stateful {
		cb.check("session lost (DELETE by another party): reconnect and resend", func(t *testing.T) {
			c3, r3, err := cb.connect(t, env.transport())
			if err != nil {
				t.Fatalf("Connect: %s", errorChain(err))
			}
			defer c3.Close()
			sid := c3.SessionID()
			if del := rawHTTP(t, env.hc, http.MethodDelete, env.url, sid, c3.ProtocolVersion(), ""); del.Status/100 != 2 {
				t.Fatalf("raw DELETE: %v", del)
			}
			before := executions(t)
			res, err := c3.CallTool(ctxFor(t), "add", map[string]any{"a": 20, "b": 22})
			if err != nil {
				t.Fatalf("add after the session was deleted: %s", errorChain(err))
			}
			if res.Text() != "42" {
				t.Errorf("add(20, 22) = %q", res.Text())
			}
			if got := executions(t).Add - before.Add; got != 1 {
				t.Errorf("add ran %d times", got)
			}
			if c3.SessionID() == sid || c3.SessionID() == "" {
				t.Errorf("session id %q after reconnecting, was %q", c3.SessionID(), sid)
			}
			if n := r3.n.Load(); n != 1 {
				t.Errorf("%d retries, want 1 (404 on the known session: not delivered)", n)
			}
		})

		cb.check("Detach keeps the session, Close deletes it", func(t *testing.T) {
			c4, _, err := cb.connect(t, env.transport())
			if err != nil {
				t.Fatalf("Connect: %s", errorChain(err))
			}
			sid, v := c4.SessionID(), c4.ProtocolVersion()
			c4.Detach()
			ping := `{"jsonrpc":"2.0","id":"raw-ping","method":"ping"}`
			if r := rawHTTP(t, env.hc, http.MethodPost, env.url, sid, v, ping); r.Status != http.StatusOK || !strings.Contains(r.Body, `"raw-ping"`) {
				t.Errorf("ping on the detached session: %v; want it alive", r)
			}
			rawHTTP(t, env.hc, http.MethodDelete, env.url, sid, v, "")

			c5, _, err := cb.connect(t, env.transport())
			if err != nil {
				t.Fatalf("Connect: %s", errorChain(err))
			}
			sid = c5.SessionID()
			if err := c5.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if r := rawHTTP(t, env.hc, http.MethodPost, env.url, sid, v, ping); r.Status != http.StatusNotFound {
				t.Errorf("ping on the closed session: %v; want 404 (Close sends DELETE)", r)
			}
			if _, err := c5.ListToolsPage(ctxFor(t), ""); !errors.Is(err, mcpclient.ErrClosed) {
				t.Errorf("tools/list after Close: %v, want ErrClosed", err)
			}
		})
	}

	if m.kind == "legacy" {
		cb.check("stream lost (server closed the session): reconnect", func(t *testing.T) {
			c3, _, err := cb.connect(t, env.transport())
			if err != nil {
				t.Fatalf("Connect: %s", errorChain(err))
			}
			defer c3.Close()
			n := 0
			for ss := range env.srv.Sessions() {
				ss.Close()
				n++
			}
			if n == 0 {
				t.Fatal("no server session to close")
			}
			// The client learns of the loss when the stream ends; a ping a moment later must find
			// a new session.
			var err2 error
			if !waitFor(5*time.Second, func() bool { err2 = c3.Ping(ctxFor(t)); return err2 == nil }) {
				t.Errorf("ping after the server closed the session: %s", errorChain(err2))
			}
		})
	}

	if m.kind == "stdio" {
		cb.check("server process exits mid-call: outcome unknown, then reconnect", func(t *testing.T) {
			c3, _, err := cb.connect(t, env.transport())
			if err != nil {
				t.Fatalf("Connect: %s", errorChain(err))
			}
			defer c3.Close()
			_, err = c3.CallTool(ctxFor(t), "exit", nil)
			if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
				t.Errorf("exit: %s; want ErrOutcomeUnknown", errorChain(err))
			}
			if _, err := c3.ListToolsPage(ctxFor(t), ""); err != nil {
				t.Errorf("tools/list after the server exited: %s", errorChain(err))
			}
			if res := callTool(t, c3, "add", map[string]any{"a": 1, "b": 2}); res.Text() != "3" {
				t.Errorf("add on the new process = %q", res.Text())
			}
		})
	}

	cb.check("Close", func(t *testing.T) {
		start := time.Now()
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Close took %v", d)
		}
		if _, err := c.CallTool(ctxFor(t), "add", map[string]any{"a": 1, "b": 1}); !errors.Is(err, mcpclient.ErrClosed) {
			t.Errorf("CallTool after Close: %v, want ErrClosed", err)
		}
		if n := retries.n.Load(); n != 0 {
			t.Errorf("the main client retried %d times over the run", n)
		}
	})
}

// probeIDReuse asks the server directly, outside the client, what it does with an id used
// twice: after the first request finished with other content, and while it is still running.
// It records the answers as notes; it fails only when the server's answer is not one the
// client's classification expects of a server without receipts.
func probeIDReuse(t *testing.T, cb *combo, env *gosdkEnv, c *mcpclient.Client, noteIt bool) {
	sid, v := c.SessionID(), c.ProtocolVersion()
	meta := ""
	var hdr []string
	if v >= modernRevision {
		hdr = []string{"Mcp-Method", "tools/call"}
		// Stateless revisions carry the revision, client info and capabilities in every request.
		meta = fmt.Sprintf(`,"_meta":{"io.modelcontextprotocol/protocolVersion":%q,"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"0"},"io.modelcontextprotocol/clientCapabilities":{}}`, v)
	}
	call := func(id string, a, b int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"add","arguments":{"a":%d,"b":%d}%s}}`, id, a, b, meta)
	}
	id := fmt.Sprintf("raw-%d", time.Now().UnixNano())
	first := rawHTTP(t, env.hc, http.MethodPost, env.url, sid, v, call(id, 1, 2), append(hdr, "Mcp-Name", "add")...)
	second := rawHTTP(t, env.hc, http.MethodPost, env.url, sid, v, call(id, 5, 5), append(hdr, "Mcp-Name", "add")...)
	if !strings.Contains(first.Body, `"3"`) {
		t.Errorf("raw add(1, 2): %v", first)
	}
	if noteIt {
		cb.note("%s: other content under a finished id (raw): server answered %v", v, summarize(second))
	}

	// In flight: the second POST of the same id arrives while slow still runs.
	slow := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1500}%s}}`, id+"-slow", meta)
	done := make(chan rawReply, 1)
	go func() {
		done <- rawHTTP(t, env.hc, http.MethodPost, env.url, sid, v, slow, append(hdr, "Mcp-Name", "slow")...)
	}()
	time.Sleep(300 * time.Millisecond)
	dup := rawHTTP(t, env.hc, http.MethodPost, env.url, sid, v, slow, append(hdr, "Mcp-Name", "slow")...)
	orig := <-done
	if !strings.Contains(orig.Body, "done") {
		t.Errorf("raw slow: %v", orig)
	}
	if noteIt {
		cb.note("%s: same id while in flight (raw): server answered %v", v, summarize(dup))
	}
}

func summarize(r rawReply) string {
	body := strings.Join(strings.Fields(r.Body), " ")
	if len(body) > 200 {
		body = body[:200] + "…"
	}
	return fmt.Sprintf("HTTP %d %s %s", r.Status, r.ContentType, body)
}
