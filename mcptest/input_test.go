package mcptest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/receipts"
)

// everyInputCap declares every capability a request for input needs.
var everyInputCap = map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{}, "roots": map[string]any{}}

// callParams are the params of a tools/call of the stateless revision declaring caps, with extra
// members (inputResponses, requestState) merged in.
func callParams(name string, caps map[string]any, extra map[string]any) map[string]any {
	p := map[string]any{"name": name, "arguments": map[string]any{},
		"_meta": meta(map[string]any{"io.modelcontextprotocol/clientCapabilities": caps})}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

func callTool(t *testing.T, url string, id any, params map[string]any) rpcReply {
	t.Helper()
	return post(t, url, headersFor("tools/call", params["name"].(string), nil), request(id, "tools/call", params))
}

type wireInputRequired struct {
	ResultType    string `json:"resultType"`
	InputRequests map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	} `json:"inputRequests"`
	RequestState string `json:"requestState"`
}

// inputRequired reads an input_required answer; it fails the test on any other.
func inputRequired(t *testing.T, r rpcReply) wireInputRequired {
	t.Helper()
	var ir wireInputRequired
	if err := json.Unmarshal(r.last()["result"], &ir); err != nil || ir.ResultType != "input_required" || r.Status != http.StatusOK {
		t.Fatalf("status %d, frames %v: want an input_required result", r.Status, r.Frames)
	}
	return ir
}

// completeText reads the text of a complete tools/call answer; it fails the test on any other.
func completeText(t *testing.T, r rpcReply) string {
	t.Helper()
	var res struct {
		ResultType string `json:"resultType"`
		mcpclient.CallToolResult
	}
	if err := json.Unmarshal(r.last()["result"], &res); err != nil || res.ResultType != "complete" {
		t.Fatalf("status %d, frames %v: want a complete result", r.Status, r.Frames)
	}
	return res.Text()
}

func errorOf(t *testing.T, r rpcReply) (code int64, message string, data json.RawMessage) {
	t.Helper()
	var e struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(r.last()["error"], &e); err != nil {
		t.Fatalf("status %d, frames %v: want an error", r.Status, r.Frames)
	}
	return e.Code, e.Message, e.Data
}

var (
	askName = mcptest.InputRequest{Key: "user_name", Method: "elicitation/create", Params: map[string]any{
		"message":         "What is your name?",
		"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}, "required": []string{"name"}},
	}}
	askModel = mcptest.InputRequest{Method: "sampling/createMessage", Params: map[string]any{
		"messages":  []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "Capital of France?"}}},
		"maxTokens": 10,
	}}
	askRoots = mcptest.InputRequest{Key: "roots", Method: "roots/list"}

	accepted = func(content map[string]any) map[string]any {
		return map[string]any{"action": "accept", "content": content}
	}
	sampled = func(text string) map[string]any {
		return map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": text}, "model": "m"}
	}
	rootsResult = map[string]any{"roots": []any{map[string]any{"uri": "file:///work", "name": "work"}}}
)

// nameOf and textOf read the answers of askName and askModel.
func nameOf(raw json.RawMessage) string {
	var r mcpclient.ElicitResult
	json.Unmarshal(raw, &r)
	name, _ := r.Content["name"].(string)
	return name
}

func textOf(raw json.RawMessage) string {
	var r mcpclient.CreateMessageResult
	if json.Unmarshal(raw, &r) != nil || len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

// interview asks the client's name, then a model: two requests for input, in two rounds in the
// stateless revisions. causes receives the cause its ctx ended with, each time a request ended
// its run.
func interview(causes chan<- error) mcptest.ToolFunc {
	return func(ctx context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		ended := func(err error) (*mcpclient.CallToolResult, error) {
			causes <- context.Cause(ctx)
			return nil, err
		}
		who, err := c.RequestAll(ctx, askName)
		if err != nil {
			return ended(err)
		}
		model, err := c.Request(ctx, askModel.Method, askModel.Params)
		if err != nil {
			return ended(err)
		}
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(
			fmt.Sprintf("round %d: %s, %s", c.Round(), nameOf(who[0]), textOf(model)))}}, nil
	}
}

