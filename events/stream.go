package events

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/wait"
)

// StreamParams are the params of events/stream.
type StreamParams struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments,omitempty"`
	// Cursor is where to resume; nil (sent as null) starts from now.
	Cursor *string `json:"cursor"`
	// MaxAgeMs bounds replay: no events older than this many milliseconds.
	MaxAgeMs *int64 `json:"maxAgeMs,omitempty"`
}

// Active is notifications/events/active: the stream is confirmed, or (mid-stream) a gap was
// found and delivery goes on from Cursor.
type Active struct {
	Cursor    *string         `json:"cursor,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
	Meta      json.RawMessage `json:"_meta,omitempty"`
}

// Heartbeat is notifications/events/heartbeat: the stream is alive, and the server has checked
// up to Cursor.
type Heartbeat struct {
	Cursor *string         `json:"cursor,omitempty"`
	Meta   json.RawMessage `json:"_meta,omitempty"`
}

// errorParams are the params of notifications/events/error and notifications/events/terminated.
type errorParams struct {
	Error *Error `json:"error"`
}

// StreamHandlers receive a stream's notifications, one at a time, in order, on the goroutine
// that called Stream. Nil handlers drop theirs.
type StreamHandlers struct {
	// Active receives each notifications/events/active.
	Active func(ctx context.Context, a *Active)
	// Event receives each event.
	Event func(ctx context.Context, o *Occurrence)
	// Heartbeat receives each notifications/events/heartbeat.
	Heartbeat func(ctx context.Context, h *Heartbeat)
	// Error receives each notifications/events/error: a failure the server recovers from; the
	// subscription goes on.
	Error func(ctx context.Context, e *Error)
}

// MaxHeartbeatInterval is the longest interval between two heartbeats the extension lets a
// server leave.
const MaxHeartbeatInterval = 30 * time.Second

// DefaultReconnectDelay is how long Stream waits before reconnecting a stream that failed,
// unless ReconnectDelay says otherwise.
const DefaultReconnectDelay = time.Second

// DefaultMaxReconnects is how many reconnections in a row, without a notification between
// them, Stream makes before giving up, unless MaxReconnects says otherwise.
const DefaultMaxReconnects = 5

// A StreamOption configures Stream.
type StreamOption func(*streamConfig)

type streamConfig struct {
	heartbeat     time.Duration // 0: learned from the stream
	delay         time.Duration
	maxReconnects int
}

// HeartbeatInterval tells Stream the server's heartbeat interval, so that it finds a dead stream
// after twice that silence. Default: Stream takes the interval between the last two heartbeats
// it received, and MaxHeartbeatInterval until it has seen two.
func HeartbeatInterval(d time.Duration) StreamOption {
	return func(c *streamConfig) {
		if d > 0 {
			c.heartbeat = d
		}
	}
}

// ReconnectDelay sets how long Stream waits before reconnecting a stream that failed (not one
// that went silent: that one is reconnected at once). Default DefaultReconnectDelay.
func ReconnectDelay(d time.Duration) StreamOption {
	return func(c *streamConfig) {
		if d > 0 {
			c.delay = d
		}
	}
}

// MaxReconnects sets how many reconnections in a row, without a notification between them,
// Stream makes before it gives up with the last error. Default DefaultMaxReconnects.
func MaxReconnects(n int) StreamOption {
	return func(c *streamConfig) {
		if n > 0 {
			c.maxReconnects = n
		}
	}
}

// A RouterOption configures a Router.
type RouterOption func(*Router)

// OnListChanged has the router hand notifications/events/list_changed to h, which should list
// the event types again (List). It runs on the client's notification goroutine: it must not
// block, but it may call the client.
func OnListChanged(h func(ctx context.Context)) RouterOption {
	return func(r *Router) { r.listChanged = h }
}

// A Router carries the notifications of the extension from a client to the calls waiting for
// them. Its Option declares the extension and registers the router's notification handlers;
// give it to the client when creating it, and open streams with Stream.
type Router struct {
	listChanged func(ctx context.Context)

	mu      sync.Mutex
	streams map[string]*inbound // open events/stream requests, by JSON-RPC id
}

// NewRouter returns a router configured by opts.
func NewRouter(opts ...RouterOption) *Router {
	r := &Router{streams: make(map[string]*inbound)}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Option declares the extension in the client's capabilities and routes the extension's
// notifications to r.
func (r *Router) Option() mcpclient.Option {
	route := func(_ context.Context, method string, params json.RawMessage) { r.route(method, params) }
	return mcpclient.WithOptions(
		mcpclient.WithExtension(ExtensionID, nil),
		mcpclient.WithNotificationHandler("notifications/events/active", route),
		mcpclient.WithNotificationHandler("notifications/events/event", route),
		mcpclient.WithNotificationHandler("notifications/events/heartbeat", route),
		mcpclient.WithNotificationHandler("notifications/events/error", route),
		mcpclient.WithNotificationHandler("notifications/events/terminated", route),
		mcpclient.WithNotificationHandler("notifications/events/list_changed", func(ctx context.Context, _ string, _ json.RawMessage) {
			if r.listChanged != nil {
				r.listChanged(ctx)
			}
		}),
	)
}

// notice is one notification for a stream.
type notice struct {
	method string
	params json.RawMessage
}

// inbound queues a stream's notifications from the client's notification goroutine, which must
// not block, to the goroutine of Stream.
type inbound struct {
	mu     sync.Mutex
	queue  []notice
	signal chan struct{} // has a value when queue may be non-empty
}

func (in *inbound) put(n notice) {
	in.mu.Lock()
	in.queue = append(in.queue, n)
	in.mu.Unlock()
	select {
	case in.signal <- struct{}{}:
	default:
	}
}

func (in *inbound) take() []notice {
	in.mu.Lock()
	defer in.mu.Unlock()
	q := in.queue
	in.queue = nil
	return q
}

// route hands a notification to the stream its _meta names; one naming no open stream (a
// stream already closed, say) is dropped.
func (r *Router) route(method string, params json.RawMessage) {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	var id mcpclient.ID
	if json.Unmarshal(p.Meta[SubscriptionIDMeta], &id) != nil || id.IsZero() {
		return
	}
	r.mu.Lock()
	in := r.streams[id.JSON()]
	r.mu.Unlock()
	if in != nil {
		in.put(notice{method, params})
	}
}

func (r *Router) open(key string) *inbound {
	in := &inbound{signal: make(chan struct{}, 1)}
	r.mu.Lock()
	r.streams[key] = in
	r.mu.Unlock()
	return in
}

func (r *Router) close(key string) {
	r.mu.Lock()
	delete(r.streams, key)
	r.mu.Unlock()
}

// errDead ends an attempt whose stream went silent.
var errDead = errors.New("events: the stream went silent")

// Stream subscribes to p's event type by push: it holds an events/stream request open and hands
// its notifications to h, until ctx ends (it returns nil), the server closes the stream
// gracefully (nil), the server refuses the subscription (the error of the call, matched by the
// extension's sentinels: ErrNotFound, ErrForbidden, ...), or the server terminates it (a
// *TerminatedError). c must have been created with r.Option().
//
// It keeps the subscription's cursor: that of the last active, event or heartbeat (an absent
// one reads as null, and a null one is sent as null). A stream that breaks is opened again from
// that cursor after ReconnectDelay; one that goes silent (neither event nor heartbeat for twice
// the heartbeat interval, see HeartbeatInterval) is closed and opened again at once. After
// MaxReconnects reconnections with no notification between them, Stream returns the last
// error.
//
// Stream does not apply a timeout of its own to the request: the heartbeat is its liveness
// signal. (The transport's bound on a silent response, minutes long, still applies.)
func (r *Router) Stream(ctx context.Context, c mcpclient.Caller, p StreamParams, h StreamHandlers, opts ...StreamOption) error {
	if p.Name == "" {
		return refused("events/stream needs an event name")
	}
	cfg := streamConfig{delay: DefaultReconnectDelay, maxReconnects: DefaultMaxReconnects}
	for _, o := range opts {
		o(&cfg)
	}
	if err := checkDeclared(ctx, c, "events/stream"); err != nil {
		return err
	}
	s := &stream{r: r, c: c, p: p, h: h, cfg: cfg}
	failures := 0
	for {
		heard, err := s.attempt(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			return nil
		}
		var term *TerminatedError
		var rpc *mcpclient.RPCError
		if errors.As(err, &term) || errors.As(err, &rpc) {
			return err
		}
		if heard {
			failures = 0
		}
		failures++
		if failures > cfg.maxReconnects {
			return err
		}
		if !errors.Is(err, errDead) && !wait.For(ctx, cfg.delay) {
			return nil
		}
	}
}

// stream is the state of one Stream call across its attempts.
type stream struct {
	r   *Router
	c   mcpclient.Caller
	p   StreamParams // Cursor is the last one received
	h   StreamHandlers
	cfg streamConfig

	lastBeat time.Time     // when the last heartbeat came; zero before the first
	interval time.Duration // between the last two heartbeats; 0 before two
}

// silence is how long the stream may stay quiet before it counts as dead.
func (s *stream) silence() time.Duration {
	switch {
	case s.cfg.heartbeat > 0:
		return 2 * s.cfg.heartbeat
	case s.interval > 0:
		return 2 * s.interval
	}
	return 2 * MaxHeartbeatInterval
}

// attempt sends one events/stream and serves it until it ends. heard reports whether any
// notification came.
func (s *stream) attempt(ctx context.Context) (heard bool, err error) {
	req, err := s.c.NewRequest("events/stream", s.p)
	if err != nil {
		return false, err
	}
	key := req.ID().JSON()
	in := s.r.open(key)
	s.lastBeat = time.Time{} // an interval spans one stream, never a reconnection
	defer s.r.close(key)

	reqCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan error, 1)
	go func() {
		_, err := s.c.Do(reqCtx, req)
		done <- err
	}()
	// The request's goroutine has ended when attempt returns.
	end := func(cause error) error {
		cancel(cause)
		<-done
		return cause
	}

	timer := time.NewTimer(s.silence())
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return heard, end(context.Cause(ctx))
		case err := <-done:
			// The client handed over the notifications sent before the stream ended before
			// Do returned, but the select may have picked done over their signal: they come
			// first, a termination among them included.
			for _, n := range in.take() {
				heard = true
				if herr := s.handle(ctx, n); herr != nil {
					return heard, herr
				}
			}
			return heard, classify(err)
		case <-timer.C:
			return heard, end(errDead)
		case <-in.signal:
			for _, n := range in.take() {
				heard = true
				if err := s.handle(ctx, n); err != nil {
					return heard, end(err)
				}
			}
			timer.Reset(s.silence())
		}
	}
}

// handle passes one notification to its handler, keeping the cursor; it returns the
// *TerminatedError of a terminated.
func (s *stream) handle(ctx context.Context, n notice) error {
	switch n.method {
	case "notifications/events/active":
		var a Active
		if json.Unmarshal(n.params, &a) != nil {
			return nil
		}
		s.p.Cursor = a.Cursor
		if s.h.Active != nil {
			s.h.Active(ctx, &a)
		}
	case "notifications/events/event":
		var o Occurrence
		if json.Unmarshal(n.params, &o) != nil || o.validate() != nil {
			return nil
		}
		s.p.Cursor = o.Cursor
		if s.h.Event != nil {
			s.h.Event(ctx, &o)
		}
	case "notifications/events/heartbeat":
		var hb Heartbeat
		if json.Unmarshal(n.params, &hb) != nil {
			return nil
		}
		s.p.Cursor = hb.Cursor
		now := time.Now()
		if !s.lastBeat.IsZero() {
			s.interval = now.Sub(s.lastBeat)
		}
		s.lastBeat = now
		if s.h.Heartbeat != nil {
			s.h.Heartbeat(ctx, &hb)
		}
	case "notifications/events/error":
		var ep errorParams
		if json.Unmarshal(n.params, &ep) != nil || ep.Error == nil {
			return nil
		}
		if s.h.Error != nil {
			s.h.Error(ctx, ep.Error)
		}
	case "notifications/events/terminated":
		var ep errorParams
		if json.Unmarshal(n.params, &ep) != nil || ep.Error == nil {
			ep.Error = &Error{Message: "terminated without an error object"}
		}
		return &TerminatedError{Name: s.p.Name, Err: ep.Error}
	}
	return nil
}
