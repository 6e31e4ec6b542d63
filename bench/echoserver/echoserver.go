// Package echoserver is the MCP server the clients in the benchmarks talk to: the official
// go-sdk's server with two tools, echo (returns its argument text) and blob (returns a text of
// the size it is asked for), and the same two tools on an mcp-go server, so that no client is
// measured against one SDK's server only. cmd/echoserver serves both over Streamable HTTP in a
// process of its own; the in-memory benchmarks run them in-process.
package echoserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxBlob bounds the size blob will produce.
const MaxBlob = 64 << 20

// New returns a go-sdk server offering echo and blob.
func New() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "echoserver", Version: "1.0.0"}, nil)
	s.AddTool(&mcp.Tool{
		Name:        "echo",
		Description: "returns its argument text",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
	}, echo)
	s.AddTool(&mcp.Tool{
		Name:        "blob",
		Description: "returns a text of size bytes",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"size":{"type":"integer"}},"required":["size"]}`),
	}, blob)
	return s
}

func echo(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil
}

func blob(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Size int `json:"size"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
		return nil, err
	}
	if in.Size < 0 || in.Size > MaxBlob {
		return nil, fmt.Errorf("size %d out of range", in.Size)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: Text(in.Size)}}}, nil
}

// NewMCPGo returns an mcp-go server offering echo and blob, with the same results as New's.
func NewMCPGo() *mcpgoserver.MCPServer {
	return newMCPGo()
}

func newMCPGo(opts ...mcpgoserver.ServerOption) *mcpgoserver.MCPServer {
	opts = append([]mcpgoserver.ServerOption{mcpgoserver.WithToolCapabilities(false)}, opts...)
	s := mcpgoserver.NewMCPServer("echoserver", "1.0.0", opts...)
	s.AddTool(mgo.NewTool("echo", mgo.WithDescription("returns its argument text"), mgo.WithString("text", mgo.Required())),
		func(_ context.Context, req mgo.CallToolRequest) (*mgo.CallToolResult, error) {
			return mgo.NewToolResultText(req.GetString("text", "")), nil
		})
	s.AddTool(mgo.NewTool("blob", mgo.WithDescription("returns a text of size bytes"), mgo.WithNumber("size", mgo.Required())),
		func(_ context.Context, req mgo.CallToolRequest) (*mgo.CallToolResult, error) {
			size := req.GetInt("size", -1)
			if size < 0 || size > MaxBlob {
				return nil, fmt.Errorf("size %d out of range", size)
			}
			return mgo.NewToolResultText(Text(size)), nil
		})
	return s
}

// newMCPGoSSE is NewMCPGo whose Streamable HTTP answers are SSE streams. mcp-go's server has no
// option for that: it answers a POST with JSON unless a notification went to the request's
// session, in which case it switches that session to SSE through the public
// SessionWithStreamableHTTPConfig interface. A hook run before every request makes the same
// switch, without sending anything. initialize is left a JSON answer: mcp-go sends the new
// session's Mcp-Session-Id only with a JSON one.
func newMCPGoSSE() *mcpgoserver.MCPServer {
	hooks := &mcpgoserver.Hooks{}
	hooks.AddBeforeAny(func(ctx context.Context, _ any, method mgo.MCPMethod, _ any) {
		if method == mgo.MethodInitialize {
			return
		}
		if s, ok := mcpgoserver.ClientSessionFromContext(ctx).(mcpgoserver.SessionWithStreamableHTTPConfig); ok {
			s.UpgradeToSSEWhenReceiveNotification()
		}
	})
	return newMCPGo(mcpgoserver.WithHooks(hooks))
}

var texts sync.Map // int -> string

// Text returns n bytes of printable ASCII that JSON encodes without escapes, the same every time.
func Text(n int) string {
	if s, ok := texts.Load(n); ok {
		return s.(string)
	}
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var b strings.Builder
	b.Grow(n)
	for b.Len() < n {
		k := min(n-b.Len(), len(alphabet))
		b.WriteString(alphabet[:k])
	}
	s, _ := texts.LoadOrStore(n, b.String())
	return s.(string)
}

// Stats counts the HTTP requests the handler saw, by method.
type Stats struct {
	Post, Get, Delete atomic.Int64
}

// Handler serves the servers over Streamable HTTP, each with JSON answers at a path ending in
// /json and SSE answers at one ending in /sse:
//
//   - /json, /sse: the go-sdk server, stateful (sessions, 2025-11-25 and older);
//   - /stateless/json, /stateless/sse: the go-sdk server with StreamableHTTPOptions.Stateless,
//     which speaks 2026-07-28 (no session: every request carries the revision and the client's
//     identity in _meta) besides a per-request initialize for older clients;
//   - /mcpgo/json, /mcpgo/sse: the mcp-go server with its Streamable HTTP defaults, which serves
//     both 2026-07-28 requests and 2025-11-25 sessions at the same path (see newMCPGoSSE for
//     its SSE answers).
//
// The request counts are served as JSON at /stats.
func Handler() http.Handler {
	srv := New()
	get := func(*http.Request) *mcp.Server { return srv }
	opts := func(jsonResp bool) *mcp.StreamableHTTPOptions {
		return &mcp.StreamableHTTPOptions{JSONResponse: jsonResp, SessionTimeout: 2 * time.Minute}
	}
	stateless := func(jsonResp bool) *mcp.StreamableHTTPOptions {
		return &mcp.StreamableHTTPOptions{JSONResponse: jsonResp, Stateless: true}
	}
	var mcpgoOpts []mcpgoserver.StreamableHTTPOption
	var st Stats
	count := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.Method {
			case http.MethodPost:
				st.Post.Add(1)
			case http.MethodGet:
				st.Get.Add(1)
			case http.MethodDelete:
				st.Delete.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	}
	mux := http.NewServeMux()
	mux.Handle("/json", count(mcp.NewStreamableHTTPHandler(get, opts(true))))
	mux.Handle("/sse", count(mcp.NewStreamableHTTPHandler(get, opts(false))))
	mux.Handle("/stateless/json", count(mcp.NewStreamableHTTPHandler(get, stateless(true))))
	mux.Handle("/stateless/sse", count(mcp.NewStreamableHTTPHandler(get, stateless(false))))
	mux.Handle("/mcpgo/json", count(mcpgoserver.NewStreamableHTTPServer(newMCPGo(), mcpgoOpts...)))
	mux.Handle("/mcpgo/sse", count(mcpgoserver.NewStreamableHTTPServer(newMCPGoSSE(), mcpgoOpts...)))
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]int64{"post": st.Post.Load(), "get": st.Get.Load(), "delete": st.Delete.Load()})
	})
	return mux
}
