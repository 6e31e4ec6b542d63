package mcpclient

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/northstar-mcp/mcpclient/internal/headers"
	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/internal/metakeys"
	"github.com/northstar-mcp/mcpclient/internal/params"
)

// A Request is one frozen JSON-RPC request: method, params and id, serialized exactly once.
//
// Every attempt sends the same bytes; nothing about a Request changes after it is made, so it is
// safe to share and to keep. A Request belongs to the Client that made it, whose ledger
// remembers its id (see [Ledger]). Its id denotes this content and nothing else: to change the
// content, make a new Request with [Client.Supersede].
type Request struct {
	// requestSpec is what the request was made from; the requests that follow from it (a
	// re-issue under a new id, the next round, a replacement) start from it, never from its
	// bytes.
	requestSpec
	key    string          // id.JSON(), the ledger and routing key
	params json.RawMessage // as sent
	frame  []byte
	fp     Fingerprint
	header http.Header // transport headers of the request (naming it, in a stateless revision); never modified
	owner  *Client
	// receiptsGuard, set on a request Recover read back from a journal and found the server
	// still declaring the receipts it went out under, is those receipts: Recover promised that
	// resending it cannot run it twice, so its first send goes only while the server declares
	// them still.
	receiptsGuard *ReceiptBinding
	// receiptsSince is when the earlier process first sent it, for the retention of its
	// receipt.
	receiptsSince time.Time
}

// A requestSpec describes a request before its bytes exist. Its params are the caller's object
// (base), the top-level members the client sets (extra) and the _meta members it sets (meta,
// besides those build adds itself); the name, URI and arguments that headers and retry decisions
// need are kept beside them, read from the caller's object once or given by the typed call that
// wrote it.
type requestSpec struct {
	method  string
	id      ID // zero until build picks a fresh one
	base    json.RawMessage
	name    string          // params.name: the tool of a tools/call, the prompt of a prompts/get
	uri     string          // params.uri of a resources/read
	args    json.RawMessage // params.arguments of a tools/call, for its Mcp-Param-* headers
	extra   map[string]json.RawMessage
	meta    map[string]json.RawMessage
	version string // the stateless revision the request is written in; "" for older ones
	// extensions are those the caller declared for this request alone (WithExtension as a
	// CallOption), beside the client's own; never modified once set.
	extensions map[string]json.RawMessage
	// frameBuf, if not nil, is the buffer base was written in, with frameBufRoom bytes of room
	// for the frame in front of it (see encodedToolCall): the first build writes the frame
	// there; the requests that follow from the spec never see it.
	frameBuf     []byte
	frameBufRoom int
	// baseBraceTaken: the first build wrote the frame of a stateless revision around base, in
	// its buffer, and the comma behind the client's _meta took the place of base's opening
	// brace. The rest of base is intact; a request that follows from the spec reads it with
	// the brace put back (see restoreBase).
	baseBraceTaken bool

	idempotent bool      // the caller vouched that running it twice does no harm
	response   *Response // filled with the call's Response when it succeeds (WithResponse)
	progress   ProgressHandler
	idle, max  time.Duration

	supersedes ID
	reason     string // why it supersedes, for the ledger
	// automatic: the client itself made it to replace a request whose attempt loop it runs (a
	// safe request re-issued under a new id), so the replaced one is in flight by design.
	automatic bool
}

// asksProgress reports whether the request carries a progress token: for a handler, or for the
// idle timeout that progress resets.
func (s *requestSpec) asksProgress() bool { return s.progress != nil || s.idle > 0 }

