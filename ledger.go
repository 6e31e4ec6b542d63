package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultLedgerCapacity is the number of requests a Client remembers unless
// [WithLedgerCapacity] says otherwise.
const DefaultLedgerCapacity = 10_000

// State is where a request stands in the ledger.
type State int

const (
	// StatePending: an attempt is under way.
	StatePending State = iota + 1
	// StateUncertain: bytes may have reached the server and no answer came.
	StateUncertain
	// StateAnswered: the server answered with a result (a tool's isError result included).
	StateAnswered
	// StateFailed: definitely failed: the server answered with a JSON-RPC error, or no attempt
	// was delivered.
	StateFailed
	// StateConflict: the server refused the id (in flight, or reused with other content).
	StateConflict
)

var stateNames = [...]string{
	StatePending:   "pending",
	StateUncertain: "uncertain",
	StateAnswered:  "answered",
	StateFailed:    "failed",
	StateConflict:  "conflict",
}

func (s State) String() string {
	if s > 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Entry is the ledger's record of one request id, as returned by [Ledger.Lookup].
type Entry struct {
	ID          ID
	Method      string
	Fingerprint Fingerprint
	State       State
	// Attempts counts the sends under this id.
	Attempts int
	Created  time.Time
	Updated  time.Time
	// Supersedes is the id this request replaces, and Reason why (an inspection record, or the
	// automatic re-issue of a safe request).
	Supersedes ID
	Reason     string
	// SupersededBy is the id of the request that replaced this one.
	SupersededBy ID
}

// A Ledger is a Client's memory of the request ids it has used: for each id, the fingerprint of
// the bytes sent under it and how the request stands. It is what lets the client refuse, before
// sending, other content under a used id.
//
// The ledger is bounded. When full it forgets the oldest resolved entries (answered, failed, or
// superseded by a request that took their place) and never an unresolved one; when every entry
// is unresolved it refuses new requests with ErrLedgerFull, as a full receipt store refuses new
// ids. A Supersede needs room too: it never evicts the entry it replaces, and on a full ledger it
// is refused. Room is made as requests settle, or by Forget, for an uncertain request whose
// outcome the caller has established by other means. Its memory lasts as long as the Client: a
// process restart forgets it, which is why ids are UUIDs rather than counters. A client with a
// journal (WithJournal) writes every entry through to it, and the journal's memory outlives the
// process: a restarted client refuses other content under an id the journal holds, and finds
// the requests left unresolved with Client.Recover.
//
// A Ledger is safe for concurrent use. Its one mutex is never held across I/O.
type Ledger struct {
	mu       sync.Mutex
	capacity int
	entries  map[string]*ledgerEntry
	// evictable holds the resolved entries, oldest resolution first.
	evictable evictionQueue
	// onJoin, set by tests only, runs under mu when a caller joins a flight.
	onJoin func(ID)
	// journal, if set, is where the ledger's entries are written through; only Forget calls it
	// here, the attempt loop the rest.
	journal Journal
}

type ledgerEntry struct {
	Entry
	// reached records that some attempt under the id may have reached the server. A later
	// resend inherits it: a refusal of the id may then be the server recognizing it, and a
	// resend that is not delivered leaves the request's outcome as it was.
	reached bool
	// receipts is the receipt binding of the last send that may have reached the server, and
	// via the session it went out on, if this process sent it: what a later send under the id
	// relies on to be answered from a receipt rather than run again.
	receipts ReceiptBinding
	via      uint64 // a session's serial; 0 for none of this process
	// flight is set while an attempt loop runs for the id, so that a second caller of the same
	// request waits for it instead of sending again.
	flight *flight
	// key is the entry's key in the ledger's map; queued reports that the entry is in the
	// ledger's evictable queue, where prev and next link it.
	key        string
	queued     bool
	prev, next *ledgerEntry
}

// An evictionQueue lists entries oldest first, linked through the entries themselves, so that
// queuing one allocates nothing.
type evictionQueue struct{ front, back *ledgerEntry }

func (q *evictionQueue) pushBack(e *ledgerEntry) {
	e.prev, e.next, e.queued = q.back, nil, true
	if q.back != nil {
		q.back.next = e
	} else {
		q.front = e
	}
	q.back = e
}

// remove takes e off the queue if it is queued.
func (q *evictionQueue) remove(e *ledgerEntry) {
	if !e.queued {
		return
	}
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		q.front = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		q.back = e.prev
	}
	e.prev, e.next, e.queued = nil, nil, false
}

