package mcpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/transport"
)

// cannedServer answers MCP over HTTP from inside the RoundTripper, without a network or a
// goroutine: initialize, the initialized notification, server/discover (refused, as a
// 2025-11-25 server does) and tools/call with a fixed 1 KiB text. What a call costs through it
// is the client's own work plus net/http's request building, so that the client can be compared
// with the least a hand-written caller does on the same RoundTripper.
type cannedServer struct {
	result []byte // the tools/call result, without the envelope
}

func (s *cannedServer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil { // the DELETE that ends the session
		return &http.Response{StatusCode: http.StatusNoContent, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	// The id and method lead every request the client and the floor send: reading them by
	// hand keeps the server's share of the figure small.
	if err := scanIDMethod(body, &msg.ID, &msg.Method); err != nil {
		if err := json.Unmarshal(body, &msg); err != nil {
			return nil, err
		}
	}
	h := http.Header{"Content-Type": {"application/json"}, "Mcp-Session-Id": {"canned-session"}}
	var out []byte
	switch msg.Method {
	case "initialize":
		out = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"canned","version":"1"}}}`, msg.ID)
	case "server/discover":
		out = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, msg.ID)
	case "tools/call":
		out = make([]byte, 0, len(s.result)+64)
		out = append(out, `{"jsonrpc":"2.0","id":`...)
		out = append(out, msg.ID...)
		out = append(out, `,"result":`...)
		out = append(out, s.result...)
		out = append(out, '}')
	default:
		return &http.Response{StatusCode: http.StatusAccepted, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	}
	return &http.Response{StatusCode: http.StatusOK, Header: h, ContentLength: int64(len(out)),
		Body: io.NopCloser(bytes.NewReader(out)), Request: req}, nil
}

// scanIDMethod reads "id" and "method" from the start of a request the way both clients frame
// it (members in any order among the first few); it fails for anything else.
func scanIDMethod(body []byte, id *json.RawMessage, method *string) error {
	rest := body
	for _, key := range []string{`"id":`, `"method":`} {
		i := bytes.Index(rest, []byte(key))
		if i < 0 {
			return fmt.Errorf("no %s", key)
		}
		v := rest[i+len(key):]
		if len(v) == 0 || v[0] != '"' {
			if key == `"id":` {
				j := bytes.IndexAny(v, ",}")
				if j < 0 {
					return fmt.Errorf("bad id")
				}
				*id = v[:j]
				continue
			}
			return fmt.Errorf("bad %s", key)
		}
		j := bytes.IndexByte(v[1:], '"')
		if j < 0 {
			return fmt.Errorf("bad %s", key)
		}
		if key == `"id":` {
			*id = v[:j+2]
		} else {
			*method = string(v[1 : j+1])
		}
	}
	return nil
}

func cannedResult(size int) []byte {
	text := strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789", size/36+1)[:size]
	return []byte(`{"content":[{"type":"text","text":"` + text + `"}]}`)
}

// BenchmarkCallToolOverhead: one tools/call of a 1 KiB echo through the canned server, by the
// client (client=ours) and by the floor (client=floor: a POST of a request serialized once, only
// its id changed per call, and one json.Unmarshal of the answer). The difference is the client's
// own cost per call, free of the network and of a server's CPU.
func BenchmarkCallToolOverhead(b *testing.B) {
	const size = 1 << 10
	text := strings.Repeat("x", size)
	srv := &cannedServer{result: cannedResult(size)}
	hc := &http.Client{Transport: srv}
	const url = "http://canned.invalid/mcp"

	b.Run("client=ours", func(b *testing.B) {
		ctx := context.Background()
		c, err := mcpclient.Connect(ctx, &transport.HTTP{URL: url, Client: hc}, mcpclient.WithProtocolVersion("2025-11-25"))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		args := struct {
			Text string `json:"text"`
		}{text}
		b.ReportAllocs()
		for b.Loop() {
			res, err := c.CallTool(ctx, "echo", args)
			if err != nil {
				b.Fatal(err)
			}
			if len(res.Content) != 1 || len(res.Content[0].Text) != size {
				b.Fatalf("%d blocks", len(res.Content))
			}
		}
	})

	b.Run("client=floor", func(b *testing.B) {
		frame, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "tools/call",
			"params": map[string]any{"name": "echo", "arguments": map[string]string{"text": text}}})
		idAt := bytes.Index(frame, []byte(`"id":0`)) + len(`"id":`)
		head, tail := frame[:idAt], frame[idAt+1:]
		var body []byte
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			n++
			body = append(strconv.AppendInt(append(body[:0], head...), int64(n), 10), tail...)
			req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", "canned-session")
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			resp, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				b.Fatal(err)
			}
			var answer struct {
				Result struct {
					Content []struct {
						Type string `json:"type"`
						Text string `json:"text"`
					} `json:"content"`
				} `json:"result"`
			}
			if err := json.Unmarshal(data, &answer); err != nil {
				b.Fatal(err)
			}
			if len(answer.Result.Content) != 1 || len(answer.Result.Content[0].Text) != size {
				b.Fatal("bad answer")
			}
		}
	})
}
