package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// mrtrFixtures are the tools and the prompt that ask their client for input: in the stateless
// revision with multi round-trip requests (input_required, then the client's answers), in the
// session revisions with server requests. The keys of their input requests are the ones the
// conformance suite answers to.
func mrtrFixtures() []mcptest.Option {
	return []mcptest.Option{
		mcptest.WithTool(mrtrTool("test_input_required_result_elicitation", "Asks the user's name, then greets them"), mrtrGreet),
		mcptest.WithTool(mrtrTool("test_input_required_result_sampling", "Asks a model for the capital of France"), mrtrCapital),
		mcptest.WithTool(mrtrTool("test_input_required_result_list_roots", "Lists the client's roots"), mrtrRoots),
		mcptest.WithTool(mrtrTool("test_input_required_result_multi_round", "Asks a name, then a favorite color, in two rounds"), mrtrTwoSteps),
		mcptest.WithTool(mrtrTool("test_input_required_result_multiple_inputs", "Asks a name, a model and the roots at once"), mrtrAllAtOnce),
		mcptest.WithTool(mrtrTool("test_input_required_result_request_state", "Asks a confirmation, and says whether it came with a verified requestState"), mrtrConfirm),
		mcptest.WithTool(mrtrTool("test_input_required_result_tampered_state", "Asks a confirmation; its requestState is signed"), mrtrConfirm),
		mcptest.WithTool(mrtrTool("test_input_required_result_capabilities", "Asks only what the client's capabilities cover"), mrtrWhatTheClientCan),
		mcptest.WithTool(mrtrTool("test_missing_capability", "Needs sampling: refused to a client that did not declare it"), mrtrCapital),
		mcptest.WithTool(mrtrTool("test_streaming_elicitation", "Asks the user's name by elicitation, never with a request on the response stream"), mrtrGreet),
		mcptest.WithPromptCall(mcpclient.Prompt{Name: "test_input_required_result_prompt",
			Description: "A prompt whose context the user gives by elicitation"}, mrtrContextPrompt),
	}
}

func mrtrTool(name, description string) mcpclient.Tool {
	return mcpclient.Tool{Name: name, Description: description, InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)}
}

