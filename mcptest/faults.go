package mcptest

import (
	"errors"
	"fmt"
	"time"

	"github.com/northstar-mcp/mcpclient/receipts"
)

// FaultKind is what a fault does to a request it matches. What the client sees:
//
//   - DropBeforeExecution: the exchange breaks (uncertain); nothing ran.
//   - DropAfterExecution: the exchange breaks (uncertain); the request ran.
//   - Delay: the answer comes Fault.Delay late.
//   - Fail: refused unread (HTTP 503, Retry-After): not delivered.
//   - ExpireSession: the session is gone (HTTP 404); initialize anew.
//   - BreakStream: an SSE answer breaks early; resuming gets the answer.
//   - CloseStream: an SSE answer ends early; resuming gets the answer.
//   - RefuseInFlight: refused as running (MCP_REQUEST_IN_FLIGHT, HTTP 409).
//   - RefuseIDReused: refused as reused (MCP_REQUEST_ID_REUSED, HTTP 409).
type FaultKind int

const (
	// DropBeforeExecution loses the request before it runs: the client sees the exchange break
	// (uncertain) and nothing ran.
	DropBeforeExecution FaultKind = iota + 1
	// DropAfterExecution runs the request, keeps its receipt, and loses the reply: the client
	// sees the exchange break (uncertain) although the request ran. Over HTTP with SSE answers,
	// a response stream the tool already opened (ToolCall.Progress, ToolCall.Request) breaks
	// after its events, and a resumption finds no answer.
	DropAfterExecution
	// Delay holds the request for Fault.Delay before it is handled: the client's answer comes
	// that much later, unless its own timeout ends the call first, its outcome unknown.
	Delay
	// Fail refuses the request before it is read, as an overloaded server answers 503 with
	// Retry-After: the client sees it not delivered, with Fault.RetryAfter as the server's
	// delay hint (over HTTP, in whole seconds; 0 when not set).
	Fail
	// ExpireSession ends the request's session before it is handled, as a server expiring
	// sessions does: the request is refused (HTTP 404) and the client must initialize anew.
	ExpireSession
	// BreakStream makes an SSE response break after its first event id, before the answer; the
	// answer is kept for a GET with Last-Event-ID, with which the client resumes the stream and
	// gets it. It applies to HTTP servers answering with SSE; elsewhere it does nothing.
	BreakStream
	// CloseStream ends an SSE response cleanly after its first event id, before the answer, as a
	// server that has its clients poll does (it may close a stream once it has sent an event id):
	// the answer is kept for a GET with Last-Event-ID, which the client sends to get it, as
	// after BreakStream. Where BreakStream resets the connection, as a network failure does,
	// CloseStream ends the response as it would end with the answer. It applies to HTTP
	// servers answering with SSE; elsewhere it does nothing.
	CloseStream
	// RefuseInFlight refuses the request without running it, with the answer a server keeping
	// receipts gives a delivery whose id another delivery is still running, once its wait for
	// that one is over: JSON-RPC -32600 with error.data.code MCP_REQUEST_IN_FLIGHT
	// (receipts.CodeInFlight), under HTTP status 409 over Streamable HTTP, in the session and
	// stateless revisions alike. It refuses at once, whatever the server's Mode and whether or
	// not the request opted into receipts, and claims no receipt: a resend of the id runs.
	// Over Streamable HTTP the client ends the call with mcpclient.ErrRequestInFlight, the
	// request in conflict and not sent again. Without status codes (in memory, a byte stream,
	// HTTP+SSE) it does so for a resend, which is what the refusal answers in a real server
	// (follow a DropBeforeExecution with a RefuseInFlight After 1), and reads the refusal of a
	// first delivery as the server's answer, a JSON-RPC error.
	RefuseInFlight
	// RefuseIDReused refuses the request without running it, with the very answer a server
	// keeping receipts gives a delivery under an id it holds a receipt of other bytes for:
	// JSON-RPC -32600 with error.data.code MCP_REQUEST_ID_REUSED (receipts.CodeIDReused), under
	// HTTP status 409 over Streamable HTTP. As RefuseInFlight, it refuses at once whatever the
	// Mode and claims no receipt. The client ends the call with mcpclient.ErrRequestIDReused,
	// the request in conflict and not sent again, over every transport.
	RefuseIDReused
)

// lastFaultKind is the highest FaultKind.
const lastFaultKind = RefuseIDReused

