package receipts_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient/receipts"
)

func TestHTTPResendIsReplayed(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			srv := newToyServer(m.sse, m.stateful)
			var stats receipts.Stats
			c := newClient(t, receipts.HTTP(srv, receipts.Options{Observe: stats.Observe}), m, true)

			first := c.call(`"req-1"`, "count")
			if first.StatusCode != 200 || first.text(t) != "run 1" || first.replayed(t) {
				t.Fatalf("first = %d %s", first.StatusCode, first.Body)
			}
			if m.sse && !strings.HasPrefix(first.Body, progressEvent) {
				t.Errorf("the stream's other events changed: %q", first.Body)
			}
			resend := c.call(`"req-1"`, "count")
			if resend.StatusCode != 200 || resend.text(t) != "run 1" || !resend.replayed(t) {
				t.Fatalf("resend = %d %s, want run 1 marked as a replay", resend.StatusCode, resend.Body)
			}
			if n := srv.executions.Load(); n != 1 {
				t.Fatalf("%d executions, want 1", n)
			}
			if stats.Count(receipts.EventClaimed) != 1 || stats.Count(receipts.EventReplayed) != 1 || stats.Count(receipts.EventSettled) != 1 {
				t.Errorf("claimed %d, replayed %d, settled %d; want 1 each",
					stats.Count(receipts.EventClaimed), stats.Count(receipts.EventReplayed), stats.Count(receipts.EventSettled))
			}

			// Another id is another request.
			if got := c.call(`"req-2"`, "count").text(t); got != "run 2" {
				t.Errorf("another id = %q, want run 2", got)
			}
		})
	}
}

func TestHTTPReplayAsEventStream(t *testing.T) {
	srv := newToyServer(false, false)
	c := newClient(t, receipts.HTTP(srv, receipts.Options{}), modes[0], true)
	c.call("5", "count")
	c.header.Set("Accept", "text/event-stream")
	resend := c.call("5", "count")
	if ct := resend.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q for a client that accepts only events", ct)
	}
	if resend.text(t) != "run 1" || !resend.replayed(t) {
		t.Fatalf("resend = %s", resend.Body)
	}
}

func TestHTTPReusedID(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			srv := newToyServer(m.sse, m.stateful)
			var stats receipts.Stats
			c := newClient(t, receipts.HTTP(srv, receipts.Options{Observe: stats.Observe}), m, true)
			c.call("1", "count")
			other := c.call("1", "other-tool")
			if other.StatusCode != http.StatusConflict {
				t.Fatalf("other bytes under a known id: %d %s, want 409", other.StatusCode, other.Body)
			}
			if code, marker := other.marker(t); code != -32600 || marker != "MCP_REQUEST_ID_REUSED" {
				t.Fatalf("error %d %s, want -32600 MCP_REQUEST_ID_REUSED", code, marker)
			}
			if n := srv.executions.Load(); n != 1 {
				t.Fatalf("%d executions, want 1", n)
			}
			if stats.Count(receipts.EventReused) != 1 {
				t.Errorf("reused events = %d", stats.Count(receipts.EventReused))
			}
		})
	}
}

func TestHTTPNotOptedInPassesThrough(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			srv := newToyServer(m.sse, m.stateful)
			store := receipts.NewMemoryStore(receipts.MemoryOptions{})
			c := newClient(t, receipts.HTTP(srv, receipts.Options{Store: store}), m, false)
			first, second := c.call("1", "count"), c.call("1", "count")
			if first.text(t) != "run 1" || second.text(t) != "run 2" || second.replayed(t) {
				t.Fatalf("answers %s, %s: want two runs", first.Body, second.Body)
			}
			if store.Len() != 0 {
				t.Errorf("%d receipts kept for requests that did not opt in", store.Len())
			}
		})
	}
}

func TestHTTPOptInByHeader(t *testing.T) {
	// A session whose initialize did not declare the extension, or a server of a session
	// revision running without sessions: the header opts each request in.
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			srv := newToyServer(m.sse, m.stateful)
			c := newClient(t, receipts.HTTP(srv, receipts.Options{}), m, false)
			c.header.Set(receipts.HeaderOptIn, "1")
			const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count","arguments":{}}}`
			c.post(body)
			if resend := c.post(body); !resend.replayed(t) || srv.executions.Load() != 1 {
				t.Fatalf("resend = %s after %d executions, want a replay of the one", resend.Body, srv.executions.Load())
			}
		})
	}
}

