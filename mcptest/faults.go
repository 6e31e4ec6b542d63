package mcptest

import (
	"errors"
	"time"
)

// FaultKind is what a fault does to a request it matches.
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
	// Delay holds the request for Fault.Delay before it is handled.
	Delay
	// Fail refuses the request before it is read, as an overloaded server answers 503 with
	// Retry-After: the client sees it not delivered, with Fault.RetryAfter as the server's
	// delay hint (over HTTP, in whole seconds; 0 when not set).
	Fail
	// ExpireSession ends the request's session before it is handled, as a server expiring
	// sessions does: the request is refused (HTTP 404) and the client must initialize anew.
	ExpireSession
	// BreakStream makes an SSE response break after its first event id, before the answer; the
	// answer is kept for a GET with Last-Event-ID. It applies to HTTP servers answering with
	// SSE; elsewhere it does nothing.
	BreakStream
	// CloseStream ends an SSE response cleanly after its first event id, before the answer, as a
	// server that has its clients poll does (it may close a stream once it has sent an event id):
	// the answer is kept for a GET with Last-Event-ID. Where BreakStream resets the connection,
	// as a network failure does, CloseStream ends the response as it would end with the answer.
	// It applies to HTTP servers answering with SSE; elsewhere it does nothing.
	CloseStream
)

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
