package receiptsgosdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/northstar-mcp/mcpclient/receipts"
)

func TestInitializeCarriesTheDeclaration(t *testing.T) {
	b := newBooking()
	s := serve(t, b.srv, through(adapterFor(receipts.Options{})))
	l := dialLines(t, s)
	r := l.open(initOptedIn)
	raw, ok := r.Result.Capabilities.Extensions[receipts.ExtensionID]
	if !ok {
		t.Fatalf("initialize result without the declaration: %+v", r.Result.Capabilities)
	}
	var d receipts.Declaration
	if err := json.Unmarshal(raw, &d); err != nil || d.Scope != receipts.ScopeProcess || d.Epoch == "" || d.Disconnect != receipts.DisconnectContinue {
		t.Fatalf("declaration %s (%v), want scope process with an epoch", raw, err)
	}
}

func TestResendOnTheSameConnectionIsReplayed(t *testing.T) {
	b := newBooking()
	s := serve(t, b.srv, through(adapterFor(receipts.Options{})))
	l := dialLines(t, s)
	l.open(initOptedIn)
	l.send(charge(`"c-1"`, 500))
	first := parseReply(t, l.recv())
	l.send(charge(`"c-1"`, 500))
	second := parseReply(t, l.recv())
	if first.replayed() || !second.replayed() || first.text() != second.text() || first.text() == "" {
		t.Fatalf("first %+v replayed=%v, second %+v replayed=%v", first.Result, first.replayed(), second.Result, second.replayed())
	}
	if n := b.runs.Load(); n != 1 {
		t.Fatalf("charge ran %d times, want 1", n)
	}
}

func TestReusedIDWithOtherBytesIsRefused(t *testing.T) {
	b := newBooking()
	s := serve(t, b.srv, through(adapterFor(receipts.Options{})))
	l := dialLines(t, s)
	l.open(initOptedIn)
	l.send(charge(`"c-1"`, 500))
	if r := parseReply(t, l.recv()); r.text() == "" {
		t.Fatalf("first: %+v", r)
	}
	l.send(charge(`"c-1"`, 900))
	r := parseReply(t, l.recv())
	if r.Error == nil || r.Error.Code != -32600 || r.Error.Data.Code != receipts.CodeIDReused || string(r.ID) != `"c-1"` {
		t.Fatalf("reused id: %+v, want -32600 %s", r.Error, receipts.CodeIDReused)
	}
	if n := b.runs.Load(); n != 1 {
		t.Fatalf("charge ran %d times, want 1", n)
	}
}

// A session whose initialize did not declare the extension keeps the core semantics: an id used
// again is a new request.
func TestRequestsThatDidNotOptInRunEveryTime(t *testing.T) {
	b := newBooking()
	s := serve(t, b.srv, through(adapterFor(receipts.Options{})))
	l := dialLines(t, s)
	l.open(initPlain)
	for range 2 {
		l.send(charge(`1`, 500))
		if r := parseReply(t, l.recv()); r.replayed() || r.text() == "" {
			t.Fatalf("reply %+v, want a run", r)
		}
	}
	if n := b.runs.Load(); n != 2 {
		t.Fatalf("charge ran %d times, want 2", n)
	}
}

// From 2026-07-28 a request opts in by its own _meta, whatever the session did.
func TestRequestOptsInByItsMeta(t *testing.T) {
	b := newBooking()
	s := serve(t, b.srv, through(adapterFor(receipts.Options{})))
	l := dialLines(t, s)
	line := `{"jsonrpc":"2.0","id":"m-1","method":"tools/call","params":{"name":"charge","arguments":{"cents":5},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.github.northstar-mcp/request-receipts":{}}}}}}`
	l.send(line)
	first := parseReply(t, l.recv())
	l.send(line)
	second := parseReply(t, l.recv())
	if first.text() == "" || first.replayed() || !second.replayed() || second.text() != first.text() {
		t.Fatalf("first %+v, second %+v", first, second)
	}
	if n := b.runs.Load(); n != 1 {
		t.Fatalf("charge ran %d times, want 1", n)
	}
}

