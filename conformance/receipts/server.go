package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/northstar-mcp/mcpclient/receipts"
)

// A serverScenario checks one rule of docs/request-receipts.md against a server, at each
// revision in revs that the server speaks. Every request it sends is written by hand, and every
// resend is the same bytes.
type serverScenario struct {
	name string
	// doc says what the scenario sends and checks, and which fixtures it calls.
	doc  string
	revs []string
	fn   func(r *run, url, rev string)
}

var bothRevisions = []string{revSession, revStateless}

// optInOf is how a scenario's requests opt in by default at rev: as this module's client does.
func optInOf(rev string) optIn {
	if rev == revStateless {
		return optMeta
	}
	return optSession
}

// openOpted opens a peer whose requests opt in as this module's client's do, skipping the run if
// the server declares no receipts.
func openOpted(r *run, url, rev string) *peer { return open(r, url, rev, optInOf(rev), "", true) }

var serverScenarios = []serverScenario{
	{
		name: "declaration",
		doc: `The server declares the extension in capabilities.extensions of initialize (session
revision) and server/discover (2026-07-28) with valid members (§5): scope one of session, process,
store (not session in server/discover); a non-empty string epoch for process and store, the same
on every read; retentionMs and maxReceipts positive integers when present; disconnect continue
or cancel when present.`,
		revs: bothRevisions,
		fn:   scenarioDeclaration,
	},
	{
		name: "not-opted-in-passes-through",
		doc: `A request that did not opt in (no extension in initialize or _meta, no header) passes
through (§6.4): the same bytes under the same id run receipts_count again, unmarked, and other
bytes under that id run too.`,
		revs: bothRevisions,
		fn:   scenarioPassThrough,
	},
	{
		name: "replay-session-opt-in",
		doc: `Opted in by the session's initialize (§6.2), no header: a resend of the same
receipts_count bytes under the same id gets the same response, marked (result._meta flag and
Mcp-Receipt-Replay: 1, §8.3), and the tool does not run again; the first answer is unmarked.`,
		revs: []string{revSession},
		fn:   func(r *run, url, rev string) { replay(r, open(r, url, rev, optSession, "", true)) },
	},
	{
		name: "replay-header-opt-in",
		doc: `Opted in by Mcp-Request-Receipts: 1 alone, on a session whose initialize did not declare
the extension (§6.3): replayed as replay-session-opt-in.`,
		revs: []string{revSession},
		fn:   func(r *run, url, rev string) { replay(r, open(r, url, rev, optHeader, "", true)) },
	},
	{
		name: "replay-meta-opt-in",
		doc: `Opted in by the request's _meta client capabilities and the header, as the client
sends them (§6.1, §6.3): replayed as replay-session-opt-in.`,
		revs: []string{revStateless},
		fn:   func(r *run, url, rev string) { replay(r, open(r, url, rev, optMeta, "", true)) },
	},
	{
		name: "replay-meta-only",
		doc: `Opted in by _meta without the header: in 2026-07-28 the body decides (§6.3), so the
request has opted in and is replayed. A server may refuse the header's absence (SHOULD, 400
-32020); then the scenario is skipped.`,
		revs: []string{revStateless},
		fn: func(r *run, url, rev string) {
			p := open(r, url, rev, optMetaOnly, "", true)
			_, args := newKey()
			if first := p.send(p.toolCall(newID(), toolCount, args)); first.status == http.StatusBadRequest && first.errCode() == -32020 {
				r.skip("the server refuses an opt-in in _meta without the header")
			}
			replay(r, p)
		},
	},
	{
		name: "header-without-body-opt-in",
		doc: `2026-07-28, Mcp-Request-Receipts: 1 on a receipts_count whose _meta does not opt in:
the body decides, so the request did not opt in (§6.3). The server SHOULD refuse it with 400
-32020; if it runs it, a resend of the same bytes runs again, unmarked (§6.4).`,
		revs: []string{revStateless},
		fn:   scenarioHeaderWithoutBody,
	},
	{
		name: "reused-id",
		doc: `Same id, other bytes (receipts_count with another key) after a settled receipt: HTTP
409, error.code -32600, error.data.code MCP_REQUEST_ID_REUSED (§8.5); the other request does not
run, and the receipt is unchanged (the original bytes are still replayed).`,
		revs: bothRevisions,
		fn:   scenarioReused,
	},
	{
		name: "fingerprint-raw-bytes",
		doc: `The fingerprint is of the bytes as received (§7.3): the same request with one more
space, equal as JSON, under the same id is other bytes: refused as MCP_REQUEST_ID_REUSED, not
replayed and not run.`,
		revs: bothRevisions,
		fn:   scenarioRawBytes,
	},
	{
		name: "key-is-id-text",
		doc: `The key holds the id's JSON text (§7.2): 7 and "7" are two keys, so a receipts_count under
the number and another under the string both run.`,
		revs: bothRevisions,
		fn:   scenarioIDText,
	},
	{
		name: "resend-while-running",
		doc: `A resend of a receipts_slow (800 ms) while it runs waits for it (§8.4) and gets its
response, marked as a replay; the tool runs once.`,
		revs: bothRevisions,
		fn:   scenarioInFlight,
	},
	{
		name: "principal-separation",
		doc: `Receipts are kept per principal (§7, §11): with bearer JWTs of subjects alice, bob and
carol (unsigned: the server must accept them, or let the scenario be run with --url against a
server that does not check them), the bytes alice sent under an id run again for bob, unmarked;
carol's other bytes under that id run, not refused; a refreshed token of alice (another jti)
gets alice's receipt (SHOULD: principal = issuer and subject, never the token).`,
		revs: bothRevisions,
		fn:   scenarioPrincipals,
	},
	{
		name: "failed-before-execution",
		doc: `A request refused before it ran keeps no receipt (§8.7): after a malformed body, a
request on an unknown session (session revision), a header mismatch (2026-07-28, Mcp-Name naming
another tool) and an unknown method, each under its id, a receipts_count under the same id runs.
Refusals answered with a 2xx JSON-RPC error may be kept (MAY): those are only reported.`,
		revs: bothRevisions,
		fn:   scenarioFailedBefore,
	},
	{
		name: "error-outcome-replayed",
		doc: `A JSON-RPC error the tool produced (receipts_fail) is an outcome: a resend gets it
unchanged, error.data untouched and no _meta added, with Mcp-Receipt-Replay: 1 (§8.2, §8.3); the
tool runs once.`,
		revs: bothRevisions,
		fn:   scenarioErrorOutcome,
	},
	{
		name: "sse-replay",
		doc: `A server that answers receipts_count with an event stream (Accept names both) keeps
the response its event carried (§10.2): a resend gets it, marked. Skipped when the server answers
with JSON.`,
		revs: bothRevisions,
		fn:   scenarioSSE,
	},
	{
		name: "disconnect-continue",
		doc: `With disconnect "continue" (declared or by default, §5.3) a receipts_slow (800 ms) whose
client disconnects after 150 ms runs to its end, and a resend collects the real result, marked;
it ran once. With "cancel", the resend gets the stored outcome and the tool never runs again.`,
		revs: bothRevisions,
		fn:   scenarioDisconnect,
	},
	{
		name: "never-receipted-methods",
		doc: `ping (session revision) and server/discover (2026-07-28) get no receipt even when opted
in (§6.5): the same bytes under the same id are answered again, never marked as a replay nor
refused.`,
		revs: bothRevisions,
		fn:   scenarioNeverReceipted,
	},
}

