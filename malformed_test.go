package mcpclient_test

// Answers that are not the answer: for ids of no request, twice for one id, of another JSON-RPC
// version, with both a result and an error or a malformed error, and pages that are not
// JSON-RPC. Each is dropped, or ends the call it concerns with a typed error, and the client goes
// on.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/transport"
)

func TestHostileResponseForUnknownID(t *testing.T) {
	t.Parallel()
	// A JSON body is a POST's only answer: one for another id leaves the outcome unknown at once.
	t.Run("http-json", func(t *testing.T) {
		first := testpeer.Once()
		srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
			if r.Method == "tools/call" && first() {
				r.JSON(testpeer.Result(json.RawMessage(`"not-yours"`), testpeer.ToolResult))
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
		srv := testpeer.NewHTTP(t, firstToolCall(func(r *testpeer.Request) {
			event := r.SSE()
			event("", testpeer.Result(json.RawMessage(`"not-yours"`), `{"content":[{"type":"text","text":"forged"}]}`))
			event("", testpeer.Result(json.RawMessage(`12345`), `{"content":[{"type":"text","text":"forged"}]}`))
			event("", testpeer.Result(r.ID, `{"content":[{"type":"text","text":"mine"}]}`))
		}))
		c := connect(t, &transport.HTTP{URL: srv.URL})
		res, err := c.CallTool(testCtx(t), "reserve", nil)
		if err != nil || res.Text() != "mine" {
			t.Fatalf("result %v, error %v: want the answer for the request's own id", res, err)
		}
		stillUsable(t, c)
	})
}

func TestHostileTwoResponsesForOneID(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"http-sse", "http-json-batch"} {
		t.Run(kind, func(t *testing.T) {
			first := testpeer.Once()
			srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
				if r.Method != "tools/call" || !first() {
					return false
				}
				one := testpeer.Result(r.ID, `{"content":[{"type":"text","text":"first"}]}`)
				two := testpeer.Result(r.ID, `{"content":[{"type":"text","text":"second"}]}`)
				if kind == "http-sse" {
					event := r.SSE()
					event("", one)
					event("", two)
				} else {
					r.JSON("[" + one + "," + two + "]")
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
				first := testpeer.Once()
				srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
					if m.Method == "tools/call" && first() {
						p.Send(strings.ReplaceAll(reply, "ID", string(m.ID)))
						return true
					}
					return false
				})
				c, err := mcpclient.Connect(context.Background(), srv.Transport(), noWait)
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
	t.Parallel()
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
		if entry, _ := c.Ledger().Lookup(e.Request.ID()); entry.State != mcpclient.StateUncertain || e.Attempts != 1 {
			t.Errorf("ledger state %v after %d attempts, want uncertain after one", entry.State, e.Attempts)
		}
		stillUsable(t, c)
	}
	t.Run("pipe", func(t *testing.T) {
		first := testpeer.Once()
		check(t, connect(t, testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
			if m.Method == "tools/call" && first() {
				p.Send(strings.ReplaceAll(both, "ID", string(m.ID)))
				return true
			}
			return false
		}).Transport()))
	})
	for _, kind := range []string{"http-json", "http-sse"} {
		t.Run(kind, func(t *testing.T) {
			srv := testpeer.NewHTTP(t, firstToolCall(func(r *testpeer.Request) {
				frame := strings.ReplaceAll(both, "ID", string(r.ID))
				if kind == "http-json" {
					r.JSON(frame)
				} else {
					r.SSE()("", frame)
				}
			}))
			check(t, connect(t, &transport.HTTP{URL: srv.URL}, mcpclient.WithReceipts(mcpclient.ReceiptScopeSession)))
		})
	}
}

