// Package postgres is a receipts.Store in a PostgreSQL table, shared by every server process of
// a deployment: a fleet behind a load balancer without affinity declares scope "store", and a
// resend that reaches any process finds the receipt another process made.
//
//	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	store, err := postgres.New(ctx, pool, postgres.Options{Retention: 24 * time.Hour})
//	...
//	defer store.Close()
//	http.Handle("/mcp", receipts.HTTP(mcpHandler, receipts.Options{Store: store, Retention: 24 * time.Hour}))
//
// It is a module of its own, so that the receipts package and the client's module do not
// depend on a database driver (github.com/jackc/pgx/v5).
//
// # Claims and leases
//
// A claim is an INSERT ... ON CONFLICT DO NOTHING keyed by (principal, id), committed before
// Claim returns: of two processes claiming one key, one inserts and the other finds its row.
// The lease is a random token and an expiry computed by the database's clock (clock_timestamp),
// never a process's, so that processes on machines whose clocks disagree still agree on who
// holds what; a receipt is lapsed once its lease ended by that clock. Renew, Settle and Release
// change the row only while the token still holds an unexpired lease, in the same statement that
// checks it, so a holder that paused past its lease cannot overwrite what a resend was told.
//
// # Waiting
//
// A waiter marks the receipt watched; Settle and Release of a watched receipt notify (NOTIFY) on
// a channel of the table, and only then, since a notifying commit waits for every other
// notifying commit before it. Each Store listens on one connection of its own while something
// waits, and wakes the waiters of the key. A waiter also looks again when the lease it saw ends,
// and at least every Options.PollInterval, so that a notification lost with a broken connection
// delays it, never strands it.
//
// # Capacity
//
// The table holds at most Options.MaxReceipts receipts, counted across every process that
// shares it (processes sharing a table configure the same MaxReceipts). A claim that finds it
// full deletes settled receipts older than Options.Retention, oldest first, to make room, and is
// refused with receipts.ErrFull when that is not enough: an unresolved receipt (running or
// lapsed) is never deleted to make room, nor one within its retention, for a client may still
// resend its id. The count is split into slots so that concurrent claims do not wait for one
// another's commits; see Store.Claim for why it holds exactly.
//
// # Connections
//
// Claims and settlements are each one statement and one durable commit; concurrent ones share
// the flush of the log, so throughput grows with the connections in use at once. A pool of
// pgxpool's default size (four connections, or the CPUs if more) queues requests behind one
// another; size it for the requests a process serves at once (pgxpool.Config.MaxConns, or
// pool_max_conns in the URL), within what the database's max_connections allows for the whole
// fleet, plus one connection per process while something waits.
//
// # Epoch
//
// The store's epoch is drawn when New creates the schema and kept in the database: every
// process declares the same one, and it survives their restarts. It is drawn anew only when the
// store starts empty: the table is recreated, or truncated (a trigger renews it). Delete
// receipts through the store (Prune) or with TRUNCATE; a plain DELETE of every row would empty
// the store under the old epoch.
package postgres

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/northstar-mcp/mcpclient/receipts"
)

// Defaults of Options.
const (
	DefaultTable            = "mcpclient_receipts"
	DefaultMaxReceipts      = 100_000
	DefaultMaxResponseBytes = 16 << 20
	DefaultPollInterval     = time.Second
)

// Options configure a Store. The zero value is ready to use: every zero field means its default.
type Options struct {
	// Table names the table, optionally schema-qualified ("mcp.receipts"). Every process that
	// shares receipts names the same table. "" means DefaultTable.
	Table string
	// MaxReceipts bounds the receipts the table holds, running, lapsed and settled, across
	// every process. 0 means DefaultMaxReceipts.
	MaxReceipts int
	// MaxResponseBytes bounds the response Settle keeps; a larger one is refused with
	// receipts.ErrTooLarge. 0 means DefaultMaxResponseBytes.
	MaxResponseBytes int
	// Retention is how long a settled receipt is kept at least: a full table makes room only by
	// deleting receipts settled longer ago. It must not be shorter than the middleware's
	// receipts.Options.Retention, which the declaration promises. 0 means
	// receipts.DefaultRetention.
	Retention time.Duration
	// PollInterval bounds how long Wait waits without looking at the receipt again, in case a
	// notification was lost. 0 means DefaultPollInterval.
	PollInterval time.Duration
}

