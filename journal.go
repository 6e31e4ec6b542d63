package mcpclient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"time"

	"github.com/northstar-mcp/mcpclient/internal/params"
	"github.com/northstar-mcp/mcpclient/internal/redact"
	"github.com/northstar-mcp/mcpclient/transport"
)

// A Journal is durable memory for a Client's ledger: it keeps every request's id, exact bytes and
// state where a restarted process, or another worker sharing it, can find them. With a journal
// (see [WithJournal]) a request is durably recorded before its first byte leaves the process, so
// that a process that dies with the request in flight leaves behind what a resend needs: the same
// bytes, the same id, and the receipt scope they were sent under. Package journal has one on a
// local file; a journal shared by several processes is one a database keeps.
//
// The client calls a Journal from many goroutines at once, never while holding a lock of its own.
type Journal interface {
	// Claim takes rec.ID for one attempt loop and returns the record as it stood before. A new
	// id is recorded, open, and Claim returns only once the record is durable. A known id keeps
	// its state (its outcome, whether it may have reached the server, the receipts of its last
	// send): Claim only marks it open and held, so that the attempt loop starts from what every
	// earlier process learned of it. Claim refuses, with an error matching:
	//   - ErrRequestIDReused, other content under a known id;
	//   - ErrRequestInFlight, an id another attempt loop holds (in this process or, for a
	//     shared journal, in another);
	//   - ErrAlreadySuperseded, a known id another request replaced;
	//   - ErrLedgerFull, a new id when the journal is full: it never drops an unresolved entry
	//     to make room.
	// When rec supersedes another id, the link is a compare-and-set on that entry, written with
	// rec: the first request to supersede it wins, and a later one is refused with
	// ErrAlreadySuperseded; while another attempt loop holds it, with ErrRequestInFlight, unless
	// rec is the re-issue its own loop makes (rec.Reissue).
	Claim(ctx context.Context, rec JournalRecord) (JournalClaim, error)

	// Unresolved yields the requests to server that are unresolved (see
	// [JournalRecord.Unresolved]) and that no live claim holds: what a restarted process must
	// resend or inspect. A record that cannot be read comes as an error with a record holding
	// only its ID, and the others follow; an error with a zero ID ends the iteration. It is a
	// snapshot: in a shared journal another holder may claim one of them before it is resent,
	// and the resend is then refused with ErrRequestInFlight.
	Unresolved(ctx context.Context, server string) iter.Seq2[JournalRecord, error]

	// Forget removes id's entry. The client calls it for [Ledger.Forget]. A journal refuses,
	// with ErrRequestInFlight, an entry a live claim holds.
	Forget(ctx context.Context, id ID) error
}

// A JournalClaim is one attempt loop's hold on an id, from Claim to Settle.
type JournalClaim interface {
	// Prior returns the record as it stood when it was claimed, and false for an id the
	// journal did not hold. Its Open is true when a holder that is gone (a process that died)
	// left it open: that holder may have sent it.
	Prior() (JournalRecord, bool)
	// Rebind durably records that the next attempt goes out under other receipts than the
	// last recorded (a reconnection found another scope or epoch), before it is sent.
	Rebind(ctx context.Context, b ReceiptBinding) error
	// Settle records how the attempt loop ended: the id's state, whether a send under it may
	// have reached the server (a journal keeps that once it is true), and the number of sends.
	// It closes the record and releases the claim, in that order, so that a later claim finds
	// the record settled. The journal may write it with later changes (group commit) and must
	// not keep the caller waiting on a database it cannot reach; a process that dies before it
	// is written, or a write that fails, leaves the request open, to be resent or inspected by
	// whoever recovers it, never lost.
	Settle(state State, reached bool, sent int)
	// Lost is closed when the claim can no longer be relied on (a shared journal's lease that
	// could not be renewed): the holder sends nothing more under the id. An attempt already
	// on the wire is not called back: if another holder resends the id meanwhile, the server's
	// receipts are what keep the request from running twice, so a shared journal's lease must
	// be long beside a call's duration.
	Lost() <-chan struct{}
}

// A ReceiptBinding is the receipt scope a request was sent under: the server's declared scope,
// and the epoch that names the server process holding the receipts, if it declared one.
type ReceiptBinding struct {
	Scope ReceiptScope `json:"scope,omitempty"`
	Epoch string       `json:"epoch,omitempty"`
}

