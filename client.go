// Package mcpclient is a Model Context Protocol client that does not leave to luck what happened
// to a request whose answer never came.
//
// Every request is frozen once: a UUID id, the exact bytes, and their SHA-256 fingerprint. A
// resend writes the same bytes under the same id, which a server that keeps receipts answers with
// the reply it already has instead of running the request again. Conflicts (HTTP 409,
// MCP_REQUEST_ID_REUSED) stop the client; an outcome it cannot learn safely is returned as
// ErrOutcomeUnknown with the frozen request, for the caller to inspect and then Resend or
// Supersede.
//
// Create a Client with [Connect], reuse it, and Close it when done. A Client is safe for
// concurrent use.
package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	flightgroup "github.com/northstar-mcp/mcpclient/internal/flight" // the name flight is the ledger's
	"github.com/northstar-mcp/mcpclient/transport"
)

// A Client is a connection to one MCP server, with the ledger of the requests it sent.
//
// Create one per server with Connect and reuse it; it is safe for concurrent use. It reconnects
// by itself when the connection or the server session is lost, re-initializing the session, and
// it applies the outcome rules to the requests that were in flight then: a request that may
// have run is resent under its id only where a receipt can still answer for it, re-issued when
// it is safe to repeat, and otherwise returned with ErrOutcomeUnknown.
type Client struct {
	transport transport.Transport
	cfg       config
	log       *slog.Logger
	ledger    atomic.Pointer[Ledger] // see Ledger
	tools     toolIndex
	progress  progressRegistry
	roots     *rootsState
	logLevel  atomic.Pointer[string] // the log level stateless requests ask for, once set
	meta      atomic.Pointer[statelessMetaCache]
	acks      acks
	// taskInputs remembers the input requests of tasks the client answered (tasks/get).
	taskInputs taskInputs
	// unfinished holds, by request key, the exchanges whose interceptors returned while they
	// were being sent, until the sending ends: the next sending of the id waits for it. Made
	// by Connect for a client with interceptors, the only one that uses it.
	unfinished *sync.Map

	// dials is the dial under way, if any: concurrent calls that need a session share it.
	dials flightgroup.Group[struct{}, *session]
	// discovers is the server/discover under way on a session of a stateless revision, if any,
	// asked again for a stale answer or to confirm the receipts: concurrent callers share it.
	discovers flightgroup.Group[*session, *discovery]

	mu   sync.Mutex
	sess *session   // the last session opened, live or dead; nil before the first
	live []*session // sessions not yet ended: the current one, and those retiring
	// firstLive holds live while it holds one session.
	firstLive [1]*session
	// olderServer is the revision offered in the initialize that a server which answered
	// server/discover as an older one accepted: later dials of the client go straight to
	// initialize with it, a request fewer per reconnection. A failed initialize forgets it. The
	// process remembers it too for an endpoint with a lasting name (see olderServers).
	olderServer string
	// exitsAtStart counts the dials in a row whose server process exited before the session
	// opened; a session that opens resets it.
	exitsAtStart int32
	closed       bool

	// life ends at Close and Detach; the client's own background work runs under it. Made by
	// the first work that needs it (see lifetime): an idle client has none. guarded by mu.
	life *clientLife

	closeOnce sync.Once
	// wg counts every session until it has ended, the goroutines of sessions (dispatcher,
	// server request handlers, notices of cancellation), the pinger and subscription watchers.
	// Goroutines of a session are added while the session's own count is held.
	wg sync.WaitGroup
}

