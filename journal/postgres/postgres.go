// Package postgres keeps the requests of mcpclient.Clients in a PostgreSQL table that many worker
// processes share (see mcpclient.WithJournal): a worker records each request, durably, before
// its first byte is sent, and holds it under a lease while its attempt loop runs; when a worker
// dies, its leases lapse and another worker finds its requests with mcpclient.Client.Recover and
// resends them, or reports them as unknown.
//
// # Claims and settles
//
// A row is a request's record: its bytes, its outcome (the state), whether a send under it may
// have reached the server (reached, which once true stays true), the receipts of its last send,
// and its supersession. A claim opens it under a lease and a settle closes it: a request is open
// while a lease is on it, live or lapsed, and a lapsed one is a holder that is gone and may have
// sent it. A claim of a known id keeps the record as it is and returns it (JournalClaim.Prior):
// the attempt loop starts from what every earlier holder learned. Settle writes the outcome,
// reached and the sends, and releases the lease.
//
// A request is superseded once: the link is a compare-and-set made in the transaction that
// records the new request, under the older row's lock. Of two workers superseding one request,
// the second is refused with an error matching mcpclient.ErrAlreadySuperseded, and a request a
// live lease holds (its holder may be resending it) is not superseded, but by the holder's own
// re-issue (mcpclient.JournalRecord.Reissue): the refusal matches mcpclient.ErrRequestInFlight.
// A superseded request is not claimed again, by any worker.
//
// It is a module of its own, so that the client's module does not depend on a database driver
// (github.com/jackc/pgx/v5).
//
// # Leases
//
// A claim holds its request under a lease that expires by the database's clock (now()), never a
// worker's, so that workers whose clocks disagree still agree on who holds what. The claim renews
// the lease every third of its length while the attempt loop runs, and Settle releases it. A
// claim whose renewal fails (the lease was taken, or lapsed first) or does not succeed in time
// closes its Lost channel, and the client sends nothing more under the id. "In time" is judged by
// the worker's monotonic clock from before it asked: a tenth of a lease before the database could
// let another worker take the id, so that a send decided just before the end is on its way before
// anyone else can claim it. A claim that took more than a third of its lease to make (it waited
// for a row another transaction held, or for a connection) renews before Claim returns it.
//
// A lease fences the decision to send, not the bytes on the wire: a worker stalled longer than
// its lease while its request is on the wire loses the lease, and another worker may resend the
// request while the server still runs the first send. The server's receipts (or its refusal of
// an id in flight) are what answer for that; size the lease well above the longest stall a
// worker may suffer (a GC pause, an overloaded host), not above the longest call.
//
// Unresolved, and so Recover, lists a dead worker's requests only once their leases lapse: a
// worker that restarts and recovers at once finds its predecessor's requests a lease later, so
// recover again after a lease, or now and then.
//
// # Durability
//
// Claim and Rebind commit synchronously (synchronous_commit is raised to on for them when the
// session has it off) and return once the commit is durable. Settle returns at once: the claim's
// goroutine writes it, within a lease, and commits asynchronously: its change is visible to every
// worker once written, and reaches disk with the next synchronous commit or within the WAL
// writer's delay; a database crash in between leaves the request open, to be recovered, as the
// mcpclient.Journal contract allows. The Journal's own Claim, Lookup, Forget and Unresolved wait
// for the settles it is writing, so that a worker reads what it settled; Close waits for them
// too. A Settle that fails (the database is unreachable) is logged, and leaves the row open
// under a lease that lapses, for another worker to recover.
//
// # Schema
//
// Open creates the journal's table and its companions when the table does not exist, and
// upgrades the table of an earlier version of this package, under an advisory lock so that
// workers starting together do not race; WithoutMigration leaves the schema alone, for a
// deployment that applies Schema's statements with its own tools (Open then reports a table to
// upgrade with ErrSchema, naming the statements). Delete rows
// through the journal (Forget, the retention) or with plain DELETE or TRUNCATE: triggers keep the
// held-count that the capacity is checked against.
package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/northstar-mcp/mcpclient"
)