// A JournalRecord is what a journal keeps of one request.
type JournalRecord struct {
	ID          ID          `json:"id"`
	Method      string      `json:"method"`
	Frame       []byte      `json:"frame"` // the exact bytes every attempt sends
	Fingerprint Fingerprint `json:"fingerprint"`
	// Header holds the transport headers that name the request in a stateless revision, and
	// Version that revision; both empty in the older ones.
	Header  http.Header `json:"header,omitempty"`
	Version string      `json:"version,omitempty"`
	// Idempotent records that the caller vouched the request is safe to run twice.
	Idempotent bool `json:"idempotent,omitempty"`
	// Server names the server the request is for (see [WithServerIdentity]), without the
	// secrets of its address.
	Server string `json:"server"`
	// Receipts is the binding of the last attempt, or for a new request of the session at hand
	// when it was claimed; the zero binding when none was known. A journal keeps it as it is
	// when a known id is claimed again: the client records the binding of its next send
	// (Rebind) before making it.
	Receipts ReceiptBinding `json:"receipts"`
	// State is the id's outcome as last settled: pending until a first attempt loop settles it.
	// A claim never resets it.
	State State `json:"state"`
	// Reached records that a send under the id may have reached the server; once true it stays
	// true, for a resend that is not delivered leaves the request's outcome as it was.
	Reached bool `json:"reached,omitempty"`
	// Open records that an attempt loop holds the id, or held it when its process died: an open
	// record that no live claim holds may have been sent by its last holder after its State was
	// written. A record written before Open existed reads as open while its State is pending.
	Open     bool      `json:"open,omitempty"`
	Attempts int       `json:"attempts,omitempty"`
	Created  time.Time `json:"created"`
	Updated  time.Time `json:"updated"`
	// Supersedes is the id this request replaces and Reason why; SupersededBy the id of the
	// request that replaced this one, set once.
	Supersedes   ID     `json:"supersedes,omitzero"`
	Reason       string `json:"reason,omitempty"`
	SupersededBy ID     `json:"supersededBy,omitzero"`
	// Reissue marks a request the client made itself to replace Supersedes within the attempt
	// loop that holds it (a request safe to repeat, re-issued under a new id after an uncertain
	// attempt): the one supersession a live claim on Supersedes does not refuse.
	Reissue bool `json:"reissue,omitempty"`
}

// Unresolved reports whether the record's outcome is still to be learned: no request replaced it,
// and it is open (a holder that may have sent it never settled it), or it may have been sent and
// no answer was recorded (pending, uncertain), or the server refused its id (conflict: still
// running, or the id is taken).
func (r *JournalRecord) Unresolved() bool {
	return r.SupersededBy.IsZero() && (r.Open || r.State == StatePending || r.State == StateUncertain || r.State == StateConflict)
}

// Settled reports whether nothing can still depend on the record once no live claim holds it: a
// request replaced it, or no holder left it open and its outcome is definite (answered, failed).
// A journal makes room, and prunes, only among settled records that no live claim holds.
func (r *JournalRecord) Settled() bool {
	return !r.SupersededBy.IsZero() || !r.Open && (r.State == StateAnswered || r.State == StateFailed)
}

// A Recovered request is one a journal holds unresolved from an earlier process: it was
// recorded and may have been sent, and no answer of it was recorded.
type Recovered struct {
	// Request is the request as it was frozen: Resend sends its bytes under its id.
	Request *Request
	// Record is what the journal holds of it.
	Record JournalRecord
}

