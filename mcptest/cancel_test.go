package mcptest_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// waitTool is a tool that runs until its context ends, then returns a result all the same, as a
// tool that finishes its work despite the cancellation would: only the server can keep that
// result from being sent.
func waitTool(started chan<- struct{}) mcptest.Option {
	return mcptest.WithTool(mcpclient.Tool{Name: "wait"}, func(ctx context.Context, _ *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		close(started)
		<-ctx.Done()
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("finished anyway")}}, nil
	})
}

const (
	waitCall         = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait"}}`
	cancelledWaiting = `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"the caller gave up"}}`
)

// A request its client cancelled gets no response, as the protocol asks of a receiver of
// notifications/cancelled: the client no longer awaits one.
func TestNoAnswerToACancelledRequest(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			started := make(chan struct{})
			srv := mcptest.NewServer(waitTool(started))
			defer srv.Close()
			r := dialRaw(t, srv)
			r.send(waitCall)
			<-started
			r.send(cancelledWaiting)
			synctest.Wait() // the request has ended, its reply sent or not
			for r.in.Len() > 0 {
				if got := r.recv(); strings.Contains(got, `"id":1`) {
					t.Fatalf("the server answered the cancelled request: %s", got)
				}
			}
		})
	})
	for _, mode := range []string{"json", "sse"} {
		t.Run("http-"+mode, func(t *testing.T) {
			started := make(chan struct{})
			opts := []mcptest.Option{waitTool(started)}
			if mode == "sse" {
				opts = append(opts, mcptest.WithSSEResponses(0))
			}
			srv := mcptest.NewHTTPServer(opts...)
			h := dialHTTPRaw(t, srv)
			answered := make(chan string, 1)
			go func() {
				req, _ := http.NewRequest(http.MethodPost, h.url, strings.NewReader(waitCall))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Session-Id", h.session)
				resp, err := h.client.Do(req)
				if err != nil {
					answered <- ""
					return
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body) // a reset connection ends it early
				answered <- string(body)
			}()
			<-started
			io.Copy(io.Discard, h.post(cancelledWaiting).Body)
			got := <-answered
			srv.Close()
			if strings.Contains(got, "finished anyway") {
				t.Fatalf("the server answered the cancelled request: %s", got)
			}
		})
	}
}
