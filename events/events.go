// Package events is the client side of the Events extension (io.modelcontextprotocol/events),
// EXPERIMENTAL: the extension is a draft (SEP-3415), and this package's API and wire shapes may
// change with it, error codes included.
//
// A server that declares the extension (under capabilities.extensions) lists event types
// ([List]); each names the delivery modes it supports:
//   - poll: [Poll] sends one events/poll; [PollLoop] runs the loop the extension asks of a
//     client (drain at once while hasMore, else wait nextPollMs, never under a floor, persist
//     the cursor the server returned, never replay a null one);
//   - push: [Router.Stream] holds an events/stream request open and hands its
//     notifications/events/* to typed handlers, reconnecting with its cursor when the stream
//     breaks or goes silent;
//   - webhook: [Subscribe] and [Unsubscribe] register a callback URL; [KeepSubscribed] refreshes
//     the subscription before each grant expires.
//
// Every call refuses, before sending, a server that does not declare the extension
// ([ErrNotDeclared]): the extension forbids sending events/* to such a server.
//
// Cursors are *string: nil is the extension's null ("start from now", or "this event type has
// no replay"), and an absent cursor reads as nil. A client that received a null cursor sends
// null again; the loops of this package do.
//
// The package is built on the client's public API alone (NewRequest, Do, Session, notification
// handlers), as the tasks package is. Its calls take a mcpclient.Caller.
package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/extcall"
)

// ExtensionID identifies the extension in capabilities.extensions.
const ExtensionID = "io.modelcontextprotocol/events"

// SubscriptionIDMeta is the _meta key by which every notifications/events/* names the
// events/stream request it belongs to (that request's JSON-RPC id).
const SubscriptionIDMeta = "io.modelcontextprotocol/subscriptionId"

// DeliveryMode is a way of delivering an event type's occurrences.
type DeliveryMode string

// The delivery modes an event type may list.
const (
	DeliveryPoll    DeliveryMode = "poll"
	DeliveryPush    DeliveryMode = "push"
	DeliveryWebhook DeliveryMode = "webhook"
)

// Settings is what a server declares under capabilities.extensions[ExtensionID].
type Settings struct {
	// ListChanged: the server sends notifications/events/list_changed.
	ListChanged bool `json:"listChanged,omitempty"`
}

// Declared returns the server's settings for the extension, and whether it declares the
// extension at all (with a JSON object, as extension settings must be).
func Declared(caps mcpclient.ServerCapabilities) (Settings, bool) {
	raw, ok := caps.Extensions[ExtensionID]
	if !ok {
		return Settings{}, false
	}
	var s Settings
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &s) != nil {
		return Settings{}, false
	}
	return s, true
}

// Descriptor is one event type of events/list.
type Descriptor struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Delivery    []DeliveryMode `json:"delivery"`
	// InputSchema is the JSON Schema of a subscription's arguments.
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	// PayloadSchema is the JSON Schema of an occurrence's data.
	PayloadSchema json.RawMessage `json:"payloadSchema,omitempty"`
	Meta          json.RawMessage `json:"_meta,omitempty"`
}

// Supports reports whether the event type lists mode.
func (d *Descriptor) Supports(mode DeliveryMode) bool {
	for _, m := range d.Delivery {
		if m == mode {
			return true
		}
	}
	return false
}

// ListResult is one page of events/list.
type ListResult struct {
	Events     []*Descriptor   `json:"events"`
	NextCursor string          `json:"nextCursor,omitempty"`
	Meta       json.RawMessage `json:"_meta,omitempty"`
}

// Occurrence is one event: an entry of a poll result, the params of notifications/events/event,
// the body of a webhook delivery.
type Occurrence struct {
	// EventID identifies the event, for deduplication.
	EventID string `json:"eventId"`
	// Name is the event type.
	Name string `json:"name"`
	// Timestamp is when the event occurred, ISO 8601; see Time.
	Timestamp string `json:"timestamp"`
	// Data is the payload, described by the type's payloadSchema.
	Data json.RawMessage `json:"data"`
	// Cursor is the subscription's position after this event (push and webhook); nil when
	// the type has no replay.
	Cursor *string         `json:"cursor,omitempty"`
	Meta   json.RawMessage `json:"_meta,omitempty"`
}

// Time returns Timestamp parsed as RFC 3339, or the zero time if it is not.
func (o *Occurrence) Time() time.Time {
	t, err := time.Parse(time.RFC3339Nano, o.Timestamp)
	if err != nil {
		return time.Time{}
	}
	return t
}

func (o *Occurrence) validate() error {
	switch {
	case o.EventID == "":
		return errors.New("an event without eventId")
	case o.Name == "":
		return fmt.Errorf("event %s has no name", o.EventID)
	}
	return nil
}

