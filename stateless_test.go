package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/metakeys"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// result is the member of a JSON-RPC answer carrying r.
func result(r string) string { return `"result":` + r }

func TestStatelessSessionCarriesMetaAndHeaders(t *testing.T) {
	t.Parallel()
	s := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		switch r.Method {
		case "tools/list":
			r.Reply(200, result(`{"resultType":"complete","tools":[{"name":"add","inputSchema":{"type":"object"}}]}`))
			return true
		case "tools/call":
			r.Reply(200, result(`{"resultType":"complete","content":[{"type":"text","text":"3"}]}`))
			return true
		}
		return false
	}, testpeer.Stateless())
	c := connect(t, &transport.HTTP{URL: s.URL}, mcpclient.WithElicitationHandler(func(context.Context, *mcpclient.ElicitParams) (*mcpclient.ElicitResult, error) {
		return &mcpclient.ElicitResult{Action: mcpclient.ElicitDecline}, nil
	}))
	if c.ProtocolVersion() != mcpclient.ProtocolVersion20260728 || c.ServerInfo().Name != "stateless" || c.SessionID() != "" {
		t.Fatalf("protocol %q, server %+v, session %q", c.ProtocolVersion(), c.ServerInfo(), c.SessionID())
	}
	ctx := context.Background()
	if _, err := c.CachedTools(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := c.CallTool(ctx, "add", map[string]int{"a": 1, "b": 2}); err != nil || res.Text() != "3" {
		t.Fatalf("%v %v", res, err)
	}
	c.Close()
	reqs := s.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests: want discover, list and call, and no notification, GET or DELETE", len(reqs))
	}
	for _, r := range reqs {
		m := r.Meta()
		var caps map[string]json.RawMessage
		json.Unmarshal(m[metakeys.ClientCapabilities], &caps)
		switch {
		case r.Header.Get("Mcp-Method") != r.Method:
			t.Errorf("%s: Mcp-Method %q", r.Method, r.Header.Get("Mcp-Method"))
		case r.Header.Get("Mcp-Protocol-Version") != "2026-07-28" || string(m[metakeys.ProtocolVersion]) != `"2026-07-28"`:
			t.Errorf("%s: version header %q, _meta %s", r.Method, r.Header.Get("Mcp-Protocol-Version"), m[metakeys.ProtocolVersion])
		case string(caps["elicitation"]) != `{"form":{}}`:
			t.Errorf("%s: clientCapabilities %s", r.Method, m[metakeys.ClientCapabilities])
		case len(m[metakeys.ClientInfo]) == 0:
			t.Errorf("%s: no clientInfo", r.Method)
		case r.Header.Get("Mcp-Session-Id") != "":
			t.Errorf("%s: echoed a session id", r.Method)
		}
	}
	if reqs[2].Header.Get("Mcp-Name") != "add" {
		t.Errorf("tools/call Mcp-Name %q", reqs[2].Header.Get("Mcp-Name"))
	}
}

