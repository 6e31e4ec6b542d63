package mcpclient_test

// Hostile servers. Each test lets a server misbehave in one way, checks that
// the client fails the affected call with an *mcpclient.Error of a sensible Code (or, where the
// misbehaviour is survivable, returns the right answer), and then checks that a normal call on the
// same Client succeeds.
//
// Related tests elsewhere, whose cases are not repeated here (the tests below add what they
// lack: the follow-up call, other transports):
//   - TestHTTPOversizedAnswerIsTypedAndNotRefetched (http_test.go): an oversized JSON body or SSE
//     event leaves the outcome unknown and is not fetched again (here: the same, plus the follow-up call, plus
//     stdio-style streams).
//   - TestResponsesForUnknownIDsAndDuplicatesAreDropped (session_test.go): unknown ids,
//     duplicates and garbage over a pipe, with a follow-up ping (here: the HTTP forms).
//   - TestResponseShapes (session_test.go): a result and an error together over a pipe is
//     an unknown outcome (here: over HTTP too, with a follow-up call).
//   - TestMalformedErrorObjectLeavesOutcomeUnknown (session_test.go): an error that is no object.
//   - TestServerLyingAboutIDsLeavesOutcomeUnknown, TestHTTPAnswerForAnotherIDLeavesOutcomeUnknown
//     (session_test.go): answers for other ids only, over a pipe and an HTTP JSON body.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// hMsg is a JSON-RPC message as the hostile servers read it.
type hMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

const (
	hInitResult = `{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"hostile","version":"0"}}`
	hToolResult = `{"content":[{"type":"text","text":"ok"}]}`
	hSessionID  = "hostile-session-1"
)

func hResult(id json.RawMessage, result string) string {
	return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + result + `}`
}

func hNoMethod(id json.RawMessage) string {
	return `{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":-32601,"message":"method not found"}}`
}

// hOnce returns a function that reports true the first time only: a server misbehaving once.
func hOnce() func() bool {
	var done atomic.Bool
	return func() bool { return done.CompareAndSwap(false, true) }
}

// hostileHTTP is a Streamable HTTP server that behaves (initialize with a session id,
// server/discover refused, 202 for notifications and answers, 405 for the GET stream, a text
// result for tools/call, {} for ping), except for the POSTs misbehave says it answered itself:
// misbehave sees every POST first. It counts the tools/call POSTs it sees.
type hostileHTTP struct {
	*httptest.Server
	toolCalls atomic.Int32
	cancelled atomic.Int32 // notifications/cancelled received
}

func newHostileHTTP(t *testing.T, misbehave func(w http.ResponseWriter, r *http.Request, m hMsg) bool) *hostileHTTP {
	h := &hostileHTTP{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		case http.MethodDelete:
			return
		}
		var m hMsg
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&m); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		switch {
		case m.Method == "tools/call":
			h.toolCalls.Add(1)
		case m.Method == "notifications/cancelled":
			h.cancelled.Add(1)
		}
		if misbehave != nil && misbehave(w, r, m) {
			return
		}
		switch {
		case m.Method == "initialize":
			w.Header().Set("Mcp-Session-Id", hSessionID)
			hJSON(w, hResult(m.ID, hInitResult))
			return
		case m.Method == "server/discover":
			hJSON(w, hNoMethod(m.ID))
			return
		case m.ID == nil || m.Method == "":
			w.WriteHeader(http.StatusAccepted)
			return
		}
		switch m.Method {
		case "tools/call":
			hJSON(w, hResult(m.ID, hToolResult))
		case "ping":
			hJSON(w, hResult(m.ID, `{}`))
		default:
			hJSON(w, hNoMethod(m.ID))
		}
	}))
	t.Cleanup(h.Close)
	return h
}

func hJSON(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, body)
}

// hSSE opens an SSE answer and returns a function writing one event of data.
func hSSE(w http.ResponseWriter) func(id, data string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	return func(id, data string) {
		if id != "" {
			fmt.Fprintf(w, "id: %s\n", id)
		}
		fmt.Fprintf(w, "data: %s\n\n", data)
		w.(http.Flusher).Flush()
	}
}

// hPipeServer is a scripted server at the far end of a transport.Pipe.
type hPipeServer struct {
	conn *transport.MemoryConn
	wg   *sync.WaitGroup
}

func (p *hPipeServer) send(frame string) error {
	return p.conn.Send(context.Background(), &transport.Message{Frame: []byte(frame)})
}

// spawn runs f on a goroutine the test waits for.
func (p *hPipeServer) spawn(f func()) {
	p.wg.Add(1)
	go func() { defer p.wg.Done(); f() }()
}

// hPipe returns a transport to a scripted in-memory server: it answers initialize and refuses
// server/discover; answer sees every other request, notification and answer of the client.
func hPipe(t *testing.T, answer func(p *hPipeServer, m hMsg)) transport.Transport {
	wg := new(sync.WaitGroup)
	t.Cleanup(wg.Wait)
	return transport.DialFunc(func(ctx context.Context) (transport.Conn, error) {
		client, server := transport.Pipe()
		p := &hPipeServer{conn: server, wg: wg}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				frame, err := server.Receive(context.Background())
				if err != nil {
					return
				}
				var m hMsg
				if json.Unmarshal(frame, &m) != nil {
					t.Errorf("client sent invalid JSON: %s", frame)
					continue
				}
				switch m.Method {
				case "initialize":
					p.send(hResult(m.ID, hInitResult))
				case "server/discover":
					p.send(hNoMethod(m.ID))
				default:
					answer(p, m)
				}
			}
		}()
		return client, nil
	})
}

// hPipeDefault answers tools/call and ping as hostileHTTP does.
func hPipeDefault(p *hPipeServer, m hMsg) {
	switch {
	case m.ID == nil || m.Method == "":
	case m.Method == "tools/call":
		p.send(hResult(m.ID, hToolResult))
	case m.Method == "ping":
		p.send(hResult(m.ID, `{}`))
	default:
		p.send(hNoMethod(m.ID))
	}
}

