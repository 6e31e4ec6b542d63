package postgres

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/northstar-mcp/mcpclient"
)

// maxTries bounds the transactions one Claim runs: another worker may record the same new id
// between this one's look and its insert, and PostgreSQL may end one of two deadlocked
// transactions; either is worth another try.
const maxTries = 5

// errRaced reports a new id that another claim recorded first: the next try finds it known.
var errRaced = errors.New("postgres journal: the id was recorded meanwhile")

// Claim records rec if its id is new and leases it to this claim, durably, before returning;
// see mcpclient.Journal. A known id is checked against rec's fingerprint and the request that
// may have replaced it, and its lease taken only if no live claim holds it, in this worker or
// another; its record stays as it was (its state, whether it may have reached the server, the
// receipts of its last send), returned by the claim's Prior. A new request that supersedes
// another links it in the same transaction, only if no request replaced it first and no live
// claim holds it but, for a re-issue (rec.Reissue), a claim of this Journal. The claim renews its
// lease until Settle.
//
// A Settle of the id (or of the one rec supersedes) that this Journal is still writing is
// waited for first, so that the claim finds the record it leaves rather than its lease.
//
// The commit is waited for whatever ctx does once it is under way, so that a caller giving up
// does not leave a request in the table that Claim reported unrecorded; ctx bounds what comes
// before. (A connection lost during the commit still can: that row, never sent, is found by
// recovery once its lease lapses, and reported like any other.)
func (j *Journal) Claim(ctx context.Context, rec mcpclient.JournalRecord) (mcpclient.JournalClaim, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !j.enter() {
		return nil, ErrClosed
	}
	c := &claim{j: j, key: rec.ID.JSON(), token: rand.Text(), lost: make(chan struct{}), written: make(chan struct{})}
	keys := []string{c.key}
	if !rec.Supersedes.IsZero() {
		keys = append(keys, rec.Supersedes.JSON())
	}
	if err := j.awaitSettles(ctx, keys); err != nil {
		j.wg.Done()
		return nil, fmt.Errorf("postgres journal: waiting for a settle of request %s under way: %w", c.key, err)
	}
	// The lease is measured from before the transaction began: the database's now() in it is
	// later, so the worker's idea of the lease never outlasts the database's.
	c.start = time.Now()
	c.renewed = c.start
	recorded, err := j.fastClaim(ctx, c, &rec)
	if err == nil && !recorded {
		waited := false
		for try := 1; ; try++ {
			err = j.claim(ctx, c, &rec)
			if errors.Is(err, mcpclient.ErrLedgerFull) && !waited && j.settlesUnderWay() {
				// A settle this Journal is writing may make room: a caller that saw its call
				// end is not told the journal is full for want of it.
				waited = true
				if j.awaitAllSettles(ctx) == nil {
					continue
				}
			}
			if !retryable(err) || try == maxTries {
				break
			}
		}
	}
	if err != nil {
		j.wg.Done()
		if errors.Is(err, errRaced) {
			err = fmt.Errorf("%w: request %s is being recorded by another claim", mcpclient.ErrRequestInFlight, c.key)
		}
		return nil, err
	}
	j.claims.Add(1)
	c.ctx, c.cancel = context.WithCancel(j.ctx)
	c.deadline = c.start.Add(j.opts.lease - j.opts.lease/10)
	// A claim that took long renews before it is used, so that the first send does not go out
	// on the last of a lease: Lost is checked before a send, and the renewal that would have
	// closed it might come only after.
	switch {
	case !time.Now().Before(c.deadline):
		c.lose("the lease ran out while it was being taken")
	case time.Since(c.start) > j.opts.lease/3:
		if ok, err := c.extend(); err == nil && !ok {
			c.lose("the lease lapsed while it was being taken")
		}
	}
	j.mu.Lock()
	j.holding[c.key] = c.token
	j.mu.Unlock()
	go c.hold() // the Claim's count in j.wg passes to it
	return c, nil
}

