package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// An Option configures a Client at Connect.
type Option interface{ applyOption(*config) }

type optionFunc func(*config)

func (f optionFunc) applyOption(c *config) { f(c) }

type config struct {
	retry     RetryPolicy
	ledgerCap int
	receipts  ReceiptScope
	// journal, if set, records every request durably before it is sent; serverIdentity names
	// the server in its records.
	journal        Journal
	serverIdentity string
	idVersion      IDVersion
	logger         *slog.Logger
	// info is the clientInfo to send; clients that set none share defaultClientInfo.
	info *Implementation
	// handlers are reached through the embedded pointer; a client with none shares one empty
	// set, so that an idle Client does not carry a dozen nil fields.
	*handlers
	keepalive    time.Duration
	version      string        // pinned protocol revision, or "" to negotiate
	serverStream bool          // open the listening channel at once
	handshake    time.Duration // bound on opening a session under a context without deadline; 0: none
	// extensions are the extensions the client declares, by identifier, with their settings;
	// nil when none is.
	extensions map[string]json.RawMessage

	// invalid holds what the options said that cannot be: Connect refuses to start with it.
	invalid error

	// testHooks are set by tests only, through the options of export_test.go; other clients
	// share the defaults.
	*testHooks
}

// handlers are what the client does with what the server sends unprompted. Options write them,
// through ownHandlers, while the config is applied; they are read-only after.
type handlers struct {
	notifications   map[string]NotificationHandler
	requestHandlers map[string]RequestHandler
	sampling        SamplingHandler
	elicitation     ElicitationHandler
	urlElicitation  URLElicitationHandler
	roots           []Root // nil: no roots capability
	logHandler      LogHandler
	resourceUpdated ResourceUpdatedHandler

	// Set by WithInterceptors and WithAttemptHook: intercept is the chain of interceptors,
	// composed once options are applied; nil when there is none.
	interceptors []Interceptor
	intercept    Handler
	onAttempt    func(context.Context, AttemptEvent)
}

func (h *handlers) none() bool {
	return h.notifications == nil && h.requestHandlers == nil && h.sampling == nil && h.elicitation == nil &&
		h.urlElicitation == nil && h.roots == nil && h.logHandler == nil && h.resourceUpdated == nil &&
		h.interceptors == nil && h.onAttempt == nil
}

// noHandlers is the handler set of every client configured with none. Never written: options
// write through ownHandlers.
var noHandlers handlers

// ownHandlers returns the client's own handler set, for an option to write, made on the first
// write: a client configured with no handler shares noHandlers from the start.
func (c *config) ownHandlers() *handlers {
	if c.handlers == &noHandlers {
		c.handlers = new(handlers)
	}
	return c.handlers
}

type testHooks struct {
	inbox            inboxLimits
	onSupersedeBuilt func()   // runs between the building of a superseding request and its sending
	onJoin           func(ID) // runs when a caller joins the attempt loop already running for an id
}

// defaultHooks are the hooks of every client no test configured. Never written: the options of
// tests write through ownHooks.
var defaultHooks = testHooks{inbox: inboxLimits{soft: inboxSoftLimit, softBytes: inboxSoftLimitBytes, hardBytes: inboxHardLimitBytes}}

// ownHooks returns the client's own hooks, for a test's option to write, made from the defaults
// on the first write.
func (c *config) ownHooks() *testHooks {
	if c.testHooks == &defaultHooks {
		h := defaultHooks
		c.testHooks = &h
	}
	return c.testHooks
}

func (h *testHooks) isDefault() bool {
	return h.inbox == defaultHooks.inbox && h.onSupersedeBuilt == nil && h.onJoin == nil
}

// refuse records an option value that cannot be used.
func (c *config) refuse(format string, args ...any) {
	c.invalid = errors.Join(c.invalid, fmt.Errorf(format, args...))
}

