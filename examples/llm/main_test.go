package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"go.uber.org/goleak"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const question = "Book room 12 for the night of 2026-12-24."

var (
	reserveInput  = json.RawMessage(`{"room":"12","night":"2026-12-24"}`)
	reserveSchema = json.RawMessage(`{"type":"object","properties":{"room":{"type":"string"},"night":{"type":"string"}},"required":["room","night"]}`)
	reserveTool   = mcpclient.Tool{Name: "reserve", Description: "Book a room.", InputSchema: reserveSchema}
	reservePlan   = map[string]plannedCall{question: {Tool: "reserve", Input: reserveInput}}
)

// newFakeModel serves h as the Messages API on httptest and returns an SDK client for it.
func newFakeModel(t *testing.T, h http.Handler) anthropic.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return anthropic.NewClient(
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(srv.URL),
		option.WithAPIKey("test"),
		option.WithHTTPClient(srv.Client()),
		option.WithMaxRetries(0),
	)
}

// toolRecorder is a tool that books and keeps the arguments of every call.
type toolRecorder struct {
	mu   sync.Mutex
	args [][]byte
}

func (r *toolRecorder) reserve(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.args = append(r.args, call.Arguments)
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("booked, ref R-001")}}, nil
}

func (r *toolRecorder) calls() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.args
}

// decode unmarshals a request body into generic JSON values, independently of the fake's types.
func decode(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("request body %s: %v", body, err)
	}
	return v
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	norm := func(v any) any {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var out any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// toolResultOf returns the tool_result block that ends the conversation of a request body.
func toolResultOf(t *testing.T, body []byte) map[string]any {
	t.Helper()
	msgs, _ := decode(t, body)["messages"].([]any)
	if len(msgs) == 0 {
		t.Fatalf("no messages in %s", body)
	}
	last, _ := msgs[len(msgs)-1].(map[string]any)
	content, _ := last["content"].([]any)
	if last["role"] != "user" || len(content) != 1 {
		t.Fatalf("last message %v: want a user message with one block", last)
	}
	block, _ := content[0].(map[string]any)
	if block["type"] != "tool_result" {
		t.Fatalf("last block %v: want a tool_result", block)
	}
	return block
}

// toolResultText returns the text of a tool_result block, and whether it is marked as an error.
func toolResultText(t *testing.T, block map[string]any) (string, bool) {
	t.Helper()
	var parts []string
	content, _ := block["content"].([]any)
	for _, c := range content {
		if c, _ := c.(map[string]any); c["type"] == "text" {
			parts = append(parts, c["text"].(string))
		}
	}
	isError, _ := block["is_error"].(bool)
	return strings.Join(parts, "\n"), isError
}

// TestToolCallRoundTrip: the model's tool call runs on the MCP server with the model's input,
// the tool's result reaches the model in its next request under the tool_use's id, and the
// model's text is the answer.
func TestToolCallRoundTrip(t *testing.T) {
	var tool toolRecorder
	srv := mcptest.NewTestServer(t, mcptest.WithTool(reserveTool, tool.reserve))
	c := mcptest.NewClient(t, srv)
	model := &fakeModel{plans: reservePlan}
	a := &agent{llm: newFakeModel(t, model), mcp: c, model: "fake", maxTurns: 4}

	answer, err := a.ask(t.Context(), question)
	if err != nil {
		t.Fatal(err)
	}
	if calls := tool.calls(); len(calls) != 1 || !jsonEqual(t, json.RawMessage(calls[0]), reserveInput) {
		t.Fatalf("tool calls %q, want one with %s", calls, reserveInput)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests to the model, want 2", len(reqs))
	}

	first := decode(t, reqs[0])
	wantTools := []any{map[string]any{"name": "reserve", "description": "Book a room.", "input_schema": reserveSchema}}
	if !jsonEqual(t, first["tools"], wantTools) {
		t.Errorf("tools offered %v, want %v", first["tools"], wantTools)
	}

	second := decode(t, reqs[1])
	msgs := second["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("second request has %d messages, want question, tool call, tool result", len(msgs))
	}
	use := msgs[1].(map[string]any)["content"].([]any)[1].(map[string]any)
	if use["type"] != "tool_use" || use["name"] != "reserve" || !jsonEqual(t, use["input"], reserveInput) {
		t.Errorf("assistant turn sent back as %v, want the model's tool_use", use)
	}
	result := toolResultOf(t, reqs[1])
	if result["tool_use_id"] != use["id"] {
		t.Errorf("tool_result for %v, want %v", result["tool_use_id"], use["id"])
	}
	if text, isError := toolResultText(t, result); text != "booked, ref R-001" || isError {
		t.Errorf("tool_result %q (error %v), want the tool's text", text, isError)
	}
	if answer != "Done: booked, ref R-001" {
		t.Errorf("answer %q", answer)
	}
}

// TestLostReplyReachesModelAsOutcomeUnknown: a tool that may not run twice, on a server that keeps
// no receipts, loses its reply after running. The loop does not call it again: the model is told
// the outcome is unknown and must be checked, and the tool ran once.
func TestLostReplyReachesModelAsOutcomeUnknown(t *testing.T) {
	var tool toolRecorder
	srv := mcptest.NewTestServer(t, mcptest.WithMode(mcptest.ModeNone), mcptest.WithTool(reserveTool, tool.reserve))
	srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "reserve"})
	c := mcptest.NewClient(t, srv)
	model := &fakeModel{plans: reservePlan}
	a := &agent{llm: newFakeModel(t, model), mcp: c, model: "fake", maxTurns: 4}

	answer, err := a.ask(t.Context(), question)
	if err != nil {
		t.Fatal(err)
	}
	if n := srv.Executions("reserve"); n != 1 {
		t.Errorf("reserve ran %d times, want 1", n)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests to the model, want 2", len(reqs))
	}
	text, isError := toolResultText(t, toolResultOf(t, reqs[1]))
	if !isError || !strings.Contains(text, "Outcome unknown") || !strings.Contains(text, "may or may not have taken effect") ||
		!strings.Contains(text, "before calling reserve again") {
		t.Errorf("tool_result %q (error %v), want an error saying the outcome is unknown", text, isError)
	}
	if !strings.Contains(answer, "Outcome unknown") {
		t.Errorf("answer %q does not come from the model's view of the result", answer)
	}
}

