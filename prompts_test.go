package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

func featGreet(_ context.Context, args map[string]string) (*mcpclient.GetPromptResult, error) {
	text := "Hello, " + args["name"]
	if args["lang"] == "fr" {
		text = "Bonjour, " + args["name"]
	}
	return &mcpclient.GetPromptResult{Description: "a greeting", Messages: []mcpclient.PromptMessage{
		{Role: "user", Content: mcpclient.TextContent(text)},
	}}, nil
}

func TestFeaturesPrompts(t *testing.T) {
	t.Parallel()
	featEach(t, func(t *testing.T, b featBackend) {
		_, d := b.start(t, mcptest.WithPageSize(1),
			mcptest.WithPrompt(mcpclient.Prompt{Name: "greet", Description: "says hello", Arguments: []mcpclient.PromptArgument{
				{Name: "name", Required: true}, {Name: "lang"},
			}}, featGreet),
			mcptest.WithPrompt(mcpclient.Prompt{Name: "plain"}, func(context.Context, map[string]string) (*mcpclient.GetPromptResult, error) {
				return &mcpclient.GetPromptResult{}, nil
			}),
			mcptest.WithPrompt(mcpclient.Prompt{Name: "failing"}, func(context.Context, map[string]string) (*mcpclient.GetPromptResult, error) {
				return nil, errors.New("template missing")
			}))
		c := mcptest.NewClient(t, d)
		ctx := testCtx(t)

		if p := c.ServerCapabilities().Prompts; p == nil || !p.ListChanged {
			t.Errorf("capabilities.prompts %+v, want listChanged", p)
		}
		prompts, err := mcpclient.Collect(c.Prompts(ctx))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range prompts {
			names = append(names, p.Name)
		}
		if !slices.Equal(names, []string{"greet", "plain", "failing"}) {
			t.Errorf("prompts %v", names)
		}
		if len(prompts) > 0 && (len(prompts[0].Arguments) != 2 || !prompts[0].Arguments[0].Required || prompts[0].Description != "says hello") {
			t.Errorf("prompt %+v lost its fields", prompts[0])
		}

		res, err := c.GetPrompt(ctx, "greet", map[string]string{"name": "Ada", "lang": "fr"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Description != "a greeting" || len(res.Messages) != 1 || res.Messages[0].Role != "user" ||
			res.Messages[0].Content.Text != "Bonjour, Ada" {
			t.Errorf("greet rendered %+v", res)
		}
		res, err = c.GetPrompt(ctx, "plain", nil)
		if err != nil || res.Messages == nil {
			t.Errorf("plain rendered %+v, %v", res, err)
		}

		for _, tc := range []struct {
			name string
			args map[string]string
			code int64
			msg  string
		}{
			{"nope", nil, mcpclient.RPCInvalidParams, "unknown prompt"},
			{"greet", map[string]string{"lang": "fr"}, mcpclient.RPCInvalidParams, "name"},
			{"failing", nil, mcpclient.RPCInternalError, "template missing"},
		} {
			_, err := c.GetPrompt(ctx, tc.name, tc.args)
			if rpc := featRPCError(t, err); rpc.Code != tc.code || !strings.Contains(rpc.Message, tc.msg) {
				t.Errorf("GetPrompt(%s, %v): %v, want %d containing %q", tc.name, tc.args, rpc, tc.code, tc.msg)
			}
		}
	})
}

func TestFeaturesCompletion(t *testing.T) {
	t.Parallel()
	featEach(t, func(t *testing.T, b featBackend) {
		type asked struct {
			ref         mcpclient.CompletionReference
			name, value string
			known       map[string]string
		}
		var mu sync.Mutex
		var got []asked
		total := 3
		_, d := b.start(t, mcptest.WithCompletion(func(_ context.Context, ref mcpclient.CompletionReference, name, value string, known map[string]string) (*mcpclient.Completion, error) {
			mu.Lock()
			got = append(got, asked{ref, name, value, known})
			mu.Unlock()
			if name == "broken" {
				return nil, errors.New("no suggestions today")
			}
			var values []string
			for _, v := range []string{"Ada", "Alan", "Grace"} {
				if strings.HasPrefix(v, value) {
					values = append(values, v)
				}
			}
			return &mcpclient.Completion{Values: values, Total: &total, HasMore: true}, nil
		}))
		c := mcptest.NewClient(t, d)
		ctx := testCtx(t)
		if c.ServerCapabilities().Completions == nil {
			t.Error("no capabilities.completions")
		}

		comp, err := c.Complete(ctx, mcpclient.PromptReference("greet"), "name", "A", map[string]string{"lang": "en"})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(comp.Values, []string{"Ada", "Alan"}) || comp.Total == nil || *comp.Total != 3 || !comp.HasMore {
			t.Errorf("completion %+v", comp)
		}
		comp, err = c.Complete(ctx, mcpclient.ResourceReference("db://{table}"), "table", "x", nil)
		if err != nil {
			t.Fatal(err)
		}
		if comp.Values == nil || len(comp.Values) != 0 {
			t.Errorf("no match: values %#v, want empty", comp.Values)
		}
		_, err = c.Complete(ctx, mcpclient.PromptReference("greet"), "broken", "", nil)
		if rpc := featRPCError(t, err); rpc.Code != mcpclient.RPCInternalError || !strings.Contains(rpc.Message, "no suggestions today") {
			t.Errorf("failing completion: %v", rpc)
		}

		mu.Lock()
		defer mu.Unlock()
		want := []asked{
			{mcpclient.CompletionReference{Type: "ref/prompt", Name: "greet"}, "name", "A", map[string]string{"lang": "en"}},
			{mcpclient.CompletionReference{Type: "ref/resource", URI: "db://{table}"}, "table", "x", nil},
		}
		if len(got) != 3 {
			t.Fatalf("completion func called %d times, want 3", len(got))
		}
		for i, w := range want {
			g := got[i]
			if g.ref != w.ref || g.name != w.name || g.value != w.value || !maps.Equal(g.known, w.known) {
				t.Errorf("call %d: %+v, want %+v", i, g, w)
			}
		}
	})
}

func TestFeaturesCompletionUndeclared(t *testing.T) {
	srv := mcptest.NewTestServer(t)
	c := mcptest.NewClient(t, srv)
	caps := c.ServerCapabilities()
	if caps.Completions != nil || caps.Prompts != nil || caps.Resources != nil {
		t.Errorf("a server without them declares completions %s, prompts %+v, resources %+v", caps.Completions, caps.Prompts, caps.Resources)
	}
	_, err := c.Complete(testCtx(t), mcpclient.PromptReference("x"), "a", "", nil)
	if rpc := featRPCError(t, err); rpc.Code != mcpclient.RPCMethodNotFound {
		t.Errorf("completion without the capability: %v, want -32601", rpc)
	}
}

func TestFeaturesLogging(t *testing.T) {
	t.Parallel()
	levels := []mcpclient.LoggingLevel{
		mcpclient.LevelDebug, mcpclient.LevelInfo, mcpclient.LevelNotice, mcpclient.LevelWarning,
		mcpclient.LevelError, mcpclient.LevelCritical, mcpclient.LevelAlert, mcpclient.LevelEmergency,
	}
	featEach(t, func(t *testing.T, b featBackend) {
		if b.stateless() {
			t.Skip("the stateless revisions have no logging/setLevel and no session to send records to: TestStatelessLogLevelRidesEachRequest")
		}
		srv, d := b.start(t)
		logs := make(chan *mcpclient.LogMessage, 32)
		c := mcptest.NewClient(t, d, mcpclient.WithLogHandler(func(_ context.Context, m *mcpclient.LogMessage) { logs <- m }))
		ctx := testCtx(t)
		if c.ServerCapabilities().Logging == nil {
			t.Error("no capabilities.logging")
		}

		// Before logging/setLevel the server sends every level.
		if err := srv.Log(mcpclient.LevelDebug, "boot", map[string]int{"n": 0}); err != nil {
			t.Fatal(err)
		}
		m := recv(t, logs, "the debug record")
		if m.Level != mcpclient.LevelDebug || m.Logger != "boot" || string(m.Data) != `{"n":0}` {
			t.Errorf("record %+v", m)
		}

		for _, floor := range []mcpclient.LoggingLevel{mcpclient.LevelWarning, mcpclient.LevelDebug, mcpclient.LevelEmergency} {
			if err := c.SetLoggingLevel(ctx, floor); err != nil {
				t.Fatal(err)
			}
			if got := srv.SessionInfos()[0].LogLevel; got != floor {
				t.Errorf("server holds level %q, want %q", got, floor)
			}
			for i, l := range levels {
				if err := srv.Log(l, "app", i); err != nil {
					t.Fatal(err)
				}
			}
			var got []mcpclient.LoggingLevel
			for { // emergency is always admitted, and comes last
				m := recv(t, logs, "a record")
				got = append(got, m.Level)
				if m.Logger != "app" {
					t.Errorf("logger %q", m.Logger)
				}
				if m.Level == mcpclient.LevelEmergency {
					break
				}
			}
			want := levels[slices.Index(levels, floor):]
			if !slices.Equal(got, want) {
				t.Errorf("at %s received %v, want %v", floor, got, want)
			}
		}

		err := c.SetLoggingLevel(ctx, "verbose")
		if rpc := featRPCError(t, err); rpc.Code != mcpclient.RPCInvalidParams {
			t.Errorf("unknown level: %v, want -32602", rpc)
		}
		if err := srv.Log("verbose", "", nil); err == nil {
			t.Error("Log accepted an unknown level")
		}
	})
}

func TestFeaturesLogRecordDataKeepsItsJSON(t *testing.T) {
	srv := mcptest.NewTestServer(t)
	logs := make(chan *mcpclient.LogMessage, 4)
	mcptest.NewClient(t, srv, mcpclient.WithLogHandler(func(_ context.Context, m *mcpclient.LogMessage) { logs <- m }))
	srv.Log(mcpclient.LevelError, "", json.RawMessage(`{"nested":{"a":[1,2]}}`))
	m := recv(t, logs, "the record")
	if m.Logger != "" || string(m.Data) != `{"nested":{"a":[1,2]}}` {
		t.Errorf("record %+v data %s", m, m.Data)
	}
}