// Connect opens a connection through t and negotiates the protocol revision: it asks
// server/discover first (the stateless revision, 2026-07-28) and falls back to initialize and
// notifications/initialized for servers of the revisions with sessions (2024-11-05 to
// 2025-11-25); WithProtocolVersion pins one. Dialing and initialize are retried under the
// client's retry policy, each failed try reported to its OnRetry; a server answering with a
// revision this client does not speak is refused with ErrUnsupportedVersion. Under a context
// without a deadline, Connect gives up after the handshake timeout (see WithHandshakeTimeout).
//
// A server process that exits before the session opens ([transport.Command]) is started once
// more, since a crash on a cold start may be transient; if that one exits too, Connect fails
// with the exit's status and the end of the server's stderr ([transport.ProcessExitError]),
// however many attempts the policy allows. The client keeps to the same rule when it reconnects
// for a call: a call starts such a server at most twice, and once it has exited at start twice
// in a row, each call starts it once, until a session opens.
func Connect(ctx context.Context, t transport.Transport, opts ...Option) (*Client, error) {
	c, err := connect(ctx, t, opts)
	return c, returned(err)
}

func connect(ctx context.Context, t transport.Transport, opts []Option) (*Client, error) {
	if t == nil {
		return nil, &Error{Code: CodeInvalidArgument, Err: errors.New("nil transport")}
	}
	c := &Client{transport: t}
	c.cfg.apply(opts)
	if err := c.cfg.err(); err != nil {
		return nil, err
	}
	c.log = c.cfg.logger
	if c.cfg.intercept != nil {
		c.unfinished = new(sync.Map)
	}
	if c.cfg.roots != nil {
		c.roots = &rootsState{roots: c.cfg.roots}
	}
	ctx, stop := c.boundHandshake(ctx)
	defer stop()
	if err := c.firstSession(ctx); err != nil {
		c.Close()
		return nil, err
	}
	if c.cfg.keepalive > 0 {
		c.wg.Add(1)
		go c.keepalive(c.cfg.keepalive)
	}
	return c, nil
}

// firstSession establishes the first session, retrying failed dials with the policy's backoff.
// As for a call, the backoff is made only once the first attempt failed.
func (c *Client) firstSession(ctx context.Context) error {
	_, err := c.session(ctx)
	if err == nil {
		return nil
	}
	attempts := 1
	var lastErr error
	if !isDefinite(err) {
		lastErr = err
		p := c.cfg.retry
		firstErr := err
		b := backoff.WithContext(backoff.WithMaxRetries(p.NewBackOff(), uint64(p.MaxAttempts-1)), ctx)
		_, err = backoff.RetryNotifyWithData(func() (*session, error) {
			if firstErr != nil { // the first attempt's, for the backoff to wait after
				err := firstErr
				firstErr = nil
				return nil, err
			}
			attempts++
			s, err := c.session(ctx)
			if err != nil && isDefinite(err) {
				return nil, backoff.Permanent(err)
			}
			lastErr = err
			return s, err
		}, b, func(err error, d time.Duration) {
			c.log.Debug("mcpclient: connect failed, retrying", "attempt", attempts, "delay", d, "err", err)
			if p.OnRetry != nil {
				p.OnRetry(attempts, err, d)
			}
		})
		if err == nil {
			return nil
		}
	}
	var e *Error
	if errors.As(err, &e) {
		if errors.Is(e, errExitsAtStart) {
			e.Attempts = attempts
		}
		return e
	}
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		err = context.Cause(ctx) // the handshake timeout, say
		if lastErr != nil && !errors.Is(lastErr, ctxErr) {
			// The context ended between attempts: what the last one met is the news.
			err = fmt.Errorf("%w (last attempt: %w)", err, lastErr)
		}
	}
	if transport.OutcomeOf(err) == transport.Answered {
		return &Error{Code: CodeServerError, Attempts: attempts, Err: err}
	}
	return &Error{Code: CodeNotDelivered, Attempts: attempts, Err: err}
}

// isDefinite reports whether a dial error settles the matter: retrying cannot help.
func isDefinite(err error) bool {
	var e *Error
	return errors.As(err, &e) || errors.Is(err, transport.ErrMisconfigured) || transport.OutcomeOf(err) == transport.Answered
}

// errExitsAtStart ends the dials for a server process that exited before the session opened
// twice in a row: starting it as often as the retry policy allows would only repeat the crash.
var errExitsAtStart = errors.New("mcpclient: the server process exited before the session opened, twice in a row")