func scenarioDeclaration(r *run, url, rev string) {
	p := open(r, url, rev, optInOf(rev), "", false)
	r.require("declared", p.decl != nil, "capabilities.extensions has no %q: %s", receipts.ExtensionID, p.opening)
	var d map[string]json.RawMessage
	r.require("declaration is an object", json.Unmarshal(p.decl, &d) == nil, "%s", p.decl)
	var scope string
	json.Unmarshal(d["scope"], &scope)
	r.must("scope valid", scope == "session" || scope == "process" || scope == "store", "scope %s", d["scope"])
	if rev == revStateless {
		r.must("no session scope in server/discover", scope != "session", "scope session declared in server/discover (§5.1)")
	}
	var epoch string
	if scope == "process" || scope == "store" {
		r.must("epoch for process and store", json.Unmarshal(d["epoch"], &epoch) == nil && epoch != "", "epoch %s", d["epoch"])
		r.should("epoch at most 128 characters", len(epoch) <= 128, "%d characters", len(epoch))
		again := open(r, url, rev, optInOf(rev), "", false)
		var d2 struct {
			Epoch string `json:"epoch"`
		}
		json.Unmarshal(again.decl, &d2)
		r.must("epoch stable", d2.Epoch == epoch, "epoch %q, then %q on a new read", epoch, d2.Epoch)
	}
	positive := func(name string) {
		raw, ok := d[name]
		if !ok {
			return
		}
		n, err := strconv.ParseInt(string(raw), 10, 64)
		r.must(name+" positive integer", err == nil && n > 0, "%s %s", name, raw)
	}
	positive("retentionMs")
	positive("maxReceipts")
	if raw, ok := d["disconnect"]; ok {
		var v string
		json.Unmarshal(raw, &v)
		r.must("disconnect valid", v == "continue" || v == "cancel", "disconnect %s", raw)
	}
}

