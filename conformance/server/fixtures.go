package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"log/slog"
	"strings"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// revisions are the protocol revisions the server speaks, preferred first: the newest stateful
// one leads, since an initialize offering a revision the server does not speak is answered with
// the first, and 2026-07-28 has no initialize.
var revisions = []string{
	mcpclient.ProtocolVersion20251125,
	mcpclient.ProtocolVersion20260728,
	mcpclient.ProtocolVersion20250618,
	mcpclient.ProtocolVersion20250326,
	mcpclient.ProtocolVersion20241105,
}

// sseRetry is the reconnection delay the server's SSE streams suggest.
const sseRetry = 500 * time.Millisecond

// newServer returns the conformance server, not listening: its handler serves the MCP endpoint.
func newServer(log *slog.Logger) *mcptest.HTTPServer {
	opts := []mcptest.Option{
		mcptest.WithLogger(log),
		mcptest.WithServerInfo(mcpclient.Implementation{Name: "mcpclient-conformance-server", Version: mcpclient.Version}),
		mcptest.WithProtocolVersions(revisions...),
		// A plain MCP server: request ids are unique within a session only, and every client
		// of the suite counts from 0 again. Receipts (the default) would refuse a second
		// client's call under an id another used for other content.
		mcptest.WithMode(mcptest.ModeNone),
		// Answers on SSE streams carry what a tool sends while it runs (progress, its requests
		// to the client) with the answer, and can be resumed.
		mcptest.WithSSEResponses(sseRetry),
		// test_reconnection's answer comes only on a resumed stream: the server closes the
		// call's stream after its priming event, as a server that has its clients poll does.
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.CloseStream, Tool: "test_reconnection", Times: -1}),
		mcptest.WithCompletion(complete),
	}
	opts = append(opts, resources()...)
	opts = append(opts, prompts()...)
	opts = append(opts, skillFixtures()...)
	opts = append(opts, mrtrFixtures()...)
	opts = append(opts, taskFixtures()...)
	h := mcptest.NewUnstartedHTTPServer(opts...)
	addTools(h)
	return h
}

// textResult is a tool result of one text block.
func textResult(text string) *mcpclient.CallToolResult {
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(text)}}
}

// pause waits for d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// schema is a JSON Schema written as a Go value.
func schema(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the fixtures' own literals
	}
	return b
}

var noArguments = schema(map[string]any{"type": "object", "properties": map[string]any{}})

// stringArguments is the schema of an object of required string arguments.
func stringArguments(names ...string) json.RawMessage {
	props := map[string]any{}
	for _, n := range names {
		props[n] = map[string]any{"type": "string"}
	}
	return schema(map[string]any{"type": "object", "properties": props, "required": names})
}

// arguments decodes a call's arguments into v; absent arguments leave v as it is.
func arguments(call *mcptest.ToolCall, v any) error {
	if len(call.Arguments) == 0 {
		return nil
	}
	if err := json.Unmarshal(call.Arguments, v); err != nil {
		return fmt.Errorf("arguments of %s: %w", call.Name, err)
	}
	return nil
}

// redPixelPNG is a 1x1 red PNG, base64.
var redPixelPNG = func() string {
	img := image.NewRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}()

// silentWAV is a tenth of a second of 8 kHz 8-bit mono silence, base64.
var silentWAV = func() string {
	const rate, samples = 8000, 800
	var b bytes.Buffer
	le := func(v any) { binary.Write(&b, binary.LittleEndian, v) } // a bytes.Buffer does not fail
	b.WriteString("RIFF")
	le(uint32(36 + samples))
	b.WriteString("WAVEfmt ")
	le(uint32(16))   // fmt chunk size
	le(uint16(1))    // PCM
	le(uint16(1))    // mono
	le(uint32(rate)) // sample rate
	le(uint32(rate)) // byte rate
	le(uint16(1))    // block align
	le(uint16(8))    // bits per sample
	b.WriteString("data")
	le(uint32(samples))
	b.Write(bytes.Repeat([]byte{128}, samples)) // 8-bit PCM is unsigned: 128 is silence
	return base64.StdEncoding.EncodeToString(b.Bytes())
}()

