package bench

import (
	"context"
	"encoding/json"
	"fmt"

	mcpgoclient "github.com/mark3labs/mcp-go/client"

	"github.com/northstar-mcp/mcpclient/bench/echoserver"
	"github.com/northstar-mcp/mcpclient/transport"
)

// Each SDK's own in-memory path: go-sdk's NewInMemoryTransports to the go-sdk echo server,
// mcp-go's in-process client to an mcp-go server with the same tools, and ours through
// transport.Memory to minimalServer. The server runs in this process and its cost is part of
// every figure; the setup=pipe benchmarks put the same server behind every client instead.

func connectNative(ctx context.Context, name string) (client, error) {
	switch name {
	case ours:
		return connectOurs(ctx, &transport.Memory{Accept: func(s *transport.MemoryConn) error {
			go minimalServer(s)
			return nil
		}})
	case gosdk:
		return connectPipe(ctx, gosdk) // NewInMemoryTransports is go-sdk's in-memory path
	case mcpgo:
		c, err := mcpgoclient.NewInProcessClient(echoserver.NewMCPGo())
		if err != nil {
			return nil, err
		}
		return startMCPGo(ctx, c)
	}
	return nil, fmt.Errorf("no native client %q", name)
}

// minimalServer is the least an MCP server over transport.Pipe can be: initialize, ping and the
// echo and blob tools, one frame at a time; server/discover is refused as an older server does.
func minimalServer(conn *transport.MemoryConn) {
	ctx := context.Background()
	type textContent struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type rpcError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	for {
		frame, err := conn.Receive(ctx)
		if err != nil {
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(frame, &m) != nil || len(m.ID) == 0 {
			continue // a notification
		}
		var result any
		var rpcErr *rpcError
		switch m.Method {
		case "initialize":
			result = map[string]any{
				"protocolVersion": "2025-11-25",
				"capabilities":    map[string]any{"tools": map[string]any{}},
				"serverInfo":      map[string]any{"name": "minimal", "version": "1.0.0"},
			}
		case "ping":
			result = struct{}{}
		case "tools/call":
			var p struct {
				Name      string `json:"name"`
				Arguments struct {
					Text string `json:"text"`
					Size int    `json:"size"`
				} `json:"arguments"`
			}
			json.Unmarshal(m.Params, &p)
			text := p.Arguments.Text
			if p.Name == "blob" {
				text = echoserver.Text(p.Arguments.Size)
			}
			result = struct {
				Content []textContent `json:"content"`
			}{[]textContent{{"text", text}}}
		default:
			rpcErr = &rpcError{-32601, "method not found"}
		}
		resp, _ := json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  any             `json:"result,omitempty"`
			Error   *rpcError       `json:"error,omitempty"`
		}{"2.0", m.ID, result, rpcErr})
		if conn.Send(ctx, &transport.Message{Frame: resp}) != nil {
			return
		}
	}
}
