// Receipts-server shows the server half of request receipts: two MCP servers written with other
// SDKs, the official go-sdk and mark3labs/mcp-go, each made to keep receipts by wrapping its HTTP
// handler with receipts.HTTP, and the mcpclient client calling a tool on each through a proxy that
// loses the first answer after the tool ran.
//
// The client sends the same bytes again under the same id; the middleware answers from its
// receipt, and the tool has run once.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mgo "github.com/mark3labs/mcp-go/mcp"
	mcpgo "github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/receipts"
	"github.com/northstar-mcp/mcpclient/transport"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "receipts-server:", err)
		os.Exit(1)
	}
}

// bookings is the side effect both servers' reserve tool has: a room booked per run.
type bookings struct{ n atomic.Int64 }

func (b *bookings) reserve(room string) string {
	return fmt.Sprintf("room %s booked, ref B-%d", room, b.n.Add(1))
}

// goSDKServer is a go-sdk server with the reserve tool, served over Streamable HTTP and wrapped
// by receipts.HTTP: the one line a server author adds.
func goSDKServer(b *bookings) (h http.Handler, closeSessions func()) {
	s := mcp.NewServer(&mcp.Implementation{Name: "hotel-gosdk", Version: "1.0.0"}, nil)
	destructive := true
	mcp.AddTool(s, &mcp.Tool{Name: "reserve", Description: "Books a room.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive}},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Room string `json:"room"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.reserve(in.Room)}}}, nil, nil
		})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	return receipts.HTTP(mcpHandler, receipts.Options{}), func() {
		for ss := range s.Sessions() {
			ss.Close()
		}
	}
}

// mcpGoServer is the same with mcp-go.
func mcpGoServer(b *bookings) (h http.Handler, shutdown func(context.Context) error) {
	s := mcpgo.NewMCPServer("hotel-mcpgo", "1.0.0")
	s.AddTool(mgo.NewTool("reserve", mgo.WithDescription("Books a room."),
		mgo.WithString("room", mgo.Required()), mgo.WithDestructiveHintAnnotation(true)),
		func(ctx context.Context, req mgo.CallToolRequest) (*mgo.CallToolResult, error) {
			return mgo.NewToolResultText(b.reserve(req.GetString("room", ""))), nil
		})
	mcpHandler := mcpgo.NewStreamableHTTPServer(s, mcpgo.WithStateful(true))
	return receipts.HTTP(mcpHandler, receipts.Options{}), mcpHandler.Shutdown
}

// losingFirstAnswer stands for a network that fails at the worst moment: it lets the first
// tools/call reach the server, lets the tool run, and then breaks the connection instead of
// passing on the answer. Everything else passes through.
func losingFirstAnswer(next http.Handler) http.Handler {
	var lost atomic.Bool
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		if lost.Load() || !strings.Contains(string(body), `"tools/call"`) {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(httptest.NewRecorder(), r) // the tool runs; its answer goes nowhere
		lost.Store(true)
		panic(http.ErrAbortHandler) // the connection breaks
	})
}

func run(ctx context.Context, out io.Writer) error {
	var gosdkBookings, mcpgoBookings bookings
	gosdkHandler, closeSessions := goSDKServer(&gosdkBookings)
	defer closeSessions()
	mcpgoHandler, shutdown := mcpGoServer(&mcpgoBookings)
	defer shutdown(context.WithoutCancel(ctx))

	mux := http.NewServeMux()
	mux.Handle("/gosdk", losingFirstAnswer(gosdkHandler))
	mux.Handle("/mcpgo", losingFirstAnswer(mcpgoHandler))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux}
	var wg sync.WaitGroup
	wg.Go(func() { srv.Serve(ln) })
	defer func() {
		srv.Close()
		wg.Wait()
	}()
	base := "http://" + ln.Addr().String()

	for _, s := range []struct {
		name, path string
		bookings   *bookings
	}{{"go-sdk", "/gosdk", &gosdkBookings}, {"mcp-go", "/mcpgo", &mcpgoBookings}} {
		if err := callThroughLoss(ctx, out, s.name, base+s.path, s.bookings); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}

// callThroughLoss books a room on the server at url, whose first answer is lost, and reports
// what happened.
func callThroughLoss(ctx context.Context, out io.Writer, name, url string, b *bookings) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cl, err := mcpclient.Connect(ctx, &transport.HTTP{URL: url})
	if err != nil {
		return err
	}
	defer cl.Close()
	decl, ok := cl.ServerCapabilities().RequestReceipts()
	if !ok {
		return errors.New("the server declares no receipts")
	}
	fmt.Fprintf(out, "%s server (%s): keeps receipts, scope %s\n", name, cl.ProtocolVersion(), decl.Scope)

	var resp mcpclient.Response
	res, err := cl.CallTool(ctx, "reserve", map[string]string{"room": "12"}, mcpclient.WithResponse(&resp))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  reserve answered %q after %d sends; replayed from the receipt: %v; the tool ran %d time(s)\n",
		res.Text(), resp.Attempts, resp.Replayed, b.n.Load())
	if !resp.Replayed || b.n.Load() != 1 {
		return fmt.Errorf("the answer was lost once, so it should be a replay of the one run; replayed %v, runs %d", resp.Replayed, b.n.Load())
	}
	return nil
}
