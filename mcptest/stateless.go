package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/headers"
	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/internal/metakeys"
	"github.com/northstar-mcp/mcpclient/receipts"
)

// The JSON-RPC error codes of the stateless revisions.
const (
	rpcHeaderMismatch                  = mcpclient.RPCHeaderMismatch
	rpcMissingRequiredClientCapability = mcpclient.RPCMissingRequiredClientCapability
	rpcUnsupportedProtocolVersion      = mcpclient.RPCUnsupportedProtocolVersion
)

// sessionRevision reports whether v is a revision with the initialize handshake and sessions:
// one before the first stateless revision, as the client orders them.
func sessionRevision(v string) bool { return v < mcpclient.ProtocolVersion20260728 }

// statelessVersions are the revisions without sessions the server speaks, preferred first.
func (s *Server) statelessVersions() []string {
	var out []string
	for _, v := range s.versions {
		if !sessionRevision(v) {
			out = append(out, v)
		}
	}
	return out
}

// removedMethods are the methods of the session revisions that the stateless revisions dropped:
// a server answers them as unknown.
var removedMethods = map[string]bool{
	"initialize":            true,
	"ping":                  true,
	"logging/setLevel":      true,
	"resources/subscribe":   true,
	"resources/unsubscribe": true,
	"roots/list":            true,
}

// cacheableMethods are the methods whose results carry caching hints.
var cacheableMethods = map[string]bool{
	"server/discover":          true,
	"tools/list":               true,
	"prompts/list":             true,
	"resources/list":           true,
	"resources/templates/list": true,
	"resources/read":           true,
	// The Skills extension's listings cache as the base protocol's do.
	"skills/list": true,
	"skills/get":  true,
}

// WithCacheHints sets the caching hints of the results that carry them in the stateless
// revisions (server/discover, the list methods and resources/read): ttl, rounded down to
// milliseconds, and scope, "public" or "private". Default 0 and "private": a test server's
// lists change whenever a test says so, and its tools may depend on who asks.
func WithCacheHints(ttl time.Duration, scope string) Option {
	return optionFunc(func(s *Server) {
		s.cacheTTL = max(ttl, 0)
		if scope == "public" || scope == "private" {
			s.cacheScope = scope
		}
	})
}

// A requestMeta is what a request of a stateless revision says of its client in its _meta: the
// revision, the capabilities it relies on and who it is, and the level of log records it wants
// ("": none).
type requestMeta struct {
	version  string
	caps     mcpclient.ClientCapabilities
	client   mcpclient.Implementation
	logLevel mcpclient.LoggingLevel
}

// errInvalidMeta is the reason a request's _meta is refused with -32602.
var errInvalidMeta = errors.New("invalid _meta")

// readRequestMeta reads the _meta a request of a stateless revision must carry.
func readRequestMeta(params json.RawMessage) (requestMeta, error) {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if len(params) == 0 {
		return requestMeta{}, fmt.Errorf("%w: the request has no params with _meta", errInvalidMeta)
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return requestMeta{}, fmt.Errorf("%w: params: %v", errInvalidMeta, err)
	}
	if p.Meta == nil {
		return requestMeta{}, fmt.Errorf("%w: missing _meta", errInvalidMeta)
	}
	var rm requestMeta
	if err := json.Unmarshal(p.Meta[metakeys.ProtocolVersion], &rm.version); err != nil || rm.version == "" {
		return requestMeta{}, fmt.Errorf("%w: _meta lacks a string %s", errInvalidMeta, metakeys.ProtocolVersion)
	}
	caps := p.Meta[metakeys.ClientCapabilities]
	if len(caps) == 0 || caps[0] != '{' || json.Unmarshal(caps, &rm.caps) != nil {
		return requestMeta{}, fmt.Errorf("%w: _meta lacks an object %s", errInvalidMeta, metakeys.ClientCapabilities)
	}
	if raw, ok := p.Meta[metakeys.ClientInfo]; ok && json.Unmarshal(raw, &rm.client) != nil {
		return requestMeta{}, fmt.Errorf("%w: %s is no Implementation", errInvalidMeta, metakeys.ClientInfo)
	}
	if raw, ok := p.Meta[metakeys.LogLevel]; ok {
		if json.Unmarshal(raw, &rm.logLevel) != nil {
			return requestMeta{}, fmt.Errorf("%w: %s is no string", errInvalidMeta, metakeys.LogLevel)
		}
		if _, known := levelRank[rm.logLevel]; !known {
			return requestMeta{}, fmt.Errorf("%w: unknown logging level %q", errInvalidMeta, rm.logLevel)
		}
	}
	return rm, nil
}

