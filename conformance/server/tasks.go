package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/tasks"
)

// taskFixtures are the tools the tasks scenarios of the conformance suite call, and the ttl of
// the tasks the server creates through the tasks extension.
//
//   - greet never runs as a task: it answers "Hello, {name}!".
//   - slow_compute may run as a task: it waits {seconds} (0 for none) and reports {label}; a
//     cancelled task stops it, and stays cancelled.
//   - failing_job must run as a task: after about a second it reports a tool error, which
//     completes its task with an isError result.
//   - protocol_error_job may run as a task: it fails with a JSON-RPC internal error, which fails
//     its task.
//   - confirm_delete may run as a task: it asks the client, by elicitation, to confirm the
//     deletion of {filename}.
//   - multi_input may run as a task: it asks the client two things at once, by elicitation (keys
//     first and second), so that a task waits on two requests.
//   - test_tool_with_task must run as a task, which it starts once it has the user's name: the
//     request asks for it by a multi round-trip request (key user_name) before the task exists,
//     and the task greets the user.
func taskFixtures() []mcptest.Option {
	return []mcptest.Option{
		// Long enough for a client polling every few seconds to find a finished task; short
		// enough that a server left running forgets the tasks of past runs.
		mcptest.WithTaskTTL(5 * time.Minute),
		mcptest.WithTool(mcpclient.Tool{
			Name:        "greet",
			Description: "Greets {name}.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
		}, tasksGreet),
		mcptest.WithTool(mcpclient.Tool{
			Name:        "slow_compute",
			Description: "Waits {seconds}, then reports {label}.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"seconds":{"type":"number","minimum":0},"label":{"type":"string"}}}`),
			Execution:   &mcpclient.ToolExecution{TaskSupport: tasks.SupportOptional},
		}, tasksSlowCompute),
		mcptest.WithTool(mcpclient.Tool{
			Name:        "failing_job",
			Description: "Fails with a tool error after about a second.",
			Execution:   &mcpclient.ToolExecution{TaskSupport: tasks.SupportRequired},
		}, tasksFailingJob),
		mcptest.WithTool(mcpclient.Tool{
			Name:        "protocol_error_job",
			Description: "Fails with a JSON-RPC internal error.",
			Execution:   &mcpclient.ToolExecution{TaskSupport: tasks.SupportOptional},
		}, tasksProtocolErrorJob),
		mcptest.WithTool(mcpclient.Tool{
			Name:        "confirm_delete",
			Description: "Asks the client to confirm the deletion of {filename}.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"filename":{"type":"string"}},"required":["filename"]}`),
			Execution:   &mcpclient.ToolExecution{TaskSupport: tasks.SupportOptional},
		}, tasksConfirmDelete),
		mcptest.WithTool(mcpclient.Tool{
			Name:        "multi_input",
			Description: "Asks two questions at once, then reports both answers.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{}}`),
			Execution:   &mcpclient.ToolExecution{TaskSupport: tasks.SupportOptional},
		}, tasksMultiInput),
		mcptest.WithDeferredTask("test_tool_with_task"),
		mcptest.WithTool(mcpclient.Tool{
			Name:        "test_tool_with_task",
			Description: "Asks the user's name, then greets them as a task.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{}}`),
			Execution:   &mcpclient.ToolExecution{TaskSupport: tasks.SupportRequired},
		}, tasksGreetAfterAsking),
	}
}

func tasksGreet(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	var args struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(call.Arguments, &args); err != nil {
		return nil, fmt.Errorf("greet: arguments: %w", err)
	}
	return textResult("Hello, " + args.Name + "!"), nil
}