// A Store is a receipts.Store in PostgreSQL. It is safe for concurrent use, by goroutines and by
// processes. Close it when done, to end the listening connection Wait may have opened.
type Store struct {
	pool         *pgxpool.Pool
	n            names
	maxReceipts  int64
	maxResponse  int
	retention    time.Duration
	pollInterval time.Duration

	listen *listener
}

var _ receipts.Store = (*Store)(nil)

// New returns a Store on pool's database, creating its table and companions unless the table
// exists (see Schema); processes starting together may all call it. The pool stays the
// caller's: Close leaves it open.
func New(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Store, error) {
	if pool == nil {
		return nil, errors.New("receipts/postgres: nil pool")
	}
	if opts.Table == "" {
		opts.Table = DefaultTable
	}
	n, err := namesOf(opts.Table)
	if err != nil {
		return nil, err
	}
	s := &Store{
		pool:         pool,
		n:            n,
		maxReceipts:  int64(opts.MaxReceipts),
		maxResponse:  opts.MaxResponseBytes,
		retention:    opts.Retention,
		pollInterval: opts.PollInterval,
	}
	if s.maxReceipts <= 0 {
		s.maxReceipts = DefaultMaxReceipts
	}
	if s.maxResponse <= 0 {
		s.maxResponse = DefaultMaxResponseBytes
	}
	if s.retention <= 0 {
		s.retention = receipts.DefaultRetention
	}
	if s.pollInterval <= 0 {
		s.pollInterval = DefaultPollInterval
	}
	if err := s.migrate(ctx); err != nil {
		return nil, fmt.Errorf("receipts/postgres: creating the schema: %w", err)
	}
	s.listen = newListener(pool, n.channel)
	return s, nil
}

// Close stops listening for notifications, and waits until the listening goroutine ended.
// Calls of Wait after Close poll.
func (s *Store) Close() { s.listen.close() }

// micros is a duration as a count of microseconds, which SQL multiplies by an interval: exact,
// and independent of how a driver encodes durations.
func micros(d time.Duration) int64 { return d.Microseconds() }

// columns are a receipt's columns, with its state by the database's clock now.
const columns = `fingerprint, response, claimed_at, settled_at, lease_expires,
	CASE WHEN settled_at IS NOT NULL THEN 2 WHEN lease_expires > clock_timestamp() THEN 1 ELSE 3 END,
	GREATEST(extract(epoch FROM lease_expires - clock_timestamp()), 0)`

// row is a receipt as read, with how long its lease has left by the database's clock.
type row struct {
	receipts.Receipt
	left time.Duration
}

func (r *row) scanned(key receipts.Key, scan func(...any) error) error {
	var fp []byte
	var settled *time.Time
	var state int
	var left float64
	if err := scan(&fp, &r.Response, &r.ClaimedAt, &settled, &r.LeaseExpires, &state, &left); err != nil {
		return err
	}
	if len(fp) != len(r.Fingerprint) {
		return fmt.Errorf("%w: a fingerprint of %d bytes", ErrSchema, len(fp))
	}
	copy(r.Fingerprint[:], fp)
	r.Key = key
	if settled != nil {
		r.SettledAt = *settled
	}
	switch state {
	case 1:
		r.State = receipts.Running
	case 2:
		r.State = receipts.Settled
	default:
		r.State = receipts.Lapsed
	}
	if r.State != receipts.Settled {
		r.Response = nil
	}
	r.left = time.Duration(left * float64(time.Second))
	return nil
}