// statelessSession is the state a request of a stateless revision runs with: a session of its
// own, never registered, that lives as long as the request and knows what its _meta said. Log
// records reach the client only when the request asked for a level.
func statelessSession(rm requestMeta) *sessionState {
	st := newSessionState("", 0)
	st.stateless = true
	st.version, st.client, st.caps = rm.version, rm.client, rm.caps
	st.logLevel = rm.logLevel
	_, st.receiptsOptIn = rm.caps.Extensions[receipts.ExtensionID]
	return st
}

// routesStateless reports whether an HTTP POST speaks a stateless revision: it carries no
// session, and neither names a session revision in MCP-Protocol-Version nor opens a session with
// initialize. A server that speaks no stateless revision answers every request as before.
func (h *HTTPServer) routesStateless(r *http.Request, session string, m jsonrpc.Message) bool {
	if session != "" || len(h.statelessVersions()) == 0 {
		return false
	}
	v := strings.TrimSpace(r.Header.Get("Mcp-Protocol-Version"))
	if v != "" && sessionRevision(v) {
		return false
	}
	return v != "" || (m.Kind() == jsonrpc.KindRequest && m.Method != "initialize")
}

// headerName returns the value Mcp-Name must carry for a request, if its method has one.
func headerName(m jsonrpc.Message) (name string, has bool) {
	var p struct {
		Name   *string `json:"name"`
		URI    *string `json:"uri"`
		TaskID *string `json:"taskId"`
	}
	json.Unmarshal(m.Params, &p) // params that are no object name nothing
	var v *string
	switch m.Method {
	case "tools/call", "prompts/get":
		v = p.Name
	case "resources/read":
		v = p.URI
	case "tasks/get", "tasks/update", "tasks/cancel":
		v = p.TaskID
	}
	if v == nil {
		return "", false
	}
	return *v, true
}

// singleHeader returns the one value of a header, trimmed of surrounding whitespace; present is
// false when the header is absent, and an error when it is sent more than once.
func singleHeader(h http.Header, name string) (v string, present bool, err error) {
	vals := h.Values(name)
	switch len(vals) {
	case 0:
		return "", false, nil
	case 1:
		return strings.Trim(vals[0], " \t"), true, nil
	}
	return "", true, fmt.Errorf("%w: %s is sent %d times", headers.ErrMismatch, name, len(vals))
}

// statelessRefusal is a request of a stateless revision refused before it runs, with its HTTP
// status and JSON-RPC error.
type statelessRefusal struct {
	status  int
	code    int64
	message string
	data    any
}

// admitStateless checks a request of a stateless revision before it runs, in the order the
// revision's rules build on each other: the headers name the method, the _meta names the
// revision and the client's capabilities, the revision header agrees with the _meta, the server
// speaks the revision, the headers name what the body names, and the server has the method.
func (h *HTTPServer) admitStateless(r *http.Request, m jsonrpc.Message) (requestMeta, *statelessRefusal) {
	mismatch := func(format string, args ...any) *statelessRefusal {
		return &statelessRefusal{http.StatusBadRequest, rpcHeaderMismatch, "HeaderMismatch: " + fmt.Sprintf(format, args...), nil}
	}
	method, present, err := singleHeader(r.Header, "Mcp-Method")
	switch {
	case err != nil:
		return requestMeta{}, mismatch("%v", err)
	case !present:
		return requestMeta{}, mismatch("missing Mcp-Method")
	case method != m.Method:
		return requestMeta{}, mismatch("Mcp-Method %q, the body's method %q", method, m.Method)
	}
	rm, refusal := readStatelessMeta(m)
	if refusal != nil {
		return requestMeta{}, refusal
	}
	version, present, err := singleHeader(r.Header, "Mcp-Protocol-Version")
	switch {
	case err != nil:
		return requestMeta{}, mismatch("%v", err)
	case !present:
		return requestMeta{}, mismatch("missing MCP-Protocol-Version")
	case version != rm.version:
		return requestMeta{}, mismatch("MCP-Protocol-Version %q, the _meta's %q", version, rm.version)
	}
	if refusal := h.checkRevision(rm); refusal != nil {
		return requestMeta{}, refusal
	}
	if want, has := headerName(m); has {
		got, present, err := singleHeader(r.Header, "Mcp-Name")
		if err == nil && present {
			got, err = headers.DecodeValue(got)
		}
		switch {
		case err != nil:
			return requestMeta{}, mismatch("%v", err)
		case !present:
			return requestMeta{}, mismatch("missing Mcp-Name")
		case got != want:
			return requestMeta{}, mismatch("Mcp-Name %q, the body's %q", got, want)
		}
	}
	if refusal := h.checkMethod(m); refusal != nil {
		return requestMeta{}, refusal
	}
	if m.Method == "tools/call" {
		if err := h.checkParamHeaders(r.Header, m); err != nil {
			return requestMeta{}, mismatch("%v", err)
		}
	}
	return rm, nil
}

