// Package gosdkserver builds the MCP server, on the official go-sdk, that the interop tests run
// the client against: in process over HTTP, and as the gosdkserver program over stdio.
package gosdkserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Name and Version are the server's serverInfo.
const (
	Name         = "interop-gosdk"
	Version      = "1.0.0"
	Instructions = "interop test server"
	PageSize     = 3 // small, so that tools/list is paginated
)

// The server's resource, template and prompt.
const (
	GreetingURI  = "interop://greeting"
	GreetingText = "hello from the go-sdk"
	ItemTemplate = "interop://items/{id}"
	PromptName   = "greet"
)

// AddIn and AddOut are the add tool's input and output: its outputSchema is derived from AddOut.
type AddIn struct {
	A float64 `json:"a" jsonschema:"the first addend"`
	B float64 `json:"b" jsonschema:"the second addend"`
}

type AddOut struct {
	Sum float64 `json:"sum" jsonschema:"a + b"`
}

// Executions counts the tool executions of one server, for the tests to tell whether a resend
// ran a tool again.
type Executions struct {
	Add  int64 `json:"add"`
	Fail int64 `json:"fail"`
	// Pings counts the pings the server received from clients.
	Pings int64 `json:"pings"`
	// Subscriptions is the number of live resources/subscribe.
	Subscriptions int64 `json:"subscriptions"`
}

// CompletionValues are what completion/complete offers for the greet prompt's name argument.
var CompletionValues = []string{"Ada", "Alan", "Alonzo", "Barbara"}

// Options configure New.
type Options struct {
	// Versions restricts the protocol revisions the server negotiates; nil means all the SDK has.
	Versions []string
	// AllowExit adds the exit tool, which ends the process: for the stdio program only.
	AllowExit bool
}