func scenarioPassThrough(r *run, url, rev string) {
	p := open(r, url, rev, optNone, "", false)
	key, args := newKey()
	c := p.toolCall(newID(), toolCount, args)
	first := p.send(c)
	r.require("first runs", first.runs() == 1, "%s", first)
	r.must("first unmarked", !first.marked(), "%s", first)
	again := p.send(c)
	r.must("resend runs again", again.runs() == 2, "%s", again)
	r.must("resend unmarked", !again.marked(), "marked as a replay: %s", again)
	_, args2 := newKey()
	other := p.send(p.toolCall(c.id, toolCount, args2))
	r.must("other bytes under the id run", other.runs() == 1 && other.status == http.StatusOK, "%s", other)
	r.must("tool ran twice", p.runsOf(key) == 2, "receipts_runs says %d", p.runsOf(key))
}

// replay checks that a resend of the same bytes is answered from the receipt.
func replay(r *run, p *peer) {
	key, args := newKey()
	c := p.toolCall(newID(), toolCount, args)
	first := p.send(c)
	r.require("first runs", first.err == nil && first.runs() == 1, "%s", first)
	r.must("first unmarked", !first.marked(), "the delivery that ran is marked as a replay: %s", first)
	again := p.send(c)
	r.require("resend answered", again.err == nil && again.msg.Result != nil, "%s", again)
	r.must("resend status 200", again.status == http.StatusOK, "%s", again)
	r.must("resend result._meta flag", again.replayMeta(), "no %s: true in result._meta: %s", receipts.ReplayMetaKey, again)
	r.must("resend Mcp-Receipt-Replay header", again.replayHeader(), "no %s: 1 header: %s", receipts.HeaderReplay, again)
	r.must("resend same response", withoutMarker(again.msg.Result) == withoutMarker(first.msg.Result) && sameID(again.msg.ID, c.id),
		"first %s, resend %s", first.raw, again.raw)
	r.must("tool not run again", p.runsOf(key) == 1, "receipts_runs says %d", p.runsOf(key))
	if !again.sse {
		r.should("replay is application/json", strings.HasPrefix(again.header.Get("Content-Type"), "application/json"), "Content-Type %q", again.header.Get("Content-Type"))
	}
}