// TestInputRequiredRounds: a tool that asks twice takes three rounds, each a request of its own:
// the first asks the first thing, the second (with its answer) the second thing, and the third
// (with only the second answer: the requestState carries the first) completes. The tool's run
// ends at each missing answer, its ctx cancelled with ErrInputRequired as the cause.
func TestInputRequiredRounds(t *testing.T) {
	causes := make(chan error, 4)
	srv := statelessServer(t, mcptest.WithTool(mcpclient.Tool{Name: "interview"}, interview(causes)))

	r1 := inputRequired(t, callTool(t, srv.URL, 1, callParams("interview", everyInputCap, nil)))
	ask, ok := r1.InputRequests["user_name"]
	if !ok || len(r1.InputRequests) != 1 || ask.Method != "elicitation/create" || !strings.Contains(string(ask.Params), "What is your name?") {
		t.Fatalf("round 1 asks %+v", r1.InputRequests)
	}
	if r1.RequestState == "" {
		t.Fatal("round 1 has no requestState")
	}
	if err := <-causes; !errors.Is(err, mcptest.ErrInputRequired) {
		t.Errorf("round 1: the tool's ctx ended with %v, want ErrInputRequired", err)
	}

	r2 := inputRequired(t, callTool(t, srv.URL, 2, callParams("interview", everyInputCap, map[string]any{
		"inputResponses": map[string]any{"user_name": accepted(map[string]any{"name": "Ada"})},
		"requestState":   r1.RequestState,
	})))
	ask, ok = r2.InputRequests["input-2"]
	if !ok || len(r2.InputRequests) != 1 || ask.Method != "sampling/createMessage" {
		t.Fatalf("round 2 asks %+v, want the second request under input-2", r2.InputRequests)
	}
	if r2.RequestState == "" || r2.RequestState == r1.RequestState {
		t.Fatalf("round 2 requestState %q, round 1's %q: want a new one", r2.RequestState, r1.RequestState)
	}
	<-causes

	got := completeText(t, callTool(t, srv.URL, 3, callParams("interview", everyInputCap, map[string]any{
		"inputResponses": map[string]any{"input-2": sampled("Paris")},
		"requestState":   r2.RequestState,
	})))
	if got != "round 3: Ada, Paris" {
		t.Errorf("round 3 answered %q", got)
	}
	if n := srv.Executions("interview"); n != 3 {
		t.Errorf("the tool ran %d times, want once a round", n)
	}
}

// TestInputRequestsAtOnce: RequestAll asks several things in one round, under their keys, and a
// round that brings some answers asks only for the others.
func TestInputRequestsAtOnce(t *testing.T) {
	srv := statelessServer(t, mcptest.WithTool(mcpclient.Tool{Name: "survey"}, func(ctx context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		res, err := c.RequestAll(ctx, askName, askModel, askRoots)
		if err != nil {
			return nil, err
		}
		var roots struct{ Roots []mcpclient.Root }
		json.Unmarshal(res[2], &roots)
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(
			fmt.Sprintf("%s, %s, %s", nameOf(res[0]), textOf(res[1]), roots.Roots[0].URI))}}, nil
	}))
	r1 := inputRequired(t, callTool(t, srv.URL, 1, callParams("survey", everyInputCap, nil)))
	methods := map[string]string{}
	for k, v := range r1.InputRequests {
		methods[k] = v.Method
	}
	if fmt.Sprint(methods) != "map[input-2:sampling/createMessage roots:roots/list user_name:elicitation/create]" {
		t.Fatalf("round 1 asks %v", methods)
	}
	r2 := inputRequired(t, callTool(t, srv.URL, 2, callParams("survey", everyInputCap, map[string]any{
		"inputResponses": map[string]any{"user_name": accepted(map[string]any{"name": "Ada"}), "roots": rootsResult},
		"requestState":   r1.RequestState,
	})))
	if _, ok := r2.InputRequests["input-2"]; !ok || len(r2.InputRequests) != 1 {
		t.Fatalf("round 2 asks %+v, want only the unanswered input-2", r2.InputRequests)
	}
	got := completeText(t, callTool(t, srv.URL, 3, callParams("survey", everyInputCap, map[string]any{
		"inputResponses": map[string]any{"input-2": sampled("hi")},
		"requestState":   r2.RequestState,
	})))
	if got != "Ada, hi, file:///work" {
		t.Errorf("answered %q", got)
	}
}