// listens reports whether the client has anything to receive from the server unprompted, so
// that a transport with a separate channel for it (the HTTP GET stream) opens one: handlers for
// what comes there, or WithServerStream.
func (c *config) listens() bool {
	return c.serverStream || len(c.notifications) > 0 || len(c.requestHandlers) > 0 || c.sampling != nil ||
		c.elicitation != nil || c.urlElicitation != nil || c.roots != nil || c.logHandler != nil || c.resourceUpdated != nil
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
	caps.Extensions = c.declaredExtensions()
	return caps
}

// onlyReceiptsCapabilities is the JSON of the capabilities of a client that declares nothing but
// the receipts extension (no handler, no WithExtension): in initialize and in the _meta of a
// stateless revision alike, encoded once rather than through maps at every handshake.
var onlyReceiptsCapabilities = capped(json.RawMessage(`{"extensions":{"` + requestReceiptsExtension + `":{}}}`))

// capped returns b without room past its length, so that no append writes into it: for bytes
// every client shares.
func capped(b []byte) []byte { return b[:len(b):len(b)] }

// declaresOnlyReceipts reports whether the client's capabilities are onlyReceiptsCapabilities.
func (c *config) declaresOnlyReceipts() bool {
	return c.roots == nil && c.sampling == nil && c.elicitationCapability() == nil && len(c.extensions) == 0
}

// initializeCapabilities returns the JSON of what the client declares in initialize.
func (c *config) initializeCapabilities() (json.RawMessage, error) {
	if c.declaresOnlyReceipts() {
		return onlyReceiptsCapabilities, nil
	}
	return json.Marshal(c.capabilities())
}

// initializeParams returns the params of initialize offering offer. Those of a client that
// declares only receipts under the default clientInfo are the same for every such client: they
// are encoded once per revision (defaultInitializeParams).
func (c *config) initializeParams(offer string) (json.RawMessage, error) {
	if c.info == &defaultClientInfo && c.declaresOnlyReceipts() {
		if i := slices.Index(supportedVersions, offer); i >= 0 {
			return defaultInitializeParams[i], nil
		}
	}
	caps, err := c.initializeCapabilities()
	if err != nil {
		return nil, err
	}
	return json.Marshal(initializeParams{ProtocolVersion: offer, Capabilities: caps, ClientInfo: c.info})
}

// defaultInitializeParams are the params of initialize of a client that declares only receipts
// under the default clientInfo, by the revision offered (supportedVersions'). Each is cut to its
// length, so that no append writes into what every such client shares.
var defaultInitializeParams = func() []json.RawMessage {
	all := make([]json.RawMessage, len(supportedVersions))
	for i, v := range supportedVersions {
		b, err := json.Marshal(initializeParams{ProtocolVersion: v, Capabilities: onlyReceiptsCapabilities, ClientInfo: &defaultClientInfo})
		if err != nil {
			panic(err)
		}
		all[i] = capped(b)
	}
	return all
}()

// declaredExtensions are the extensions the client declares: those WithExtension named, and the
// receipts extension, which opts every request into receipts (per session in initialize, per
// request in a stateless revision): a server that keeps them answers a resend of the same bytes
// under the same id from its receipt instead of running it again.
func (c *config) declaredExtensions() map[string]json.RawMessage {
	extensions := make(map[string]json.RawMessage, len(c.extensions)+1)
	for id, settings := range c.extensions {
		extensions[id] = settings
	}
	if _, set := extensions[requestReceiptsExtension]; !set {
		extensions[requestReceiptsExtension] = json.RawMessage(`{}`)
	}
	return extensions
}

