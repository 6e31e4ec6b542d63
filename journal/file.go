// Package journal keeps an mcpclient.Client's requests on disk, so that a process that dies with
// requests in flight can find them after it restarts and resend the same bytes under the same
// ids (see mcpclient.WithJournal and mcpclient.Client.Recover).
//
// A [File] is one local file, written by one process at a time: an embedded database
// (go.etcd.io/bbolt) that needs no server. A journal that several processes share lives in a
// database server; see the postgres module.
package journal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/northstar-mcp/mcpclient"
)

// Defaults of a File.
const (
	// DefaultCapacity is the most requests a File holds unless WithCapacity says otherwise.
	DefaultCapacity = 100_000
	// DefaultRetention is how long a File keeps a settled request unless WithRetention says
	// otherwise.
	DefaultRetention = 24 * time.Hour
	// DefaultLockTimeout is how long OpenFile waits for another process to let go of the file.
	DefaultLockTimeout = time.Second
)

var (
	// ErrClosed reports a File used after Close.
	ErrClosed = errors.New("journal: closed")
	// ErrLocked reports a file another process (or another File of this one) has open.
	ErrLocked = errors.New("journal: the file is open elsewhere")
	// ErrCorrupt reports a record that does not decode.
	ErrCorrupt = errors.New("journal: corrupt record")
	// ErrBroken reports a File whose writer failed to write its log or to checkpoint it: it
	// writes nothing more, and the next OpenFile of the file reads what the log holds. Retrying
	// on the same File is not trusted after a failed sync.
	ErrBroken = errors.New("journal: the writer failed; reopen the file")
)

// A request is kept under its number, which orders the requests by when they were first recorded:
// the requests a write records sit together at the end of the buckets that hold them, and the
// settles of those recorded just before close to it, so that a write rewrites a few pages rather
// than one or more for each request, wherever its random id falls. A File finds an id's number
// in memory (File.numbers), read from the states' keys when the file is opened.
var (
	// frozenBucket holds each request as it was frozen, written once, under its number (8
	// bytes, big-endian): the fields of its JournalRecord that never change (appendFrozen).
	frozenBucket = []byte("frozen")
	// statesBucket holds how each request stands, small and rewritten at each change: its keys
	// are the request's number followed by its key, the id as JSON (statesKey).
	statesBucket = []byte("states")
	// settledBucket orders the settled requests by when they settled, oldest first: its keys
	// are the settle time (8 bytes, big-endian nanoseconds) followed by the request's key.
	settledBucket = []byte("settled")
	// earlierStatesBucket and earlierRequestsBucket are where earlier versions kept each
	// request, under its key: how it stands, and as it was frozen. OpenFile numbers what it finds
	// there. The first is kept, empty: an entry written there is read at the next open as one of
	// theirs.
	earlierStatesBucket   = []byte("standing")
	earlierRequestsBucket = []byte("requests")
)

// initialMmapSize is how much of the file the database maps when it is opened, however small the
// file is: 256 MiB where addresses have 64 bits, 16 MiB where they have 32. A checkpoint whose pages
// reach past the mapping remaps it, and before it does bbolt copies every key and value the
// writer's transaction holds out of the old mapping, so that a file growing from nothing would
// copy the log's worth of requests at each doubling, in checkpoints the writer's callers wait for.
// The mapping takes address space only; the file grows as it is written.
const initialMmapSize = 16 << 20 << (4 * (^uint(0) >> 63))

// An Option configures a File.
type Option func(*options)

type options struct {
	capacity    int
	retention   time.Duration
	lockTimeout time.Duration
	mode        os.FileMode
}

// WithCapacity bounds the File to n requests, n > 0. When it is full, a new request takes the
// place of the oldest settled one; when every request it holds is unresolved, a new one is
// refused with an error matching mcpclient.ErrLedgerFull. Default DefaultCapacity.
func WithCapacity(n int) Option { return func(o *options) { o.capacity = n } }

// WithRetention sets how long a settled request (answered, failed, or superseded by another) is
// kept, d > 0: for that long its id keeps denoting its bytes, and a request under the same id with
// other content is refused even after a restart. Unresolved requests are kept until they settle
// or are forgotten, however old. Default DefaultRetention.
func WithRetention(d time.Duration) Option { return func(o *options) { o.retention = d } }

// WithLockTimeout sets how long OpenFile waits for a file another process holds before it fails
// with ErrLocked. Default DefaultLockTimeout.
func WithLockTimeout(d time.Duration) Option { return func(o *options) { o.lockTimeout = d } }