// TestInputRequestStateIsTamperProof: a requestState changed, issued by another server, for
// another tool, for other arguments or for another method is refused with -32602; an intact one
// whose answer is missing gets its question asked again.
func TestInputRequestStateIsTamperProof(t *testing.T) {
	tools := []mcptest.Option{
		mcptest.WithTool(mcpclient.Tool{Name: "interview"}, interview(make(chan error, 16))),
		mcptest.WithTool(mcpclient.Tool{Name: "other"}, interview(make(chan error, 16))),
		mcptest.WithPromptCall(mcpclient.Prompt{Name: "interview"}, func(ctx context.Context, c *mcptest.PromptCall) (*mcpclient.GetPromptResult, error) {
			_, err := c.RequestAll(ctx, askName)
			return nil, err
		}),
	}
	srv, other := statelessServer(t, tools...), statelessServer(t, tools...)
	stateOf := func(url, tool string, args map[string]any) string {
		p := callParams(tool, everyInputCap, nil)
		p["arguments"] = args
		return inputRequired(t, callTool(t, url, 1, p)).RequestState
	}
	state := stateOf(srv.URL, "interview", map[string]any{"a": 1, "b": 2})
	answer := map[string]any{"user_name": accepted(map[string]any{"name": "Ada"})}
	for _, c := range []struct {
		name  string
		tool  string
		args  map[string]any
		state any
	}{
		{"changed", "interview", map[string]any{"a": 1, "b": 2}, state + "-TAMPERED"},
		{"signature of other content", "interview", map[string]any{"a": 1, "b": 2},
			stateOf(srv.URL, "interview", map[string]any{"a": 9})[:strings.Index(state, ".")] + state[strings.Index(state, "."):]},
		{"other server's", "interview", map[string]any{"a": 1, "b": 2}, stateOf(other.URL, "interview", map[string]any{"a": 1, "b": 2})},
		{"other tool's", "other", map[string]any{"a": 1, "b": 2}, state},
		{"other arguments", "interview", map[string]any{"a": 1, "b": 3}, state},
		{"no string", "interview", map[string]any{"a": 1, "b": 2}, 42},
		{"no signature", "interview", map[string]any{"a": 1, "b": 2}, "e30"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := callParams(c.tool, everyInputCap, map[string]any{"inputResponses": answer, "requestState": c.state})
			p["arguments"] = c.args
			r := callTool(t, srv.URL, 2, p)
			if code, msg, _ := errorOf(t, r); code != mcpclient.RPCInvalidParams || !strings.Contains(msg, "requestState") {
				t.Errorf("error %d %q, want -32602 about the requestState", code, msg)
			}
		})
	}
	t.Run("same arguments spelled otherwise", func(t *testing.T) {
		p := callParams("interview", everyInputCap, map[string]any{"inputResponses": answer, "requestState": state})
		p["arguments"] = json.RawMessage(`{ "b": 2.0e0, "a": 1 }`)
		r := callTool(t, srv.URL, 2, p)
		if code, _, _ := errorOf(t, r); code != mcpclient.RPCInvalidParams {
			t.Fatalf("2.0e0 is not 2 as text: error %d", code)
		}
		p["arguments"] = json.RawMessage(`{ "b": 2, "a": 1 }`)
		inputRequired(t, callTool(t, srv.URL, 2, p)) // the answer was taken: the next question
	})
	t.Run("other method's", func(t *testing.T) {
		prompt := callParams("interview", everyInputCap, nil)
		delete(prompt, "arguments")
		pstate := inputRequired(t, post(t, srv.URL, headersFor("prompts/get", "interview", nil), request(1, "prompts/get", prompt))).RequestState
		r := callTool(t, srv.URL, 2, callParams("interview", everyInputCap, map[string]any{"inputResponses": answer, "requestState": pstate}))
		if code, _, _ := errorOf(t, r); code != mcpclient.RPCInvalidParams {
			t.Errorf("a prompt's state on a tools/call: error %d, want -32602", code)
		}
	})
	t.Run("intact without its answer", func(t *testing.T) {
		p := callParams("interview", everyInputCap, map[string]any{"inputResponses": map[string]any{"wrong_key": accepted(nil)}, "requestState": state})
		p["arguments"] = map[string]any{"a": 1, "b": 2}
		again := inputRequired(t, callTool(t, srv.URL, 2, p))
		if _, ok := again.InputRequests["user_name"]; !ok {
			t.Errorf("asks %+v, want user_name again", again.InputRequests)
		}
	})
}