// session returns the live session, dialing a new one if there is none. One dial runs at a
// time; concurrent callers wait for it and share its outcome. Errors that are *Error are
// definite; others are transport failures, after which nothing of the caller's request was
// sent.
func (c *Client) session(ctx context.Context) (*session, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, &Error{Code: CodeClosed, Err: ErrClosed}
		}
		if s := c.sess; s != nil && !s.isDead() {
			c.mu.Unlock()
			d := s.discovered.Load()
			if d == nil || !d.stale(time.Now()) {
				return s, nil
			}
			_, err := c.rediscover(ctx, s, d.asked)
			var e *Error
			switch {
			case errors.As(err, &e) && e.Code == CodeClosed:
				return nil, e
			case s.isDead():
				continue // the server declares another binding, or dropped the revision
			case err != nil:
				// The spec lets a stale answer serve when asking again fails. The request
				// itself meets the server as it is now, and the next one asks again; a resend
				// that relies on receipts never takes a stale answer's word (freshBinding).
				c.log.Debug("mcpclient: server/discover failed; going on with its stale answer", "err", err)
			}
			return s, nil
		}
		c.mu.Unlock()

		s, err := c.dials.Do(ctx, c.closing, struct{}{}, func() (*session, error) { return c.dialOnce(ctx) })
		switch {
		case errors.Is(err, flightgroup.ErrPanicked):
			// The dial of another call panicked, which is that call's to answer for; this one
			// dials again.
			continue
		case errors.Is(err, flightgroup.ErrStopped):
			return nil, &Error{Code: CodeClosed, Err: ErrClosed}
		case err != nil && err == ctx.Err():
			// This call's own context ended while it waited for the dial.
			return nil, &transport.Error{Outcome: transport.NotDelivered, Err: err}
		}
		return s, err
	}
}

// dialOnce dials a new session and makes it the client's, unless a live one appeared since
// the caller looked.
func (c *Client) dialOnce(ctx context.Context) (*session, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, &Error{Code: CodeClosed, Err: ErrClosed}
	}
	if s := c.sess; s != nil && !s.isDead() {
		c.mu.Unlock()
		return s, nil
	}
	c.mu.Unlock()

	s, err := c.dial(ctx)

	c.mu.Lock()
	switch {
	case err == nil && c.closed:
		err = &Error{Code: CodeClosed, Err: ErrClosed}
	case err == nil:
		c.sess = s
		c.exitsAtStart = 0
	case errors.Is(err, transport.ErrUnauthorized) && !isDefinite(err):
		// The transport's authorizer did what it could: dialing again would be refused
		// again.
		err = &Error{Code: CodeUnauthorized, Err: err}
	case errors.Is(err, transport.ErrProcessExited) && !isDefinite(err):
		if c.exitsAtStart++; c.exitsAtStart > 1 {
			err = &Error{Code: CodeNotDelivered, Err: fmt.Errorf("%w: %w", errExitsAtStart, err)}
		}
	}
	c.mu.Unlock()
	if err != nil {
		if s != nil {
			s.kill(err)
		}
		return nil, err
	}
	return s, nil
}

// closing returns a channel closed at Close and Detach. Only a call that waits for another's
// dial asks for it, so that a client none has waited in makes no lifetime context.
func (c *Client) closing() <-chan struct{} { return c.lifetime().Done() }

// sessionEnded is run once a session has ended and its connection is closed.
func (c *Client) sessionEnded(s *session) {
	c.mu.Lock()
	if i := slices.Index(c.live, s); i >= 0 {
		c.live = slices.Delete(c.live, i, i+1)
	}
	c.mu.Unlock()
	c.wg.Done()
}

// Close ends the client: it closes the connection and waits for the client's goroutines to
// finish. Calls still awaiting an answer end with ErrOutcomeUnknown. Close is idempotent and
// safe to call concurrently; every call returns after the goroutines ended.
func (c *Client) Close() error { return c.shutdown(false) }

// Detach ends the client as Close does, but leaves the server session open where the transport
// allows it (Streamable HTTP sends no DELETE). A server that keeps receipts per session then
// keeps them until it expires the session, for a caller who wants the outcome of an uncertain
// request to stay readable there.
func (c *Client) Detach() error { return c.shutdown(true) }