// build freezes a request: it picks the id (a fresh UUID unless spec names one), writes the
// params once (the caller's object, the client's members, and the _meta of the request's
// revision), serializes and fingerprints the frame, and derives the headers from spec. Every
// request the client sends is made here.
func (c *Client) build(spec requestSpec) (*Request, error) {
	spec.restoreBase()
	if spec.method == "tools/call" && spec.name == "" {
		// Most often a tool's arguments passed where the call's params belong: the server
		// would only refuse it, and a recovery would be spent on that refusal.
		return nil, &Error{Code: CodeInvalidArgument, Err: errors.New("tools/call params need the tool's name (for new arguments to the same tool, use CallTool or SupersedeToolCall)")}
	}
	if spec.version != "" && removedIn(spec.method, spec.version) {
		return nil, &Error{Code: CodeInvalidArgument, Err: fmt.Errorf("%w: %s is not in %s", ErrMethodRemoved, spec.method, spec.version)}
	}
	var key string
	if spec.id.IsZero() {
		id, idKey, err := newID(c.cfg.idVersion)
		if err != nil {
			return nil, &Error{Code: CodeInvalidArgument, Err: err}
		}
		spec.id, key = id, idKey
	} else {
		key = spec.id.JSON()
	}
	meta, err := c.metaOf(&spec, key)
	if err != nil {
		return nil, &Error{Code: CodeInvalidArgument, Err: err}
	}
	raw, frame, braceTaken, err := frameOf(&spec, key, meta)
	if err != nil {
		return nil, &Error{Code: CodeInvalidArgument, Err: fmt.Errorf("params of %s: %w", spec.method, err)}
	}
	req := &Request{requestSpec: spec, key: key, params: raw, frame: frame, owner: c}
	req.frameBuf, req.frameBufRoom, req.baseBraceTaken = nil, 0, braceTaken
	req.fp = fingerprintOf(req.frame)
	if spec.version != "" {
		req.header = headers.Standard(spec.method, spec.name, spec.uri, spec.version)
		req.header[receiptsOptInHeader] = receiptsOptIn
		if spec.method == "tools/call" {
			if err := c.addParamHeaders(req.header, spec.name, spec.args); err != nil {
				return nil, &Error{Code: CodeInvalidArgument, Err: err}
			}
		}
	} else {
		req.header = sessionRequestHeader
	}
	return req, nil
}

// frameOf writes the params of spec under id key, with the client's members (spec's extra, meta
// in _meta), and the JSON-RPC frame around them, copying spec's params once at most: where the
// client adds members, the params are composed behind the frame's start in the frame's own
// buffer; where it adds none, or only a stateless revision's shared _meta, a tool call's params
// already sit behind room for it (see encodedToolCall). braceTaken reports that the frame was
// written around spec.base at the cost of its opening brace (see requestSpec.baseBraceTaken).
func frameOf(spec *requestSpec, key string, meta params.Members) (raw json.RawMessage, frame []byte, braceTaken bool, err error) {
	var room [frameRoom]byte
	head := jsonrpc.AppendRequestHead(room[:0], key, spec.method)
	if len(spec.extra) == 0 && meta.Encoded() != nil {
		if raw, frame = frameAroundWithMeta(spec.frameBuf, spec.frameBufRoom, spec.base, head, meta.Encoded()); frame != nil {
			return raw, frame, true, nil
		}
	}
	if buf, ok := params.ComposeAfter(head, spec.base, spec.extra, meta); ok {
		raw = buf[len(head):len(buf):len(buf)]
		return raw, append(buf, '}')[: len(buf)+1 : len(buf)+1], false, nil
	}
	if raw, err = params.Compose(spec.base, spec.extra, meta.Set); err != nil {
		return nil, nil, false, err
	}
	if frame = frameAround(spec.frameBuf, spec.frameBufRoom, raw, head); frame == nil {
		frame = jsonrpc.AppendRequest(make([]byte, 0, len(raw)+len(spec.method)+len(key)+48), key, spec.method, raw)
	}
	return raw, frame, false, nil
}

// inRoom reports whether params sit in buf behind room bytes, with a byte to spare behind them.
func inRoom(buf []byte, room int, params []byte) bool {
	return len(params) > 0 && room > 0 && len(buf) == room+len(params) && cap(buf) > len(buf) && &buf[room] == &params[0]
}

