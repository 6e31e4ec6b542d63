package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/northstar-mcp/mcpclient"
)

// Unresolved yields the requests to server that are unresolved (see
// mcpclient.JournalRecord.Unresolved: open, or pending, uncertain or refused, and not superseded)
// and that no live claim holds, in this worker or another (a dead worker's, once its lease
// lapsed); see mcpclient.Journal. It waits for the settles this Journal is writing, and reads them in one query and yields them after, so that what the
// caller does with each (a Resend) does not hold the query open. A request it yields may be
// claimed by another worker before this one resends it: the Resend's claim is then refused with
// an error matching mcpclient.ErrRequestInFlight, and nothing is sent.
func (j *Journal) Unresolved(ctx context.Context, server string) iter.Seq2[mcpclient.JournalRecord, error] {
	return func(yield func(mcpclient.JournalRecord, error) bool) {
		if err := j.awaitAllSettles(ctx); err != nil {
			yield(mcpclient.JournalRecord{}, fmt.Errorf("postgres journal: waiting for the settles under way: %w", err))
			return
		}
		rows, err := j.pool.Query(ctx, j.q.unresolved, server)
		if err != nil {
			yield(mcpclient.JournalRecord{}, fmt.Errorf("postgres journal: %w", err))
			return
		}
		// Read whole before yielding, so that what the caller does with each (a Resend) does not
		// wait on the query's connection. A row that does not decode is reported by its id and
		// the others still come.
		type read struct {
			rec mcpclient.JournalRecord
			err error
		}
		var found []read
		for rows.Next() {
			rec, err := scanRecord(rows)
			if err != nil && !errors.Is(err, ErrCorrupt) {
				rows.Close()
				yield(mcpclient.JournalRecord{}, err)
				return
			}
			if err != nil {
				rec = mcpclient.JournalRecord{ID: rec.ID}
			}
			found = append(found, read{rec, err})
		}
		if err := rows.Err(); err != nil {
			yield(mcpclient.JournalRecord{}, fmt.Errorf("postgres journal: %w", err))
			return
		}
		for _, r := range found {
			if !yield(r.rec, r.err) {
				return
			}
		}
	}
}

// Lookup returns what the table holds of id: for a look at a request before deciding what to do
// with it. A settle of id that this Journal is writing is waited for first. The record is open
// while a claim's lease, live or lapsed, is on it.
func (j *Journal) Lookup(ctx context.Context, id mcpclient.ID) (rec mcpclient.JournalRecord, ok bool, err error) {
	if err := j.awaitSettles(ctx, []string{id.JSON()}); err != nil {
		return rec, false, fmt.Errorf("postgres journal: waiting for the settle under way: %w", err)
	}
	rows, err := j.pool.Query(ctx, j.q.lookup, id.JSON())
	if err != nil {
		return rec, false, fmt.Errorf("postgres journal: %w", err)
	}
	rec, err = pgx.CollectExactlyOneRow(rows, scanRecord)
	if errors.Is(err, pgx.ErrNoRows) {
		return rec, false, nil
	}
	return rec, err == nil, err
}

// Forget removes id's request; see mcpclient.Journal. A request a live claim holds, in this
// worker or another, is refused with an error matching mcpclient.ErrRequestInFlight: its holder
// may be sending it, and the record is what answers for that send. A settle of id that this
// Journal is writing is waited for first. Forgetting an id the table does not hold does nothing.
func (j *Journal) Forget(ctx context.Context, id mcpclient.ID) error {
	if err := j.awaitSettles(ctx, []string{id.JSON()}); err != nil {
		return fmt.Errorf("postgres journal: waiting for the settle under way: %w", err)
	}
	var gone, held int
	if err := j.pool.QueryRow(ctx, j.q.forget, id.JSON()).Scan(&gone, &held); err != nil {
		return fmt.Errorf("postgres journal: %w", err)
	}
	if gone == 0 && held > 0 {
		return fmt.Errorf("%w: a live claim holds request %s", mcpclient.ErrRequestInFlight, id.JSON())
	}
	return nil
}

// pruneBatch bounds the requests one prune deletes in one transaction, so that none holds
// locks on an unbounded backlog.
const pruneBatch = 1000

