package interop_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A fault is what goes wrong with the first delivery of one tool call.
type fault string

const (
	faultNone fault = "none"
	// faultReset: the handler ran; the connection is reset before its answer is written.
	faultReset fault = "reset after the handler ran"
	// faultCut: the handler ran; its answer (the event that carries it, for an event stream) is
	// cut off halfway and the connection closed.
	faultCut fault = "answer cut mid-stream"
	// The proxy answers with a gateway error without forwarding the request.
	fault502Before fault = "502 before forwarding"
	fault503Before fault = "503 before forwarding"
	fault504Before fault = "504 before forwarding"
	// The proxy forwards the request, the handler runs, and the proxy answers with a gateway error.
	fault502After fault = "502 after the handler ran"
	fault504After fault = "504 after the handler ran"
	// faultSlow: the tool takes longer than the client waits for one attempt.
	faultSlow fault = "handler slower than the attempt timeout"
	// faultCallerLeaves: the caller's deadline passes while the tool runs; the caller then asks
	// again (mcpclient's Resend of the same request, a naive client's new call).
	faultCallerLeaves fault = "caller's deadline passes mid-handler"
)

// allFaults are the faults of the receipts tests, none first.
var allFaults = []fault{faultNone, faultReset, faultCut, fault502Before, fault503Before, fault504Before,
	fault502After, fault504After, faultSlow, faultCallerLeaves}

// ranBeforeLoss reports whether under f the tool runs before the client learns anything: the
// answer it then gets from a server that keeps receipts is a replay.
func (f fault) ranBeforeLoss() bool {
	switch f {
	case faultReset, faultCut, fault502After, fault504After, faultSlow, faultCallerLeaves:
		return true
	}
	return false
}

// delayed reports whether under f the tool's first run is slow.
func (f fault) delayed() bool { return f == faultSlow || f == faultCallerLeaves }

// faultProxy stands between a client and an MCP server handler and breaks the first delivery of
// each reserve call as its plan says; every other request, and every later delivery of a call,
// passes through untouched. A delivery is told apart by the call number in the tool's
// arguments, not by its JSON-RPC id, so a re-issue under a new id counts as a later delivery.
type faultProxy struct {
	next http.Handler
	plan func(call int) fault

	mu          sync.Mutex
	deliveries  map[int]int
	answerTypes map[string]int

	inflight atomic.Int64
}

func newFaultProxy(next http.Handler, plan func(call int) fault) *faultProxy {
	return &faultProxy{next: next, plan: plan, deliveries: make(map[int]int), answerTypes: make(map[string]int)}
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.inflight.Add(1)
	defer p.inflight.Add(-1)
	f := faultNone
	call := 0 // the call number of a reserve call
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if n, ok := reserveCallOf(body); ok {
			call = n
			p.mu.Lock()
			p.deliveries[call]++
			first := p.deliveries[call] == 1
			p.mu.Unlock()
			if first {
				f = p.plan(call)
			}
		}
	}
	switch f {
	case fault502Before, fault503Before, fault504Before:
		http.Error(w, string(f), gatewayStatus(f))
	case fault502After, fault504After:
		p.record(r)
		http.Error(w, string(f), gatewayStatus(f))
	case faultReset:
		p.record(r)
		panic(http.ErrAbortHandler)
	case faultCut:
		rec := p.record(r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		body := rec.Body.Bytes()
		w.Write(body[:cutPoint(body)])
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	default:
		p.next.ServeHTTP(w, r)
		if call != 0 {
			p.answered(w.Header().Get("Content-Type"))
		}
	}
}

// answered counts the media type of an answer to a reserve call that went through untouched.
func (p *faultProxy) answered(contentType string) {
	mt, _, _ := strings.Cut(contentType, ";")
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answerTypes[strings.TrimSpace(mt)]++
}

// answerTypesSeen returns how many answers to reserve calls had each media type.
func (p *faultProxy) answerTypesSeen() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.answerTypes)
}

