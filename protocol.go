package mcpclient

import "encoding/json"

// MCP protocol revisions this client speaks, newest first.
const (
	ProtocolVersion20260728 = "2026-07-28"
	ProtocolVersion20251125 = "2025-11-25"
	ProtocolVersion20250618 = "2025-06-18"
	ProtocolVersion20250326 = "2025-03-26"
	ProtocolVersion20241105 = "2024-11-05"

	// LatestProtocolVersion is the newest revision, the one the client tries first.
	LatestProtocolVersion = ProtocolVersion20260728
	// LatestStatefulProtocolVersion is the newest revision with the initialize handshake, the one
	// the client offers there.
	LatestStatefulProtocolVersion = ProtocolVersion20251125
)

// supportedVersions are the revisions the client speaks, newest first.
var supportedVersions = []string{
	ProtocolVersion20260728,
	ProtocolVersion20251125,
	ProtocolVersion20250618,
	ProtocolVersion20250326,
	ProtocolVersion20241105,
}

func isSupportedVersion(v string) bool {
	for _, s := range supportedVersions {
		if s == v {
			return true
		}
	}
	return false
}

// isStateless reports whether revision v is stateless: no initialize, no sessions, every request
// carrying its version, capabilities and client info in _meta (2026-07-28 and later).
func isStateless(v string) bool { return v >= ProtocolVersion20260728 }

// Implementation names a client or server program.
type Implementation struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

// ClientCapabilities is what the client declares in initialize. Capabilities for the
// server-initiated features (roots, sampling, elicitation) are declared by the client itself when
// a handler for them is installed; extensions when WithExtension names them.
type ClientCapabilities struct {
	Experimental map[string]json.RawMessage `json:"experimental,omitempty"`
	Roots        *RootsCapability           `json:"roots,omitempty"`
	Sampling     json.RawMessage            `json:"sampling,omitempty"`
	Elicitation  json.RawMessage            `json:"elicitation,omitempty"`
	// Extensions maps the identifier of each extension the client supports to its settings, a
	// JSON object ({} for none).
	Extensions map[string]json.RawMessage `json:"extensions,omitempty"`
}

// RootsCapability declares the client's roots feature.
type RootsCapability struct {
	ListChanged bool `json:"listChanged,omitempty"`
}

// ServerCapabilities is what a server declares in its initialize result.
type ServerCapabilities struct {
	Experimental map[string]json.RawMessage `json:"experimental,omitempty"`
	Logging      json.RawMessage            `json:"logging,omitempty"`
	Completions  json.RawMessage            `json:"completions,omitempty"`
	Prompts      *ListChangedCapability     `json:"prompts,omitempty"`
	Resources    *ResourcesCapability       `json:"resources,omitempty"`
	Tools        *ListChangedCapability     `json:"tools,omitempty"`
	Tasks        json.RawMessage            `json:"tasks,omitempty"`
	// Extensions maps the identifier of each extension the server supports to its settings, a
	// JSON object; see skills.CapabilitiesOf for the Skills extension's.
	Extensions map[string]json.RawMessage `json:"extensions,omitempty"`
}

// ListChangedCapability declares a list feature and whether the server notifies changes.
type ListChangedCapability struct {
	ListChanged bool `json:"listChanged,omitempty"`
}

// ResourcesCapability declares the server's resources feature.
type ResourcesCapability struct {
	Subscribe   bool `json:"subscribe,omitempty"`
	ListChanged bool `json:"listChanged,omitempty"`
}

// initializeParams are the params of the initialize request, which Connect sends.
type initializeParams struct {
	ProtocolVersion string          `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"` // a ClientCapabilities, encoded
	ClientInfo      *Implementation `json:"clientInfo"`
}