// apply makes c the configuration opts give, in place: c is the Client's own, so that building
// it copies and allocates nothing that a client with default settings does not keep.
func (c *config) apply(opts []Option) {
	*c = config{
		retry:     DefaultRetryPolicy(),
		ledgerCap: DefaultLedgerCapacity,
		idVersion: UUIDv4,
		logger:    discardLogger,
		info:      &defaultClientInfo,
		handshake: DefaultHandshakeTimeout,
		handlers:  &noHandlers,
		testHooks: &defaultHooks,
	}
	for _, o := range opts {
		if o != nil {
			o.applyOption(c)
		}
	}
	p := c.retry
	switch {
	case p.Mode < RetryAuto || p.Mode > RetryNever:
		c.refuse("WithRetryPolicy: unknown Mode %d", int(p.Mode))
	case p.MaxAttempts < 0:
		c.refuse("WithRetryPolicy: MaxAttempts %d is negative (0 keeps the default)", p.MaxAttempts)
	case p.MaxServerDelay < 0:
		c.refuse("WithRetryPolicy: MaxServerDelay %v is negative (0 keeps the default)", p.MaxServerDelay)
	}
	c.retry = c.retry.withDefaults()
	if len(c.interceptors) > 0 {
		c.intercept = chain(c.interceptors)
	}
	if c.handlers.none() {
		c.handlers = &noHandlers
	}
	if c.testHooks.isDefault() {
		c.testHooks = &defaultHooks
	}
}

// discardLogger is the logger of every client WithLogger gave none; a *slog.Logger is never
// modified, so one serves them all.
var discardLogger = slog.New(slog.DiscardHandler)

// err returns the invalid option values, joined, as the *Error Connect fails with; nil when
// there are none.
func (c *config) err() error {
	if c.invalid == nil {
		return nil
	}
	return &Error{Code: CodeInvalidArgument, Err: c.invalid}
}

// defaultClientInfo is the clientInfo of every client WithClientInfo gave none. Never written.
var defaultClientInfo = Implementation{Name: "mcpclient", Version: Version}

// defaultClientInfoJSON is defaultClientInfo encoded, as a stateless revision's _meta carries it.
var defaultClientInfoJSON = func() json.RawMessage {
	b, _ := json.Marshal(&defaultClientInfo) // plain strings
	return capped(b)
}()

// Version is this module's version, sent as clientInfo.version unless WithClientInfo says
// otherwise.
const Version = "0.1.0"

// WithRetryPolicy sets the retry policy. Default: DefaultRetryPolicy(); zero fields of p take
// their defaults.
func WithRetryPolicy(p RetryPolicy) Option {
	return optionFunc(func(c *config) { c.retry = p })
}

// WithLedgerCapacity bounds the ledger to n entries, n > 0; Connect refuses any other n with
// CodeInvalidArgument. Default DefaultLedgerCapacity.
func WithLedgerCapacity(n int) Option {
	return optionFunc(func(c *config) {
		if n <= 0 {
			c.refuse("WithLedgerCapacity(%d): the ledger needs room for one request at least", n)
			return
		}
		c.ledgerCap = n
	})
}

// WithJournal has the client record every request in j, durably, before its first byte leaves
// the process, and every change of its state after: what a restarted process needs to find its
// unresolved requests (see [Client.Recover]) and resend them byte-identical under the same ids.
// Several clients may share one journal; each record names its client's server (see
// [WithServerIdentity]). The client does not close j. Default: no journal, the ledger lives in
// memory only and a restart forgets it.
func WithJournal(j Journal) Option {
	return optionFunc(func(c *config) { c.journal = j })
}

// WithServerIdentity names the server in journal records, so that a restarted process recovers
// the requests for this server and no other's. The name is stored as given: keep secrets out of
// it. Default: the endpoint URL of an HTTP or SSE transport without its user name, password,
// query values and fragment, the program of a server process without its arguments, each with a
// digest of the whole when something was removed; "" for other transports, which then share one
// name: give each its own when several such clients share a journal.
func WithServerIdentity(name string) Option {
	return optionFunc(func(c *config) { c.serverIdentity = name })
}

// WithReceipts asserts that the server keeps request receipts in scope (ReceiptScopeProcess,
// ReceiptScopeStore or ReceiptScopeSession; Connect refuses another with CodeInvalidArgument), for a server known to
// keep them that does not declare it. A declaration by the server takes precedence. An asserted
// scope names no epoch, so the client cannot tell that receipts outlived a lost session: an
// unsafe request left uncertain on it ends with ErrOutcomeUnknown. Default: none asserted.
func WithReceipts(scope ReceiptScope) Option {
	return optionFunc(func(c *config) {
		if scope != ReceiptScopeProcess && scope != ReceiptScopeSession && scope != ReceiptScopeStore {
			c.refuse("WithReceipts(%q): the scopes are %q, %q and %q", scope, ReceiptScopeProcess, ReceiptScopeStore, ReceiptScopeSession)
			return
		}
		c.receipts = scope
	})
}