func embedded(uri, mimeType, text string) mcpclient.Content {
	return mcpclient.Content{Type: "resource", Resource: schema(mcpclient.ResourceContents{URI: uri, MIMEType: mimeType, Text: text})}
}

// json2020Schema is the input schema of json_schema_2020_12_tool: keywords of JSON Schema
// 2020-12 that a server must pass on as they are.
var json2020Schema = schema(map[string]any{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"type":    "object",
	"$defs": map[string]any{
		"address": map[string]any{
			"$anchor":    "addressDef",
			"type":       "object",
			"properties": map[string]any{"street": map[string]any{"type": "string"}, "city": map[string]any{"type": "string"}},
		},
	},
	"properties": map[string]any{
		"name":          map[string]any{"type": "string"},
		"address":       map[string]any{"$ref": "#/$defs/address"},
		"contactMethod": map[string]any{"type": "string", "enum": []string{"phone", "email"}},
		"phone":         map[string]any{"type": "string"},
		"email":         map[string]any{"type": "string"},
	},
	"allOf": []any{map[string]any{"anyOf": []any{
		map[string]any{"required": []string{"phone"}},
		map[string]any{"required": []string{"email"}},
	}}},
	"if": map[string]any{
		"properties": map[string]any{"contactMethod": map[string]any{"const": "phone"}},
		"required":   []string{"contactMethod"},
	},
	"then":                 map[string]any{"required": []string{"phone"}},
	"else":                 map[string]any{"required": []string{"email"}},
	"additionalProperties": false,
})

// elicit asks the client to fill in a form and reports its answer as the text the elicitation
// scenarios expect.
func elicit(ctx context.Context, call *mcptest.ToolCall, prefix, message string, requested json.RawMessage) (*mcpclient.CallToolResult, error) {
	raw, err := call.Request(ctx, "elicitation/create", map[string]any{"message": message, "requestedSchema": requested})
	if err != nil {
		return nil, fmt.Errorf("elicitation/create: %w", err)
	}
	var res mcpclient.ElicitResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("elicitation/create answered %s: %w", raw, err)
	}
	content, _ := json.Marshal(res.Content) // decoded JSON
	return textResult(fmt.Sprintf("%saction=%s, content=%s", prefix, res.Action, content)), nil
}

