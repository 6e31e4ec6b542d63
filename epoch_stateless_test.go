package mcpclient_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// statelessReceiptServer is a stateless server that keeps receipts for its process under an
// epoch, loses the reply to the first tools/call after running it, and answers a resend from its
// receipt, unless it restarted in between (restartAfterFirst): then it has no receipt and runs the
// call again, as a real server would.
type statelessReceiptServer struct {
	mu       sync.Mutex
	epoch    int
	runs     map[string]int // executions by request id
	calls    int            // tools/call requests received
	discover int            // server/discover requests received
	restart  bool
}

func (s *statelessReceiptServer) script(r *testpeer.Request) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.Method {
	case "server/discover":
		s.discover++
		r.Answer(fmt.Sprintf(`{"resultType":"complete","supportedVersions":["2026-07-28"],`+
			`"capabilities":{"tools":{},"extensions":{"io.github.northstar-mcp/request-receipts":{"scope":"process","epoch":"e%d"}}},`+
			`"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"stateless","version":"1"}}}`, s.epoch))
		return true
	case "tools/call":
		s.calls++
		id := string(r.ID)
		if s.runs[id] > 0 && s.epoch == 0 {
			r.Answer(`{"resultType":"complete","content":[{"type":"text","text":"from the receipt"}]}`)
			return true
		}
		s.runs[id]++
		if s.calls == 1 {
			// It ran; the reply is lost on the way (a proxy answers 502), and then the
			// server restarts, if it is to.
			if s.restart {
				s.epoch++
			}
			r.Reply(502, "")
			return true
		}
		r.Answer(`{"resultType":"complete","content":[{"type":"text","text":"ran"}]}`)
		return true
	}
	return false
}

// In a stateless revision no session ends when the server restarts: before a same-id resend
// that relies on receipts, the client asks server/discover again, and a changed epoch ends the
// call with ErrOutcomeUnknown instead of running it twice. An unchanged one lets the resend read
// the receipt.
func TestStatelessResendConfirmsTheEpoch(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			srv := &statelessReceiptServer{runs: map[string]int{}, restart: restart}
			peer := testpeer.NewHTTP(t, srv.script, testpeer.Stateless())
			c := connect(t, &transport.HTTP{URL: peer.URL}, mcpclient.WithRetryPolicy(mcptest.FastRetryPolicy()))
			res, err := c.CallTool(context.Background(), "book", map[string]any{"seat": 1})
			srv.mu.Lock()
			defer srv.mu.Unlock()
			for id, n := range srv.runs {
				if n > 1 {
					t.Fatalf("request %s ran %d times", id, n)
				}
			}
			if srv.discover < 2 {
				t.Errorf("server/discover asked %d times, want it asked again before the resend", srv.discover)
			}
			switch {
			case !restart && (err != nil || res.Text() != "from the receipt"):
				t.Fatalf("no restart: %v, %v; want the receipt's answer", res, err)
			case restart && (!errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, mcpclient.ErrSessionLost)):
				t.Fatalf("after a restart: %v, want ErrOutcomeUnknown with ErrSessionLost", err)
			case restart && srv.calls != 1:
				t.Fatalf("after a restart the call was sent %d times", srv.calls)
			case restart && !strings.Contains(err.Error(), `"e1"`):
				t.Fatalf("the error does not name the new epoch: %v", err)
			}
		})
	}
}

// statefulReceiptServer is statelessReceiptServer's twin for an older revision whose sessions
// outlive its process (they are kept in a store of their own): its restart changes the epoch and
// loses the receipts, and the session goes on.
func (s *statelessReceiptServer) statefulScript(r *testpeer.Request) bool {
	s.mu.Lock()
	if r.Method == "initialize" {
		s.discover++
		r.W.Header().Set("Mcp-Session-Id", "kept-across-restarts")
		r.Answer(fmt.Sprintf(`{"protocolVersion":"2025-11-25","serverInfo":{"name":"stateful","version":"1"},`+
			`"capabilities":{"tools":{},"extensions":{"io.github.northstar-mcp/request-receipts":{"scope":"process","epoch":"e%d"}}}}`, s.epoch))
		s.mu.Unlock()
		return true
	}
	s.mu.Unlock()
	if r.Method == "tools/call" {
		return s.script(r)
	}
	return false
}

// A session of an older revision that outlives the server's restart would resend the same bytes
// under the same id to a process without the receipt: before that resend the client reads the
// epoch again, in a session opened for it.
func TestStatefulResendConfirmsTheEpochOfASessionThatOutlivesTheServer(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			srv := &statelessReceiptServer{runs: map[string]int{}, restart: restart}
			peer := testpeer.NewHTTP(t, srv.statefulScript)
			c := connect(t, &transport.HTTP{URL: peer.URL}, mcpclient.WithProtocolVersion("2025-11-25"),
				mcpclient.WithRetryPolicy(mcptest.FastRetryPolicy()))
			res, err := c.CallTool(context.Background(), "book", map[string]any{"seat": 1})
			srv.mu.Lock()
			defer srv.mu.Unlock()
			for id, n := range srv.runs {
				if n > 1 {
					t.Fatalf("request %s ran %d times", id, n)
				}
			}
			switch {
			case !restart && (err != nil || res.Text() != "from the receipt"):
				t.Fatalf("no restart: %v, %v; want the receipt's answer", res, err)
			case restart && (!errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, mcpclient.ErrSessionLost)):
				t.Fatalf("after a restart: %v, want ErrOutcomeUnknown with ErrSessionLost", err)
			}
		})
	}
}