// New returns the server.
//
// Tools: add (numbers in, text and structuredContent out, with an outputSchema), fail (an
// isError result), echo (annotated read-only and idempotent), executions (how often add and fail
// ran, pings received, live subscriptions), slow (sleeps ms milliseconds), pingback (pings the
// client, server to client), progress (sends notifications/progress to the request's progress
// token), log (sends a log record), touch (notifies resources/updated for the greeting), ask
// (asks the client for a sampling, an elicitation or its roots, as a multi round-trip request
// that the SDK turns into server requests for clients before 2026-07-28), badstruct (a
// structuredContent that does not match its outputSchema) and, with AllowExit, exit.
// One resource (subscribable), one resource template, one prompt with completion.
func New(opts Options) *mcp.Server {
	var adds, fails, pings, subs atomic.Int64
	var s *mcp.Server
	s = mcp.NewServer(&mcp.Implementation{Name: Name, Version: Version}, &mcp.ServerOptions{
		Instructions:              Instructions,
		PageSize:                  PageSize,
		SupportedProtocolVersions: opts.Versions,
		CompletionHandler: func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			res := &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}
			if req.Params.Ref == nil || req.Params.Ref.Name != PromptName || req.Params.Argument.Name != "name" {
				return res, nil
			}
			for _, v := range CompletionValues {
				if strings.HasPrefix(v, req.Params.Argument.Value) {
					res.Completion.Values = append(res.Completion.Values, v)
				}
			}
			res.Completion.Total = len(res.Completion.Values)
			return res, nil
		},
		SubscribeHandler: func(ctx context.Context, req *mcp.SubscribeRequest) error {
			subs.Add(1)
			return nil
		},
		UnsubscribeHandler: func(ctx context.Context, req *mcp.UnsubscribeRequest) error {
			subs.Add(-1)
			return nil
		},
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "ping" {
				pings.Add(1)
			}
			return next(ctx, method, req)
		}
	})

	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds two numbers."},
		func(ctx context.Context, req *mcp.CallToolRequest, in AddIn) (*mcp.CallToolResult, AddOut, error) {
			adds.Add(1)
			sum := in.A + in.B
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(sum)}}}, AddOut{Sum: sum}, nil
		})

	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails, with an isError result."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			fails.Add(1)
			return nil, nil, errors.New("deliberate failure")
		})

	no := false
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes its message.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: &no, OpenWorldHint: &no}},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Message string `json:"message"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
		})

	mcp.AddTool(s, &mcp.Tool{Name: "executions", Description: "How often add and fail ran.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, Executions, error) {
			return nil, Executions{Add: adds.Load(), Fail: fails.Load(), Pings: pings.Load(), Subscriptions: subs.Load()}, nil
		})

	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Sleeps ms milliseconds."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			MS int `json:"ms"`
		}) (*mcp.CallToolResult, any, error) {
			select {
			case <-time.After(time.Duration(in.MS) * time.Millisecond):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
		})

	mcp.AddTool(s, &mcp.Tool{Name: "pingback", Description: "Pings the client and reports the outcome."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			if err := req.Session.Ping(ctx, nil); err != nil {
				return nil, nil, fmt.Errorf("ping to the client failed: %w", err)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil, nil
		})

	mcp.AddTool(s, &mcp.Tool{Name: "progress", Description: "Sends two progress notifications."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			token := req.Params.GetProgressToken()
			if token == nil {
				return nil, nil, errors.New("no progress token")
			}
			for i := 1; i <= 2; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token, Progress: float64(i), Total: 2, Message: fmt.Sprintf("step %d", i)}); err != nil {
					return nil, nil, fmt.Errorf("notifying progress: %w", err)
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "progressed"}}}, nil, nil
		})

	mcp.AddTool(s, &mcp.Tool{Name: "log", Description: "Sends a log record at info level."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "interop", Data: "hello from the log tool"}); err != nil {
				return nil, nil, fmt.Errorf("logging: %w", err)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "logged"}}}, nil, nil
		})

	mcp.AddTool(s, &mcp.Tool{Name: "touch", Description: "Notifies that the greeting resource changed."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			if err := s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: GreetingURI}); err != nil {
				return nil, nil, fmt.Errorf("notifying: %w", err)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "touched"}}}, nil, nil
		})

	mcp.AddTool(s, &mcp.Tool{Name: "ask", Description: "Asks the client: kind is sample, elicit or roots."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Kind string `json:"kind"`
		}) (*mcp.CallToolResult, any, error) {
			if resp, ok := req.Params.InputResponses["q"]; ok {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: describeInput(resp)}}}, nil, nil
			}
			var ir mcp.InputRequest
			switch in.Kind {
			case "sample":
				ir = &mcp.CreateMessageParams{MaxTokens: 16,
					Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "What is 2+2?"}}}}
			case "elicit":
				ir = &mcp.ElicitParams{Message: "Who are you?", RequestedSchema: &jsonschema.Schema{Type: "object",
					Properties: map[string]*jsonschema.Schema{
						"name":  {Type: "string"},
						"color": {Type: "string", Default: json.RawMessage(`"blue"`)},
					}, Required: []string{"name"}}}
			case "roots":
				ir = &mcp.ListRootsParams{}
			default:
				return nil, nil, fmt.Errorf("unknown kind %q", in.Kind)
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"q": ir}}, nil, nil
		})

	s.AddTool(&mcp.Tool{Name: "badstruct", Description: "Returns structuredContent that breaks its outputSchema.",
		InputSchema: &jsonschema.Schema{Type: "object"},
		OutputSchema: &jsonschema.Schema{Type: "object", Required: []string{"sum"},
			Properties: map[string]*jsonschema.Schema{"sum": {Type: "number"}}}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"sum":"three"}`}},
				StructuredContent: map[string]any{"sum": "three"}}, nil
		})

	if opts.AllowExit {
		mcp.AddTool(s, &mcp.Tool{Name: "exit", Description: "Ends the server process without answering."},
			func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
				os.Exit(3)
				return nil, nil, nil
			})
	}

	s.AddResource(&mcp.Resource{URI: GreetingURI, Name: "greeting", MIMEType: "text/plain"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
				{URI: GreetingURI, MIMEType: "text/plain", Text: GreetingText}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: ItemTemplate, Name: "item", MIMEType: "text/plain"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
				{URI: req.Params.URI, MIMEType: "text/plain", Text: "item " + req.Params.URI}}}, nil
		})

	s.AddPrompt(&mcp.Prompt{Name: PromptName, Description: "Greets someone.",
		Arguments: []*mcp.PromptArgument{{Name: "name", Required: true}}},
		func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "Hello, " + req.Params.Arguments["name"] + "!"}}}}, nil
		})
	return s
}

// describeInput renders the client's answer to an ask input request.
func describeInput(r mcp.InputResponse) string {
	switch r := r.(type) {
	case *mcp.CreateMessageWithToolsResult:
		var texts []string
		for _, c := range r.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				texts = append(texts, t.Text)
			}
		}
		return fmt.Sprintf("sampled %s from %s", strings.Join(texts, " "), r.Model)
	case *mcp.ElicitResult:
		b, _ := json.Marshal(r.Content)
		return fmt.Sprintf("elicited %s %s", r.Action, b)
	case *mcp.ListRootsResult:
		var uris []string
		for _, root := range r.Roots {
			uris = append(uris, root.URI)
		}
		return "roots " + strings.Join(uris, " ")
	}
	return fmt.Sprintf("unexpected input response %T", r)
}