// In the stateless revision the body opts a request in; a header that says otherwise is
// refused as a mismatch before anything runs, in either direction.
func TestHTTPStatelessHeaderAndBodyMustAgree(t *testing.T) {
	for _, m := range modes[:2] {
		for _, c := range []struct {
			name   string
			header string
			optIn  bool
		}{{"header without body", "1", false}, {"body without header", "", true}} {
			t.Run(m.name+"/"+c.name, func(t *testing.T) {
				srv := newToyServer(m.sse, m.stateful)
				store := receipts.NewMemoryStore(receipts.MemoryOptions{})
				cl := newClient(t, receipts.HTTP(srv, receipts.Options{Store: store}), m, c.optIn)
				cl.header.Set(receipts.HeaderOptIn, c.header)
				got := cl.call("1", "count")
				msg, _ := got.message(t)
				if got.StatusCode != http.StatusBadRequest || msg.Error == nil || msg.Error.Code != -32020 {
					t.Fatalf("answer %d %s, want 400 -32020", got.StatusCode, got.Body)
				}
				if srv.executions.Load() != 0 || store.Len() != 0 {
					t.Errorf("%d executions, %d receipts after a refusal", srv.executions.Load(), store.Len())
				}
			})
		}
	}
}

func TestHTTPSessionForgottenAfterDelete(t *testing.T) {
	srv := newToyServer(false, true)
	h := receipts.HTTP(srv, receipts.Options{})
	c := newClient(t, h, modes[2], true)
	c.call("1", "count")
	r := httptest.NewRequest(http.MethodDelete, "/mcp", nil)
	r.Header.Set("Mcp-Session-Id", c.session)
	h.ServeHTTP(httptest.NewRecorder(), r)
	// The server forgot the session too: a request under it is no longer its, nor opted in.
	c.header.Del(receipts.HeaderOptIn)
	srv.mu.Lock()
	srv.sessions[c.session] = true
	srv.mu.Unlock()
	if got := c.call("2", "count"); got.text(t) != "run 2" {
		t.Fatal(got.Body)
	}
	if got := c.call("2", "count"); got.replayed(t) {
		t.Fatalf("a request of a deleted session was receipted: %s", got.Body)
	}
}

func TestHTTPConcurrentDuplicateWaits(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := newToyServer(m.sse, m.stateful)
				srv.gate = make(chan struct{})
				var stats receipts.Stats
				c := newClient(t, receipts.HTTP(srv, receipts.Options{Observe: stats.Observe}), m, true)

				replies := make([]reply, 2)
				var wg sync.WaitGroup
				wg.Go(func() { replies[0] = c.call("9", "slow") })
				<-srv.started
				wg.Go(func() { replies[1] = c.call("9", "slow") })
				time.Sleep(10 * time.Second)
				synctest.Wait()
				if stats.Count(receipts.EventWaited) != 1 {
					t.Fatalf("waited = %d, want the duplicate waiting", stats.Count(receipts.EventWaited))
				}
				close(srv.gate)
				wg.Wait()
				if replies[0].text(t) != "run 1" || replies[1].text(t) != "run 1" {
					t.Fatalf("answers %s and %s, want run 1 twice", replies[0].Body, replies[1].Body)
				}
				if !replies[1].replayed(t) || srv.executions.Load() != 1 {
					t.Fatalf("duplicate replayed %v, executions %d", replies[1].replayed(t), srv.executions.Load())
				}
			})
		})
	}
}