// holds reports whether a claim of this Journal holds key under token, and has not settled.
func (j *Journal) holds(key, token string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.holding[key] == token
}

// Prior returns the record as the table held it before the claim, and false for a new request;
// see mcpclient.JournalClaim. Its Open is true when a holder's lease had lapsed on it unsettled.
func (c *claim) Prior() (mcpclient.JournalRecord, bool) { return c.prior, c.known }

func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.Is(err, errRaced) ||
		errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001") // deadlock, serialization
}

// fastClaim records a new request that supersedes none in one statement, which is one round
// trip and one commit, when a shard not held by another claim has room. recorded is false when
// it did not: the id is known, or the request must wait for a shard or make room, which the
// transaction of claim does. As with a commit, the statement is waited for whatever ctx does.
func (j *Journal) fastClaim(ctx context.Context, c *claim, rec *mcpclient.JournalRecord) (recorded bool, err error) {
	if !rec.Supersedes.IsZero() {
		return false, nil
	}
	header, err := headerOf(rec)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), j.opts.lease)
	defer cancel()
	tag, err := j.pool.Exec(ctx, j.q.fastInsert, c.key, rec.Server, rec.Method, rec.Frame, rec.Fingerprint[:], header,
		rec.Version, rec.Idempotent, string(rec.Receipts.Scope), rec.Receipts.Epoch, nil, rec.Reason,
		j.opts.worker, c.token, j.opts.lease.Milliseconds(), j.opts.capacity/shards, j.opts.capacity%shards, shardOf(c.key))
	if err != nil {
		return false, fmt.Errorf("postgres journal: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// headerOf is rec's header as JSON text, or nil.
func headerOf(rec *mcpclient.JournalRecord) (*string, error) {
	if rec.Header == nil {
		return nil, nil
	}
	b, err := json.Marshal(rec.Header)
	if err != nil {
		return nil, fmt.Errorf("postgres journal: header: %w", err)
	}
	s := string(b)
	return &s, nil
}

// claim runs one transaction of Claim.
func (j *Journal) claim(ctx context.Context, c *claim, rec *mcpclient.JournalRecord) error {
	tx, err := j.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres journal: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, j.q.durable); err != nil {
		return fmt.Errorf("postgres journal: %w", err)
	}
	lease := j.opts.lease.Milliseconds()
	var live bool
	switch prior, err := readRecord(tx.QueryRow(ctx, j.q.known, c.key), &live); {
	case err == nil:
		switch {
		case prior.Fingerprint != rec.Fingerprint:
			return fmt.Errorf("%w: the journal holds other content under request %s", mcpclient.ErrRequestIDReused, c.key)
		case !prior.SupersededBy.IsZero():
			// Sent again, it could run beside its replacement.
			return fmt.Errorf("%w: request %s was superseded by %s", mcpclient.ErrAlreadySuperseded, c.key, prior.SupersededBy.JSON())
		case live:
			return fmt.Errorf("%w: a live claim holds request %s", mcpclient.ErrRequestInFlight, c.key)
		}
		if _, err := tx.Exec(ctx, j.q.claimKnown, c.key, j.opts.worker, c.token, lease); err != nil {
			return fmt.Errorf("postgres journal: %w", err)
		}
		c.prior, c.known = prior, true
	case errors.Is(err, pgx.ErrNoRows):
		if err := j.record(ctx, tx, c, rec, lease); err != nil {
			return err
		}
		c.prior, c.known = mcpclient.JournalRecord{}, false
	default:
		return err
	}
	// A caller that gives up while the commit is under way would not know whether the request
	// was recorded: the commit is waited for, within the lease, which is about to run anyway.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), j.opts.lease)
	defer cancel()
	if err := tx.Commit(cctx); err != nil {
		return fmt.Errorf("postgres journal: commit: %w", err)
	}
	return nil
}

// record inserts a new request in tx, in a shard with room, or in the place of the oldest
// settled request when every shard is full; linking the request it supersedes first, so that
// row locks are always taken before a shard's (which keeps claims from deadlocking).
func (j *Journal) record(ctx context.Context, tx pgx.Tx, c *claim, rec *mcpclient.JournalRecord, lease int64) error {
	var supersedes *string
	if !rec.Supersedes.IsZero() {
		s := rec.Supersedes.JSON()
		supersedes = &s
		if err := j.link(ctx, tx, s, c.key, rec.Reissue); err != nil {
			return err
		}
	}
	shard, err := j.slot(ctx, tx, c.key, supersedes)
	if err != nil {
		return err
	}
	header, err := headerOf(rec)
	if err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, j.q.insert, c.key, rec.Server, rec.Method, rec.Frame, rec.Fingerprint[:], header,
		rec.Version, rec.Idempotent, string(rec.Receipts.Scope), rec.Receipts.Epoch, supersedes, rec.Reason,
		j.opts.worker, c.token, lease, shard)
	if err != nil {
		return fmt.Errorf("postgres journal: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return errRaced
	}
	return nil
}

// link records in tx that key supersedes older, as a compare-and-set: the first request to
// supersede older wins, and a later one is refused with an error matching
// mcpclient.ErrAlreadySuperseded, since both replacements could run; while a live claim holds
// older (its holder may be sending it), the link is refused with one matching
// mcpclient.ErrRequestInFlight, unless key is the re-issue that claim's own loop makes (a claim
// of this Journal holds older). The row stays locked until tx ends, so that a claim of older
// that follows finds the link. An older id the table does not hold (forgotten, pruned, or never
// recorded here) has nothing to link.
func (j *Journal) link(ctx context.Context, tx pgx.Tx, older, key string, reissue bool) error {
	var by, holder *string
	switch err := tx.QueryRow(ctx, j.q.older, older).Scan(&by, &holder); {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("postgres journal: %w", err)
	case by != nil:
		return fmt.Errorf("%w: request %s was superseded by %s", mcpclient.ErrAlreadySuperseded, older, *by)
	case holder != nil && !(reissue && j.holds(older, *holder)):
		return fmt.Errorf("%w: a live claim holds request %s, which %s would supersede", mcpclient.ErrRequestInFlight, older, key)
	}
	tag, err := tx.Exec(ctx, j.q.supersede, older, key, holder)
	if err == nil && tag.RowsAffected() != 1 {
		err = errors.New("the row changed under its lock")
	}
	if err != nil {
		return fmt.Errorf("postgres journal: linking request %s to %s: %w", older, key, err)
	}
	return nil
}

// slot takes room for a new request under key: a shard whose count is below its share of the
// capacity, locked until the transaction ends; or, when all are full, the shard of the oldest
// settled request that no claim holds, which is deleted to make the room.
func (j *Journal) slot(ctx context.Context, tx pgx.Tx, key string, keep *string) (int, error) {
	share, extra, first := j.opts.capacity/shards, j.opts.capacity%shards, shardOf(key)
	var shard int
	err := tx.QueryRow(ctx, j.q.slotSkipLocked, share, extra, first).Scan(&shard)
	if errors.Is(err, pgx.ErrNoRows) {
		err = tx.QueryRow(ctx, j.q.slotWait, share, extra, first).Scan(&shard)
	}
	if err == nil {
		return shard, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("postgres journal: %w", err)
	}
	var victim string
	switch err := tx.QueryRow(ctx, j.q.victim, keep).Scan(&victim, &shard); {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, fmt.Errorf("%w: all %d requests in the journal are unresolved or held", mcpclient.ErrLedgerFull, j.opts.capacity)
	case err != nil:
		return 0, fmt.Errorf("postgres journal: %w", err)
	}
	if err := tx.QueryRow(ctx, j.q.lockSlot, shard).Scan(&shard); err != nil {
		return 0, fmt.Errorf("postgres journal: %w", err)
	}
	if _, err := tx.Exec(ctx, j.q.evict, victim); err != nil {
		return 0, fmt.Errorf("postgres journal: %w", err)
	}
	return shard, nil
}

// A claim is an attempt loop's lease on one request.
type claim struct {
	j     *Journal
	key   string
	token string // names this claim in the row's lease_token
	// prior is the record as the table held it before the claim, and known whether it held
	// one; written by Claim only.
	prior mcpclient.JournalRecord
	known bool
	// start is when Claim began, and renewed when the last successful renewal was asked for
	// (start until there is one): the lease is measured from them, since the database's now()
	// is later. deadline is when the claim is lost without another renewal. Written by Claim,
	// then by hold only.
	start, renewed, deadline time.Time

	// lost is closed, once, when the lease can no longer be relied on: by Claim, when the lease
	// lapsed before it returned, or else by hold.
	lost chan struct{}
	// ctx ends when Settle is called or the Journal closes; hold stops renewing then.
	ctx     context.Context
	cancel  context.CancelFunc
	settled atomic.Bool

	// mu hands the outcome from Settle to hold, which writes it: Settle sets outcome unless
	// hold has ended, and hold takes it when it ends renewing.
	mu      sync.Mutex
	outcome *outcome // guarded by mu
	ended   bool     // guarded by mu
	// written is closed when the outcome's write is over, whether or not it succeeded.
	written chan struct{}
}

// An outcome is what Settle records.
type outcome struct {
	state   mcpclient.State
	reached bool
	sent    int
}

// hold renews the lease until Settle or Close, and then writes the outcome Settle gave, if any.
// It is the claim's one goroutine, counted in the Journal's WaitGroup, so that Close waits for
// the write.
func (c *claim) hold() {
	defer c.j.wg.Done()
	c.renew()
	<-c.ctx.Done() // renew returns early when the lease is lost; Settle still writes, if it can
	c.j.mu.Lock()
	if c.j.holding[c.key] == c.token {
		delete(c.j.holding, c.key)
	}
	c.j.mu.Unlock()
	c.mu.Lock()
	c.ended = true
	o := c.outcome
	c.mu.Unlock()
	if o == nil {
		// The Journal closed first: no one renews the lease from now on.
		select {
		case <-c.lost:
		default:
			c.lose("the journal closed")
		}
		return
	}
	c.write(*o)
}

// renew extends the lease every third of its length until the claim settles or the Journal
// closes. It returns early when the lease is lost: when a renewal finds it taken or lapsed, or
// when none succeeds before the worker's own deadline.
func (c *claim) renew() {
	select {
	case <-c.lost: // lost before Claim returned
		return
	default:
	}
	lease := c.j.opts.lease
	next := time.NewTimer(max(time.Until(c.renewed.Add(lease/3)), 0))
	defer next.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-next.C:
		}
		if c.ctx.Err() != nil { // settled or closed meanwhile: the claim is not lost
			return
		}
		if !time.Now().Before(c.deadline) {
			c.lose("no renewal succeeded in time")
			return
		}
		switch ok, err := c.extend(); {
		case err == nil && ok:
			next.Reset(lease / 3)
		case err == nil:
			c.lose("the lease lapsed or passed to another claim")
			return
		default:
			if c.ctx.Err() == nil {
				c.j.opts.log.Warn("postgres journal: renewing a lease", "id", c.key, "err", err)
			}
			next.Reset(min(lease/10, max(time.Until(c.deadline), 0)))
		}
	}
}