// Claim implements receipts.Store. It is one statement, the schema's _claim function, committed
// before Claim returns.
//
// Why the count holds: the capacity is split into slots (see Schema), rows of the _counts table,
// whose counts add up to the table's rows: every transaction that inserts or deletes receipts
// holds one slot (its row's lock, until it ends) and adds to that slot's count the rows it
// inserted less those it deleted, and TRUNCATE zeroes them all. A claim adds a row only to a
// slot it holds whose count, read once it held it, is below the slot's capacity: the lock makes
// the read and the increment one step, since no other transaction can change the count between
// them. So no count exceeds its slot's capacity, and the rows never exceed the capacities' sum,
// MaxReceipts, whatever the number of processes and claims at once.
//
// A claim takes a slot with room that no one holds (SKIP LOCKED); when every slot with room is
// held, it waits for them in turn, and finds the store full only when each, once released, had
// none left: it is refused only when the table holds MaxReceipts receipts or claims in flight
// will fill it, or while a deletion commits. Claims therefore wait for one another only when
// they are more than the slots, and those in flight together commit together: PostgreSQL
// flushes their commits in one write of the log.
//
// Deadlocks cannot arise: a transaction waits for a slot while it holds nothing; deletions
// (Release, Prune, a claim's evictions) hold their slot before they touch a receipt; a claim
// waits for a receipt's row only to learn whether a concurrent claim or release of the same key
// commits, and those never wait for a slot once they hold a row.
func (s *Store) Claim(ctx context.Context, key receipts.Key, fp receipts.Fingerprint, ttl time.Duration) (receipts.ClaimResult, error) {
	token := rand.Text()
	var claimed bool
	var found row
	err := found.scanned(key, func(dest ...any) error {
		return s.pool.QueryRow(ctx, `SELECT o_claimed, o_fingerprint, o_response, o_claimed_at, o_settled_at, o_lease_expires,
				CASE WHEN o_settled_at IS NOT NULL THEN 2 WHEN o_lease_expires > clock_timestamp() THEN 1 ELSE 3 END,
				GREATEST(extract(epoch FROM o_lease_expires - clock_timestamp()), 0)
			FROM `+s.n.claim+`($1, $2, $3, $4, $5, $6, $7)`,
			key.Principal, key.ID, fp[:], token, micros(ttl), s.maxReceipts, micros(s.retention)).Scan(append([]any{&claimed}, dest...)...)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return receipts.ClaimResult{}, fmt.Errorf("%w (%d receipts unresolved or within their retention)", receipts.ErrFull, s.maxReceipts)
	case err != nil:
		return receipts.ClaimResult{}, fmt.Errorf("receipts/postgres: claim: %w", err)
	case claimed:
		return receipts.ClaimResult{Claimed: true, Lease: receipts.Lease{Key: key, Token: token, Expires: found.LeaseExpires}}, nil
	}
	return receipts.ClaimResult{Receipt: found.Receipt}, nil
}

// held is the condition that lease still holds its receipt, by the database's clock when the
// row is checked (after any wait for its lock); $1, $2, $3 are the key and the token.
const held = `principal = $1 AND id = $2 AND token = $3 AND settled_at IS NULL AND lease_expires > clock_timestamp()`

// Renew implements receipts.Store.
func (s *Store) Renew(ctx context.Context, lease receipts.Lease, ttl time.Duration) (receipts.Lease, error) {
	var expires time.Time
	err := s.pool.QueryRow(ctx, `UPDATE `+s.n.table+` SET lease_expires = clock_timestamp() + $4::bigint * interval '1 microsecond'
		WHERE `+held+` RETURNING lease_expires`, lease.Key.Principal, lease.Key.ID, lease.Token, micros(ttl)).Scan(&expires)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return lease, receipts.ErrLeaseLost
	case err != nil:
		return lease, fmt.Errorf("receipts/postgres: renew: %w", err)
	}
	lease.Expires = expires
	return lease, nil
}

// Settle implements receipts.Store. It notifies, in the same statement, only when a waiter marked
// the receipt watched: a notification makes commits take turns (PostgreSQL queues them in commit
// order under one lock held through the flush), which would serialize every settlement.
//
// The settlement is committed durably, as the claim is: a resend after a crash of the database
// must find the response, not a receipt that lapsed and reports the outcome unknown.
func (s *Store) Settle(ctx context.Context, lease receipts.Lease, response []byte) error {
	if len(response) > s.maxResponse {
		return fmt.Errorf("%w (%d bytes, the store keeps %d)", receipts.ErrTooLarge, len(response), s.maxResponse)
	}
	if response == nil {
		response = []byte{}
	}
	var settled int
	err := s.pool.QueryRow(ctx, `WITH settled AS (
		UPDATE `+s.n.table+` SET response = $4, settled_at = clock_timestamp(), lease_expires = clock_timestamp(), token = NULL
		WHERE `+held+` RETURNING watched)
		SELECT count(*) FROM settled WHERE CASE WHEN watched THEN pg_notify($5, $6) IS NOT NULL ELSE true END`,
		lease.Key.Principal, lease.Key.ID, lease.Token, response, s.n.channel, topic(lease.Key)).Scan(&settled)
	switch {
	case err != nil:
		return fmt.Errorf("receipts/postgres: settle: %w", err)
	case settled == 0:
		return receipts.ErrLeaseLost
	}
	return nil
}

