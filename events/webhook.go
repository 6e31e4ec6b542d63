package events

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/northstar-mcp/mcpclient"
)

// WebhookDelivery says where and how the server delivers a webhook subscription's events.
type WebhookDelivery struct {
	// URL is the https callback the server POSTs to.
	URL string `json:"url"`
	// Secret is the Standard Webhooks signing secret: "whsec_" and the base64 of 24 to 64
	// random bytes. NewSecret makes one.
	Secret string `json:"secret"`
}

// SubscribeParams are the params of events/subscribe.
type SubscribeParams struct {
	Name      string
	Arguments map[string]any
	Delivery  WebhookDelivery
	// Cursor is where delivery begins; nil (sent as null) starts from now.
	Cursor *string
	// MaxAgeMs bounds replay: no events older than this many milliseconds.
	MaxAgeMs *int64
	// TTL is the lifetime the client suggests; 0 leaves it to the server, unless NoExpiry.
	TTL time.Duration
	// NoExpiry asks for a subscription that never expires (ttlMs null); TTL is then ignored.
	NoExpiry bool
}

type subscribeWire struct {
	Name      string          `json:"name"`
	Arguments map[string]any  `json:"arguments,omitempty"`
	Delivery  deliveryWire    `json:"delivery"`
	Cursor    *string         `json:"cursor"`
	MaxAgeMs  *int64          `json:"maxAgeMs,omitempty"`
	TTLMs     json.RawMessage `json:"ttlMs,omitempty"`
}

type deliveryWire struct {
	Mode   DeliveryMode `json:"mode"`
	URL    string       `json:"url"`
	Secret string       `json:"secret"`
}

// MarshalJSON writes the params as the extension does: delivery.mode "webhook", ttlMs a number,
// null (NoExpiry) or absent.
func (p SubscribeParams) MarshalJSON() ([]byte, error) {
	w := subscribeWire{Name: p.Name, Arguments: p.Arguments, Cursor: p.Cursor, MaxAgeMs: p.MaxAgeMs,
		Delivery: deliveryWire{Mode: DeliveryWebhook, URL: p.Delivery.URL, Secret: p.Delivery.Secret}}
	switch {
	case p.NoExpiry:
		w.TTLMs = json.RawMessage("null")
	case p.TTL > 0:
		w.TTLMs, _ = json.Marshal(max(p.TTL.Milliseconds(), 1))
	}
	return json.Marshal(w)
}

// DeliveryStatus is the health of a webhook subscription's deliveries, as a refresh reports it.
type DeliveryStatus struct {
	// Active: the server is delivering; false: it had suspended delivery, which the refresh
	// that reported it has just resumed.
	Active         bool   `json:"active"`
	LastDeliveryAt string `json:"lastDeliveryAt,omitempty"`
	// LastError is a category: connection_refused, timeout, tls_error, http_4xx, http_5xx or
	// challenge_failed; nil when none.
	LastError    *string `json:"lastError,omitempty"`
	FailedSince  string  `json:"failedSince,omitempty"`
	Throttled    bool    `json:"throttled,omitempty"`
	RetryAfterMs *int64  `json:"retryAfterMs,omitempty"`
}

// SubscribeResult is the answer to events/subscribe.
type SubscribeResult struct {
	// ID is the server's handle of the subscription, sent in X-MCP-Subscription-Id on every
	// delivery.
	ID string `json:"id"`
	// RefreshBefore is when the grant expires (ISO 8601); nil: it never does. See Expiry.
	RefreshBefore *string `json:"refreshBefore"`
	// Cursor is a position safe to persist; nil when the type has no replay.
	Cursor *string `json:"cursor,omitempty"`
	// Truncated: delivery starts later than the cursor asked.
	Truncated      bool            `json:"truncated,omitempty"`
	DeliveryStatus *DeliveryStatus `json:"deliveryStatus,omitempty"`
	Meta           json.RawMessage `json:"_meta,omitempty"`
}

// Expiry returns when the grant expires; expires is false for a subscription granted no expiry
// (or a refreshBefore that is no RFC 3339 time, which the caller cannot schedule by).
func (r *SubscribeResult) Expiry() (until time.Time, expires bool) {
	if r.RefreshBefore == nil {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, *r.RefreshBefore)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// NewSecret returns a fresh signing secret for WebhookDelivery: "whsec_" and the base64 of 32
// random bytes.
func NewSecret() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails: crypto/rand panics rather than return a short read
	return secretPrefix + base64.StdEncoding.EncodeToString(b)
}

const secretPrefix = "whsec_"

// validSecret reports whether s is "whsec_" and the base64 of 24 to 64 bytes.
func validSecret(s string) bool {
	rest, ok := strings.CutPrefix(s, secretPrefix)
	if !ok {
		return false
	}
	b, err := base64.StdEncoding.DecodeString(rest)
	return err == nil && len(b) >= 24 && len(b) <= 64
}

// Subscribe registers, or refreshes, a webhook subscription (events/subscribe). Calling it again
// with the same name, arguments and delivery URL refreshes the same subscription; the server
// expects that before the grant expires (see KeepSubscribed). It refuses locally, with
// CodeInvalidArgument, a callback that is not https and a secret that is not "whsec_" and the
// base64 of 24 to 64 bytes, which the server would refuse.
func Subscribe(ctx context.Context, c mcpclient.Caller, p *SubscribeParams, opts ...mcpclient.CallOption) (*SubscribeResult, error) {
	switch {
	case p == nil || p.Name == "":
		return nil, refused("events/subscribe needs an event name")
	case !strings.HasPrefix(p.Delivery.URL, "https://"):
		return nil, refused("events/subscribe: the callback URL %q is not https", p.Delivery.URL)
	case !validSecret(p.Delivery.Secret):
		return nil, refused("events/subscribe: the secret is not whsec_ and the base64 of 24 to 64 bytes")
	}
	var res SubscribeResult
	if _, err := call(ctx, c, "events/subscribe", p, &res, opts); err != nil {
		return nil, err
	}
	return &res, nil
}

// UnsubscribeParams are the params of events/unsubscribe: the subscription's key.
type UnsubscribeParams struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments,omitempty"`
	Delivery  struct {
		URL string `json:"url"`
	} `json:"delivery"`
}

// Unsubscribe ends the webhook subscription of name, arguments and callback url at once
// (events/unsubscribe). A server that holds no such subscription answers ErrNotFound.
func Unsubscribe(ctx context.Context, c mcpclient.Caller, name string, arguments map[string]any, url string, opts ...mcpclient.CallOption) error {
	if name == "" {
		return refused("events/unsubscribe needs an event name")
	}
	p := UnsubscribeParams{Name: name, Arguments: arguments}
	p.Delivery.URL = url
	_, err := call(ctx, c, "events/unsubscribe", p, nil, opts)
	return err
}