func TestStatelessVersionRefusalIsRetriedInTheNamedRevision(t *testing.T) {
	t.Parallel()
	var refused sync.Once
	s := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		if r.Method == "tools/call" {
			first := false
			refused.Do(func() { first = true })
			if first {
				r.Reply(400, `"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"]}}`)
				return true
			}
			r.Reply(200, result(`{"content":[]}`))
			return true
		}
		return false
	}, testpeer.Stateless())
	c := connect(t, &transport.HTTP{URL: s.URL})
	req, err := c.NewRequest("tools/call", mcpclient.CallToolParams{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Request.ID() == req.ID() || resp.Request.Supersedes() != req.ID() {
		t.Errorf("the re-issue %v does not replace %v", resp.Request.ID(), req.ID())
	}
	if e, _ := c.Ledger().Lookup(req.ID()); e.State != mcpclient.StateFailed || e.SupersededBy != resp.Request.ID() {
		t.Errorf("ledger %+v", e)
	}
}

func TestStatelessRemovedMethodsAreRefusedLocally(t *testing.T) {
	t.Parallel()
	s := testpeer.NewHTTP(t, nil, testpeer.Stateless())
	c := connect(t, &transport.HTTP{URL: s.URL})
	before := len(s.Requests())
	for name, call := range map[string]func() error{
		"subscribe": func() error { return c.Subscribe(context.Background(), "file:///x") },
		"ping request": func() error {
			_, err := c.NewRequest("ping", nil)
			return err
		},
	} {
		if err := call(); !errors.Is(err, mcpclient.ErrMethodRemoved) || mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument {
			t.Errorf("%s: %v, want ErrMethodRemoved", name, err)
		}
	}
	if len(s.Requests()) != before {
		t.Error("a removed method was sent")
	}
}

func TestStatelessPingSendsDiscover(t *testing.T) {
	t.Parallel()
	s := testpeer.NewHTTP(t, nil, testpeer.Stateless())
	c := connect(t, &transport.HTTP{URL: s.URL})
	before := len(s.Requests())
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	reqs := s.Requests()[before:]
	if len(reqs) != 1 || reqs[0].Method != "server/discover" || reqs[0].Header.Get("Mcp-Method") != "server/discover" || len(reqs[0].Meta()) == 0 {
		t.Fatalf("Ping sent %+v, want one server/discover of the stateless revision", reqs)
	}
}

func TestStatelessMultiRoundTrip(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var rounds []testpeer.Received
	s := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		if r.Method != "tools/call" {
			return false
		}
		mu.Lock()
		rounds = append(rounds, r.Received)
		n := len(rounds)
		mu.Unlock()
		switch n {
		case 1:
			r.Reply(200, result(`{"resultType":"input_required","inputRequests":{"who":{"method":"elicitation/create","params":{"message":"name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string","default":"ada"},"age":{"type":"integer","default":30}}}}}},"requestState":"{\"n\":1}"}`))
			return true
		case 2:
			r.Reply(200, result(`{"resultType":"input_required","inputRequests":{"model":{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}}}}`))
			return true
		}
		r.Reply(200, result(`{"content":[{"type":"text","text":"done"}]}`))
		return true
	}, testpeer.Stateless())
	c := connect(t, &transport.HTTP{URL: s.URL},
		mcpclient.WithElicitationHandler(func(_ context.Context, p *mcpclient.ElicitParams) (*mcpclient.ElicitResult, error) {
			return &mcpclient.ElicitResult{Action: mcpclient.ElicitAccept, Content: map[string]any{"age": 31}}, nil
		}),
		mcpclient.WithSamplingHandler(func(context.Context, *mcpclient.CreateMessageParams) (*mcpclient.CreateMessageResult, error) {
			return &mcpclient.CreateMessageResult{Role: "assistant", Model: "m", Content: mcpclient.SamplingContent{mcpclient.TextContent("hi")}}, nil
		}))
	res, err := c.CallTool(context.Background(), "ask", map[string]string{"q": "x"})
	if err != nil || res.Text() != "done" {
		t.Fatalf("%v %v", res, err)
	}
	if len(rounds) != 3 {
		t.Fatalf("%d rounds", len(rounds))
	}
	ids := map[string]bool{}
	for _, r := range rounds {
		ids[string(r.ID)] = true
		if string(r.Param("arguments")) != `{"q":"x"}` {
			t.Errorf("round changed the arguments: %s", r.Param("arguments"))
		}
	}
	if len(ids) != 3 {
		t.Errorf("rounds reused ids: %v", ids)
	}
	if string(rounds[1].Param("requestState")) != `"{\"n\":1}"` {
		t.Errorf("requestState not echoed exactly: %s", rounds[1].Param("requestState"))
	}
	var answers map[string]mcpclient.ElicitResult
	json.Unmarshal(rounds[1].Param("inputResponses"), &answers)
	if answers["who"].Content["name"] != "ada" || answers["who"].Content["age"] != float64(31) {
		t.Errorf("elicitation answer %+v: defaults fill only what the handler left out", answers["who"])
	}
	if rounds[2].Param("requestState") != nil {
		t.Errorf("a round without requestState sent one: %s", rounds[2].Param("requestState"))
	}
	if len(rounds[2].Param("inputResponses")) == 0 || rounds[2].Header.Get("Mcp-Name") != "ask" {
		t.Errorf("third round %+v", rounds[2].Params)
	}
}