// A File is an mcpclient.Journal in one local file, with a log beside it (the file's path with
// "-wal" appended) that must stay with it. Each new request is on disk, synced, when Claim
// returns, before its first byte is sent; state changes are written with the next write.
// Concurrent callers share writes (group commit): while one write is being synced, the requests
// that arrive queue up and go to disk together in the next, so that many callers pay for a few
// syncs rather than one each.
//
// A File keeps the id of each request it holds in memory, with its place in the file (some
// hundred bytes a request), and reads them from the file when it is opened.
//
// A File is safe for concurrent use by the clients of one process. Close it after the clients
// that use it.
type File struct {
	db   *bolt.DB
	opts options

	mu sync.Mutex
	// claimed holds the keys of the requests an attempt loop holds. guarded by mu.
	claimed map[string]bool
	// settling holds the states settled and not yet written, so that a read does not find the
	// request as it was before. guarded by mu.
	settling map[string]settling
	seq      uint64 // numbers the settles. guarded by mu.
	// committed, set by tests only, runs on the writer between a batch's write and the removal
	// of its settles from settling.
	committed func()
	// queue is what the next write carries; wake tells the writer it is not empty. guarded by
	// mu.
	queue  []*op
	closed bool
	// numbers holds the number of each request the file holds, by key. guarded by mu; changed
	// by the writer only, in its transaction, and read again from the file when one fails.
	numbers map[string]uint64
	// count is the number of requests in the file; read and written by the writer only.
	count int

	// The writer's own: the transaction that holds every change since the last checkpoint, the
	// log, and the changes made in tx (changes), of which the first logged are in the log.
	tx             *bolt.Tx
	log            *os.File
	wal            walState
	logEnd         int64
	changes        []byte
	logged         int
	unloggedSince  time.Time
	lastCheckpoint time.Time
	interval       time.Duration // checkpointInterval; longer in tests that checkpoint themselves
	closeErr       error
	// broken, once set, fails every write: see rebuild.
	broken error
	record []byte // the record being logged, kept for the next

	wake   chan struct{}
	exited chan struct{}

	commits, requests atomic.Int64
}

// An op is one change for the writer to make in its next transaction. done, if not nil, is closed
// once the change is on disk (or failed), with err set.
type op struct {
	apply func(tx *bolt.Tx, now time.Time) error
	done  chan struct{}
	err   error
	// settles is the key of the request whose settled state the op writes, or "", and seq the
	// settle's number.
	settles string
	seq     uint64
	// read marks an op that only reads: it runs after the writes of its batch are on disk.
	read bool
}

// settling is a settle not yet written.
type settling struct {
	state   mcpclient.State
	reached bool
	sent    int
	seq     uint64
}

// apply makes rec, read from the file, as the settle will leave it, unless the file already
// shows it: the writer removes a settle from those not yet written only after its transaction
// committed, so a read between the two finds it in both. A record the settle has not reached is
// still open: the claim wrote Open before the request was sent, and only its settle clears it.
func (s settling) apply(rec *mcpclient.JournalRecord) {
	if !rec.Open {
		return
	}
	rec.State, rec.Reached, rec.Open, rec.Attempts = s.state, rec.Reached || s.reached, false, rec.Attempts+s.sent
}

// OpenFile opens the journal in the file at path, creating it (mode 0600) if it does not exist.
// The file is locked: another process opening it waits for the lock timeout, then fails with
// ErrLocked.
//
// A path that is a symbolic link, or names a file that is not regular or that group or other
// users may write, is refused with an [*InsecureFileError] (matching ErrInsecureFile): its
// records are what Recover resends, and whoever could write them would choose what is sent. A
// file others may read but not write is used: who reads the requests is the user's to decide.
func OpenFile(path string, opts ...Option) (*File, error) {
	o := options{capacity: DefaultCapacity, retention: DefaultRetention, lockTimeout: DefaultLockTimeout, mode: 0o600}
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case o.capacity <= 0:
		return nil, fmt.Errorf("journal: capacity %d: the journal needs room for one request at least", o.capacity)
	case o.retention <= 0:
		return nil, fmt.Errorf("journal: retention %v must be positive", o.retention)
	}
	db, err := bolt.Open(path, o.mode, &bolt.Options{Timeout: o.lockTimeout, NoFreelistSync: true, FreelistType: bolt.FreelistMapType,
		InitialMmapSize: initialMmapSize, OpenFile: openPrivate})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, path)
		}
		return nil, fmt.Errorf("journal: %w", err)
	}
	j := &File{db: db, opts: o, claimed: map[string]bool{}, settling: map[string]settling{}, wake: make(chan struct{}, 1), exited: make(chan struct{})}
	j.wal, err = recoverLog(db, walPath(path))
	if err == nil {
		err = createBuckets(db)
	}
	if err == nil {
		err = renumber(db)
	}
	if err == nil {
		err = j.index()
	}
	if err == nil {
		// Named last, by the transaction that is then the file's last: the log matches the
		// file from here on.
		err = db.Update(func(tx *bolt.Tx) error {
			j.wal.txid = uint64(tx.ID())
			return writeWALState(tx, j.wal)
		})
	}
	if err == nil {
		j.log, err = openLog(walPath(path), o.mode)
	}
	if err == nil {
		j.tx, err = db.Begin(true)
	}
	if err != nil {
		if j.log != nil {
			j.log.Close()
		}
		db.Close()
		return nil, fmt.Errorf("journal: %w", err)
	}
	j.lastCheckpoint, j.interval = time.Now(), checkpointInterval
	go j.write()
	return j, nil
}

// createBuckets creates the buckets a file that is new, or that an earlier version wrote, lacks.
func createBuckets(db *bolt.DB) error {
	return db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{frozenBucket, statesBucket, settledBucket, earlierStatesBucket} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
}