// hStream returns a transport.Stream to a newline-delimited JSON-RPC server at the far end of a
// net.Pipe: it answers initialize and refuses server/discover, and write answers requests
// (notifications and answers of the client are read and dropped).
func hStream(t *testing.T, maxFrame int, write func(w io.Writer, m hMsg)) transport.Transport {
	wg := new(sync.WaitGroup)
	t.Cleanup(wg.Wait)
	return &transport.Stream{MaxFrameSize: maxFrame, Open: func(context.Context) (io.ReadWriteCloser, error) {
		client, server := net.Pipe()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer server.Close()
			sc := bufio.NewScanner(server)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var m hMsg
				if json.Unmarshal(sc.Bytes(), &m) != nil {
					continue
				}
				switch {
				case m.Method == "initialize":
					io.WriteString(server, hResult(m.ID, hInitResult)+"\n")
				case m.Method == "server/discover":
					io.WriteString(server, hNoMethod(m.ID)+"\n")
				case m.ID == nil || m.Method == "":
				default:
					write(server, m)
				}
			}
		}()
		return client, nil
	}}
}

// hStreamDefault answers as hPipeDefault does.
func hStreamDefault(w io.Writer, m hMsg) {
	switch m.Method {
	case "tools/call":
		io.WriteString(w, hResult(m.ID, hToolResult)+"\n")
	case "ping":
		io.WriteString(w, hResult(m.ID, `{}`)+"\n")
	default:
		io.WriteString(w, hNoMethod(m.ID)+"\n")
	}
}

func TestHostileOversizedMessage(t *testing.T) {
	big := `{"content":[{"type":"text","text":"` + strings.Repeat("x", 4096) + `"}]}`

	t.Run("http-json", func(t *testing.T) {
		first := hOnce()
		srv := newHostileHTTP(t, func(w http.ResponseWriter, r *http.Request, m hMsg) bool {
			if m.Method == "tools/call" && first() {
				hJSON(w, hResult(m.ID, big))
				return true
			}
			return false
		})
		c := connect(t, &transport.HTTP{URL: srv.URL, MaxMessageSize: 1024})
		_, err := c.CallTool(testCtx(t), "reserve", nil)
		if !errors.Is(err, transport.ErrMessageTooLarge) || !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
			t.Fatalf("error %v, want ErrOutcomeUnknown with ErrMessageTooLarge", err)
		}
		if e := asError(t, err); e.Attempts != 1 || srv.toolCalls.Load() != 1 {
			t.Errorf("%d attempts, %d POSTs: an oversized answer must not be fetched again", e.Attempts, srv.toolCalls.Load())
		}
		stillUsable(t, c)
	})

	// A stream transport reads the oversized line to its end without keeping it, and ends the
	// request it answered at once. oversizedOnStream sends the first tools/call's answer as
	// frame(id), over a 1 KiB limit, and checks that the call ends before its deadline (in the
	// bubble, a call left waiting would reach it at once) and that the client goes on, having
	// opened opens connections in all.
	oversizedOnStream := func(t *testing.T, frame func(id json.RawMessage) string, opens int32) {
		synctest.Test(t, func(t *testing.T) {
			first := hOnce()
			tr, opened := hCountOpens(hStream(t, 1024, func(w io.Writer, m hMsg) {
				if m.Method == "tools/call" && first() {
					io.WriteString(w, frame(m.ID)+"\n")
					return
				}
				hStreamDefault(w, m)
			}))
			c := connect(t, tr)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := c.CallTool(ctx, "reserve", nil)
			if !errors.Is(err, transport.ErrMessageTooLarge) || !errors.Is(err, mcpclient.ErrOutcomeUnknown) || ctx.Err() != nil {
				t.Fatalf("error %v, want ErrOutcomeUnknown with ErrMessageTooLarge before the deadline", err)
			}
			stillUsable(t, c)
			if n := opened.Load(); n != opens {
				t.Errorf("%d connections opened, want %d", n, opens)
			}
		})
	}
	// The connection goes on after an oversized answer.
	t.Run("stream", func(t *testing.T) {
		oversizedOnStream(t, func(id json.RawMessage) string { return hResult(id, big) }, 1)
	})

	// An oversized line that names no request ends the connection, and with it the calls
	// awaiting answers; the client opens a new one for the next call.
	t.Run("stream, no id", func(t *testing.T) {
		oversizedOnStream(t, func(json.RawMessage) string { return `{"jsonrpc":"2.0","result":` + big + "}" }, 2)
	})

	// The id an oversized answer names is matched as the client spells it.
	t.Run("stream, id spelled otherwise", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr := hStream(t, 1024, func(w io.Writer, m hMsg) {
				if m.Method == "tools/call" {
					// The same id without escapes: "a<b&c" for "a\u003cb\u0026c".
					var id string
					json.Unmarshal(m.ID, &id)
					io.WriteString(w, hResult(json.RawMessage(`"`+id+`"`), big)+"\n")
					return
				}
				hStreamDefault(w, m)
			})
			c := connect(t, tr)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := c.CallTool(ctx, "reserve", nil, mcpclient.WithRequestID(mcpclient.StringID("a<b&c")))
			if !errors.Is(err, transport.ErrMessageTooLarge) || !errors.Is(err, mcpclient.ErrOutcomeUnknown) || ctx.Err() != nil {
				t.Fatalf("error %v, want ErrOutcomeUnknown with ErrMessageTooLarge before the deadline", err)
			}
			if err := c.Ping(ctx); err != nil {
				t.Fatalf("ping after the episode: %v", err)
			}
		})
	})
}