// TestInputResponsesValidated: inputResponses that are no object, or hold something other than
// an object, are refused with -32602 before the tool runs; an answer that is no result of its
// method is refused when the tool reads it; keys the tool does not ask for are ignored, and a
// request may bring its answers without a requestState.
func TestInputResponsesValidated(t *testing.T) {
	var runs atomic.Int32
	srv := statelessServer(t, mcptest.WithTool(mcpclient.Tool{Name: "greet"}, func(ctx context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		runs.Add(1)
		res, err := c.RequestAll(ctx, askName, askModel, askRoots)
		if err != nil {
			return nil, err
		}
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("Hello, " + nameOf(res[0]))}}, nil
	}))
	good := map[string]any{"user_name": accepted(map[string]any{"name": "Ada"}), "input-2": sampled("x"), "roots": rootsResult}
	with := func(key string, v any) map[string]any {
		m := map[string]any{}
		for k, v := range good {
			m[k] = v
		}
		m[key] = v
		return m
	}
	for _, c := range []struct {
		name      string
		responses any
		ran       bool
	}{
		{"null", nil, false},
		{"no object", []any{}, false},
		{"a number for an answer", with("user_name", 12345), false},
		{"unknown action", with("user_name", map[string]any{"action": "maybe"}), true},
		{"content no object", with("user_name", map[string]any{"action": "accept", "content": "Ada"}), true},
		{"sampling without model", with("input-2", map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "x"}}), true},
		{"sampling with an odd role", with("input-2", map[string]any{"role": "system", "content": map[string]any{}, "model": "m"}), true},
		{"roots without roots", with("roots", map[string]any{}), true},
		{"a root without uri", with("roots", map[string]any{"roots": []any{map[string]any{"name": "x"}}}), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := runs.Load()
			r := callTool(t, srv.URL, 1, callParams("greet", everyInputCap, map[string]any{"inputResponses": c.responses}))
			if code, _, _ := errorOf(t, r); code != mcpclient.RPCInvalidParams {
				t.Errorf("error %d, want -32602", code)
			}
			if ran := runs.Load() > before; ran != c.ran {
				t.Errorf("the tool ran: %v, want %v", ran, c.ran)
			}
		})
	}
	t.Run("extra keys are ignored", func(t *testing.T) {
		extra := with("unknown_extra_key", map[string]any{"action": "accept", "content": map[string]any{"foo": "bar"}})
		if got := completeText(t, callTool(t, srv.URL, 1, callParams("greet", everyInputCap, map[string]any{"inputResponses": extra}))); got != "Hello, Ada" {
			t.Errorf("answered %q", got)
		}
	})
	t.Run("wrong keys ask again", func(t *testing.T) {
		r := inputRequired(t, callTool(t, srv.URL, 1, callParams("greet", everyInputCap, map[string]any{
			"inputResponses": map[string]any{"wrong_key": accepted(map[string]any{"data": "wrong"})}})))
		if len(r.InputRequests) != 3 {
			t.Errorf("asks %+v, want all three", r.InputRequests)
		}
	})
}

