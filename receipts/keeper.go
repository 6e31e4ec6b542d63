package receipts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Options.
const (
	DefaultWait  = 30 * time.Second
	DefaultLease = 30 * time.Second
	// DefaultRetention is long enough for a client's retries and for a worker that crashed to
	// restart and recover from its journal, and short enough that a store in memory holds a
	// busy server's receipts; the declaration tells clients, which never resend past it.
	DefaultRetention        = time.Hour
	DefaultDetachedTimeout  = 5 * time.Minute
	DefaultMaxBodyBytes     = 4 << 20
	DefaultMaxResponseBytes = 4 << 20
	DefaultMaxSessions      = 4096
)

// storeTimeout bounds one store operation made on behalf of a request whose client may be
// gone: settling, releasing and renewing go on after a disconnect, but not forever.
const storeTimeout = 10 * time.Second

// Options configure a Keeper and the HTTP middleware. The zero value is ready to use: every
// zero field means its default.
type Options struct {
	// Store keeps the receipts. nil means a new MemoryStore with its defaults (1024
	// receipts), whose epoch is then the middleware's own.
	Store Store
	// Principal returns who sent an HTTP request; receipts of different principals never
	// meet. nil means BearerPrincipal. HTTP only.
	Principal func(*http.Request) string
	// Wait bounds how long a resend waits for the same request still running before it is
	// refused as in flight. 0 means DefaultWait.
	Wait time.Duration
	// Lease is how long a claim holds without renewal; the holder renews it every third of
	// it while the request runs, so only a holder that died lets it lapse. 0 means
	// DefaultLease.
	Lease time.Duration
	// Retention is how long a settled receipt is kept at least, and what the declaration
	// promises: a full store refuses new claims rather than forget a receipt sooner. 0 means
	// DefaultRetention.
	Retention time.Duration
	// Disconnect is what a client's disconnect does to its running opted-in request. ""
	// means DisconnectContinue.
	Disconnect Disconnect
	// DetachedTimeout bounds how long a request runs on after its client disconnected, with
	// DisconnectContinue. 0 means DefaultDetachedTimeout.
	DetachedTimeout time.Duration
	// MaxBodyBytes bounds the request body the middleware reads. A larger body passes through
	// untouched when nothing says it opted in, and is refused with 413 when its header or its
	// session says it did. 0 means DefaultMaxBodyBytes. HTTP only.
	MaxBodyBytes int64
	// MaxResponseBytes bounds the response kept for a receipt, and the response the
	// middleware holds to add its declaration. A request whose response is larger still
	// runs and is answered, but its receipt says the outcome is unknown. 0 means
	// DefaultMaxResponseBytes.
	MaxResponseBytes int
	// MaxSessions bounds the sessions of older revisions remembered as opted in by their
	// initialize; the least recently used is forgotten first (its requests still opt in by
	// HeaderOptIn). 0 means DefaultMaxSessions. HTTP only.
	MaxSessions int
	// Logger receives store failures (Warn and Error) and decisions (Debug). nil means
	// slog.Default().
	Logger *slog.Logger
	// Observe, if not nil, is called for every decision and store outcome, synchronously:
	// it must be quick and safe for concurrent use. Stats.Observe counts them.
	Observe func(Event)
}