// A request the server refused as invalid before running it keeps no receipt: the same bytes
// are processed anew.
func TestFailureBeforeExecutionKeepsNoReceipt(t *testing.T) {
	b := newBooking()
	stats := &receipts.Stats{}
	s := serve(t, b.srv, through(adapterFor(receipts.Options{Observe: stats.Observe})))
	l := dialLines(t, s)
	l.open(initOptedIn)
	for _, c := range []struct {
		request string
		code    int
	}{
		{`{"jsonrpc":"2.0","id":"v-1","method":"tools/call","params":{"name":"no-such-tool","arguments":{}}}`, -32602},
		{`{"jsonrpc":"2.0","id":"v-2","method":"no/such-method","params":{}}`, -32601},
	} {
		for i := range 2 {
			l.send(c.request)
			r := parseReply(t, l.recv())
			if r.Error == nil || r.Error.Code != c.code {
				t.Fatalf("attempt %d: %+v, want go-sdk's %d", i, r.Error, c.code)
			}
		}
	}
	if got := stats.Count(receipts.EventReleased); got != 4 {
		t.Fatalf("%d released, want 4 (settled %d)", got, stats.Count(receipts.EventSettled))
	}
}

// A request line longer than MaxBodyBytes, in a session that opted in, is refused unread: it
// could not be kept, and a resend would run it again.
func TestOversizedRequestOfAnOptedInSessionIsRefused(t *testing.T) {
	b := newBooking()
	s := serve(t, b.srv, through(adapterFor(receipts.Options{MaxBodyBytes: 1024})))
	l := dialLines(t, s)
	l.open(initOptedIn)
	l.send(`{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"charge","arguments":{"cents":1,"note":"` + strings.Repeat("n", 4096) + `"}}}`)
	r := parseReply(t, l.recv())
	if r.Error == nil || r.Error.Code != -32600 || string(r.ID) != `"big"` {
		t.Fatalf("oversized request: %+v", r)
	}
	l.send(charge(`"small"`, 1))
	if r := parseReply(t, l.recv()); r.text() == "" {
		t.Fatalf("the next request: %+v", r)
	}
	if n := b.runs.Load(); n != 1 {
		t.Fatalf("charge ran %d times, want 1", n)
	}
}

// A resend that arrives while the request still runs waits for its answer, and the lines behind
// it go on meanwhile.
func TestResendWhileRunningWaitsWithoutHoldingUpTheStream(t *testing.T) {
	b := newBooking()
	s := serve(t, b.srv, through(adapterFor(receipts.Options{})))
	l := dialLines(t, s)
	l.open(initOptedIn)
	ran, release := b.holdNext()
	defer release()
	l.send(charge(`"c-1"`, 500))
	<-ran
	l.send(charge(`"c-1"`, 500))
	l.send(`{"jsonrpc":"2.0","id":"p-1","method":"ping"}`)
	if r := parseReply(t, l.recv()); string(r.ID) != `"p-1"` {
		t.Fatalf("first answer %+v, want the ping's, not held up by the waiting resend", r)
	}
	release()
	a, b2 := parseReply(t, l.recv()), parseReply(t, l.recv())
	if a.replayed() == b2.replayed() || a.text() != b2.text() || a.text() == "" {
		t.Fatalf("answers %+v (replayed %v) and %+v (replayed %v), want the run's and its replay", a.Result, a.replayed(), b2.Result, b2.replayed())
	}
	if n := b.runs.Load(); n != 1 {
		t.Fatalf("charge ran %d times, want 1", n)
	}
}

// Many opted-in requests in flight at once each run once and are each replayed to their resend.
func TestManyRequestsInFlight(t *testing.T) {
	const n = 64
	b := newBooking()
	s := serve(t, b.srv, through(adapterFor(receipts.Options{})))
	l := dialLines(t, s)
	l.open(initOptedIn)
	for round := range 2 {
		go func() {
			for i := range n {
				io.WriteString(l.conn, charge(fmt.Sprintf(`"c-%d"`, i), i)+"\n")
			}
		}()
		seen := map[string]bool{}
		for range n {
			r := parseReply(t, l.recv())
			if r.replayed() != (round == 1) || r.text() == "" || seen[string(r.ID)] {
				t.Fatalf("round %d: %s replayed=%v %+v (seen %v)", round, r.ID, r.replayed(), r.Result, seen[string(r.ID)])
			}
			seen[string(r.ID)] = true
		}
	}
	if got := b.runs.Load(); got != n {
		t.Fatalf("charge ran %d times, want %d", got, n)
	}
}

// Only a byte stream carries the bytes a receipt is kept for: any other transport is refused at
// Connect, not served without receipts.
func TestTransportRefusesWhatIsNoByteStream(t *testing.T) {
	serverSide, _ := mcp.NewInMemoryTransports()
	if _, err := adapterFor(receipts.Options{}).Transport(serverSide).Connect(context.Background()); err == nil {
		t.Fatal("Connect over an in-memory transport succeeded")
	}
}