// Defaults of a Journal.
const (
	// DefaultTable is the table a Journal keeps its requests in unless WithTable says otherwise.
	DefaultTable = "mcpclient_journal"
	// DefaultLease is how long a claim holds its request without renewing unless WithLease
	// says otherwise.
	DefaultLease = 30 * time.Second
	// DefaultCapacity is the most requests the table holds unless WithCapacity says otherwise:
	// more than a File's, since every worker of a fleet writes to it.
	DefaultCapacity = 1_000_000
	// DefaultRetention is how long a settled request is kept unless WithRetention says
	// otherwise.
	DefaultRetention = 24 * time.Hour
)

var (
	// ErrClosed reports a Journal used after Close.
	ErrClosed = errors.New("postgres journal: closed")
	// ErrLeaseLost reports a claim whose lease lapsed or passed to another claim: the holder
	// must send nothing more under the id.
	ErrLeaseLost = errors.New("postgres journal: lease lost")
)

// An Option configures a Journal.
type Option func(*options)

type options struct {
	table     string
	lease     time.Duration
	worker    string
	capacity  int64
	retention time.Duration
	migrate   bool
	log       *slog.Logger
}

// WithTable names the table, optionally schema-qualified ("jobs.mcpclient_journal"). Workers
// that share requests name the same table. Default DefaultTable.
func WithTable(name string) Option { return func(o *options) { o.table = name } }

// WithLease sets how long a claim holds its request without renewing, d > 0: how long a dead
// worker's requests wait before another can recover them, and how long a renewal may be late
// before the claim is lost. Claims renew at a third of it. Default DefaultLease.
func WithLease(d time.Duration) Option { return func(o *options) { o.lease = d } }

// WithWorker names this process in the leases it holds, for a person reading the table (the
// lease_owner column); claims are told apart by a token of their own, so two Journals of one
// name never share a lease. Default: host name, process id and a random suffix.
func WithWorker(name string) Option { return func(o *options) { o.worker = name } }

// WithCapacity bounds the table to n requests, n > 0. When it is full, a new request takes the
// place of the oldest settled one (see mcpclient.JournalRecord.Settled) that no live lease
// holds; when every request it holds is unresolved (or still leased),
// a new one is refused with an error matching mcpclient.ErrLedgerFull, and no unresolved request
// is ever dropped to make room. The bound is the process's: give every worker the same one.
// Default DefaultCapacity.
func WithCapacity(n int) Option { return func(o *options) { o.capacity = int64(n) } }

// WithRetention sets how long a settled request (closed answered or failed, or superseded) is
// kept, d > 0:
// for that long its id keeps denoting its bytes, and other content under it is refused. The
// Journal prunes older ones in the background, and so does Prune. Unresolved requests are kept
// until they settle or are forgotten, however old. Default DefaultRetention.
func WithRetention(d time.Duration) Option { return func(o *options) { o.retention = d } }

// WithoutMigration makes Open use the table as it finds it, creating nothing: for a role that
// may not change the schema. Open fails with ErrSchema if the table is missing or not a
// journal's. Default: Open creates the table if it does not exist (see Schema).
func WithoutMigration() Option { return func(o *options) { o.migrate = false } }

// WithLogger sets where the Journal reports what it cannot return: a Settle or a lease renewal
// that failed. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// A Journal is an mcpclient.Journal in a PostgreSQL table, shared by every worker that opens the
// same table. It is safe for concurrent use by the clients of one process; each worker process
// opens its own. Close it after the clients that use it.
type Journal struct {
	pool  *pgxpool.Pool
	owned bool // Close closes the pool
	opts  options
	n     names
	q     queries

	// ctx ends at Close: lease renewals and the pruner stop.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool           // guarded by mu
	wg     sync.WaitGroup // claims being made, held or settling, the pruner; Add under mu
	// settling has, for each request whose Settle this Journal is writing, what is closed when
	// the write is over; guarded by mu.
	settling map[string]chan struct{}
	// holding has the token of each request a claim of this Journal holds until it settles,
	// for the re-issue its own loop makes; guarded by mu.
	holding map[string]string

	claims, lost, settleFailures atomic.Int64
}