func scenarioHeaderWithoutBody(r *run, url, rev string) {
	p := open(r, url, rev, optNone, "", true)
	key, args := newKey()
	c := p.toolCall(newID(), toolCount, args)
	c.header.Set(receipts.HeaderOptIn, "1")
	first := p.send(c)
	refused := first.status == http.StatusBadRequest && first.errCode() == -32020
	r.should("refused as a header mismatch", refused, "%s", first)
	if refused {
		r.must("refusal ran nothing", p.runsOf(key) == 0, "receipts_runs says %d", p.runsOf(key))
		return
	}
	again := p.send(c)
	r.must("resend runs again", again.runs() == 2, "%s", again)
	r.must("resend unmarked", !again.marked(), "replayed, though the body did not opt in: %s", again)
}

func scenarioReused(r *run, url, rev string) {
	p := openOpted(r, url, rev)
	key, args := newKey()
	c := p.toolCall(newID(), toolCount, args)
	first := p.send(c)
	r.require("first runs", first.runs() == 1, "%s", first)
	key2, args2 := newKey()
	other := p.send(p.toolCall(c.id, toolCount, args2))
	checkReused(r, other, c.id)
	r.must("other bytes not run", p.runsOf(key2) == 0, "receipts_runs says %d", p.runsOf(key2))
	again := p.send(c)
	r.must("receipt unchanged", again.runs() == 1 && again.marked(), "resend of the original: %s", again)
	r.must("original ran once", p.runsOf(key) == 1, "receipts_runs says %d", p.runsOf(key))
}

// checkReused checks a refusal as MCP_REQUEST_ID_REUSED of a request under id.
func checkReused(r *run, rep *reply, id string) {
	r.must("HTTP 409", rep.status == http.StatusConflict, "%s", rep)
	r.must("error -32600", rep.errCode() == receipts.RPCInvalidRequest, "%s", rep)
	r.must("data.code MCP_REQUEST_ID_REUSED", rep.dataCode() == receipts.CodeIDReused, "%s", rep)
	r.must("refusal under the request's id", sameID(rep.msg.ID, id), "%s", rep)
}

func scenarioRawBytes(r *run, url, rev string) {
	p := openOpted(r, url, rev)
	key, args := newKey()
	c := p.toolCall(newID(), toolCount, args)
	first := p.send(c)
	r.require("first runs", first.runs() == 1, "%s", first)
	spaced := c
	spaced.body = []byte(strings.Replace(string(c.body), `"arguments":`, `"arguments": `, 1))
	again := p.send(spaced)
	r.must("not replayed", !again.marked(), "equal JSON in other bytes replayed: %s", again)
	checkReused(r, again, c.id)
	r.must("not run", p.runsOf(key) == 1, "receipts_runs says %d", p.runsOf(key))
}

func scenarioIDText(r *run, url, rev string) {
	p := openOpted(r, url, rev)
	n := strconv.FormatInt(time.Now().UnixNano()%1e12, 10)
	_, args := newKey()
	num := p.send(p.toolCall(n, toolCount, args))
	r.require("number id runs", num.runs() == 1, "%s", num)
	_, args2 := newKey()
	str := p.send(p.toolCall(strconv.Quote(n), toolCount, args2))
	r.must("string id is another key", str.runs() == 1 && str.status == http.StatusOK && !str.marked(), "%s", str)
}

func scenarioInFlight(r *run, url, rev string) {
	p := openOpted(r, url, rev)
	key, _ := newKey()
	c := p.toolCall(newID(), toolSlow, `{"key":"`+key+`","ms":800}`)
	var first *reply
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		first = p.send(c)
	}()
	time.Sleep(150 * time.Millisecond)
	again := p.send(c)
	wg.Wait()
	// The sleep only makes it likely that the first send reaches the server first: on a loaded
	// machine the resend may overtake it, and then the first send is the one that waits. The
	// delivery that ran is the original, whichever it was.
	if first.marked() && !again.marked() {
		first, again = again, first
	}
	r.require("first runs", first.runs() == 1, "%s", first)
	r.must("original unmarked", !first.marked(), "both deliveries came back marked as replays: %s", first)
	r.must("resend waits and gets the response", again.runs() == 1 && again.status == http.StatusOK, "%s", again)
	r.must("resend marked", again.replayMeta() && again.replayHeader(), "%s", again)
	r.must("tool ran once", p.runsOf(key) == 1, "receipts_runs says %d", p.runsOf(key))
}