// Recover lists the unresolved requests the client's journal holds for this client's server,
// left by an earlier process (or, in a shared journal, by a worker whose claim lapsed).
//
// Each comes with a nil error when resending it cannot run it twice, and then Resend re-reads its
// outcome: the request is safe to repeat, or it was sent under receipts that outlive the session
// (scope process, with an epoch) and the server declares the same epoch now. Resend checks the
// epoch again before sending anything, and ends in ErrOutcomeUnknown if it changed meanwhile. Any
// other request comes with an *Error matching ErrOutcomeUnknown naming it, as if the process had
// never stopped and the call had ended so: the caller inspects the server's state, then Resends
// it (which sends the same bytes under the same id, whatever the receipts: the caller decided),
// Supersedes it, or Forgets it. A record that cannot be read or rebuilt comes with an *Error of
// CodeJournal and its Record (its ID at least) but no Request, and the others follow; a journal
// that cannot be read at all yields a zero Recovered with its error, and stops.
func (c *Client) Recover(ctx context.Context) iter.Seq2[Recovered, error] {
	return func(yield func(Recovered, error) bool) {
		if c.cfg.journal == nil {
			yield(Recovered{}, returned(&Error{Code: CodeInvalidArgument, Err: errors.New("the client has no journal (WithJournal)")}))
			return
		}
		// The receipts the server declares now: a stateless server is asked again, since its
		// restart shows nowhere else. A session of an older revision declared them when it
		// opened; the Resend of a request found under them reads them fresh before it sends.
		// Without a session, nothing is known to hold.
		var now ReceiptBinding
		begun := discoverSerials.Load()
		s, nowErr := c.session(ctx)
		switch {
		case nowErr == nil && s.stateless:
			now, nowErr = c.freshBinding(ctx, s, begun)
		case nowErr == nil:
			now = bindingOf(s)
		}
		for rec, err := range c.unresolved(ctx) {
			if err != nil {
				// A record the journal could not read is reported by its id, and the others
				// still come; a journal that names none failed as a whole, and iterates no more.
				if !yield(Recovered{Record: rec}, returned(&Error{Code: CodeJournal, Err: err})) || rec.ID.IsZero() {
					return
				}
				continue
			}
			if c.Ledger().holds(rec.ID) {
				// A call of this process holds it, or has settled it since the journal was
				// read: it is no earlier process's to recover.
				continue
			}
			req, err := c.recovered(rec)
			if err == nil && !c.safeToRepeat(req) {
				switch {
				case receiptsHeld(rec.Receipts, now) && receiptsPruned(rec.Created, s):
					err = &Error{Code: CodeOutcomeUnknown, Request: req, Attempts: rec.Attempts,
						Err: fmt.Errorf("recovered from the journal: sent %s ago under %s, longer than the server keeps receipts (%s); the request is not safe to repeat", time.Since(rec.Created).Round(time.Second), rec.Receipts, s.receiptRetention())}
				case receiptsHeld(rec.Receipts, now):
					// Checked again before the Resend sends anything: the server may restart
					// in between, or the receipt outlive its retention.
					req.receiptsGuard = &rec.Receipts
					req.receiptsSince = rec.Created
				case nowErr != nil:
					err = &Error{Code: CodeOutcomeUnknown, Request: req, Attempts: rec.Attempts,
						Err: fmt.Errorf("recovered from the journal: sent under %s, and the receipts the server declares now could not be read (%w); the request is not safe to repeat", rec.Receipts, nowErr)}
				default:
					err = &Error{Code: CodeOutcomeUnknown, Request: req, Attempts: rec.Attempts,
						Err: fmt.Errorf("recovered from the journal: sent under %s, and the server now declares %s, which holds no receipt of it; the request is not safe to repeat", rec.Receipts, now)}
				}
			}
			if !yield(Recovered{Request: req, Record: rec}, returned(err)) {
				return
			}
		}
	}
}

func (b ReceiptBinding) String() string {
	switch {
	case b.Scope == "":
		return "no receipts"
	case b.Epoch == "":
		return "receipts of scope " + string(b.Scope)
	}
	return fmt.Sprintf("receipts of scope %s, epoch %q", b.Scope, b.Epoch)
}