// admitStatelessFrame checks a request of a stateless revision that came without HTTP headers
// (in memory, over a byte stream): its _meta, its revision and its method.
func (s *Server) admitStatelessFrame(m jsonrpc.Message) (requestMeta, *statelessRefusal) {
	rm, refusal := readStatelessMeta(m)
	if refusal == nil {
		refusal = s.checkRevision(rm)
	}
	if refusal == nil {
		refusal = s.checkMethod(m)
	}
	return rm, refusal
}

// readStatelessMeta reads the _meta of a request of a stateless revision, refusing it with
// -32602 when a required part is missing.
func readStatelessMeta(m jsonrpc.Message) (requestMeta, *statelessRefusal) {
	rm, err := readRequestMeta(m.Params)
	if err != nil {
		return requestMeta{}, &statelessRefusal{http.StatusBadRequest, mcpclient.RPCInvalidParams, err.Error(), nil}
	}
	return rm, nil
}

// checkRevision refuses a request in a revision the server does not speak, listing those it
// does and echoing the one asked for.
func (s *Server) checkRevision(rm requestMeta) *statelessRefusal {
	if slices.Contains(s.statelessVersions(), rm.version) {
		return nil
	}
	return &statelessRefusal{http.StatusBadRequest, rpcUnsupportedProtocolVersion,
		"Unsupported protocol version " + rm.version,
		map[string]any{"supported": s.discoverVersions(), "requested": rm.version}}
}

// checkMethod refuses a method the server does not have in the stateless revisions.
func (s *Server) checkMethod(m jsonrpc.Message) *statelessRefusal {
	if s.servesStateless(m.Method) {
		return nil
	}
	return &statelessRefusal{http.StatusNotFound, mcpclient.RPCMethodNotFound, "Method not found: " + m.Method, nil}
}

// checkParamHeaders checks the Mcp-Param-* headers of a tools/call against the tool's
// x-mcp-header declarations. An unknown tool has none: the call itself reports it.
func (s *Server) checkParamHeaders(h http.Header, m jsonrpc.Message) error {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(m.Params, &p) != nil {
		return nil
	}
	s.mu.Lock()
	te := s.tools[p.Name]
	s.mu.Unlock()
	if te == nil {
		return nil
	}
	decl, err := headers.Declarations(te.tool.InputSchema)
	if err != nil {
		return nil // such a tool breaks the rules on the server's side, not the client's
	}
	return headers.CheckParams(decl, p.Arguments, h)
}

// discoverVersions are the revisions server/discover lists: every revision the server speaks,
// those with sessions through initialize.
func (s *Server) discoverVersions() []string { return slices.Clone(s.versions) }

