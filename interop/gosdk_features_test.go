package interop_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/interop/internal/gosdkserver"
)

// gosdkFeatures checks the client's typed API beyond tools against the go-sdk server: resources,
// prompts, completion, logging, subscriptions, progress, timeouts, outputSchema checks,
// keepalive, and the server-initiated features (sampling, elicitation, roots).
func gosdkFeatures(t *testing.T, cb *combo, env *gosdkEnv, c *mcpclient.Client, negotiated string, stateful, serverRequests bool,
	executionsOf func(*testing.T, *mcpclient.Client) gosdkserver.Executions) {
	modern := negotiated >= modernRevision
	noteOnce := func(format string, args ...any) {
		if cb.revision == "all" || cb.revision == modernRevision {
			cb.note(format, args...)
		}
	}
	// waitStream waits, where server messages travel on the GET stream (stateful JSON responses),
	// for the client to have opened it: Connect does not wait for it.
	waitStream := func(t *testing.T, c *mcpclient.Client) {
		if stateful && env.mode.json && !waitFor(2*time.Second, func() bool { return cb.wire.streamOpen(c.SessionID()) }) {
			t.Errorf("the client opened no GET stream for session %s", c.SessionID())
		}
	}

	cb.check("resources (typed API)", func(t *testing.T) {
		resources, err := mcpclient.Collect(c.Resources(ctxFor(t)))
		if err != nil {
			t.Fatalf("ListResources: %s", errorChain(err))
		}
		if len(resources) != 1 || resources[0].URI != gosdkserver.GreetingURI || resources[0].MIMEType != "text/plain" {
			t.Errorf("ListResources = %+v", resources)
		}
		n := 0
		for r, err := range c.Resources(ctxFor(t)) {
			if err != nil {
				t.Fatalf("Resources: %s", errorChain(err))
			}
			if r.URI == gosdkserver.GreetingURI {
				n++
			}
		}
		if n != 1 {
			t.Errorf("Resources yielded the greeting %d times", n)
		}
		read, err := c.ReadResource(ctxFor(t), gosdkserver.GreetingURI)
		if err != nil {
			t.Fatalf("ReadResource: %s", errorChain(err))
		}
		if len(read.Contents) != 1 || read.Contents[0].Text != gosdkserver.GreetingText {
			t.Errorf("ReadResource = %+v", read)
		}
		templates, err := mcpclient.Collect(c.ResourceTemplates(ctxFor(t)))
		if err != nil {
			t.Fatalf("ListResourceTemplates: %s", errorChain(err))
		}
		if len(templates) != 1 || templates[0].URITemplate != gosdkserver.ItemTemplate {
			t.Errorf("ListResourceTemplates = %+v", templates)
		}
		for tp, err := range c.ResourceTemplates(ctxFor(t)) {
			if err != nil || tp.URITemplate != gosdkserver.ItemTemplate {
				t.Errorf("ResourceTemplates yielded %+v, %v", tp, err)
			}
		}
		read, err = c.ReadResource(ctxFor(t), "interop://items/7")
		if err != nil {
			t.Fatalf("ReadResource(template): %s", errorChain(err))
		}
		if len(read.Contents) != 1 || read.Contents[0].Text != "item interop://items/7" {
			t.Errorf("ReadResource(template) = %+v", read)
		}
		_, err = c.ReadResource(ctxFor(t), "interop://nowhere")
		var rpc *mcpclient.RPCError
		if !errors.As(err, &rpc) {
			t.Errorf("ReadResource(unknown): %v; want the server's JSON-RPC error", err)
		}
	})

	cb.check("prompts and completion (typed API)", func(t *testing.T) {
		prompts, err := mcpclient.Collect(c.Prompts(ctxFor(t)))
		if err != nil {
			t.Fatalf("ListPrompts: %s", errorChain(err))
		}
		if len(prompts) != 1 || prompts[0].Name != gosdkserver.PromptName || len(prompts[0].Arguments) != 1 || !prompts[0].Arguments[0].Required {
			t.Errorf("ListPrompts = %+v", prompts)
		}
		for p, err := range c.Prompts(ctxFor(t)) {
			if err != nil || p.Name != gosdkserver.PromptName {
				t.Errorf("Prompts yielded %+v, %v", p, err)
			}
		}
		got, err := c.GetPrompt(ctxFor(t), gosdkserver.PromptName, map[string]string{"name": "Ada"})
		if err != nil {
			t.Fatalf("GetPrompt: %s", errorChain(err))
		}
		if len(got.Messages) != 1 || got.Messages[0].Role != "user" || got.Messages[0].Content.Text != "Hello, Ada!" {
			t.Errorf("GetPrompt = %+v", got)
		}
		comp, err := c.Complete(ctxFor(t), mcpclient.PromptReference(gosdkserver.PromptName), "name", "Al", nil)
		if err != nil {
			t.Fatalf("Complete: %s", errorChain(err))
		}
		if !slices.Equal(comp.Values, []string{"Alan", "Alonzo"}) {
			t.Errorf("Complete = %+v, want [Alan Alonzo]", comp)
		}
	})

	cb.check("outputSchema: structuredContent checked", func(t *testing.T) {
		res, err := c.CallTool(ctxFor(t), "badstruct", nil)
		if !errors.Is(err, mcpclient.ErrStructuredContent) {
			t.Errorf("badstruct: %v, %v; want ErrStructuredContent (structuredContent {\"sum\":\"three\"} against an outputSchema requiring a number)", res, err)
		}
	})

	cb.check("WithProgress on a client without handlers", func(t *testing.T) {
		var mu sync.Mutex
		var reports []mcpclient.Progress
		res, err := c.CallTool(ctxFor(t), "progress", nil, mcpclient.WithProgress(func(p mcpclient.Progress) {
			mu.Lock()
			reports = append(reports, p)
			mu.Unlock()
		}))
		if err != nil {
			t.Fatalf("progress: %s", errorChain(err))
		}
		if res.IsError {
			if env.mode.stateless {
				noteOnce("%s/%s: WithProgress: the server could not send progress (%q)", env.mode.name, negotiated, res.Text())
				return
			}
			t.Fatalf("progress tool: %q", res.Text())
		}
		// Reports come before the result on one stream; over the GET stream they may trail.
		waitFor(time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(reports) >= 2 })
		mu.Lock()
		defer mu.Unlock()
		if len(reports) != 2 || reports[1].Progress != 2 || reports[1].Total != 2 || reports[1].Message != "step 2" {
			t.Errorf("progress reports = %+v, want 2 (the server sent 2)", reports)
		}
	})

	cb.check("WithTimeouts ends a call that does not answer", func(t *testing.T) {
		start := time.Now()
		_, err := c.CallTool(ctxFor(t), "slow", map[string]any{"ms": 1500}, mcpclient.WithTimeouts(0, 300*time.Millisecond))
		if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, mcpclient.ErrCallTimeout) {
			t.Errorf("slow with a 300ms bound: %s; want ErrOutcomeUnknown caused by ErrCallTimeout", errorChain(err))
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("the call ended after %v", d)
		}
		// The session must still serve calls.
		if res := callTool(t, c, "add", map[string]any{"a": 2, "b": 2}); res.Text() != "4" {
			t.Errorf("add after the timeout = %q", res.Text())
		}
	})

	cb.check("logging: SetLoggingLevel and WithLogHandler", func(t *testing.T) {
		var logs atomic.Int64
		var last atomic.Value
		cl, _, err := cb.connect(t, env.transport(), mcpclient.WithLogHandler(func(ctx context.Context, msg *mcpclient.LogMessage) {
			// The record before the count: the test reads it once it sees the count.
			last.Store(string(msg.Level) + " " + msg.Logger + " " + string(msg.Data))
			logs.Add(1)
		}))
		if err != nil {
			t.Fatalf("Connect: %s", errorChain(err))
		}
		defer cl.Close()
		waitStream(t, cl)
		// Before 2026-07-28 this sends logging/setLevel; from then on the client keeps the level
		// and sends it in each request's _meta.
		if err := cl.SetLoggingLevel(ctxFor(t), mcpclient.LevelInfo); err != nil {
			t.Fatalf("SetLoggingLevel: %s", errorChain(err))
		}
		res := callTool(t, cl, "log", nil)
		if res.IsError {
			if env.mode.stateless {
				noteOnce("%s/%s: log: %q", env.mode.name, negotiated, res.Text())
				return
			}
			t.Fatalf("log tool: %q", res.Text())
		}
		ok := waitFor(2*time.Second, func() bool { return logs.Load() > 0 })
		switch {
		case env.mode.stateless && !ok:
			noteOnce("%s/%s: log records received: %d (%v)", env.mode.name, negotiated, logs.Load(), last.Load())
		case !ok:
			t.Errorf("no log record arrived")
		case last.Load() != `info interop "hello from the log tool"`:
			t.Errorf("log record = %v", last.Load())
		}
	})

	cb.check("subscriptions: Subscribe, resources/updated, Unsubscribe", func(t *testing.T) {
		updated := make(chan string, 4)
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
		waitStream(t, cs)
		err = cs.Subscribe(ctxFor(t), gosdkserver.GreetingURI)
		if modern {
			if err == nil {
				t.Errorf("Subscribe succeeded in %s, which has no resources/subscribe", negotiated)
			}
			return
		}
		if err != nil {
			t.Fatalf("Subscribe: %s", errorChain(err))
		}
		before := executionsOf(t, cs).Subscriptions
		if before < 1 {
			t.Errorf("the server counts %d subscriptions after Subscribe", before)
		}
		res := callTool(t, cs, "touch", nil)
		if res.IsError {
			t.Fatalf("touch: %q", res.Text())
		}
		select {
		case uri := <-updated:
			if uri != gosdkserver.GreetingURI {
				t.Errorf("resources/updated for %q", uri)
			}
		case <-time.After(2 * time.Second):
			if env.mode.stateless {
				noteOnce("%s/%s: resources/updated did not reach the client (stateless server)", env.mode.name, negotiated)
			} else {
				t.Errorf("no notifications/resources/updated arrived")
			}
		}
		if err := cs.Unsubscribe(ctxFor(t), gosdkserver.GreetingURI); err != nil {
			t.Fatalf("Unsubscribe: %s", errorChain(err))
		}
		if after := executionsOf(t, cs).Subscriptions; after != before-1 && !env.mode.stateless {
			t.Errorf("subscriptions %d after Unsubscribe, %d before", after, before)
		}
	})

	cb.check("WithKeepalive pings the server", func(t *testing.T) {
		ck, _, err := cb.connect(t, env.transport(), mcpclient.WithKeepalive(100*time.Millisecond))
		if err != nil {
			t.Fatalf("Connect: %s", errorChain(err))
		}
		defer ck.Close()
		before := executionsOf(t, ck).Pings
		time.Sleep(700 * time.Millisecond)
		n := executionsOf(t, ck).Pings - before
		switch {
		case modern:
			noteOnce("%s/%s: WithKeepalive(100ms) sent %d pings in 700ms (2026-07-28 has no ping)", env.mode.name, negotiated, n)
		case n < 3:
			t.Errorf("%d pings in 700ms with a 100ms keepalive", n)
		}
	})

	// Server-initiated features, asked for by the ask tool: the SDK sends them as requests to
	// clients before 2026-07-28, and as multi round-trip input requests from 2026-07-28 on.
	var sampled, elicited atomic.Int64
	roots := []mcpclient.Root{{URI: "file:///tmp/interop-a", Name: "a"}}
	cr, _, err := cb.connect(t, env.transport(),
		mcpclient.WithSamplingHandler(func(ctx context.Context, p *mcpclient.CreateMessageParams) (*mcpclient.CreateMessageResult, error) {
			sampled.Add(1)
			return &mcpclient.CreateMessageResult{Role: "assistant", Model: "interop-model",
				Content: mcpclient.SamplingContent{mcpclient.TextContent("4")}}, nil
		}),
		mcpclient.WithElicitationHandler(func(ctx context.Context, p *mcpclient.ElicitParams) (*mcpclient.ElicitResult, error) {
			elicited.Add(1)
			return &mcpclient.ElicitResult{Action: mcpclient.ElicitAccept, Content: map[string]any{"name": "Ada"}}, nil
		}),
		mcpclient.WithRoots(roots...))
	if err != nil {
		cb.check("sampling, elicitation, roots", func(t *testing.T) { t.Fatalf("Connect: %s", errorChain(err)) })
		return
	}
	defer cr.Close()
	ask := func(t *testing.T, kind, want string) {
		t.Helper()
		waitStream(t, cr)
		res, err := cr.CallTool(ctxFor(t), "ask", map[string]string{"kind": kind})
		if !serverRequests && !modern {
			// A stateless server before 2026-07-28 can send the client no request.
			if err != nil {
				noteOnce("%s/%s: ask %s: %v", env.mode.name, negotiated, kind, err)
			} else {
				noteOnce("%s/%s: ask %s: %q (isError %v)", env.mode.name, negotiated, kind, res.Text(), res.IsError)
			}
			return
		}
		if err != nil {
			t.Fatalf("ask %s: %s", kind, errorChain(err))
		}
		if res.IsError || res.Text() != want {
			t.Errorf("ask %s = %q (isError %v, content %d blocks, _meta %s), want %q", kind, res.Text(), res.IsError, len(res.Content), res.Meta, want)
		}
	}
	cb.check("sampling (WithSamplingHandler)", func(t *testing.T) {
		ask(t, "sample", "sampled 4 from interop-model")
	})
	cb.check("elicitation (WithElicitationHandler, schema defaults applied)", func(t *testing.T) {
		ask(t, "elicit", `elicited accept {"color":"blue","name":"Ada"}`)
	})
	cb.check("roots (WithRoots, SetRoots)", func(t *testing.T) {
		ask(t, "roots", "roots file:///tmp/interop-a")
		if err := cr.SetRoots(ctxFor(t), mcpclient.Root{URI: "file:///tmp/interop-b", Name: "b"}); err != nil {
			t.Fatalf("SetRoots: %s", errorChain(err))
		}
		ask(t, "roots", "roots file:///tmp/interop-b")
	})
}