// record runs the request through the server, keeping the whole answer.
func (p *faultProxy) record(r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	p.next.ServeHTTP(rec, r)
	return rec
}

func gatewayStatus(f fault) int {
	switch f {
	case fault502Before, fault502After:
		return http.StatusBadGateway
	case fault503Before:
		return http.StatusServiceUnavailable
	}
	return http.StatusGatewayTimeout
}

// cutPoint is where an answer is cut: inside the last event of an event stream (the one that
// carries the response), halfway through a JSON body.
func cutPoint(body []byte) int {
	if i := bytes.LastIndex(body, []byte("data:")); i >= 0 {
		return i + (len(body)-i)/2
	}
	return len(body) / 2
}

// reserveCallOf returns the call number of a reserve tools/call request body.
func reserveCallOf(body []byte) (int, bool) {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Name      string `json:"name"`
			Arguments struct {
				Call *int `json:"call"`
			} `json:"arguments"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil || m.Method != "tools/call" || m.Params.Name != reserveTool || m.Params.Arguments.Call == nil {
		return 0, false
	}
	return *m.Params.Arguments.Call, true
}

// naiveClient is what many hand-written MCP clients do: a plain net/http client that sends every
// attempt of a call under a fresh id, and sends again on any error (a transport error, a status
// that is no success, an attempt that took too long, an answer it could not read).
type naiveClient struct {
	hc             *http.Client
	url            string
	attemptTimeout time.Duration
	maxAttempts    int

	session string
	nextID  atomic.Int64
}

const naiveProtocol = "2025-11-25"

// connect opens the session: initialize, then notifications/initialized.
func (c *naiveClient) connect(ctx context.Context) error {
	init := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"naive","version":"1.0.0"}}}`,
		c.nextID.Add(1), naiveProtocol)
	res, sid, err := c.post(ctx, init)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.ProtocolVersion != naiveProtocol {
		return fmt.Errorf("initialize result %s: %v", res, err)
	}
	c.session = sid
	_, _, err = c.post(ctx, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return err
}

// call calls the reserve tool for call, sending again under a fresh id after any failed attempt.
func (c *naiveClient) call(ctx context.Context, call int) (string, error) {
	var last error
	for range c.maxAttempts {
		if err := ctx.Err(); err != nil {
			return "", errors.Join(err, last)
		}
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"call":%d}}}`,
			c.nextID.Add(1), reserveTool, call)
		actx, cancel := context.WithTimeout(ctx, c.attemptTimeout)
		res, _, err := c.post(actx, body)
		cancel()
		if err == nil {
			var r struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
				IsError bool `json:"isError"`
			}
			if err := json.Unmarshal(res, &r); err != nil || len(r.Content) == 0 || r.IsError {
				return "", fmt.Errorf("tool result %s: %v", res, err)
			}
			return r.Content[0].Text, nil
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	return "", last
}

// post sends one JSON-RPC message and returns the result of the response to it, from a JSON body
// or from the event stream's event that carries it, and the session id the server gave.
func (c *naiveClient) post(ctx context.Context, body string) (json.RawMessage, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", naiveProtocol)
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode == http.StatusAccepted {
		return nil, sid, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, sid, fmt.Errorf("HTTP %s", resp.Status)
	}
	var msgs [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var data []byte
		for sc.Scan() {
			line := sc.Bytes()
			switch {
			case bytes.HasPrefix(line, []byte("data:")):
				data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
			case len(line) == 0 && len(data) > 0:
				msgs = append(msgs, data)
				data = nil
			}
		}
		if err := sc.Err(); err != nil {
			return nil, sid, err
		}
	} else {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, sid, err
		}
		msgs = append(msgs, b)
	}
	for _, m := range msgs {
		var r struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(m, &r) != nil || len(r.ID) == 0 {
			continue // a notification, or what could not be read
		}
		if len(r.Error) > 0 {
			return nil, sid, fmt.Errorf("JSON-RPC error %s", r.Error)
		}
		return r.Result, sid, nil
	}
	return nil, sid, errors.New("no response in the answer")
}