// TestInputNeedsDeclaredCapabilities: a request for input the client's declared capabilities do
// not cover ends the request with -32021 and HTTP 400, naming what it needs as capability
// objects; the tool is told ErrMissingClientCapability.
func TestInputNeedsDeclaredCapabilities(t *testing.T) {
	told := make(chan error, 1)
	srv := statelessServer(t, mcptest.WithTool(mcpclient.Tool{Name: "ask"}, func(ctx context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		var reqs []mcptest.InputRequest
		if err := json.Unmarshal(c.Arguments, &reqs); err != nil {
			return nil, err
		}
		_, err := c.RequestAll(ctx, reqs...)
		told <- err
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("ignored the error")}}, nil
	}))
	form := mcptest.InputRequest{Method: "elicitation/create", Params: map[string]any{"message": "m", "requestedSchema": map[string]any{"type": "object", "properties": map[string]any{}}}}
	url := mcptest.InputRequest{Method: "elicitation/create", Params: map[string]any{"mode": "url", "message": "m", "url": "https://example.com", "elicitationId": "e"}}
	for _, c := range []struct {
		name string
		caps map[string]any
		reqs []mcptest.InputRequest
		want string // requiredCapabilities; "" for none
	}{
		{"sampling", map[string]any{"elicitation": map[string]any{}, "roots": map[string]any{}}, []mcptest.InputRequest{askModel}, `{"sampling":{}}`},
		{"roots", map[string]any{"sampling": map[string]any{}}, []mcptest.InputRequest{askRoots}, `{"roots":{}}`},
		{"form elicitation", map[string]any{}, []mcptest.InputRequest{form}, `{"elicitation":{"form":{}}}`},
		{"form elicitation, url declared", map[string]any{"elicitation": map[string]any{"url": map[string]any{}}}, []mcptest.InputRequest{form}, `{"elicitation":{"form":{}}}`},
		{"url elicitation, empty declared", map[string]any{"elicitation": map[string]any{}}, []mcptest.InputRequest{url}, `{"elicitation":{"url":{}}}`},
		{"several at once", map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}, []mcptest.InputRequest{askModel, form, url, askRoots},
			`{"elicitation":{"url":{}},"roots":{},"sampling":{}}`},
		{"form elicitation, empty declared", map[string]any{"elicitation": map[string]any{}}, []mcptest.InputRequest{form}, ""},
		{"every mode declared", map[string]any{"elicitation": map[string]any{"form": map[string]any{}, "url": map[string]any{}}}, []mcptest.InputRequest{form, url}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := callParams("ask", c.caps, nil)
			p["arguments"] = c.reqs
			r := callTool(t, srv.URL, 401, p)
			err := <-told
			if c.want == "" {
				inputRequired(t, r)
				if !errors.Is(err, mcptest.ErrInputRequired) {
					t.Errorf("the tool was told %v", err)
				}
				return
			}
			code, _, data := errorOf(t, r)
			var d struct {
				Required json.RawMessage `json:"requiredCapabilities"`
			}
			json.Unmarshal(data, &d)
			if r.Status != http.StatusBadRequest || code != -32021 || string(d.Required) != c.want || string(r.last()["id"]) != "401" {
				t.Errorf("status %d error %d requiredCapabilities %s id %s, want 400 -32021 %s", r.Status, code, d.Required, r.last()["id"], c.want)
			}
			if !errors.Is(err, mcptest.ErrMissingClientCapability) {
				t.Errorf("the tool was told %v", err)
			}
		})
	}
}