// PollParams are the params of events/poll.
type PollParams struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments,omitempty"`
	// Cursor is where to resume; nil (sent as null) starts from now.
	Cursor *string `json:"cursor"`
	// MaxAgeMs bounds replay: no events older than this many milliseconds.
	MaxAgeMs *int64 `json:"maxAgeMs,omitempty"`
	// MaxEvents caps the events of one answer.
	MaxEvents *int `json:"maxEvents,omitempty"`
}

// PollResult is the answer to events/poll.
type PollResult struct {
	Events []*Occurrence `json:"events"`
	// Cursor is the position to poll from next; nil when the type has no replay.
	Cursor *string `json:"cursor,omitempty"`
	// Truncated: the server started later than the cursor asked; events may have been skipped.
	Truncated bool `json:"truncated,omitempty"`
	// HasMore: more events wait; poll again at once.
	HasMore bool `json:"hasMore,omitempty"`
	// NextPollMs is the server's suggested wait before the next poll, in milliseconds.
	NextPollMs *int64          `json:"nextPollMs,omitempty"`
	Meta       json.RawMessage `json:"_meta,omitempty"`
}

// NextPoll returns the server's suggested wait before the next poll, 0 when it suggests none.
func (r *PollResult) NextPoll() time.Duration {
	if r.NextPollMs == nil || *r.NextPollMs <= 0 {
		return 0
	}
	return time.Duration(*r.NextPollMs) * time.Millisecond
}

func (r *PollResult) UnmarshalJSON(b []byte) error {
	type plain PollResult
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	for i, o := range r.Events {
		if o == nil {
			return fmt.Errorf("event %d of the poll result is null", i)
		}
		if err := o.validate(); err != nil {
			return err
		}
	}
	return nil
}

// ErrNotDeclared: a call refused, before sending, because the server does not declare the
// extension. The *mcpclient.Error carrying it says CodeInvalidArgument.
var ErrNotDeclared = errors.New("events: the server does not declare the events extension")

func refused(format string, args ...any) error {
	return &mcpclient.Error{Code: mcpclient.CodeInvalidArgument, Err: fmt.Errorf(format, args...)}
}

// checkDeclared refuses a server that does not declare the extension.
func checkDeclared(ctx context.Context, c mcpclient.Caller, method string) error {
	init, err := c.Session(ctx)
	if err != nil {
		return err
	}
	if _, ok := Declared(init.Capabilities); !ok {
		return refused("%w: not sending %s", ErrNotDeclared, method)
	}
	return nil
}

// call checks the declaration, sends method with params, and decodes the answer into out
// (when not nil). A JSON-RPC error of the extension's codes is matched by its sentinel.
func call(ctx context.Context, c mcpclient.Caller, method string, params, out any, opts []mcpclient.CallOption) (*mcpclient.Response, error) {
	if err := checkDeclared(ctx, c, method); err != nil {
		return nil, err
	}
	resp, err := extcall.Call(ctx, c, method, params, out, opts)
	if err != nil {
		return nil, classify(err)
	}
	return resp, nil
}

type cursorParams struct {
	Cursor string `json:"cursor,omitempty"`
}

// ListPage returns one page of events/list, starting at cursor ("" for the first page).
func ListPage(ctx context.Context, c mcpclient.Caller, cursor string, opts ...mcpclient.CallOption) (*ListResult, error) {
	var res ListResult
	if _, err := call(ctx, c, "events/list", cursorParams{cursor}, &res, opts); err != nil {
		return nil, err
	}
	for i, d := range res.Events {
		if d == nil || d.Name == "" {
			return nil, &mcpclient.Error{Code: mcpclient.CodeProtocol, Err: fmt.Errorf("event type %d of events/list has no name", i)}
		}
	}
	return &res, nil
}

// List iterates over every event type the server lists, fetching pages as needed; it yields
// the first error and stops. mcpclient.Collect gathers them.
func List(ctx context.Context, c mcpclient.Caller) iter.Seq2[*Descriptor, error] {
	return mcpclient.Paginate(ctx, func(ctx context.Context, cursor string) ([]*Descriptor, string, error) {
		page, err := ListPage(ctx, c, cursor)
		if err != nil {
			return nil, "", err
		}
		return page.Events, page.NextCursor, nil
	})
}

// Poll sends one events/poll. The request reads and changes nothing at the server: after an
// uncertain attempt it may be sent again (pass mcpclient.WithIdempotent to have the client do
// so).
func Poll(ctx context.Context, c mcpclient.Caller, p *PollParams, opts ...mcpclient.CallOption) (*PollResult, error) {
	if p == nil || p.Name == "" {
		return nil, refused("events/poll needs an event name")
	}
	var res PollResult
	if _, err := call(ctx, c, "events/poll", p, &res, opts); err != nil {
		return nil, err
	}
	return &res, nil
}