// recovered rebuilds a request from its journal record: the same bytes, id and headers, owned by
// this client. Its content is read back from the bytes, for the calls that start from it (a
// Supersede keeping its params).
func (c *Client) recovered(rec JournalRecord) (*Request, error) {
	var frame struct {
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(rec.Frame, &frame); err != nil {
		return nil, &Error{Code: CodeJournal, Err: fmt.Errorf("record %s holds no request: %w", rec.ID.JSON(), err)}
	}
	spec := requestSpec{method: rec.Method, id: rec.ID, base: withoutMeta(frame.Params), version: rec.Version,
		supersedes: rec.Supersedes, reason: rec.Reason}
	if f, ok := params.Read(frame.Params); ok {
		spec.name, spec.uri, spec.args = f.Name, f.URI, f.Arguments
	}
	spec.idempotent = rec.Idempotent
	req := &Request{requestSpec: spec, key: rec.ID.JSON(), params: frame.Params, frame: rec.Frame,
		fp: rec.Fingerprint, header: rec.Header, owner: c}
	if req.fp != fingerprintOf(req.frame) {
		return nil, &Error{Code: CodeJournal, Request: req, Err: errors.New("the record's bytes do not match its fingerprint")}
	}
	return req, nil
}

// withoutMeta returns params without its _meta member, which the client wrote for the request's
// own id and revision and a request made from it writes afresh.
func withoutMeta(p json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(p, &m) != nil || m["_meta"] == nil {
		return p
	}
	delete(m, "_meta")
	b, _ := json.Marshal(m) // raw values that unmarshalled
	return b
}

// serverIdentity names the client's server in its journal records.
func (c *Client) serverIdentity() string {
	if c.cfg.serverIdentity != "" {
		return c.cfg.serverIdentity
	}
	return transportIdentity(c.transport)
}

// unresolved yields the journal's unresolved records for this client's server: those named by
// its identity, then those named by its address whole, secrets included, as earlier versions of
// this package named them; a journal holds such records until they settle and are pruned.
func (c *Client) unresolved(ctx context.Context) iter.Seq2[JournalRecord, error] {
	return func(yield func(JournalRecord, error) bool) {
		names := []string{c.serverIdentity()}
		if raw := rawTransportIdentity(c.transport); c.cfg.serverIdentity == "" && raw != names[0] {
			names = append(names, raw)
		}
		for _, name := range names {
			for rec, err := range c.cfg.journal.Unresolved(ctx, name) {
				if !yield(rec, err) || err != nil && rec.ID.IsZero() {
					return
				}
			}
		}
	}
}

// transportIdentity names the server a transport reaches, for the transports that say, without
// the secrets its address may carry: the journal outlives the process and is read by whoever
// recovers it, a shared one by every worker and the database's operators. An endpoint URL keeps
// its scheme, host, path and query keys, and loses its user name, password, query values and
// fragment; a command line keeps its program and loses its arguments. What was removed still
// tells servers apart through a digest of the whole (SHA-256, 128 bits): the same endpoint under
// another token or account is another server. A digest of a guessable password can be guessed
// back; a URL and command line with nothing to remove are kept as they are.
func transportIdentity(t transport.Transport) string {
	raw := rawTransportIdentity(t)
	var kept string
	switch t := t.(type) {
	case *transport.HTTP, *transport.SSE:
		kept = raw
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			u.User = nil
			kept = u.String()
		}
		kept = redact.URL(kept)
	case *transport.Command:
		if len(t.Args) == 0 {
			return raw
		}
		kept = fmt.Sprintf("command %q", t.Path)
	}
	if kept == raw {
		return raw
	}
	sum := sha256.Sum256([]byte(raw))
	return kept + " sha256:" + hex.EncodeToString(sum[:16])
}

// rawTransportIdentity is the endpoint's URL, or the command line of a server process, as it is.
func rawTransportIdentity(t transport.Transport) string {
	switch t := t.(type) {
	case *transport.HTTP:
		return t.URL
	case *transport.SSE:
		return t.URL
	case *transport.Command:
		return fmt.Sprintf("command %q %q", t.Path, t.Args)
	}
	return ""
}

// bindingOf is the receipt binding of what is sent on s.
func bindingOf(s *session) ReceiptBinding {
	if s == nil {
		return ReceiptBinding{}
	}
	return ReceiptBinding{Scope: s.receipts, Epoch: s.receiptEpoch}
}

// journalRecord is what the journal records of req when its attempt loop begins.
func (c *Client) journalRecord(req *Request) JournalRecord {
	now := time.Now()
	return JournalRecord{ID: req.id, Method: req.method, Frame: req.frame, Fingerprint: req.fp,
		Header: req.header, Version: req.version, Idempotent: req.idempotent, Server: c.serverIdentity(),
		Receipts: bindingOf(c.current()), State: StatePending, Open: true, Created: now, Updated: now,
		Supersedes: req.supersedes, Reason: req.reason, Reissue: req.automatic}
}