// TestStatelessURLElicitationInput: an input request for a URL-mode elicitation is checked as
// one sent as a request is. A URL no person should be sent to fails the call before the handler
// sees it and before another round is sent; a good one reaches the handler with its host, and
// the answer carries no content. Each request declares URL mode in its _meta.
func TestStatelessURLElicitationInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, host string }{
		{"https://auth.example.com/start?s=1", "auth.example.com"},
		{"javascript:alert(1)", ""},
		{"https://auth.example.com@evil.example/", ""},
		{"http://auth.example.com/start", ""},
	} {
		t.Run(tc.url, func(t *testing.T) {
			var mu sync.Mutex
			var rounds []testpeer.Received
			s := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
				if r.Method != "tools/call" {
					return false
				}
				mu.Lock()
				rounds = append(rounds, r.Received)
				n := len(rounds)
				mu.Unlock()
				if n == 1 {
					r.Reply(200, result(`{"resultType":"input_required","inputRequests":{"signin":{"method":"elicitation/create","params":`+
						`{"mode":"url","message":"sign in","url":"`+tc.url+`","elicitationId":"el-1"}}}}`))
					return true
				}
				r.Reply(200, result(`{"content":[{"type":"text","text":"signed in"}]}`))
				return true
			}, testpeer.Stateless())
			var seen []*mcpclient.URLElicitParams
			c := connect(t, &transport.HTTP{URL: s.URL}, mcpclient.WithURLElicitationHandler(func(_ context.Context, p *mcpclient.URLElicitParams) (*mcpclient.ElicitResult, error) {
				seen = append(seen, p)
				return &mcpclient.ElicitResult{Action: mcpclient.ElicitAccept, Content: map[string]any{"leak": "x"}}, nil
			}))
			res, err := c.CallTool(context.Background(), "t", nil)
			mu.Lock()
			defer mu.Unlock()
			var caps map[string]json.RawMessage
			json.Unmarshal(rounds[0].Meta()[metakeys.ClientCapabilities], &caps)
			if string(caps["elicitation"]) != `{"url":{}}` {
				t.Errorf("clientCapabilities %s, want elicitation in URL mode only", rounds[0].Meta()[metakeys.ClientCapabilities])
			}
			if tc.host == "" {
				var rpc *mcpclient.RPCError
				if err == nil || !errors.As(err, &rpc) || rpc.Code != mcpclient.RPCInvalidParams || len(seen) != 0 || len(rounds) != 1 {
					t.Errorf("got %v, %v after %d rounds, the handler called %d times; want the call to fail with -32602 after one round, no handler called",
						res, err, len(rounds), len(seen))
				}
				return
			}
			if err != nil || res.Text() != "signed in" || len(rounds) != 2 {
				t.Fatalf("got %v, %v after %d rounds", res, err, len(rounds))
			}
			if len(seen) != 1 || seen[0].Host != tc.host || seen[0].URL.String() != tc.url || seen[0].ElicitationID != "el-1" {
				t.Errorf("the handler saw %+v", seen)
			}
			var answers map[string]json.RawMessage
			json.Unmarshal(rounds[1].Param("inputResponses"), &answers)
			if string(answers["signin"]) != `{"action":"accept"}` {
				t.Errorf("inputResponses %s, want the action alone", rounds[1].Param("inputResponses"))
			}
		})
	}
}

func TestStatelessMultiRoundTripRefusals(t *testing.T) {
	t.Parallel()
	for name, reply := range map[string]string{
		"undeclared capability": `{"resultType":"input_required","inputRequests":{"r":{"method":"roots/list","params":{}}}}`,
		"unknown resultType":    `{"resultType":"task","content":[]}`,
		"endless rounds":        `{"resultType":"input_required","requestState":"again"}`,
	} {
		t.Run(name, func(t *testing.T) {
			s := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
				if r.Method == "tools/call" {
					r.Reply(200, result(reply))
					return true
				}
				return false
			}, testpeer.Stateless())
			c := connect(t, &transport.HTTP{URL: s.URL})
			_, err := c.CallTool(context.Background(), "t", nil)
			if mcpclient.CodeOf(err) != mcpclient.CodeProtocol {
				t.Fatalf("error %v, want a protocol error", err)
			}
		})
	}
}

// roundsServer answers each tools/call of a call with the answer for its round (1, 2, ...),
// and records the ids of the tools/call requests it received.
func roundsServer(t *testing.T, answer func(round int) (status int, body string)) (*testpeer.HTTP, func() []string) {
	var mu sync.Mutex
	var ids []string
	s := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		if r.Method != "tools/call" {
			return false
		}
		mu.Lock()
		ids = append(ids, string(r.ID))
		n := len(ids)
		mu.Unlock()
		r.Reply(answer(n))
		return true
	}, testpeer.Stateless())
	return s, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), ids...)
	}
}

