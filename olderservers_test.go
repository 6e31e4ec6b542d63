package mcpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/transporttest"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// olderEndpoint is an older server reached over in-memory HTTP at any URL, so that a test runs
// in a synctest bubble and names its endpoints.
type olderEndpoint struct {
	t   *testing.T
	srv *mcptest.HTTPServer
	hc  *http.Client
	// failInitialize makes the server fail the next initialize: with HTTP 500 (failedStatus) or
	// a JSON-RPC error refusing the method (failedRefused).
	failInitialize atomic.Int32
	// stateless makes the server speak the stateless revision alone from now on.
	stateless atomic.Pointer[mcptest.HTTPServer]
}

func newOlderEndpoint(t *testing.T) *olderEndpoint {
	e := &olderEndpoint{t: t, srv: &mcptest.HTTPServer{Server: mcptest.NewServer()}}
	t.Cleanup(func() { e.srv.Server.Close() })
	e.hc = transporttest.PipeHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := e.stateless.Load(); s != nil {
			s.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodPost && e.failInitialize.Load() != 0 {
			body, _ := io.ReadAll(r.Body)
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(body, &m) == nil && m.Method == "initialize" {
				switch e.failInitialize.Swap(0) {
				case failedStatus:
					http.Error(w, "not today", http.StatusInternalServerError)
					return
				case failedRefused:
					w.Header().Set("Content-Type", "application/json")
					w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32601,"message":"method not found"}}`))
					return
				}
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		e.srv.ServeHTTP(w, r)
	}))
	return e
}

const (
	failedStatus = iota + 1
	failedRefused
)

// upgrade makes the endpoint a server of the stateless revision alone.
func (e *olderEndpoint) upgrade() {
	s := &mcptest.HTTPServer{Server: mcptest.NewServer(mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728))}
	e.t.Cleanup(func() { s.Server.Close() })
	e.stateless.Store(s)
}

// connect opens a client to the endpoint at url, runs a ping and closes it.
func (e *olderEndpoint) connect(url string, opts ...mcpclient.Option) (string, error) {
	c, err := mcpclient.Connect(context.Background(), &transport.HTTP{URL: url, Client: e.hc},
		append([]mcpclient.Option{mcpclient.WithLogger(mcptest.TestLogger(e.t)), noWait}, opts...)...)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := c.Ping(context.Background()); err != nil {
		return "", err
	}
	return c.ProtocolVersion(), nil
}

// methods returns the JSON-RPC methods the older server received since it started, in order,
// leaving out pings and responses.
func (e *olderEndpoint) methods() []string {
	var out []string
	for _, r := range e.srv.Requests() {
		if r.RPCMethod != "" && r.RPCMethod != "ping" && r.RPCMethod != "notifications/initialized" {
			out = append(out, r.RPCMethod)
		}
	}
	return out
}

func (e *olderEndpoint) count(method string) int {
	n := 0
	for _, m := range e.methods() {
		if m == method {
			n++
		}
	}
	return n
}

// Clients of one process that connect in turn to an older server over HTTP pay the probe once:
// the second goes straight to initialize, with the revision the first settled.
func TestOlderServerIsRememberedAcrossClients(t *testing.T) {
	mcpclient.RememberOlderServersForTest(t, time.Hour, 8)
	synctest.Test(t, func(t *testing.T) {
		e := newOlderEndpoint(t)
		for i := range 3 {
			v, err := e.connect("http://older.test/mcp")
			if err != nil {
				t.Fatalf("client %d: %v", i, err)
			}
			if v != mcpclient.LatestStatefulProtocolVersion {
				t.Errorf("client %d in %q, want %q", i, v, mcpclient.LatestStatefulProtocolVersion)
			}
		}
		if probes, starts := e.count("server/discover"), e.count("initialize"); probes != 1 || starts != 3 {
			t.Errorf("three clients made %d server/discover and %d initialize (%v), want 1 and 3", probes, starts, e.methods())
		}
		// Another URL is another endpoint, whatever answers there.
		if _, err := e.connect("http://older.test/other"); err != nil {
			t.Fatal(err)
		}
		if probes := e.count("server/discover"); probes != 2 {
			t.Errorf("%d server/discover after a client of another URL, want 2", probes)
		}
	})
}

// What the process learned expires: past its lifetime a new client probes again, and what it
// learns then is remembered anew.
func TestOlderServerMemoryExpires(t *testing.T) {
	const lifetime = 10 * time.Minute
	mcpclient.RememberOlderServersForTest(t, lifetime, 8)
	synctest.Test(t, func(t *testing.T) {
		e := newOlderEndpoint(t)
		const url = "http://older.test/mcp"
		probesAfter := func(wait time.Duration) int {
			time.Sleep(wait)
			before := e.count("server/discover")
			if _, err := e.connect(url); err != nil {
				t.Fatal(err)
			}
			return e.count("server/discover") - before
		}
		if n := probesAfter(0); n != 1 {
			t.Fatalf("the first client probed %d times, want 1", n)
		}
		if n := probesAfter(lifetime - time.Second); n != 0 {
			t.Errorf("a client within the lifetime probed %d times, want 0", n)
		}
		if n := probesAfter(2 * time.Second); n != 1 {
			t.Errorf("a client past the lifetime probed %d times, want 1", n)
		}
		if n := probesAfter(time.Second); n != 0 {
			t.Errorf("a client after the new probe probed %d times, want 0", n)
		}
	})
}

// A failed initialize forgets what the process learned: the next dial probes the server again.
// One the server refused probes at once, in the same dial: a server that speaks the stateless
// revision alone refuses initialize.
func TestFailedInitializeForgetsTheOlderServerForTheProcess(t *testing.T) {
	for _, c := range []struct {
		name string
		fail int32
	}{{"status 500", failedStatus}, {"refused", failedRefused}} {
		t.Run(c.name, func(t *testing.T) {
			mcpclient.RememberOlderServersForTest(t, time.Hour, 8)
			synctest.Test(t, func(t *testing.T) {
				e := newOlderEndpoint(t)
				const url = "http://older.test/mcp"
				if _, err := e.connect(url); err != nil {
					t.Fatal(err)
				}
				e.failInitialize.Store(c.fail)
				var retries int
				cl, err := mcpclient.Connect(context.Background(), &transport.HTTP{URL: url, Client: e.hc},
					mcpclient.WithLogger(mcptest.TestLogger(t)), mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{
						NewBackOff: func() backoff.BackOff { return &backoff.ZeroBackOff{} },
						OnRetry:    func(int, error, time.Duration) { retries++ },
					}))
				if err != nil {
					t.Fatalf("connect after the failed initialize: %v", err)
				}
				cl.Close()
				if e.failInitialize.Load() != 0 {
					t.Fatal("the client did not go straight to initialize")
				}
				// The failed initialize never reached the server; what followed probed it.
				want := []string{"server/discover", "initialize", "server/discover", "initialize"}
				if got := e.methods(); !slices.Equal(got, want) {
					t.Errorf("requests %v, want %v", got, want)
				}
				if wantRetries := map[int32]int{failedStatus: 1, failedRefused: 0}[c.fail]; retries != wantRetries {
					t.Errorf("%d retries of Connect, want %d", retries, wantRetries)
				}
				if n := mcpclient.OlderServersForTest(); n != 1 {
					t.Errorf("the process remembers %d older servers, want the one learned again", n)
				}
			})
		})
	}
}

// A remembered older server that now speaks the stateless revision alone refuses the older
// initialize: the dial probes it on a new connection rather than failing.
func TestRememberedOlderServerThatUpgradedIsProbedAtOnce(t *testing.T) {
	mcpclient.RememberOlderServersForTest(t, time.Hour, 8)
	synctest.Test(t, func(t *testing.T) {
		e := newOlderEndpoint(t)
		const url = "http://older.test/mcp"
		if _, err := e.connect(url); err != nil {
			t.Fatal(err)
		}
		e.upgrade()
		v, err := e.connect(url)
		if err != nil {
			t.Fatalf("connect to the upgraded server: %v", err)
		}
		if v != mcpclient.ProtocolVersion20260728 {
			t.Errorf("session in %q, want the stateless revision", v)
		}
		var methods []string
		for _, r := range e.stateless.Load().Requests() {
			if r.RPCMethod != "" && r.RPCMethod != "ping" {
				methods = append(methods, r.RPCMethod)
			}
		}
		if len(methods) < 2 || methods[0] != "initialize" || methods[1] != "server/discover" {
			t.Errorf("the upgraded server received %v, want initialize, refused, then server/discover", methods)
		}
		if n := mcpclient.OlderServersForTest(); n != 0 {
			t.Errorf("the process still remembers %d older servers", n)
		}
	})
}

// A client pinned to a revision neither reads nor teaches the memory: one of an older revision
// offers its own, one of a stateless revision probes as it always does.
func TestPinnedClientsIgnoreTheOlderServerMemory(t *testing.T) {
	mcpclient.RememberOlderServersForTest(t, time.Hour, 8)
	synctest.Test(t, func(t *testing.T) {
		e := newOlderEndpoint(t)
		const url = "http://older.test/mcp"
		v, err := e.connect(url, mcpclient.WithProtocolVersion(mcpclient.ProtocolVersion20250618))
		if err != nil {
			t.Fatal(err)
		}
		if v != mcpclient.ProtocolVersion20250618 || mcpclient.OlderServersForTest() != 0 {
			t.Errorf("a pinned client: session in %q, %d older servers remembered", v, mcpclient.OlderServersForTest())
		}
		if _, err := e.connect(url); err != nil { // learns
			t.Fatal(err)
		}
		v, err = e.connect(url, mcpclient.WithProtocolVersion(mcpclient.ProtocolVersion20250618))
		if err != nil {
			t.Fatal(err)
		}
		if v != mcpclient.ProtocolVersion20250618 {
			t.Errorf("a pinned client after the memory learned: session in %q", v)
		}
		probes := e.count("server/discover")
		if _, err := e.connect(url, mcpclient.WithProtocolVersion(mcpclient.ProtocolVersion20260728)); err == nil {
			t.Error("a client pinned to the stateless revision connected to an older server")
		}
		if e.count("server/discover") == probes {
			t.Error("a client pinned to the stateless revision did not probe")
		}
	})
}

// The memory holds at most its bound: a new endpoint evicts the one learned longest ago.
func TestOlderServerMemoryIsBounded(t *testing.T) {
	mcpclient.RememberOlderServersForTest(t, time.Hour, 2)
	synctest.Test(t, func(t *testing.T) {
		e := newOlderEndpoint(t)
		urls := []string{"http://a.test/mcp", "http://b.test/mcp", "http://c.test/mcp"}
		for _, u := range urls {
			time.Sleep(time.Second) // an order of learning the clock can tell
			if _, err := e.connect(u); err != nil {
				t.Fatal(err)
			}
		}
		if n := mcpclient.OlderServersForTest(); n != 2 {
			t.Errorf("%d older servers remembered, want 2", n)
		}
		probes := e.count("server/discover")
		for _, u := range urls[1:] {
			if _, err := e.connect(u); err != nil {
				t.Fatal(err)
			}
		}
		if n := e.count("server/discover") - probes; n != 0 {
			t.Errorf("clients of the two endpoints learned last probed %d times, want 0", n)
		}
		if _, err := e.connect(urls[0]); err != nil {
			t.Fatal(err)
		}
		if n := e.count("server/discover") - probes; n != 1 {
			t.Errorf("a client of the evicted endpoint probed %d times, want 1", n)
		}
		if n := mcpclient.OlderServersForTest(); n != 2 {
			t.Errorf("%d older servers remembered, want 2", n)
		}
	})
}