// WithIDVersion selects the UUID version of generated ids, UUIDv4 or UUIDv7; Connect refuses
// another with CodeInvalidArgument. Default UUIDv4.
func WithIDVersion(v IDVersion) Option {
	return optionFunc(func(c *config) {
		if v != UUIDv4 && v != UUIDv7 {
			c.refuse("WithIDVersion(%d): ids are UUIDv4 or UUIDv7", int(v))
			return
		}
		c.idVersion = v
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
	return optionFunc(func(c *config) { c.info = &info })
}

// A NotificationHandler receives one server notification. Handlers run one at a time, in arrival
// order, on a goroutine the client owns; ctx ends when the session does. A handler may call the
// Client, but a handler that blocks holds up the notifications behind it, and the calls they
// name: a call returns only once the notifications naming it by
// io.modelcontextprotocol/subscriptionId that came before its answer have been handled.
type NotificationHandler func(ctx context.Context, method string, params json.RawMessage)

// WithNotificationHandler registers h for notifications named method; "*" receives those with no
// handler of their own. Default: notifications are logged at debug level and dropped.
func WithNotificationHandler(method string, h NotificationHandler) Option {
	return optionFunc(func(c *config) {
		hs := c.ownHandlers()
		if hs.notifications == nil {
			hs.notifications = make(map[string]NotificationHandler)
		}
		hs.notifications[method] = h
	})
}

// WithKeepalive pings the server every interval while the client is open, so that a dead
// connection is found before a call needs it. A session of a stateless revision (2026-07-28)
// holds no connection between requests, and the keepalive sends nothing there; call Ping to ask
// whether such a server is alive. Default: no keepalive.
func WithKeepalive(interval time.Duration) Option {
	return optionFunc(func(c *config) {
		if interval < 0 {
			c.refuse("WithKeepalive(%v): a negative interval", interval)
			return
		}
		c.keepalive = interval
	})
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

// WithProtocolVersion pins the protocol revision. A stateless one (2026-07-28) is used without
// the fallback to initialize; an older one skips server/discover and is the one offered in
// initialize. Default: server/discover with LatestProtocolVersion, falling back to initialize
// with LatestStatefulProtocolVersion for servers that do not speak a stateless revision; a
// Streamable HTTP URL found to be such a server is remembered by the process for ten minutes, and
// an unpinned client there skips server/discover meanwhile. Connect refuses a revision this
// client does not speak with CodeInvalidArgument.
func WithProtocolVersion(v string) Option { return protocolVersionOption(v) }

// protocolVersionOption is WithProtocolVersion's: a string rather than a closure over one, so
// that pinning a constant revision allocates nothing.
type protocolVersionOption string

func (v protocolVersionOption) applyOption(c *config) {
	if !isSupportedVersion(string(v)) {
		c.refuse("WithProtocolVersion(%q): this client speaks %v", string(v), supportedVersions)
		return
	}
	c.version = string(v)
}

// WithSamplingHandler declares the sampling capability and answers sampling/createMessage with
// h. Default: no sampling.
func WithSamplingHandler(h SamplingHandler) Option {
	return optionFunc(func(c *config) { c.ownHandlers().sampling = h })
}

// WithElicitationHandler declares the elicitation capability in form mode and answers
// form-mode elicitation/create with h. When h accepts, fields it leaves out that the schema
// gives a default take that default (SEP-1034). URL mode takes a handler of its own, see
// WithURLElicitationHandler; without one it is not declared, and URL-mode requests are refused
// with invalid params (-32602). Like every server request handler, h runs at most 16 at a time
// (see RequestHandler). Default: no elicitation.
func WithElicitationHandler(h ElicitationHandler) Option {
	return optionFunc(func(c *config) { c.ownHandlers().elicitation = h })
}

// WithURLElicitationHandler declares the elicitation capability in URL mode and answers URL-mode
// elicitation/create with h. The client refuses, with invalid params (-32602) and without calling
// h, a request whose URL does not parse, has no host or one with characters outside ASCII, carries
// userinfo (as in https://accounts.example@evil.example/, which goes to evil.example), or has a
// scheme other than https, save http to a loopback host; javascript:, file: and data: URLs are
// thereby refused. Like every server request handler, h runs at most 16 at a time (see
// RequestHandler). Default: URL mode not declared, and its requests refused.
func WithURLElicitationHandler(h URLElicitationHandler) Option {
	return optionFunc(func(c *config) { c.ownHandlers().urlElicitation = h })
}

// WithRoots declares the roots capability (with list_changed) and answers roots/list with
// roots, which SetRoots replaces later. Default: no roots capability.
func WithRoots(roots ...Root) Option {
	return optionFunc(func(c *config) {
		c.ownHandlers().roots = append([]Root{}, roots...)
	})
}

// WithRequestHandler answers server requests named method with h, for methods this package has
// no typed option for. A typed option (WithSamplingHandler, WithElicitationHandler, WithRoots)
// takes precedence for its method; ping is always answered by the client. See RequestHandler for
// how many run at once. Default: method not found.
func WithRequestHandler(method string, h RequestHandler) Option {
	return optionFunc(func(c *config) {
		hs := c.ownHandlers()
		if hs.requestHandlers == nil {
			hs.requestHandlers = make(map[string]RequestHandler)
		}
		hs.requestHandlers[method] = h
	})
}

// WithLogHandler receives the server's log records. Default: they are dropped.
func WithLogHandler(h LogHandler) Option {
	return optionFunc(func(c *config) { c.ownHandlers().logHandler = h })
}

// WithResourceUpdatedHandler receives notifications/resources/updated. Default: dropped.
func WithResourceUpdatedHandler(h ResourceUpdatedHandler) Option {
	return optionFunc(func(c *config) { c.ownHandlers().resourceUpdated = h })
}

// WithExtension declares support for the protocol extension id (such as skills.Extension) in the
// client's capabilities, under capabilities.extensions, with settings marshalled to a JSON
// object; nil declares it with none ({}). A later declaration of the same id replaces the
// earlier. Declaring an extension tells the server that the host uses what it offers: a server
// may serve through the extension what it would otherwise offer another way. Default: none
// declared.
//
// It is an Option and a CallOption. As an Option (to Connect) it declares the extension for
// every request of the client. As a CallOption it declares it for that one request alone, in the
// client capabilities a request of a stateless revision (2026-07-28 and later) carries in its
// _meta, frozen with its bytes: extensions whose answers change shape when declared (the tasks
// extension lets the server answer a tools/call with a task) are declared where the caller is
// ready for that shape. A session revision declares capabilities once, in initialize, so there
// the CallOption adds nothing to the request.
//
// Settings that do not marshal to an object are refused with CodeInvalidArgument: by Connect,
// or by the call.
func WithExtension(id string, settings any) interface {
	Option
	CallOption
} {
	raw := json.RawMessage(`{}`)
	var invalid error
	if settings != nil {
		b, err := json.Marshal(settings)
		switch {
		case err != nil:
			invalid = fmt.Errorf("WithExtension(%q): %v", id, err)
		case len(b) == 0 || b[0] != '{':
			invalid = fmt.Errorf("WithExtension(%q): settings must be a JSON object, not %s", id, truncate(b, 40))
		default:
			raw = b
		}
	}
	if id == "" && invalid == nil {
		invalid = errors.New("WithExtension: an extension needs an identifier")
	}
	return extensionOption{id: id, settings: raw, invalid: invalid}
}

// extensionOption is what WithExtension returns: settings checked once, applied to a client or
// to a request.
type extensionOption struct {
	id       string
	settings json.RawMessage
	invalid  error
}

func (o extensionOption) applyOption(c *config) {
	if o.invalid != nil {
		c.refuse("%v", o.invalid)
		return
	}
	if c.extensions == nil {
		c.extensions = make(map[string]json.RawMessage)
	}
	c.extensions[o.id] = o.settings
}

func (o extensionOption) applyCall(c *callConfig) {
	if o.invalid != nil {
		c.invalid = append(c.invalid, o.invalid)
		return
	}
	if c.extensions == nil {
		c.extensions = make(map[string]json.RawMessage)
	}
	c.extensions[o.id] = o.settings
}

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
	meta       map[string]json.RawMessage
	extensions map[string]json.RawMessage // declared for this request alone (WithExtension)
	response   *Response
	invalid    []error // what the options said that cannot be: the request is refused
}

// WithRequestID pins the request's id instead of generating a UUID. The client refuses it with
// ErrRequestIDReused if its ledger holds other content under that id. Pinning is for ids the
// caller persisted before sending, to Resend after a restart; never use a counter.
func WithRequestID(id ID) CallOption {
	return callOptionFunc(func(c *callConfig) { c.id = id })
}

// RequestIDOf returns the id that opts pin with WithRequestID (the last one, as when they
// apply), or the zero ID when they pin none: for a wrapper that must know, before the call, that
// it is made again under an id already frozen, whose bytes it must not change.
func RequestIDOf(opts ...CallOption) ID {
	var cc callConfig
	for _, o := range opts {
		if o != nil {
			o.applyCall(&cc)
		}
	}
	return cc.id
}

// WithMeta sets key in the request's params._meta to value, encoded as JSON: a trace context, a
// correlation id. It is part of the request's bytes, frozen with its id, and every resend
// carries it alike; re-issues under a new id and the rounds of a stateless revision carry it too.
// The keys the client writes itself (progressToken, and those under io.modelcontextprotocol/)
// are refused with CodeInvalidArgument, as is a value that does not encode.
func WithMeta(key string, value any) CallOption {
	return callOptionFunc(func(c *callConfig) {
		if key == "progressToken" || strings.HasPrefix(key, "io.modelcontextprotocol/") {
			c.invalid = append(c.invalid, fmt.Errorf("WithMeta(%q): a key the client writes itself", key))
			return
		}
		raw, err := json.Marshal(value)
		if err != nil {
			c.invalid = append(c.invalid, fmt.Errorf("WithMeta(%q): %w", key, err))
			return
		}
		if c.meta == nil {
			c.meta = make(map[string]json.RawMessage)
		}
		c.meta[key] = raw
	})
}

// WithResponse has a call that succeeds fill *resp with its Response: the request last sent
// (its id), how many times its bytes were sent, and the raw result. Typed calls return only the
// decoded result; tests and metrics that need the id or the attempts pass this.
func WithResponse(resp *Response) CallOption {
	return callOptionFunc(func(c *callConfig) { c.response = resp })
}

// WithIdempotent vouches that running the request twice does no harm, so that after an uncertain
// attempt to a server without receipts it is re-issued under a new id rather than given up with
// ErrOutcomeUnknown. Default: only read-only methods and tools annotated readOnlyHint or
// idempotentHint are.
func WithIdempotent() CallOption {
	return callOptionFunc(func(c *callConfig) { c.idempotent = true })
}

// WithProgress asks the server for progress reports of the request (a progressToken in its
// _meta, the request's own id) and passes them to h while the call runs.
func WithProgress(h ProgressHandler) CallOption {
	return callOptionFunc(func(c *callConfig) { c.progress = h })
}

// WithTimeouts bounds a call: it ends when idle passes without an answer or a progress report,
// and in any case after max (either may be 0: no such bound). Progress reports are asked for
// when idle is set. A call that times out after its request was sent ends with
// ErrOutcomeUnknown, the cause matching ErrCallTimeout and context.DeadlineExceeded.
func WithTimeouts(idle, max time.Duration) CallOption {
	return callOptionFunc(func(c *callConfig) {
		if idle < 0 || max < 0 {
			c.invalid = append(c.invalid, fmt.Errorf("WithTimeouts(%v, %v): a negative bound", idle, max))
			return
		}
		c.idle, c.max = idle, max
	})
}
