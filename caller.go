package mcpclient

import (
	"context"
	"iter"
)

// A Caller makes requests to an MCP server: the typed calls of a Client, and Do with its
// siblings. *Client implements it. Code that takes a Caller rather than a *Client can be handed a
// decorated client or a fake:
//
//   - a plugin embeds the Caller it wraps and overrides the calls it changes (a policy on
//     CallTool, a cache on ReadResource), the others passing through;
//   - a test embeds a nil Caller and overrides the calls its code makes (any other panics).
//
// Methods may be added to Caller as the protocol grows; embedding keeps such code compiling.
type Caller interface {
	// Session returns what the server settled for the live session, opening one if needed.
	Session(ctx context.Context) (InitializeResult, error)
	Ping(ctx context.Context, opts ...CallOption) error

	CallTool(ctx context.Context, name string, args any, opts ...CallOption) (*CallToolResult, error)
	Tools(ctx context.Context) iter.Seq2[*Tool, error]
	CachedTools(ctx context.Context) ([]*Tool, error)
	ListToolsPage(ctx context.Context, cursor string, opts ...CallOption) (*ListToolsResult, error)

	Resources(ctx context.Context) iter.Seq2[*Resource, error]
	ListResourcesPage(ctx context.Context, cursor string, opts ...CallOption) (*ListResourcesResult, error)
	ResourceTemplates(ctx context.Context) iter.Seq2[*ResourceTemplate, error]
	ListResourceTemplatesPage(ctx context.Context, cursor string, opts ...CallOption) (*ListResourceTemplatesResult, error)
	ReadResource(ctx context.Context, uri string, opts ...CallOption) (*ReadResourceResult, error)
	Subscribe(ctx context.Context, uri string, opts ...CallOption) error
	Unsubscribe(ctx context.Context, uri string, opts ...CallOption) error

	Prompts(ctx context.Context) iter.Seq2[*Prompt, error]
	ListPromptsPage(ctx context.Context, cursor string, opts ...CallOption) (*ListPromptsResult, error)
	GetPrompt(ctx context.Context, name string, args map[string]string, opts ...CallOption) (*GetPromptResult, error)
	Complete(ctx context.Context, ref CompletionReference, name, value string, known map[string]string, opts ...CallOption) (*Completion, error)
	SetLoggingLevel(ctx context.Context, level LoggingLevel, opts ...CallOption) error

	NewRequest(method string, params any, opts ...CallOption) (*Request, error)
	Do(ctx context.Context, req *Request) (*Response, error)
	Resend(ctx context.Context, req *Request) (*Response, error)
	Supersede(ctx context.Context, prev *Request, inspection Inspection, params any, opts ...CallOption) (*Response, error)
	SupersedeToolCall(ctx context.Context, prev *Request, inspection Inspection, args any, opts ...CallOption) (*CallToolResult, error)
}

var _ Caller = (*Client)(nil)