func scenarioPrincipals(r *run, url, rev string) {
	const iss = "https://issuer.receipts-conformance.example"
	alice := open(r, url, rev, optInOf(rev), jwt(iss, "alice"), true)
	bob := open(r, url, rev, optInOf(rev), jwt(iss, "bob"), true)
	carol := open(r, url, rev, optInOf(rev), jwt(iss, "carol"), true)
	key, args := newKey()
	c := alice.toolCall(newID(), toolCount, args)
	first := alice.send(c)
	r.require("alice runs", first.runs() == 1, "%s", first)
	// Bob's request is alice's, byte for byte, on bob's own connection.
	bc := bob.toolCall(c.id, toolCount, args)
	r.require("same bytes", string(bc.body) == string(c.body), "the scenario built other bytes for bob")
	b := bob.send(bc)
	r.must("bob's delivery runs", b.runs() == 2 && b.status == http.StatusOK, "%s", b)
	r.must("bob gets no replay", !b.marked(), "alice's receipt answered bob: %s", b)
	r.must("ran once for each", alice.runsOf(key) == 2, "receipts_runs says %d", alice.runsOf(key))
	_, args2 := newKey()
	cr := carol.send(carol.toolCall(c.id, toolCount, args2))
	r.must("carol's other bytes run", cr.runs() == 1 && cr.status == http.StatusOK, "a conflict across principals: %s", cr)
	refreshed := *alice
	refreshed.token = jwt(iss, "alice")
	rc := c
	rc.header = c.header.Clone()
	rc.header.Set("Authorization", "Bearer "+refreshed.token)
	again := refreshed.send(rc)
	r.should("refreshed token of the same subject replays", again.marked() && again.runs() == 1, "%s", again)
}

func scenarioFailedBefore(r *run, url, rev string) {
	p := openOpted(r, url, rev)
	// runsUnder checks that a receipts_count under id runs.
	runsUnder := func(what string, refusal *reply, id string) {
		_, args := newKey()
		after := p.send(p.toolCall(id, toolCount, args))
		ok := after.runs() == 1 && after.status == http.StatusOK && !after.marked()
		if refusal.status >= 200 && refusal.status < 300 && !ok {
			r.should("no receipt after "+what, false, "kept (allowed for a 2xx refusal): refused with %s, then %s", refusal, after)
			return
		}
		r.must("no receipt after "+what, ok, "refused with %s, then %s", refusal, after)
	}

	id := newID()
	malformed := p.request(id, "tools/call", toolCount, `"name":"receipts_count","arguments":{"key":`)
	malformed.body = malformed.body[:len(malformed.body)-3]
	rep := p.send(malformed)
	r.must("malformed body refused", rep.status >= 400 || rep.msg.Error != nil, "%s", rep)
	runsUnder("a malformed body", rep, id)

	if rev == revSession {
		id = newID()
		q := *p
		q.session = "receipts-conformance-unknown-session"
		_, args := newKey()
		c := q.toolCall(id, toolCount, args)
		c.header.Set(receipts.HeaderOptIn, "1")
		rep = q.send(c)
		r.must("unknown session refused", rep.status == http.StatusNotFound || rep.status == http.StatusBadRequest, "%s", rep)
		runsUnder("an unknown session", rep, id)
	} else {
		id = newID()
		key, args := newKey()
		c := p.toolCall(id, toolCount, args)
		c.header.Set("Mcp-Name", toolRuns)
		rep = p.send(c)
		r.must("header mismatch refused", rep.status == http.StatusBadRequest, "%s", rep)
		r.must("header mismatch ran nothing", p.runsOf(key) == 0, "receipts_runs says %d", p.runsOf(key))
		runsUnder("a header mismatch", rep, id)
	}

	id = newID()
	rep = p.send(p.request(id, "receipts/unknown", "", ""))
	r.must("unknown method refused", rep.errCode() == -32601, "%s", rep)
	runsUnder("an unknown method", rep, id)
}