// sample asks the client for a completion of prompt and returns the text of its answer.
func sample(ctx context.Context, call *mcptest.ToolCall, prompt string, maxTokens int) (string, error) {
	raw, err := call.Request(ctx, "sampling/createMessage", map[string]any{
		"messages":  []any{map[string]any{"role": "user", "content": mcpclient.TextContent(prompt)}},
		"maxTokens": maxTokens,
	})
	if err != nil {
		return "", fmt.Errorf("sampling/createMessage: %w", err)
	}
	var res struct {
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return "", fmt.Errorf("sampling/createMessage answered %s: %w", raw, err)
	}
	// One block, or (2025-11-25 and later) an array of blocks.
	var blocks []mcpclient.Content
	var one mcpclient.Content
	if json.Unmarshal(res.Content, &one) == nil && one.Type != "" {
		blocks = []mcpclient.Content{one}
	} else {
		json.Unmarshal(res.Content, &blocks) // no text found reads as ""
	}
	var texts []string
	for _, b := range blocks {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// nameForm is the form that asks for one string field.
func nameForm(field string) json.RawMessage {
	return schema(map[string]any{
		"type":       "object",
		"properties": map[string]any{field: map[string]any{"type": "string"}},
		"required":   []string{field},
	})
}

// addTools registers the tools the scenarios call.
func addTools(h *mcptest.HTTPServer) {
	tool := func(name, description string, input json.RawMessage, fn mcptest.ToolFunc) {
		if input == nil {
			input = noArguments
		}
		h.AddTool(mcpclient.Tool{Name: name, Description: description, InputSchema: input}, fn)
	}

	// Content of each kind.
	tool("test_simple_text", "Returns a simple text response", nil, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return textResult("This is a simple text response for testing."), nil
	})
	tool("test_image_content", "Returns a 1x1 red PNG image", nil, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{{Type: "image", Data: redPixelPNG, MIMEType: "image/png"}}}, nil
	})
	tool("test_audio_content", "Returns a short silent WAV clip", nil, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{{Type: "audio", Data: silentWAV, MIMEType: "audio/wav"}}}, nil
	})
	tool("test_embedded_resource", "Returns an embedded text resource", nil, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{
			embedded("test://embedded-resource", "text/plain", "This is an embedded resource content."),
		}}, nil
	})
	tool("test_multiple_content_types", "Returns text, an image and an embedded resource", nil, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{
			mcpclient.TextContent("Multiple content types test:"),
			{Type: "image", Data: redPixelPNG, MIMEType: "image/png"},
			embedded("test://mixed-content-resource", "application/json", `{"test":"data","value":123}`),
		}}, nil
	})
	tool("test_error_handling", "Always fails, as a tool error", nil, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return nil, errors.New("This tool intentionally returns an error for testing")
	})

	// Notifications while running.
	tool("test_tool_with_logging", "Logs three messages while it runs", nil, func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
			if i > 0 {
				if err := pause(ctx, 50*time.Millisecond); err != nil {
					return nil, err
				}
			}
			if err := h.Log(mcpclient.LevelInfo, "test_tool_with_logging", msg); err != nil {
				return nil, err
			}
		}
		return textResult("Tool with logging executed successfully"), nil
	})
	tool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100", nil, func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		for i, p := range []float64{0, 50, 100} {
			if i > 0 {
				if err := pause(ctx, 50*time.Millisecond); err != nil {
					return nil, err
				}
			}
			call.Progress(p, 100, "")
		}
		return textResult("Tool with progress executed successfully"), nil
	})
	tool("test_reconnection", "Answers only on a resumed stream: the server closes the call's SSE stream before the answer", nil, func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		if err := pause(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
		return textResult("Reconnection test completed"), nil
	})

	// Requests to the client.
	tool("test_sampling", "Asks the client's LLM to answer a prompt", stringArguments("prompt"), func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		var args struct{ Prompt string }
		if err := arguments(call, &args); err != nil {
			return nil, err
		}
		text, err := sample(ctx, call, args.Prompt, 100)
		if err != nil {
			return nil, err
		}
		return textResult("LLM response: " + text), nil
	})
	tool("test_elicitation", "Asks the user for a username and an email address", stringArguments("message"), func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		var args struct{ Message string }
		if err := arguments(call, &args); err != nil {
			return nil, err
		}
		return elicit(ctx, call, "User response: ", args.Message, schema(map[string]any{
			"type": "object",
			"properties": map[string]any{
				"username": map[string]any{"type": "string", "description": "User's response"},
				"email":    map[string]any{"type": "string", "description": "User's email address"},
			},
			"required": []string{"username", "email"},
		}))
	})
	tool("test_elicitation_sep1034_defaults", "Asks for a form whose fields have default values", nil, func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return elicit(ctx, call, "Elicitation completed: ", "Please review and update the form fields with defaults", schema(map[string]any{
			"type": "object",
			"properties": map[string]any{
				"name":     map[string]any{"type": "string", "description": "User name", "default": "John Doe"},
				"age":      map[string]any{"type": "integer", "description": "User age", "default": 30},
				"score":    map[string]any{"type": "number", "description": "User score", "default": 95.5},
				"status":   map[string]any{"type": "string", "description": "User status", "enum": []string{"active", "inactive", "pending"}, "default": "active"},
				"verified": map[string]any{"type": "boolean", "description": "Verification status", "default": true},
			},
		}))
	})
	titled := func(prefix string, titles ...string) []any {
		out := make([]any, len(titles))
		for i, t := range titles {
			out[i] = map[string]any{"const": fmt.Sprintf("%s%d", prefix, i+1), "title": t}
		}
		return out
	}
	tool("test_elicitation_sep1330_enums", "Asks for a form with every kind of enum field", nil, func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return elicit(ctx, call, "Elicitation completed: ", "Please select options from the enum fields", schema(map[string]any{
			"type": "object",
			"properties": map[string]any{
				"untitledSingle": map[string]any{"type": "string", "description": "Select one option", "enum": []string{"option1", "option2", "option3"}},
				"titledSingle": map[string]any{"type": "string", "description": "Select one option with titles",
					"oneOf": titled("value", "First Option", "Second Option", "Third Option")},
				"legacyEnum": map[string]any{"type": "string", "description": "Select one option (legacy)",
					"enum": []string{"opt1", "opt2", "opt3"}, "enumNames": []string{"Option One", "Option Two", "Option Three"}},
				"untitledMulti": map[string]any{"type": "array", "description": "Select multiple options",
					"items": map[string]any{"type": "string", "enum": []string{"option1", "option2", "option3"}}},
				"titledMulti": map[string]any{"type": "array", "description": "Select multiple options with titles",
					"items": map[string]any{"anyOf": titled("value", "First Choice", "Second Choice", "Third Choice")}},
			},
		}))
	})

	tool("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", json2020Schema, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return textResult("JSON Schema 2020-12 tool called"), nil
	})

	addStatelessTools(h, tool)
}