func TestHTTPInFlightPastTheWaitBound(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := newToyServer(m.sse, m.stateful)
				srv.gate = make(chan struct{})
				c := newClient(t, receipts.HTTP(srv, receipts.Options{Wait: 2 * time.Second}), m, true)
				var wg sync.WaitGroup
				defer wg.Wait()
				wg.Go(func() { c.call("9", "slow") })
				<-srv.started
				start := time.Now()
				dup := c.call("9", "slow")
				if waited := time.Since(start); waited != 2*time.Second {
					t.Errorf("refused after %v, want the 2s bound", waited)
				}
				if dup.StatusCode != http.StatusConflict {
					t.Fatalf("duplicate past the bound = %d %s, want 409", dup.StatusCode, dup.Body)
				}
				if code, marker := dup.marker(t); code != -32600 || marker != "MCP_REQUEST_IN_FLIGHT" {
					t.Fatalf("error %d %s, want -32600 MCP_REQUEST_IN_FLIGHT", code, marker)
				}
				close(srv.gate)
			})
		})
	}
}

func TestHTTPDisconnectContinue(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			srv := newToyServer(m.sse, m.stateful)
			srv.gate = make(chan struct{})
			clientGone := make(chan struct{})
			var once sync.Once
			h := receipts.HTTP(srv, receipts.Options{})
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				context.AfterFunc(r.Context(), func() { once.Do(func() { close(clientGone) }) })
				h.ServeHTTP(w, r)
			}))
			defer ts.Close()
			c := newNetClient(t, ts, m)

			ctx, cancel := context.WithCancel(context.Background())
			failed := make(chan error)
			go func() {
				_, err := c.postContext(ctx, c.callBody("3", "slow"))
				failed <- err
			}()
			<-srv.started
			cancel()
			if err := <-failed; err == nil {
				t.Fatal("the cancelled request got an answer")
			}
			<-clientGone // the server saw the disconnect while the tool ran
			close(srv.gate)

			resend, err := c.postContext(context.Background(), c.callBody("3", "slow"))
			if err != nil {
				t.Fatal(err)
			}
			if resend.text(t) != "run 1" || !resend.replayed(t) {
				t.Fatalf("resend = %d %s, want the detached run's answer", resend.StatusCode, resend.Body)
			}
			if srv.executions.Load() != 1 || srv.cancelled.Load() != 0 {
				t.Fatalf("executions %d, cancelled %d; want 1 run to its end", srv.executions.Load(), srv.cancelled.Load())
			}
		})
	}
}

func TestHTTPDisconnectCancel(t *testing.T) {
	srv := newToyServer(true, false)
	srv.gate = make(chan struct{})
	defer close(srv.gate)
	ts := httptest.NewServer(receipts.HTTP(srv, receipts.Options{Disconnect: receipts.DisconnectCancel}))
	defer ts.Close()
	c := newNetClient(t, ts, modes[1])

	ctx, cancel := context.WithCancel(context.Background())
	failed := make(chan error)
	go func() {
		_, err := c.postContext(ctx, c.callBody("3", "slow"))
		failed <- err
	}()
	<-srv.started
	cancel()
	<-failed
	resend, err := c.postContext(context.Background(), c.callBody("3", "slow"))
	if err != nil {
		t.Fatal(err)
	}
	m, raw := resend.message(t)
	if m.Error == nil || m.Error.Code != receipts.RPCCancelled || !resend.replayed(t) {
		t.Fatalf("resend = %s, want the recorded cancellation, replayed", raw)
	}
	if srv.executions.Load() != 1 || srv.cancelled.Load() != 1 {
		t.Fatalf("executions %d, cancelled %d; want 1 cancelled run", srv.executions.Load(), srv.cancelled.Load())
	}
}