// mrtrElicit asks for one string field of a form, under key.
func mrtrElicit(key, message, field string) mcptest.InputRequest {
	return mcptest.InputRequest{Key: key, Method: "elicitation/create", Params: mcpclient.ElicitParams{
		Message:         message,
		RequestedSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{%q:{"type":"string"}},"required":[%q]}`, field, field)),
	}}
}

// mrtrSample asks a model one question, under key.
func mrtrSample(key, question string, maxTokens int) mcptest.InputRequest {
	return mcptest.InputRequest{Key: key, Method: "sampling/createMessage", Params: mcpclient.CreateMessageParams{
		Messages:  []mcpclient.SamplingMessage{{Role: "user", Content: mcpclient.SamplingContent{mcpclient.TextContent(question)}}},
		MaxTokens: maxTokens,
	}}
}

var (
	mrtrAskName    = mrtrElicit("user_name", "What is your name?", "name")
	mrtrAskCapital = mrtrSample("capital_question", "What is the capital of France?", 100)
	mrtrAskRoots   = mcptest.InputRequest{Key: "client_roots", Method: "roots/list"}
)

// mrtrField reads a string field of an elicitation's answer: "" unless the user accepted.
func mrtrField(raw json.RawMessage, field string) string {
	var r mcpclient.ElicitResult
	if json.Unmarshal(raw, &r) != nil || r.Action != mcpclient.ElicitAccept {
		return ""
	}
	v, _ := r.Content[field].(string)
	return v
}

// mrtrSampled reads the text of a sampling answer.
func mrtrSampled(raw json.RawMessage) string {
	var r mcpclient.CreateMessageResult
	if json.Unmarshal(raw, &r) != nil || len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

// mrtrRootURIs reads the URIs of a roots/list answer.
func mrtrRootURIs(raw json.RawMessage) []string {
	var r struct {
		Roots []mcpclient.Root `json:"roots"`
	}
	json.Unmarshal(raw, &r) // checked by the server before the tool reads it
	uris := make([]string, 0, len(r.Roots))
	for _, root := range r.Roots {
		uris = append(uris, root.URI)
	}
	return uris
}

func mrtrGreet(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	res, err := call.RequestAll(ctx, mrtrAskName)
	if err != nil {
		return nil, err
	}
	return textResult("Hello, " + mrtrField(res[0], "name") + "!"), nil
}

func mrtrCapital(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	res, err := call.RequestAll(ctx, mrtrAskCapital)
	if err != nil {
		return nil, err
	}
	return textResult("The model says: " + mrtrSampled(res[0])), nil
}

func mrtrRoots(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	res, err := call.RequestAll(ctx, mrtrAskRoots)
	if err != nil {
		return nil, err
	}
	return textResult("Roots: " + strings.Join(mrtrRootURIs(res[0]), ", ")), nil
}

// mrtrTwoSteps asks its second question only once the first is answered: two rounds.
func mrtrTwoSteps(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	name, err := call.RequestAll(ctx, mrtrElicit("step1", "Step 1: What is your name?", "name"))
	if err != nil {
		return nil, err
	}
	color, err := call.RequestAll(ctx, mrtrElicit("step2", "Step 2: What is your favorite color?", "color"))
	if err != nil {
		return nil, err
	}
	return textResult(fmt.Sprintf("%s likes %s", mrtrField(name[0], "name"), mrtrField(color[0], "color"))), nil
}

func mrtrAllAtOnce(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	res, err := call.RequestAll(ctx, mrtrAskName, mrtrSample("greeting", "Generate a greeting", 50), mrtrAskRoots)
	if err != nil {
		return nil, err
	}
	return textResult(fmt.Sprintf("%s, %s! Roots: %s", mrtrSampled(res[1]), mrtrField(res[0], "name"),
		strings.Join(mrtrRootURIs(res[2]), ", "))), nil
}

// mrtrConfirm asks for a confirmation. Its answer says state-ok when it came with a requestState
// the server verified (any round after the first), which a client that sends the answer
// without the state never gets.
func mrtrConfirm(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	res, err := call.RequestAll(ctx, mcptest.InputRequest{Key: "confirm", Method: "elicitation/create", Params: mcpclient.ElicitParams{
		Message:         "Please confirm",
		RequestedSchema: json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`),
	}})
	if err != nil {
		return nil, err
	}
	var r mcpclient.ElicitResult
	json.Unmarshal(res[0], &r) // checked by the server before the tool reads it
	if call.Round() == 1 {
		return textResult(fmt.Sprintf("confirmation %s without a requestState", r.Action)), nil
	}
	return textResult(fmt.Sprintf("state-ok: confirmation %s in round %d", r.Action, call.Round())), nil
}

// mrtrWhatTheClientCan asks, at once, whatever the client's declared capabilities let it ask.
func mrtrWhatTheClientCan(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	caps := call.ClientCapabilities()
	var asks []mcptest.InputRequest
	if len(caps.Sampling) > 0 {
		asks = append(asks, mrtrAskCapital)
	}
	if mrtrElicitsForms(caps.Elicitation) {
		asks = append(asks, mrtrAskName)
	}
	if caps.Roots != nil {
		asks = append(asks, mrtrAskRoots)
	}
	if len(asks) == 0 {
		return textResult("the client declared nothing to ask it with"), nil
	}
	res, err := call.RequestAll(ctx, asks...)
	if err != nil {
		return nil, err
	}
	return textResult(fmt.Sprintf("inputs answered: %d", len(res))), nil
}

// mrtrElicitsForms reports whether an elicitation capability covers form mode: an empty one
// does, as clients declared it before modes existed.
func mrtrElicitsForms(capability json.RawMessage) bool {
	var modes map[string]json.RawMessage
	if json.Unmarshal(capability, &modes) != nil || modes == nil {
		return false
	}
	_, form := modes["form"]
	return form || len(modes) == 0
}

func mrtrContextPrompt(ctx context.Context, call *mcptest.PromptCall) (*mcpclient.GetPromptResult, error) {
	res, err := call.RequestAll(ctx, mrtrElicit("user_context", "What context should the prompt use?", "context"))
	if err != nil {
		return nil, err
	}
	given := mrtrField(res[0], "context")
	if given == "" {
		return nil, errors.New("the user gave no context")
	}
	return &mcpclient.GetPromptResult{Messages: []mcpclient.PromptMessage{
		{Role: "user", Content: mcpclient.TextContent("Answer with this context in mind: " + given)},
	}}, nil
}
