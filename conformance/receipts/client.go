package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/receipts"
	"github.com/northstar-mcp/mcpclient/transport"
)

// A posted is one POST the scripted server received.
type posted struct {
	method  string
	id      string // JSON text, "" for a notification
	body    []byte
	header  http.Header
	session string
}

// An answer is what the scripted server does with one tools/call: lose it (drop the connection
// after reading the request, as a proxy that broke after forwarding it), or answer with status,
// headers and a body in which $ID stands for the request's id.
type answer struct {
	lose   bool
	delay  time.Duration // before answering or losing it
	status int
	header map[string]string
	body   string
}

// A scripted server plays a byte exchange against the client: it answers initialize or
// server/discover with the declaration it is given, tools/list with two tools ("book", which is
// not safe to repeat, and "look", read-only), and each tools/call as its script says.
type scripted struct {
	rev string
	// decl returns the receipts declaration (JSON text, "" for none) of the nth opening
	// (initialize or server/discover), from 1.
	decl func(n int) string
	// call returns what to do with the nth tools/call, from 1.
	call func(n int, p posted) answer
	// deadSession, when set, refuses with 404 every request on a session after its first
	// tools/call was lost, as a server that restarted (session revision).
	deadSession bool

	mu       sync.Mutex
	posts    []posted
	openings int
	calls    int
	dead     map[string]bool
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	json.Unmarshal(body, &m)
	p := posted{method: m.Method, id: string(m.ID), body: body, header: r.Header.Clone(), session: r.Header.Get("Mcp-Session-Id")}
	s.mu.Lock()
	s.posts = append(s.posts, p)
	dead := s.dead[p.session]
	s.mu.Unlock()
	if p.id == "" {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if dead {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	complete := ""
	if s.rev == revStateless {
		complete = `"resultType":"complete",`
	}
	switch m.Method {
	case "initialize", "server/discover":
		s.mu.Lock()
		s.openings++
		n := s.openings
		s.mu.Unlock()
		ext := ""
		if d := s.decl(n); d != "" {
			ext = `"extensions":{"` + receipts.ExtensionID + `":` + d + `}`
		}
		caps := `"capabilities":{"tools":{},` + ext + `}`
		caps = strings.Replace(caps, `{},}`, `{}}`, 1)
		if m.Method == "initialize" {
			w.Header().Set("Mcp-Session-Id", "scripted-session-"+strconv.Itoa(n))
			writeAnswer(w, 200, nil, `{"jsonrpc":"2.0","id":`+p.id+`,"result":{"protocolVersion":"2025-11-25",`+caps+`,"serverInfo":{"name":"scripted","version":"0"}}}`)
		} else {
			writeAnswer(w, 200, nil, `{"jsonrpc":"2.0","id":`+p.id+`,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],`+caps+`,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"scripted","version":"0"}}}}`)
		}
	case "tools/list":
		writeAnswer(w, 200, nil, `{"jsonrpc":"2.0","id":`+p.id+`,"result":{`+complete+`"tools":[{"name":"book","inputSchema":{"type":"object"}},{"name":"look","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}]}}`)
	case "tools/call":
		s.mu.Lock()
		s.calls++
		n := s.calls
		s.mu.Unlock()
		a := s.call(n, p)
		if a.delay > 0 {
			time.Sleep(a.delay)
		}
		if a.lose {
			if s.deadSession && p.session != "" {
				s.mu.Lock()
				if s.dead == nil {
					s.dead = map[string]bool{}
				}
				s.dead[p.session] = true
				s.mu.Unlock()
			}
			panic(http.ErrAbortHandler)
		}
		writeAnswer(w, a.status, a.header, strings.ReplaceAll(strings.ReplaceAll(a.body, "$ID", p.id), "$COMPLETE", complete))
	default:
		writeAnswer(w, 200, nil, `{"jsonrpc":"2.0","id":`+p.id+`,"result":{`+strings.TrimSuffix(complete, ",")+`}}`)
	}
}

func writeAnswer(w http.ResponseWriter, status int, header map[string]string, body string) {
	w.Header().Set("Content-Type", "application/json")
	for k, v := range header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// toolCalls returns the tools/call POSTs received.
func (s *scripted) toolCalls() []posted {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []posted
	for _, p := range s.posts {
		if p.method == "tools/call" {
			out = append(out, p)
		}
	}
	return out
}

// all returns every POST received.
func (s *scripted) all() []posted {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]posted(nil), s.posts...)
}

// The answers scripts use. $ID is the request's id, $COMPLETE the resultType of 2026-07-28.
var (
	lost     = answer{lose: true}
	booked   = answer{status: 200, body: `{"jsonrpc":"2.0","id":$ID,"result":{$COMPLETE"content":[{"type":"text","text":"booked"}]}}`}
	replayed = answer{status: 200, header: map[string]string{receipts.HeaderReplay: "1"},
		body: `{"jsonrpc":"2.0","id":$ID,"result":{$COMPLETE"content":[{"type":"text","text":"booked"}],"_meta":{"` + receipts.ReplayMetaKey + `":true}}}`}
	inDoubt  = answer{status: 200, body: `{"jsonrpc":"2.0","id":$ID,"error":{"code":-31000,"message":"outcome unknown","data":{"code":"MCP_RECEIPT_IN_DOUBT","reason":"lease-lapsed"}}}`}
	reused   = answer{status: 409, body: `{"jsonrpc":"2.0","id":$ID,"error":{"code":-32600,"message":"request id already used with different content","data":{"code":"MCP_REQUEST_ID_REUSED"}}}`}
	inFlight = answer{status: 409, header: map[string]string{"Retry-After": "0"},
		body: `{"jsonrpc":"2.0","id":$ID,"error":{"code":-32600,"message":"request still running","data":{"code":"MCP_REQUEST_IN_FLIGHT"}}}`}
	unmarked409 = answer{status: 409, body: `{"jsonrpc":"2.0","id":$ID,"error":{"code":-32600,"message":"duplicate request id"}}`}
)

// declare returns a declaration func that declares d at every opening.
func declare(d string) func(int) string { return func(int) string { return d } }

const (
	declProcess = `{"scope":"process","epoch":"epoch-1","retentionMs":86400000,"disconnect":"continue"}`
	declSession = `{"scope":"session","retentionMs":86400000}`
)

// script returns the answer func that plays answers in turn, the last one from then on.
func script(answers ...answer) func(int, posted) answer {
	return func(n int, _ posted) answer { return answers[min(n, len(answers))-1] }
}

// A clientScenario runs this module's client against a scripted server.
type clientScenario struct {
	name string
	doc  string
	revs []string
	fn   func(r *run, rev string)
}

// dial serves s and connects a client to it, which the returned func closes.
func dial(r *run, s *scripted, opts ...mcpclient.Option) (*mcpclient.Client, func()) {
	ts := httptest.NewServer(s)
	opts = append([]mcpclient.Option{mcpclient.WithRetryPolicy(mcptest.FastRetryPolicy()), mcpclient.WithProtocolVersion(s.rev)}, opts...)
	c, err := mcpclient.Connect(r.ctx, &transport.HTTP{URL: ts.URL}, opts...)
	if err != nil {
		ts.Close()
		r.abort("connect: %v", err)
	}
	return c, func() { c.Close(); ts.Close() }
}

// book calls the tool "book" (not safe to repeat), with the Response.
func book(r *run, c *mcpclient.Client, tool string) (*mcpclient.CallToolResult, *mcpclient.Response, error) {
	var resp mcpclient.Response
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, tool, map[string]string{"room": "12"}, mcpclient.WithResponse(&resp))
	return res, &resp, err
}