func tasksSlowCompute(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	var args struct {
		Seconds float64 `json:"seconds"`
		Label   string  `json:"label"`
	}
	if len(call.Arguments) > 0 {
		if err := json.Unmarshal(call.Arguments, &args); err != nil {
			return nil, fmt.Errorf("slow_compute: arguments: %w", err)
		}
	}
	if args.Seconds < 0 {
		return nil, errors.New("slow_compute: seconds must not be negative")
	}
	if err := pause(ctx, time.Duration(args.Seconds*float64(time.Second))); err != nil {
		return nil, err
	}
	return textResult(fmt.Sprintf("computed %q in %gs", args.Label, args.Seconds)), nil
}

func tasksFailingJob(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	if err := pause(ctx, time.Second); err != nil {
		return nil, err
	}
	return nil, errors.New("failing_job: the job failed, as it always does")
}

func tasksProtocolErrorJob(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	return nil, mcptest.ProtocolError(mcpclient.RPCInternalError, "protocol_error_job: internal failure", nil)
}

func tasksConfirmDelete(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	var args struct {
		Filename string `json:"filename"`
	}
	if err := json.Unmarshal(call.Arguments, &args); err != nil {
		return nil, fmt.Errorf("confirm_delete: arguments: %w", err)
	}
	raw, err := call.RequestInput(ctx, "elicitation/create", map[string]any{
		"mode":    "form",
		"message": "Delete " + args.Filename + "?",
		"requestedSchema": map[string]any{
			"type":       "object",
			"properties": map[string]any{"confirm": map[string]any{"type": "boolean"}},
			"required":   []string{"confirm"},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("confirm_delete: cannot ask for confirmation: %w", err)
	}
	var answer struct {
		Action  string `json:"action"`
		Content struct {
			Confirm bool `json:"confirm"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		return nil, fmt.Errorf("confirm_delete: elicitation result: %w", err)
	}
	if answer.Action != "accept" || !answer.Content.Confirm {
		return textResult("kept " + args.Filename), nil
	}
	return textResult("deleted " + args.Filename), nil
}

// tasksForm is an elicitation/create of a form with the given message, asking the string field
// name and a boolean confirm.
func tasksForm(key, message, field string) mcptest.InputRequest {
	return mcptest.InputRequest{Key: key, Method: "elicitation/create", Params: map[string]any{
		"mode":    "form",
		"message": message,
		"requestedSchema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				field:     map[string]any{"type": "string"},
				"confirm": map[string]any{"type": "boolean"},
			},
			"required": []string{field},
		},
	}}
}

// tasksField reads a string field of an accepted elicitation; "" for any other answer.
func tasksField(raw json.RawMessage, field string) (string, error) {
	var answer mcpclient.ElicitResult
	if err := json.Unmarshal(raw, &answer); err != nil {
		return "", fmt.Errorf("elicitation result: %w", err)
	}
	if answer.Action != mcpclient.ElicitAccept {
		return "", nil
	}
	v, _ := answer.Content[field].(string)
	return v, nil
}

func tasksMultiInput(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	answers, err := call.RequestAll(ctx,
		tasksForm("first", "What is the first name?", "name"),
		tasksForm("second", "What is the second name?", "name"))
	if err != nil {
		return nil, fmt.Errorf("multi_input: cannot ask: %w", err)
	}
	var names [2]string
	for i, raw := range answers {
		if names[i], err = tasksField(raw, "name"); err != nil {
			return nil, fmt.Errorf("multi_input: %w", err)
		}
	}
	return textResult(fmt.Sprintf("first %q, second %q", names[0], names[1])), nil
}

func tasksGreetAfterAsking(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	answers, err := call.RequestAll(ctx, tasksForm("user_name", "What is your name?", "name"))
	if err != nil {
		return nil, fmt.Errorf("test_tool_with_task: cannot ask: %w", err)
	}
	name, err := tasksField(answers[0], "name")
	if err != nil {
		return nil, fmt.Errorf("test_tool_with_task: %w", err)
	}
	if err := call.StartTask(); err != nil {
		return nil, fmt.Errorf("test_tool_with_task: cannot start its task: %w", err)
	}
	return textResult("Hello, " + name + "!"), nil
}
