package receipts

// A Verdict is what a server does with a request that opted into receipts.
type Verdict int

const (
	// Run: the key was unseen and is now claimed: run the request, then settle its response
	// (or release the claim if it failed before it ran).
	Run Verdict = iota + 1
	// Replay: the same bytes were answered: send the stored response, marked as a replay.
	Replay
	// Wait: the same bytes are running: wait for their response.
	Wait
	// InFlight: the same bytes are still running past the wait bound: refuse, the client
	// asks again later.
	InFlight
	// Reused: the key was used for other bytes: refuse, never run.
	Reused
	// InDoubt: the key was claimed and its holder died without a response: the outcome is
	// unknown, and the request is never run again.
	InDoubt
	// Full: the store holds only unresolved receipts and has no room: refuse before running.
	Full
)

func (v Verdict) String() string {
	switch v {
	case Run:
		return "run"
	case Replay:
		return "replay"
	case Wait:
		return "wait"
	case InFlight:
		return "in flight"
	case Reused:
		return "reused"
	case InDoubt:
		return "in doubt"
	case Full:
		return "full"
	}
	return "unknown"
}

// Decide maps the receipt a Store already holds for a request's key, and the request's
// fingerprint, to what the server does: Reused when the bytes differ, whatever the receipt's
// state; otherwise Replay a settled receipt, Wait for a running one, and answer InDoubt for a
// lapsed one. A state Decide does not know counts as lapsed: running a request twice is the
// one answer never allowed.
//
// The other verdicts come from the store itself: Run when Claim created the receipt, Full when
// it refused with ErrFull, and InFlight when a Wait outlasted its bound.
func Decide(r Receipt, fp Fingerprint) Verdict {
	if r.Fingerprint != fp {
		return Reused
	}
	switch r.State {
	case Settled:
		return Replay
	case Running:
		return Wait
	}
	return InDoubt
}