func TestHTTPDeclarationCarriesDisconnect(t *testing.T) {
	for _, d := range []receipts.Disconnect{receipts.DisconnectContinue, receipts.DisconnectCancel} {
		srv := newToyServer(false, false)
		c := newClient(t, receipts.HTTP(srv, receipts.Options{Disconnect: d}), modes[0], true)
		if got := declarationIn(t, c.post(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`)); got.Disconnect != d {
			t.Errorf("declared disconnect %q, want %q", got.Disconnect, d)
		}
	}
}

func TestHTTPFailureBeforeExecutionKeepsNoReceipt(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			srv := newToyServer(m.sse, m.stateful)
			var stats receipts.Stats
			c := newClient(t, receipts.HTTP(srv, receipts.Options{Observe: stats.Observe}), m, true)
			srv.reject.Store(true)
			if got := c.call("4", "count"); got.StatusCode != http.StatusUnauthorized {
				t.Fatalf("first = %d %s, want the handler's 401", got.StatusCode, got.Body)
			}
			if stats.Count(receipts.EventReleased) != 1 {
				t.Fatalf("released %d claims, want 1", stats.Count(receipts.EventReleased))
			}
			resend := c.call("4", "count")
			if resend.text(t) != "run 1" || resend.replayed(t) {
				t.Fatalf("resend = %d %s, want it to run", resend.StatusCode, resend.Body)
			}
		})
	}
}

// A 4xx is a refusal before execution even when it carries a JSON-RPC error for the id, and so
// is a 429 or 503 that says when to come back; another 5xx may follow an execution.
func TestHTTPRefusalStatusesKeepNoReceipt(t *testing.T) {
	for _, c := range []struct {
		status     int
		retryAfter bool
		kept       bool
	}{
		{http.StatusBadRequest, false, false},
		{http.StatusNotFound, false, false},
		{http.StatusTooManyRequests, true, false},
		{http.StatusServiceUnavailable, true, false},
		{http.StatusServiceUnavailable, false, true},
		{http.StatusBadGateway, true, true},
	} {
		t.Run(strconv.Itoa(c.status)+" retry-after "+strconv.FormatBool(c.retryAfter), func(t *testing.T) {
			srv := newToyServer(false, false)
			c2 := newClient(t, receipts.HTTP(srv, receipts.Options{Logger: discardLogger()}), modes[0], true)
			srv.refuseWith.Store(int64(c.status))
			srv.retryAfter.Store(c.retryAfter)
			if got := c2.call("4", "count"); got.StatusCode != c.status {
				t.Fatalf("first = %d %s, want the handler's %d", got.StatusCode, got.Body, c.status)
			}
			resend := c2.call("4", "count")
			switch {
			case c.kept:
				if code, _ := resend.marker(t); code != receipts.RPCInDoubt {
					t.Fatalf("resend = %d %s, want in doubt", resend.StatusCode, resend.Body)
				}
			case resend.text(t) != "run 1" || resend.replayed(t):
				t.Fatalf("resend = %d %s, want it to run", resend.StatusCode, resend.Body)
			}
		})
	}
}

func TestHTTPUnknownOutcomesAreInDoubt(t *testing.T) {
	for _, tool := range []string{"crash", "panic", "silent"} {
		t.Run(tool, func(t *testing.T) {
			srv := newToyServer(false, false)
			c := newClient(t, receipts.HTTP(srv, receipts.Options{Logger: discardLogger()}), modes[0], true)
			func() {
				defer func() { recover() }() // net/http recovers a handler's panic
				c.call("6", tool)
			}()
			resend := c.call("6", tool)
			if code, marker := resend.marker(t); code != receipts.RPCInDoubt || marker != receipts.CodeInDoubt {
				t.Fatalf("resend = %s, want in doubt", resend.Body)
			}
			if srv.executions.Load() != 1 {
				t.Fatalf("%d executions, want 1", srv.executions.Load())
			}
		})
	}
}

func TestHTTPResponseTooLargeIsInDoubt(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			srv := newToyServer(m.sse, m.stateful)
			c := newClient(t, receipts.HTTP(srv, receipts.Options{MaxResponseBytes: 16 << 10}), m, true)
			first := c.call("1", "large")
			if len(first.text(t)) != 64<<10 {
				t.Fatalf("the large answer was cut: %d bytes", len(first.Body))
			}
			resend := c.call("1", "large")
			if code, marker := resend.marker(t); code != receipts.RPCInDoubt || marker != receipts.CodeInDoubt {
				t.Fatalf("resend = %.200s, want in doubt", resend.Body)
			}
		})
	}
}

func TestHTTPFull(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := newToyServer(m.sse, m.stateful)
				srv.gate = make(chan struct{})
				var stats receipts.Stats
				store := receipts.NewMemoryStore(receipts.MemoryOptions{MaxReceipts: 1, Retention: time.Minute})
				c := newClient(t, receipts.HTTP(srv, receipts.Options{Store: store, Retention: time.Minute, Observe: stats.Observe}), m, true)
				var wg sync.WaitGroup
				wg.Go(func() { c.call("1", "slow") })
				<-srv.started
				full := c.call("2", "count")
				if full.StatusCode != http.StatusServiceUnavailable || full.Header.Get("Retry-After") == "" {
					t.Fatalf("a new id when full = %d %v, want 503 with Retry-After", full.StatusCode, full.Header)
				}
				if code, marker := full.marker(t); code != -31001 || marker != "MCP_RECEIPTS_FULL" {
					t.Fatalf("error %d %s, want -31001 MCP_RECEIPTS_FULL", code, marker)
				}
				close(srv.gate)
				wg.Wait()
				// Settled, the first receipt is kept for its retention, for a resend to read.
				if got := c.call("2", "count"); got.StatusCode != http.StatusServiceUnavailable {
					t.Fatalf("a new id within the first's retention = %d, want 503", got.StatusCode)
				}
				time.Sleep(time.Minute)
				if got := c.call("2", "count"); got.text(t) != "run 2" {
					t.Fatalf("after the first receipt's retention: %s", got.Body)
				}
				if stats.Count(receipts.EventFull) != 2 || srv.executions.Load() != 2 {
					t.Errorf("full %d, executions %d", stats.Count(receipts.EventFull), srv.executions.Load())
				}
			})
		})
	}
}

func TestHTTPPrincipalsKeptApart(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			srv := newToyServer(m.sse, m.stateful)
			h := receipts.HTTP(srv, receipts.Options{})
			alice := newClient(t, h, m, true)
			alice.header.Set("Authorization", "Bearer "+jwt(`{"iss":"https://idp","sub":"alice"}`))
			bob := newClient(t, h, m, true)
			bob.header.Set("Authorization", "Bearer "+jwt(`{"iss":"https://idp","sub":"bob"}`))
			bob.session = alice.session // even one session: the principal decides

			a, b := alice.call("1", "count"), bob.call("1", "count")
			if a.text(t) != "run 1" || b.text(t) != "run 2" || b.replayed(t) {
				t.Fatalf("alice %s, bob %s: want two runs, no cross replay", a.Body, b.Body)
			}
			// Bob's other bytes under the same id are no conflict with Alice's.
			if got := bob.call("1", "count"); !got.replayed(t) || got.text(t) != "run 2" {
				t.Fatalf("bob's resend = %s, want his own answer", got.Body)
			}
		})
	}
}

func TestHTTPLapsedLeaseIsInDoubt(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			clock := newFakeClock()
			store := receipts.NewMemoryStore(receipts.MemoryOptions{Now: clock.Now})
			srv := newToyServer(m.sse, m.stateful)
			var stats receipts.Stats
			c := newClient(t, receipts.HTTP(srv, receipts.Options{Store: store, Observe: stats.Observe}), m, true)
			// A holder that died mid-handler: its claim of these bytes, its lease run out.
			body := c.callBody(`"dead"`, "count")
			mustClaim(t, store, receipts.Key{Principal: "", ID: `"dead"`}, receipts.FingerprintOf([]byte(body)), time.Minute)
			clock.Advance(2 * time.Minute)

			got := c.post(body)
			if got.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200", got.StatusCode)
			}
			if code, marker := got.marker(t); code != -31000 || marker != "MCP_RECEIPT_IN_DOUBT" {
				t.Fatalf("error %d %s, want -31000 MCP_RECEIPT_IN_DOUBT", code, marker)
			}
			if srv.executions.Load() != 0 || stats.Count(receipts.EventInDoubt) != 1 {
				t.Fatalf("executions %d, in doubt %d; want it never run again", srv.executions.Load(), stats.Count(receipts.EventInDoubt))
			}
		})
	}
}

// declarationIn returns the declaration in an initialize or server/discover reply.
func declarationIn(t *testing.T, r reply) receipts.Declaration {
	t.Helper()
	_, raw := r.message(t)
	var m struct {
		Result struct {
			Capabilities struct {
				Extensions map[string]json.RawMessage
			}
		}
	}
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatal(err)
	}
	var d receipts.Declaration
	if err := json.Unmarshal(m.Result.Capabilities.Extensions[receipts.ExtensionID], &d); err != nil {
		t.Fatalf("no declaration in %s", raw)
	}
	return d
}

func TestHTTPDeclares(t *testing.T) {
	store := receipts.NewMemoryStore(receipts.MemoryOptions{MaxReceipts: 50})
	desc, _ := store.Describe(context.Background())
	want := receipts.Declaration{Scope: receipts.ScopeProcess, Epoch: desc.Epoch, RetentionMs: 3600000, MaxReceipts: 50, Disconnect: receipts.DisconnectContinue}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			srv := newToyServer(m.sse, m.stateful)
			c := newClient(t, receipts.HTTP(srv, receipts.Options{Store: store, Retention: time.Hour}), modes[0], false)
			bodies := []string{initializeBody(false)}
			if !m.stateful { // server/discover is a request of the revisions without sessions
				bodies = append(bodies, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`)
			}
			for _, body := range bodies {
				r := c.post(body)
				if got := declarationIn(t, r); got != want {
					t.Errorf("declared %+v, want %+v", got, want)
				}
				_, raw := r.message(t)
				if strings.Contains(body, "initialize") && !strings.Contains(raw, `"io.example/other":{"n":1.0}`) {
					t.Errorf("the server's own extension changed: %s", raw)
				}
				if m.sse && !strings.HasPrefix(r.Body, progressEvent) {
					t.Errorf("the stream's other events changed: %q", r.Body)
				}
				if !m.sse && r.Header.Get("Content-Length") != "" && r.Header.Get("Content-Length") != itoa(len(r.Body)) {
					t.Errorf("Content-Length %s for %d bytes", r.Header.Get("Content-Length"), len(r.Body))
				}
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestHTTPBodyReachesTheHandlerUnchanged(t *testing.T) {
	var got []byte
	h := receipts.HTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}), receipts.Options{MaxBodyBytes: 64})
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"x":"` + strings.Repeat("y", 100) + `"}}}`, // over the bound
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call"}]`,
		`not json`,
	} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		h.ServeHTTP(httptest.NewRecorder(), r)
		if string(got) != body {
			t.Errorf("the handler read %q, want %q", got, body)
		}
	}
}

