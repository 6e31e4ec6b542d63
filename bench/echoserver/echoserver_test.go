package echoserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// post sends body to url with headers, and returns the answer's content type, its session id
// and the JSON-RPC message in it (the one data line of an SSE stream).
func post(t *testing.T, url string, headers map[string]string, body string) (contentType, session string, msg []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode/100 != 2 {
		t.Fatalf("HTTP %d: %s", resp.StatusCode, data)
	}
	contentType = resp.Header.Get("Content-Type")
	if contentType == "text/event-stream" {
		i := bytes.Index(data, []byte("data: "))
		if i < 0 {
			t.Fatalf("no data line in %q", data)
		}
		data, _, _ = bytes.Cut(data[i+len("data: "):], []byte("\n"))
	}
	return contentType, resp.Header.Get("Mcp-Session-Id"), data
}

// echoText is the text of a tools/call answer's one content block.
func echoText(t *testing.T, msg []byte) string {
	t.Helper()
	var a struct {
		Result struct {
			Content []struct {
				Type, Text string
			}
		}
	}
	if err := json.Unmarshal(msg, &a); err != nil || len(a.Result.Content) != 1 || a.Result.Content[0].Type != "text" {
		t.Fatalf("answer %s: %v", msg, err)
	}
	return a.Result.Content[0].Text
}

const modernMeta = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// TestHandlerAnswers: every path answers tools/call as its name says, JSON or an SSE stream,
// with the tools' results; the stateful go-sdk server in a 2025-11-25 session, the others in
// 2026-07-28 requests, and the mcp-go server in a 2025-11-25 session too, which only a JSON
// answer to initialize can open.
func TestHandlerAnswers(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	wantType := map[string]string{"json": "application/json", "sse": "text/event-stream"}
	for _, path := range []string{"/json", "/sse", "/stateless/json", "/stateless/sse", "/mcpgo/json", "/mcpgo/sse"} {
		resp := path[strings.LastIndexByte(path, '/')+1:]
		modern := path != "/json" && path != "/sse"
		if modern {
			t.Run("2026-07-28"+path, func(t *testing.T) {
				for _, c := range []struct{ tool, args, want string }{
					{"echo", `{"text":"hello"}`, "hello"},
					{"blob", `{"size":100}`, Text(100)},
				} {
					body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":%s,"name":%q,"arguments":%s}}`, modernMeta, c.tool, c.args)
					ct, _, msg := post(t, srv.URL+path, map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": c.tool}, body)
					if ct != wantType[resp] {
						t.Errorf("%s: Content-Type %q, want %q", c.tool, ct, wantType[resp])
					}
					if got := echoText(t, msg); got != c.want {
						t.Errorf("%s: %q, want %q", c.tool, got, c.want)
					}
				}
			})
		}
		if path == "/json" || path == "/sse" || strings.HasPrefix(path, "/mcpgo/") {
			t.Run("2025-11-25"+path, func(t *testing.T) {
				_, session, _ := post(t, srv.URL+path, nil, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
				if session == "" {
					t.Fatal("initialize: no Mcp-Session-Id")
				}
				h := map[string]string{"Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"}
				post(t, srv.URL+path, h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
				ct, _, msg := post(t, srv.URL+path, h, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)
				if ct != wantType[resp] {
					t.Errorf("Content-Type %q, want %q", ct, wantType[resp])
				}
				if got := echoText(t, msg); got != "hello" {
					t.Errorf("%q, want hello", got)
				}
			})
		}
	}
}