// addStatelessTools registers the diagnostic tools of the 2026-07-28 (stateless) scenarios.
func addStatelessTools(h *mcptest.HTTPServer, tool func(string, string, json.RawMessage, mcptest.ToolFunc)) {
	tool("test_logging_tool", "Logs a message at each level while it runs", nil, func(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		for _, level := range []mcpclient.LoggingLevel{mcpclient.LevelDebug, mcpclient.LevelInfo, mcpclient.LevelWarning, mcpclient.LevelError} {
			if err := call.Log(level, "test_logging_tool", "a "+string(level)+" message"); err != nil {
				return nil, err
			}
		}
		return textResult("Logged a message at each level"), nil
	})
	tool("test_trigger_tool_change", "Changes the tool list and announces it", nil, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		h.AddTool(mcpclient.Tool{Name: "test_dynamic_tool", Description: "Added by test_trigger_tool_change", InputSchema: noArguments},
			func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
				return textResult("dynamic tool called"), nil
			})
		return textResult("Tool list changed"), nil
	})
	tool("test_trigger_prompt_change", "Announces a change of the prompt list", nil, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		h.PromptListChanged()
		return textResult("Prompt list changed"), nil
	})
	tool("test_custom_header_tool", "Takes a region also sent as the Mcp-Param-Region header", schema(map[string]any{
		"type":       "object",
		"properties": map[string]any{"region": map[string]any{"type": "string", "x-mcp-header": "Region"}},
		"required":   []string{"region"},
	}), func(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		var args struct{ Region string }
		if err := arguments(call, &args); err != nil {
			return nil, err
		}
		return textResult("Region: " + args.Region), nil
	})
}