func scenarioErrorOutcome(r *run, url, rev string) {
	p := openOpted(r, url, rev)
	key, args := newKey()
	c := p.toolCall(newID(), toolFail, args)
	first := p.send(c)
	r.require("first fails with the tool's error", first.errCode() == -32000 && first.runs() == 1, "%s", first)
	again := p.send(c)
	r.must("resend gets the error", again.errCode() == -32000 && again.runs() == 1, "%s", again)
	r.must("error unchanged", string(again.raw) == string(first.raw) || sameJSON(again.raw, first.raw), "first %s, resend %s", first.raw, again.raw)
	r.must("Mcp-Receipt-Replay header", again.replayHeader(), "%s", again)
	r.must("tool ran once", p.runsOf(key) == 1, "receipts_runs says %d", p.runsOf(key))
}

func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func scenarioSSE(r *run, url, rev string) {
	p := openOpted(r, url, rev)
	key, args := newKey()
	c := p.toolCall(newID(), toolCount, args)
	first := p.send(c)
	if first.err == nil && !first.sse {
		r.skip("the server answered with JSON")
	}
	r.require("first runs", first.runs() == 1, "%s", first)
	again := p.send(c)
	r.must("resend replayed", again.runs() == 1 && again.replayMeta() && again.replayHeader(), "%s", again)
	r.must("tool ran once", p.runsOf(key) == 1, "receipts_runs says %d", p.runsOf(key))
}

func scenarioDisconnect(r *run, url, rev string) {
	p := openOpted(r, url, rev)
	var d struct {
		Disconnect string `json:"disconnect"`
	}
	json.Unmarshal(p.decl, &d)
	key, _ := newKey()
	c := p.toolCall(newID(), toolSlow, `{"key":"`+key+`","ms":800}`)
	ctx, cancel := context.WithTimeout(r.ctx, 150*time.Millisecond)
	gone := p.postCtx(ctx, c.body, c.header, c.id)
	cancel()
	r.require("the client left before the answer", gone.err != nil, "answered within 150 ms: %s", gone)
	time.Sleep(50 * time.Millisecond)
	again := p.send(c)
	if d.Disconnect == "cancel" {
		r.must("resend gets the stored outcome", again.marked() || again.msg.Error != nil, "%s", again)
		r.must("never run again", p.runsOf(key) <= 1, "receipts_runs says %d", p.runsOf(key))
		return
	}
	r.must("resend gets the real result", again.runs() == 1 && again.msg.Result != nil, "%s", again)
	r.must("resend marked", again.replayMeta() && again.replayHeader(), "%s", again)
	r.must("tool ran once", p.runsOf(key) == 1, "receipts_runs says %d", p.runsOf(key))
}

func scenarioNeverReceipted(r *run, url, rev string) {
	p := openOpted(r, url, rev)
	var c call
	if rev == revStateless {
		c = p.request(newID(), "server/discover", "", "")
	} else {
		c = p.request(newID(), "ping", "", "")
		c.header.Set(receipts.HeaderOptIn, "1")
	}
	method := map[bool]string{true: "server/discover", false: "ping"}[rev == revStateless]
	first := p.send(c)
	r.require(method+" answered", first.msg.Result != nil, "%s", first)
	again := p.send(c)
	r.must(method+" answered again", again.msg.Result != nil && again.status == http.StatusOK, "%s", again)
	r.must(method+" not marked", !again.marked(), "%s", again)
}

// serverJobs returns the runs of every server scenario against url, named
// server:NAME/SCENARIO@REVISION.
func serverJobs(name, url string) []job {
	var jobs []job
	for _, s := range serverScenarios {
		for _, rev := range s.revs {
			jobs = append(jobs, job{
				name:    fmt.Sprintf("server:%s/%s@%s", name, s.name, rev),
				timeout: 15 * time.Second,
				fn:      func(r *run) { s.fn(r, url, rev) },
			})
		}
	}
	return jobs
}
