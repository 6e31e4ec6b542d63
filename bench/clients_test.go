package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/bench/echoserver"
	"github.com/northstar-mcp/mcpclient/transport"
)

// The clients under test, by the name benchmarks give them (client=NAME).
const (
	ours  = "ours"  // this module's mcpclient
	gosdk = "gosdk" // github.com/modelcontextprotocol/go-sdk v1.8.0
	mcpgo = "mcpgo" // github.com/mark3labs/mcp-go v1.2.1
	raw   = "raw"   // the floor: a pre-serialized request, one json.Unmarshal of the answer
)

var httpClients = []string{ours, gosdk, mcpgo, raw}

type echoArgs struct {
	Text string `json:"text"`
}

type blobArgs struct {
	Size int `json:"size"`
}

// A client is one connected session of a client under test.
type client interface {
	// prepare returns the call of tool with args, as the client's users write it.
	prepare(tool string, args any) op
	close()
}

// maxMessage is the largest answer every client is configured to accept (above 16 MiB and its
// framing).
const maxMessage = 64 << 20

var discard = slog.New(slog.DiscardHandler)

// ---- ours

type oursClient struct{ c *mcpclient.Client }

func (o oursClient) prepare(tool string, args any) op {
	return func(ctx context.Context) (int, error) {
		res, err := o.c.CallTool(ctx, tool, args)
		if err != nil {
			return 0, err
		}
		if len(res.Content) != 1 {
			return 0, fmt.Errorf("%d content blocks", len(res.Content))
		}
		return len(res.Content[0].Text), nil
	}
}

func (o oursClient) close() { o.c.Close() }

func connectOurs(ctx context.Context, t transport.Transport, opts ...mcpclient.Option) (client, error) {
	c, err := mcpclient.Connect(ctx, t, opts...)
	if err != nil {
		return nil, err
	}
	return oursClient{c}, nil
}

func oursHTTP(url string, hc *http.Client) transport.Transport {
	return &transport.HTTP{URL: url, Client: hc, MaxMessageSize: maxMessage}
}

// ---- go-sdk

type gosdkClient struct{ cs *mcp.ClientSession }

func (g gosdkClient) prepare(tool string, args any) op {
	return func(ctx context.Context) (int, error) {
		res, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			return 0, err
		}
		if len(res.Content) != 1 {
			return 0, fmt.Errorf("%d content blocks", len(res.Content))
		}
		t, ok := res.Content[0].(*mcp.TextContent)
		if !ok {
			return 0, fmt.Errorf("content %T", res.Content[0])
		}
		return len(t.Text), nil
	}
}

func (g gosdkClient) close() { g.cs.Close() }

func connectGoSDK(ctx context.Context, t mcp.Transport) (client, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1.0.0"}, nil)
	cs, err := c.Connect(ctx, t, nil)
	if err != nil {
		return nil, err
	}
	return gosdkClient{cs}, nil
}

func gosdkHTTP(url string, hc *http.Client) mcp.Transport {
	return &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxEventSize: maxMessage}
}

// ---- mcp-go

type mcpgoClient struct {
	c       *mcpgoclient.Client
	version string // negotiated
}

func (m mcpgoClient) prepare(tool string, args any) op {
	return func(ctx context.Context) (int, error) {
		res, err := m.c.CallTool(ctx, mgo.CallToolRequest{Params: mgo.CallToolParams{Name: tool, Arguments: args}})
		if err != nil {
			return 0, err
		}
		if len(res.Content) != 1 {
			return 0, fmt.Errorf("%d content blocks", len(res.Content))
		}
		t, ok := mgo.AsTextContent(res.Content[0])
		if !ok {
			return 0, fmt.Errorf("content %T", res.Content[0])
		}
		return len(t.Text), nil
	}
}

func (m mcpgoClient) close() { m.c.Close() }

