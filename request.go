package mcpclient

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
)

// A Request is one frozen JSON-RPC request: method, params and id, serialized exactly once.
//
// Every attempt sends the same bytes; nothing about a Request changes after it is made, so it is
// safe to share and to keep. A Request belongs to the Client that made it, whose ledger
// remembers its id (see [Ledger]). Its id denotes this content and nothing else: to change the
// content, make a new Request with [Client.Supersede].
type Request struct {
	id         ID
	key        string // id.JSON(), the ledger and routing key
	method     string
	toolName   string // for tools/call: the tool, whose hints decide safety
	params     json.RawMessage
	frame      []byte
	fp         Fingerprint
	idempotent bool // the caller vouched that running it twice does no harm
	supersedes ID
	reason     string // why it supersedes, for the ledger
	// automatic: the client itself made it to replace a request whose attempt loop it runs (a
	// safe request re-issued under a new id), so the replaced one is in flight by design.
	automatic bool
	progress  ProgressHandler
	idle, max time.Duration
	header    map[string]string // transport headers naming the request (stateless revisions)
	owner     *Client
}

// ID returns the request's id.
func (r *Request) ID() ID { return r.id }

// Method returns the JSON-RPC method.
func (r *Request) Method() string { return r.method }

// Bytes returns a copy of the exact bytes every attempt sends.
func (r *Request) Bytes() []byte { return bytes.Clone(r.frame) }

// Params returns a copy of the serialized params.
func (r *Request) Params() json.RawMessage { return bytes.Clone(r.params) }

// Fingerprint returns the SHA-256 of the request's bytes.
func (r *Request) Fingerprint() Fingerprint { return r.fp }

// Supersedes returns the id of the request this one replaces, or the zero ID.
func (r *Request) Supersedes() ID { return r.supersedes }

// Fingerprint is the SHA-256 of a request's serialized bytes.
type Fingerprint [sha256.Size]byte

// String returns the fingerprint in hex.
func (f Fingerprint) String() string { return hex.EncodeToString(f[:]) }

// freeze serializes a request once. params must already be valid JSON (or empty).
func freeze(owner *Client, id ID, method string, params json.RawMessage) *Request {
	key := id.JSON()
	frame := jsonrpc.AppendRequest(make([]byte, 0, len(params)+len(method)+len(key)+48), key, method, params)
	return &Request{
		id:     id,
		key:    key,
		method: method,
		params: params,
		frame:  frame,
		fp:     sha256.Sum256(frame),
		owner:  owner,
	}
}

// A Response is the successful answer to a Request.
type Response struct {
	// Request is the request that was answered. After an automatic re-issue of a safe request
	// it is the re-issued one, whose id differs from the original's.
	Request *Request
	// Result is the raw JSON result.
	Result json.RawMessage
	// Attempts is how many times the request's bytes were sent, re-issues included.
	Attempts int
}

// Decode unmarshals the result into v.
func (r *Response) Decode(v any) error { return json.Unmarshal(r.Result, v) }