// hCountOpens counts the streams tr opens.
func hCountOpens(tr transport.Transport) (transport.Transport, *atomic.Int32) {
	s := tr.(*transport.Stream)
	n, open := new(atomic.Int32), s.Open
	s.Open = func(ctx context.Context) (io.ReadWriteCloser, error) {
		n.Add(1)
		return open(ctx)
	}
	return s, n
}

// bytesAllocated returns how many bytes of heap f allocated (the process's, so tests that
// measure it must not run in parallel).
func bytesAllocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A server announcing a body near the limit and sending a few bytes of it costs the client
// memory for those bytes, not for the announcement.
func TestHostileDeclaredLengthIsNotTrusted(t *testing.T) {
	first := hOnce()
	srv := newHostileHTTP(t, func(w http.ResponseWriter, r *http.Request, m hMsg) bool {
		if m.Method == "tools/call" && first() {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(transport.DefaultMaxMessageSize))
			io.WriteString(w, hResult(m.ID, hToolResult)[:20])
			return true // net/http cuts the connection: the body is short of its length
		}
		return false
	})
	c := connect(t, &transport.HTTP{URL: srv.URL})
	var err error
	n := bytesAllocated(func() { _, err = c.CallTool(testCtx(t), "reserve", nil) })
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("error %v, want ErrOutcomeUnknown for an answer cut short", err)
	}
	if n > 4<<20 {
		t.Errorf("a call whose answer announced %d MiB and sent 20 bytes allocated %.1f MiB", transport.DefaultMaxMessageSize>>20, float64(n)/(1<<20))
	}
	stillUsable(t, c)
}

// With the default limit of 64 MiB, what a small answer costs follows its size on every
// transport: no buffer is sized by the limit.
func TestSmallAnswersCostNoLimitSizedBuffers(t *testing.T) {
	const calls, perCall = 20, 1 << 20
	check := func(t *testing.T, c *mcpclient.Client) {
		t.Helper()
		c.CallTool(testCtx(t), "reserve", nil) // the first call may set up what later ones reuse
		n := bytesAllocated(func() {
			for range calls {
				if _, err := c.CallTool(testCtx(t), "reserve", nil); err != nil {
					t.Fatal(err)
				}
			}
		})
		if n/calls > perCall {
			t.Errorf("a call with a small answer allocated %.1f MiB", float64(n/calls)/(1<<20))
		}
	}
	tool := mcptest.WithTool(unsafeTool, func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("ok")}}, nil
	})
	bothResponseKinds(t, func(t *testing.T, opts ...mcptest.Option) {
		srv := mcptest.NewTestHTTPServer(t, append(opts, tool)...)
		check(t, connect(t, &transport.HTTP{URL: srv.URL}))
	})
	t.Run("legacy", func(t *testing.T) {
		srv := mcptest.NewTestHTTPServer(t, tool)
		check(t, connect(t, srv.SSETransport()))
	})
	t.Run("stream", func(t *testing.T) {
		check(t, connect(t, hStream(t, 0, hStreamDefault)))
	})
}