func startMCPGo(ctx context.Context, c *mcpgoclient.Client) (client, error) {
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	res, err := c.Initialize(ctx, mgo.InitializeRequest{Params: mgo.InitializeParams{
		ClientInfo: mgo.Implementation{Name: "bench", Version: "1.0.0"},
	}})
	if err != nil {
		c.Close()
		return nil, err
	}
	return mcpgoClient{c, res.ProtocolVersion}, nil
}

// connectMCPGoHTTP connects mcp-go, pinned to 2025-11-25 (the initialize handshake) if pin:
// left to probe with server/discover, mcp-go v1.2.1 takes the stateful go-sdk server's answer
// for 2026-07-28, which that server then refuses on every tools/call ("unsupported protocol
// version"). Servers that do serve 2026-07-28 get mcp-go as it comes.
func connectMCPGoHTTP(ctx context.Context, url string, hc *http.Client, pin bool) (client, error) {
	tr, err := mcpgotransport.NewStreamableHTTP(url, mcpgotransport.WithHTTPBasicClient(hc), mcpgotransport.WithHTTPLogger(discard))
	if err != nil {
		return nil, err
	}
	var opts []mcpgoclient.ClientOption
	if pin {
		opts = append(opts, mcpgoclient.WithProtocolVersion(rawProtocol))
	}
	return startMCPGo(ctx, mcpgoclient.NewClient(tr, opts...))
}

// ---- raw: the floor over HTTP

// rawHTTP is what a hand-written client costs at least: a POST of a pre-serialized body (only
// the id changes) with fixed headers, and one json.Unmarshal of the answer, taken from the one
// SSE data line when the answer is a stream. It speaks 2025-11-25 in an initialized session, or
// 2026-07-28, where there is no session and every request carries the revision, the client's
// identity and capabilities in its _meta, and names its method (and tool) in headers.
type rawHTTP struct {
	hc      *http.Client
	url     string
	version string
	session string      // 2025-11-25 only
	header  http.Header // what every request carries; net/http only reads it
	meta    json.RawMessage
	id      atomic.Int64
}

