package receipts

import (
	"container/list"
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Defaults of MemoryOptions. A store must hold every receipt settled within the retention, so
// the count bounds the calls per retention a server takes before it refuses new ones: with the
// default retention, 100,000 an hour, about 28 a second. Size it for the server's rate.
const (
	DefaultMaxReceipts = 100_000
	DefaultMaxBytes    = 256 << 20
)

// entryOverhead approximates what a receipt costs in memory besides its key and response, so
// that MaxBytes bounds many tiny receipts too.
const entryOverhead = 256

// MemoryOptions configure a MemoryStore. The zero value is ready to use.
type MemoryOptions struct {
	// MaxReceipts bounds the receipts held, unresolved and settled. 0 means DefaultMaxReceipts.
	MaxReceipts int
	// MaxBytes bounds the memory the receipts take: their responses and keys, plus a fixed
	// overhead per receipt. 0 means DefaultMaxBytes.
	MaxBytes int64
	// Retention is how long a settled receipt is kept at least: a full store makes room only by
	// forgetting receipts settled longer ago, for a client may resend an id until then, and a
	// forgotten id would run again. It must not be shorter than Options.Retention, which the
	// declaration promises. 0 means DefaultRetention.
	Retention time.Duration
	// Now is the store's clock, for leases and retention. nil means time.Now.
	Now func() time.Time
}

// A MemoryStore is a Store in the server's memory, bounded in count and bytes. It is safe for
// concurrent use. Its receipts last as long as the process, so it describes itself with scope
// process and an epoch of its own, random, drawn when it is made: a restarted server has a new
// one, which tells clients that its receipts are gone.
//
// When it is full it forgets the oldest settled receipt past its retention to make room for a
// new claim; it never forgets an unresolved one, nor one within its retention, and refuses new
// claims with ErrFull instead: a client that resends a forgotten id would have it run again.
type MemoryStore struct {
	maxReceipts int
	maxBytes    int64
	retention   time.Duration
	now         func() time.Time
	epoch       string

	mu      sync.Mutex
	entries map[Key]*memEntry
	settled list.List // of *memEntry, in the order they settled: the oldest first
	bytes   int64
	tokens  uint64
}

type memEntry struct {
	receipt Receipt // State is Running or Settled; Lapsed is computed by the clock
	token   string
	size    int64
	// changed is closed when the entry is settled, released or removed; waiters then look
	// again.
	changed chan struct{}
	settled *list.Element // in MemoryStore.settled, once settled
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore(opts MemoryOptions) *MemoryStore {
	s := &MemoryStore{
		maxReceipts: opts.MaxReceipts,
		maxBytes:    opts.MaxBytes,
		retention:   opts.Retention,
		now:         opts.Now,
		epoch:       rand.Text(),
		entries:     map[Key]*memEntry{},
	}
	if s.maxReceipts <= 0 {
		s.maxReceipts = DefaultMaxReceipts
	}
	if s.maxBytes <= 0 {
		s.maxBytes = DefaultMaxBytes
	}
	if s.retention <= 0 {
		s.retention = DefaultRetention
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// state returns e's state at now.
func (e *memEntry) state(now time.Time) State {
	if e.receipt.State == Running && !now.Before(e.receipt.LeaseExpires) {
		return Lapsed
	}
	return e.receipt.State
}

func (e *memEntry) snapshot(now time.Time) Receipt {
	r := e.receipt
	r.State = e.state(now)
	return r
}

// Claim implements Store.
func (s *MemoryStore) Claim(ctx context.Context, key Key, fp Fingerprint, ttl time.Duration) (ClaimResult, error) {
	if err := ctx.Err(); err != nil {
		return ClaimResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if e := s.entries[key]; e != nil {
		return ClaimResult{Receipt: e.snapshot(now)}, nil
	}
	size := int64(len(key.Principal)+len(key.ID)) + entryOverhead
	if !s.makeRoomLocked(1, size, now) {
		return ClaimResult{}, fmt.Errorf("%w (%d receipts, %d bytes)", ErrFull, len(s.entries), s.bytes)
	}
	s.tokens++
	lease := Lease{Key: key, Token: strconv.FormatUint(s.tokens, 10), Expires: now.Add(ttl)}
	s.entries[key] = &memEntry{
		receipt: Receipt{Key: key, Fingerprint: fp, State: Running, ClaimedAt: now, LeaseExpires: lease.Expires},
		token:   lease.Token,
		size:    size,
		changed: make(chan struct{}),
	}
	s.bytes += size
	return ClaimResult{Claimed: true, Lease: lease}, nil
}

// makeRoomLocked forgets settled receipts past their retention at now, oldest first, until
// count more receipts of size more bytes fit; false when they cannot fit without forgetting an
// unresolved receipt or one within its retention.
func (s *MemoryStore) makeRoomLocked(count int, size int64, now time.Time) bool {
	for len(s.entries)+count > s.maxReceipts || s.bytes+size > s.maxBytes {
		front := s.settled.Front()
		if front == nil || now.Sub(front.Value.(*memEntry).receipt.SettledAt) < s.retention {
			return false
		}
		s.removeLocked(front.Value.(*memEntry))
	}
	return true
}

func (s *MemoryStore) removeLocked(e *memEntry) {
	delete(s.entries, e.receipt.Key)
	if e.settled != nil {
		s.settled.Remove(e.settled)
	} else {
		close(e.changed) // a settled entry's channel is already closed
	}
	s.bytes -= e.size
}

// holderLocked returns the entry lease holds, or ErrLeaseLost.
func (s *MemoryStore) holderLocked(lease Lease, now time.Time) (*memEntry, error) {
	e := s.entries[lease.Key]
	if e == nil || e.token != lease.Token || e.state(now) != Running {
		return nil, ErrLeaseLost
	}
	return e, nil
}

// Renew implements Store.
func (s *MemoryStore) Renew(ctx context.Context, lease Lease, ttl time.Duration) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return lease, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	e, err := s.holderLocked(lease, now)
	if err != nil {
		return lease, err
	}
	e.receipt.LeaseExpires = now.Add(ttl)
	lease.Expires = e.receipt.LeaseExpires
	return lease, nil
}

// Settle implements Store.
func (s *MemoryStore) Settle(ctx context.Context, lease Lease, response []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	e, err := s.holderLocked(lease, now)
	if err != nil {
		return err
	}
	grow := int64(len(response))
	if e.size+grow > s.maxBytes || !s.makeRoomLocked(0, grow, now) {
		return fmt.Errorf("%w (%d bytes)", ErrTooLarge, len(response))
	}
	e.receipt.Response = append([]byte(nil), response...)
	e.receipt.State = Settled
	e.receipt.SettledAt = now
	e.receipt.LeaseExpires = now
	e.token = ""
	e.size += grow
	s.bytes += grow
	e.settled = s.settled.PushBack(e)
	close(e.changed)
	return nil
}

// Release implements Store.
func (s *MemoryStore) Release(ctx context.Context, lease Lease) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.holderLocked(lease, s.now())
	if err != nil {
		return err
	}
	s.removeLocked(e)
	return nil
}

// Lookup implements Store.
func (s *MemoryStore) Lookup(ctx context.Context, key Key) (Receipt, error) {
	if err := ctx.Err(); err != nil {
		return Receipt{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[key]
	if e == nil {
		return Receipt{}, ErrNotFound
	}
	return e.snapshot(s.now()), nil
}

// Wait implements Store. It returns as soon as the receipt is settled, released or removed,
// and otherwise when its lease expires by the store's clock (looking again whenever a timer for
// the remaining lease fires, since the holder may have renewed it meanwhile).
func (s *MemoryStore) Wait(ctx context.Context, key Key) error {
	for {
		s.mu.Lock()
		e := s.entries[key]
		now := s.now()
		if e == nil || e.state(now) != Running {
			s.mu.Unlock()
			return nil
		}
		changed, left := e.changed, e.receipt.LeaseExpires.Sub(now)
		s.mu.Unlock()

		timer := time.NewTimer(left)
		select {
		case <-changed:
			timer.Stop()
			return nil
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
	}
}

// Prune implements Store.
func (s *MemoryStore) Prune(ctx context.Context, retention time.Duration) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cutoff := s.now().Add(-retention)
	pruned := 0
	for front := s.settled.Front(); front != nil; front = s.settled.Front() {
		e := front.Value.(*memEntry)
		if e.receipt.SettledAt.After(cutoff) {
			break
		}
		s.removeLocked(e)
		pruned++
	}
	now := s.now()
	for _, e := range s.entries {
		if e.state(now) == Lapsed && !e.receipt.LeaseExpires.After(cutoff) {
			s.removeLocked(e)
			pruned++
		}
	}
	return pruned, nil
}

// Describe implements Store.
func (s *MemoryStore) Describe(ctx context.Context) (Description, error) {
	return Description{Scope: ScopeProcess, Epoch: s.epoch, MaxReceipts: s.maxReceipts}, nil
}

// Len returns how many receipts the store holds, unresolved and settled.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}