func TestHostileOversizedSSEEvent(t *testing.T) {
	first := hOnce()
	var resumes atomic.Int32
	srv := newHostileHTTP(t, func(w http.ResponseWriter, r *http.Request, m hMsg) bool {
		if m.Method != "tools/call" || !first() {
			return false
		}
		event := hSSE(w)
		event("e1", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"`+strings.Repeat("x", 4096)+`"}}`)
		event("e2", hResult(m.ID, hToolResult))
		return true
	})
	front := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
			resumes.Add(1)
		}
		srv.Config.Handler.ServeHTTP(w, r)
	})
	fs := httptest.NewServer(front)
	t.Cleanup(fs.Close)
	c := connect(t, &transport.HTTP{URL: fs.URL, MaxMessageSize: 1024})
	_, err := c.CallTool(testCtx(t), "reserve", nil)
	if !errors.Is(err, transport.ErrMessageTooLarge) || !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("error %v, want ErrOutcomeUnknown with ErrMessageTooLarge", err)
	}
	if srv.toolCalls.Load() != 1 || resumes.Load() != 0 {
		t.Errorf("%d POSTs, %d resumptions: the oversized event must not be fetched again", srv.toolCalls.Load(), resumes.Load())
	}
	stillUsable(t, c)
}

func TestHostileResponseForUnknownID(t *testing.T) {
	// A JSON body is a POST's only answer: one for another id leaves the outcome unknown at once.
	t.Run("http-json", func(t *testing.T) {
		first := hOnce()
		srv := newHostileHTTP(t, func(w http.ResponseWriter, r *http.Request, m hMsg) bool {
			if m.Method == "tools/call" && first() {
				hJSON(w, hResult(json.RawMessage(`"not-yours"`), hToolResult))
				return true
			}
			return false
		})
		c := connect(t, &transport.HTTP{URL: srv.URL})
		_, err := c.CallTool(testCtx(t), "reserve", nil)
		if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want ErrOutcomeUnknown at once", err)
		}
		stillUsable(t, c)
	})
	// A stream may carry other messages before the answer: an unknown id is dropped.
	t.Run("http-sse", func(t *testing.T) {
		first := hOnce()
		srv := newHostileHTTP(t, func(w http.ResponseWriter, r *http.Request, m hMsg) bool {
			if m.Method != "tools/call" || !first() {
				return false
			}
			event := hSSE(w)
			event("", hResult(json.RawMessage(`"not-yours"`), `{"content":[{"type":"text","text":"forged"}]}`))
			event("", hResult(json.RawMessage(`12345`), `{"content":[{"type":"text","text":"forged"}]}`))
			event("", hResult(m.ID, `{"content":[{"type":"text","text":"mine"}]}`))
			return true
		})
		c := connect(t, &transport.HTTP{URL: srv.URL})
		res, err := c.CallTool(testCtx(t), "reserve", nil)
		if err != nil || res.Text() != "mine" {
			t.Fatalf("result %v, error %v: want the answer for the request's own id", res, err)
		}
		stillUsable(t, c)
	})
}

func TestHostileTwoResponsesForOneID(t *testing.T) {
	for _, kind := range []string{"http-sse", "http-json-batch"} {
		t.Run(kind, func(t *testing.T) {
			first := hOnce()
			srv := newHostileHTTP(t, func(w http.ResponseWriter, r *http.Request, m hMsg) bool {
				if m.Method != "tools/call" || !first() {
					return false
				}
				one := hResult(m.ID, `{"content":[{"type":"text","text":"first"}]}`)
				two := hResult(m.ID, `{"content":[{"type":"text","text":"second"}]}`)
				if kind == "http-sse" {
					event := hSSE(w)
					event("", one)
					event("", two)
				} else {
					hJSON(w, "["+one+","+two+"]")
				}
				return true
			})
			c := connect(t, &transport.HTTP{URL: srv.URL})
			res, err := c.CallTool(testCtx(t), "reserve", nil)
			if err != nil || res.Text() != "first" {
				t.Fatalf("result %v, error %v: want the first answer", res, err)
			}
			// The second answer was dropped, not kept for the next request.
			stillUsable(t, c)
		})
	}
}

func TestHostileWrongJSONRPCVersion(t *testing.T) {
	for name, reply := range map[string]string{
		"1.0":     `{"jsonrpc":"1.0","id":ID,"result":{}}`,
		"missing": `{"id":ID,"result":{}}`,
		"empty":   `{"jsonrpc":"","id":ID,"result":{}}`,
		// jsonrpc.Decode refuses the frame (a number where a string belongs), but its id
		// names a waiting call, which fails at once rather than waiting for its deadline.
		"number": `{"jsonrpc":2.0,"id":ID,"result":{}}`,
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				first := hOnce()
				tr := hPipe(t, func(p *hPipeServer, m hMsg) {
					if m.Method == "tools/call" && first() {
						p.send(strings.ReplaceAll(reply, "ID", string(m.ID)))
						return
					}
					hPipeDefault(p, m)
				})
				c, err := mcpclient.Connect(context.Background(), tr, noWait)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, err = c.CallTool(ctx, "reserve", nil)
				if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("error %v (code %v), want ErrOutcomeUnknown at once", err, mcpclient.CodeOf(err))
				}
				stillUsable(t, c)
			})
		})
	}
}

func TestHostileResultAndErrorTogether(t *testing.T) {
	const both = `{"jsonrpc":"2.0","id":ID,"result":{"content":[]},"error":{"code":-32000,"message":"both"}}`
	// The server answered the id with something that is no answer: the tool may have run, and
	// resending would fetch the same thing, receipts or not.
	check := func(t *testing.T, c *mcpclient.Client) {
		t.Helper()
		_, err := c.CallTool(testCtx(t), "reserve", nil)
		if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, mcpclient.ErrMalformedResponse) {
			t.Fatalf("error %v (code %v), want ErrOutcomeUnknown caused by ErrMalformedResponse", err, mcpclient.CodeOf(err))
		}
		e := asError(t, err)
		if entry, _ := c.Ledger().Lookup(e.ID); entry.State != mcpclient.StateUncertain || e.Attempts != 1 {
			t.Errorf("ledger state %v after %d attempts, want uncertain after one", entry.State, e.Attempts)
		}
		stillUsable(t, c)
	}
	t.Run("pipe", func(t *testing.T) {
		first := hOnce()
		check(t, connect(t, hPipe(t, func(p *hPipeServer, m hMsg) {
			if m.Method == "tools/call" && first() {
				p.send(strings.ReplaceAll(both, "ID", string(m.ID)))
				return
			}
			hPipeDefault(p, m)
		})))
	})
	for _, kind := range []string{"http-json", "http-sse"} {
		t.Run(kind, func(t *testing.T) {
			first := hOnce()
			srv := newHostileHTTP(t, func(w http.ResponseWriter, r *http.Request, m hMsg) bool {
				if m.Method != "tools/call" || !first() {
					return false
				}
				frame := strings.ReplaceAll(both, "ID", string(m.ID))
				if kind == "http-json" {
					hJSON(w, frame)
				} else {
					hSSE(w)("", frame)
				}
				return true
			})
			check(t, connect(t, &transport.HTTP{URL: srv.URL}, mcpclient.WithReceipts(mcpclient.ReceiptScopeSession)))
		})
	}
}

func TestHostileHugeHeaders(t *testing.T) {
	tests := []struct {
		name   string
		client *http.Client // nil: the transport's default client
		size   int          // bytes of response headers
	}{
		// The shared client reads 1 MiB of headers (net/http's default is 10 MiB).
		{"default client", nil, 2 << 20},
		{"client with a limit", &http.Client{Transport: &http.Transport{MaxResponseHeaderBytes: 64 << 10}}, 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first := hOnce()
			srv := newHostileHTTP(t, func(w http.ResponseWriter, r *http.Request, m hMsg) bool {
				if m.Method != "tools/call" || !first() {
					return false
				}
				chunk := strings.Repeat("h", 8<<10)
				for i := range tt.size / len(chunk) {
					w.Header().Set(fmt.Sprintf("X-Junk-%d", i), chunk)
				}
				hJSON(w, hResult(m.ID, hToolResult))
				return true
			})
			if tt.client != nil {
				defer tt.client.CloseIdleConnections()
			}
			c := connect(t, &transport.HTTP{URL: srv.URL, Client: tt.client})
			_, err := c.CallTool(testCtx(t), "reserve", nil)
			// The request was written; its answer could not be read: the outcome is unknown.
			if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "response headers exceeded") {
				t.Fatalf("error %v, want ErrOutcomeUnknown for headers over the limit", err)
			}
			if e := asError(t, err); e.Attempts != 1 || srv.toolCalls.Load() != 1 {
				t.Errorf("%d attempts, %d POSTs, want 1", e.Attempts, srv.toolCalls.Load())
			}
			stillUsable(t, c)
		})
	}
}

func TestHostileSSEStreamNeverAnswers(t *testing.T) {
	for _, kind := range []string{"sse", "no headers"} {
		t.Run(kind, func(t *testing.T) {
			first := hOnce()
			abandoned := make(chan struct{})
			srv := newHostileHTTP(t, func(w http.ResponseWriter, r *http.Request, m hMsg) bool {
				if m.Method != "tools/call" || !first() {
					return false
				}
				if kind == "sse" {
					hSSE(w)("p1", "") // a priming event, then silence
				}
				<-r.Context().Done() // the client hung up
				close(abandoned)
				return true
			})
			c := connect(t, &transport.HTTP{URL: srv.URL})
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			_, err := c.CallTool(ctx, "reserve", nil)
			if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("error %v, want ErrOutcomeUnknown at the call's deadline", err)
			}
			select {
			case <-abandoned:
			case <-testCtx(t).Done():
				t.Fatal("the client kept the silent exchange open")
			}
			// The notice is sent after the call returned, on the session's own goroutine.
			waitFor(t, "notifications/cancelled", func() bool { return srv.cancelled.Load() == 1 })
			stillUsable(t, c)
			if n := srv.cancelled.Load(); n != 1 {
				t.Errorf("%d notifications/cancelled, want 1", n)
			}
		})
	}
}

// A server that goes quiet does not hold a call until its context ends (forever, for
// context.Background()): no answer to the POST, or an answer that brings nothing or only
// keepalives, ends the call as an unknown outcome once the transport's bound passes. A slow call
// that reports progress is not cut.
func TestHostileSilentServerEndsTheCall(t *testing.T) {
	const bound = 300 * time.Millisecond
	keepalives := func(w http.ResponseWriter, r *http.Request, what string) {
		for {
			io.WriteString(w, what)
			w.(http.Flusher).Flush()
			select {
			case <-time.After(bound / 6):
			case <-r.Context().Done():
				return
			}
		}
	}
	for _, tc := range []struct {
		name     string
		serve    func(w http.ResponseWriter, r *http.Request, m hMsg)
		answered bool
	}{
		{"no answer", func(w http.ResponseWriter, r *http.Request, _ hMsg) { <-r.Context().Done() }, false},
		{"headers only", func(w http.ResponseWriter, r *http.Request, _ hMsg) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, false},
		{"sse comments", func(w http.ResponseWriter, r *http.Request, _ hMsg) {
			hSSE(w)("p1", "") // a priming event, then only comments
			keepalives(w, r, ": keepalive\n\n")
		}, false},
		{"sse progress", func(w http.ResponseWriter, r *http.Request, m hMsg) {
			event := hSSE(w)
			for range 8 {
				event("", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`)
				time.Sleep(bound / 3)
			}
			event("", hResult(m.ID, hToolResult))
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := hOnce()
			srv := newHostileHTTP(t, func(w http.ResponseWriter, r *http.Request, m hMsg) bool {
				if m.Method != "tools/call" || !first() {
					return false
				}
				tc.serve(w, r, m)
				return true
			})
			c := connect(t, &transport.HTTP{URL: srv.URL, ResponseHeaderTimeout: bound, ResponseIdleTimeout: bound})
			start := time.Now()
			res, err := c.CallTool(testCtx(t), "reserve", nil)
			took := time.Since(start)
			if tc.answered {
				if err != nil || res.Text() != "ok" {
					t.Fatalf("call: %v, want the answer after %v of progress", err, took)
				}
				if took < 2*bound {
					t.Errorf("answered after %v: the progress did not outlast the bound", took)
				}
				return
			}
			if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, transport.ErrResponseTimeout) {
				t.Fatalf("call: %v, want ErrOutcomeUnknown with ErrResponseTimeout", err)
			}
			if took > 10*bound {
				t.Errorf("the call ended after %v", took)
			}
			if n := srv.toolCalls.Load(); n != 1 {
				t.Errorf("the unsafe call was sent %d times", n)
			}
			stillUsable(t, c)
		})
	}
	// A legacy server answers each POST at once, the answer coming over its stream.
	t.Run("legacy no answer", func(t *testing.T) {
		first := hOnce()
		srv := newLegacyFake(t, "s1", func(w http.ResponseWriter, r *http.Request, m hMsg) bool {
			if m.Method != "tools/call" || !first() {
				return false
			}
			<-r.Context().Done()
			return true
		})
		c := connect(t, &transport.SSE{URL: srv.URL + "/sse", ResponseHeaderTimeout: bound})
		start := time.Now()
		_, err := c.CallTool(testCtx(t), "reserve", nil)
		if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, transport.ErrResponseTimeout) {
			t.Fatalf("call: %v, want ErrOutcomeUnknown with ErrResponseTimeout", err)
		}
		if took := time.Since(start); took > 10*bound {
			t.Errorf("the call ended after %v", took)
		}
		stillUsable(t, c)
	})
}

