package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/northstar-mcp/mcpclient/receipts"
)

// The revisions the server scenarios speak: one with sessions, opened by initialize, and the
// stateless one, opened by server/discover.
const (
	revSession   = "2025-11-25"
	revStateless = "2026-07-28"
)

// How a peer's requests opt into receipts.
type optIn int

const (
	optNone     optIn = iota // not at all
	optSession               // by the session's initialize (session revision)
	optHeader                // by the Mcp-Request-Receipts header alone
	optMeta                  // by _meta and the header, as the specification has clients do (stateless revision)
	optMetaOnly              // by _meta alone (stateless revision)
)

// A peer is one client of the server under test, speaking raw HTTP: every body it sends is
// written by hand, and sent as is.
type peer struct {
	r       *run
	url     string
	rev     string
	opt     optIn
	token   string // bearer token, "" for none
	session string // Mcp-Session-Id, session revision
	// decl is the receipts declaration the server made when the peer opened, nil if none.
	decl json.RawMessage
	// opening is the raw answer to initialize or server/discover.
	opening *reply
}

// open opens a peer: initialize (declaring the extension when opt is optSession) and
// notifications/initialized, or server/discover. It skips the run when the server does not speak
// rev, and when needDecl and the server declares no receipts.
func open(r *run, url, rev string, opt optIn, token string, needDecl bool) *peer {
	p := &peer{r: r, url: url, rev: rev, opt: opt, token: token}
	id := strconv.Quote(uuid.NewString())
	var body string
	if rev == revStateless {
		body = `{"jsonrpc":"2.0","id":` + id + `,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	} else {
		ext := ""
		if opt == optSession {
			ext = `"extensions":{"` + receipts.ExtensionID + `":{}}`
		}
		body = `{"jsonrpc":"2.0","id":` + id + `,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{` + ext + `},"clientInfo":{"name":"receipts-conformance","version":"0"}}}`
	}
	rep := p.post([]byte(body), p.headers(methodOf(rev), "", false))
	if rep.err != nil {
		r.abort("opening: %v", rep.err)
	}
	p.opening = rep
	if rep.msg.Error != nil || rep.msg.Result == nil {
		r.skip("the server does not speak %s: HTTP %d %s", rev, rep.status, bytes.TrimSpace(rep.raw))
	}
	var res struct {
		ProtocolVersion   string   `json:"protocolVersion"`
		SupportedVersions []string `json:"supportedVersions"`
		Capabilities      struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		} `json:"capabilities"`
	}
	json.Unmarshal(rep.msg.Result, &res)
	if rev == revSession && res.ProtocolVersion != rev {
		r.skip("the server answered initialize with %q, not %s", res.ProtocolVersion, rev)
	}
	if rev == revStateless && !containsString(res.SupportedVersions, rev) {
		r.skip("server/discover does not list %s", rev)
	}
	p.decl = res.Capabilities.Extensions[receipts.ExtensionID]
	if needDecl && p.decl == nil {
		r.skip("the server does not declare %s", receipts.ExtensionID)
	}
	if rev == revSession {
		p.session = rep.header.Get("Mcp-Session-Id")
		n := p.post([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), p.headers("notifications/initialized", "", false))
		if n.err != nil || n.status >= 300 {
			r.abort("notifications/initialized: HTTP %d %v", n.status, n.err)
		}
	}
	return p
}

func methodOf(rev string) string {
	if rev == revStateless {
		return "server/discover"
	}
	return "initialize"
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// headers returns the headers of a POST of method (and tool name, for tools/call), with the
// opt-in header when optHeader says so.
func (p *peer) headers(method, name string, optHeader bool) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	if method != "initialize" {
		h.Set("MCP-Protocol-Version", p.rev)
	}
	if p.session != "" {
		h.Set("Mcp-Session-Id", p.session)
	}
	if p.token != "" {
		h.Set("Authorization", "Bearer "+p.token)
	}
	if p.rev == revStateless {
		h.Set("Mcp-Method", method)
		if name != "" {
			h.Set("Mcp-Name", name)
		}
	}
	if optHeader {
		h.Set(receipts.HeaderOptIn, "1")
	}
	return h
}

// A call is a request's exact bytes and headers.
type call struct {
	id     string // JSON text
	body   []byte
	header http.Header
}

// toolCall builds a tools/call of tool with the JSON text args under id (JSON text), opted in as
// the peer's opt says.
func (p *peer) toolCall(id, tool, args string) call {
	return p.request(id, "tools/call", tool, `"name":`+strconv.Quote(tool)+`,"arguments":`+args)
}

// request builds a request of method with the params members members (JSON text without the
// braces) under id, opted in as the peer's opt says.
func (p *peer) request(id, method, name, members string) call {
	if p.rev == revStateless {
		ext := ""
		if p.opt == optMeta || p.opt == optMetaOnly {
			ext = `"extensions":{"` + receipts.ExtensionID + `":{}}`
		}
		if members != "" {
			members += ","
		}
		members += `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{` + ext + `}}`
	}
	body := `{"jsonrpc":"2.0","id":` + id + `,"method":` + strconv.Quote(method) + `,"params":{` + members + `}}`
	return call{id: id, body: []byte(body), header: p.headers(method, name, p.opt == optHeader || p.opt == optMeta)}
}

// newID returns a fresh id, as JSON text.
func newID() string { return strconv.Quote(uuid.NewString()) }

// newKey returns a fresh fixture key, and the arguments naming it.
func newKey() (key, args string) {
	key = uuid.NewString()
	return key, `{"key":"` + key + `"}`
}

// httpClient sends the peers' requests; runSuite closes its idle connections at the end.
var httpClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}

// A reply is what the server answered to one POST.
type reply struct {
	status int
	header http.Header
	sse    bool
	raw    []byte // the body; for an event stream, the data of the response's event
	msg    message
	err    error // transport failure, or no response to the id in the body
}

// message is a JSON-RPC response.
type message struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// send posts c.
func (p *peer) send(c call) *reply { return p.postCtx(p.r.ctx, c.body, c.header, c.id) }

func (p *peer) post(body []byte, h http.Header) *reply {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	json.Unmarshal(body, &m)
	return p.postCtx(p.r.ctx, body, h, string(m.ID))
}

// postCtx posts body with h and reads the response to id (JSON text) out of the answer: a JSON
// body, or the event of an event stream that carries it.
func (p *peer) postCtx(ctx context.Context, body []byte, h http.Header, id string) *reply {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return &reply{err: err}
	}
	req.Header = h.Clone()
	resp, err := httpClient.Do(req)
	if err != nil {
		return &reply{err: err}
	}
	defer resp.Body.Close()
	rep := &reply{status: resp.StatusCode, header: resp.Header}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "text/event-stream" {
		rep.sse = true
		rep.raw, rep.err = responseEvent(resp.Body, id)
	} else {
		rep.raw, rep.err = io.ReadAll(resp.Body)
	}
	if rep.err == nil && len(bytes.TrimSpace(rep.raw)) > 0 && bytes.TrimSpace(rep.raw)[0] == '{' {
		if err := json.Unmarshal(rep.raw, &rep.msg); err != nil {
			rep.err = fmt.Errorf("response body: %w", err)
		}
	}
	return rep
}

// responseEvent reads an event stream up to the event whose data is the response to id.
func responseEvent(r io.Reader, id string) ([]byte, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	var data []string
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line == "" {
			if len(data) > 0 {
				d := []byte(strings.Join(data, "\n"))
				var m struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
				}
				if json.Unmarshal(d, &m) == nil && m.Method == "" && sameID(m.ID, id) {
					return d, nil
				}
			}
			data = data[:0]
			continue
		}
		if v, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(v, " "))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("the event stream ended without the response to %s", id)
}

func sameID(a json.RawMessage, id string) bool {
	return string(bytes.TrimSpace(a)) == id
}

// replayHeader reports whether the answer carries Mcp-Receipt-Replay: 1.
func (r *reply) replayHeader() bool {
	return strings.TrimSpace(r.header.Get(receipts.HeaderReplay)) == "1"
}

// replayMeta reports whether the result's _meta carries the replay flag, true.
func (r *reply) replayMeta() bool {
	var res struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	json.Unmarshal(r.msg.Result, &res)
	return string(res.Meta[receipts.ReplayMetaKey]) == "true"
}

// marked reports whether the answer is marked as a replay in any way.
func (r *reply) marked() bool { return r.replayHeader() || r.replayMeta() }

var runsPattern = regexp.MustCompile(`runs=(\d+)`)

// runs reads the fixtures' "runs=N" from a result, or from error.data.runs; -1 if absent.
func (r *reply) runs() int {
	if r.msg.Error != nil {
		var d struct {
			Runs *int `json:"runs"`
		}
		if json.Unmarshal(r.msg.Error.Data, &d) == nil && d.Runs != nil {
			return *d.Runs
		}
		return -1
	}
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	json.Unmarshal(r.msg.Result, &res)
	for _, c := range res.Content {
		if m := runsPattern.FindStringSubmatch(c.Text); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
	}
	return -1
}

// dataCode is error.data.code, or "".
func (r *reply) dataCode() string {
	if r.msg.Error == nil {
		return ""
	}
	var d struct {
		Code string `json:"code"`
	}
	json.Unmarshal(r.msg.Error.Data, &d)
	return d.Code
}

// errCode is error.code, or 0.
func (r *reply) errCode() int64 {
	if r.msg.Error == nil {
		return 0
	}
	return r.msg.Error.Code
}

// String says what the answer was, for a check's detail.
func (r *reply) String() string {
	if r.err != nil {
		return fmt.Sprintf("HTTP %d, %v", r.status, r.err)
	}
	raw := bytes.TrimSpace(r.raw)
	if len(raw) > 300 {
		raw = append(raw[:300:300], "..."...)
	}
	return fmt.Sprintf("HTTP %d%s %s", r.status, map[bool]string{true: " (SSE)"}[r.sse], raw)
}

// withoutMarker returns the result with the replay flag removed from its _meta (and an empty
// _meta removed), to compare a replay with the original.
func withoutMarker(result json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(result, &m) != nil {
		return string(result)
	}
	if meta, ok := m["_meta"].(map[string]any); ok {
		delete(meta, receipts.ReplayMetaKey)
		if len(meta) == 0 {
			delete(m, "_meta")
		}
	}
	out, _ := json.Marshal(m)
	return string(out)
}

// runsOf asks receipts_runs how often the fixtures ran for key, with a request that does not opt
// in, under a fresh id.
func (p *peer) runsOf(key string) int {
	q := *p
	q.opt = optNone
	rep := q.send(q.toolCall(newID(), toolRuns, `{"key":"`+key+`"}`))
	n := rep.runs()
	if rep.err != nil || n < 0 {
		p.r.abort("%s: %s", toolRuns, rep)
	}
	return n
}

// jwt returns an unsigned JWT with iss and sub, and a jti that makes each one distinct, as a
// refreshed token is.
func jwt(iss, sub string) string {
	enc := base64.RawURLEncoding.EncodeToString
	claims, _ := json.Marshal(map[string]string{"iss": iss, "sub": sub, "jti": uuid.NewString()})
	return enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc(claims) + ".c2ln"
}