// renumber gives a number to each request an earlier version kept under its key. Each
// transaction moves whole requests, a bounded number of them, so that a large file needs no large
// transaction and a process that dies meanwhile leaves every request in one form or the other, for
// the next open to go on. A request whose values do not decode is moved as it is, to be reported
// by its id.
func renumber(db *bolt.DB) error {
	for {
		moved, err := renumberSome(db, renumberBatch)
		if err != nil || moved == 0 {
			return err
		}
	}
}

// renumberBatch is the most requests renumber moves in one transaction.
const renumberBatch = 1000

// renumberSome moves up to n requests of an earlier version, in one transaction, and returns how
// many it moved.
func renumberSome(db *bolt.DB, n int) (moved int, err error) {
	err = db.Update(func(tx *bolt.Tx) error {
		states, frozenB := tx.Bucket(statesBucket), frozenBuckets(tx)
		earlierStates, earlierRequests := tx.Bucket(earlierStatesBucket), tx.Bucket(earlierRequestsBucket)
		var keys [][]byte
		c := earlierStates.Cursor()
		for k, _ := c.First(); k != nil && len(keys) < n; k, _ = c.Next() {
			keys = append(keys, slices.Clone(k))
		}
		for _, key := range keys {
			st, fr := earlierStates.Get(key), []byte(nil)
			if earlierRequests != nil {
				fr = earlierRequests.Get(key)
			}
			seq, err := frozenB.NextSequence()
			if err != nil {
				return err
			}
			// Rewritten in this version's form when both decode; else kept as they are, and
			// read as what they are: a request that cannot be read.
			var rec mcpclient.JournalRecord
			var decoded standing
			if fr != nil && decodeStanding(st, &decoded) == nil && decodeFrozen(fr, &rec) == nil {
				st, fr = appendStanding(nil, &decoded), appendFrozen(nil, &rec)
			}
			if err := states.Put(statesKey(seq, string(key)), slices.Clone(st)); err != nil {
				return err
			}
			if fr != nil {
				if err := frozenB.Put(numberKey(seq), slices.Clone(fr)); err != nil {
					return err
				}
				if err := earlierRequests.Delete(key); err != nil {
					return err
				}
			}
			if err := earlierStates.Delete(key); err != nil {
				return err
			}
		}
		moved = len(keys)
		if moved == 0 && earlierRequests != nil && earlierRequests.Stats().KeyN == 0 {
			return tx.DeleteBucket(earlierRequestsBucket)
		}
		return nil
	})
	return moved, err
}

// index reads the number of each request the file holds. Should the file hold two numbers for
// one key, which only a hand that wrote into it can make, the later one is the request and the
// earlier one is deleted.
func (j *File) index() error {
	var stale []uint64
	err := j.db.View(func(tx *bolt.Tx) error {
		stale = j.readNumbers(tx)
		return nil
	})
	if err != nil || len(stale) == 0 {
		return err
	}
	return j.db.Update(func(tx *bolt.Tx) error {
		states, frozenB := tx.Bucket(statesBucket), tx.Bucket(frozenBucket)
		for _, num := range stale {
			k, _ := states.Cursor().Seek(numberKey(num))
			if k == nil || binary.BigEndian.Uint64(k) != num {
				continue
			}
			if err := states.Delete(slices.Clone(k)); err != nil {
				return err
			}
			if err := frozenB.Delete(numberKey(num)); err != nil {
				return err
			}
		}
		return nil
	})
}

// readNumbers sets j.numbers and j.count from the states' keys in tx, and returns the numbers of
// the requests a later one of the same key replaced.
func (j *File) readNumbers(tx *bolt.Tx) (stale []uint64) {
	numbers := map[string]uint64{}
	c := tx.Bucket(statesBucket).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if len(k) < 8 {
			continue // no key of statesKey's
		}
		num, key := binary.BigEndian.Uint64(k), string(k[8:])
		if earlier, ok := numbers[key]; ok {
			stale = append(stale, earlier)
		}
		numbers[key] = num
	}
	j.mu.Lock()
	j.numbers = numbers
	j.mu.Unlock()
	j.count = len(numbers)
	return stale
}

// Close writes what is queued, then closes the file. Claims still held stay unresolved in it, to
// be recovered by the next process. Close is idempotent.
func (j *File) Close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		<-j.exited
		return nil
	}
	j.closed = true
	j.mu.Unlock()
	j.signal()
	<-j.exited
	err := j.closeErr
	if cerr := j.log.Close(); err == nil {
		err = cerr
	}
	if cerr := j.db.Close(); err == nil {
		err = cerr
	}
	return err
}

// Path returns the file's path.
func (j *File) Path() string { return j.db.Path() }

// Stats are counts since the File was opened.
type Stats struct {
	// Commits is the number of synced writes: with group commit, fewer than the changes they
	// carried.
	Commits int64
	// Requests is the number of requests newly recorded.
	Requests int64
	// Held is the number of requests in the file now.
	Held int
}

// Stats returns the File's counts.
func (j *File) Stats() Stats {
	var held int
	j.read(func(*bolt.Tx) { held = j.count })
	return Stats{Commits: j.commits.Load(), Requests: j.requests.Load(), Held: held}
}

