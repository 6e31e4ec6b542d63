package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"
)

// An Option configures a Client at Connect.
type Option interface{ applyOption(*config) }

type optionFunc func(*config)

func (f optionFunc) applyOption(c *config) { f(c) }

type config struct {
	retry         RetryPolicy
	ledgerCap     int
	receipts      ReceiptScope
	idVersion     IDVersion
	logger        *slog.Logger
	info          Implementation
	notifications map[string]NotificationHandler

	requestHandlers map[string]RequestHandler
	sampling        SamplingHandler
	elicitation     ElicitationHandler
	urlElicitation  URLElicitationHandler
	roots           []Root // nil: no roots capability
	logHandler      LogHandler
	resourceUpdated ResourceUpdatedHandler
	keepalive       time.Duration
	version         string // pinned protocol revision, or "" to negotiate
	taskStatus      TaskStatusHandler
	taskPoll        time.Duration // AwaitTask's interval when the server suggests none; 0: default
	serverStream    bool          // open the listening channel at once
	handshake       time.Duration // bound on opening a session under a context without deadline; 0: none
}

// listens reports whether the client has anything to receive from the server unprompted, so
// that a transport with a separate channel for it (the HTTP GET stream) opens one: handlers for
// what comes there, or WithServerStream.
func (c *config) listens() bool {
	return c.serverStream || len(c.notifications) > 0 || len(c.requestHandlers) > 0 || c.sampling != nil ||
		c.elicitation != nil || c.urlElicitation != nil || c.roots != nil || c.logHandler != nil || c.resourceUpdated != nil ||
		c.taskStatus != nil
}

// capabilities is what the client declares in initialize.
func (c *config) capabilities() ClientCapabilities {
	var caps ClientCapabilities
	if c.roots != nil {
		caps.Roots = &RootsCapability{ListChanged: true}
	}
	if c.sampling != nil {
		caps.Sampling = json.RawMessage(`{}`)
	}
	caps.Elicitation = c.elicitationCapability()
	return caps
}

func newConfig(opts []Option) config {
	c := config{
		retry:     DefaultRetryPolicy(),
		ledgerCap: DefaultLedgerCapacity,
		idVersion: UUIDv4,
		logger:    slog.New(slog.DiscardHandler),
		info:      Implementation{Name: "mcpclient", Version: Version},
		handshake: DefaultHandshakeTimeout,
	}
	for _, o := range opts {
		if o != nil {
			o.applyOption(&c)
		}
	}
	c.retry = c.retry.withDefaults()
	return c
}

// Version is this module's version, sent as clientInfo.version unless WithClientInfo says
// otherwise.
const Version = "0.1.0"

// WithRetryPolicy sets the retry policy. Default: DefaultRetryPolicy(); zero fields of p take
// their defaults.
func WithRetryPolicy(p RetryPolicy) Option {
	return optionFunc(func(c *config) { c.retry = p })
}

// WithLedgerCapacity bounds the ledger to n entries. Default DefaultLedgerCapacity; n <= 0 keeps
// the default.
func WithLedgerCapacity(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.ledgerCap = n
		}
	})
}

// WithReceipts asserts that the server keeps request receipts in scope, for a server known to
// keep them that does not declare it. A declaration by the server takes precedence. Default:
// none asserted.
func WithReceipts(scope ReceiptScope) Option {
	return optionFunc(func(c *config) { c.receipts = scope })
}

// WithIDVersion selects the UUID version of generated ids. Default UUIDv4.
func WithIDVersion(v IDVersion) Option {
	return optionFunc(func(c *config) {
		if v == UUIDv4 || v == UUIDv7 {
			c.idVersion = v
		}
	})
}

// WithLogger sets the logger for debug and warning records (retries, dropped frames). Default:
// discard.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.logger = l
		}
	})
}

// WithClientInfo sets the clientInfo sent in initialize. Default {"mcpclient", Version}.
func WithClientInfo(info Implementation) Option {
	return optionFunc(func(c *config) { c.info = info })
}

