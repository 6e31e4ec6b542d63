package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/northstar-mcp/mcpclient"
)

// maxTokens bounds each answer of the model.
const maxTokens = 1024

// errTooManyTurns ends a conversation in which the model kept calling tools.
var errTooManyTurns = errors.New("the model did not answer within the turn limit")

// An agent lets a model use the tools of an MCP server: it offers the server's tools to the
// model, runs on the server the tool calls the model asks for, and hands the results back, until
// the model answers in text.
type agent struct {
	llm      anthropic.Client
	mcp      mcpclient.Caller
	model    anthropic.Model
	maxTurns int       // requests to the model per question, tool rounds included
	log      io.Writer // the conversation's steps are printed here
}

// ask puts prompt to the model and returns its final answer. The tools are listed from the
// client's cache before each request to the model, so a server's notifications/tools/list_changed
// is followed from one turn to the next. The tool calls of one answer run one after another, in
// the order the model gave them: they may have side effects that depend on each other.
func (a *agent) ask(ctx context.Context, prompt string) (string, error) {
	a.printf("user:   %s\n", prompt)
	messages := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}
	for range a.maxTurns {
		listed, err := a.mcp.CachedTools(ctx)
		if err != nil {
			return "", fmt.Errorf("listing the MCP server's tools: %w", err)
		}
		msg, err := a.llm.Messages.New(ctx, anthropic.MessageNewParams{
			Model:     a.model,
			MaxTokens: maxTokens,
			Messages:  messages,
			Tools:     a.toolParams(listed),
		})
		if err != nil {
			return "", fmt.Errorf("asking the model: %w", err)
		}
		messages = append(messages, msg.ToParam())

		var text []string
		var uses []anthropic.ToolUseBlock
		for _, block := range msg.Content {
			switch b := block.AsAny().(type) {
			case anthropic.TextBlock:
				text = append(text, b.Text)
				a.printf("model:  %s\n", b.Text)
			case anthropic.ToolUseBlock:
				uses = append(uses, b)
			}
		}
		if msg.StopReason != anthropic.StopReasonToolUse || len(uses) == 0 {
			answer := strings.Join(text, "\n")
			switch msg.StopReason {
			case anthropic.StopReasonEndTurn, anthropic.StopReasonStopSequence:
				return answer, nil
			}
			return answer, fmt.Errorf("the model stopped with %q", msg.StopReason)
		}

		results := make([]anthropic.ContentBlockParamUnion, 0, len(uses))
		for _, use := range uses {
			results = append(results, a.callTool(ctx, use))
			if err := ctx.Err(); err != nil {
				return "", err
			}
		}
		messages = append(messages, anthropic.NewUserMessage(results...))
	}
	return "", errTooManyTurns
}

// callTool runs one tool call of the model on the MCP server and returns the tool_result block
// that answers it.
func (a *agent) callTool(ctx context.Context, use anthropic.ToolUseBlock) anthropic.ContentBlockParamUnion {
	a.printf("call:   %s %s\n", use.Name, use.Input)
	var args any // no arguments: none sent
	if len(use.Input) > 0 {
		args = use.Input
	}
	res, err := a.mcp.CallTool(ctx, use.Name, args)
	if err != nil {
		a.printf("mcp:    %v\n", err)
	}
	text, isError := toolOutcome(use.Name, res, err)
	if isError {
		a.printf("error:  %s\n", text)
	} else {
		a.printf("result: %s\n", text)
	}
	return anthropic.NewToolResultBlock(use.ID, text, isError)
}

// outcomeUnknown is what the model is told when a tool call's outcome cannot be known: the
// request may have reached the server and run, and its reply was lost. The client has already
// resent it where that was safe (receipts, a read-only or idempotent tool); what is left needs a
// look at the world before anything is sent again.
const outcomeUnknown = "Outcome unknown: the call to %[1]s was sent, but its reply was lost, so it " +
	"may or may not have taken effect. Check whether it did (with a tool that reads the state it " +
	"changes) before calling %[1]s again: calling it again could do it twice."

// toolOutcome says what a tool call came to, as the model reads it in a tool_result: the text,
// and whether it is an error.
func toolOutcome(name string, res *mcpclient.CallToolResult, err error) (text string, isError bool) {
	switch {
	case errors.Is(err, mcpclient.ErrOutcomeUnknown):
		return fmt.Sprintf(outcomeUnknown, name), true
	case errors.Is(err, mcpclient.ErrStructuredContent) && res != nil:
		// The tool ran and answered; only its structured content does not match the tool's
		// output schema. Reported as an error, it would invite the model to run the tool again.
		return resultText(res) + "\n(The result's structured content does not match the tool's output schema.)", res.IsError
	case err != nil:
		return "The tool call failed: " + err.Error(), true
	}
	return resultText(res), res.IsError
}

// resultText is a tool result as text: its text blocks, a note for each block of another kind,
// and its structured content when it has nothing else. The API refuses empty text, so a result
// with none says so.
func resultText(res *mcpclient.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch {
		case c.Type != "text":
			parts = append(parts, fmt.Sprintf("[%s content not shown]", c.Type))
		case c.Text != "":
			parts = append(parts, c.Text)
		}
	}
	if len(parts) == 0 && len(res.StructuredContent) > 0 {
		parts = append(parts, string(res.StructuredContent))
	}
	if len(parts) == 0 {
		return "(the tool returned no content)"
	}
	return strings.Join(parts, "\n")
}

// toolParams describes the MCP tools to the model. A tool whose input schema is not a JSON
// object is left out, and said so in the log.
func (a *agent) toolParams(tools []*mcpclient.Tool) []anthropic.ToolUnionParam {
	params := make([]anthropic.ToolUnionParam, 0, len(tools))
	for _, t := range tools {
		p, err := toolParam(t)
		if err != nil {
			a.printf("skipped tool %s: %v\n", t.Name, err)
			continue
		}
		params = append(params, p)
	}
	return params
}

// toolParam describes one MCP tool to the model: its name, its description, and its input
// schema. The schema's properties and required list go to the SDK's fields for them and every
// other keyword is passed on as it is; "type" is always "object" for a tool's input.
func toolParam(t *mcpclient.Tool) (anthropic.ToolUnionParam, error) {
	var schema anthropic.ToolInputSchemaParam
	if len(t.InputSchema) > 0 {
		var keywords map[string]json.RawMessage
		if err := json.Unmarshal(t.InputSchema, &keywords); err != nil {
			return anthropic.ToolUnionParam{}, fmt.Errorf("input schema: %w", err)
		}
		if props, ok := keywords["properties"]; ok {
			schema.Properties = props
		}
		if req, ok := keywords["required"]; ok {
			if err := json.Unmarshal(req, &schema.Required); err != nil {
				return anthropic.ToolUnionParam{}, fmt.Errorf("input schema: required: %w", err)
			}
		}
		delete(keywords, "properties")
		delete(keywords, "required")
		delete(keywords, "type")
		if len(keywords) > 0 {
			schema.ExtraFields = make(map[string]any, len(keywords))
			for k, v := range keywords {
				schema.ExtraFields[k] = v
			}
		}
	}
	if schema.Properties == nil {
		// A schema of no keywords but "type" would be left out of the request as a zero value,
		// and the API requires one.
		schema.Properties = json.RawMessage(`{}`)
	}
	p := anthropic.ToolUnionParamOfTool(schema, t.Name)
	if t.Description != "" {
		p.OfTool.Description = anthropic.String(t.Description)
	}
	return p, nil
}

func (a *agent) printf(format string, args ...any) {
	if a.log != nil {
		fmt.Fprintf(a.log, format, args...)
	}
}