// extend renews the lease, if it is still the claim's and live, moving the claim's deadline: the
// lease measured from before the renewal was asked for, less a tenth, so that a send decided
// just before the deadline is on its way before the database could let another worker take the
// id. ok is false when the lease was taken or had lapsed.
func (c *claim) extend() (ok bool, err error) {
	lease := c.j.opts.lease
	asked := time.Now()
	ctx, cancel := context.WithDeadline(c.ctx, c.deadline) // later, it would be of no use
	defer cancel()
	tag, err := c.j.pool.Exec(ctx, c.j.q.extend, c.key, c.token, lease.Milliseconds())
	if err != nil {
		return false, err
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	c.renewed, c.deadline = asked, asked.Add(lease-lease/10)
	return true, nil
}

func (c *claim) lose(why string) {
	c.j.lost.Add(1)
	c.j.opts.log.Warn("postgres journal: claim lost", "id", c.key, "why", why)
	close(c.lost)
}

// Lost is closed when the lease can no longer be relied on: a renewal found it taken or lapsed,
// none succeeded in time, or the Journal closed. Once Settle is called it is not closed.
func (c *claim) Lost() <-chan struct{} { return c.lost }

// Rebind durably records the receipts of the next send, if the claim still holds its lease;
// otherwise it fails with ErrLeaseLost.
func (c *claim) Rebind(ctx context.Context, b mcpclient.ReceiptBinding) error {
	select {
	case <-c.lost:
		return fmt.Errorf("%w: request %s", ErrLeaseLost, c.key)
	default:
	}
	tag, err := c.j.pool.Exec(ctx, c.j.q.rebind, c.key, c.token, string(b.Scope), b.Epoch)
	switch {
	case err != nil:
		return fmt.Errorf("postgres journal: %w", err)
	case tag.RowsAffected() == 0:
		return fmt.Errorf("%w: request %s", ErrLeaseLost, c.key)
	}
	return nil
}

// Settle records the state, whether a send may have reached the server, and the sends, closes
// the record and releases the lease; see mcpclient.JournalClaim. It returns at once: the claim's
// goroutine writes it, within the lease's length, and the Journal's Claim, Lookup, Forget and
// Unresolved wait for that write, so that this worker reads what it settled. A Settle that fails
// (the database is unreachable, or the Journal closed first) is logged and counted in
// Stats.SettleFailures, and leaves the request open under a lease that lapses, for another
// worker to recover.
func (c *claim) Settle(state mcpclient.State, reached bool, sent int) {
	if !c.settled.CompareAndSwap(false, true) {
		return
	}
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		c.j.settleFailures.Add(1)
		c.j.opts.log.Warn("postgres journal: settling after the journal closed: not written, the request stays open", "id", c.key, "state", state)
		return
	}
	c.outcome = &outcome{state, reached, sent}
	c.j.mu.Lock()
	c.j.settling[c.key] = c.written
	c.j.mu.Unlock()
	c.mu.Unlock()
	c.cancel()
}