func (c *Client) shutdown(detach bool) error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		life := c.life
		live := slices.Clone(c.live)
		c.mu.Unlock()
		if life != nil {
			life.cancel()
		}
		for _, s := range live {
			s.end(ErrClosed, detach)
		}
	})
	c.wg.Wait()
	c.progress.close()
	return nil
}

// lifetime returns the context that ends at Close and Detach, made on first use.
func (c *Client) lifetime() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.life == nil {
		ctx, cancel := context.WithCancel(context.Background())
		c.life = &clientLife{ctx, cancel}
		if c.closed {
			cancel()
		}
	}
	return c.life.ctx
}

// clientLife is the context that ends at Close and Detach, and its cancellation.
type clientLife struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// keepalive pings the server every interval until the client closes, so that a dead connection
// is found, and replaced, before a call needs it.
func (c *Client) keepalive(interval time.Duration) {
	defer c.wg.Done()
	life := c.lifetime()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-life.Done():
			return
		case <-t.C:
		}
		if s := c.current(); s != nil && s.stateless {
			continue // a stateless revision holds no connection between requests: none to keep alive
		}
		ctx, cancel := context.WithTimeout(life, interval)
		if err := c.Ping(ctx); err != nil && life.Err() == nil {
			c.log.Warn("mcpclient: keepalive ping failed", "err", err)
		}
		cancel()
	}
}

// current returns the live session, or nil.
func (c *Client) current() *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess
}

// InitializeResult returns what the server answered to the current session's initialize, or,
// in a stateless revision, to its last server/discover. It asks nothing: an answer past the
// lifetime the server gave it (TTLMs) is returned as it is; Session asks again.
func (c *Client) InitializeResult() InitializeResult {
	if s := c.current(); s != nil {
		return s.settled()
	}
	return InitializeResult{}
}

// Session returns what the server settled for the current session, as InitializeResult does,
// opening a session first when there is none (the last was lost, or closed by the server). A
// caller whose next request depends on the server's revision or capabilities asks here rather
// than reading InitializeResult, which gives the last session's, live or not: a server that
// restarted may have changed them. In a stateless revision, an answer to server/discover past
// the lifetime the server gave it (TTLMs) is asked again first; when that fails, the stale one is
// returned.
func (c *Client) Session(ctx context.Context) (InitializeResult, error) {
	s, err := c.liveSession(ctx)
	if err != nil {
		return InitializeResult{}, returned(err)
	}
	return s.settled(), nil
}

// ServerInfo returns the server's name and version.
func (c *Client) ServerInfo() Implementation { return c.InitializeResult().ServerInfo }

// ServerCapabilities returns the capabilities the server declared.
func (c *Client) ServerCapabilities() ServerCapabilities { return c.InitializeResult().Capabilities }

// ProtocolVersion returns the negotiated protocol revision.
func (c *Client) ProtocolVersion() string { return c.InitializeResult().ProtocolVersion }

// Receipts returns the receipt scope the client relies on: the server's declaration, or else the
// one asserted with WithReceipts; "" when neither exists.
func (c *Client) Receipts() ReceiptScope {
	if s := c.current(); s != nil && s.receipts != "" {
		return s.receipts
	}
	return c.cfg.receipts
}

// SessionID returns the id of the current server session, when the transport has one
// (Mcp-Session-Id over Streamable HTTP), or "".
func (c *Client) SessionID() string {
	if s := c.current(); s != nil {
		if sc, ok := s.conn.(transport.SessionConn); ok {
			return sc.SessionID()
		}
	}
	return ""
}

// Ledger returns the client's ledger of request ids.
func (c *Client) Ledger() *Ledger {
	if l := c.ledger.Load(); l != nil {
		return l
	}
	// Made by the first request that needs it: a client that only connected holds none.
	c.ledger.CompareAndSwap(nil, newLedger(c.cfg.ledgerCap, c.cfg.onJoin, c.cfg.journal))
	return c.ledger.Load()
}