// hSilentStream returns a stream transport whose servers read everything and answer nothing,
// except those for which serve (if set) returns true after serving the connection itself, and a
// hang-up that closes every connection and refuses new ones. Connections are numbered from 0.
func hSilentStream(serve func(n int, server net.Conn) bool) (tr transport.Transport, hangUp func(), wait func()) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var opened []net.Conn
	gone := false
	hangUp = func() {
		mu.Lock()
		defer mu.Unlock()
		gone = true
		for _, c := range opened {
			c.Close()
		}
	}
	tr = &transport.Stream{Open: func(context.Context) (io.ReadWriteCloser, error) {
		client, server := net.Pipe()
		mu.Lock()
		defer mu.Unlock()
		if gone {
			return nil, errors.New("the server is gone")
		}
		n := len(opened)
		opened = append(opened, server)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if serve == nil || !serve(n, server) {
				io.Copy(io.Discard, server) // reads everything, answers nothing
			}
		}()
		return client, nil
	}}
	return tr, hangUp, wg.Wait
}

// hWithin waits for done's error on the bubble's clock: it checks the error with check and that
// it came after exactly want, and fails (hanging up first) if none comes within an hour.
func hWithin(t *testing.T, what string, done <-chan error, hangUp func(), want time.Duration, check func(error)) {
	t.Helper()
	start := time.Now()
	select {
	case err := <-done:
		check(err)
		if took := time.Since(start); took != want {
			t.Errorf("%s gave up after %v, want %v", what, took, want)
		}
	case <-time.After(time.Hour):
		t.Errorf("%s still waits after an hour", what)
		hangUp()
		<-done
	}
}

