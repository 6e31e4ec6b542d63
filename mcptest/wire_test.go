package mcptest_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// wire drives an HTTPServer with hand-made HTTP requests, for checks on the exact exchange.
type wire struct {
	t       *testing.T
	url     string
	session string
}

// openWire initializes a session of srv.
func openWire(t *testing.T, srv *mcptest.HTTPServer) *wire {
	t.Helper()
	w := &wire{t: t, url: srv.URL}
	resp := w.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wire","version":"0"}}}`)
	body := w.read(resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	w.session = resp.Header.Get("Mcp-Session-Id")
	if resp := w.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %s", resp.StatusCode, w.read(resp))
	}
	return w
}

// do sends a request with the session's headers and those of header (name, value, ...).
func (w *wire) do(method, body string, header ...string) *http.Response {
	w.t.Helper()
	req, err := http.NewRequest(method, w.url, strings.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if w.session != "" {
		req.Header.Set("Mcp-Session-Id", w.session)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func (w *wire) post(body string, header ...string) *http.Response {
	w.t.Helper()
	return w.do(http.MethodPost, body, header...)
}

// read returns the whole body, failing the test if it does not end cleanly.
func (w *wire) read(resp *http.Response) string {
	w.t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		w.t.Fatalf("reading the body: %v (read %q)", err, b)
	}
	return string(b)
}

// eventIDs returns the ids of an SSE body's events, in order.
func eventIDs(body string) []string {
	var ids []string
	for line := range strings.Lines(body) {
		if id, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "id: "); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

func TestCloseStreamEndsTheResponseCleanlyAndKeepsTheAnswer(t *testing.T) {
	t.Parallel()
	srv := mcptest.NewTestHTTPServer(t,
		mcptest.WithSSEResponses(10*time.Millisecond),
		mcptest.WithTool(mcpclient.Tool{Name: "poll"}, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("polled")}}, nil
		}),
		mcptest.WithFault(mcptest.Fault{Kind: mcptest.CloseStream, Tool: "poll"}))
	w := openWire(t, srv)

	resp := w.post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"poll"}}`)
	body := w.read(resp) // a clean end, not a reset: the client polls rather than fails
	ids := eventIDs(body)
	if resp.StatusCode != http.StatusOK || len(ids) == 0 || strings.Contains(body, "polled") {
		t.Fatalf("the call's stream: %d %q, want the priming event alone", resp.StatusCode, body)
	}

	resumed := w.read(w.do(http.MethodGet, "", "Last-Event-ID", ids[len(ids)-1]))
	if !strings.Contains(resumed, `"id":7`) || !strings.Contains(resumed, "polled") {
		t.Fatalf("the resumed stream: %q, want the answer", resumed)
	}
}

func TestHTTPServerRefusesOriginsOtherThanLoopback(t *testing.T) {
	t.Parallel()
	srv := mcptest.NewTestHTTPServer(t)
	initialize := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wire","version":"0"}}}`
	w := &wire{t: t, url: srv.URL}
	for _, origin := range []string{"http://evil.example.com", "http://localhost.evil.example.com:8080", "null", "http://127.0.0.1.nip.io"} {
		resp := w.post(initialize, "Origin", origin)
		if body := w.read(resp); resp.StatusCode != http.StatusForbidden {
			t.Errorf("Origin %s: %d %s, want 403", origin, resp.StatusCode, body)
		}
	}
	if n := srv.Sessions(); n != 0 {
		t.Fatalf("%d sessions opened by refused requests", n)
	}
	reqs := srv.Requests()
	if len(reqs) == 0 || reqs[len(reqs)-1].Refused != http.StatusForbidden {
		t.Errorf("requests recorded %+v, want the refused ones with Refused 403", reqs)
	}
	for _, origin := range []string{"", "http://localhost:1234", "http://127.0.0.1", "https://[::1]:8443"} {
		resp := w.post(initialize, "Origin", origin)
		if body := w.read(resp); resp.StatusCode != http.StatusOK {
			t.Errorf("Origin %q: %d %s, want 200", origin, resp.StatusCode, body)
		}
	}
}