// Release implements receipts.Store. It is the schema's _release function, which notifies when
// a waiter marked the receipt watched.
func (s *Store) Release(ctx context.Context, lease receipts.Lease) error {
	var released bool
	err := s.pool.QueryRow(ctx, `SELECT `+s.n.release+`($1, $2, $3, $4, $5)`,
		lease.Key.Principal, lease.Key.ID, lease.Token, s.n.channel, topic(lease.Key)).Scan(&released)
	switch {
	case err != nil:
		return fmt.Errorf("receipts/postgres: release: %w", err)
	case !released:
		return receipts.ErrLeaseLost
	}
	return nil
}

func (s *Store) lookup(ctx context.Context, key receipts.Key) (row, error) {
	var r row
	err := r.scanned(key, s.pool.QueryRow(ctx, `SELECT `+columns+` FROM `+s.n.table+` WHERE principal = $1 AND id = $2`, key.Principal, key.ID).Scan)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return r, receipts.ErrNotFound
	case err != nil:
		return r, fmt.Errorf("receipts/postgres: lookup: %w", err)
	}
	return r, nil
}

// Lookup implements receipts.Store.
func (s *Store) Lookup(ctx context.Context, key receipts.Key) (receipts.Receipt, error) {
	r, err := s.lookup(ctx, key)
	return r.Receipt, err
}

