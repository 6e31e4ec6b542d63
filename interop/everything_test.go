package interop_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/transport"
)

// everythingVersion is the @modelcontextprotocol/server-everything release under test;
// EVERYTHING_VERSION overrides it.
const everythingVersion = "2026.8.31"

// everythingEntry installs the server with everything.sh, once per test binary, and returns
// the path of its entry point, or why it cannot be had.
var everythingEntry = sync.OnceValues(func() (string, error) {
	for _, tool := range []string{"node", "npm", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("%s not found in PATH", tool)
		}
	}
	cmd := exec.Command("bash", "everything.sh", everythingVersionToUse())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("bash everything.sh: %v\n%s", err, stderr.String())
	}
	entry := strings.TrimSpace(string(out))
	if _, err := os.Stat(entry); err != nil {
		return "", fmt.Errorf("everything.sh printed %q: %v", entry, err)
	}
	return entry, nil
})

func everythingVersionToUse() string {
	if v := os.Getenv("EVERYTHING_VERSION"); v != "" {
		return v
	}
	return everythingVersion
}

// TestEverything runs the client against the reference server of the TypeScript SDK,
// @modelcontextprotocol/server-everything, over stdio, Streamable HTTP and HTTP+SSE.
func TestEverything(t *testing.T) {
	entry, err := everythingEntry()
	if err != nil {
		t.Skipf("server-everything unavailable (needs node and npm, and the npm registry on first use): %v", err)
	}
	noOrphans(t)
	name := "server-everything " + everythingVersionToUse()
	for _, mode := range []string{"stdio", "streamableHttp", "sse"} {
		t.Run(mode, func(t *testing.T) { runEverything(t, name, entry, mode) })
	}
}

// noArgs is the arguments of a tool that takes none.
var noArgs = map[string]any{}

// requestOf returns the bytes of the frozen request an error is about.
func requestOf(err error) string {
	var e *mcpclient.Error
	if errors.As(err, &e) && e.Request != nil {
		return string(e.Request.Bytes())
	}
	return "(none)"
}

// everythingEnv is one running server-everything and how to reach it.
type everythingEnv struct {
	mode  string
	entry string
	url   string       // HTTP modes
	hc    *http.Client // recording client of the HTTP modes
	cb    *combo
}

func (e *everythingEnv) transport() transport.Transport {
	switch e.mode {
	case "streamableHttp":
		return &transport.HTTP{URL: e.url, Client: e.hc}
	case "sse":
		return &transport.SSE{URL: e.url, Client: e.hc}
	}
	return &transport.Command{Path: "node", Args: []string{e.entry, "stdio"}, Stderr: e.cb,
		CloseTimeout: 3 * time.Second, TermTimeout: 2 * time.Second}
}

