// Package testpeer provides scripted MCP servers for tests: [Pipe], a server at the far end of
// in-memory connections (transport frames, or newline-delimited JSON), and [HTTP], a Streamable
// HTTP server (or a stateless or legacy HTTP+SSE one). Each hands every message it receives to
// the test's script first; what the script leaves alone gets the default answer: initialize is
// answered, server/discover refused as an older server does, tools/call answered with the text
// "ok", ping with {}, any other request refused with -32601, and notifications and the client's
// answers are dropped.
//
// It imports the transport package but not the client's, so that the tests of the client, of
// its transports and of mcptest can all use it.
package testpeer

import (
	"encoding/json"
	"strconv"
	"sync/atomic"
)

// Msg is a JSON-RPC message as a scripted server reads it.
type Msg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// IsRequest reports whether m is a request: a method and an id.
func (m Msg) IsRequest() bool { return m.Method != "" && m.ID != nil }

// IsNotification reports whether m is a notification: a method without an id.
func (m Msg) IsNotification() bool { return m.Method != "" && m.ID == nil }

// Param returns the member name of m's params object, or nil.
func (m Msg) Param(name string) json.RawMessage {
	var p map[string]json.RawMessage
	json.Unmarshal(m.Params, &p)
	return p[name]
}

// Meta returns the members of m's params._meta object, or nil.
func (m Msg) Meta() map[string]json.RawMessage {
	var meta map[string]json.RawMessage
	json.Unmarshal(m.Param("_meta"), &meta)
	return meta
}

const (
	// InitResult is the default answer to initialize.
	InitResult = `{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"testpeer","version":"0"}}`
	// ToolResult is the default answer to tools/call: one text block, "ok".
	ToolResult = `{"content":[{"type":"text","text":"ok"}]}`
	// SessionID is the Mcp-Session-Id the HTTP server hands out unless told otherwise.
	SessionID = "testpeer-session-1"
	// StatelessSessionID is the Mcp-Session-Id a stateless server sets on every answer, which a
	// client of a stateless revision must not echo.
	StatelessSessionID = "not-for-stateless-clients"
	// StatelessDiscoverResult is a stateless server's answer to server/discover.
	StatelessDiscoverResult = `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"stateless","version":"1"}},"ttlMs":0,"cacheScope":"private"}`
)

// Result is the frame answering id with result, a JSON value.
func Result(id json.RawMessage, result string) string {
	return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + result + `}`
}

// Error is the frame refusing id with a JSON-RPC error of code and message.
func Error(id json.RawMessage, code int, message string) string {
	msg, _ := json.Marshal(message)
	return `{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":` + strconv.Itoa(code) + `,"message":` + string(msg) + `}}`
}

// NoMethod is the frame refusing id as a method the server does not know.
func NoMethod(id json.RawMessage) string { return Error(id, -32601, "method not found") }

// Once returns a function that reports true the first time only: for a server that misbehaves
// once.
func Once() func() bool {
	var done atomic.Bool
	return func() bool { return done.CompareAndSwap(false, true) }
}

// Option configures a [Pipe] or an [HTTP] server; each says which it applies to.
type Option func(*options)

type options struct {
	init       string // the answer to initialize
	lines      bool   // Pipe: newline-delimited JSON over net.Pipe
	maxFrame   int    // Pipe with lines: the transport.Stream's MaxFrameSize
	sessionID  string // HTTP: the Mcp-Session-Id initialize hands out; "" for none
	stateless  bool   // HTTP: a 2026-07-28 server
	legacy     bool   // HTTP: an HTTP+SSE (2024-11-05) server
	legacySess string // HTTP legacy: the session its endpoint names
}

func newOptions(opts []Option) options {
	o := options{init: InitResult, sessionID: SessionID}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithInit makes result, a JSON object, the answer to initialize (both servers).
func WithInit(result string) Option { return func(o *options) { o.init = result } }

// Lines makes a [Pipe] speak newline-delimited JSON over net.Pipe connections, as stdio servers
// do, through a transport.Stream whose MaxFrameSize is maxFrame (0: the default).
func Lines(maxFrame int) Option {
	return func(o *options) { o.lines, o.maxFrame = true, maxFrame }
}

// WithSessionID makes id the Mcp-Session-Id an [HTTP] server's initialize hands out; "" hands out
// none.
func WithSessionID(id string) Option { return func(o *options) { o.sessionID = id } }

// Stateless makes an [HTTP] server speak the stateless revision (2026-07-28): server/discover is
// answered with [StatelessDiscoverResult], every answer carries the Mcp-Session-Id
// [StatelessSessionID] for the client to ignore, a request the script leaves alone is answered
// {"resultType":"complete"}, and a notification gets an empty 200.
func Stateless() Option { return func(o *options) { o.stateless = true } }

// Legacy makes an [HTTP] server speak HTTP+SSE (2024-11-05): a GET of /sse opens the stream,
// whose first event names the endpoint /message?sessionId=session; a POST there is accepted
// with 202 and answered on the stream; initialize answers with revision 2024-11-05.
func Legacy(session string) Option {
	return func(o *options) { o.legacy, o.legacySess = true, session }
}