// Connect under a context without a deadline gives up on a server that never answers the
// handshake: after DefaultHandshakeTimeout, or the client's own bound. So does a reconnection
// under a call's context without one.
func TestHostileServerNeverAnswersTheHandshake(t *testing.T) {
	wantTimeout := func(t *testing.T, what string) func(error) {
		return func(err error) {
			if !errors.Is(err, mcpclient.ErrHandshakeTimeout) || !errors.Is(err, mcpclient.ErrNotDelivered) {
				t.Errorf("%s: %v, want ErrNotDelivered caused by ErrHandshakeTimeout", what, err)
			}
		}
	}
	for _, tc := range []struct {
		name string
		opts []mcpclient.Option
		want time.Duration
	}{
		{"default", nil, mcpclient.DefaultHandshakeTimeout},
		{"set", []mcpclient.Option{mcpclient.WithHandshakeTimeout(5 * time.Second)}, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr, hangUp, wait := hSilentStream(nil)
				defer wait()
				defer hangUp()
				done := make(chan error, 1)
				go func() {
					_, err := mcpclient.Connect(context.Background(), tr, tc.opts...)
					done <- err
				}()
				hWithin(t, "connect", done, hangUp, tc.want, wantTimeout(t, "connect"))
			})
		})
	}
	t.Run("reconnection", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// The first session opens, and the server hangs up; later ones never answer.
			tr, hangUp, wait := hSilentStream(func(n int, server net.Conn) bool {
				if n > 0 {
					return false
				}
				defer server.Close()
				sc := bufio.NewScanner(server)
				for sc.Scan() {
					var m hMsg
					json.Unmarshal(sc.Bytes(), &m)
					switch m.Method {
					case "initialize":
						io.WriteString(server, hResult(m.ID, hInitResult)+"\n")
					case "server/discover":
						io.WriteString(server, hNoMethod(m.ID)+"\n")
					case "notifications/initialized":
						return true
					}
				}
				return true
			})
			defer wait()
			defer hangUp()
			c, err := mcpclient.Connect(context.Background(), tr, mcpclient.WithHandshakeTimeout(5*time.Second),
				mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{MaxAttempts: 1}))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			synctest.Wait() // the client has seen the hang-up
			done := make(chan error, 1)
			go func() {
				_, err := c.CallTool(context.Background(), "reserve", nil)
				done <- err
			}()
			hWithin(t, "the call", done, hangUp, 5*time.Second, wantTimeout(t, "call"))
		})
	})
}