// Claim records rec if its id is new, durably, before returning; see mcpclient.Journal. It waits
// for the write it joined whatever ctx does, since a write is short and the caller must know
// whether the request was recorded; ctx is checked before it joins one.
func (j *File) Claim(ctx context.Context, rec mcpclient.JournalRecord) (mcpclient.JournalClaim, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	key := rec.ID.JSON()
	j.mu.Lock()
	switch {
	case j.closed:
		j.mu.Unlock()
		return nil, ErrClosed
	case j.claimed[key]:
		j.mu.Unlock()
		return nil, fmt.Errorf("%w: an attempt loop of this process holds request %s", mcpclient.ErrRequestInFlight, key)
	case !rec.Supersedes.IsZero() && !rec.Reissue && j.claimed[rec.Supersedes.JSON()]:
		// Checked under the same lock as the claims of the older request: one that follows
		// queues its write after this one's, and finds the link.
		j.mu.Unlock()
		return nil, fmt.Errorf("%w: an attempt loop of this process holds request %s, which %s would supersede", mcpclient.ErrRequestInFlight, rec.Supersedes.JSON(), key)
	}
	j.claimed[key] = true
	j.mu.Unlock()
	frozen := appendFrozen(nil, &rec)
	c := &claim{j: j, key: key}
	o := &op{done: make(chan struct{}), apply: func(tx *bolt.Tx, now time.Time) error {
		return j.claim(tx, now, key, &rec, frozen, c)
	}}
	if err := j.enqueue(o); err != nil {
		j.release(key)
		return nil, err
	}
	<-o.done
	if o.err != nil {
		j.release(key)
		return nil, o.err
	}
	return c, nil
}

// claim writes rec in tx, open: a new request, or the known one as it stood, whose record it
// keeps in c as the claim's prior.
func (j *File) claim(tx *bolt.Tx, now time.Time, key string, rec *mcpclient.JournalRecord, frozen []byte, c *claim) error {
	known, ok, err := j.find(tx, key)
	if err != nil {
		return err
	}
	if ok {
		prior, err := readRecord(tx, &known)
		if err != nil {
			return err
		}
		if prior.Fingerprint != rec.Fingerprint {
			return fmt.Errorf("%w: the journal holds other content under request %s", mcpclient.ErrRequestIDReused, key)
		}
		if !known.st.SupersededBy.IsZero() {
			return fmt.Errorf("%w: request %s was superseded by %s", mcpclient.ErrAlreadySuperseded, key, known.st.SupersededBy.JSON())
		}
		if known.st.SettledAt != 0 {
			if err := j.del(tx, inSettled, settledKey(known.st.SettledAt, key)); err != nil {
				return err
			}
			known.st.SettledAt = 0
		}
		known.st.Open, known.st.Updated = true, now
		if err := j.writeStanding(tx, &known, now); err != nil {
			return err
		}
		c.num, c.prior, c.known = known.num, prior, true
		return nil
	}
	// Everything that can refuse the request is read before anything is written, so that a
	// refusal leaves the transaction it shares with other requests as it found it.
	olderKey := rec.Supersedes.JSON()
	var older *entry
	if !rec.Supersedes.IsZero() {
		e, ok, err := j.find(tx, olderKey)
		if err != nil {
			return err
		}
		if ok {
			if !e.st.SupersededBy.IsZero() {
				// The first supersession wins: a second would send another replacement
				// beside the first.
				return fmt.Errorf("%w: request %s was superseded by %s", mcpclient.ErrAlreadySuperseded, olderKey, e.st.SupersededBy.JSON())
			}
			older = &e
		}
	}
	var evict []byte
	if j.count >= j.opts.capacity {
		cur := tx.Bucket(settledBucket).Cursor()
		for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
			// The request being superseded stays, as its record, and so does one an attempt
			// loop holds (the original of a re-issue in flight).
			if victim := string(k[8:]); victim != olderKey && !j.isClaimed(victim) {
				evict = slices.Clone(k)
				break
			}
		}
		if evict == nil {
			return fmt.Errorf("%w: all %d requests in the journal are unresolved", mcpclient.ErrLedgerFull, j.opts.capacity)
		}
	}
	if evict != nil {
		if err := j.removeSettled(tx, evict); err != nil {
			return err
		}
	}
	if older != nil {
		older.st.SupersededBy, older.st.Updated = rec.ID, now
		if err := j.writeStanding(tx, older, now); err != nil {
			return err
		}
	}
	num, err := frozenBuckets(tx).NextSequence()
	if err != nil {
		return err
	}
	if err := j.put(tx, inFrozen, numberKey(num), frozen); err != nil {
		return err
	}
	e := entry{key: key, num: num, st: standing{State: mcpclient.StatePending, Open: true, Receipts: rec.Receipts, Updated: now}}
	if err := j.writeStanding(tx, &e, now); err != nil {
		return err
	}
	j.mu.Lock()
	j.numbers[key] = num
	j.mu.Unlock()
	c.num = num
	j.count++
	j.requests.Add(1)
	return nil
}

// An entry is a request the file holds: its key, its number and how it stands.
type entry struct {
	key string
	num uint64
	st  standing
}

// numberKey is the key of the request numbered n in frozenBucket.
func numberKey(n uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), n) }