// failingCaller is an MCP client whose one tool call fails with err.
type failingCaller struct {
	mcpclient.Caller
	err error
}

func (f failingCaller) CachedTools(context.Context) ([]*mcpclient.Tool, error) {
	return []*mcpclient.Tool{&reserveTool}, nil
}

func (f failingCaller) CallTool(context.Context, string, any, ...mcpclient.CallOption) (*mcpclient.CallToolResult, error) {
	return nil, f.err
}

// TestToolFailuresReachModelAsErrors: a tool's isError result and a failed call both reach the
// model as error tool_results with their message; only ErrOutcomeUnknown is told as unknown.
func TestToolFailuresReachModelAsErrors(t *testing.T) {
	refusing := func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return &mcpclient.CallToolResult{IsError: true, Content: []mcpclient.Content{mcpclient.TextContent("room 12 is taken")}}, nil
	}
	srv := mcptest.NewTestServer(t, mcptest.WithTool(reserveTool, refusing))
	// A Caller that decorates the client may wrap its errors; the sentinel is still found.
	unknown := fmt.Errorf("audited call: %w", &mcpclient.Error{Code: mcpclient.CodeOutcomeUnknown, Err: errors.New("reply lost")})
	for _, tc := range []struct {
		name    string
		mcp     func(t *testing.T) mcpclient.Caller
		want    string
		notWant string
	}{
		{"isError result", func(t *testing.T) mcpclient.Caller { return mcptest.NewClient(t, srv) }, "room 12 is taken", "Outcome unknown"},
		{"call failed", func(*testing.T) mcpclient.Caller { return failingCaller{err: errors.New("server went away")} },
			"The tool call failed: server went away", "Outcome unknown"},
		{"outcome unknown", func(*testing.T) mcpclient.Caller { return failingCaller{err: unknown} }, "Outcome unknown", "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakeModel{plans: reservePlan}
			a := &agent{llm: newFakeModel(t, model), mcp: tc.mcp(t), model: "fake", maxTurns: 4}
			if _, err := a.ask(t.Context(), question); err != nil {
				t.Fatal(err)
			}
			reqs := model.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests to the model, want 2", len(reqs))
			}
			text, isError := toolResultText(t, toolResultOf(t, reqs[1]))
			if !isError || !strings.Contains(text, tc.want) || strings.Contains(text, tc.notWant) {
				t.Errorf("tool_result %q (error %v), want an error with %q", text, isError, tc.want)
			}
		})
	}
}

