// Package echoserver is the one MCP server every client in the benchmarks talks to: the official
// go-sdk's server with two tools, echo (returns its argument text) and blob (returns a text of
// the size it is asked for). cmd/echoserver serves it over Streamable HTTP in a process of its
// own; the in-memory benchmarks run it in-process.
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

// Handler serves the server over Streamable HTTP (stateful) at /json (JSON answers) and /sse
// (SSE answers), and the request counts as JSON at /stats.
func Handler() http.Handler {
	srv := New()
	get := func(*http.Request) *mcp.Server { return srv }
	opts := func(jsonResp bool) *mcp.StreamableHTTPOptions {
		return &mcp.StreamableHTTPOptions{JSONResponse: jsonResp, SessionTimeout: 2 * time.Minute}
	}
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
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]int64{"post": st.Post.Load(), "get": st.Get.Load(), "delete": st.Delete.Load()})
	})
	return mux
}
