package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/skills"
	"github.com/northstar-mcp/mcpclient/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start runs the program's server until the test ends, and returns the URL it printed.
func start(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, "localhost:0", w, slog.New(slog.DiscardHandler))
		w.Close()
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, r) // nothing more is printed; the pipe ends with run
	url := strings.TrimSuffix(line, "\n")
	if !strings.HasPrefix(url, "http://localhost:") || !strings.HasSuffix(url, "/mcp") {
		t.Fatalf("printed %q, want http://localhost:PORT/mcp", line)
	}
	return url
}

// notes collects what arrives on the client's side while a test runs.
type notes struct {
	mu       sync.Mutex
	logs     []string
	arrived  chan struct{}
	progress []mcpclient.Progress
}

func (n *notes) add(f func()) {
	n.mu.Lock()
	f()
	n.mu.Unlock()
	select {
	case n.arrived <- struct{}{}:
	default:
	}
}

// await waits until cond holds, or fails the test after a while.
func (n *notes) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		n.mu.Lock()
		ok := cond()
		n.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-n.arrived:
		case <-deadline:
			t.Fatalf("no %s", what)
		}
	}
}

func connect(t *testing.T, url string, n *notes) *mcpclient.Client {
	t.Helper()
	ctx := context.Background()
	// A pool of the test's own, closed with it: connections of the shared pool would outlive it.
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	c, err := mcpclient.Connect(ctx, &transport.HTTP{URL: url, Client: hc},
		mcpclient.WithProtocolVersion(mcpclient.ProtocolVersion20251125),
		mcpclient.WithServerStream(),
		mcpclient.WithExtension(skills.Extension, nil),
		mcpclient.WithRoots(mcpclient.Root{URI: "file:///work", Name: "work"}),
		mcpclient.WithSamplingHandler(func(_ context.Context, p *mcpclient.CreateMessageParams) (*mcpclient.CreateMessageResult, error) {
			return &mcpclient.CreateMessageResult{Role: "assistant", Model: "test", Content: mcpclient.SamplingContent{mcpclient.TextContent("Paris")}}, nil
		}),
		mcpclient.WithElicitationHandler(func(_ context.Context, p *mcpclient.ElicitParams) (*mcpclient.ElicitResult, error) {
			var s struct{ Properties map[string]json.RawMessage }
			json.Unmarshal(p.RequestedSchema, &s)
			content := map[string]any{}
			for name := range s.Properties {
				content[name] = "Ada"
			}
			return &mcpclient.ElicitResult{Action: mcpclient.ElicitAccept, Content: content}, nil
		}),
		mcpclient.WithLogHandler(func(_ context.Context, m *mcpclient.LogMessage) {
			n.add(func() { n.logs = append(n.logs, string(m.Data)) })
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// scenarioTools are the tools the suite's scenarios call by name.
var scenarioTools = []string{
	"test_simple_text", "test_image_content", "test_audio_content", "test_embedded_resource",
	"test_multiple_content_types", "test_error_handling", "test_tool_with_logging",
	"test_tool_with_progress", "test_reconnection", "test_sampling", "test_elicitation",
	"test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums", "json_schema_2020_12_tool",
	"test_missing_capability", "test_streaming_elicitation", "test_logging_tool",
	"test_trigger_tool_change", "test_trigger_prompt_change", "test_custom_header_tool",
	"test_input_required_result_elicitation", "test_input_required_result_sampling",
	"test_input_required_result_list_roots", "test_input_required_result_request_state",
	"test_input_required_result_multiple_inputs", "test_input_required_result_multi_round",
	"test_input_required_result_tampered_state",
	"greet", "slow_compute", "confirm_delete", "multi_input", "failing_job", "protocol_error_job", "test_tool_with_task",
}

func TestListsWhatTheScenariosNeed(t *testing.T) {
	c := connect(t, start(t), &notes{arrived: make(chan struct{}, 1)})
	ctx := context.Background()
	tools, err := mcpclient.Collect(c.Tools(ctx))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
		if tool.Description == "" || len(tool.InputSchema) == 0 {
			t.Errorf("tool %s lacks a description or an input schema", tool.Name)
		}
	}
	for _, want := range scenarioTools {
		if !slices.Contains(names, want) {
			t.Errorf("no tool %s", want)
		}
	}
	resources, err := mcpclient.Collect(c.Resources(ctx))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resources {
		if r.Description == "" {
			t.Errorf("resource %s has no description", r.URI)
		}
	}
	prompts, err := mcpclient.Collect(c.Prompts(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if len(prompts) != 5 {
		t.Errorf("%d prompts, want 5", len(prompts))
	}
	for _, p := range prompts {
		if p.Description == "" {
			t.Errorf("prompt %s has no description", p.Name)
		}
	}
	caps := c.ServerCapabilities()
	if caps.Completions == nil || caps.Logging == nil || caps.Resources == nil || !caps.Resources.Subscribe {
		t.Errorf("capabilities %+v", caps)
	}
}

func TestToolsAnswerAsTheScenariosExpect(t *testing.T) {
	n := &notes{arrived: make(chan struct{}, 1)}
	c := connect(t, start(t), n)
	ctx := context.Background()
	call := func(name string, args any, opts ...mcpclient.CallOption) *mcpclient.CallToolResult {
		t.Helper()
		res, err := c.CallTool(ctx, name, args, opts...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}

	if got := call("test_simple_text", nil).Text(); got != "This is a simple text response for testing." {
		t.Errorf("test_simple_text: %q", got)
	}
	img := call("test_image_content", nil).Content[0]
	pix, err := base64.StdEncoding.DecodeString(img.Data)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := png.Decode(bytes.NewReader(pix))
	if err != nil || img.MIMEType != "image/png" || decoded.Bounds().Dx() != 1 ||
		color.RGBAModel.Convert(decoded.At(0, 0)) != (color.RGBA{R: 255, A: 255}) {
		t.Errorf("test_image_content: %s, %v", img.MIMEType, err)
	}
	audio := call("test_audio_content", nil).Content[0]
	wav, _ := base64.StdEncoding.DecodeString(audio.Data)
	if audio.MIMEType != "audio/wav" || !bytes.HasPrefix(wav, []byte("RIFF")) || string(wav[8:16]) != "WAVEfmt " || len(wav) != 44+800 {
		t.Errorf("test_audio_content: %s, %d bytes", audio.MIMEType, len(wav))
	}
	if got := call("test_multiple_content_types", nil).Content; len(got) != 3 || got[0].Type != "text" || got[1].Type != "image" || got[2].Type != "resource" {
		t.Errorf("test_multiple_content_types: %+v", got)
	}
	if res := call("test_error_handling", nil); !res.IsError || res.Text() != "This tool intentionally returns an error for testing" {
		t.Errorf("test_error_handling: %+v", res)
	}

	var progress []mcpclient.Progress
	call("test_tool_with_progress", nil, mcpclient.WithProgress(func(p mcpclient.Progress) { progress = append(progress, p) }))
	if len(progress) != 3 || progress[0].Progress != 0 || progress[1].Progress != 50 || progress[2].Progress != 100 || progress[2].Total != 100 {
		t.Errorf("progress %+v, want 0, 50 and 100 of 100", progress)
	}
	call("test_tool_with_logging", nil)
	n.await(t, "three log messages", func() bool { return len(n.logs) >= 3 })
	if !strings.Contains(n.logs[0], "Tool execution started") || !strings.Contains(n.logs[2], "Tool execution completed") {
		t.Errorf("logs %q", n.logs)
	}

	// The server closes the call's stream after its priming event: the client resumes it.
	if got := call("test_reconnection", nil).Text(); got != "Reconnection test completed" {
		t.Errorf("test_reconnection: %q", got)
	}
	if got := call("test_sampling", map[string]string{"prompt": "Capital of France?"}).Text(); got != "LLM response: Paris" {
		t.Errorf("test_sampling: %q", got)
	}
	if got := call("test_elicitation", map[string]string{"message": "Who are you?"}).Text(); got != `User response: action=accept, content={"email":"Ada","username":"Ada"}` {
		t.Errorf("test_elicitation: %q", got)
	}
	if got := call("greet", map[string]string{"name": "Ada"}).Text(); got != "Hello, Ada!" {
		t.Errorf("greet: %q", got)
	}
}

func TestResourcesPromptsAndCompletion(t *testing.T) {
	c := connect(t, start(t), &notes{arrived: make(chan struct{}, 1)})
	ctx := context.Background()
	text, err := c.ReadResource(ctx, "test://static-text")
	if err != nil || text.Contents[0].Text != "This is the content of the static text resource." {
		t.Errorf("test://static-text: %+v, %v", text, err)
	}
	bin, err := c.ReadResource(ctx, "test://static-binary")
	if err != nil || bin.Contents[0].Blob != redPixelPNG || bin.Contents[0].MIMEType != "image/png" {
		t.Errorf("test://static-binary: %v", err)
	}
	tmpl, err := c.ReadResource(ctx, "test://template/123/data")
	if err != nil || tmpl.Contents[0].Text != `{"data":"Data for ID: 123","id":"123","templateTest":true}` {
		t.Errorf("template: %+v, %v", tmpl, err)
	}
	p, err := c.GetPrompt(ctx, "test_prompt_with_arguments", map[string]string{"arg1": "hello", "arg2": "world"})
	if err != nil || p.Messages[0].Content.Text != "Prompt with arguments: arg1='hello', arg2='world'" {
		t.Errorf("test_prompt_with_arguments: %+v, %v", p, err)
	}
	p, err = c.GetPrompt(ctx, "test_prompt_with_embedded_resource", map[string]string{"resourceUri": "test://example-resource"})
	if err != nil || p.Messages[0].Content.Type != "resource" || !strings.Contains(string(p.Messages[0].Content.Resource), `"uri":"test://example-resource"`) {
		t.Errorf("test_prompt_with_embedded_resource: %+v, %v", p, err)
	}
	done, err := c.Complete(ctx, mcpclient.CompletionReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"}, "arg1", "par", nil)
	if err != nil || !slices.Equal(done.Values, []string{"paris", "park", "party"}) {
		t.Errorf("completion: %+v, %v", done, err)
	}
	entries, err := mcpclient.Collect(skills.List(ctx, c))
	if err != nil || len(entries) != 2 {
		t.Fatalf("skills %v, %v", entries, err)
	}
	for _, s := range entries {
		for _, err := range skills.Files(ctx, c, s) {
			if err != nil {
				t.Errorf("skill %s: %v", s.URI, err)
			}
		}
	}
}

// TestServesTheEndpointAlone: the mcptest handler serves the legacy HTTP+SSE transport on paths
// of its own, which the program leaves out, and it refuses other origins than local ones.
func TestServesTheEndpointAlone(t *testing.T) {
	url := start(t)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	base := strings.TrimSuffix(url, "/mcp")
	for _, path := range []string{"/sse", "/", "/mcp/sse"} {
		resp, err := hc.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Origin", "http://evil.example.com")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a foreign Origin: %d, want 403", resp.StatusCode)
	}
}