// servesStateless reports whether the server has a method in the stateless revisions: the
// methods of the features it declares, server/discover and subscriptions/listen, and what
// WithMethod registered.
func (s *Server) servesStateless(method string) bool {
	if removedMethods[method] {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch method {
	case "server/discover", "subscriptions/listen", "tools/list", "tools/call":
		return true
	case "resources/list", "resources/templates/list", "resources/read":
		return s.hasResourcesLocked()
	case "prompts/list", "prompts/get":
		return len(s.prompts) > 0
	case "completion/complete":
		return s.completion != nil
	case "tasks/get", "tasks/update", "tasks/cancel": // the tasks extension: tasks_ext.go
		return s.tasksDeclaredLocked()
	}
	return s.methods[method] != nil
}

func (s *Server) hasResourcesLocked() bool { return len(s.resources) > 0 || len(s.templates) > 0 }

// capabilities returns what the server declares, in initialize or in server/discover, for ep.
func (s *Server) capabilities(ep *epoch, stateless bool) mcpclient.ServerCapabilities {
	s.mu.Lock()
	defer s.mu.Unlock()
	caps := mcpclient.ServerCapabilities{
		// listChanged is a promise of the stateless revisions, whose listeners hear of every
		// change; a session hears of changes only when a test sends them.
		Tools:   &mcpclient.ListChangedCapability{ListChanged: stateless},
		Logging: json.RawMessage(`{}`),
	}
	caps.Extensions = s.extensions
	if s.mode == ModeReceipts {
		// ep's epoch, the one the session belongs to, whatever Restart did meanwhile.
		// Receipts are kept only for requests that opt in (per request in the stateless
		// revisions, per session in initialize), which they can only do for an extension the
		// server declares.
		decl, _ := json.Marshal(s.receiptDeclarationLocked(ep))
		caps.Extensions = maps.Clone(s.extensions)
		if caps.Extensions == nil {
			caps.Extensions = map[string]json.RawMessage{}
		}
		caps.Extensions[receipts.ExtensionID] = decl
	}
	if stateless && s.tasksDeclaredLocked() {
		// The stateless revisions serve tasks through the extension (tasks_ext.go), the
		// session revisions as 2025-11-25 does (declareTasks).
		caps.Extensions = withTasksExtension(caps.Extensions)
	}
	if s.hasResourcesLocked() {
		caps.Resources = &mcpclient.ResourcesCapability{Subscribe: true, ListChanged: true}
	}
	if len(s.prompts) > 0 {
		caps.Prompts = &mcpclient.ListChangedCapability{ListChanged: true}
	}
	if s.completion != nil {
		caps.Completions = json.RawMessage(`{}`)
	}
	return caps
}

// discover answers server/discover.
func (s *Server) discover(ep *epoch) answer {
	caps := s.capabilities(ep, true)
	info, _ := json.Marshal(s.info) // plain strings
	return resultAnswer(struct {
		SupportedVersions []string                     `json:"supportedVersions"`
		Capabilities      mcpclient.ServerCapabilities `json:"capabilities"`
		Meta              map[string]json.RawMessage   `json:"_meta"`
	}{s.discoverVersions(), caps, map[string]json.RawMessage{metakeys.ServerInfo: info}})
}

// dispatchStateless runs a request of a stateless revision that admitStateless let through.
func (s *Server) dispatchStateless(ctx context.Context, ep *epoch, st *sessionState, m jsonrpc.Message, key string, out outlet) answer {
	var a answer
	switch m.Method {
	case "server/discover":
		a = s.discover(ep)
	case "tools/list":
		a = s.listTools(m)
	case "tools/call":
		a = s.statelessToolsCall(ctx, ep, st, m, key, out)
	case "tasks/get", "tasks/update", "tasks/cancel":
		a = s.extensionTaskMethod(ep, st, m)
	case "resources/list":
		a = s.listResources(m)
	case "resources/templates/list":
		a = s.listResourceTemplates(m)
	case "resources/read":
		a = s.readResource(ctx, m, mcpclient.RPCInvalidParams)
	case "prompts/list":
		a = s.listPrompts(m)
	case "prompts/get":
		a = s.getPrompt(ctx, m, st, out)
	case "completion/complete":
		a = s.complete(ctx, m)
	default:
		a = s.callMethod(ctx, m)
	}
	return s.statelessResult(m.Method, a)
}

// statelessResult adds what a result of a stateless revision carries: its resultType
// ("complete" unless the result says otherwise) and, where the method has them, the caching
// hints.
func (s *Server) statelessResult(method string, a answer) answer {
	if a.isError || len(a.body) == 0 || a.body[0] != '{' {
		return a
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(a.body, &fields) != nil {
		return a
	}
	var extra []byte
	if _, ok := fields["resultType"]; !ok {
		extra = append(extra, `"resultType":"complete",`...)
	}
	if cacheableMethods[method] {
		s.mu.Lock()
		ttl, scope := s.cacheTTL.Milliseconds(), s.cacheScope
		s.mu.Unlock()
		if _, ok := fields["ttlMs"]; !ok {
			extra = fmt.Appendf(extra, `"ttlMs":%d,`, ttl)
		}
		if _, ok := fields["cacheScope"]; !ok {
			extra = fmt.Appendf(extra, `"cacheScope":%q,`, scope)
		}
	}
	if len(extra) == 0 {
		return a
	}
	body := bytes.TrimSpace(a.body[1:])
	if len(body) > 0 && body[0] == '}' {
		extra = extra[:len(extra)-1] // the result had no fields: no comma before its end
	}
	return answer{body: slices.Concat([]byte("{"), extra, body)}
}

// statelessStatus is the HTTP status an error answer of a stateless revision travels with:
// 404 for a method the server does not have, 400 for a capability the client did not declare,
// 200 otherwise.
func statelessStatus(a answer) int {
	if !a.isError {
		return http.StatusOK
	}
	var e struct {
		Code int64 `json:"code"`
	}
	json.Unmarshal(a.body, &e) // built by errorAnswer
	switch e.Code {
	case mcpclient.RPCMethodNotFound:
		return http.StatusNotFound
	case rpcMissingRequiredClientCapability, rpcHeaderMismatch, rpcUnsupportedProtocolVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}