// Open opens the journal in pool's database, creating its table unless WithoutMigration is
// given. The pool stays the caller's: Close does not close it. Its connections must allow
// synchronous commits to reach disk, as PostgreSQL's do unless fsync is off.
func Open(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Journal, error) {
	o := options{table: DefaultTable, lease: DefaultLease, capacity: DefaultCapacity, retention: DefaultRetention,
		migrate: true, log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case o.lease <= 0:
		return nil, fmt.Errorf("postgres journal: lease %v must be positive", o.lease)
	case o.capacity <= 0:
		return nil, fmt.Errorf("postgres journal: capacity %d: the journal needs room for one request at least", o.capacity)
	case o.retention <= 0:
		return nil, fmt.Errorf("postgres journal: retention %v must be positive", o.retention)
	case o.log == nil:
		o.log = slog.New(slog.DiscardHandler)
	}
	if o.worker == "" {
		host, _ := os.Hostname()
		o.worker = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), rand.Text()[:6])
	}
	n, err := namesOf(o.table)
	if err != nil {
		return nil, err
	}
	j := &Journal{pool: pool, opts: o, n: n, q: queriesOf(n), settling: map[string]chan struct{}{}, holding: map[string]string{}}
	if o.migrate {
		if err := j.migrate(ctx); err != nil {
			return nil, fmt.Errorf("postgres journal: creating %s: %w", n.table, err)
		}
	}
	if err := j.check(ctx); err != nil {
		return nil, err
	}
	j.ctx, j.cancel = context.WithCancel(context.Background())
	j.wg.Add(1)
	go j.prune()
	return j, nil
}

// Connect opens the journal on a pool of its own, made from connString (a URL or key=value
// settings, as pgxpool.New takes), which Close closes.
func Connect(ctx context.Context, connString string, opts ...Option) (*Journal, error) {
	pool, err := pgxpool.New(ctx, connString)
	if err != nil {
		return nil, fmt.Errorf("postgres journal: %w", err)
	}
	j, err := Open(ctx, pool, opts...)
	if err != nil {
		pool.Close()
		return nil, err
	}
	j.owned = true
	return j, nil
}

// Close stops renewing the leases of the claims still held, closing their Lost channels (their
// requests stay open in the table, for a worker to recover once the leases lapse), waits for the
// claims being made and the settles being written (each within a lease), and closes the pool if
// Connect made it. A Settle called after Close is not written. Close is idempotent.
func (j *Journal) Close() error {
	j.mu.Lock()
	already := j.closed
	j.closed = true
	j.mu.Unlock()
	j.cancel()
	j.wg.Wait()
	if !already && j.owned {
		j.pool.Close()
	}
	return nil
}

// Worker returns the name this Journal holds leases under.
func (j *Journal) Worker() string { return j.opts.worker }

// Table returns the quoted name of the table.
func (j *Journal) Table() string { return j.n.table }

// enter counts a goroutine or a call that Close must wait for, unless the Journal is closed.
func (j *Journal) enter() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return false
	}
	j.wg.Add(1)
	return true
}

// Stats are counts since the Journal was opened, and the table's size now.
type Stats struct {
	// Claims is the number of claims this Journal made.
	Claims int64
	// LeasesLost is the number of its claims whose Lost channel closed.
	LeasesLost int64
	// SettleFailures is the number of Settles that did not reach the table: their requests
	// stay open until another worker recovers them.
	SettleFailures int64
	// Held is the number of requests in the table, every worker's.
	Held int64
}

// Stats returns the Journal's counts.
func (j *Journal) Stats(ctx context.Context) (Stats, error) {
	st := Stats{Claims: j.claims.Load(), LeasesLost: j.lost.Load(), SettleFailures: j.settleFailures.Load()}
	err := j.pool.QueryRow(ctx, `SELECT coalesce(sum(held), 0)::bigint FROM `+j.n.slots).Scan(&st.Held)
	return st, err
}

// shardOf spreads new requests over the shards of the held-count by their key.
func shardOf(key string) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % shards)
}

var _ mcpclient.Journal = (*Journal)(nil)