// frameAround writes head and a closing brace around params where they sit at the end of buf,
// behind room bytes that encodeToolCall left, and returns the frame: the bytes
// jsonrpc.AppendRequest would write, without a copy of the params. It returns nil where params
// are not there or head does not fit.
func frameAround(buf []byte, room int, params, head []byte) []byte {
	if !inRoom(buf, room, params) || len(head) > room {
		return nil
	}
	start := room - len(head)
	copy(buf[start:], head)
	frame := buf[start : len(buf)+1 : len(buf)+1]
	frame[len(frame)-1] = '}'
	return frame
}

// metaOpen and metaClose enclose the members of the _meta that frameAroundWithMeta writes at the
// start of a tool call's params.
const (
	metaOpen  = `{"_meta":{`
	metaClose = `},`
)

// metaRoom is the room frameAroundWithMeta needs, besides the frame's start, for a _meta of the
// members encoded.
func metaRoom(encoded []byte) int { return len(metaOpen) + len(encoded) + len(metaClose) - 1 }

// frameAroundWithMeta is frameAround for a stateless revision: it writes, in front of base, the
// frame's start and a _meta object of the members encoded (see params.Members) as the params'
// first member, which is what params.Compose writes for an object with no _meta of its own, and
// returns the params and the frame. The comma behind the _meta object takes the place of base's
// opening brace. It returns nil where base is not in buf, does not start with a member (as a
// tool call's params do), or the start does not fit.
func frameAroundWithMeta(buf []byte, room int, base, head, encoded []byte) (raw json.RawMessage, frame []byte) {
	if !inRoom(buf, room, base) || len(base) < 2 || base[0] != '{' || base[1] != '"' || len(head)+metaRoom(encoded) > room {
		return nil, nil
	}
	start := room + 1 - len(head) - len(metaOpen) - len(encoded) - len(metaClose)
	_ = append(append(append(append(buf[start:start], head...), metaOpen...), encoded...), metaClose...)
	frame = buf[start : len(buf)+1 : len(buf)+1]
	frame[len(frame)-1] = '}'
	return buf[start+len(head) : len(buf) : len(buf)], frame
}

// restoreBase gives spec back the params base was before a build took its opening brace,
// copied: the first build's frame holds the bytes where base was written.
func (s *requestSpec) restoreBase() {
	if !s.baseBraceTaken {
		return
	}
	s.base = append(append(make(json.RawMessage, 0, len(s.base)), '{'), s.base[1:]...)
	s.baseBraceTaken = false
}

// receiptsOptInHeader carries, over HTTP, the opt-in into receipts every request makes: a server
// (or a middleware in front of it) that cannot see the session's initialize reads it there. It
// is part of the frozen request, so a resend carries it too.
const receiptsOptInHeader = "Mcp-Request-Receipts"

// receiptsOptIn is the header's value; shared, never modified.
var receiptsOptIn = []string{"1"}

// sessionRequestHeader is the header of every request of a session revision: the receipts
// opt-in alone. Shared by those requests, never modified.
var sessionRequestHeader = http.Header{receiptsOptInHeader: receiptsOptIn}

// metaOf returns the _meta members the client writes into spec's params: spec's own, the
// request's progress token (its own id, which no other request in flight can have), and in a
// stateless revision what every request of that revision carries.
func (c *Client) metaOf(spec *requestSpec, key string) (params.Members, error) {
	var stateless params.Members
	if spec.version != "" {
		shared, err := c.statelessMeta(spec.version)
		if err != nil {
			return params.Members{}, err
		}
		stateless = *shared
	}
	extended := stateless.Set != nil && len(spec.extensions) > 0
	if len(spec.meta) == 0 && !spec.asksProgress() && !extended {
		return stateless, nil // encoded once per revision and level, shared, never modified
	}
	meta := make(map[string]json.RawMessage, len(stateless.Set)+len(spec.meta)+1)
	for k, v := range stateless.Set {
		meta[k] = v
	}
	if extended {
		meta[metakeys.ClientCapabilities] = c.cfg.capabilitiesWith(spec.extensions)
	}
	for k, v := range spec.meta {
		meta[k] = v
	}
	if spec.asksProgress() {
		meta["progressToken"] = json.RawMessage(key)
	}
	return params.Members{Set: meta}, nil
}

