package mcptest

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"
)

// RandomFaults disturbs a random share of the requests it selects, for soak tests: each
// selected request is hit, with probability Rate, by one fault whose kind is drawn uniformly from
// Kinds. The kinds act as the injected Fault of the same kind does (see FaultKind and, over
// HTTP, HTTPServer): DropBeforeExecution and DropAfterExecution reset the exchange, Fail refuses
// the request with RetryAfter as its delay hint (HTTP 503 with Retry-After), Delay holds it for
// Delay (a slow reply), ExpireSession ends its session (HTTP 404), BreakStream cuts an SSE
// answer after its first event id, which CloseStream ends cleanly there (only on an HTTPServer
// made WithSSEResponses; elsewhere they do nothing, but still count as hits), and RefuseInFlight
// and RefuseIDReused refuse it as a server keeping receipts refuses an id (HTTP 409).
//
// The draws come from a math/rand/v2 PCG source seeded with Seed and are made under the server's
// mutex, one or two per selected request in arrival order: the same seed and the same order of
// arrival give the same faults. Concurrent clients make the order, and so the faults, vary from
// run to run; the rate does not.
//
// Random faults come on top of the faults injected with Inject or WithFault. initialize is never
// hit.
type RandomFaults struct {
	// Rate is the probability, from 0 to 1, that a selected request is hit.
	Rate float64
	// Seed seeds the source of the draws.
	Seed uint64
	// Kinds are the kinds drawn from, uniformly; a kind listed twice is drawn twice as often.
	Kinds []FaultKind
	// Method and Tool select requests as a Fault's do: "" for both selects every method but
	// initialize, and a Tool implies tools/call.
	Method string
	Tool   string
	// Delay is how long a Delay hit holds a request. Default 10ms.
	Delay time.Duration
	// RetryAfter is the delay hint of a Fail hit. Default 1s (over HTTP, Retry-After is in whole
	// seconds).
	RetryAfter time.Duration
}

// Defaults of RandomFaults.
const (
	DefaultRandomDelay      = 10 * time.Millisecond
	DefaultRandomRetryAfter = time.Second
)

type randomFaults struct {
	RandomFaults
	rng  *rand.Rand
	hits map[FaultKind]int
}

// WithRandomFaults makes the server disturb a random share of its requests; see RandomFaults and
// Server.InjectRandom.
func WithRandomFaults(rf RandomFaults) Option {
	r := newRandomFaults(rf)
	return optionFunc(func(s *Server) { s.setRandomLocked(r) })
}

// InjectRandom makes the server disturb a random share of its requests from now on, in place of
// any earlier RandomFaults (whose hits are forgotten); a zero Rate stops it, and so does
// ClearFaults. It panics on a Rate outside [0, 1], on a positive Rate without Kinds, and on a
// kind it does not know.
func (s *Server) InjectRandom(rf RandomFaults) {
	r := newRandomFaults(rf)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setRandomLocked(r)
}

// setRandomLocked puts r in place of the random faults in the server's fault list, at the
// position of the earlier ones or else at the end; a nil r removes them.
func (s *Server) setRandomLocked(r *randomFaults) {
	for i, f := range s.faults {
		if f.random != nil {
			if r == nil {
				s.faults = slices.Delete(s.faults, i, i+1)
			} else {
				f.random = r
			}
			return
		}
	}
	if r != nil {
		s.faults = append(s.faults, &activeFault{left: -1, random: r})
	}
}

func newRandomFaults(rf RandomFaults) *randomFaults {
	if !(rf.Rate >= 0 && rf.Rate <= 1) {
		panic(fmt.Sprintf("mcptest: RandomFaults.Rate %v is not in [0, 1]", rf.Rate))
	}
	if rf.Rate == 0 {
		return nil
	}
	if len(rf.Kinds) == 0 {
		panic("mcptest: RandomFaults with a positive Rate needs Kinds")
	}
	for _, k := range rf.Kinds {
		if k < DropBeforeExecution || k > lastFaultKind {
			panic(fmt.Sprintf("mcptest: RandomFaults: unknown fault kind %d", int(k)))
		}
	}
	if rf.Delay <= 0 {
		rf.Delay = DefaultRandomDelay
	}
	if rf.RetryAfter <= 0 {
		rf.RetryAfter = DefaultRandomRetryAfter
	}
	rf.Kinds = slices.Clone(rf.Kinds)
	return &randomFaults{
		RandomFaults: rf,
		rng:          rand.New(rand.NewPCG(rf.Seed, rf.Seed^0x9e3779b97f4a7c15)),
		hits:         make(map[FaultKind]int),
	}
}

// RandomFaultHits returns how many requests the random faults in place hit, by kind.
func (s *Server) RandomFaultHits() map[FaultKind]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.faults {
		if f.random != nil {
			return maps.Clone(f.random.hits)
		}
	}
	return map[FaultKind]int{}
}

// take draws the random fault of one request, if any, into p. The server's mutex is held.
func (r *randomFaults) take(method, tool string, p *faultPlan) {
	if !(&activeFault{Fault: Fault{Method: r.Method, Tool: r.Tool}}).matches(method, tool) {
		return
	}
	if r.rng.Float64() >= r.Rate {
		return
	}
	kind := r.Kinds[r.rng.IntN(len(r.Kinds))]
	r.hits[kind]++
	p.add(kind, r.RetryAfter, r.Delay)
}