// TestStructuredContentMismatchIsNoError: a result whose structured content breaks the tool's
// output schema still reports what the tool did, not as an error: the tool ran, and an error
// would invite the model to run it again.
func TestStructuredContentMismatchIsNoError(t *testing.T) {
	tool := reserveTool
	tool.OutputSchema = json.RawMessage(`{"type":"object","properties":{"ref":{"type":"string"}},"required":["ref"]}`)
	run := func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return &mcpclient.CallToolResult{
			Content:           []mcpclient.Content{mcpclient.TextContent("booked, ref R-001")},
			StructuredContent: json.RawMessage(`{"ref":1}`),
		}, nil
	}
	srv := mcptest.NewTestServer(t, mcptest.WithTool(tool, run))
	model := &fakeModel{plans: reservePlan}
	a := &agent{llm: newFakeModel(t, model), mcp: mcptest.NewClient(t, srv), model: "fake", maxTurns: 4}
	if _, err := a.ask(t.Context(), question); err != nil {
		t.Fatal(err)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests to the model, want 2", len(reqs))
	}
	text, isError := toolResultText(t, toolResultOf(t, reqs[1]))
	if isError || !strings.Contains(text, "booked, ref R-001") || !strings.Contains(text, "output schema") {
		t.Errorf("tool_result %q (error %v), want the tool's text with a note on the schema", text, isError)
	}
}

// TestTurnLimit: a model that never stops calling tools is asked at most maxTurns times.
func TestTurnLimit(t *testing.T) {
	srv := mcptest.NewTestServer(t, mcptest.WithTool(reserveTool, (&toolRecorder{}).reserve))
	var mu sync.Mutex
	asked := 0
	endless := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked++
		n := asked
		mu.Unlock()
		writeMessage(w, "fake", n, []wireBlock{{Type: "tool_use", ID: fmt.Sprintf("toolu_%02d", n), Name: "reserve", Input: reserveInput}})
	})
	a := &agent{llm: newFakeModel(t, endless), mcp: mcptest.NewClient(t, srv), model: "fake", maxTurns: 3}
	if _, err := a.ask(t.Context(), question); !errors.Is(err, errTooManyTurns) {
		t.Fatalf("error %v, want errTooManyTurns", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if asked != 3 || srv.Executions("reserve") != 3 {
		t.Errorf("model asked %d times, tool ran %d times; want 3 and 3", asked, srv.Executions("reserve"))
	}
}

// TestToolParam: an MCP tool reaches the model with its name, description and input schema,
// every keyword of the schema kept.
func TestToolParam(t *testing.T) {
	for _, tc := range []struct {
		name   string
		schema string
		want   string
	}{
		{"full schema",
			`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"q":{"type":"string","minLength":1}},"required":["q"],"additionalProperties":false}`,
			`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"q":{"type":"string","minLength":1}},"required":["q"],"additionalProperties":false}`},
		{"no schema", ``, `{"type":"object","properties":{}}`},
		{"no properties", `{"type":"object"}`, `{"type":"object","properties":{}}`},
		{"no type", `{"properties":{}}`, `{"type":"object","properties":{}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := toolParam(&mcpclient.Tool{Name: "search", Description: "Search.", InputSchema: json.RawMessage(tc.schema)})
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			want := `{"name":"search","description":"Search.","input_schema":` + tc.want + `}`
			if !jsonEqual(t, json.RawMessage(got), json.RawMessage(want)) {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
	if _, err := toolParam(&mcpclient.Tool{Name: "bad", InputSchema: json.RawMessage(`[1]`)}); err == nil {
		t.Error("a schema that is no JSON object was accepted")
	}
}

// TestResultText: every tool result becomes non-empty text for the model, the text blocks kept
// and the others named.
func TestResultText(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  mcpclient.CallToolResult
		want string
	}{
		{"text blocks", mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("a"), mcpclient.TextContent("b")}}, "a\nb"},
		{"an image", mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("chart:"), {Type: "image", Data: "AAAA", MIMEType: "image/png"}}}, "chart:\n[image content not shown]"},
		{"structured only", mcpclient.CallToolResult{Content: []mcpclient.Content{}, StructuredContent: json.RawMessage(`{"ref":"R-1"}`)}, `{"ref":"R-1"}`},
		{"empty text", mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("")}}, "(the tool returned no content)"},
		{"nothing", mcpclient.CallToolResult{}, "(the tool returned no content)"},
	} {
		if got := resultText(&tc.res); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestRunOffline: without ANTHROPIC_API_KEY the example runs end to end against its fake model.
func TestRunOffline(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	var out bytes.Buffer
	if err := run(t.Context(), &out); err != nil {
		t.Fatalf("%v\n%s", err, &out)
	}
	for _, want := range []string{
		"model:  Done: booked room 12 for 2026-12-24, ref R-001",
		"client: attempt 1 failed",
		"model:  Done: booked room 14 for 2026-12-24, ref R-002",
		"error:  Outcome unknown: the call to reserve was sent",
		"server: reserve ran 0 time(s) for this question",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
}