func TestHTTPBodyTooLargeOptedIn(t *testing.T) {
	srv := newToyServer(false, false)
	c := newClient(t, receipts.HTTP(srv, receipts.Options{MaxBodyBytes: 64}), modes[0], true)
	c.header.Set(receipts.HeaderOptIn, "1")
	if got := c.call("1", "count"); got.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("an opted-in body over the bound = %d %s, want 413", got.StatusCode, got.Body)
	}
	if srv.executions.Load() != 0 {
		t.Fatal("it ran")
	}
}

func TestHTTPDetachedDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newToyServer(false, false)
		srv.gate = make(chan struct{})
		defer close(srv.gate)
		c := newClient(t, receipts.HTTP(srv, receipts.Options{DetachedTimeout: time.Minute, Logger: discardLogger()}), modes[0], true)

		ctx, cancel := context.WithCancel(context.Background())
		returned := make(chan struct{})
		go func() {
			c.postContext(ctx, c.callBody("8", "slow"))
			close(returned)
		}()
		<-srv.started
		time.Sleep(10 * time.Second) // the client waits a while, then leaves
		left := time.Now()
		cancel()
		<-returned
		if ran := time.Since(left); ran != time.Minute {
			t.Fatalf("the handler ran %v after the client left, want the one-minute deadline", ran)
		}
		if srv.cancelled.Load() != 1 {
			t.Fatalf("cancelled %d, want the run ended by its deadline", srv.cancelled.Load())
		}
		resend := c.call("8", "slow")
		if code, marker := resend.marker(t); code != receipts.RPCInDoubt || marker != receipts.CodeInDoubt {
			t.Fatalf("resend = %s, want in doubt", resend.Body)
		}
	})
}