// Prune deletes the requests settled longer ago than the retention, and returns how many. One
// worker prunes at a time: when another is at it, Prune returns 0 at once. The Journal calls it
// in the background (every minute, or every half retention if that is less); call it to prune
// now.
func (j *Journal) Prune(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := j.pruneOnce(ctx)
		total += n
		if err != nil || n < pruneBatch {
			return total, err
		}
	}
}

func (j *Journal) pruneOnce(ctx context.Context) (n int, err error) {
	err = pgx.BeginFunc(ctx, j.pool, func(tx pgx.Tx) error {
		var mine bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))`, j.n.lock+" prune").Scan(&mine); err != nil || !mine {
			return err
		}
		return tx.QueryRow(ctx, j.q.prune, j.opts.retention.Milliseconds(), pruneBatch).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("postgres journal: pruning: %w", err)
	}
	return n, nil
}

// prune runs Prune in the background until the Journal closes.
func (j *Journal) prune() {
	defer j.wg.Done()
	t := time.NewTicker(min(time.Minute, j.opts.retention/2))
	defer t.Stop()
	for {
		select {
		case <-j.ctx.Done():
			return
		case <-t.C:
		}
		if _, err := j.Prune(j.ctx); err != nil && j.ctx.Err() == nil {
			j.opts.log.Warn("postgres journal: pruning", "err", err)
		}
	}
}

// scanRecord reads a row of columns.
func scanRecord(row pgx.CollectableRow) (mcpclient.JournalRecord, error) { return readRecord(row) }

// readRecord reads a row of columns, and after them the values of more.
func readRecord(row interface{ Scan(dest ...any) error }, more ...any) (mcpclient.JournalRecord, error) {
	var (
		rec                    mcpclient.JournalRecord
		id, state              string
		fp                     []byte
		header, supersedes, by *string
		scope                  string
		created, updated       time.Time
		attempts               int32
	)
	err := row.Scan(append([]any{&id, &rec.Server, &rec.Method, &rec.Frame, &fp, &header, &rec.Version, &rec.Idempotent, &scope,
		&rec.Receipts.Epoch, &state, &attempts, &created, &updated, &supersedes, &rec.Reason, &by, &rec.Reached, &rec.Open}, more...)...)
	if err != nil {
		return rec, fmt.Errorf("postgres journal: %w", err)
	}
	rec.Receipts.Scope = mcpclient.ReceiptScope(scope)
	rec.Attempts, rec.Created, rec.Updated = int(attempts), created, updated
	if err := rec.ID.UnmarshalJSON([]byte(id)); err != nil {
		rec.ID = mcpclient.StringID(id) // names the row in the report
		return rec, fmt.Errorf("%w: request %s: id: %v", ErrCorrupt, id, err)
	}
	if len(fp) != len(rec.Fingerprint) {
		return rec, fmt.Errorf("%w: request %s: a fingerprint of %d bytes", ErrCorrupt, id, len(fp))
	}
	copy(rec.Fingerprint[:], fp)
	if header != nil {
		rec.Header = http.Header{}
		if err := json.Unmarshal([]byte(*header), &rec.Header); err != nil {
			return rec, fmt.Errorf("%w: request %s: header: %v", ErrCorrupt, id, err)
		}
	}
	if rec.State = stateOf(state); rec.State == 0 {
		return rec, fmt.Errorf("%w: request %s: state %q", ErrCorrupt, id, state)
	}
	for _, l := range []struct {
		raw *string
		id  *mcpclient.ID
	}{{supersedes, &rec.Supersedes}, {by, &rec.SupersededBy}} {
		if l.raw != nil {
			if err := l.id.UnmarshalJSON([]byte(*l.raw)); err != nil {
				return rec, fmt.Errorf("%w: request %s: linked id: %v", ErrCorrupt, id, err)
			}
		}
	}
	return rec, nil
}

// ErrCorrupt reports a row that does not read as a request.
var ErrCorrupt = errors.New("postgres journal: corrupt record")

// stateOf reads a state's name; 0 for a name no state has.
func stateOf(name string) mcpclient.State {
	for s := mcpclient.StatePending; s <= mcpclient.StateConflict; s++ {
		if s.String() == name {
			return s
		}
	}
	return 0
}