// NewRequest freezes a request: it picks the id (a fresh UUID, or the one pinned with
// WithRequestID), serializes method and params once and fingerprints the bytes. Nothing is sent.
//
// Freezing first and sending with Do lets a caller record the id durably before any byte leaves,
// which is what a restart needs to find out later what became of the request.
//
// params may be nil, a json.RawMessage, or anything encoding/json marshals to an object.
func (c *Client) NewRequest(method string, params any, opts ...CallOption) (*Request, error) {
	req, err := c.newRequest(method, params, opts)
	return req, returned(err)
}

// newRequest builds a request of the caller's, in the revision of the current session.
func (c *Client) newRequest(method string, params any, opts []CallOption) (*Request, error) {
	return c.newRequestIn(c.statelessVersion(), method, params, opts)
}

// newRequestIn builds a request of the caller's in version, the stateless revision of the
// current session, or "" for a session revision.
func (c *Client) newRequestIn(version, method string, params any, opts []CallOption) (*Request, error) {
	spec, err := specOf(method, params)
	if err != nil {
		return nil, err
	}
	spec.version = version
	return c.buildWith(spec, opts)
}

// statelessVersion is the revision of the current session when it is a stateless one; "" when
// it is a session revision or there is no session yet.
func (c *Client) statelessVersion() string {
	if s := c.current(); s != nil && s.stateless {
		return s.init.ProtocolVersion
	}
	return ""
}

// metaRoomIn is the room a tool call's params need in front of them for the _meta every request
// of version carries, written where they are (see frameAroundWithMeta); 0 for a session revision,
// or a _meta that is not encoded once.
func (c *Client) metaRoomIn(version string) int {
	if version == "" {
		return 0
	}
	m, err := c.statelessMeta(version)
	if err != nil || m.Encoded() == nil {
		return 0
	}
	return metaRoom(m.Encoded())
}

// callConfigOf applies a call's options. Options write through a pointer, which puts the
// config on the heap: a call without options makes none.
func callConfigOf(opts []CallOption) callConfig {
	if len(opts) == 0 {
		return callConfig{}
	}
	cc := new(callConfig)
	for _, o := range opts {
		if o != nil {
			o.applyCall(cc)
		}
	}
	return *cc
}

// buildWith applies a caller's options to spec and builds it; a pinned id is checked against
// the ledger.
func (c *Client) buildWith(spec requestSpec, opts []CallOption) (*Request, error) {
	cc := callConfigOf(opts)
	if len(cc.invalid) > 0 {
		return nil, &Error{Code: CodeInvalidArgument, Err: errors.Join(cc.invalid...)}
	}
	spec.id = cc.id
	spec.idempotent = cc.idempotent
	spec.progress, spec.idle, spec.max = cc.progress, cc.idle, cc.max
	spec.response = cc.response
	spec.extensions = cc.extensions
	if len(cc.meta) > 0 {
		meta := cc.meta
		for k, v := range spec.meta { // the client's own members win
			meta[k] = v
		}
		spec.meta = meta
	}
	req, err := c.build(spec)
	if err != nil {
		return nil, err
	}
	if !cc.id.IsZero() {
		if err := c.Ledger().check(req); err != nil {
			return nil, &Error{Code: CodeRequestIDReused, Request: req, Err: err}
		}
	}
	return req, nil
}