// rawAnswer is the small struct the floor decodes an answer into.
type rawAnswer struct {
	ID     int64 `json:"id"`
	Result struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (a *rawAnswer) text() (int, error) {
	if a.Error != nil {
		return 0, fmt.Errorf("JSON-RPC error %d: %s", a.Error.Code, a.Error.Message)
	}
	if len(a.Result.Content) != 1 {
		return 0, fmt.Errorf("%d content blocks", len(a.Result.Content))
	}
	return len(a.Result.Content[0].Text), nil
}

const (
	rawProtocol       = "2025-11-25"
	rawModernProtocol = "2026-07-28"
)

// rawModernMeta is the _meta 2026-07-28 asks of every request: the revision, the client's
// identity and its capabilities (none).
var rawModernMeta = json.RawMessage(`{"io.modelcontextprotocol/protocolVersion":"` + rawModernProtocol +
	`","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1.0.0"},"io.modelcontextprotocol/clientCapabilities":{}}`)

func rawInitialize(id int) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"1.0.0"}}}`, id, rawProtocol)
}

var rawInitialized = []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

func connectRawHTTP(ctx context.Context, url string, hc *http.Client) (client, error) {
	r := &rawHTTP{hc: hc, url: url, version: rawProtocol}
	post := func(body []byte) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if r.session != "" {
			req.Header.Set("Mcp-Session-Id", r.session)
			req.Header.Set("Mcp-Protocol-Version", rawProtocol)
		}
		return hc.Do(req)
	}
	resp, err := post(rawInitialize(0))
	if err != nil {
		return nil, err
	}
	drainClose(resp.Body)
	r.session = resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || r.session == "" {
		return nil, fmt.Errorf("initialize: HTTP %d, session %q", resp.StatusCode, r.session)
	}
	if resp, err = post(rawInitialized); err != nil {
		return nil, err
	}
	drainClose(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return nil, fmt.Errorf("notifications/initialized: HTTP %d", resp.StatusCode)
	}
	r.header = http.Header{
		"Content-Type":         {"application/json"},
		"Accept":               {"application/json, text/event-stream"},
		"Mcp-Session-Id":       {r.session},
		"Mcp-Protocol-Version": {rawProtocol},
	}
	return r, nil
}

// connectRawModern makes sure with server/discover that the server speaks 2026-07-28, as
// a client of that revision learns it; nothing else is set up, there being no session.
func connectRawModern(ctx context.Context, url string, hc *http.Client) (client, error) {
	r := &rawHTTP{hc: hc, url: url, version: rawModernProtocol, meta: rawModernMeta, header: http.Header{
		"Content-Type":         {"application/json"},
		"Accept":               {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {rawModernProtocol},
	}}
	body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{"_meta":%s}}`, rawModernMeta)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = r.methodHeader("server/discover", "")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	data, err := readAnswer(resp)
	if err != nil {
		return nil, fmt.Errorf("server/discover: %w", err)
	}
	var a struct {
		Result struct {
			SupportedVersions []string `json:"supportedVersions"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("server/discover: %w", err)
	}
	if !slices.Contains(a.Result.SupportedVersions, rawModernProtocol) {
		return nil, fmt.Errorf("server/discover: the server speaks %q, not %s", a.Result.SupportedVersions, rawModernProtocol)
	}
	return r, nil
}

// methodHeader is r.header with the headers 2026-07-28 asks of a request of method (and of a
// tools/call, the tool's name); r.header itself in 2025-11-25.
func (r *rawHTTP) methodHeader(method, name string) http.Header {
	if r.version != rawModernProtocol {
		return r.header
	}
	h := r.header.Clone()
	h.Set("Mcp-Method", method)
	if name != "" {
		h.Set("Mcp-Name", name)
	}
	return h
}

// frameParts pre-serializes a tools/call around its id, with meta as its params' _meta if set.
func frameParts(tool string, args any, meta json.RawMessage) (prefix, suffix []byte) {
	p := map[string]any{"name": tool, "arguments": args}
	if meta != nil {
		p["_meta"] = meta
	}
	params, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	prefix = []byte(`{"jsonrpc":"2.0","id":`)
	suffix = append(append([]byte(`,"method":"tools/call","params":`), params...), '}')
	return prefix, suffix
}

func (r *rawHTTP) prepare(tool string, args any) op {
	prefix, suffix := frameParts(tool, args, r.meta)
	header := r.methodHeader("tools/call", tool)
	return func(ctx context.Context) (int, error) {
		body := make([]byte, 0, len(prefix)+20+len(suffix))
		body = append(strconv.AppendInt(append(body, prefix...), r.id.Add(1), 10), suffix...)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header = header
		resp, err := r.hc.Do(req)
		if err != nil {
			return 0, err
		}
		data, err := readAnswer(resp)
		if err != nil {
			return 0, err
		}
		var a rawAnswer
		if err := json.Unmarshal(data, &a); err != nil {
			return 0, err
		}
		return a.text()
	}
}

// readAnswer reads and closes a response's body and returns the JSON-RPC answer in it: the body,
// or its one data line if it is an SSE stream.
func readAnswer(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var data []byte
	var err error
	if resp.ContentLength > 0 {
		data = make([]byte, resp.ContentLength)
		_, err = io.ReadFull(resp.Body, data)
	} else {
		data, err = io.ReadAll(resp.Body)
	}
	if err != nil {
		return nil, err
	}
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		i := bytes.Index(data, []byte("data: "))
		if i < 0 {
			return nil, errors.New("no data line in the stream")
		}
		data = data[i+len("data: "):]
		if j := bytes.IndexByte(data, '\n'); j >= 0 {
			data = data[:j]
		}
	}
	return data, nil
}

// close ends a 2025-11-25 session; 2026-07-28 has none to end.
func (r *rawHTTP) close() {
	if r.session == "" {
		return
	}
	req, _ := http.NewRequest(http.MethodDelete, r.url, nil)
	req.Header = r.header
	if resp, err := r.hc.Do(req); err == nil {
		drainClose(resp.Body)
	}
}

// ---- in memory: the go-sdk echo server in this process, over net.Pipe

var inProcessServer = sync.OnceValue(echoserver.New)

// servePipe connects the in-process go-sdk echo server to one end of a new net.Pipe and returns
// the other end: newline-delimited JSON, as go-sdk's own NewInMemoryTransports.
func servePipe(ctx context.Context) (net.Conn, error) {
	c, s := net.Pipe()
	if _, err := inProcessServer().Connect(ctx, &mcp.IOTransport{Reader: s, Writer: s, MaxLineLength: -1}, nil); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func connectPipe(ctx context.Context, name string) (client, error) {
	switch name {
	case ours:
		return connectOurs(ctx, &transport.Stream{
			Open:         func(ctx context.Context) (io.ReadWriteCloser, error) { return servePipe(ctx) },
			MaxFrameSize: maxMessage,
		})
	case gosdk:
		ct, st := mcp.NewInMemoryTransports()
		if _, err := inProcessServer().Connect(ctx, st, nil); err != nil {
			return nil, err
		}
		return connectGoSDK(ctx, ct)
	case mcpgo:
		conn, err := servePipe(ctx)
		if err != nil {
			return nil, err
		}
		return startMCPGo(ctx, mcpgoclient.NewClient(mcpgotransport.NewIO(conn, conn, nil)))
	case raw:
		conn, err := servePipe(ctx)
		if err != nil {
			return nil, err
		}
		return newRawPipe(conn)
	}
	return nil, fmt.Errorf("no client %q", name)
}

// rawPipe is the floor over a pipe: pre-serialized lines out, one json.Unmarshal per answer
// line in, and a reader goroutine that hands each answer to its caller by id.
type rawPipe struct {
	conn net.Conn
	wmu  sync.Mutex
	id   atomic.Int64

	mu      sync.Mutex
	waiting map[int64]chan rawResult
	err     error
}

type rawResult struct {
	n   int
	err error
}

func newRawPipe(conn net.Conn) (*rawPipe, error) {
	r := &rawPipe{conn: conn, waiting: make(map[int64]chan rawResult)}
	br := bufio.NewReaderSize(conn, 64<<10)
	if _, err := conn.Write(append(rawInitialize(0), '\n')); err != nil {
		return nil, err
	}
	if _, err := br.ReadBytes('\n'); err != nil {
		return nil, err
	}
	if _, err := conn.Write(append(rawInitialized, '\n')); err != nil {
		return nil, err
	}
	go r.read(br)
	return r, nil
}

func (r *rawPipe) read(br *bufio.Reader) {
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			r.mu.Lock()
			r.err = err
			for id, ch := range r.waiting {
				ch <- rawResult{err: err}
				delete(r.waiting, id)
			}
			r.mu.Unlock()
			return
		}
		var a rawAnswer
		if err := json.Unmarshal(line, &a); err != nil {
			continue
		}
		r.mu.Lock()
		ch := r.waiting[a.ID]
		delete(r.waiting, a.ID)
		r.mu.Unlock()
		if ch != nil {
			n, err := a.text()
			ch <- rawResult{n, err}
		}
	}
}

func (r *rawPipe) prepare(tool string, args any) op {
	prefix, suffix := frameParts(tool, args, nil)
	return func(ctx context.Context) (int, error) {
		id := r.id.Add(1)
		line := make([]byte, 0, len(prefix)+21+len(suffix))
		line = append(append(strconv.AppendInt(append(line, prefix...), id, 10), suffix...), '\n')
		ch := make(chan rawResult, 1)
		r.mu.Lock()
		if r.err != nil {
			r.mu.Unlock()
			return 0, r.err
		}
		r.waiting[id] = ch
		r.mu.Unlock()
		r.wmu.Lock()
		_, err := r.conn.Write(line)
		r.wmu.Unlock()
		if err != nil {
			return 0, err
		}
		select {
		case res := <-ch:
			return res.n, res.err
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

func (r *rawPipe) close() { r.conn.Close() }
