package mcpclient

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/google/uuid"
	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
)

// An ID is a JSON-RPC request id: a string or an integer. The zero ID is no id.
//
// The client makes its own ids from UUIDs, so that no two processes, and no process before and
// after a restart, ever put two requests under one id: a server that keeps receipts for ids would
// otherwise answer a new request with an old result. A caller may pin an id of its own with
// [WithRequestID]; the client then checks it against its ledger.
type ID struct {
	str  string
	num  int64
	kind idKind
}

type idKind uint8

const (
	idNone idKind = iota
	idString
	idNumber
)

// StringID returns the id s. An empty s is still a valid string id.
func StringID(s string) ID { return ID{str: s, kind: idString} }

// IntID returns the integer id n.
func IntID(n int64) ID { return ID{num: n, kind: idNumber} }

// IsZero reports whether id is the zero ID, which is no id at all.
func (id ID) IsZero() bool { return id.kind == idNone }

// String returns the id as text: the string itself, or the integer in decimal. Use JSON for the
// form that tells "7" from 7.
func (id ID) String() string {
	switch id.kind {
	case idString:
		return id.str
	case idNumber:
		return strconv.FormatInt(id.num, 10)
	}
	return ""
}

// JSON returns the id's JSON encoding, which is also its key in the ledger: "7" and 7 are two
// different ids.
func (id ID) JSON() string {
	// Every request's key: built in one allocation where it can be, rather than grown in a
	// slice and copied.
	switch {
	case id.kind == idString && jsonrpc.PlainString(id.str):
		return `"` + id.str + `"`
	case id.kind == idNumber:
		return strconv.FormatInt(id.num, 10)
	}
	return string(id.appendJSON(nil))
}

func (id ID) appendJSON(b []byte) []byte {
	switch id.kind {
	case idString:
		if jsonrpc.PlainString(id.str) {
			b = append(b, '"')
			b = append(b, id.str...)
			return append(b, '"')
		}
		enc, _ := json.Marshal(id.str) // a Go string always marshals
		return append(b, enc...)
	case idNumber:
		return strconv.AppendInt(b, id.num, 10)
	}
	return append(b, "null"...)
}

// MarshalJSON encodes the id as a JSON string or number; the zero ID encodes as null.
func (id ID) MarshalJSON() ([]byte, error) { return id.appendJSON(nil), nil }

// plainIDKey returns raw, less JSON's white space around it, when it is a plain JSON string (as
// every id the client makes is), and so already the key idKey would return: an answer is then
// matched to its call without a copy of its id.
func plainIDKey(raw []byte) ([]byte, bool) {
	raw = bytes.Trim(raw, " \t\r\n")
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' && jsonrpc.PlainString(raw[1:len(raw)-1]) {
		return raw, true
	}
	return nil, false
}

// idKey returns the canonical JSON text of the id in raw (what ID.JSON returns), as the client
// keys the calls awaiting answers. Every answer is matched by it, so the ids the client makes
// (plain strings: UUIDs) are read without encoding/json.
func idKey(raw []byte) (string, error) {
	if key, ok := plainIDKey(raw); ok {
		return string(key), nil
	}
	var id ID
	if err := json.Unmarshal(raw, &id); err != nil {
		return "", err
	}
	return id.JSON(), nil
}

// UnmarshalJSON accepts a JSON string or an integer that fits in 64 bits. null, fractions,
// exponents and other values are refused with ErrInvalidID: such ids cannot be matched reliably.
func (id *ID) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return ErrInvalidID
	}
	if b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidID, err)
		}
		*id = StringID(s)
		return nil
	}
	if !jsonInteger(b) {
		return fmt.Errorf("%w: %s", ErrInvalidID, truncate(b, 40))
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrInvalidID, truncate(b, 40))
	}
	*id = IntID(n)
	return nil
}

// jsonInteger reports whether b is an integer in JSON's grammar: strconv also takes "+7" and
// "007", which are no JSON, and two spellings of one id must not both be accepted.
func jsonInteger(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 || (b[0] == '0' && len(b) > 1) {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// IDVersion selects the UUID version of generated ids.
type IDVersion int

const (
	// UUIDv4 ids are 122 random bits (the default).
	UUIDv4 IDVersion = 4
	// UUIDv7 ids start with a millisecond timestamp, so they sort by creation time in logs and
	// databases, followed by 74 random bits.
	UUIDv7 IDVersion = 7
)

// newID makes a fresh id and its JSON form, in one allocation: the id is the key without its
// quotes. It reads crypto/rand directly rather than through uuid's optional random pool, which a
// program may switch on globally and which keeps the bytes of future ids on the heap.
func newID(v IDVersion) (id ID, key string, err error) {
	var u uuid.UUID
	if v == UUIDv7 {
		u, err = uuid.NewV7FromReader(rand.Reader)
	} else if _, err = rand.Read(u[:]); err == nil {
		u[6] = u[6]&0x0f | 0x40 // version 4
		u[8] = u[8]&0x3f | 0x80 // the RFC 9562 variant
	}
	if err != nil {
		return ID{}, "", fmt.Errorf("mcpclient: generating request id: %w", err)
	}
	var b [2 + 36]byte
	b[0], b[len(b)-1] = '"', '"'
	appendUUID(b[1:1], u)
	key = string(b[:])
	return StringID(key[1 : len(key)-1]), key, nil
}

// IDFromKey returns the request id of the job key in namespace: a UUID of version 8 (RFC 9562,
// name-based with SHA-256) made from the two strings alone. The same namespace and key give the
// same id in every process, on every machine and in every version of this module; different ones
// give different ids. The namespace keeps apart the jobs of different programs or kinds that
// might share a key ("billing/charge", "bookings").
//
// A worker that calls under IDFromKey(namespace, jobKey) (with [WithRequestID]) makes "run this
// job" idempotent across restarts: a run after a crash sends the same id, so with a journal the
// client finds the earlier attempt and its state ([Client.Journaled]), and a server that keeps
// receipts answers a resend of the same bytes from its receipt rather than running the tool
// again. The id stands for one content: calling under it with other arguments is refused with
// ErrRequestIDReused, so a job whose input changes on purpose needs a new key.
func IDFromKey(namespace, key string) ID {
	h := sha256.New()
	// Each part carries its length, so that no two (namespace, key) pairs hash the same bytes:
	// ("ab", "c") and ("a", "bc") differ.
	var n [binary.MaxVarintLen64]byte
	h.Write([]byte(idFromKeyDomain))
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(namespace)))])
	h.Write([]byte(namespace))
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(key)))])
	h.Write([]byte(key))
	var sum [sha256.Size]byte
	var u uuid.UUID
	copy(u[:], h.Sum(sum[:0]))
	u[6] = u[6]&0x0f | 0x80 // version 8
	u[8] = u[8]&0x3f | 0x80 // the RFC 9562 variant
	return StringID(string(appendUUID(make([]byte, 0, 36), u)))
}

// idFromKeyDomain sets IDFromKey's hashes apart from any other use of SHA-256 over the same
// strings. Changing it changes every derived id: it is fixed for good.
const idFromKeyDomain = "mcpclient IDFromKey v1\x00"

// appendUUID appends u in its canonical form, as u.String() writes it.
func appendUUID(b []byte, u uuid.UUID) []byte {
	const digits = "0123456789abcdef"
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, digits[c>>4], digits[c&0x0f])
	}
	return b
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}