// specOf describes a request of method with the caller's params, read once.
func specOf(method string, p any) (requestSpec, error) {
	spec := requestSpec{method: method}
	if call, ok := p.(encodedToolCall); ok {
		spec.base, spec.name, spec.args, spec.frameBuf, spec.frameBufRoom = call.raw, call.name, call.args, call.buf, call.room
		return spec, nil
	}
	raw, err := marshalParams(p)
	if err != nil {
		return spec, &Error{Code: CodeInvalidArgument, Err: fmt.Errorf("params of %s: %w", method, err)}
	}
	spec.base = raw
	if taskMethod(method) {
		// The task's id routes the request (Mcp-Name): to the server instance holding the
		// task's state.
		var p struct {
			TaskID string `json:"taskId"`
		}
		json.Unmarshal(raw, &p) // a taskId that is no string names nothing: the server will say so
		spec.name = p.TaskID
		return spec, nil
	}
	if method == "tools/call" || method == "prompts/get" || method == "resources/read" {
		// A name or URI that does not read as a string names nothing: the server will say what
		// is wrong with it.
		f, _ := params.Read(raw)
		spec.name, spec.uri, spec.args = f.Name, f.URI, f.Arguments
	}
	return spec, nil
}

func marshalParams(params any) (json.RawMessage, error) {
	if params == nil {
		return nil, nil
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, fmt.Errorf("must be a JSON object, not %s", truncate(raw, 40))
	}
	return raw, nil
}

// encodedToolCall is the params of a tools/call the client serialized itself, as
// encoding/json would have serialized CallToolParams, with the name and arguments they were made
// of: reading them back, or marshalling them again, would scan arguments of any size once more.
type encodedToolCall struct {
	name string
	args json.RawMessage
	raw  json.RawMessage
	// buf, if not nil, is the buffer raw was written in: raw starts room bytes into it, and
	// the byte after raw is free, so that build can write the frame of the request's first id
	// (and a stateless revision's _meta) around raw instead of copying it.
	buf  []byte
	room int
}

// frameRoom is the room left in front of a tool call's params for the start of its frame:
// {"jsonrpc":"2.0","id":"<a UUID>","method":"tools/call","params":
const frameRoom = len(`{"jsonrpc":"2.0","id":"","method":"tools/call","params":`) + 36

// encodeToolCall writes the params of a tools/call of name with args, marshalled by
// encoding/json, in one buffer that leaves room for the frame, and metaRoom bytes more for the
// _meta of a stateless revision (see encodedToolCall and frameAroundWithMeta). A nil args, or
// one that marshals to null, sends no arguments; anything else must be an object.
func encodeToolCall(name string, args any, metaRoom int) (encodedToolCall, error) {
	w := &paramsWriter{name: name, room: frameRoom + metaRoom}
	if args != nil {
		// The Encoder marshals as json.Marshal does, then hands its bytes over in one Write,
		// which puts them straight into a buffer of the size the params need.
		if err := json.NewEncoder(w).Encode(args); err != nil {
			return encodedToolCall{}, err
		}
	}
	if w.buf == nil || string(w.buf[w.argsAt:len(w.buf)-1]) == "null" {
		raw := appendToolName(make([]byte, 0, len(`{"name":}`)+len(name)+2), name)
		return encodedToolCall{name: name, raw: append(raw, '}')}, nil
	}
	end := len(w.buf) - 1 // the Encoder's newline
	rawArgs := w.buf[w.argsAt:end:end]
	if rawArgs[0] != '{' {
		return encodedToolCall{}, fmt.Errorf("must be a JSON object, not %s", truncate(rawArgs, 40))
	}
	w.buf[end] = '}'
	call := encodedToolCall{name: name, args: rawArgs, raw: w.buf[w.room : end+1 : end+1]}
	if cap(w.buf) > end+1 {
		call.buf, call.room = w.buf[:end+1:end+2], w.room
	}
	return call, nil
}

// appendToolName appends the start of a tool call's params, up to the tool's name.
func appendToolName(b []byte, name string) []byte {
	b = append(b, `{"name":`...)
	if jsonrpc.PlainString(name) {
		return append(append(append(b, '"'), name...), '"')
	}
	quoted, _ := json.Marshal(name) // a Go string always marshals
	return append(b, quoted...)
}