const inputRequired = `{"resultType":"input_required","requestState":"more"}`

func TestStatelessCallOfMaxRoundsReturnsTheLastRoundsResult(t *testing.T) {
	t.Parallel()
	s, sent := roundsServer(t, func(round int) (int, string) {
		if round < mcpclient.MaxRounds {
			return 200, result(inputRequired)
		}
		return 200, result(`{"resultType":"complete","content":[{"type":"text","text":"booked"}]}`)
	})
	c := connect(t, &transport.HTTP{URL: s.URL})
	res, err := c.CallTool(context.Background(), "book", nil)
	if err != nil || res.Text() != "booked" {
		t.Fatalf("%v %v: the complete answer of the last permitted round is the call's result", res, err)
	}
	if n := len(sent()); n != mcpclient.MaxRounds {
		t.Errorf("%d requests, want %d", n, mcpclient.MaxRounds)
	}
}

func TestStatelessCallNeedingMoreRoundsStopsWithoutSendingAnother(t *testing.T) {
	t.Parallel()
	for name, last := range map[string]func() (int, string){
		"input required": func() (int, string) { return 200, result(inputRequired) },
		// A refusal that a re-issue in the named revision would mend, after rounds of input.
		"revision refused": func() (int, string) {
			return 400, `"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"]}}`
		},
	} {
		t.Run(name, func(t *testing.T) {
			s, sent := roundsServer(t, func(round int) (int, string) {
				if round < mcpclient.MaxRounds {
					return 200, result(inputRequired)
				}
				return last()
			})
			c := connect(t, &transport.HTTP{URL: s.URL})
			res, err := c.CallTool(context.Background(), "book", nil)
			ids := sent()
			if len(ids) != mcpclient.MaxRounds {
				t.Fatalf("%d requests sent, want %d and not one more", len(ids), mcpclient.MaxRounds)
			}
			var e *mcpclient.Error
			if res != nil || !errors.Is(err, mcpclient.ErrRoundLimit) || !errors.As(err, &e) {
				t.Fatalf("%v %v, want ErrRoundLimit", res, err)
			}
			if e.Request.ID().JSON() != ids[len(ids)-1] || e.Request == nil || e.Request.ID() != e.Request.ID() || e.Attempts != 1 {
				t.Errorf("error names %s (request %v, %d attempts), want the last request sent, %s", e.Request.ID().JSON(), e.Request, e.Attempts, ids[len(ids)-1])
			}
		})
	}
}

func TestStatelessHeaderMismatchRelistsTools(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	lists := 0
	s := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		switch r.Method {
		case "tools/list":
			mu.Lock()
			lists++
			mu.Unlock()
			r.Reply(200, result(`{"tools":[{"name":"geo","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}},`+
				`{"name":"bad","inputSchema":{"type":"object","properties":{"n":{"type":"number","x-mcp-header":"N"}}}}]}`))
			return true
		case "tools/call":
			if r.Header.Get("Mcp-Param-Region") != "eu" {
				r.Reply(400, `"error":{"code":-32020,"message":"Header mismatch"}`)
				return true
			}
			r.Reply(200, result(`{"content":[]}`))
			return true
		}
		return false
	}, testpeer.Stateless())
	c := connect(t, &transport.HTTP{URL: s.URL})
	// Not listed yet: the first call goes without the header, is refused, and goes again after
	// the client lists the tools.
	if _, err := c.CallTool(context.Background(), "geo", map[string]string{"region": "eu"}); err != nil {
		t.Fatal(err)
	}
	if lists != 1 {
		t.Errorf("%d listings, want 1", lists)
	}
	tools, err := c.CachedTools(context.Background())
	if err != nil || len(tools) != 1 || tools[0].Name != "geo" {
		t.Errorf("the tool with a number header should be left out: %v %v", tools, err)
	}
}

