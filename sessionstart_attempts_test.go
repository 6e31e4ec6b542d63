package mcpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/transporttest"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// attemptRecorder is an attempt hook that keeps every event.
type attemptRecorder struct {
	mu     sync.Mutex
	events []mcpclient.AttemptEvent
}

func (r *attemptRecorder) hook(_ context.Context, ev mcpclient.AttemptEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *attemptRecorder) seen() []mcpclient.AttemptEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// failed returns the events of failed attempts.
func (r *attemptRecorder) failed() []mcpclient.AttemptEvent {
	return slices.DeleteFunc(r.seen(), func(ev mcpclient.AttemptEvent) bool { return ev.Err == nil })
}

// wantOlderServerStart checks the events of a session start against an older server: the
// server/discover it answered as one, then the initialize that opened the session, neither a
// failure.
func wantOlderServerStart(t *testing.T, events []mcpclient.AttemptEvent, status int) {
	t.Helper()
	if len(events) != 2 {
		t.Fatalf("%d events, want server/discover and initialize: %+v", len(events), events)
	}
	probe, init := events[0], events[1]
	if probe.Method != "server/discover" || !probe.Handshake || !probe.OlderServer || probe.Err != nil ||
		probe.Outcome != transport.Answered || probe.HTTPStatus != status {
		t.Errorf("server/discover: %+v, want an older server's answer (HTTP status %d), no failure", probe, status)
	}
	if init.Method != "initialize" || !init.Handshake || init.OlderServer || init.Err != nil || init.Outcome != transport.Answered {
		t.Errorf("initialize: %+v, want answered", init)
	}
}

// A client that opens a session with a server of the revisions with sessions alone asks
// server/discover, which the server refuses, and falls back to initialize: the attempt hook
// hears of both, and of no failed attempt.
func TestSessionStartWithOlderServerIsNoFailedAttempt(t *testing.T) {
	t.Parallel()
	older := mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20251125, mcpclient.ProtocolVersion20250618)
	for _, tc := range []struct {
		name   string
		server mcptest.Dialer
		status int // of the refusal of server/discover
	}{
		{"in-memory", mcptest.NewTestServer(t, older), 0},
		{"Streamable HTTP", mcptest.NewTestHTTPServer(t, older), http.StatusBadRequest},
		{"Streamable HTTP with SSE", mcptest.NewTestHTTPServer(t, older, mcptest.WithSSEResponses(0)), http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec attemptRecorder
			c := mcptest.NewClient(t, tc.server, mcpclient.WithAttemptHook(rec.hook))
			if v := c.ProtocolVersion(); v != mcpclient.ProtocolVersion20251125 {
				t.Fatalf("session in %q, want %q", v, mcpclient.ProtocolVersion20251125)
			}
			wantOlderServerStart(t, rec.seen(), tc.status)
			if err := c.Ping(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			if failed := rec.failed(); len(failed) != 0 {
				t.Errorf("failed attempts %+v, want none", failed)
			}
		})
	}
}