// statesKey is the key of the request numbered n, under key, in statesBucket.
func statesKey(n uint64, key string) []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(key)), n), key...)
}

// frozenBuckets returns tx's bucket of frozen requests, to which requests are only appended.
func frozenBuckets(tx *bolt.Tx) *bolt.Bucket {
	b := tx.Bucket(frozenBucket)
	b.FillPercent = 1 // appended to, never rewritten: full pages stay full
	return b
}

// numberOf returns the number of the request under key, and whether the file holds one.
func (j *File) numberOf(key string) (uint64, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	num, ok := j.numbers[key]
	return num, ok
}

// find reads how the request under key stands in tx; ok is false when tx holds no such request,
// and the error matches ErrCorrupt when what it holds does not decode.
func (j *File) find(tx *bolt.Tx, key string) (e entry, ok bool, err error) {
	num, ok := j.numberOf(key)
	if !ok {
		return e, false, nil
	}
	raw := tx.Bucket(statesBucket).Get(statesKey(num, key))
	if raw == nil {
		return e, false, nil // being written by the writer's transaction, or removed by it
	}
	e = entry{key: key, num: num}
	return e, true, decodeStanding(raw, &e.st)
}

// writeStanding writes how e stands, entering it in the settled order if nothing can still
// depend on it.
func (j *File) writeStanding(tx *bolt.Tx, e *entry, now time.Time) error {
	if rec := e.st.record(); e.st.SettledAt == 0 && rec.Settled() {
		e.st.SettledAt = now.UnixNano()
		if err := j.put(tx, inSettled, settledKey(e.st.SettledAt, e.key), nil); err != nil {
			return err
		}
	}
	return j.put(tx, inStates, statesKey(e.num, e.key), appendStanding(nil, &e.st))
}

// remove deletes the request under key: its frozen record, how it stands and its place in the
// settled order, as far as it can be read.
func (j *File) remove(tx *bolt.Tx, key string) error {
	num, ok := j.numberOf(key)
	if !ok {
		return nil
	}
	states, sk := tx.Bucket(statesBucket), statesKey(num, key)
	var st standing
	if raw := states.Get(sk); raw != nil && decodeStanding(raw, &st) == nil && st.SettledAt != 0 {
		if err := j.del(tx, inSettled, settledKey(st.SettledAt, key)); err != nil {
			return err
		}
	}
	if err := j.del(tx, inStates, sk); err != nil {
		return err
	}
	if err := j.del(tx, inFrozen, numberKey(num)); err != nil {
		return err
	}
	j.mu.Lock()
	delete(j.numbers, key)
	j.mu.Unlock()
	j.count--
	return nil
}

// removeSettled removes the request at k in the settled order, and k itself, which stays
// behind when the request's standing does not decode.
func (j *File) removeSettled(tx *bolt.Tx, k []byte) error {
	if err := j.remove(tx, string(k[8:])); err != nil {
		return err
	}
	return j.del(tx, inSettled, k)
}

// prune removes the requests settled before now less the retention, a bounded number per write
// so that one write never carries an unbounded backlog.
func (j *File) prune(tx *bolt.Tx, now time.Time) error {
	cutoff := now.Add(-j.opts.retention).UnixNano()
	c := tx.Bucket(settledBucket).Cursor()
	k, _ := c.First()
	for i := 0; i < 1000 && k != nil && int64(binary.BigEndian.Uint64(k[:8])) < cutoff; i++ {
		if key := string(k[8:]); !j.isClaimed(key) { // held: its loop settles it anew
			k = slices.Clone(k)
			if err := j.removeSettled(tx, k); err != nil {
				return err
			}
			k, _ = c.Seek(k) // the cursor's place after a delete
			continue
		}
		k, _ = c.Next()
	}
	return nil
}

// Forget removes id's request; see mcpclient.Journal. One an attempt loop holds, of any client
// sharing the File, is refused with an error matching mcpclient.ErrRequestInFlight.
func (j *File) Forget(ctx context.Context, id mcpclient.ID) error {
	key := id.JSON()
	o := &op{done: make(chan struct{}), apply: func(tx *bolt.Tx, now time.Time) error { return j.remove(tx, key) }}
	j.mu.Lock()
	switch {
	case j.closed:
		j.mu.Unlock()
		return ErrClosed
	case j.claimed[key]:
		j.mu.Unlock()
		return fmt.Errorf("%w: an attempt loop holds request %s", mcpclient.ErrRequestInFlight, key)
	}
	// Queued under the lock that orders claims: a claim of the id that follows is written after
	// the removal.
	j.queue = append(j.queue, o)
	j.mu.Unlock()
	j.signal()
	<-o.done
	return o.err
}

// isClaimed reports whether an attempt loop holds key.
func (j *File) isClaimed(key string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.claimed[key]
}