// A flight is one run of the attempt loop for an id. prior, reached, receipts and via are
// written by begin, and by adopt with what the journal holds, before the flight's first send;
// resp and err are written once, before done is closed, and read only after.
type flight struct {
	prior    State // the id's state before this flight; 0 for a new id
	reached  bool  // an earlier flight's attempt may have reached the server
	receipts ReceiptBinding
	via      uint64
	// record is the id's record as it stood, when it was answered: what an ErrAlreadyAnswered
	// shows; nil otherwise, which is every new request's case.
	record *JournalRecord
	// done is closed when the flight ends, for the callers that joined it; made by the first
	// of them (guarded by the ledger's mu until the flight ends), so that a flight nobody
	// joins makes none.
	done chan struct{}
	resp *Response
	err  error
	// claim is the journal's hold on the id for this flight, set by its leader before the first
	// send and released by settle; nil without a journal. sent counts the flight's sends, for
	// the journal. guarded by the ledger's mu.
	claim JournalClaim
	bound ReceiptBinding // the receipts the journal holds for the id
	sent  int
}

func newLedger(capacity int, onJoin func(ID), journal Journal) *Ledger {
	if capacity <= 0 {
		capacity = DefaultLedgerCapacity
	}
	return &Ledger{capacity: capacity, onJoin: onJoin, journal: journal}
}

// Lookup returns the entry for id.
func (l *Ledger) Lookup(id ID) (Entry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[id.JSON()]
	if !ok {
		return Entry{}, false
	}
	return e.Entry, true
}

// holds reports whether an attempt loop of this client holds id, or has settled it: a record of
// it that a journal read earlier may be out of date.
func (l *Ledger) holds(id ID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[id.JSON()]
	return ok && (e.flight != nil || e.settled())
}

// Len returns the number of entries.
func (l *Ledger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

// Cap returns the most entries the ledger holds.
func (l *Ledger) Cap() int { return l.capacity }

// errLocalReuse is the cause of a reuse refused before sending.
var errLocalReuse = errors.New("the ledger holds other content under this id; refused before sending")

// check refuses req if its id is known with other content.
func (l *Ledger) check(req *Request) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.entries[req.key]; ok && e.Fingerprint != req.fp {
		return errLocalReuse
	}
	return nil
}

// begin starts a flight for req. If one is already under way for the same id and bytes, it
// returns that flight with leader false, and the caller waits on it.
func (l *Ledger) begin(req *Request) (f *flight, leader bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	e, ok := l.entries[req.key]
	if ok {
		if e.Fingerprint != req.fp {
			return nil, false, &Error{Code: CodeRequestIDReused, Request: req, Err: errLocalReuse}
		}
		if e.flight != nil {
			if l.onJoin != nil {
				l.onJoin(req.id)
			}
			if e.flight.done == nil {
				e.flight.done = make(chan struct{})
			}
			return e.flight, false, nil
		}
		if !e.SupersededBy.IsZero() {
			return nil, false, supersededError(req, e.SupersededBy)
		}
		l.evictable.remove(e)
	} else {
		var older *ledgerEntry
		if !req.supersedes.IsZero() {
			older = l.entries[req.supersedes.JSON()]
		}
		if older != nil && !req.automatic {
			// Checked here, under the lock, so that a Resend of the older request cannot start
			// between the caller's look at it and this request: one operation, one live request.
			switch {
			case older.flight != nil:
				return nil, false, &Error{Code: CodeRequestInFlight, Request: req,
					Err: fmt.Errorf("request %s, which this one supersedes, is in flight; wait for its outcome", req.supersedes.JSON())}
			case !older.SupersededBy.IsZero():
				return nil, false, &Error{Code: CodeSuperseded, Request: req,
					Err: fmt.Errorf("%w: request %s was superseded by %s; supersede that one", ErrAlreadySuperseded, req.supersedes.JSON(), older.SupersededBy.JSON())}
			}
		}
		// The entry being superseded is never the one evicted to make room: it stays, as the
		// record of what was sent under its id.
		if len(l.entries) >= l.capacity && !l.evictOldest(older) {
			return nil, false, &Error{Code: CodeLedgerFull, Request: req,
				Err: fmt.Errorf("all %d entries are unresolved", l.capacity)}
		}
		e = &ledgerEntry{Entry: Entry{ID: req.id, Method: req.method, Fingerprint: req.fp, Created: now,
			Supersedes: req.supersedes, Reason: req.reason}, key: req.key}
		if l.entries == nil {
			l.entries = make(map[string]*ledgerEntry)
		}
		l.entries[req.key] = e
		if older != nil {
			// Linked only now that the replacement is admitted: a refused one leaves the
			// older entry exactly as it was, unresolved if it was.
			older.SupersededBy = req.id
			l.markEvictableLocked(older) // not while it is in flight: an automatic re-issue
		}
	}
	f = &flight{prior: e.State, reached: e.reached, receipts: e.receipts, via: e.via}
	if e.State == StateAnswered {
		f.record = &JournalRecord{ID: e.ID, Method: e.Method, Frame: req.frame, Fingerprint: e.Fingerprint, State: e.State,
			Reached: e.reached, Receipts: e.receipts, Attempts: e.Attempts, Created: e.Created, Updated: e.Updated,
			Supersedes: e.Supersedes, Reason: e.Reason}
	}
	e.State = StatePending
	e.Updated = now
	e.flight = f
	return f, true, nil
}

