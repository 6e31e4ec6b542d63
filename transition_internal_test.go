package mcpclient

import (
	"testing"

	"github.com/northstar-mcp/mcpclient/transport"
)

// The one rule for an id's state, as a table: every prior state (none, as for a new id; or what
// an earlier loop, in this process or another, left) meets every outcome of an attempt.
func TestTransition(t *testing.T) {
	priors := []State{0, StateUncertain, StateAnswered, StateFailed, StateConflict}
	for _, prior := range priors {
		for _, tc := range []struct {
			outcome  transport.Outcome
			rpcError bool
			want     State
		}{
			{transport.Answered, false, StateAnswered},
			{transport.Answered, true, StateFailed},
			{transport.Conflict, false, StateConflict},
			{transport.Uncertain, false, StateUncertain},
			{transport.NotDelivered, false, prior}, // what was known stays
		} {
			if got := transition(prior, tc.outcome, tc.rpcError); got != tc.want {
				t.Errorf("%v after %v (JSON-RPC error %v): %v, want %v", prior, tc.outcome, tc.rpcError, got, tc.want)
			}
		}
	}
	for s, want := range map[State]State{0: StateFailed, StatePending: StateFailed, StateUncertain: StateUncertain,
		StateAnswered: StateAnswered, StateFailed: StateFailed, StateConflict: StateConflict} {
		if got := settledState(s); got != want {
			t.Errorf("a loop leaving %v settles %v, want %v", s, got, want)
		}
	}
}

// What the journal holds of an id is loaded as the flight's prior: an open record of a holder
// that is gone may have been sent after its state was written.
func TestAdoptPrior(t *testing.T) {
	for _, tc := range []struct {
		rec         JournalRecord
		prior       State
		wantReached bool
	}{
		{JournalRecord{State: StatePending, Open: true}, StateUncertain, true},
		{JournalRecord{State: StatePending}, StateUncertain, true}, // written before Open existed
		{JournalRecord{State: StateAnswered, Reached: true, Open: true}, StateAnswered, true},
		{JournalRecord{State: StateAnswered, Reached: true}, StateAnswered, true},
		{JournalRecord{State: StateFailed}, StateFailed, false},
		{JournalRecord{State: StateFailed, Open: true}, StateFailed, true},
		{JournalRecord{State: StateUncertain, Reached: true}, StateUncertain, true},
		{JournalRecord{State: StateConflict, Reached: true}, StateConflict, true},
	} {
		l := newLedger(0, nil, nil)
		req := &Request{key: `"a"`, requestSpec: requestSpec{id: StringID("a")}}
		f, leader, err := l.begin(req)
		if err != nil || !leader {
			t.Fatal(err)
		}
		l.adopt(req, f, tc.rec)
		if f.prior != tc.prior || f.reached != tc.wantReached {
			t.Errorf("%+v: prior %v reached %v, want %v %v", tc.rec, f.prior, f.reached, tc.prior, tc.wantReached)
		}
	}
}