func TestStatelessHeaderMismatchWhoseRelistingFailsNamesTheCall(t *testing.T) {
	t.Parallel()
	for name, listing := range map[string]func() (int, string){
		"refused": func() (int, string) { return 200, `"error":{"code":-32603,"message":"listing broke"}` },
		// tools/list is re-issued after each uncertain attempt until the attempts run out.
		"lost": func() (int, string) { return 502, "" },
	} {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var callIDs []string
			s := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
				switch r.Method {
				case "tools/list":
					r.Reply(listing())
					return true
				case "tools/call":
					mu.Lock()
					callIDs = append(callIDs, string(r.ID))
					mu.Unlock()
					r.Reply(400, `"error":{"code":-32020,"message":"Header mismatch"}`)
					return true
				}
				return false
			}, testpeer.Stateless())
			c := connect(t, &transport.HTTP{URL: s.URL})
			_, err := c.CallTool(context.Background(), "geo", map[string]string{"region": "eu"})
			var e *mcpclient.Error
			var rpc *mcpclient.RPCError
			if !errors.As(err, &e) || !errors.As(err, &rpc) {
				t.Fatalf("error %v", err)
			}
			if len(callIDs) != 1 || e.Request.ID().JSON() != callIDs[0] || e.Request.Method() != "tools/call" || e.Attempts != 1 {
				t.Errorf("the error names %s (%s, %d attempts); want the refused call %v", e.Request.ID().JSON(), e.Request.Method(), e.Attempts, callIDs)
			}
			if e.Code != mcpclient.CodeServerError || rpc.Code != mcpclient.RPCHeaderMismatch || errors.Is(err, mcpclient.ErrOutcomeUnknown) {
				t.Errorf("error %v: want the call's definite refusal, whatever became of the listing", err)
			}
			if !strings.Contains(err.Error(), "tools/list") {
				t.Errorf("error %v does not say the listing failed", err)
			}
		})
	}
}

func TestStatelessCancellationClosesTheStream(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	s := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		if r.Method == "tools/call" {
			<-release
		}
		return false
	}, testpeer.Stateless())
	defer close(release)
	c := connect(t, &transport.HTTP{URL: s.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.CallTool(ctx, "slow", nil); !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("error %v", err)
	}
	for _, r := range s.Requests() {
		if r.Method == "notifications/cancelled" {
			t.Fatal("a stateless HTTP client cancels by closing the stream, not with a notification")
		}
	}
}

func TestDiscoverWithoutAnswerFallsBackToInitialize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// An older server that ignores server/discover entirely.
		srv := testpeer.NewPipe(t, func(_ *testpeer.Conn, m testpeer.Msg) bool {
			return m.Method == "server/discover"
		})
		start := time.Now()
		c, err := mcpclient.Connect(context.Background(), srv.Transport())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if c.ProtocolVersion() != mcpclient.LatestStatefulProtocolVersion || time.Since(start) != 5*time.Second {
			t.Errorf("protocol %q after %v", c.ProtocolVersion(), time.Since(start))
		}
	})
}

// What a client makes of an answer to server/discover that names no stateless revision it speaks:
// an older server, whose session opens with initialize, unless the client pinned a stateless
// revision, which the server then refuses, or the answer does not decode.
func TestDiscoverAnswersNamingNoStatelessRevision(t *testing.T) {
	for _, tc := range []struct {
		name, answer string
		pinned       bool
		want         string // the revision of the session, or "" for ErrUnsupportedVersion
	}{
		{"empty result", `{}`, false, mcpclient.LatestStatefulProtocolVersion},
		{"stateful revisions only", `{"supportedVersions":["2025-11-25","2025-06-18"],"capabilities":{}}`, false, mcpclient.LatestStatefulProtocolVersion},
		{"unknown revisions", `{"supportedVersions":["2099-01-01"]}`, false, mcpclient.LatestStatefulProtocolVersion},
		{"stateless revision, capabilities that do not decode", `{"supportedVersions":["2026-07-28"],"capabilities":"none"}`, false, mcpclient.LatestStatefulProtocolVersion},
		{"pinned, empty result", `{}`, true, ""},
		{"pinned, stateful revisions only", `{"supportedVersions":["2025-11-25"],"capabilities":{}}`, true, ""},
		{"pinned, capabilities that do not decode", `{"supportedVersions":["2025-11-25"],"capabilities":"none"}`, true, mcpclient.LatestStatefulProtocolVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
				if m.Method == "server/discover" {
					p.Send(testpeer.Result(m.ID, tc.answer))
					return true
				}
				return false
			})
			var opts []mcpclient.Option
			if tc.pinned {
				opts = append(opts, mcpclient.WithProtocolVersion(mcpclient.ProtocolVersion20260728))
			}
			c, err := mcpclient.Connect(context.Background(), srv.Transport(), opts...)
			if tc.want == "" {
				if !errors.Is(err, mcpclient.ErrUnsupportedVersion) || mcpclient.CodeOf(err) != mcpclient.CodeUnsupportedVersion {
					t.Fatalf("Connect = %v, want the revision refused", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.ProtocolVersion() != tc.want {
				t.Errorf("protocol %q, want %q", c.ProtocolVersion(), tc.want)
			}
		})
	}
}