// write writes o, bounded by the lease: past it the request is another worker's to recover.
func (c *claim) write(o outcome) {
	j := c.j
	defer func() {
		j.mu.Lock()
		if j.settling[c.key] == c.written {
			delete(j.settling, c.key)
		}
		j.mu.Unlock()
		close(c.written)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), j.opts.lease)
	defer cancel()
	tag, err := j.pool.Exec(ctx, j.q.settle, c.key, c.token, o.state.String(), o.sent, o.reached)
	if err == nil && tag.RowsAffected() == 0 {
		err = errors.New("another claim holds the request, or it was forgotten")
	}
	if err != nil {
		j.settleFailures.Add(1)
		j.opts.log.Warn("postgres journal: settling", "id", c.key, "state", o.state, "err", err)
	}
}

// awaitSettles waits for the settles of keys that this Journal is writing.
func (j *Journal) awaitSettles(ctx context.Context, keys []string) error {
	var pending []chan struct{}
	j.mu.Lock()
	for _, k := range keys {
		if ch, ok := j.settling[k]; ok {
			pending = append(pending, ch)
		}
	}
	j.mu.Unlock()
	return await(ctx, pending)
}

// settlesUnderWay reports whether this Journal is writing a settle.
func (j *Journal) settlesUnderWay() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.settling) > 0
}

// awaitAllSettles waits for the settles that this Journal is writing now.
func (j *Journal) awaitAllSettles(ctx context.Context) error {
	j.mu.Lock()
	pending := make([]chan struct{}, 0, len(j.settling))
	for _, ch := range j.settling {
		pending = append(pending, ch)
	}
	j.mu.Unlock()
	return await(ctx, pending)
}

func await(ctx context.Context, chs []chan struct{}) error {
	for _, ch := range chs {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
