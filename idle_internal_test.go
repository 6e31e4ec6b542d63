package mcpclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/transport"
)

// An idle session holds only what a session needs: what the handshake used, the probe's
// stateless _meta, the map of calls awaiting answers, the inbox's channel, the client's context,
// the session's busy state (its context among it) and the ledger are made again by the first
// work that needs them.
// Thousands of idle sessions (an agent host with a client per user) pay for each of these.
func TestIdleSessionHoldsNoLazyState(t *testing.T) {
	peer := testpeer.NewHTTP(t, nil)
	srv := httptest.NewServer(peer)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, &transport.HTTP{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if peer.Count("server/discover") != 1 {
		t.Fatalf("server/discover sent %d times, want the probe", peer.Count("server/discover"))
	}
	s := c.current()
	s.mu.Lock()
	pending, busy := s.pending, s.busy
	s.mu.Unlock()
	s.inbound.mu.Lock()
	changed := s.inbound.changed
	s.inbound.mu.Unlock()
	c.mu.Lock()
	cctx := c.life
	c.mu.Unlock()
	for what, held := range map[string]bool{
		"the probe's stateless _meta":       c.meta.Load() != nil,
		"the map of calls awaiting answers": pending.more != nil,
		"the session's busy state":          busy != nil,
		"the inbox's channel":               changed != nil,
		"the client's context":              cctx != nil,
		"the ledger":                        c.ledger.Load() != nil,
	} {
		if held {
			t.Errorf("an idle session holds %s", what)
		}
	}

	// What was let go is made again when needed, and works.
	if _, err := c.CallTool(ctx, "echo", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	if c.ledger.Load() == nil || c.Ledger().Len() != 1 {
		t.Errorf("the ledger after a call: %v", c.Ledger())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.lifetime().Err(); err == nil {
		t.Error("a client context made after Close has not ended")
	}
	if err := s.lifetime().Err(); err == nil {
		t.Error("a session context made after its end has not ended")
	}
}

// A session keeps why it died, and the header its handshake's interceptors gave it, with the
// state only a busy session carries: an idle one has neither. A request on the dead session is
// refused as never sent, with the cause in its chain.
func TestSessionKeepsItsCauseAndHeaderOnceItHasThem(t *testing.T) {
	s := newSession(&Client{cfg: newConfig(nil)})
	if s.ownHeader() != nil || s.busy != nil {
		t.Fatal("a new session holds a header or busy state")
	}
	h := http.Header{"X-A": {"1"}}
	s.setHeader(h)
	if got := s.ownHeader(); got.Get("X-A") != "1" {
		t.Errorf("header %v after setHeader(%v)", got, h)
	}
	cause := errors.New("the cause")
	s.retire(cause)
	_, err := s.exchange(context.Background(), &Request{key: `"k"`}, nil)
	if !errors.Is(err, cause) || !errors.Is(err, ErrSessionLost) || transport.OutcomeOf(err) != transport.NotDelivered {
		t.Errorf("exchange on the dead session: %v, want NotDelivered with ErrSessionLost and the cause", err)
	}
}

// An answer whose id is a plain JSON string, as every id the client makes is, reaches its call
// under the call's own key, white space around the id or not, without a copy of the id; an
// answer for no call is still told apart.
func TestAnswerReachesItsCallWithoutACopyOfItsID(t *testing.T) {
	s := newSession(&Client{cfg: newConfig(nil), log: discardLogger})
	const key = `"0cdcd2a3-2a17-4c6f-be57-a4fe57eac2ba"`
	for _, id := range []string{key, " " + key + "\n"} {
		p := newPendingCall(key)
		s.pending.add(p)
		if got := s.routeResponse(jsonrpc.Message{ID: []byte(id), Result: []byte(`{}`)}); got != key {
			t.Errorf("routeResponse(%s) = %s, want %s", id, got, key)
		}
		if r := p.reply(); string(r.result) != `{}` || r.err != nil {
			t.Errorf("the call's reply: %s, %v", r.result, r.err)
		}
	}
	if got := s.routeResponse(jsonrpc.Message{ID: []byte(`"other"`), Result: []byte(`{}`)}); got != `"other"` {
		t.Errorf("an answer for no call: key %s", got)
	}
	m := jsonrpc.Message{ID: []byte(key), Result: []byte(`{}`)}
	allocs := testing.AllocsPerRun(100, func() {
		s.pending.add(newPendingCall(key)) // two allocations: the call and its channel
		s.routeResponse(m)
	})
	if allocs > 2 {
		t.Errorf("%v allocations to route an answer to a call made for it, want 2 (the call's own)", allocs)
	}
}