func TestHostileByteAtATimeResponse(t *testing.T) {
	answer := `{"content":[{"type":"text","text":"sl\u00f6w \"bytes\""}]}`
	const want = `slöw "bytes"`
	trickle := func(w io.Writer, s string) {
		for i := range len(s) {
			w.Write([]byte{s[i]})
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
	}
	for _, kind := range []string{"http-json", "http-sse"} {
		t.Run(kind, func(t *testing.T) {
			srv := newHostileHTTP(t, func(w http.ResponseWriter, r *http.Request, m hMsg) bool {
				if m.Method != "tools/call" {
					return false
				}
				if kind == "http-json" {
					w.Header().Set("Content-Type", "application/json")
					trickle(w, hResult(m.ID, answer))
				} else {
					w.Header().Set("Content-Type", "text/event-stream")
					trickle(w, "id: 1\r\nretry: 10\r\ndata: "+hResult(m.ID, answer)+"\r\n\r\n")
				}
				return true
			})
			c := connect(t, &transport.HTTP{URL: srv.URL})
			for range 2 {
				res, err := c.CallTool(testCtx(t), "reserve", nil)
				if err != nil || res.Text() != want {
					t.Fatalf("result %v, error %v", res, err)
				}
			}
			if err := c.Ping(testCtx(t)); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("stream", func(t *testing.T) {
		c := connect(t, hStream(t, 0, func(w io.Writer, m hMsg) {
			if m.Method == "tools/call" {
				trickle(w, hResult(m.ID, answer)+"\r\n")
				return
			}
			hStreamDefault(w, m)
		}))
		for range 2 {
			res, err := c.CallTool(testCtx(t), "reserve", nil)
			if err != nil || res.Text() != want {
				t.Fatalf("result %v, error %v", res, err)
			}
		}
		if err := c.Ping(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	})
}

// TestHostileFloodOfServerMessages floods the client with notifications and server requests
// while no call awaits an answer. The client's queues are bounded: server request handlers run
// at most 16 at a time and the requests beyond are refused at once as busy, and once a
// notification handler is stuck and the inbound queue (64) is full the client stops reading, so
// the flooding server is held back instead of the client's memory growing. Nothing is lost or
// deadlocked: every notification reaches its handler, every request is answered, and the
// goroutines return to their number before.
func TestHostileFloodOfServerMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 6000 messages: a quarter server requests with a handler, 1 in 12 requests for an
		// unknown method, 1 in 12 progress reports for no call, the rest notifications.
		const total = 6000
		const stuck = total / 2 // the notification whose handler waits for release
		var (
			sent, answers         atomic.Int32
			inFlight, maxInFlight atomic.Int32
			handled, notified     atomic.Int32
			refused               atomic.Int32 // answers saying the client is busy
			asks, unknown, notes  int32
			asksBeforeStuck       int32
			release               = make(chan struct{})
			baseline              = runtime.NumGoroutine()
		)
		flood := make([]string, total)
		for i := range flood {
			switch i % 12 {
			case 1, 5, 9:
				flood[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":"s%d","method":"flood/ask","params":{}}`, i)
				asks++
				if i < stuck {
					asksBeforeStuck++
				}
			case 3:
				flood[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":"s%d","method":"no/such/method"}`, i)
				unknown++
			case 7:
				flood[i] = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"nobody","progress":1}}`
				notes++
			default:
				flood[i] = fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/flood","params":{"n":%d}}`, i)
				notes++
			}
		}
		tr := hPipe(t, func(p *hPipeServer, m hMsg) {
			switch {
			case m.Method == "" && strings.HasPrefix(string(m.ID), `"s`):
				answers.Add(1)
				if strings.Contains(string(m.Error), "busy") {
					refused.Add(1)
				}
			case m.Method == "notifications/initialized":
				p.spawn(func() {
					for _, frame := range flood {
						if p.send(frame) != nil {
							return
						}
						sent.Add(1)
					}
				})
			default:
				hPipeDefault(p, m)
			}
		})
		c, err := mcpclient.Connect(context.Background(), tr, noWait,
			mcpclient.WithNotificationHandler("*", func(_ context.Context, _ string, params json.RawMessage) {
				notified.Add(1)
				var p struct{ N int }
				if json.Unmarshal(params, &p) == nil && p.N == stuck {
					<-release
				}
			}),
			mcpclient.WithRequestHandler("flood/ask", func(ctx context.Context, _ json.RawMessage) (any, error) {
				n := inFlight.Add(1)
				defer inFlight.Add(-1)
				for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
				}
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				handled.Add(1)
				return struct{}{}, nil
			}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()

		synctest.Wait() // all blocked: the handlers on release, the flooder on backpressure
		if got := maxInFlight.Load(); got != 16 {
			t.Errorf("%d server request handlers at once, want 16", got)
		}
		if got, want := refused.Load(), asksBeforeStuck-16; got != want || handled.Load() != 0 {
			t.Errorf("%d requests refused as busy and %d handled before the stuck notification, want %d and 0", got, handled.Load(), want)
		}
		// Held back: the flooder is blocked, and what the client holds unprocessed is bounded (64
		// queued for the dispatcher, 16 in the pipe, one each in the reader's and the
		// dispatcher's hands).
		processed := notified.Load() + answers.Load() + inFlight.Load()
		t.Logf("flood held back: %d sent, %d processed, %d handlers running, %d goroutines over the baseline", sent.Load(), processed, inFlight.Load(), runtime.NumGoroutine()-baseline)
		if got := sent.Load(); got >= total || got-processed > 64+16+2 {
			t.Errorf("the server sent %d messages and the client processed %d while the handlers were stuck, want at most %d waiting",
				got, processed, 64+16+2)
		}
		if extra := runtime.NumGoroutine() - baseline; extra > 16+30 {
			t.Errorf("%d goroutines more than before the flood, want a bounded number", extra)
		}
		close(release)
		synctest.Wait()
		// After release a handler returns at once, so how many of the later requests find a
		// slot depends on the schedule; each is handled or refused.
		if handled.Load()+refused.Load() != asks || answers.Load() != asks+unknown || notified.Load() != notes {
			t.Errorf("%d requests handled and %d refused as busy, %d answered, %d notifications delivered; want %d, %d, %d",
				handled.Load(), refused.Load(), answers.Load(), notified.Load(), asks, asks+unknown, notes)
		}
		if err := c.Ping(context.Background()); err != nil {
			t.Fatalf("ping after the flood: %v", err)
		}
		c.Close()
		synctest.Wait()
		if n := runtime.NumGoroutine(); n > baseline {
			t.Errorf("%d goroutines after Close, %d before", n, baseline)
		}
	})
}

// TestHostileFloodDuringACallIsBounded: while a call awaits its answer the client keeps reading
// (a handler may be the one awaiting it, see the next test), so a flood then is bounded by the
// bytes queued for the handlers. Past the bound the session ends with ErrInboundOverflow, the
// call ends with a typed error, and the client opens a new session for the next call.
func TestHostileFloodDuringACallIsBounded(t *testing.T) {
	const limit = 64 << 10
	defer mcpclient.SetInboxHardLimitForTest(limit)()
	synctest.Test(t, func(t *testing.T) {
		const total = 6000
		var sent, notified atomic.Int32
		release := make(chan struct{})
		first := hOnce()
		tr := hPipe(t, func(p *hPipeServer, m hMsg) {
			if m.Method == "tools/call" && first() {
				id := m.ID
				p.spawn(func() {
					for i := range total {
						if p.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/flood","params":{"n":%d}}`, i)) != nil {
							return
						}
						sent.Add(1)
					}
					p.send(hResult(id, hToolResult))
				})
				return
			}
			hPipeDefault(p, m)
		})
		c, err := mcpclient.Connect(context.Background(), tr, noWait,
			mcpclient.WithNotificationHandler("*", func(context.Context, string, json.RawMessage) {
				notified.Add(1)
				<-release
			}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = c.CallTool(testCtx(t), "reserve", nil)
		if !errors.Is(err, mcpclient.ErrInboundOverflow) || mcpclient.CodeOf(err) != mcpclient.CodeOutcomeUnknown {
			t.Fatalf("error %v (code %v), want ErrOutcomeUnknown caused by ErrInboundOverflow", err, mcpclient.CodeOf(err))
		}
		// About 190 bytes a message are queued: the bound held the backlog to a few hundred.
		if got := sent.Load(); got >= total || got > limit/100 {
			t.Errorf("the server sent %d of %d messages before the session ended; want the bound to stop it", got, total)
		}
		t.Logf("session ended after %d messages, %d handled", sent.Load(), notified.Load())
		close(release)
		stillUsable(t, c)
	})
}

// TestHostileFloodWhileAHandlerCallsTheClient: a notification handler may call the Client
// (options.go, NotificationHandler), as a list_changed handler calling ListTools does. Here the
// server follows list_changed with a burst of 100 log notifications, and answers the handler's
// call after the burst: the client must still route that answer to the handler.
func TestHostileFloodWhileAHandlerCallsTheClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const burst = 100
		var c *mcpclient.Client
		handlerErr := make(chan error, 1)
		burstSent := make(chan struct{})
		var burstOnce sync.Once
		endBurst := func() { burstOnce.Do(func() { close(burstSent) }) }
		handlersPing := hOnce()
		tr := hPipe(t, func(p *hPipeServer, m hMsg) {
			switch m.Method {
			case "tools/call":
				id := m.ID
				p.spawn(func() {
					defer endBurst()
					p.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
					for i := range burst {
						if p.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":%d}}`, i)) != nil {
							return
						}
					}
					endBurst()
					p.send(hResult(id, hToolResult))
				})
			case "ping":
				id := m.ID
				if handlersPing() {
					p.spawn(func() { <-burstSent; p.send(hResult(id, `{}`)) })
					return
				}
				p.send(hResult(id, `{}`))
			}
		})
		var once sync.Once
		var err error
		c, err = mcpclient.Connect(context.Background(), tr, noWait,
			mcpclient.WithNotificationHandler("notifications/tools/list_changed", func(ctx context.Context, _ string, _ json.RawMessage) {
				once.Do(func() {
					ctx, cancel := context.WithTimeout(ctx, time.Minute)
					defer cancel()
					handlerErr <- c.Ping(ctx)
				})
			}),
			mcpclient.WithLogHandler(func(context.Context, *mcpclient.LogMessage) {}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		if _, err := c.CallTool(ctx, "flood", nil); err != nil {
			t.Fatalf("the call during the flood: %v", err)
		}
		if err := <-handlerErr; err != nil {
			t.Errorf("a handler's call during a burst of notifications: %v", err)
		}
		if err := c.Ping(ctx); err != nil {
			t.Fatalf("ping after the flood: %v", err)
		}
	})
}

func TestHostileHTMLBody(t *testing.T) {
	const page = "<!doctype html><html><body><h1>Welcome to the hotel wifi</h1></body></html>"
	html := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, page)
	}
	t.Run("call", func(t *testing.T) {
		first := hOnce()
		srv := newHostileHTTP(t, func(w http.ResponseWriter, r *http.Request, m hMsg) bool {
			if m.Method == "tools/call" && first() {
				html(w)
				return true
			}
			return false
		})
		c := connect(t, &transport.HTTP{URL: srv.URL})
		_, err := c.CallTool(testCtx(t), "reserve", nil)
		var status *transport.StatusError
		// The POST reached something that answered 200 with a page: whether the tool ran is
		// unknown, and the body is not taken for an answer.
		if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.As(err, &status) || status.StatusCode != http.StatusOK {
			t.Fatalf("error %v, want ErrOutcomeUnknown with the 200 StatusError", err)
		}
		if !strings.Contains(err.Error(), "text/html") {
			t.Errorf("error %v does not name the Content-Type", err)
		}
		stillUsable(t, c)
	})
	t.Run("initialize", func(t *testing.T) {
		var bad atomic.Bool
		bad.Store(true)
		inner := newHostileHTTP(t, nil)
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if bad.Load() && r.Method == http.MethodPost {
				html(w)
				return
			}
			inner.Config.Handler.ServeHTTP(w, r)
		}))
		t.Cleanup(front.Close)
		tr := &transport.HTTP{URL: front.URL}
		_, err := mcpclient.Connect(testCtx(t), tr, noWait, mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{MaxAttempts: 2}))
		var status *transport.StatusError
		// No session, so none of the caller's requests was sent.
		if !errors.Is(err, mcpclient.ErrNotDelivered) || !errors.As(err, &status) || status.StatusCode != http.StatusOK {
			t.Fatalf("connect error %v, want ErrNotDelivered with the 200 StatusError", err)
		}
		bad.Store(false)
		stillUsable(t, connect(t, tr))
	})
}

func TestHostileRedirectLoop(t *testing.T) {
	var hops atomic.Int32
	first := hOnce()
	srv := newHostileHTTP(t, func(w http.ResponseWriter, r *http.Request, m hMsg) bool {
		if m.Method != "tools/call" || (r.URL.Query().Get("hop") == "" && !first()) {
			return false
		}
		n := hops.Add(1)
		// 307 keeps the method and the body: every hop delivers the request again.
		http.Redirect(w, r, fmt.Sprintf("/?hop=%d", n), http.StatusTemporaryRedirect)
		return true
	})
	c := connect(t, &transport.HTTP{URL: srv.URL})
	_, err := c.CallTool(testCtx(t), "reserve", nil)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "redirects") {
		t.Fatalf("error %v, want ErrOutcomeUnknown after too many redirects", err)
	}
	if n := hops.Load(); n != 10 {
		t.Errorf("%d redirects followed, want 10", n)
	}
	if e := asError(t, err); e.Attempts != 1 {
		t.Errorf("%d attempts, want 1", e.Attempts)
	}
	stillUsable(t, c)
}