// paramsWriter receives an Encoder's output, the arguments of a tool call, and writes the
// params around it behind the room left for the frame.
type paramsWriter struct {
	name   string
	room   int // left in front of the params
	buf    []byte
	argsAt int // where the arguments start in buf
}

func (w *paramsWriter) Write(p []byte) (int, error) {
	// The frame's room, the name, the arguments (p ends with a newline, which becomes the
	// params' closing brace), and a byte for the frame's own.
	quoted := len(w.name) + 2
	if !jsonrpc.PlainString(w.name) {
		q, _ := json.Marshal(w.name)
		quoted = len(q)
	}
	buf := make([]byte, w.room, w.room+len(`{"name":,"arguments":`)+quoted+len(p)+1)
	buf = append(appendToolName(buf, w.name), `,"arguments":`...)
	w.argsAt = len(buf)
	w.buf = append(buf, p...)
	return len(p), nil
}

// ID returns the request's id; the zero ID for a nil Request, so that an *Error's
// Request.ID() may be read whether or not the error names a request.
func (r *Request) ID() ID {
	if r == nil {
		return ID{}
	}
	return r.id
}

// Method returns the JSON-RPC method.
func (r *Request) Method() string { return r.method }

// Name returns the name the request is about: the tool of a tools/call, the prompt of a
// prompts/get; "" for other methods.
func (r *Request) Name() string {
	switch r.method {
	case "tools/call", "prompts/get":
		return r.name
	}
	return ""
}

// Header returns a copy of the HTTP headers that name the request in a stateless revision
// (Mcp-Method, Mcp-Name, Mcp-Param-*, MCP-Protocol-Version); nil in the older ones.
func (r *Request) Header() http.Header { return r.header.Clone() }

// Bytes returns a copy of the exact bytes every attempt sends.
func (r *Request) Bytes() []byte { return bytes.Clone(r.frame) }

// Params returns a copy of the serialized params.
func (r *Request) Params() json.RawMessage { return bytes.Clone(r.params) }

// Fingerprint returns the SHA-256 of the request's bytes.
func (r *Request) Fingerprint() Fingerprint { return r.fp }

// Supersedes returns the id of the request this one replaces, or the zero ID.
func (r *Request) Supersedes() ID { return r.supersedes }

// Fingerprint is the SHA-256 of a request's serialized bytes.
type Fingerprint [sha256.Size]byte

func fingerprintOf(frame []byte) Fingerprint { return sha256.Sum256(frame) }

// String returns the fingerprint in hex.
func (f Fingerprint) String() string { return hex.EncodeToString(f[:]) }

// MarshalText writes the fingerprint in hex, as String does.
func (f Fingerprint) MarshalText() ([]byte, error) { return hex.AppendEncode(nil, f[:]), nil }

// UnmarshalText reads a fingerprint in hex.
func (f *Fingerprint) UnmarshalText(b []byte) error {
	if hex.DecodedLen(len(b)) != len(f) {
		return fmt.Errorf("mcpclient: a fingerprint is %d hex digits, not %d", 2*len(f), len(b))
	}
	_, err := hex.Decode(f[:], b)
	return err
}

// A Response is the successful answer to a Request.
type Response struct {
	// Request is the request that was answered. After an automatic re-issue of a safe request
	// it is the re-issued one, whose id differs from the original's.
	Request *Request
	// Result is the raw JSON result.
	Result json.RawMessage
	// Attempts is how many times the request's bytes were sent, re-issues included.
	Attempts int
	// Replayed: the server answered from its receipt of an earlier send of the request (it
	// marks such an answer in the result's _meta), not by running it now.
	Replayed bool
}

// Decode unmarshals the result into v.
func (r *Response) Decode(v any) error { return json.Unmarshal(r.Result, v) }