func TestPinnedLegacyVersionSkipsDiscovery(t *testing.T) {
	t.Parallel()
	s := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		if r.Method == "initialize" {
			r.Reply(200, result(`{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"old","version":"1"}}`))
			return true
		}
		return false
	}, testpeer.Stateless())
	c := connect(t, &transport.HTTP{URL: s.URL}, mcpclient.WithProtocolVersion(mcpclient.ProtocolVersion20250618))
	if c.ProtocolVersion() != mcpclient.ProtocolVersion20250618 {
		t.Fatalf("protocol %q", c.ProtocolVersion())
	}
	for _, r := range s.Requests() {
		if r.Method == "server/discover" {
			t.Fatal("probed although the revision was pinned")
		}
	}
}

func TestStatelessLogLevelTravelsWithEachRequest(t *testing.T) {
	t.Parallel()
	s := testpeer.NewHTTP(t, nil, testpeer.Stateless())
	c := connect(t, &transport.HTTP{URL: s.URL})
	before := len(s.Requests())
	if err := c.SetLoggingLevel(context.Background(), mcpclient.LevelWarning); err != nil {
		t.Fatal(err)
	}
	if len(s.Requests()) != before {
		t.Fatal("SetLoggingLevel sent a request in a stateless revision")
	}
	if _, err := c.CachedTools(context.Background()); err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	if got := string(reqs[len(reqs)-1].Meta()[metakeys.LogLevel]); got != `"warning"` {
		t.Errorf("logLevel in _meta: %s", got)
	}
}

func TestStatelessListenDeliversSubscribedNotifications(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var listens []testpeer.Received
	srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		w := r.W
		switch r.Method {
		case "server/discover":
			r.Answer(`{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}}}`)
		case "tools/list":
			r.Answer(`{"tools":[{"name":"a","inputSchema":{"type":"object"}}]}`)
		case "subscriptions/listen":
			mu.Lock()
			listens = append(listens, r.Received)
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			sid := string(r.ID)
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"_meta\":{\"%s\":%s},\"notifications\":{\"toolsListChanged\":true}}}\n\n", metakeys.SubscriptionID, sid)
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\",\"params\":{\"_meta\":{\"%s\":%s}}}\n\n", metakeys.SubscriptionID, sid)
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\",\"params\":{\"uri\":\"file:///a\",\"_meta\":{\"%s\":%s}}}\n\n", metakeys.SubscriptionID, sid)
			w.(http.Flusher).Flush()
			<-r.HTTP.Context().Done() // until the client closes the stream
		default:
			return false
		}
		return true
	}, testpeer.Stateless())
	updated := make(chan string, 1)
	changed := make(chan struct{}, 1)
	c, err := mcpclient.Connect(context.Background(), &transport.HTTP{URL: srv.URL},
		mcpclient.WithResourceUpdatedHandler(func(_ context.Context, uri string) { updated <- uri }),
		mcpclient.WithNotificationHandler("notifications/tools/list_changed", func(context.Context, string, json.RawMessage) { changed <- struct{}{} }))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CachedTools(context.Background()); err != nil {
		t.Fatal(err)
	}
	sub, err := c.Listen(context.Background(), mcpclient.SubscriptionFilter{ToolsListChanged: true, ResourceSubscriptions: []string{"file:///a"}})
	if err != nil {
		t.Fatal(err)
	}
	if !sub.Acknowledged.ToolsListChanged || len(sub.Acknowledged.ResourceSubscriptions) != 0 {
		t.Errorf("acknowledged %+v", sub.Acknowledged)
	}
	if uri := <-updated; uri != "file:///a" {
		t.Errorf("updated %q", uri)
	}
	<-changed
	if tools, _ := c.CachedTools(context.Background()); len(tools) != 1 {
		t.Errorf("tools %v", tools)
	}
	if err := sub.Close(); err != nil || sub.Err() != nil {
		t.Errorf("close: %v / %v", err, sub.Err())
	}
	var filter struct {
		Notifications mcpclient.SubscriptionFilter `json:"notifications"`
	}
	json.Unmarshal(listens[0].Param("notifications"), &filter.Notifications)
	if filter.Notifications.ResourceSubscriptions[0] != "file:///a" || len(listens[0].Meta()) == 0 {
		t.Errorf("listen params %s", listens[0].Params)
	}
}