// optedIn reports whether a POST opted in: the header, and in 2026-07-28 the body's _meta.
func optedIn(p posted, rev string) (header, body bool) {
	header = p.header.Get(receipts.HeaderOptIn) == "1"
	if rev == revStateless {
		var m struct {
			Params struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			} `json:"params"`
		}
		json.Unmarshal(p.body, &m)
		var caps struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		}
		json.Unmarshal(m.Params.Meta["io.modelcontextprotocol/clientCapabilities"], &caps)
		_, body = caps.Extensions[receipts.ExtensionID]
	}
	return header, body
}

// initializeOptsIn reports whether the client's initialize declared the extension, with {}.
func initializeOptsIn(posts []posted) (declared bool, settings string) {
	for _, p := range posts {
		if p.method != "initialize" {
			continue
		}
		var m struct {
			Params struct {
				Capabilities struct {
					Extensions map[string]json.RawMessage `json:"extensions"`
				} `json:"capabilities"`
			} `json:"params"`
		}
		json.Unmarshal(p.body, &m)
		raw, ok := m.Params.Capabilities.Extensions[receipts.ExtensionID]
		return ok, string(raw)
	}
	return false, ""
}

// checkOptIn checks the opt-in of every POST the client sent s.
func checkOptIn(r *run, s *scripted, rev string) {
	posts := s.all()
	if rev == revSession {
		declared, settings := initializeOptsIn(posts)
		if !declared {
			return // the session did not opt in; nothing else to check
		}
		r.must("initialize declares the extension with {}", settings == "{}", "settings %s", settings)
		for _, p := range posts {
			if p.method == "tools/call" {
				h, _ := optedIn(p, rev)
				r.must("header on every opted-in request", h, "%s %s without %s: 1", p.method, p.id, receipts.HeaderOptIn)
			}
		}
		return
	}
	for _, p := range posts {
		if p.method != "tools/call" {
			continue
		}
		h, b := optedIn(p, rev)
		r.must("header and body agree", h == b, "%s %s: header %v, _meta %v", p.method, p.id, h, b)
	}
}

