package interop_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	mgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// reserveTool is the unsafe tool every receipts server has: it books something for call number
// "call" (the client passes it in the arguments), so running it twice for one call books twice.
// It declares no idempotentHint, and is destructive.
const reserveTool = "reserve"

type reserveArgs struct {
	Call int `json:"call"`
}

// bookings is the reserve tool's state, shared by the SDK servers: how many times it ran for each
// call, and how long its run for a call takes.
type bookings struct {
	// delay says how long run number run (from 1) of call takes; nil means no delay.
	delay func(call, run int) time.Duration

	mu   sync.Mutex
	runs map[int]int

	active atomic.Int64 // runs not yet returned
}

// reserve books for call: the booking counts as soon as the tool starts (its effect comes first,
// its answer after the delay), so that a run whose answer is lost still counts.
func (b *bookings) reserve(ctx context.Context, call int) (string, error) {
	b.active.Add(1)
	defer b.active.Add(-1)
	b.mu.Lock()
	if b.runs == nil {
		b.runs = make(map[int]int)
	}
	b.runs[call]++
	run := b.runs[call]
	b.mu.Unlock()
	if b.delay != nil {
		if d := b.delay(call, run); d > 0 {
			timer := time.NewTimer(d)
			defer timer.Stop()
			select {
			case <-timer.C:
			case <-ctx.Done():
				return "", fmt.Errorf("booking %d cancelled: %w", call, context.Cause(ctx))
			}
		}
	}
	return fmt.Sprintf("booked %d", call), nil
}

func (b *bookings) runsOf(call int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runs[call]
}

// A receiptsServer is one SDK's server in one of its HTTP modes, serving the reserve tool.
type receiptsServer struct {
	sdk, mode string
	// new returns the server's handler over b, and what ends it.
	new func(b *bookings) (h http.Handler, close func())
}

func (s receiptsServer) name() string { return s.sdk + " " + s.mode }

const (
	gosdkServerName = "go-sdk v1.8.0"
	mcpgoServerName = "mcp-go v1.2.1"
)

// receiptsServers are the servers the receipts tests run against: go-sdk's Streamable HTTP
// handler, stateful and stateless, answering with JSON or SSE; mcp-go's, stateful and stateless,
// answering with JSON, or with SSE when the tool sends a notification before its answer (mcp-go
// has no setting for SSE answers: it upgrades a POST's answer to an event stream only when a
// notification comes first).
var receiptsServers = []receiptsServer{
	{gosdkServerName, "stateful json", goSDKReceiptsServer(false, true)},
	{gosdkServerName, "stateful sse", goSDKReceiptsServer(false, false)},
	{gosdkServerName, "stateless json", goSDKReceiptsServer(true, true)},
	{gosdkServerName, "stateless sse", goSDKReceiptsServer(true, false)},
	{mcpgoServerName, "stateful json", mcpGoReceiptsServer(false, false)},
	{mcpgoServerName, "stateful sse", mcpGoReceiptsServer(false, true)},
	{mcpgoServerName, "stateless json", mcpGoReceiptsServer(true, false)},
	{mcpgoServerName, "stateless sse", mcpGoReceiptsServer(true, true)},
}

func goSDKReceiptsServer(stateless, jsonResponse bool) func(b *bookings) (http.Handler, func()) {
	return func(b *bookings) (http.Handler, func()) {
		s := mcp.NewServer(&mcp.Implementation{Name: "interop-receipts-gosdk", Version: "1.0.0"}, nil)
		destructive := true
		mcp.AddTool(s, &mcp.Tool{Name: reserveTool, Description: "Books for a call; not safe to repeat.",
			Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive}},
			func(ctx context.Context, req *mcp.CallToolRequest, in reserveArgs) (*mcp.CallToolResult, any, error) {
				text, err := b.reserve(ctx, in.Call)
				if err != nil {
					return nil, nil, err
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
			})
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
			&mcp.StreamableHTTPOptions{Stateless: stateless, JSONResponse: jsonResponse})
		return h, func() {
			for ss := range s.Sessions() {
				ss.Close()
			}
		}
	}
}

func mcpGoReceiptsServer(stateless, notifyFirst bool) func(b *bookings) (http.Handler, func()) {
	return func(b *bookings) (http.Handler, func()) {
		s := mcpgoserver.NewMCPServer("interop-receipts-mcpgo", "1.0.0", mcpgoserver.WithToolCapabilities(false),
			mcpgoserver.WithLogging())
		s.AddTool(mgo.NewTool(reserveTool, mgo.WithDescription("Books for a call; not safe to repeat."),
			mgo.WithNumber("call", mgo.Required()),
			mgo.WithDestructiveHintAnnotation(true), mgo.WithIdempotentHintAnnotation(false)),
			func(ctx context.Context, req mgo.CallToolRequest) (*mgo.CallToolResult, error) {
				if notifyFirst {
					// A notification before the answer turns the answer into an event stream.
					if err := s.SendNotificationToClient(ctx, "notifications/message",
						map[string]any{"level": "info", "data": "booking"}); err != nil {
						return nil, err
					}
				}
				text, err := b.reserve(ctx, req.GetInt("call", -1))
				if err != nil {
					return nil, err
				}
				return mgo.NewToolResultText(text), nil
			})
		opts := []mcpgoserver.StreamableHTTPOption{mcpgoserver.WithStateful(true)}
		if stateless {
			opts = []mcpgoserver.StreamableHTTPOption{mcpgoserver.WithStateLess(true)}
		}
		h := mcpgoserver.NewStreamableHTTPServer(s, opts...)
		return h, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			h.Shutdown(ctx)
		}
	}
}