func TestHTTPRemembersBoundedSessions(t *testing.T) {
	srv := newToyServer(false, true)
	h := receipts.HTTP(srv, receipts.Options{MaxSessions: 1})
	first := newClient(t, h, modes[2], true)
	second := newClient(t, h, modes[2], true) // pushes the first session out
	first.header.Del(receipts.HeaderOptIn)
	second.header.Del(receipts.HeaderOptIn)
	second.call("1", "count")
	if got := second.call("1", "count"); !got.replayed(t) {
		t.Fatalf("the remembered session's resend = %s, want a replay", got.Body)
	}
	first.call("1", "count")
	if got := first.call("1", "count"); got.replayed(t) {
		t.Fatalf("a session pushed out of the bound was still opted in: %s", got.Body)
	}
	// Its header still opts it in.
	first.header.Set(receipts.HeaderOptIn, "1")
	first.call("2", "count")
	if got := first.call("2", "count"); !got.replayed(t) {
		t.Fatalf("with the header: %s, want a replay", got.Body)
	}
}

func TestHTTPPassesOtherMethodsAndAsksNoCompression(t *testing.T) {
	var methods []string
	var encodings []string
	h := receipts.HTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		methods = append(methods, r.Method)
		encodings = append(encodings, r.Header.Get("Accept-Encoding"))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}), receipts.Options{})
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		r := httptest.NewRequest(method, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`))
		r.Header.Set("Accept-Encoding", "gzip")
		r.Header.Set(receipts.HeaderOptIn, "1")
		h.ServeHTTP(httptest.NewRecorder(), r)
		if r.Header.Get("Accept-Encoding") != "gzip" {
			t.Fatal("the middleware changed the caller's request")
		}
	}
	if strings.Join(methods, ",") != "GET,POST" || encodings[0] != "gzip" || encodings[1] != "" {
		t.Fatalf("methods %v, Accept-Encoding %q: want GET untouched, the receipted POST uncompressed", methods, encodings)
	}
}

// BenchmarkHTTP measures what the middleware adds to a tools/call answered in JSON: passed
// through (not opted in), run under a new receipt, and replayed.
func BenchmarkHTTP(b *testing.B) {
	answer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":"x","result":{"content":[{"type":"text","text":"ok"}]}}`)
	})
	body := `{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"t","arguments":{"a":1}}}`
	send := func(h http.Handler, body string, optIn bool) {
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		if optIn {
			r.Header.Set(receipts.HeaderOptIn, "1")
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			send(answer, body, false)
		}
	})
	b.Run("pass-through", func(b *testing.B) {
		h := receipts.HTTP(answer, receipts.Options{})
		for b.Loop() {
			send(h, body, false)
		}
	})
	b.Run("new-receipt", func(b *testing.B) {
		h := receipts.HTTP(answer, receipts.Options{})
		i := 0
		for b.Loop() {
			i++
			send(h, strings.Replace(body, `"x"`, `"`+itoa(i)+`"`, 1), true)
		}
	})
	b.Run("replay", func(b *testing.B) {
		h := receipts.HTTP(answer, receipts.Options{})
		send(h, body, true)
		for b.Loop() {
			send(h, body, true)
		}
	})
}