// discoverAnswering serves an older mcptest server over in-memory HTTP, but for server/discover,
// which answer answers.
func discoverAnswering(t *testing.T, answer func(w http.ResponseWriter, id json.RawMessage)) *http.Client {
	srv := &mcptest.HTTPServer{Server: mcptest.NewServer()}
	t.Cleanup(func() { srv.Server.Close() })
	return transporttest.PipeHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(body, &m) == nil && m.Method == "server/discover" {
				answer(w, m.ID)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		srv.ServeHTTP(w, r)
	}))
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// How a server refuses server/discover decides whether the attempt failed: the ways older
// servers refuse a method they do not know are an answer, not a failure; a server error or an
// answer that cannot be read is a failure, whether or not the client then opens the session with
// initialize.
func TestSessionStartServerDiscoverRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter, id json.RawMessage)
		older  bool // an older server's refusal, no failure
		status int
	}{
		{"405 without a body", func(w http.ResponseWriter, _ json.RawMessage) {
			w.WriteHeader(http.StatusMethodNotAllowed)
		}, true, http.StatusMethodNotAllowed},
		{"404 with text", func(w http.ResponseWriter, _ json.RawMessage) {
			http.Error(w, "404 page not found", http.StatusNotFound)
		}, true, http.StatusNotFound},
		{"400 with a server's own error code", func(w http.ResponseWriter, _ json.RawMessage) {
			writeJSON(w, http.StatusBadRequest, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Server not initialized"}}`)
		}, true, http.StatusBadRequest},
		{"method not found", func(w http.ResponseWriter, id json.RawMessage) {
			writeJSON(w, http.StatusOK, `{"jsonrpc":"2.0","id":`+string(id)+`,"error":{"code":-32601,"message":"Method not found"}}`)
		}, true, 0},
		{"invalid params", func(w http.ResponseWriter, id json.RawMessage) {
			writeJSON(w, http.StatusOK, `{"jsonrpc":"2.0","id":`+string(id)+`,"error":{"code":-32602,"message":"Invalid request parameters"}}`)
		}, true, 0},
		{"unsupported revision, naming older ones", func(w http.ResponseWriter, id json.RawMessage) {
			writeJSON(w, http.StatusOK, `{"jsonrpc":"2.0","id":`+string(id)+`,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2025-11-25"]}}}`)
		}, true, 0},
		{"result naming no stateless revision", func(w http.ResponseWriter, id json.RawMessage) {
			writeJSON(w, http.StatusOK, `{"jsonrpc":"2.0","id":`+string(id)+`,"result":{"supportedVersions":["2025-11-25"]}}`)
		}, true, 0},
		{"500 without a body", func(w http.ResponseWriter, _ json.RawMessage) {
			w.WriteHeader(http.StatusInternalServerError)
		}, false, http.StatusInternalServerError},
		{"500 with an internal error", func(w http.ResponseWriter, id json.RawMessage) {
			writeJSON(w, http.StatusInternalServerError, `{"jsonrpc":"2.0","id":`+string(id)+`,"error":{"code":-32603,"message":"Internal error"}}`)
		}, false, http.StatusInternalServerError},
		{"internal error", func(w http.ResponseWriter, id json.RawMessage) {
			writeJSON(w, http.StatusOK, `{"jsonrpc":"2.0","id":`+string(id)+`,"error":{"code":-32603,"message":"Internal error"}}`)
		}, false, 0},
		{"result that does not decode", func(w http.ResponseWriter, id json.RawMessage) {
			writeJSON(w, http.StatusOK, `{"jsonrpc":"2.0","id":`+string(id)+`,"result":{"supportedVersions":5}}`)
		}, false, 0},
		{"malformed response", func(w http.ResponseWriter, _ json.RawMessage) {
			writeJSON(w, http.StatusOK, `{"jsonrpc":"2.0","id":`)
		}, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hc := discoverAnswering(t, tc.answer)
			var rec attemptRecorder
			c, err := mcpclient.Connect(testCtx(t), &transport.HTTP{URL: "http://older.test/mcp", Client: hc},
				mcpclient.WithAttemptHook(rec.hook), mcpclient.WithLogger(mcptest.TestLogger(t)), noWait)
			if err == nil {
				defer c.Close()
			}
			if tc.older {
				if err != nil {
					t.Fatal(err)
				}
				wantOlderServerStart(t, rec.seen(), tc.status)
				return
			}
			events := rec.seen()
			probes := slices.DeleteFunc(slices.Clone(events), func(ev mcpclient.AttemptEvent) bool { return ev.Method != "server/discover" })
			if len(probes) == 0 {
				t.Fatalf("events %+v, want server/discover (connect: %v)", events, err)
			}
			for _, probe := range probes {
				if probe.Err == nil || probe.OlderServer || probe.HTTPStatus != tc.status {
					t.Errorf("server/discover: %+v, want a failure with HTTP status %d", probe, tc.status)
				}
			}
			if err == nil && events[len(events)-1].Method != "initialize" {
				t.Errorf("events %+v, want the session opened with initialize", events)
			}
		})
	}
}

// A fault of the server on server/discover is a failed attempt, though the server speaks the
// revisions with sessions alone: the dial that met it fails, and the next finds the older server.
func TestSessionStartServerDiscoverFault(t *testing.T) {
	t.Parallel()
	srv := mcptest.NewTestServer(t)
	srv.Inject(mcptest.Fault{Kind: mcptest.Fail, Method: "server/discover"})
	var rec attemptRecorder
	mcptest.NewClient(t, srv, mcpclient.WithAttemptHook(rec.hook))
	events := rec.seen()
	if len(events) != 3 || events[0].Method != "server/discover" || events[0].Err == nil || events[0].OlderServer ||
		events[0].Outcome != transport.NotDelivered {
		t.Fatalf("events %+v, want the failed server/discover first", events)
	}
	wantOlderServerStart(t, events[1:], 0)
}