func TestListenNeedsAStatelessSession(t *testing.T) {
	srv := mcptest.NewTestServer(t)
	c := mcptest.NewClient(t, srv)
	if _, err := c.Listen(context.Background(), mcpclient.SubscriptionFilter{}); !errors.Is(err, mcpclient.ErrNotStateless) {
		t.Fatalf("error %v", err)
	}
}

// A server that spoke a stateless revision and comes back as an older one is reached by
// initialize: the revision of the session that was lost has no say in the handshake of the next.
func TestReconnectionToAServerThatLeftTheStatelessRevisionInitializes(t *testing.T) {
	srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
		switch {
		case p.N == 0 && m.Method == "server/discover":
			p.Send(testpeer.Result(m.ID, testpeer.StatelessDiscoverResult))
			return true
		case p.N == 0 && m.Method == "tools/call":
			p.Close() // the server goes away, and comes back older
			return true
		}
		return false
	})
	c := connect(t, srv.Transport())
	if c.ProtocolVersion() != mcpclient.ProtocolVersion20260728 {
		t.Fatalf("first session in %q, want the stateless revision", c.ProtocolVersion())
	}
	res, err := c.CallTool(testCtx(t), "reserve", nil, mcpclient.WithIdempotent())
	if err != nil {
		t.Fatalf("the call after the server came back older: %v", err)
	}
	if res.Text() != "ok" || c.ProtocolVersion() == mcpclient.ProtocolVersion20260728 {
		t.Errorf("result %q in %q", res.Text(), c.ProtocolVersion())
	}
}

// A safe request re-issued after its stateless session was lost is written for the session it
// goes to: on a server that came back older, without the stateless revision's _meta.
func TestReissueAfterTheServerLeftTheStatelessRevisionIsWrittenForTheNewSession(t *testing.T) {
	var reissued atomic.Pointer[testpeer.Msg]
	srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
		switch {
		case p.N == 0 && m.Method == "server/discover":
			p.Send(testpeer.Result(m.ID, testpeer.StatelessDiscoverResult))
			return true
		case p.N == 0 && m.Method == "tools/call":
			p.Close() // the server goes away, and comes back older
			return true
		case m.Method == "tools/call":
			reissued.Store(&m)
		}
		return false
	})
	c := connect(t, srv.Transport())
	first, err := c.NewRequest("tools/call", mcpclient.CallToolParams{Name: "reserve"}, mcpclient.WithIdempotent())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(testCtx(t), first)
	if err != nil {
		t.Fatalf("the call after the server came back older: %v", err)
	}
	m := reissued.Load()
	if m == nil || resp.Request.ID() == first.ID() {
		t.Fatalf("not re-issued under a new id: %+v", resp.Request)
	}
	for key := range m.Meta() {
		if strings.HasPrefix(key, "io.modelcontextprotocol/") {
			t.Errorf("the re-issue to a %s session carries the stateless _meta %s: %s", c.ProtocolVersion(), key, m.Params)
		}
	}
}

// TestStatelessExtensionsDeclared: the extensions the client declares ride in every request's
// clientCapabilities, with the receipts opt-in, and those server/discover declares reach
// ServerCapabilities.
func TestStatelessExtensionsDeclared(t *testing.T) {
	t.Parallel()
	s := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		if r.Method == "server/discover" {
			r.Answer(`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"extensions":{"io.example/x":{"flag":true}}}}`)
			return true
		}
		return false
	}, testpeer.Stateless())
	c := connect(t, &transport.HTTP{URL: s.URL}, mcpclient.WithExtension("io.example/y", map[string]string{"mode": "on"}))
	if got := string(c.ServerCapabilities().Extensions["io.example/x"]); got != `{"flag":true}` {
		t.Errorf("server extension settings %s", got)
	}
	if _, err := c.ListToolsPage(testCtx(t), ""); err != nil {
		t.Fatal(err)
	}
	for _, r := range s.Requests() {
		if got := string(r.Meta()[metakeys.ClientCapabilities]); got != `{"extensions":{"io.example/y":{"mode":"on"},"io.github.northstar-mcp/request-receipts":{}}}` {
			t.Errorf("%s: clientCapabilities %s", r.Method, got)
		}
	}
}