// Wait implements receipts.Store. It listens for the key's notification before it marks the
// receipt watched, so that a settlement or release committed after the mark notifies it: the
// mark is an UPDATE of the running receipt, so a settlement either commits before it (and the
// mark finds the receipt no longer running) or after it (and finds it watched). It returns when
// notified, when the lease it saw ends by the database's clock, after Options.PollInterval, or
// when ctx ends.
func (s *Store) Wait(ctx context.Context, key receipts.Key) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	woken, listening, stop := s.listen.watch(topic(key))
	defer stop()
	var left float64
	err := s.pool.QueryRow(ctx, `UPDATE `+s.n.table+` SET watched = true
		WHERE principal = $1 AND id = $2 AND settled_at IS NULL AND lease_expires > clock_timestamp()
		RETURNING GREATEST(extract(epoch FROM lease_expires - clock_timestamp()), 0)`, key.Principal, key.ID).Scan(&left)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil // absent or no longer running
	case err != nil:
		return fmt.Errorf("receipts/postgres: wait: %w", err)
	}
	bound := s.pollInterval
	if !listening {
		// The listening connection is not up yet (or broke): look again soon instead.
		bound = min(bound, 50*time.Millisecond)
	}
	timer := time.NewTimer(min(time.Duration(left*float64(time.Second))+time.Millisecond, bound))
	defer timer.Stop()
	select {
	case <-woken:
	case <-timer.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// Prune implements receipts.Store. It is the schema's _prune function.
func (s *Store) Prune(ctx context.Context, retention time.Duration) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT `+s.n.prune+`($1)`, micros(retention)).Scan(&n); err != nil {
		return 0, fmt.Errorf("receipts/postgres: prune: %w", err)
	}
	return n, nil
}

// Describe implements receipts.Store. It reads the epoch from the database every time: a store
// recreated under a running process has a new one, which the process must declare at once.
func (s *Store) Describe(ctx context.Context) (receipts.Description, error) {
	var epoch string
	if err := s.pool.QueryRow(ctx, `SELECT epoch FROM `+s.n.epoch).Scan(&epoch); err != nil {
		return receipts.Description{}, fmt.Errorf("receipts/postgres: describe: %w", err)
	}
	return receipts.Description{Scope: receipts.ScopeStore, Epoch: epoch, MaxReceipts: int(s.maxReceipts)}, nil
}

// topic names a key in notifications: a digest, since a notification's payload is bounded and
// a principal or an id may be long, and one that keeps the parts apart.
func topic(key receipts.Key) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s%s", len(key.Principal), key.Principal, key.ID)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// listener holds one connection that listens on the store's channel while anything waits, and
// wakes the waiters of each notified key.
type listener struct {
	pool    *pgxpool.Pool
	channel string

	mu        sync.Mutex
	waiters   map[string]map[chan struct{}]struct{}
	count     int
	listening bool               // LISTEN is in effect on the current connection
	cancel    context.CancelFunc // ends the running goroutine; nil when none runs
	done      chan struct{}      // closed when the last goroutine started returned
	closed    bool
}

func newListener(pool *pgxpool.Pool, channel string) *listener {
	return &listener{pool: pool, channel: channel, waiters: map[string]map[chan struct{}]struct{}{}}
}

// watch registers a waiter for topic and starts the listening goroutine if none runs. listening
// reports whether LISTEN was already in effect: only then is every later notification for topic
// sure to reach the waiter. stop unregisters it, and stops the goroutine when nothing waits.
func (l *listener) watch(topic string) (woken <-chan struct{}, listening bool, stop func()) {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ch, false, func() {}
	}
	if l.waiters[topic] == nil {
		l.waiters[topic] = map[chan struct{}]struct{}{}
	}
	l.waiters[topic][ch] = struct{}{}
	l.count++
	if l.cancel == nil {
		l.start()
	}
	return ch, l.listening, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.waiters[topic], ch)
		if len(l.waiters[topic]) == 0 {
			delete(l.waiters, topic)
		}
		l.count--
	}
}

// start runs a listening goroutine; l.mu is held. The goroutine first waits for the one before
// it (which stopped when idle) to end, so that waiting for the last one started waits for all.
func (l *listener) start() {
	ctx, cancel := context.WithCancel(context.Background())
	prev, done := l.done, make(chan struct{})
	l.cancel, l.done = cancel, done
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		l.run(ctx)
	}()
}

// idleLinger is how long the listening connection stays up after the last waiter left, so that
// waits that come one after another do not each open a connection.
const idleLinger = 5 * time.Second

// run listens until ctx ends or nothing has waited for idleLinger. A broken connection is
// replaced after a pause; its waiters are woken, since they may have missed notifications.
func (l *listener) run(ctx context.Context) {
	for {
		err := l.listenOnce(ctx)
		if err == nil {
			return // idle: listenOnce gave up its place under the lock
		}
		l.mu.Lock()
		l.listening = false
		l.wakeAllLocked()
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// listenOnce listens on one connection; nil when it stopped because nothing waited for
// idleLinger, else the error that ended it.
func (l *listener) listenOnce(ctx context.Context) error {
	pc, err := l.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	// The connection listens until it is closed: it never goes back to the pool, where a
	// LISTEN would outlive its use.
	conn := pc.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	l.mu.Lock()
	l.listening = true
	// Waiters that came while nothing listened may have missed a notification.
	l.wakeAllLocked()
	l.mu.Unlock()
	var idleSince time.Time
	for {
		// A bounded wait, to notice when nothing waits any more; an expired deadline leaves the
		// connection usable.
		waitCtx, cancel := context.WithTimeout(ctx, time.Second)
		n, err := conn.WaitForNotification(waitCtx)
		cancel()
		switch {
		case err == nil:
			l.wake(n.Payload)
			continue
		case ctx.Err() != nil:
			return ctx.Err()
		case !errors.Is(err, context.DeadlineExceeded) || conn.IsClosed():
			return err
		}
		l.mu.Lock()
		switch {
		case l.count > 0:
			idleSince = time.Time{}
		case idleSince.IsZero():
			idleSince = time.Now()
		case time.Since(idleSince) >= idleLinger:
			// Decided under the lock: a watch from now on starts a new goroutine.
			l.cancel, l.listening = nil, false
			l.mu.Unlock()
			return nil
		}
		l.mu.Unlock()
	}
}

func (l *listener) wake(topic string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ch := range l.waiters[topic] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (l *listener) wakeAllLocked() {
	for _, chans := range l.waiters {
		for ch := range chans {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// close stops the listening goroutine and waits for it, and for those before it.
func (l *listener) close() {
	l.mu.Lock()
	l.closed = true
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if done != nil {
		<-done
	}
}