// startEverythingHTTP starts the server in an HTTP mode on 127.0.0.1, on a port the kernel
// chose, and returns its base URL. The process group is killed at cleanup.
func startEverythingHTTP(t *testing.T, cb *combo, entry, mode string) string {
	t.Helper()
	preload, err := filepath.Abs(filepath.Join("testdata", "loopback.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "--require", preload, entry, mode)
	cmd.Env = append(os.Environ(), "PORT=0")
	return startListening(t, cb, cmd)
}

// startListening starts cmd, a server that writes "MCPINTEROP_LISTENING <host> <port>" to its
// stderr once it listens on 127.0.0.1, and returns its base URL. Its output goes to cb; its
// process group is killed at cleanup.
func startListening(t *testing.T, cb *combo, cmd *exec.Cmd) string {
	t.Helper()
	what := strings.Join(cmd.Args, " ")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout = cb
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", what, err)
	}
	listening := make(chan string, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(cb, "stderr:", line)
			if f := strings.Fields(line); len(f) == 3 && f[0] == "MCPINTEROP_LISTENING" {
				select {
				case listening <- f[2]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	t.Cleanup(func() {
		// SIGTERM to the group, then SIGKILL; always reap.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() {
			<-copied
			cmd.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	select {
	case port := <-listening:
		return "http://127.0.0.1:" + port
	case <-copied:
		t.Fatalf("%s exited before listening", what)
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not listen within 20s", what)
	}
	return ""
}

func runEverything(t *testing.T, name, entry, mode string) {
	transportName := map[string]string{"stdio": "stdio", "streamableHttp": "streamable-http", "sse": "legacy http+sse"}[mode]
	cb := newCombo(t, name, transportName, "server's choice")
	env := &everythingEnv{mode: mode, entry: entry, cb: cb}
	switch mode {
	case "streamableHttp":
		env.url = startEverythingHTTP(t, cb, entry, mode) + "/mcp"
	case "sse":
		env.url = startEverythingHTTP(t, cb, entry, mode) + "/sse"
	}
	if mode != "stdio" {
		cb.wire = &wireLog{}
		env.hc = cb.wire.client(t)
	}

	c, retries, err := cb.connect(t, env.transport())
	if err != nil {
		t.Fatalf("Connect: %s\nHTTP exchanges:\n%s", errorChain(err), cb.wire.since(0))
	}
	cb.setNegotiated(c.ProtocolVersion())
	if ex := cb.wire.since(0); strings.Contains(ex, "server/discover") {
		first := ex
		if i := strings.Index(ex, "--- #1"); i > 0 {
			first = ex[:i]
		}
		cb.note("server/discover (the client's first try) answered: %s", strings.Join(strings.Fields(first), " "))
	}

	cb.check("initialize", func(t *testing.T) {
		if got := c.ProtocolVersion(); got != mcpclient.ProtocolVersion20251125 {
			t.Errorf("ProtocolVersion() = %q, want 2025-11-25 (the server's newest)", got)
		}
		if si := c.ServerInfo(); si.Name != "mcp-servers/everything" {
			t.Errorf("ServerInfo() = %+v", si)
		}
		caps := c.ServerCapabilities()
		if caps.Tools == nil || caps.Resources == nil || caps.Prompts == nil || caps.Logging == nil {
			t.Errorf("ServerCapabilities() = %+v", caps)
		}
		if c.InitializeResult().Instructions == "" {
			t.Errorf("no instructions")
		}
		if sid := c.SessionID(); (mode == "streamableHttp") != (sid != "") {
			t.Errorf("SessionID() = %q", sid)
		}
	})

	cb.check("ping", func(t *testing.T) {
		if err := c.Ping(ctxFor(t)); err != nil {
			t.Fatalf("Ping: %s", errorChain(err))
		}
	})

	var tools []*mcpclient.Tool
	cb.check("tools/list", func(t *testing.T) {
		var err error
		if tools, err = c.CachedTools(ctxFor(t)); err != nil {
			t.Fatalf("ListTools: %s", errorChain(err))
		}
		names := toolNames(tools)
		for _, want := range []string{"echo", "get-sum", "get-structured-content", "trigger-long-running-operation", "toggle-simulated-logging"} {
			if !slices.Contains(names, want) {
				t.Errorf("tools %v lack %s", names, want)
			}
		}
		if sc := findTool(tools, "get-structured-content"); sc == nil || len(sc.OutputSchema) == 0 {
			t.Errorf("get-structured-content has no outputSchema: %+v", sc)
		}
	})

	cb.check("tools/call echo, get-sum, get-structured-content", func(t *testing.T) {
		if res := callTool(t, c, "echo", map[string]string{"message": "hi"}); res.IsError || res.Text() != "Echo: hi" {
			t.Errorf("echo = %+v", res)
		}
		if res := callTool(t, c, "get-sum", map[string]any{"a": 1, "b": 2}); res.IsError || res.Text() != "The sum of 1 and 2 is 3." {
			t.Errorf("get-sum = %+v", res)
		}
		res := callTool(t, c, "get-structured-content", map[string]string{"location": "Chicago"})
		if res.IsError || !jsonEqual(res.StructuredContent, []byte(`{"temperature":36,"conditions":"Light rain / drizzle","humidity":82}`)) {
			t.Errorf("get-structured-content = %+v (structuredContent %s)", res, res.StructuredContent)
		}
	})

	cb.check("tools/call with nil arguments (a tool that takes none)", func(t *testing.T) {
		// CallTool documents args as "anything that marshals to a JSON object, or nil"; the
		// TypeScript SDK refuses "arguments": null.
		res, err := c.CallTool(ctxFor(t), "get-tiny-image", nil)
		if err != nil {
			t.Fatalf("CallTool(get-tiny-image, nil): %s\nthe request sent: %s", errorChain(err), requestOf(err))
		}
		hasImage := slices.ContainsFunc(res.Content, func(c mcpclient.Content) bool { return c.Type == "image" && c.Data != "" })
		if res.IsError || !hasImage {
			t.Errorf("get-tiny-image = %+v, want an image among its content", res)
		}
	})

	cb.check("invalid arguments and unknown tool: definite, not retried", func(t *testing.T) {
		r0 := retries.n.Load()
		res, err := c.CallTool(ctxFor(t), "get-sum", map[string]any{"a": "x", "b": 2})
		switch {
		case err == nil && res.IsError:
			cb.note("invalid arguments: isError result %q", res.Text())
		case err != nil && mcpclient.IsWireError(err):
			cb.note("invalid arguments: %v", err)
		default:
			t.Errorf("get-sum with a string: %v, %v", res, err)
		}
		res, err = c.CallTool(ctxFor(t), "no-such-tool", noArgs)
		switch {
		case err == nil && res.IsError:
			cb.note("unknown tool: isError result %q", res.Text())
		case err != nil && mcpclient.IsWireError(err):
			cb.note("unknown tool: %v", err)
		default:
			t.Errorf("unknown tool: %v, %v", res, err)
		}
		if n := retries.n.Load() - r0; n != 0 {
			t.Errorf("%d retries", n)
		}
	})

	cb.check("pinned id: reuse refused locally, resend answered", func(t *testing.T) {
		id := mcpclient.StringID(fmt.Sprintf("interop-pinned-%d", time.Now().UnixNano()))
		if res := callTool(t, c, "get-sum", map[string]any{"a": 2, "b": 3}, mcpclient.WithRequestID(id)); res.Text() != "The sum of 2 and 3 is 5." {
			t.Errorf("get-sum(2, 3) = %q", res.Text())
		}
		_, err := c.CallTool(ctxFor(t), "get-sum", map[string]any{"a": 4, "b": 4}, mcpclient.WithRequestID(id))
		if !errors.Is(err, mcpclient.ErrRequestIDReused) || mcpclient.IsWireError(err) {
			t.Errorf("other content under a used id: %v; want a local ErrRequestIDReused", err)
		}
		// The server keeps no receipts, so an answered id is sent again only as a request safe to
		// repeat: say so here rather than rely on get-sum's annotations in the last listing,
		// which this server's list_changed notifications drop at any moment.
		res, err := c.CallTool(ctxFor(t), "get-sum", map[string]any{"a": 2, "b": 3}, mcpclient.WithRequestID(id), mcpclient.WithIdempotent())
		if err != nil || res.Text() != "The sum of 2 and 3 is 5." {
			t.Errorf("resend under the same id: %v, %v", res, err)
		} else {
			cb.note("same id + same content after completion: answered again (no receipts, no duplicate detection)")
		}
		if e, _ := c.Ledger().Lookup(id); e.Attempts != 2 || e.State != mcpclient.StateAnswered {
			t.Errorf("ledger entry = %+v", e)
		}
	})

	cb.check("resources, templates, prompts, completion", func(t *testing.T) {
		resources, err := mcpclient.Collect(c.Resources(ctxFor(t)))
		if err != nil {
			t.Fatalf("ListResources: %s", errorChain(err))
		}
		if len(resources) == 0 {
			t.Errorf("no resources")
		}
		templates, err := mcpclient.Collect(c.ResourceTemplates(ctxFor(t)))
		if err != nil {
			t.Fatalf("ListResourceTemplates: %s", errorChain(err))
		}
		var uris []string
		for _, tp := range templates {
			uris = append(uris, tp.URITemplate)
		}
		if !slices.Contains(uris, "demo://resource/dynamic/text/{resourceId}") {
			t.Errorf("templates = %v", uris)
		}
		read, err := c.ReadResource(ctxFor(t), "demo://resource/dynamic/text/1")
		if err != nil {
			t.Fatalf("ReadResource: %s", errorChain(err))
		}
		if len(read.Contents) != 1 || read.Contents[0].Text == "" {
			t.Errorf("ReadResource = %+v", read)
		}
		if len(resources) > 0 {
			if r, err := c.ReadResource(ctxFor(t), resources[0].URI); err != nil || len(r.Contents) == 0 {
				t.Errorf("ReadResource(%s) = %+v, %v", resources[0].URI, r, err)
			}
		}
		prompts, err := mcpclient.Collect(c.Prompts(ctxFor(t)))
		if err != nil {
			t.Fatalf("ListPrompts: %s", errorChain(err))
		}
		var pnames []string
		for _, p := range prompts {
			pnames = append(pnames, p.Name)
		}
		if !slices.Contains(pnames, "simple-prompt") || !slices.Contains(pnames, "completable-prompt") {
			t.Errorf("prompts = %v", pnames)
		}
		got, err := c.GetPrompt(ctxFor(t), "simple-prompt", nil)
		if err != nil {
			t.Fatalf("GetPrompt: %s", errorChain(err))
		}
		if len(got.Messages) != 1 || got.Messages[0].Content.Text != "This is a simple prompt without arguments." {
			t.Errorf("GetPrompt = %+v", got)
		}
		comp, err := c.Complete(ctxFor(t), mcpclient.PromptReference("completable-prompt"), "department", "S", nil)
		if err != nil {
			t.Fatalf("Complete: %s", errorChain(err))
		}
		if !slices.Equal(comp.Values, []string{"Sales", "Support"}) {
			t.Errorf("Complete(department, S) = %+v", comp)
		}
	})

	cb.check("progress (WithProgress)", func(t *testing.T) {
		var n atomic.Int64
		res, err := c.CallTool(ctxFor(t), "trigger-long-running-operation", map[string]any{"duration": 0.4, "steps": 2},
			mcpclient.WithProgress(func(p mcpclient.Progress) { n.Add(1) }))
		if err != nil {
			t.Fatalf("trigger-long-running-operation: %s", errorChain(err))
		}
		if res.IsError {
			t.Fatalf("trigger-long-running-operation: %q", res.Text())
		}
		waitFor(time.Second, func() bool { return n.Load() >= 2 })
		if n.Load() != 2 {
			t.Errorf("%d progress reports, want 2 (the server sends one per step, before the result)", n.Load())
		}
	})

	cb.check("concurrent calls", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 8 {
			wg.Go(func() {
				res, err := c.CallTool(ctxFor(t), "get-sum", map[string]any{"a": i, "b": i})
				want := fmt.Sprintf("The sum of %d and %d is %d.", i, i, 2*i)
				switch {
				case err != nil:
					errs <- fmt.Errorf("get-sum(%d, %d): %s", i, i, errorChain(err))
				case res.Text() != want:
					errs <- fmt.Errorf("get-sum(%d, %d) = %q", i, i, res.Text())
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	cb.check("logging (SetLoggingLevel, WithLogHandler)", func(t *testing.T) {
		var logs atomic.Int64
		cl, _, err := cb.connect(t, env.transport(), mcpclient.WithLogHandler(func(ctx context.Context, msg *mcpclient.LogMessage) {
			logs.Add(1)
		}))
		if err != nil {
			t.Fatalf("Connect: %s", errorChain(err))
		}
		defer cl.Close()
		if err := cl.SetLoggingLevel(ctxFor(t), mcpclient.LevelDebug); err != nil {
			t.Fatalf("SetLoggingLevel: %s", errorChain(err))
		}
		callTool(t, cl, "toggle-simulated-logging", noArgs) // sends one record at once, then every 5s
		if !waitFor(3*time.Second, func() bool { return logs.Load() > 0 }) {
			t.Errorf("no log record arrived")
		}
		callTool(t, cl, "toggle-simulated-logging", noArgs)
	})

	cb.check("subscriptions (Subscribe, WithResourceUpdatedHandler)", func(t *testing.T) {
		updated := make(chan string, 8)
		cs, _, err := cb.connect(t, env.transport(), mcpclient.WithResourceUpdatedHandler(func(ctx context.Context, uri string) {
			select {
			case updated <- uri:
			default:
			}
		}))
		if err != nil {
			t.Fatalf("Connect: %s", errorChain(err))
		}
		defer cs.Close()
		const uri = "demo://resource/dynamic/text/1"
		if err := cs.Subscribe(ctxFor(t), uri); err != nil {
			t.Fatalf("Subscribe: %s", errorChain(err))
		}
		callTool(t, cs, "toggle-subscriber-updates", noArgs) // an update every 5s
		select {
		case got := <-updated:
			if got != uri {
				t.Errorf("resources/updated for %q", got)
			}
		case <-time.After(8 * time.Second):
			t.Errorf("no notifications/resources/updated within 8s")
		}
		callTool(t, cs, "toggle-subscriber-updates", noArgs)
		if err := cs.Unsubscribe(ctxFor(t), uri); err != nil {
			t.Errorf("Unsubscribe: %s", errorChain(err))
		}
	})

	cb.check("sampling, elicitation, roots (server requests)", func(t *testing.T) {
		var sampled, elicited atomic.Int64
		cs, _, err := cb.connect(t, env.transport(),
			mcpclient.WithSamplingHandler(func(ctx context.Context, p *mcpclient.CreateMessageParams) (*mcpclient.CreateMessageResult, error) {
				sampled.Add(1)
				return &mcpclient.CreateMessageResult{Role: "assistant", Model: "interop-model",
					Content: mcpclient.SamplingContent{mcpclient.TextContent("sampled by the interop client")}}, nil
			}),
			mcpclient.WithElicitationHandler(func(ctx context.Context, p *mcpclient.ElicitParams) (*mcpclient.ElicitResult, error) {
				elicited.Add(1)
				return &mcpclient.ElicitResult{Action: mcpclient.ElicitAccept, Content: map[string]any{"name": "Ada Lovelace"}}, nil
			}),
			mcpclient.WithRoots(mcpclient.Root{URI: "file:///tmp/interop-root", Name: "interop"}))
		if err != nil {
			t.Fatalf("Connect: %s", errorChain(err))
		}
		defer cs.Close()
		tools, err := cs.CachedTools(ctxFor(t))
		if err != nil {
			t.Fatalf("ListTools: %s", errorChain(err))
		}
		names := toolNames(tools)
		for _, want := range []string{"trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"} {
			if !slices.Contains(names, want) {
				t.Errorf("tools lack %s although the client declared the capability: %v", want, names)
			}
		}
		res, err := cs.CallTool(ctxFor(t), "trigger-sampling-request", map[string]any{"prompt": "hello", "maxTokens": 20})
		if err != nil || res.IsError || !strings.Contains(res.Text(), "sampled by the interop client") || sampled.Load() != 1 {
			t.Errorf("trigger-sampling-request: %v, %v (handler ran %d times)", res, err, sampled.Load())
		}
		res, err = cs.CallTool(ctxFor(t), "trigger-elicitation-request", noArgs)
		if err != nil || res.IsError || !strings.Contains(res.Text(), "Ada Lovelace") || elicited.Load() != 1 {
			t.Errorf("trigger-elicitation-request: %v, %v (handler ran %d times)", res, err, elicited.Load())
		} else if !strings.Contains(res.Text(), "It was a dark and stormy night.") {
			t.Errorf("elicitation: the schema's defaults were not applied: %q", res.Text())
		}
		// The server asks for the roots on its own 350ms after initialization.
		var text string
		ok := waitFor(3*time.Second, func() bool {
			r, err := cs.CallTool(ctxFor(t), "get-roots-list", noArgs)
			if err == nil {
				text = r.Text()
			}
			return strings.Contains(text, "file:///tmp/interop-root")
		})
		if !ok {
			t.Errorf("get-roots-list = %q", text)
		}
		start := time.Now()
		cs.Close()
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Close took %v: the server lingered", d)
		}
	})

	if mode == "streamableHttp" {
		cb.check("session lost (DELETE by another party): reconnect", func(t *testing.T) {
			c3, r3, err := cb.connect(t, env.transport())
			if err != nil {
				t.Fatalf("Connect: %s", errorChain(err))
			}
			defer c3.Close()
			sid := c3.SessionID()
			del := rawHTTP(t, env.hc, http.MethodDelete, env.url, sid, c3.ProtocolVersion(), "")
			gone := rawHTTP(t, env.hc, http.MethodPost, env.url, sid, c3.ProtocolVersion(), `{"jsonrpc":"2.0","id":"raw-ping","method":"ping"}`)
			cb.note("after DELETE (%d), a POST on the old session gets %s", del.Status, summarize(gone))
			res, err := c3.CallTool(ctxFor(t), "get-sum", map[string]any{"a": 20, "b": 22})
			if err != nil {
				t.Fatalf("get-sum after the session was deleted: %s (retries %d)", errorChain(err), r3.n.Load())
			}
			if res.Text() != "The sum of 20 and 22 is 42." || c3.SessionID() == sid {
				t.Errorf("get-sum = %q on session %q (was %q)", res.Text(), c3.SessionID(), sid)
			}
		})
	}

	cb.check("Close", func(t *testing.T) {
		start := time.Now()
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		d := time.Since(start)
		if d > 2*time.Second {
			t.Errorf("Close took %v", d)
		}
		if mode == "stdio" {
			cb.note("stdio Close took %v", d.Round(10*time.Millisecond))
		}
		if _, err := c.CallTool(ctxFor(t), "echo", map[string]string{"message": "x"}); !errors.Is(err, mcpclient.ErrClosed) {
			t.Errorf("CallTool after Close: %v, want ErrClosed", err)
		}
	})
}