func TestHTTPStreamedResponseSettlesBeforeTheStreamEnds(t *testing.T) {
	for _, m := range modes {
		if !m.sse {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := newToyServer(m.sse, m.stateful)
				srv.gate = make(chan struct{})
				var stats receipts.Stats
				c := newClient(t, receipts.HTTP(srv, receipts.Options{Observe: stats.Observe}), m, true)
				var wg sync.WaitGroup
				var release sync.Once
				end := func() { release.Do(func() { close(srv.gate); wg.Wait() }) }
				defer end()
				wg.Go(func() { c.call("1", "linger") })
				<-srv.started // answered; the stream stays open
				start := time.Now()
				resend := c.call("1", "linger")
				if time.Since(start) != 0 || stats.Count(receipts.EventWaited) != 0 {
					t.Errorf("the resend waited %v for a stream that had sent its response", time.Since(start))
				}
				if resend.text(t) != "run 1" || !resend.replayed(t) {
					t.Fatalf("resend = %s, want the replay", resend.Body)
				}
				end()
				if stats.Count(receipts.EventSettled) != 1 || stats.Count(receipts.EventStoreError) != 0 {
					t.Errorf("settled %d, store errors %d; want 1 and 0", stats.Count(receipts.EventSettled), stats.Count(receipts.EventStoreError))
				}
			})
		})
	}
}
