package receipts

import (
	"context"
	"crypto/sha256"
	"errors"
	"time"
)

// A Key names one receipt: the principal that sent the request and the request's JSON-RPC id
// as its JSON text. The principal keeps one client from reading another's results under an id
// it guessed or reused.
type Key struct {
	Principal string
	ID        string
}

// A Fingerprint is the SHA-256 of a request's bytes exactly as received. The client never
// re-serializes a request it resends, so byte equality is the test of "the same request".
type Fingerprint [sha256.Size]byte

// FingerprintOf hashes a request's raw bytes: the HTTP body of a POST, or a stdio line.
func FingerprintOf(request []byte) Fingerprint { return sha256.Sum256(request) }

// State is where a receipt stands.
type State int

const (
	// Running: claimed, its lease held, no response yet.
	Running State = iota + 1
	// Settled: the whole JSON-RPC response is kept.
	Settled
	// Lapsed: claimed, the lease expired and no response came: its holder died mid-handler.
	// The outcome is unknown and the request is never run again under this key.
	Lapsed
)

func (s State) String() string {
	switch s {
	case Running:
		return "running"
	case Settled:
		return "settled"
	case Lapsed:
		return "lapsed"
	}
	return "unknown"
}

// A Receipt is what a Store holds for a Key.
type Receipt struct {
	Key         Key
	Fingerprint Fingerprint
	State       State
	// Response is the whole JSON-RPC response, result or error, when State is Settled. It is
	// the store's: callers must not modify it.
	Response []byte
	// ClaimedAt and SettledAt are by the store's clock; SettledAt is zero unless Settled.
	ClaimedAt time.Time
	SettledAt time.Time
	// LeaseExpires is when the holder's lease ends (Running) or ended (Lapsed), by the
	// store's clock.
	LeaseExpires time.Time
}

// A Lease is the right to settle or release a claimed receipt. Its Token fences a holder that
// lost the lease (it paused past the expiry, or its process was partitioned from a shared
// store): a store refuses Renew, Settle and Release under a token that no longer holds the
// receipt, so a late writer cannot overwrite what a resend was told.
type Lease struct {
	Key   Key
	Token string
	// Expires is the end of the lease by the store's clock. A holder renews well before it.
	Expires time.Time
}

// A ClaimResult is what Claim found or made.
type ClaimResult struct {
	// Claimed is true when this call created the receipt: the caller holds Lease and must run
	// the request, then Settle or Release.
	Claimed bool
	Lease   Lease
	// Receipt is the receipt that was already there, when Claimed is false.
	Receipt Receipt
}

// A Description says what a store promises, for the declaration a server sends its clients.
type Description struct {
	// Scope is how long a receipt can be found: ScopeProcess for a store that lives and dies
	// with the server process, ScopeStore for one shared by every process of a deployment.
	Scope Scope
	// Epoch names the holder of the receipts, new whenever it starts empty.
	Epoch string
	// MaxReceipts is the store's capacity: receipts beyond it push out the oldest settled
	// ones. 0 means the store sets no count of its own.
	MaxReceipts int
}

// Scope is the lifetime of receipts a server declares.
type Scope string

const (
	ScopeSession Scope = "session"
	ScopeProcess Scope = "process"
	ScopeStore   Scope = "store"
)

// Errors a Store returns; implementations wrap them, and callers test with errors.Is.
var (
	// ErrFull: every receipt the store can hold is unresolved (running or lapsed), so it
	// refuses a new claim rather than forget one whose outcome a client may still ask for.
	ErrFull = errors.New("receipts: store full of receipts unresolved or within their retention")
	// ErrLeaseLost: the token no longer holds the receipt (the lease expired, or the receipt
	// was settled, released or pruned). Nothing was changed.
	ErrLeaseLost = errors.New("receipts: lease lost")
	// ErrNotFound: no receipt under the key.
	ErrNotFound = errors.New("receipts: no receipt")
	// ErrTooLarge: the response is larger than the store keeps.
	ErrTooLarge = errors.New("receipts: response too large to keep")
)

// A Store keeps receipts. Every method is safe for concurrent use, by several goroutines and,
// for a shared store, by several processes: Claim is atomic per Key, and the lease token fences
// every write after it. Times (leases, retention) are by the store's own clock (a shared store
// uses its database's clock), so holders on machines whose clocks disagree still agree on who
// holds what.
//
// A store never evicts an unresolved receipt (Running or Lapsed) to make room: it refuses new
// claims with ErrFull instead. It may forget settled receipts when it needs room for new ones,
// oldest first, and forgets them after retention when Prune is called.
type Store interface {
	// Claim creates a Running receipt for key with fingerprint fp and a lease of ttl, unless
	// the key already has a receipt, which it then returns unchanged. ErrFull when it has no
	// room.
	Claim(ctx context.Context, key Key, fp Fingerprint, ttl time.Duration) (ClaimResult, error)
	// Renew extends the lease to ttl from now, while lease still holds the receipt; it returns
	// the renewed lease, or ErrLeaseLost.
	Renew(ctx context.Context, lease Lease, ttl time.Duration) (Lease, error)
	// Settle keeps response, the whole JSON-RPC response, while lease holds the receipt; the
	// receipt becomes Settled and its lease ends. ErrLeaseLost when the lease no longer holds
	// it: a resend may have been told its outcome is unknown, which must stay true. ErrTooLarge
	// when the store cannot keep response; the receipt is then left as it was.
	Settle(ctx context.Context, lease Lease, response []byte) error
	// Release deletes a receipt whose request failed before it ran (parse, validation,
	// authorization), while lease holds it: the key counts as unseen again.
	Release(ctx context.Context, lease Lease) error
	// Lookup returns the receipt of key, or ErrNotFound.
	Lookup(ctx context.Context, key Key) (Receipt, error)
	// Wait returns when the receipt of key may have left Running (it was settled, released or
	// pruned, or its lease expired) or when ctx ends (with ctx's error). It may return early;
	// callers look again.
	Wait(ctx context.Context, key Key) error
	// Prune deletes the settled receipts settled more than retention ago, and the lapsed ones
	// whose lease ended more than retention ago, and returns how many it deleted.
	Prune(ctx context.Context, retention time.Duration) (int, error)
	// Describe says what the store promises.
	Describe(ctx context.Context) (Description, error)
}