// Unresolved yields the requests to server that are unresolved and that no attempt loop of this
// process holds; see mcpclient.Journal. The writer reads them, between two writes, and they are
// yielded after, so that what the caller does with each (a Resend) does not wait for the read.
//
// The read and the look at the claims and the settles not yet written are made under the lock
// that claims and settles take: a request settled while the file was read is found in the
// settles not yet written, and one claimed before is found held, so that no request of a live
// loop is taken for a dead one's.
func (j *File) Unresolved(ctx context.Context, server string) iter.Seq2[mcpclient.JournalRecord, error] {
	return func(yield func(mcpclient.JournalRecord, error) bool) {
		var found []mcpclient.JournalRecord
		var unreadable []unreadableRecord
		var err error
		rerr := j.read(func(tx *bolt.Tx) {
			j.mu.Lock()
			defer j.mu.Unlock()
			err = tx.Bucket(statesBucket).ForEach(func(k, v []byte) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				if len(k) < 8 {
					return nil
				}
				e := entry{key: string(k[8:]), num: binary.BigEndian.Uint64(k)}
				if num, ok := j.numbers[e.key]; ok && num != e.num {
					return nil // replaced by a later number of the key
				}
				if err := decodeStanding(v, &e.st); err != nil {
					unreadable = append(unreadable, unreadableRecord{e.key, err})
					return nil
				}
				if e.st.SettledAt != 0 || !e.st.SupersededBy.IsZero() || j.claimed[e.key] {
					return nil
				}
				rec, err := readRecord(tx, &e)
				if err != nil {
					unreadable = append(unreadable, unreadableRecord{e.key, err})
					return nil
				}
				if pending, ok := j.settling[e.key]; ok {
					pending.apply(&rec)
				}
				if rec.Server == server && rec.Unresolved() {
					found = append(found, rec)
				}
				return nil
			})
		})
		if rerr != nil {
			err = rerr
		}
		if err != nil {
			yield(mcpclient.JournalRecord{}, err)
			return
		}
		// A record that does not decode may be one of this server's: each is reported, by its
		// id, rather than hiding the rest behind it.
		for _, u := range unreadable {
			var id mcpclient.ID
			id.UnmarshalJSON([]byte(u.key))
			if id.IsZero() {
				id = mcpclient.StringID(u.key)
			}
			if !yield(mcpclient.JournalRecord{ID: id}, fmt.Errorf("request %s: %w", u.key, u.err)) {
				return
			}
		}
		for _, rec := range found {
			if !yield(rec, nil) {
				return
			}
		}
	}
}

// Lookup returns what the file holds of id: for a look at a request after a restart, before
// deciding what to do with it.
func (j *File) Lookup(ctx context.Context, id mcpclient.ID) (rec mcpclient.JournalRecord, ok bool, err error) {
	rerr := j.read(func(tx *bolt.Tx) {
		e, found, ferr := j.find(tx, id.JSON())
		if ferr != nil || !found {
			err = ferr
			return
		}
		rec, err = readRecord(tx, &e)
		ok = err == nil
	})
	if rerr != nil {
		return rec, false, rerr
	}
	j.mu.Lock()
	if pending, settling := j.settling[id.JSON()]; ok && settling {
		pending.apply(&rec)
	}
	j.mu.Unlock()
	return rec, ok, err
}

func (j *File) release(key string) {
	j.mu.Lock()
	delete(j.claimed, key)
	j.mu.Unlock()
}

// enqueue hands o to the writer.
func (j *File) enqueue(o *op) error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return ErrClosed
	}
	j.queue = append(j.queue, o)
	j.mu.Unlock()
	j.signal()
	return nil
}