// TestInputRunEnds: once a request for input ended the run, later ones fail the same way, and
// after the tool returned one fails at once; a request for something other than input is a
// plain error for the tool.
func TestInputRunEnds(t *testing.T) {
	type run struct {
		call          *mcptest.ToolCall
		first, second error
	}
	runs := make(chan run, 1)
	srv := statelessServer(t,
		mcptest.WithTool(mcpclient.Tool{Name: "stubborn"}, func(ctx context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			_, first := c.RequestAll(ctx, askName)
			_, second := c.RequestAll(ctx, askModel)
			runs <- run{c, first, second}
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("went on regardless")}}, nil
		}),
		mcptest.WithTool(mcpclient.Tool{Name: "pinger"}, func(ctx context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			_, err := c.Request(ctx, "ping", nil)
			return nil, err
		}))
	r := inputRequired(t, callTool(t, srv.URL, 1, callParams("stubborn", everyInputCap, nil)))
	if _, ok := r.InputRequests["user_name"]; !ok || len(r.InputRequests) != 1 {
		t.Errorf("asks %+v, want only what ended the run", r.InputRequests)
	}
	ran := <-runs
	if !errors.Is(ran.first, mcptest.ErrInputRequired) || !errors.Is(ran.second, mcptest.ErrInputRequired) {
		t.Errorf("the tool was told %v, then %v", ran.first, ran.second)
	}
	if _, err := ran.call.Request(context.Background(), "roots/list", nil); err == nil || errors.Is(err, mcptest.ErrInputRequired) {
		t.Errorf("a request after the run: %v", err)
	}

	res := callTool(t, srv.URL, 2, callParams("pinger", everyInputCap, nil))
	var out mcpclient.CallToolResult
	json.Unmarshal(res.last()["result"], &out)
	if !out.IsError || !strings.Contains(out.Text(), "ping") {
		t.Errorf("ping asked as input: %s", res.last()["result"])
	}
}

// TestInputRequiredPrompt: prompts/get asks for input as tools/call does.
func TestInputRequiredPrompt(t *testing.T) {
	srv := statelessServer(t, mcptest.WithPromptCall(mcpclient.Prompt{Name: "greeting"}, func(ctx context.Context, c *mcptest.PromptCall) (*mcpclient.GetPromptResult, error) {
		res, err := c.RequestAll(ctx, askName)
		if err != nil {
			return nil, err
		}
		return &mcpclient.GetPromptResult{Messages: []mcpclient.PromptMessage{{Role: "user", Content: mcpclient.TextContent(
			fmt.Sprintf("Greet %s (round %d, %s, sampling declared: %t)", nameOf(res[0]), c.Round(), c.Arguments["tone"], c.ClientCapabilities().Sampling != nil))}}}, nil
	}))
	get := func(id int, extra map[string]any) rpcReply {
		p := map[string]any{"name": "greeting", "arguments": map[string]any{"tone": "warm"}, "_meta": meta(map[string]any{"io.modelcontextprotocol/clientCapabilities": everyInputCap})}
		for k, v := range extra {
			p[k] = v
		}
		return post(t, srv.URL, headersFor("prompts/get", "greeting", nil), request(id, "prompts/get", p))
	}
	r1 := inputRequired(t, get(1, nil))
	r2 := get(2, map[string]any{"inputResponses": map[string]any{"user_name": accepted(map[string]any{"name": "Ada"})}, "requestState": r1.RequestState})
	var res struct {
		ResultType string `json:"resultType"`
		mcpclient.GetPromptResult
	}
	if err := json.Unmarshal(r2.last()["result"], &res); err != nil || res.ResultType != "complete" || len(res.Messages) != 1 ||
		res.Messages[0].Content.Text != "Greet Ada (round 2, warm, sampling declared: true)" {
		t.Fatalf("round 2: %v", r2.Frames)
	}
}

// TestInputRequiredNotOnTheStream: a tool asking for input over an SSE response sends no request
// on the stream: the stream's one message is the input_required answer.
func TestInputRequiredNotOnTheStream(t *testing.T) {
	srv := statelessServer(t, mcptest.WithSSEResponses(0), mcptest.WithTool(mcpclient.Tool{Name: "interview"}, interview(make(chan error, 1))))
	r := callTool(t, srv.URL, 1, callParams("interview", everyInputCap, nil))
	for _, f := range r.Frames {
		if _, isRequest := f["method"]; isRequest {
			t.Errorf("the stream carries %v", f)
		}
	}
	inputRequired(t, r)
}