// InitializeResult is the server's answer to initialize, or, in a stateless revision, what its
// last answer to server/discover settled.
type InitializeResult struct {
	ProtocolVersion string             `json:"protocolVersion"`
	Capabilities    ServerCapabilities `json:"capabilities"`
	ServerInfo      Implementation     `json:"serverInfo"`
	Instructions    string             `json:"instructions,omitempty"`
	// TTLMs is how long the server said its answer to server/discover stays fresh, in
	// milliseconds from its arrival (2026-07-28 and later): nil when it did not say, and always
	// for initialize, whose answer holds for the session. Past a positive lifetime the client
	// asks server/discover again before the next request relies on the answer (see
	// discoveryStaleAt for 0).
	TTLMs *int64 `json:"ttlMs,omitempty"`
	// CacheScope says who may reuse the server/discover answer: "private" (only under the same
	// authorization) or "public".
	CacheScope string `json:"cacheScope,omitempty"`
}

// Tool describes one tool a server offers.
type Tool struct {
	Name         string           `json:"name"`
	Title        string           `json:"title,omitempty"`
	Description  string           `json:"description,omitempty"`
	InputSchema  json.RawMessage  `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage  `json:"outputSchema,omitempty"`
	Annotations  *ToolAnnotations `json:"annotations,omitempty"`
	Execution    *ToolExecution   `json:"execution,omitempty"` // nil: never run as a task
	Meta         json.RawMessage  `json:"_meta,omitempty"`
}

// ToolExecution is how a tool may be run (2025-11-25). TaskSupport is "required", "optional" or
// "forbidden"; "" means forbidden. The tasks package calls a tool as a task.
type ToolExecution struct {
	TaskSupport string `json:"taskSupport,omitempty"`
}

// ToolAnnotations are a server's hints about a tool's behaviour. The client trusts two of them
// for one decision only: a tool the server calls read-only or idempotent may be re-run after an
// uncertain delivery. Do not connect to servers whose hints you would not trust for that.
type ToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// safeToRepeat reports whether the annotations say running the tool twice does no harm.
func (a *ToolAnnotations) safeToRepeat() bool {
	if a == nil {
		return false
	}
	return (a.ReadOnlyHint != nil && *a.ReadOnlyHint) || (a.IdempotentHint != nil && *a.IdempotentHint)
}

// ListToolsResult is one page of tools/list.
type ListToolsResult struct {
	Tools      []*Tool `json:"tools"`
	NextCursor string  `json:"nextCursor,omitempty"`
	// TTLMs is how long the server says the result stays fresh, in milliseconds from its
	// arrival (2026-07-28 and later): nil when it does not say, 0 when stale at once.
	TTLMs *int64 `json:"ttlMs,omitempty"`
	// CacheScope says who may reuse the result: "private" (only under the same authorization)
	// or "public".
	CacheScope string `json:"cacheScope,omitempty"`
}

// CallToolParams are the params of tools/call.
type CallToolParams struct {
	Name      string          `json:"name"`
	Arguments any             `json:"arguments,omitempty"`
	Meta      json.RawMessage `json:"_meta,omitempty"`
}

// CallToolResult is a tool's answer. IsError marks a failure the tool itself reports; it is the
// definite outcome of the call and is never retried.
type CallToolResult struct {
	Content           []Content       `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
	Meta              json.RawMessage `json:"_meta,omitempty"`
}

// Content is one block of a tool result or prompt message. Type selects which fields are set:
// "text" (Text), "image" and "audio" (Data, MIMEType), "resource_link" (URI, Name, ...),
// "resource" (Resource).
type Content struct {
	Type        string          `json:"type"`
	Text        string          `json:"text,omitempty"`
	Data        string          `json:"data,omitempty"`
	MIMEType    string          `json:"mimeType,omitempty"`
	URI         string          `json:"uri,omitempty"`
	Name        string          `json:"name,omitempty"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	Size        *int64          `json:"size,omitempty"`
	Resource    json.RawMessage `json:"resource,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
	Meta        json.RawMessage `json:"_meta,omitempty"`
}

// TextContent returns a text content block.
func TextContent(text string) Content { return Content{Type: "text", Text: text} }

// Text joins the text blocks of the result, for the common case of a tool that answers in
// prose.
func (r *CallToolResult) Text() string {
	var out string
	for _, c := range r.Content {
		if c.Type == "text" {
			if out != "" {
				out += "\n"
			}
			out += c.Text
		}
	}
	return out
}