// resources are the resources and templates the scenarios read and subscribe to.
func resources() []mcptest.Option {
	text := func(uri, mimeType, text string) mcptest.ResourceFunc {
		return func(context.Context, string) ([]mcpclient.ResourceContents, error) {
			return []mcpclient.ResourceContents{{URI: uri, MIMEType: mimeType, Text: text}}, nil
		}
	}
	return []mcptest.Option{
		mcptest.WithResource(mcpclient.Resource{URI: "test://static-text", Name: "static-text", Description: "A static text resource", MIMEType: "text/plain"},
			text("test://static-text", "text/plain", "This is the content of the static text resource.")),
		mcptest.WithResource(mcpclient.Resource{URI: "test://static-binary", Name: "static-binary", Description: "A static binary resource: a PNG image", MIMEType: "image/png"},
			func(context.Context, string) ([]mcpclient.ResourceContents, error) {
				return []mcpclient.ResourceContents{{URI: "test://static-binary", MIMEType: "image/png", Blob: redPixelPNG}}, nil
			}),
		mcptest.WithResource(mcpclient.Resource{URI: "test://watched-resource", Name: "watched-resource", Description: "A resource to subscribe to", MIMEType: "text/plain"},
			text("test://watched-resource", "text/plain", "Watched resource content")),
		mcptest.WithResourceTemplate(mcpclient.ResourceTemplate{URITemplate: "test://template/{id}/data", Name: "template", Description: "Data for an id", MIMEType: "application/json"},
			func(_ context.Context, uri string) ([]mcpclient.ResourceContents, error) {
				vars, _ := mcptest.MatchURITemplate("test://template/{id}/data", uri) // the server matched it
				data, _ := json.Marshal(map[string]any{"id": vars["id"], "templateTest": true, "data": "Data for ID: " + vars["id"]})
				return []mcpclient.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(data)}}, nil
			}),
	}
}

// prompts are the prompts the scenarios get.
func prompts() []mcptest.Option {
	user := func(c mcpclient.Content) mcpclient.PromptMessage {
		return mcpclient.PromptMessage{Role: "user", Content: c}
	}
	required := func(name, description string) mcpclient.PromptArgument {
		return mcpclient.PromptArgument{Name: name, Description: description, Required: true}
	}
	return []mcptest.Option{
		mcptest.WithPrompt(mcpclient.Prompt{Name: "test_simple_prompt", Description: "A simple prompt without arguments"},
			func(context.Context, map[string]string) (*mcpclient.GetPromptResult, error) {
				return &mcpclient.GetPromptResult{Messages: []mcpclient.PromptMessage{user(mcpclient.TextContent("This is a simple prompt for testing."))}}, nil
			}),
		mcptest.WithPrompt(mcpclient.Prompt{Name: "test_prompt_with_arguments", Description: "A prompt with two required arguments",
			Arguments: []mcpclient.PromptArgument{required("arg1", "First test argument"), required("arg2", "Second test argument")}},
			func(_ context.Context, args map[string]string) (*mcpclient.GetPromptResult, error) {
				return &mcpclient.GetPromptResult{Messages: []mcpclient.PromptMessage{
					user(mcpclient.TextContent(fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", args["arg1"], args["arg2"]))),
				}}, nil
			}),
		mcptest.WithPrompt(mcpclient.Prompt{Name: "test_prompt_with_embedded_resource", Description: "A prompt embedding a resource",
			Arguments: []mcpclient.PromptArgument{required("resourceUri", "URI of the resource to embed")}},
			func(_ context.Context, args map[string]string) (*mcpclient.GetPromptResult, error) {
				return &mcpclient.GetPromptResult{Messages: []mcpclient.PromptMessage{
					user(embedded(args["resourceUri"], "text/plain", "Embedded resource content for testing.")),
					user(mcpclient.TextContent("Please process the embedded resource above.")),
				}}, nil
			}),
		mcptest.WithPrompt(mcpclient.Prompt{Name: "test_prompt_with_image", Description: "A prompt with an image"},
			func(context.Context, map[string]string) (*mcpclient.GetPromptResult, error) {
				return &mcpclient.GetPromptResult{Messages: []mcpclient.PromptMessage{
					user(mcpclient.Content{Type: "image", Data: redPixelPNG, MIMEType: "image/png"}),
					user(mcpclient.TextContent("Please analyze the image above.")),
				}}, nil
			}),
	}
}

// completionValues are the suggestions for every argument, filtered by what the client typed.
var completionValues = []string{"paris", "park", "party"}

func complete(_ context.Context, _ mcpclient.CompletionReference, _, value string, _ map[string]string) (*mcpclient.Completion, error) {
	var values []string
	for _, v := range completionValues {
		if strings.HasPrefix(v, value) {
			values = append(values, v)
		}
	}
	total := len(values)
	return &mcpclient.Completion{Values: values, Total: &total}, nil
}