// answeredBefore is what the client holds of an id's answer when a flight may send it again.
type answeredBefore struct {
	record *JournalRecord
	via    uint64 // the serial of the session it was answered on, if this process sent it
}

// answered returns how f's id was answered before f, or nil if it was not.
func (f *flight) answered() *answeredBefore {
	if f.prior != StateAnswered {
		return nil
	}
	return &answeredBefore{record: f.record, via: f.via}
}

// supersededError refuses to send req again: another request replaced it.
func supersededError(req *Request, by ID) *Error {
	return &Error{Code: CodeSuperseded, Request: req,
		Err: fmt.Errorf("%w by request %s, which took its place; sending it again could run it beside its replacement", ErrAlreadySuperseded, by.JSON())}
}

// adopt loads into f, the flight its leader holds, the record of the id as the journal held it
// when f claimed it: the journal is the id's memory across processes, and a flight starts from
// what every earlier one learned, not from "new" because this process never sent it. A record
// left open by a holder that is gone may have been sent by it after its state was written: it
// counts as reached, and with no outcome recorded, as uncertain.
func (l *Ledger) adopt(req *Request, f *flight, prior JournalRecord) {
	state, reached := prior.State, prior.Reached
	if prior.Open || state == StatePending {
		reached = true
		if state == StatePending || state == 0 {
			state = StateUncertain
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[req.key]
	if !ok || e.flight != f {
		return
	}
	sameReceipts := f.receipts == prior.Receipts
	f.prior, f.reached, f.receipts = state, reached || f.reached, prior.Receipts
	f.record = &prior
	if !sameReceipts {
		// Another process sent it last: the session this one knew is not the one it went on.
		f.via = 0
	}
	e.reached, e.receipts, e.via = f.reached, f.receipts, f.via
	e.Attempts = max(e.Attempts, prior.Attempts)
	if !prior.Created.IsZero() && prior.Created.Before(e.Created) {
		e.Created = prior.Created
	}
}

// evictOldest forgets the oldest resolved entry other than keep, and reports whether there was
// one.
func (l *Ledger) evictOldest(keep *ledgerEntry) bool {
	for e := l.evictable.front; e != nil; e = e.next {
		if e != keep {
			l.evictable.remove(e)
			delete(l.entries, e.key)
			return true
		}
	}
	return false
}

// Forget removes id's entry, whatever its state, so that it takes no room: for a request whose
// outcome the caller has established by other means (it looked at the server's state after an
// uncertain outcome, say) and will neither Resend nor Supersede. Afterwards the ledger no longer
// guards the id: the request's bytes and history are gone from it, and a pinned id could carry
// other content. Forget refuses, with ErrRequestInFlight, an entry whose attempt loop is still
// running; forgetting an id the ledger does not hold does nothing. With a journal, the id is
// forgotten there too (a recovered request the ledger never held included), and an error of the
// journal's comes with CodeJournal.
func (l *Ledger) Forget(id ID) error {
	inFlight := func() error {
		return returned(&Error{Code: CodeRequestInFlight, Err: fmt.Errorf("an attempt loop runs for request %s; wait for its outcome before forgetting it", id.JSON())})
	}
	l.mu.Lock()
	e, ok := l.entries[id.JSON()]
	busy := ok && e.flight != nil
	l.mu.Unlock()
	if busy {
		return inFlight()
	}
	// The journal first: an id it refuses to forget (another worker holds it) stays guarded
	// here too.
	if l.journal != nil {
		if err := l.journal.Forget(context.Background(), id); err != nil {
			code := CodeJournal
			if errors.Is(err, ErrRequestInFlight) {
				code = CodeRequestInFlight
			}
			return returned(&Error{Code: code, Err: err})
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.entries[id.JSON()]; ok {
		if e.flight != nil {
			return inFlight()
		}
		l.evictable.remove(e)
		delete(l.entries, id.JSON())
	}
	return nil
}

// created returns when key's entry was made, just before the first send under it, or when an
// earlier process first sent it (see adopt): what the retention of the id's receipt is measured
// from. Zero for an id the ledger does not hold.
func (l *Ledger) created(key string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.entries[key]; ok {
		return e.Created
	}
	return time.Time{}
}

// attempted counts one more send under key.
func (l *Ledger) attempted(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.entries[key]; ok {
		e.Attempts++
		e.Updated = time.Now()
		if e.flight != nil {
			e.flight.sent++
		}
	}
}

// settle records how a flight ended and releases its waiters. via, if not nil, is the session
// of the flight's last attempt that may have reached the server.
func (l *Ledger) settle(key string, f *flight, state State, via *session, resp *Response, err error) {
	l.mu.Lock()
	reached := f.reached || via != nil
	if e, ok := l.entries[key]; ok && e.flight == f {
		e.State = state
		e.reached = e.reached || reached
		reached = e.reached
		if via != nil {
			e.receipts, e.via = bindingOf(via), via.serial
		}
		e.Updated = time.Now()
		e.flight = nil
		l.markEvictableLocked(e)
	}
	f.resp, f.err = resp, err
	sent, done := f.sent, f.done
	l.mu.Unlock()
	if f.claim != nil {
		// Written before the waiters are released: a caller that goes on to the id's next
		// flight finds this one's outcome in the journal.
		f.claim.Settle(state, reached, sent)
	}
	if done != nil {
		close(done)
	}
}

// abandon ends a flight that sent nothing because the journal would not record it, and leaves
// the ledger as the flight found it: a new id is forgotten, with its link from the request it was
// to supersede, and a known one keeps the state it had.
func (l *Ledger) abandon(req *Request, f *flight, err error) {
	l.mu.Lock()
	if e, ok := l.entries[req.key]; ok && e.flight == f {
		e.flight = nil
		if f.prior != 0 {
			e.State = f.prior
			l.markEvictableLocked(e)
		} else {
			delete(l.entries, req.key)
			if older := l.entries[req.supersedes.JSON()]; !req.supersedes.IsZero() && older != nil && older.SupersededBy == req.id {
				older.SupersededBy = ID{}
				if !older.settled() {
					l.evictable.remove(older)
				}
			}
		}
	}
	f.err = err
	done := f.done
	l.mu.Unlock()
	if done != nil {
		close(done)
	}
}

// markEvictableLocked queues e for eviction once nothing can still depend on remembering it:
// its outcome is definite, or a deliberate replacement took its place.
func (l *Ledger) markEvictableLocked(e *ledgerEntry) {
	if e.queued || e.flight != nil {
		return
	}
	if e.settled() {
		l.evictable.pushBack(e)
	}
}

// settled reports whether nothing can still depend on remembering e once no flight holds it,
// by the journal's own rule (JournalRecord.Settled): memory and journal judge an id alike.
func (e *ledgerEntry) settled() bool {
	rec := JournalRecord{State: e.State, SupersededBy: e.SupersededBy, Open: e.flight != nil}
	return rec.Settled()
}
