package transport

import (
	"errors"
	"fmt"
	"time"
)

// Outcome is what a client can know about one attempt to deliver a request.
type Outcome int

const (
	// Answered: a JSON-RPC response for the request's id arrived, result or error. Definite.
	Answered Outcome = iota + 1
	// NotDelivered: the request cannot have reached the MCP handler (dial refused, DNS, TLS
	// handshake, the frame not entirely written, a redirect to another origin that the client
	// did not follow, or refused unread by the server itself: 429 or 503 with Retry-After, 404
	// for a known session). Definite: nothing ran, resending is safe. A 429 or 503 with
	// Retry-After is taken for the server's own: a client that may reach the server through a
	// gateway answering so after forwarding can count it uncertain (the client's retry policy
	// has a setting for it).
	NotDelivered
	// Uncertain: bytes may have reached the server and no answer came (reset, EOF mid-stream,
	// timeout, any other 5xx, since a proxy may answer one after the server ran the request, an
	// error body naming no request or another, a 202 no stream can answer, a stream closed before
	// the response).
	Uncertain
	// Conflict: the server refused the id itself (HTTP 409, an in-flight refusal, or
	// MCP_REQUEST_ID_REUSED). A hard signal: never retried.
	Conflict
)

var outcomeNames = [...]string{
	Answered:     "answered",
	NotDelivered: "not delivered",
	Uncertain:    "uncertain",
	Conflict:     "conflict",
}

func (o Outcome) String() string {
	if o > 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Error is how a transport reports a failed delivery.
type Error struct {
	// Outcome says how far the bytes can have got: NotDelivered, Uncertain or Conflict.
	Outcome Outcome

	// ID is the JSON text of the request id the failure belongs to. Empty when the failure is
	// not tied to one request (the whole connection ended).
	ID string

	// RetryAfter is the server's own delay hint (Retry-After, SSE retry:), or zero.
	RetryAfter time.Duration

	// Reply is the JSON-RPC error object the server sent with the failure (an HTTP 400 or 409
	// with a JSON-RPC body), or nil. The client reads it as the server's answer.
	Reply []byte

	// Err is the underlying cause.
	Err error
}

func (e *Error) Error() string {
	var id string
	if e.ID != "" {
		id = " for request " + e.ID
	}
	if e.Err == nil {
		return fmt.Sprintf("transport: %s%s", e.Outcome, id)
	}
	return fmt.Sprintf("transport: %s%s: %v", e.Outcome, id, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// OutcomeOf reports the delivery outcome an error from Send, or one reported to a Receiver,
// stands for. An error that is not an *Error is Uncertain: a transport that cannot say how far
// the bytes got must not let a client assume they did not arrive. A nil error is Answered.
func OutcomeOf(err error) Outcome {
	if err == nil {
		return Answered
	}
	var te *Error
	if errors.As(err, &te) && te.Outcome != 0 {
		return te.Outcome
	}
	return Uncertain
}