func TestHostileHTMLBody(t *testing.T) {
	t.Parallel()
	const page = "<!doctype html><html><body><h1>Welcome to the hotel wifi</h1></body></html>"
	html := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, page)
	}
	t.Run("call", func(t *testing.T) {
		first := testpeer.Once()
		srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
			if r.Method == "tools/call" && first() {
				html(r.W)
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
		srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
			if bad.Load() && r.HTTPMethod == http.MethodPost {
				html(r.W)
				return true
			}
			return false
		})
		tr := &transport.HTTP{URL: srv.URL}
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

func TestResponsesForUnknownIDsAndDuplicatesAreDropped(t *testing.T) {
	srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
		if m.Method != "ping" {
			return false
		}
		p.Send(`{"jsonrpc":"2.0","id":"not-a-request-of-ours","result":{}}`)
		p.Send(`{not json`)
		p.Send(testpeer.Result(m.ID, `{"first":true}`))
		p.Send(testpeer.Result(m.ID, `{"second":true}`))
		return true
	})
	c, err := mcpclient.Connect(context.Background(), srv.Transport())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req, err := c.NewRequest("ping", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Result) != `{"first":true}` {
		t.Errorf("result %s, want the first answer", resp.Result)
	}
	// The second answer was dropped, not kept for a later request.
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestResponseShapes(t *testing.T) {
	tests := []struct {
		name  string
		reply string // with ID standing for the request's id
		want  mcpclient.Code
	}{
		{"result beside a null error is the result", `{"jsonrpc":"2.0","id":ID,"result":{"ok":true},"error":null}`, 0},
		{"a null error alone is malformed", `{"jsonrpc":"2.0","id":ID,"error":null}`, mcpclient.CodeOutcomeUnknown},
		{"neither result nor error is malformed", `{"jsonrpc":"2.0","id":ID}`, mcpclient.CodeOutcomeUnknown},
		{"result and error is malformed", `{"jsonrpc":"2.0","id":ID,"result":{},"error":{"code":1,"message":"x"}}`, mcpclient.CodeOutcomeUnknown},
		{"an error object is a server error", `{"jsonrpc":"2.0","id":ID,"error":{"code":-32000,"message":"busy"}}`, mcpclient.CodeServerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
				if m.Method != "ping" {
					return false
				}
				p.Send(strings.ReplaceAll(tt.reply, "ID", string(m.ID)))
				return true
			})
			c, err := mcpclient.Connect(context.Background(), srv.Transport(), noWait)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			err = c.Ping(context.Background())
			if got := mcpclient.CodeOf(err); got != tt.want {
				t.Fatalf("error %v (code %v), want code %v", err, got, tt.want)
			}
		})
	}
}

func TestMalformedErrorObjectLeavesOutcomeUnknown(t *testing.T) {
	srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
		if m.Method != "tools/call" {
			return false
		}
		p.Send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":"boom"}`)
		return true
	})
	c, err := mcpclient.Connect(context.Background(), srv.Transport(), noWait)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req, _ := c.NewRequest("tools/call", mcpclient.CallToolParams{Name: "x"})
	_, err = c.Do(context.Background(), req)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, mcpclient.ErrMalformedResponse) || asError(t, err).Attempts != 1 {
		t.Fatalf("error %v, want an unknown outcome, caused by the malformed answer, after one attempt", err)
	}
	if e, _ := c.Ledger().Lookup(req.ID()); e.State != mcpclient.StateUncertain {
		t.Errorf("ledger state %v, want uncertain: the tool may have run", e.State)
	}
}

func TestServerLyingAboutIDsLeavesOutcomeUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testpeer.NewPipe(t, func(p *testpeer.Conn, m testpeer.Msg) bool {
			if m.Method != "tools/call" {
				return false
			}
			p.Send(`{"jsonrpc":"2.0","id":"someone-else","result":{"content":[]}}`)
			return true
		})
		c, err := mcpclient.Connect(context.Background(), srv.Transport())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = c.CallTool(ctx, "reserve", nil)
		if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want ErrOutcomeUnknown with the deadline", err)
		}
	})
}

func TestHTTPAnswerForAnotherIDLeavesOutcomeUnknown(t *testing.T) {
	t.Parallel()
	srv := testpeer.NewHTTP(t, func(r *testpeer.Request) bool {
		if r.Method == "tools/call" {
			r.JSON(`{"jsonrpc":"2.0","id":"not-yours","result":{"content":[]}}`)
			return true
		}
		return false
	})
	c, err := mcpclient.Connect(context.Background(), &transport.HTTP{URL: srv.URL}, noWait)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = c.CallTool(ctx, "reserve", nil)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v: want ErrOutcomeUnknown at once, not at the deadline", err)
	}
	if calls := srv.Count("tools/call"); calls != 1 {
		t.Errorf("%d calls", calls)
	}
}
