package mcptest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// FuzzStatelessPost: whatever body and headers a client posts in the stateless revision, the
// server answers with a status of the protocol's and never panics.
func FuzzStatelessPost(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, "tools/list", "", "2026-07-28", "")
	f.Add(`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"echo","arguments":{"region":"eu"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/logLevel":"debug"}}}`, "tools/call", "echo", "2026-07-28", "=?base64?ZXU=?=")
	f.Add(`{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{"notifications":null,"_meta":{}}}`, "subscriptions/listen", "", "2026-07-28", "")
	f.Add(`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":7}}`, "resources/read", "=?base64?!?=", "v999", "")
	f.Add(`[]`, "", "", "", "")
	f.Fuzz(func(t *testing.T, body, method, name, version, param string) {
		srv := mcptest.NewServer(mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728),
			mcptest.WithTool(mcpclient.Tool{Name: "echo", InputSchema: []byte(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)},
				func(_ context.Context, c *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
					return &mcpclient.CallToolResult{}, nil
				}))
		defer srv.Close()
		h := &mcptest.HTTPServer{Server: srv}
		// A valid subscriptions/listen holds its stream until the client leaves.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp", strings.NewReader(body))
		for k, v := range map[string]string{"Mcp-Method": method, "Mcp-Name": name, "Mcp-Protocol-Version": version, "Mcp-Param-Region": param} {
			if v != "" {
				req.Header[k] = []string{v}
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusAccepted, http.StatusBadRequest, http.StatusNotFound:
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
	})
}