var clientScenarios = []clientScenario{
	{
		name: "opt-in-declared",
		doc: `Against a server declaring receipts, the client opts in: initialize's
capabilities.extensions names the extension with {} and every tools/call carries
Mcp-Request-Receipts: 1 (session revision); every tools/call's _meta client capabilities name it
and the header says so too (2026-07-28).`,
		revs: bothRevisions,
		fn: func(r *run, rev string) {
			s := &scripted{rev: rev, decl: declare(declProcess), call: script(booked)}
			c, stop := dial(r, s)
			defer stop()
			_, _, err := book(r, c, "book")
			r.require("answered", err == nil, "%v", err)
			if rev == revSession {
				declared, _ := initializeOptsIn(s.all())
				r.must("initialize declares the extension", declared, "no %s in initialize's capabilities.extensions", receipts.ExtensionID)
			} else {
				h, b := optedIn(s.toolCalls()[0], rev)
				r.must("tools/call opts in by _meta", b, "no opt-in in _meta")
				r.must("tools/call carries the header", h, "no %s: 1", receipts.HeaderOptIn)
			}
			checkOptIn(r, s, rev)
		},
	},
	{
		name: "opt-in-undeclared",
		doc: `Against a server that declares nothing, whatever the client opts into is consistent:
the header on every tools/call of a session whose initialize declared the extension; header and
_meta agreeing in 2026-07-28 (a server SHOULD refuse a mismatch with 400).`,
		revs: bothRevisions,
		fn: func(r *run, rev string) {
			s := &scripted{rev: rev, decl: declare(""), call: script(booked)}
			c, stop := dial(r, s)
			defer stop()
			_, _, err := book(r, c, "book")
			r.require("answered", err == nil, "%v", err)
			checkOptIn(r, s, rev)
		},
	},
	{
		name: "resend-same-bytes",
		doc: `Scope process: the first tools/call of "book" is lost after the server read it; the
client resends the same bytes under the same id with the opt-in header, and returns the replayed
answer as Response.Replayed. In 2026-07-28 it reads server/discover afresh between the two
(§9.1: the epoch is confirmed after the uncertain attempt).`,
		revs: bothRevisions,
		fn: func(r *run, rev string) {
			s := &scripted{rev: rev, decl: declare(declProcess), call: script(lost, replayed)}
			c, stop := dial(r, s)
			defer stop()
			res, resp, err := book(r, c, "book")
			r.require("answered", err == nil, "%v", err)
			calls := s.toolCalls()
			r.require("two deliveries", len(calls) == 2, "%d tools/call POSTs", len(calls))
			r.must("same id", calls[0].id == calls[1].id, "ids %s, %s", calls[0].id, calls[1].id)
			r.must("same bytes", bytes.Equal(calls[0].body, calls[1].body), "first %s\nresend %s", calls[0].body, calls[1].body)
			h, _ := optedIn(calls[1], rev)
			r.must("resend carries the header", h, "no %s: 1 on the resend", receipts.HeaderOptIn)
			r.must("result returned", res.Text() == "booked", "%v", res)
			r.must("Response.Replayed", resp.Replayed, "not reported as a replay")
			if rev == revStateless {
				r.must("epoch read afresh", discoverBetween(s.all()), "no server/discover between the lost attempt and the resend")
			}
		},
	},
	{
		name: "resend-session-scope",
		doc:  `Scope session: a lost tools/call is resent, same bytes and id, on the same session.`,
		revs: []string{revSession},
		fn: func(r *run, rev string) {
			s := &scripted{rev: rev, decl: declare(declSession), call: script(lost, replayed)}
			c, stop := dial(r, s)
			defer stop()
			_, resp, err := book(r, c, "book")
			r.require("answered", err == nil, "%v", err)
			calls := s.toolCalls()
			r.require("two deliveries", len(calls) == 2, "%d tools/call POSTs", len(calls))
			r.must("same bytes, same id, same session", bytes.Equal(calls[0].body, calls[1].body) && calls[0].session == calls[1].session,
				"first %s on %s, resend %s on %s", calls[0].body, calls[0].session, calls[1].body, calls[1].session)
			r.must("Response.Replayed", resp.Replayed, "not reported as a replay")
		},
	},
	{
		name: "undeclared-safe-reissue",
		doc: `No declaration: a lost tools/call of the read-only tool "look" (listed first) is
re-issued under a new id (§9.1, the core's rule), never resent under the old one.`,
		revs: bothRevisions,
		fn: func(r *run, rev string) {
			s := &scripted{rev: rev, decl: declare(""), call: script(lost, booked)}
			c, stop := dial(r, s)
			defer stop()
			if _, err := c.ListToolsPage(r.ctx, ""); err != nil {
				r.abort("tools/list: %v", err)
			}
			_, _, err := book(r, c, "look")
			r.must("answered", err == nil, "%v", err)
			calls := s.toolCalls()
			r.require("two deliveries", len(calls) == 2, "%d tools/call POSTs", len(calls))
			r.must("new id", calls[0].id != calls[1].id, "resent under the old id %s without receipts", calls[0].id)
		},
	},
	{
		name: "undeclared-unsafe-unknown",
		doc: `No declaration: a lost tools/call of "book" (no annotations) ends in ErrOutcomeUnknown
after one delivery: no resend under the id, no re-issue.`,
		revs: bothRevisions,
		fn: func(r *run, rev string) {
			s := &scripted{rev: rev, decl: declare(""), call: script(lost, booked)}
			c, stop := dial(r, s)
			defer stop()
			_, _, err := book(r, c, "book")
			r.must("ErrOutcomeUnknown", errors.Is(err, mcpclient.ErrOutcomeUnknown), "%v", err)
			r.must("one delivery", len(s.toolCalls()) == 1, "%d tools/call POSTs", len(s.toolCalls()))
		},
	},
	{
		name: "in-doubt",
		doc: `Scope process: the first tools/call is lost, the resend is answered -31000
MCP_RECEIPT_IN_DOUBT: ErrOutcomeUnknown, and nothing more is sent (§9.2).`,
		revs: bothRevisions,
		fn: func(r *run, rev string) {
			s := &scripted{rev: rev, decl: declare(declProcess), call: script(lost, inDoubt, booked)}
			c, stop := dial(r, s)
			defer stop()
			_, _, err := book(r, c, "book")
			r.must("ErrOutcomeUnknown", errors.Is(err, mcpclient.ErrOutcomeUnknown), "%v", err)
			var rpc *mcpclient.RPCError
			r.must("the in-doubt answer in the chain", errors.As(err, &rpc) && rpc.ReceiptInDoubt(), "%v", err)
			r.must("no further attempt", len(s.toolCalls()) == 2, "%d tools/call POSTs", len(s.toolCalls()))
		},
	},
	{
		name: "id-reused",
		doc: `Scope process: a tools/call answered 409 MCP_REQUEST_ID_REUSED, first or on a resend
after a lost answer, stops the call with ErrRequestIDReused: the id is never sent again, and
nothing is re-issued (§9.2).`,
		revs: bothRevisions,
		fn: func(r *run, rev string) {
			for _, c := range []struct {
				what    string
				answers []answer
			}{{"first", []answer{reused, booked}}, {"on a resend", []answer{lost, reused, booked}}} {
				s := &scripted{rev: rev, decl: declare(declProcess), call: script(c.answers...)}
				cl, stop := dial(r, s)
				_, _, err := book(r, cl, "book")
				stop()
				want := len(c.answers) - 1
				r.must("ErrRequestIDReused "+c.what, errors.Is(err, mcpclient.ErrRequestIDReused), "%v", err)
				r.must("hard stop "+c.what, len(s.toolCalls()) == want, "%d tools/call POSTs, want %d", len(s.toolCalls()), want)
			}
		},
	},
	{
		name: "in-flight-no-reissue",
		doc: `Scope process: the first tools/call is lost, the resend is refused 409
MCP_REQUEST_IN_FLIGHT: the client may resend the same bytes later, but never re-issues the
request under a new id (§9.2).`,
		revs: bothRevisions,
		fn: func(r *run, rev string) {
			s := &scripted{rev: rev, decl: declare(declProcess), call: script(lost, inFlight, booked)}
			c, stop := dial(r, s)
			defer stop()
			book(r, c, "book")
			calls := s.toolCalls()
			for _, p := range calls[1:] {
				r.must("no new id", p.id == calls[0].id, "re-issued as %s after %s was in flight", p.id, calls[0].id)
			}
			r.must("the refusal was received", len(calls) >= 2, "%d tools/call POSTs", len(calls))
		},
	},
	{
		name: "unmarked-conflict-on-resend",
		doc: `Scope process: the first tools/call is lost, and the resend is refused 409 -32600
without any of the extension's markers (an intermediary refusing a duplicate): not an outcome;
the client ends the call without re-issuing it, and should report the outcome unknown (§9.2
says so, without a MUST).`,
		revs: bothRevisions,
		fn: func(r *run, rev string) {
			s := &scripted{rev: rev, decl: declare(declProcess), call: script(lost, unmarked409, booked)}
			c, stop := dial(r, s)
			defer stop()
			_, _, err := book(r, c, "book")
			// The table of §9.2 says so without a MUST: a warning, not a failure.
			r.should("reported as outcome unknown", errors.Is(err, mcpclient.ErrOutcomeUnknown), "%v", err)
			r.must("the call ends without an answer", err != nil, "answered after an unmarked conflict")
			r.must("no re-issue", allSameID(s.toolCalls()), "re-issued under a new id")
		},
	},
	{
		name: "replay-flag",
		doc: `A result carrying the replay marker (result._meta flag and Mcp-Receipt-Replay: 1) is
returned with Response.Replayed; an unmarked one without it. A marker in the header alone may
count too (§9.2: the client MAY tell the caller): reported as a warning when it does not.`,
		revs: bothRevisions,
		fn: func(r *run, rev string) {
			headerOnly := replayed
			headerOnly.body = booked.body
			s := &scripted{rev: rev, decl: declare(declProcess), call: script(replayed, booked, headerOnly)}
			c, stop := dial(r, s)
			defer stop()
			_, resp, err := book(r, c, "book")
			r.require("answered", err == nil, "%v", err)
			r.must("marked → Replayed", resp.Replayed, "Replayed false for a marked result")
			_, resp, err = book(r, c, "book")
			r.must("unmarked → not Replayed", err == nil && !resp.Replayed, "Replayed %v, %v", resp.Replayed, err)
			_, resp, err = book(r, c, "book")
			r.should("header alone → Replayed (MAY)", err == nil && resp.Replayed, "Replayed false with Mcp-Receipt-Replay: 1 and no _meta flag")
		},
	},
	{
		name: "epoch-changed",
		doc: `Scope process, epoch epoch-1: the first tools/call is lost and the server restarts
(session revision: the session answers 404 from then on, the new initialize declares epoch-2;
2026-07-28: server/discover declares epoch-2): the receipts are gone, so the client does not
resend the id and returns ErrOutcomeUnknown (§9.1).`,
		revs: bothRevisions,
		fn: func(r *run, rev string) {
			s := &scripted{rev: rev, deadSession: true, call: script(lost, booked),
				decl: func(n int) string {
					return strings.Replace(declProcess, "epoch-1", "epoch-"+strconv.Itoa(min(n, 2)), 1)
				}}
			c, stop := dial(r, s)
			defer stop()
			_, _, err := book(r, c, "book")
			r.must("ErrOutcomeUnknown", errors.Is(err, mcpclient.ErrOutcomeUnknown), "%v", err)
			calls := s.toolCalls()
			for _, p := range calls[1:] {
				r.must("the id not sent under the new epoch", p.session == calls[0].session, "resent on session %s of the new epoch", p.session)
			}
			r.must("the server was asked", len(calls) >= 1, "no tools/call")
		},
	},
	{
		name: "epoch-unchanged",
		doc: `As epoch-changed, but the new initialize (or server/discover) declares epoch-1 again:
the receipts survived, and the client resends the same bytes under the same id.`,
		revs: bothRevisions,
		fn: func(r *run, rev string) {
			s := &scripted{rev: rev, deadSession: true, decl: declare(declProcess), call: script(lost, replayed)}
			c, stop := dial(r, s)
			defer stop()
			_, resp, err := book(r, c, "book")
			r.require("answered", err == nil, "%v", err)
			calls := s.toolCalls()
			last := calls[len(calls)-1]
			r.must("same bytes, same id", bytes.Equal(calls[0].body, last.body), "first %s\nlast %s", calls[0].body, last.body)
			if rev == revSession {
				r.must("on the new session", last.session != calls[0].session, "answered on the dead session %s", last.session)
			}
			r.must("Response.Replayed", resp.Replayed, "not reported as a replay")
		},
	},
	{
		name: "retention-lapsed",
		doc: `Scope process with retentionMs 100: the first tools/call is lost 300 ms after it was
sent, so its receipt may already be pruned when a resend could arrive: the client does not
resend the id and returns ErrOutcomeUnknown (§9.1 condition 3).`,
		revs: bothRevisions,
		fn: func(r *run, rev string) {
			slowLoss := lost
			slowLoss.delay = 300 * time.Millisecond
			s := &scripted{rev: rev, decl: declare(`{"scope":"process","epoch":"epoch-1","retentionMs":100}`), call: script(slowLoss, replayed)}
			c, stop := dial(r, s)
			defer stop()
			_, _, err := book(r, c, "book")
			r.must("ErrOutcomeUnknown", errors.Is(err, mcpclient.ErrOutcomeUnknown), "%v", err)
			r.must("one delivery", len(s.toolCalls()) == 1, "%d tools/call POSTs: resent after the retention", len(s.toolCalls()))
		},
	},
}

// discoverBetween reports whether a server/discover came between the first two tools/calls.
func discoverBetween(posts []posted) bool {
	calls := 0
	for _, p := range posts {
		switch p.method {
		case "tools/call":
			calls++
			if calls == 2 {
				return false
			}
		case "server/discover":
			if calls == 1 {
				return true
			}
		}
	}
	return false
}

func allSameID(calls []posted) bool {
	for _, p := range calls {
		if p.id != calls[0].id {
			return false
		}
	}
	return true
}

// clientJobs returns the runs of every client scenario, named client:SCENARIO@REVISION.
func clientJobs() []job {
	var jobs []job
	for _, s := range clientScenarios {
		for _, rev := range s.revs {
			jobs = append(jobs, job{
				name:    fmt.Sprintf("client:%s@%s", s.name, rev),
				timeout: 15 * time.Second,
				fn:      func(r *run) { s.fn(r, rev) },
			})
		}
	}
	return jobs
}