// TestInputRequiredRoundsHaveReceipts: each round is a request of its own; one that opted into
// receipts keeps its input_required answer like any other, and a resend of its id reads it
// without running the tool again, the requestState included.
func TestInputRequiredRoundsHaveReceipts(t *testing.T) {
	srv := statelessServer(t, mcptest.WithTool(mcpclient.Tool{Name: "interview"}, interview(make(chan error, 4))))
	caps := map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{},
		"extensions": map[string]any{receipts.ExtensionID: map[string]any{}}}
	first := callTool(t, srv.URL, "r1", callParams("interview", caps, nil))
	again := callTool(t, srv.URL, "r1", callParams("interview", caps, nil))
	if !sameAnswer(string(again.last()["result"]), string(first.last()["result"])) || srv.Executions("interview") != 1 {
		t.Fatalf("a resend of round 1 answered %s (first %s) after %d runs", again.last()["result"], first.last()["result"], srv.Executions("interview"))
	}
	state := inputRequired(t, first).RequestState
	srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "interview"})
	round2 := callParams("interview", caps, map[string]any{
		"inputResponses": map[string]any{"user_name": accepted(map[string]any{"name": "Ada"})}, "requestState": state})
	raw, _ := json.Marshal(request("r2", "tools/call", round2))
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(string(raw)))
	req.Header = headersFor("tools/call", "interview", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("round 2 was answered %d despite the fault", resp.StatusCode)
	}
	inputRequired(t, callTool(t, srv.URL, "r2", round2))
	if n := srv.Executions("interview"); n != 2 {
		t.Errorf("the tool ran %d times, want once for each round", n)
	}
}

// TestRequestAllInSessions: in a session revision RequestAll and a prompt's Request send server
// requests, as Request always did.
func TestRequestAllInSessions(t *testing.T) {
	srv := mcptest.NewTestServer(t,
		mcptest.WithTool(mcpclient.Tool{Name: "survey"}, func(ctx context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			res, err := c.RequestAll(ctx, askName, askModel)
			if err != nil {
				return nil, err
			}
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(
				fmt.Sprintf("round %d: %s, %s; roots declared: %t", c.Round(), nameOf(res[0]), textOf(res[1]), c.ClientCapabilities().Roots != nil))}}, nil
		}),
		mcptest.WithPromptCall(mcpclient.Prompt{Name: "rooted"}, func(ctx context.Context, c *mcptest.PromptCall) (*mcpclient.GetPromptResult, error) {
			raw, err := c.Request(ctx, "roots/list", nil)
			if err != nil {
				return nil, err
			}
			return &mcpclient.GetPromptResult{Messages: []mcpclient.PromptMessage{{Role: "user", Content: mcpclient.TextContent(string(raw))}}}, nil
		}))
	c := mcptest.NewClient(t, srv,
		mcpclient.WithElicitationHandler(func(context.Context, *mcpclient.ElicitParams) (*mcpclient.ElicitResult, error) {
			return &mcpclient.ElicitResult{Action: mcpclient.ElicitAccept, Content: map[string]any{"name": "Ada"}}, nil
		}),
		mcpclient.WithSamplingHandler(func(context.Context, *mcpclient.CreateMessageParams) (*mcpclient.CreateMessageResult, error) {
			return &mcpclient.CreateMessageResult{Role: "assistant", Model: "m", Content: mcpclient.SamplingContent{mcpclient.TextContent("Paris")}}, nil
		}),
		mcpclient.WithRoots(mcpclient.Root{URI: "file:///work"}))
	ctx := context.Background()
	res, err := c.CallTool(ctx, "survey", nil)
	if err != nil || res.Text() != "round 1: Ada, Paris; roots declared: true" {
		t.Fatalf("call: %v %v", res, err)
	}
	p, err := c.GetPrompt(ctx, "rooted", nil)
	if err != nil || len(p.Messages) != 1 || !strings.Contains(p.Messages[0].Content.Text, "file:///work") {
		t.Fatalf("prompt: %+v %v", p, err)
	}
}