func (j *File) signal() {
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// read runs f in the writer, on everything written before it, and waits for it: the changes
// since the last checkpoint are in the writer's transaction only.
func (j *File) read(f func(tx *bolt.Tx)) error {
	o := &op{done: make(chan struct{}), read: true, apply: func(tx *bolt.Tx, _ time.Time) error {
		f(tx)
		return nil
	}}
	if err := j.enqueue(o); err != nil {
		return err
	}
	<-o.done
	return o.err
}

// write is the one writer: each batch carries everything queued since the last began, so that
// the callers who queued while a sync was under way share the next one. It exits once the File
// is closed and its queue written and checkpointed.
func (j *File) write() {
	defer close(j.exited)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		j.mu.Lock()
		batch, closed := j.queue, j.closed
		j.queue = nil
		j.mu.Unlock()
		if len(batch) > 0 {
			j.run(batch)
			j.tidy(time.Now())
			continue
		}
		if closed {
			j.closeErr = j.checkpoint()
			if j.tx != nil {
				j.tx.Rollback() // what the checkpoint could not commit is in the log
			}
			return
		}
		next := j.tidy(time.Now())
		if next.IsZero() {
			<-j.wake
			continue
		}
		timer.Reset(time.Until(next))
		select {
		case <-j.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// settleDelay is how long a change no one waits for (a settle) waits for a request's write to
// ride with. A process that dies within it leaves the request unresolved in the file: resent or
// reported unknown after the restart, never lost.
const settleDelay = 20 * time.Millisecond

// run applies batch's writes in the writer's transaction and, if someone waits for one, logs
// every change not yet logged; then it runs batch's reads. An op's refusal, made before it wrote
// anything, spoils only that op; any other error, or a failed log write, undoes the batch's
// changes, and every write in it fails.
func (j *File) run(batch []*op) {
	now := time.Now()
	mark := len(j.changes)
	err := j.broken
	if err == nil && j.tx == nil {
		j.tx, err = j.db.Begin(true)
	}
	wrote, waited := false, false
	for _, o := range batch {
		if o.read || err != nil {
			continue
		}
		wrote, waited = true, waited || o.done != nil
		if o.err = o.apply(j.tx, now); o.err != nil && !isRefusal(o.err) {
			err = o.err // the transaction may be half-written: undo the batch
		}
	}
	if err == nil && wrote {
		err = j.prune(j.tx, now)
	}
	if err == nil && j.logged == mark && len(j.changes) > mark {
		j.unloggedSince = now
	}
	if err == nil && waited && j.logged < len(j.changes) {
		err = j.flush()
	}
	if err != nil {
		for _, o := range batch {
			if !o.read && (o.err == nil || !isRefusal(o.err)) {
				o.err = fmt.Errorf("journal: write failed: %w", err)
			}
		}
		if j.broken == nil {
			j.rebuild(mark)
		}
	}
	if j.committed != nil {
		j.committed()
	}
	j.mu.Lock()
	for _, o := range batch {
		if o.settles != "" && j.settling[o.settles].seq == o.seq {
			delete(j.settling, o.settles)
		}
	}
	j.mu.Unlock()
	for _, o := range batch {
		if !o.read && o.done != nil {
			close(o.done)
		}
	}
	for _, o := range batch {
		if !o.read {
			continue
		}
		if j.tx == nil {
			o.err = j.broken
			if o.err == nil {
				o.err = ErrClosed
			}
		} else {
			o.apply(j.tx, now)
		}
		close(o.done)
	}
}

// flush appends the changes not yet logged to the log, as one record, and syncs it; a record
// that does not fit in what is left of the log is written by a checkpoint instead.
func (j *File) flush() error {
	j.record = appendRecord(j.record[:0], j.wal.salt, j.wal.gen+1, j.changes[j.logged:])
	if j.logEnd+int64(len(j.record)) > walSize {
		return j.checkpoint()
	}
	walHook(walAppend, j)
	if _, err := j.log.WriteAt(j.record, j.logEnd); err != nil {
		return j.fail(err)
	}
	if err := fdatasync(j.log); err != nil {
		return j.fail(err)
	}
	walHook(walSynced, j)
	j.logEnd += int64(len(j.record))
	j.logged = len(j.changes)
	j.commits.Add(1)
	return nil
}

// checkpoint commits the writer's transaction, naming the log's generation as checkpointed in
// it, and starts the next generation at the log's start.
func (j *File) checkpoint() error {
	if j.broken != nil {
		return j.broken
	}
	if len(j.changes) == 0 || j.tx == nil {
		j.lastCheckpoint = time.Now()
		return nil
	}
	st := j.wal
	st.gen, st.txid = st.gen+1, uint64(j.tx.ID())
	err := writeWALState(j.tx, st)
	if err == nil {
		walHook(walCheckpoint, j)
		err = j.tx.Commit()
	}
	if err != nil {
		return j.fail(err)
	}
	walHook(walCheckpointed, j)
	j.wal, j.logEnd, j.changes, j.logged, j.lastCheckpoint = st, 0, j.changes[:0], 0, time.Now()
	j.commits.Add(1)
	if j.tx, err = j.db.Begin(true); err != nil {
		j.tx = nil // begun again by the next write: nothing is lost
	}
	return nil
}

// tidy checkpoints when the log is half full or the last checkpoint is checkpointInterval old,
// and logs the changes no one waits for once they waited settleDelay. It returns when it has
// something to do next, or zero.
func (j *File) tidy(now time.Time) time.Time {
	if len(j.changes) == 0 || j.broken != nil {
		return time.Time{}
	}
	if j.logEnd >= walSize/2 || now.Sub(j.lastCheckpoint) >= j.interval {
		j.checkpoint()
		return time.Time{}
	}
	if j.logged < len(j.changes) && now.Sub(j.unloggedSince) >= settleDelay {
		if j.flush() != nil {
			return time.Time{}
		}
	}
	next := j.lastCheckpoint.Add(j.interval)
	if j.logged < len(j.changes) {
		if t := j.unloggedSince.Add(settleDelay); t.Before(next) {
			next = t
		}
	}
	return next
}

// fail breaks the File on a failed write of the log or the database: whether what it wrote
// reached the disk is unknown, and only reading the files again, at the next open, tells. What
// was logged before stays in the log.
func (j *File) fail(err error) error {
	if j.tx != nil {
		j.tx.Rollback()
		j.tx = nil
	}
	j.broken = fmt.Errorf("%w: %w", ErrBroken, err)
	return j.broken
}

// rebuild replaces the writer's transaction by one holding the first upTo changes since the
// last checkpoint, those before the batch that failed, and reads the requests' numbers from
// it. Should that fail, the File is broken: a checkpoint without the logged changes would
// retire the log that holds them.
func (j *File) rebuild(upTo int) {
	if j.tx != nil {
		j.tx.Rollback()
		j.tx = nil
	}
	j.changes = j.changes[:upTo]
	j.logged = min(j.logged, upTo)
	tx, err := j.db.Begin(true)
	if err == nil {
		if err = replay(tx, j.changes); err != nil {
			tx.Rollback()
		}
	}
	if err != nil {
		j.broken = fmt.Errorf("%w: %w", ErrBroken, err)
		return
	}
	j.tx = tx
	j.readNumbers(tx)
}

// isRefusal reports whether err is an op's refusal made before it wrote anything.
func isRefusal(err error) bool {
	return errors.Is(err, mcpclient.ErrRequestIDReused) || errors.Is(err, mcpclient.ErrLedgerFull) || errors.Is(err, ErrCorrupt) ||
		errors.Is(err, mcpclient.ErrAlreadySuperseded)
}

// A claim is an attempt loop's hold on one request of a File.
type claim struct {
	j   *File
	key string
	// num is the request's number, prior the request as it stood when claimed, and known
	// whether the file held it; written by the claim's write, read after it.
	num     uint64
	prior   mcpclient.JournalRecord
	known   bool
	settled atomic.Bool
}

func (c *claim) Prior() (mcpclient.JournalRecord, bool) { return c.prior, c.known }

func (c *claim) Rebind(ctx context.Context, b mcpclient.ReceiptBinding) error {
	o := &op{done: make(chan struct{}), apply: func(tx *bolt.Tx, now time.Time) error {
		return c.j.update(tx, c.key, c.num, now, func(s *standing) { s.Receipts, s.Updated = b, now })
	}}
	if err := c.j.enqueue(o); err != nil {
		return err
	}
	<-o.done
	return o.err
}

func (c *claim) Settle(state mcpclient.State, reached bool, sent int) {
	if !c.settled.CompareAndSwap(false, true) {
		return
	}
	j := c.j
	j.mu.Lock()
	if j.closed {
		// Not written: the request stays open in the file, for the next process to recover.
		delete(j.claimed, c.key)
		j.mu.Unlock()
		return
	}
	// Queued and released under one lock, the write first: a claim of the id that follows
	// queues its write after this one, and reads find the state in settling until it is on
	// disk.
	j.seq++
	seq := j.seq
	j.queue = append(j.queue, &op{settles: c.key, seq: seq, apply: func(tx *bolt.Tx, now time.Time) error {
		return j.update(tx, c.key, c.num, now, func(s *standing) {
			s.State, s.Reached, s.Open = state, s.Reached || reached, false
			s.Attempts, s.Updated = s.Attempts+sent, now
		})
	}})
	j.settling[c.key] = settling{state: state, reached: reached, sent: sent, seq: seq}
	delete(j.claimed, c.key)
	j.mu.Unlock()
	j.signal()
}

// Lost is never closed: no one else can take a request of a file this process holds locked.
func (c *claim) Lost() <-chan struct{} { return nil }

// update changes with f how the request under key, numbered num, stands, if the file still holds
// it.
func (j *File) update(tx *bolt.Tx, key string, num uint64, now time.Time, f func(*standing)) error {
	raw := tx.Bucket(statesBucket).Get(statesKey(num, key))
	if raw == nil {
		return nil // forgotten meanwhile
	}
	e := entry{key: key, num: num}
	if err := decodeStanding(raw, &e.st); err != nil {
		return err
	}
	f(&e.st)
	return j.writeStanding(tx, &e, now)
}

// unreadableRecord is a request whose record did not decode, by its key.
type unreadableRecord struct {
	key string
	err error
}

// standing is how a request stands: the fields of its JournalRecord that change. Its JSON form is
// how earlier versions wrote it.
type standing struct {
	State        mcpclient.State          `json:"state"`
	Reached      bool                     `json:"reached,omitempty"`
	Open         bool                     `json:"open,omitempty"`
	Attempts     int                      `json:"attempts,omitempty"`
	Receipts     mcpclient.ReceiptBinding `json:"receipts"`
	Updated      time.Time                `json:"updated"`
	SupersededBy mcpclient.ID             `json:"supersededBy,omitzero"`
	// SettledAt is when it settled (its key in the settled order), in Unix nanoseconds; 0 while
	// it waits for an outcome.
	SettledAt int64 `json:"settledAt,omitempty"`
}

// into sets the fields of rec that st holds.
func (st *standing) into(rec *mcpclient.JournalRecord) {
	rec.State, rec.Attempts, rec.Receipts, rec.Updated, rec.SupersededBy = st.State, st.Attempts, st.Receipts, st.Updated, st.SupersededBy
	rec.Reached, rec.Open = st.Reached, st.Open
}

// record is the part of a JournalRecord that st says.
func (st *standing) record() mcpclient.JournalRecord {
	return mcpclient.JournalRecord{State: st.State, Reached: st.Reached, Open: st.Open, SupersededBy: st.SupersededBy}
}

// readRecord reads the request e, standing as e says.
func readRecord(tx *bolt.Tx, e *entry) (mcpclient.JournalRecord, error) {
	var rec mcpclient.JournalRecord
	raw := tx.Bucket(frozenBucket).Get(numberKey(e.num))
	if raw == nil {
		return rec, fmt.Errorf("%w: no request for its state", ErrCorrupt)
	}
	if err := decodeFrozen(raw, &rec); err != nil {
		return rec, err
	}
	e.st.into(&rec)
	return rec, nil
}

func settledKey(at int64, key string) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(key)), uint64(at))
	return append(k, key...)
}

var _ mcpclient.Journal = (*File)(nil)
