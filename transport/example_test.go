package transport_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/transport"
)

// lineTransport is a transport written outside this package: newline-delimited JSON-RPC over the
// connections Dial opens.
type lineTransport struct {
	Dial func(ctx context.Context) (net.Conn, error)
}

func (t lineTransport) Connect(ctx context.Context, r transport.Receiver) (transport.Conn, error) {
	nc, err := t.Dial(ctx)
	if err != nil {
		return nil, &transport.Error{Outcome: transport.NotDelivered, Err: err}
	}
	c := &lineConn{nc: nc}
	go c.read(r) // ends when the connection does: Close closes nc
	return c, nil
}

type lineConn struct {
	nc     net.Conn
	mu     sync.Mutex // one frame on the wire at a time
	closed atomic.Bool
}

// read hands every line the server writes to r, on this goroutine, and then tells r that the
// connection ended, unless Close ended it.
func (c *lineConn) read(r transport.Receiver) {
	sc := bufio.NewScanner(c.nc)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		r.Deliver(bytes.Clone(sc.Bytes()), "") // the frame is the Receiver's: a copy
	}
	if !c.closed.Load() {
		r.Fail(fmt.Errorf("lines: the connection ended: %w", cmp.Or(sc.Err(), io.EOF)))
	}
}

// Send writes the frame and a newline, and says how far the bytes got when it fails.
func (c *lineConn) Send(ctx context.Context, msg *transport.Message) error {
	if err := ctx.Err(); err != nil {
		return &transport.Error{Outcome: transport.NotDelivered, ID: msg.ID, Err: err}
	}
	line := append(slices.Clip(msg.Frame), '\n') // a copy: msg.Frame is not ours to change
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, err := c.nc.Write(line); err != nil {
		outcome := transport.Uncertain // part of the frame may have reached the server
		if n == 0 {
			outcome = transport.NotDelivered
		}
		return &transport.Error{Outcome: outcome, ID: msg.ID, Err: err}
	}
	return nil
}

func (c *lineConn) Close() error {
	c.closed.Store(true)
	return c.nc.Close()
}

// serveLines is a scripted MCP server at the other end: it answers initialize and any tool call,
// and refuses every other request.
func serveLines(nc net.Conn) {
	defer nc.Close()
	sc := bufio.NewScanner(nc)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil {
			continue // a notification
		}
		answer := `"error":{"code":-32601,"message":"method not found"}`
		switch m.Method {
		case "initialize":
			answer = `"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"lines","version":"1"}}`
		case "tools/call":
			answer = `"result":{"content":[{"type":"text","text":"hello over lines"}]}`
		}
		fmt.Fprintf(nc, "{\"jsonrpc\":\"2.0\",\"id\":%s,%s}\n", m.ID, answer)
	}
}

// A Transport of one's own: a Connect that opens a connection and starts its reader, a Conn
// with Send and Close, and every frame read handed to the Receiver.
func ExampleTransport() {
	tr := lineTransport{Dial: func(context.Context) (net.Conn, error) {
		client, server := net.Pipe()
		go serveLines(server)
		return client, nil
	}}
	c, err := mcpclient.Connect(context.Background(), tr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	res, err := c.CallTool(context.Background(), "hello", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text())
	// Output: hello over lines
}
