package events

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/northstar-mcp/mcpclient"
)

// The JSON-RPC error codes the extension defines. The draft calls them provisional until the
// core specification allocates them.
const (
	CodeNotFound              = -32023
	CodeForbidden             = -32024
	CodeResourceExhausted     = -32025
	CodeUnsupported           = -32026
	CodeCallbackEndpointError = -32027
)

// The sentinels matching the extension's error codes, whether they come as the JSON-RPC error
// of a request (inside the *mcpclient.Error the call returns) or inside a
// notifications/events/error or notifications/events/terminated (an *Error).
var (
	// ErrNotFound: an unknown event name, or no such subscription on events/unsubscribe.
	ErrNotFound = errors.New("events: not found")
	// ErrForbidden: the principal may not subscribe to this event with these arguments, or
	// lost the right to.
	ErrForbidden = errors.New("events: forbidden")
	// ErrResourceExhausted: a server limit or quota was reached.
	ErrResourceExhausted = errors.New("events: resource exhausted")
	// ErrUnsupported: a well-formed request asked for something not supported here, such as a
	// delivery mode the event type does not offer.
	ErrUnsupported = errors.New("events: unsupported")
	// ErrCallbackEndpoint: the webhook callback failed verification or could not be reached.
	ErrCallbackEndpoint = errors.New("events: callback endpoint error")
)

func sentinel(code int64) error {
	switch code {
	case CodeNotFound:
		return ErrNotFound
	case CodeForbidden:
		return ErrForbidden
	case CodeResourceExhausted:
		return ErrResourceExhausted
	case CodeUnsupported:
		return ErrUnsupported
	case CodeCallbackEndpointError:
		return ErrCallbackEndpoint
	}
	return nil
}

// Error is the error object that notifications/events/error and notifications/events/terminated
// carry. errors.Is matches it with the sentinel of its code.
type Error struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("events error %d: %s", e.Code, e.Message) }

// Is matches the sentinel of e's code.
func (e *Error) Is(target error) bool {
	s := sentinel(e.Code)
	return s != nil && s == target
}

// DataKind returns data.kind ("event" or "subscription" on a NotFound), or "".
func (e *Error) DataKind() string {
	var d struct {
		Kind string `json:"kind"`
	}
	json.Unmarshal(e.Data, &d)
	return d.Kind
}

// TerminatedError reports a subscription the server ended (notifications/events/terminated).
// errors.Is matches it with the sentinel of its error's code: ErrNotFound or ErrUnsupported ask
// the client to list the event types again and resubscribe, ErrForbidden to stop.
type TerminatedError struct {
	// Name is the event type of the subscription.
	Name string
	// Err is the error the server gave.
	Err *Error
}

func (e *TerminatedError) Error() string {
	return "events: subscription to " + e.Name + " terminated: " + e.Err.Error()
}

func (e *TerminatedError) Unwrap() error { return e.Err }

// classify adds the sentinel of the extension's code to an error whose chain holds such a
// JSON-RPC error, keeping the *mcpclient.Error (and its code) in the chain.
func classify(err error) error {
	var rpc *mcpclient.RPCError
	if errors.As(err, &rpc) {
		if s := sentinel(rpc.Code); s != nil {
			return &codedError{err: err, sentinel: s}
		}
	}
	return err
}

// codedError is an error of the client that errors.Is also matches with a sentinel.
type codedError struct {
	err      error
	sentinel error
}

func (e *codedError) Error() string   { return e.err.Error() }
func (e *codedError) Unwrap() []error { return []error{e.err, e.sentinel} }