var faultKindNames = [...]string{
	DropBeforeExecution: "DropBeforeExecution",
	DropAfterExecution:  "DropAfterExecution",
	Delay:               "Delay",
	Fail:                "Fail",
	ExpireSession:       "ExpireSession",
	BreakStream:         "BreakStream",
	CloseStream:         "CloseStream",
	RefuseInFlight:      "RefuseInFlight",
	RefuseIDReused:      "RefuseIDReused",
}

// String returns the name of the kind, as in Go source, or FaultKind(n) for a number that
// names no kind.
func (k FaultKind) String() string {
	if k > 0 && k <= lastFaultKind {
		return faultKindNames[k]
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// A Fault disturbs the requests it matches. Inject it with Server.Inject or WithFault.
type Fault struct {
	Kind FaultKind
	// Method selects requests by method; "" matches every method but initialize. A Tool implies
	// tools/call.
	Method string
	// Tool selects tools/call requests by tool name; "" matches every tool.
	Tool string
	// Times is how many matching requests the fault hits: 0 means once, a negative number every
	// matching request.
	Times int
	// After is how many matching requests the fault lets through before its first hit. It
	// sequences faults over the attempts of one call: Fail, then DropAfterExecution with
	// After 1, fails the first attempt and loses the reply to the second.
	After int
	// Delay is how long a Delay fault holds a request.
	Delay time.Duration
	// RetryAfter is the delay hint a Fail fault gives the client.
	RetryAfter time.Duration
}

type activeFault struct {
	Fault
	left   int           // hits left; negative for unlimited
	skip   int           // matching requests still to let through
	random *randomFaults // set for the entry of RandomFaults (see random.go), which draws its own kind
}

// ErrUnavailable is the cause a Fail fault reports to the client.
var ErrUnavailable = errors.New("mcptest: server unavailable (injected fault)")

// Inject adds a fault. Faults apply in the order injected; a request may match several (a Delay
// and a DropAfterExecution, say).
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.injectLocked(f)
}

func (s *Server) injectLocked(f Fault) {
	left := f.Times
	if left == 0 {
		left = 1
	}
	s.faults = append(s.faults, &activeFault{Fault: f, left: left, skip: max(f.After, 0)})
}

// ClearFaults removes every fault not yet used up.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// faultPlan is what the faults matching one request ask for.
type faultPlan struct {
	fail        bool
	retryAfter  time.Duration
	delay       time.Duration
	dropBefore  bool
	dropAfter   bool
	expire      bool
	breakStream bool
	closeStream bool
	// refusal, if not 0, is the receipt verdict (receipts.InFlight or receipts.Reused) whose
	// refusal answers the request in place of running it.
	refusal receipts.Verdict
}

// add plans a fault of kind: retryAfter goes with Fail, delay with Delay.
func (p *faultPlan) add(kind FaultKind, retryAfter, delay time.Duration) {
	switch kind {
	case Fail:
		p.fail, p.retryAfter = true, retryAfter
	case Delay:
		p.delay += delay
	case DropBeforeExecution:
		p.dropBefore = true
	case DropAfterExecution:
		p.dropAfter = true
	case ExpireSession:
		p.expire = true
	case BreakStream:
		p.breakStream = true
	case CloseStream:
		p.closeStream = true
	case RefuseInFlight:
		p.refusal = receipts.InFlight
	case RefuseIDReused:
		p.refusal = receipts.Reused
	}
}

// takeFaults uses up one hit of every fault matching the request.
func (s *Server) takeFaults(method, tool string) faultPlan {
	var p faultPlan
	if method == "initialize" {
		return p
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.faults[:0]
	for _, f := range s.faults {
		if f.random != nil {
			f.random.take(method, tool, &p)
			kept = append(kept, f)
			continue
		}
		switch {
		case !f.matches(method, tool):
		case f.skip > 0:
			f.skip--
		default:
			p.add(f.Kind, f.RetryAfter, f.Delay)
			if f.left > 0 {
				f.left--
			}
		}
		if f.left != 0 {
			kept = append(kept, f)
		}
	}
	clear(s.faults[len(kept):])
	s.faults = kept
	return p
}

func (f *activeFault) matches(method, tool string) bool {
	if f.Tool != "" {
		return method == "tools/call" && tool == f.Tool
	}
	return f.Method == "" || f.Method == method
}