func (o Options) withDefaults() Options {
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.Store == nil {
		o.Store = NewMemoryStore(MemoryOptions{Retention: o.Retention})
	}
	if o.Principal == nil {
		o.Principal = BearerPrincipal
	}
	if o.Wait <= 0 {
		o.Wait = DefaultWait
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.Disconnect == "" {
		o.Disconnect = DisconnectContinue
	}
	if o.DetachedTimeout <= 0 {
		o.DetachedTimeout = DefaultDetachedTimeout
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// A Keeper applies the receipt rules over a Store, for any transport: Admit says what to do
// with an opted-in request, and the Hold of a request it lets run keeps its lease until the
// response is settled. It is safe for concurrent use.
type Keeper struct {
	opts      Options
	nextPrune atomic.Int64 // unix nanoseconds of the next prune; a claim past it prunes
}

// NewKeeper returns a Keeper with opts.
func NewKeeper(opts Options) *Keeper {
	if opts.Disconnect != "" && opts.Disconnect != DisconnectContinue && opts.Disconnect != DisconnectCancel {
		panic(fmt.Sprintf("receipts: unknown Disconnect %q", opts.Disconnect))
	}
	return &Keeper{opts: opts.withDefaults()}
}

// Declaration returns what the keeper declares to clients.
func (k *Keeper) Declaration(ctx context.Context) (Declaration, error) {
	d, err := k.opts.Store.Describe(ctx)
	if err != nil {
		return Declaration{}, err
	}
	return Declaration{
		Scope:       d.Scope,
		Epoch:       d.Epoch,
		RetentionMs: k.opts.Retention.Milliseconds(),
		MaxReceipts: d.MaxReceipts,
		Disconnect:  k.opts.Disconnect,
	}, nil
}

// An Admission is what to do with an opted-in request.
type Admission struct {
	Verdict Verdict
	// Response is the stored response, unmarked, when Verdict is Replay.
	Response []byte
	// Hold is the claim when Verdict is Run: the caller must end it with Settle or Release.
	Hold *Hold
}

// Admit decides what to do with an opted-in request of key and fingerprint fp: claim it and
// return Run, or return the stored response, or a refusal. A resend of a running request waits
// for it (up to Options.Wait) and then gets its answer. The error is ctx's when ctx ended while
// waiting, or the store's.
func (k *Keeper) Admit(ctx context.Context, key Key, fp Fingerprint) (Admission, error) {
	k.maybePrune(ctx)
	var waitCtx context.Context
	for {
		c, err := k.opts.Store.Claim(ctx, key, fp, k.opts.Lease)
		switch {
		case errors.Is(err, ErrFull):
			k.observe(ctx, Event{Kind: EventFull, Key: key})
			return Admission{Verdict: Full}, nil
		case err != nil:
			k.storeFailed(ctx, key, "claim", err)
			return Admission{}, err
		case c.Claimed:
			k.observe(ctx, Event{Kind: EventClaimed, Key: key})
			return Admission{Verdict: Run, Hold: k.hold(ctx, c.Lease)}, nil
		}
		switch v := Decide(c.Receipt, fp); v {
		case Replay:
			k.observe(ctx, Event{Kind: EventReplayed, Key: key})
			return Admission{Verdict: Replay, Response: c.Receipt.Response}, nil
		case Reused:
			k.observe(ctx, Event{Kind: EventReused, Key: key})
			return Admission{Verdict: Reused}, nil
		case InDoubt:
			k.observe(ctx, Event{Kind: EventInDoubt, Key: key})
			return Admission{Verdict: InDoubt}, nil
		}
		if waitCtx == nil {
			k.observe(ctx, Event{Kind: EventWaited, Key: key})
			var cancel context.CancelFunc
			waitCtx, cancel = context.WithTimeout(ctx, k.opts.Wait)
			defer cancel()
		}
		if err := k.opts.Store.Wait(waitCtx, key); err != nil {
			switch {
			case ctx.Err() != nil:
				return Admission{}, ctx.Err()
			case waitCtx.Err() != nil:
				k.observe(ctx, Event{Kind: EventInFlight, Key: key})
				return Admission{Verdict: InFlight}, nil
			}
			k.storeFailed(ctx, key, "wait", err)
			return Admission{}, err
		}
	}
}

// maybePrune prunes the store at most once per pruning period, on the request that finds the
// period over: the middleware owns no goroutine of its own to do it.
func (k *Keeper) maybePrune(ctx context.Context) {
	now := time.Now()
	next := k.nextPrune.Load()
	if now.UnixNano() < next || !k.nextPrune.CompareAndSwap(next, now.Add(k.prunePeriod()).UnixNano()) {
		return
	}
	n, err := k.opts.Store.Prune(ctx, k.opts.Retention)
	if err != nil {
		k.storeFailed(ctx, Key{}, "prune", err)
		return
	}
	if n > 0 {
		k.opts.Logger.DebugContext(ctx, "receipts: pruned", "count", n)
	}
}

func (k *Keeper) prunePeriod() time.Duration { return min(k.opts.Retention/4, time.Minute) }

func (k *Keeper) observe(ctx context.Context, ev Event) {
	if ev.Kind != EventStoreError {
		k.opts.Logger.DebugContext(ctx, "receipts: "+ev.Kind.String(), "id", ev.Key.ID)
	}
	if k.opts.Observe != nil {
		k.opts.Observe(ev)
	}
}

func (k *Keeper) storeFailed(ctx context.Context, key Key, op string, err error) {
	k.opts.Logger.ErrorContext(ctx, "receipts: store "+op+" failed", "id", key.ID, "err", err)
	k.observe(ctx, Event{Kind: EventStoreError, Key: key, Err: err})
}

// A Hold is a claimed receipt whose request runs. It renews its lease in a goroutine of its own
// until Settle or Release ends it; one of them must be called, once.
type Hold struct {
	k    *Keeper
	key  Key
	ctx  context.Context // the request's values, never its cancellation
	stop chan struct{}   // closed by end
	done chan struct{}   // closed when the renewal goroutine has returned
	once sync.Once
	// lease is written by the renewal goroutine until done is closed, and read only after.
	lease Lease
}

func (k *Keeper) hold(ctx context.Context, lease Lease) *Hold {
	h := &Hold{
		k:     k,
		key:   lease.Key,
		ctx:   context.WithoutCancel(ctx),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
		lease: lease,
	}
	go h.renew()
	return h
}

// renew keeps the lease alive every third of its length. A lost lease ends the renewals: the
// store will refuse the settlement too, and a resend learns the outcome is unknown.
func (h *Hold) renew() {
	defer close(h.done)
	period := h.k.opts.Lease / 3
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-ticker.C:
		}
		ctx, cancel := context.WithTimeout(h.ctx, storeTimeout)
		lease, err := h.k.opts.Store.Renew(ctx, h.lease, h.k.opts.Lease)
		cancel()
		switch {
		case errors.Is(err, ErrLeaseLost):
			h.k.opts.Logger.WarnContext(h.ctx, "receipts: lease lost while the request runs", "id", h.key.ID)
			h.k.observe(h.ctx, Event{Kind: EventStoreError, Key: h.key, Err: err})
			return
		case err != nil:
			h.k.storeFailed(h.ctx, h.key, "renew", err)
		default:
			h.lease = lease
		}
	}
}

// end stops the renewals and waits for them; false when the hold had already ended.
func (h *Hold) end() bool {
	ended := false
	h.once.Do(func() {
		close(h.stop)
		<-h.done
		ended = true
	})
	return ended
}

// ErrHoldEnded: Settle or Release was called on a Hold that had already ended.
var ErrHoldEnded = errors.New("receipts: hold already ended")

// Settle keeps response, the whole JSON-RPC response of the request, and ends the hold. A
// response too large for the store is replaced by an in-doubt error, so that a resend learns
// its outcome is unknown instead of waiting for a lease to lapse. An error means the receipt
// could not be settled (the lease was lost, or the store failed): it lapses, and a resend is
// answered as in doubt.
func (h *Hold) Settle(ctx context.Context, response []byte) error {
	if !h.end() {
		return ErrHoldEnded
	}
	err := h.k.opts.Store.Settle(ctx, h.lease, response)
	if errors.Is(err, ErrTooLarge) {
		h.k.opts.Logger.WarnContext(ctx, "receipts: response too large to keep; a resend will be told its outcome is unknown", "id", h.key.ID, "bytes", len(response))
		err = h.k.opts.Store.Settle(ctx, h.lease, inDoubtResponse(h.key.ID, "the response was larger than the receipt store keeps"))
	}
	if err != nil {
		h.k.storeFailed(ctx, h.key, "settle", err)
		return err
	}
	h.k.observe(ctx, Event{Kind: EventSettled, Key: h.key})
	return nil
}

// SettleInDoubt settles the receipt with an in-doubt error saying why: the request ran, or may
// have run, and its response cannot be kept (the handler panicked, answered no response, or
// failed with a server error).
func (h *Hold) SettleInDoubt(ctx context.Context, why string) error {
	return h.Settle(ctx, inDoubtResponse(h.key.ID, why))
}

// Release deletes the receipt of a request that failed before it ran, and ends the hold: the
// key counts as unseen again.
func (h *Hold) Release(ctx context.Context) error {
	if !h.end() {
		return ErrHoldEnded
	}
	if err := h.k.opts.Store.Release(ctx, h.lease); err != nil {
		h.k.storeFailed(ctx, h.key, "release", err)
		return err
	}
	h.k.observe(ctx, Event{Kind: EventReleased, Key: h.key})
	return nil
}

// EventKind names what happened to an opted-in request.
type EventKind int

const (
	EventClaimed    EventKind = iota + 1 // claimed: it runs
	EventReplayed                        // answered from its receipt
	EventWaited                          // a resend waits for the same request running
	EventInFlight                        // refused: still running past the wait bound
	EventReused                          // refused: the id was used for other bytes
	EventInDoubt                         // refused: its outcome is unknown
	EventFull                            // refused: the store is full of unresolved receipts
	EventSettled                         // its response was kept
	EventReleased                        // it failed before it ran: no receipt kept
	EventStoreError                      // the store failed, or a lease was lost (Event.Err)
)

func (k EventKind) String() string {
	switch k {
	case EventClaimed:
		return "claimed"
	case EventReplayed:
		return "replayed"
	case EventWaited:
		return "waited"
	case EventInFlight:
		return "in flight"
	case EventReused:
		return "reused"
	case EventInDoubt:
		return "in doubt"
	case EventFull:
		return "full"
	case EventSettled:
		return "settled"
	case EventReleased:
		return "released"
	case EventStoreError:
		return "store error"
	}
	return "unknown"
}

// An Event is one decision or store outcome, for Options.Observe.
type Event struct {
	Kind EventKind
	Key  Key
	Err  error // for EventStoreError
}

// Stats counts events; its Observe method fits Options.Observe. The zero value is ready to use
// and it is safe for concurrent use.
type Stats struct {
	counts [EventStoreError + 1]atomic.Int64
}

// Observe counts ev.
func (s *Stats) Observe(ev Event) {
	if ev.Kind > 0 && int(ev.Kind) < len(s.counts) {
		s.counts[ev.Kind].Add(1)
	}
}

// Count returns how many events of kind were observed.
func (s *Stats) Count(kind EventKind) int64 {
	if kind <= 0 || int(kind) >= len(s.counts) {
		return 0
	}
	return s.counts[kind].Load()
}
