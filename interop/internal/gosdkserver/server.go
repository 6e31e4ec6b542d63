// Package gosdkserver builds the MCP server, on the official go-sdk, that the interop tests run
// the client against: in process over HTTP, and as the gosdkserver program over stdio.
package gosdkserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

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
}

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
// ran), slow (sleeps ms milliseconds), pingback (pings the client, server to client), progress
// (sends notifications/progress to the request's progress token) and, with AllowExit, exit.
// One resource, one resource template and one prompt.
func New(opts Options) *mcp.Server {
	var adds, fails atomic.Int64
	s := mcp.NewServer(&mcp.Implementation{Name: Name, Version: Version}, &mcp.ServerOptions{
		Instructions:              Instructions,
		PageSize:                  PageSize,
		SupportedProtocolVersions: opts.Versions,
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
			return nil, Executions{Add: adds.Load(), Fail: fails.Load()}, nil
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