// A NotificationHandler receives one server notification. Handlers run one at a time, in arrival
// order, on a goroutine the client owns; ctx ends when the session does. A handler may call the
// Client, but a handler that blocks holds up the notifications behind it.
type NotificationHandler func(ctx context.Context, method string, params json.RawMessage)

// WithNotificationHandler registers h for notifications named method; "*" receives those with no
// handler of their own. Default: notifications are logged at debug level and dropped.
func WithNotificationHandler(method string, h NotificationHandler) Option {
	return optionFunc(func(c *config) {
		if c.notifications == nil {
			c.notifications = make(map[string]NotificationHandler)
		}
		c.notifications[method] = h
	})
}

// WithKeepalive pings the server every interval while the client is open, so that a dead
// connection is found before a call needs it. A session of a stateless revision (2026-07-28)
// holds no connection between requests, and the keepalive sends nothing there; call Ping to ask
// whether such a server is alive. Default: no keepalive.
func WithKeepalive(interval time.Duration) Option {
	return optionFunc(func(c *config) { c.keepalive = interval })
}

// WithServerStream opens the transport's channel for unprompted server messages (the Streamable
// HTTP GET stream of the older revisions) as soon as the session starts, so that the server's
// pings are answered: some servers (the go-sdk's with a keepalive) end sessions whose pings fail.
// It costs a long-lived request and a goroutine per session. Default: the channel opens when the
// client has handlers for what comes there (notifications, logs, sampling, elicitation, roots,
// task status) or a call asks for progress.
func WithServerStream() Option {
	return optionFunc(func(c *config) { c.serverStream = true })
}

// WithHandshakeTimeout bounds the opening of a session (connecting, the server/discover probe,
// initialize) under a context that has no deadline of its own: Connect's, each attempt
// included, and a reconnection's, under the context of the call that needs it. A handshake that
// runs out ends with ErrHandshakeTimeout as its cause. Default DefaultHandshakeTimeout; d < 0
// means no bound, 0 keeps the default. A context with a deadline is bound by that alone.
func WithHandshakeTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		switch {
		case d < 0:
			c.handshake = 0
		case d > 0:
			c.handshake = d
		}
	})
}

// DefaultHandshakeTimeout bounds the opening of a session unless WithHandshakeTimeout says
// otherwise: a server that never answers must not hold Connect(context.Background()) forever,
// and a server started on demand (an npx package fetched first) may take a while.
const DefaultHandshakeTimeout = time.Minute

// ErrHandshakeTimeout is the cause of a session not opened within the handshake timeout.
var ErrHandshakeTimeout = errors.New("mcpclient: handshake timed out")

// WithOptions bundles options into one, for plugin authors who hand out a configuration.
func WithOptions(opts ...Option) Option {
	return optionFunc(func(c *config) {
		for _, o := range opts {
			if o != nil {
				o.applyOption(c)
			}
		}
	})
}

// A CallOption configures one request.
type CallOption interface{ applyCall(*callConfig) }

type callOptionFunc func(*callConfig)

func (f callOptionFunc) applyCall(c *callConfig) { f(c) }

type callConfig struct {
	id         ID
	idempotent bool
	progress   ProgressHandler
	idle, max  time.Duration
}

// WithRequestID pins the request's id instead of generating a UUID. The client refuses it with
// ErrRequestIDReused if its ledger holds other content under that id. Pinning is for ids the
// caller persisted before sending, to Resend after a restart; never use a counter.
func WithRequestID(id ID) CallOption {
	return callOptionFunc(func(c *callConfig) { c.id = id })
}

// Idempotent vouches that running the request twice does no harm, so that after an uncertain
// attempt to a server without receipts it is re-issued under a new id rather than given up with
// ErrOutcomeUnknown. Default: only read-only methods and tools annotated readOnlyHint or
// idempotentHint are.
func Idempotent() CallOption {
	return callOptionFunc(func(c *callConfig) { c.idempotent = true })
}
