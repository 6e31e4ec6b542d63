package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/internal/metakeys"
	"github.com/northstar-mcp/mcpclient/transport"
)

// Opening a session: a connection, then the revision. A client preferring a stateless revision
// asks server/discover first and falls back to the initialize handshake for an older server;
// a pinned revision goes straight to its own.

// boundHandshake returns ctx bounded by the handshake timeout when it has no deadline.
func (c *Client) boundHandshake(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || c.cfg.handshake <= 0 {
		return ctx, func() {}
	}
	// The cause points at the client's setting rather than holding a copy, which every
	// handshake would allocate and almost none reads.
	return context.WithTimeoutCause(ctx, c.cfg.handshake, (*handshakeTimeout)(&c.cfg.handshake))
}

// handshakeTimeout is the cause of a handshake that ran out of its bound: ErrHandshakeTimeout
// and context.DeadlineExceeded. A type of its own rather than a formatted error, since every
// Connect makes one and almost none is ever read.
type handshakeTimeout time.Duration

func (d handshakeTimeout) Error() string {
	return fmt.Sprintf("%v after %v: %v", ErrHandshakeTimeout, time.Duration(d), context.DeadlineExceeded)
}

func (d handshakeTimeout) Unwrap() []error {
	return []error{ErrHandshakeTimeout, context.DeadlineExceeded}
}

// dial connects and opens a new session: with server/discover for a stateless revision, or with
// the initialize handshake.
func (c *Client) dial(ctx context.Context) (*session, error) {
	ctx, stop := c.boundHandshake(ctx) // a reconnection, under a call's context
	defer stop()
	s, err := c.open(ctx)
	if err != nil {
		return nil, err
	}
	opened := false
	defer func() {
		if !opened && s != nil {
			// The error paths have killed it already; a panic in an interceptor or attempt hook
			// has not, and the session must not stay half-open, holding its connection, until
			// Close.
			s.kill(errDialAbandoned)
		}
	}()
	key := ""
	if c.cfg.version == "" {
		key = olderServerKey(c.transport)
	}
	memory := olderServers
	c.mu.Lock()
	older := c.olderServer
	c.mu.Unlock()
	if older == "" {
		older = memory.offer(key, time.Now())
	}
	for {
		lc := lifecycle{version: c.initializeOffer()}
		probed := false
		switch {
		case older != "":
			lc.version = older
		case c.cfg.version == "" || isStateless(c.cfg.version):
			if lc, err = c.discover(ctx, s); err != nil {
				s.kill(err)
				return nil, err
			}
			probed = true
		}
		if lc.stateless {
			c.adoptStateless(s, lc)
			s.opened()
			opened = true
			return s, nil
		}
		if lc.redial || s.isDead() {
			// Some older servers end the session over an unknown request: the probe's price.
			s.kill(errProbeCostSession)
			if s, err = c.open(ctx); err != nil {
				return nil, err
			}
		}
		if err := c.initialize(ctx, s, lc.version); err != nil {
			s.kill(err)
			c.mu.Lock()
			c.olderServer = "" // the server may have changed: probe it again
			c.mu.Unlock()
			memory.forget(key)
			var e *Error
			if older != "" && key != "" && errors.As(err, &e) && (e.Code == CodeUnsupportedVersion || e.Code == CodeServerError) {
				// What was learned of the endpoint may be out of date, and may have been learned
				// by another client: a server that speaks the stateless revision alone refuses
				// initialize, as an unknown method or with the revisions it speaks. The probe
				// tells, on a new connection, rather than a failed dial.
				older = ""
				if s, err = c.open(ctx); err != nil {
					return nil, err
				}
				continue
			}
			return nil, err
		}
		if probed && !isStateless(c.cfg.version) {
			c.mu.Lock()
			c.olderServer = lc.version
			c.mu.Unlock()
			memory.learn(key, lc.version, time.Now())
		}
		if probed {
			// The probe's _meta was encoded for a stateless revision the server does not speak;
			// an idle session should not hold it.
			c.meta.Store(nil)
		}
		s.opened()
		opened = true
		return s, nil
	}
}

var errDialAbandoned = errors.New("mcpclient: the dial that opened the session did not return")

var errProbeCostSession = errors.New("mcpclient: the server ended the session over server/discover")

// adoptStateless makes s a session of a stateless revision, as server/discover described it.
func (c *Client) adoptStateless(s *session, lc lifecycle) {
	s.stateless = true
	s.init = lc.result.settled(lc.version)
	s.receipts = c.cfg.receipts
	if r, ok := lc.result.Capabilities.RequestReceipts(); ok {
		s.receipts, s.receiptEpoch = r.Scope, r.Epoch
	}
	s.discovered.Store(&discovery{result: s.init, binding: bindingOf(s), asked: lc.asked,
		staleAt: discoveryStaleAt(lc.arrived, lc.result.TTLMs)})
	if sc, ok := s.conn.(transport.SessionConn); ok {
		sc.SetProtocolVersion(lc.version)
	}
	if c.log.Enabled(context.Background(), slog.LevelDebug) { // the attributes cost allocations
		c.log.Debug("mcpclient: stateless session", "protocol", lc.version, "server", s.init.ServerInfo.Name, "receipts", s.receipts)
	}
}

// open connects a new session. The connection delivers to the session from the start.
func (c *Client) open(ctx context.Context) (*session, error) {
	s := newSession(c)
	conn, err := c.transport.Connect(ctx, s)
	if err != nil {
		s.end(err, false)
		s.startClosing()
		return nil, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		s.end(ErrClosed, false)
		s.startClosing()
		conn.Close()
		return nil, &Error{Code: CodeClosed, Err: ErrClosed}
	}
	if c.live == nil {
		c.live = c.firstLive[:0] // most clients never have two sessions live at once
	}
	c.live = append(c.live, s)
	c.wg.Add(1) // the session's own, until it has ended (sessionEnded)
	c.mu.Unlock()
	s.attach(conn)
	return s, nil
}

// initialize runs the initialize handshake on s. It sends one initialize request: a failed one
// is retried by the caller on a fresh connection under a fresh id, which is safe because
// initialize only opens a session. The handshake stays out of the ledger: its id is never resent,
// and a ledger full of the caller's uncertain requests must not keep the client from
// reconnecting to settle them.
func (c *Client) initialize(ctx context.Context, s *session, offer string) error {
	base, err := c.cfg.initializeParams(offer)
	if err != nil {
		return &Error{Code: CodeInvalidArgument, Err: fmt.Errorf("params of initialize: %w", err)}
	}
	// Built for no stateless revision, whatever the session this one replaces spoke.
	req, err := c.build(requestSpec{method: "initialize", base: base})
	if err != nil {
		return err
	}
	raw, err := c.sendHandshake(ctx, s, req)
	if err != nil {
		if errors.Is(err, ErrRefused) {
			return err
		}
		err = fmt.Errorf("initialize: %w", err) // named, for Connect's error
		if errors.Is(err, transport.ErrUnauthorized) {
			return &Error{Code: CodeUnauthorized, Request: req, Attempts: 1, Err: err}
		}
		if errors.Is(err, transport.ErrInvalidSessionID) {
			// Not a refusal: the server answered with a session id no request may carry.
			return &Error{Code: CodeProtocol, Request: req, Attempts: 1, Err: err}
		}
		var rpc *RPCError
		if errors.As(err, &rpc) && rpc.Code == RPCUnsupportedProtocolVersion {
			// A server that speaks no revision offered (a pinned session revision against a
			// server of the stateless revision alone): the same refusal discovery gives.
			return &Error{Code: CodeUnsupportedVersion, Request: req, Attempts: 1,
				Err: fmt.Errorf("offered %q; the server speaks %v: %w", offer, rpc.supportedVersions(), err)}
		}
		if errors.As(err, &rpc) || transport.OutcomeOf(err) == transport.Answered {
			// The server refused the session (a JSON-RPC error, an HTTP 403): asking again
			// will not change its mind.
			return &Error{Code: CodeServerError, Request: req, Attempts: 1, Err: err}
		}
		return err // a transport failure: the caller dials again
	}
	// Decoded in place: a session whose answer is refused is killed, never published.
	if err := json.Unmarshal(raw, &s.init); err != nil {
		return &Error{Code: CodeProtocol, Request: req, Attempts: 1, Err: fmt.Errorf("initialize result: %w", err)}
	}
	res := &s.init
	if !isSupportedVersion(res.ProtocolVersion) || isStateless(res.ProtocolVersion) {
		return &Error{Code: CodeUnsupportedVersion, Request: req, Attempts: 1,
			Err: fmt.Errorf("server chose %q; this client speaks %v", res.ProtocolVersion, supportedVersions)}
	}
	// The session keeps the client's own string of the revision, not the one decoded.
	res.ProtocolVersion = supportedVersions[slices.Index(supportedVersions, res.ProtocolVersion)]
	if r, ok := res.Capabilities.RequestReceipts(); ok {
		s.receipts, s.receiptEpoch = r.Scope, r.Epoch
	} else {
		s.receipts = c.cfg.receipts
	}
	if sc, ok := s.conn.(transport.SessionConn); ok {
		sc.SetProtocolVersion(res.ProtocolVersion)
	}
	// The session's own messages carry what the interceptors gave initialize: a gateway that let
	// it through checks them too.
	header := s.ownHeader()
	if hc, ok := s.conn.(transport.SessionHeaderConn); ok && header != nil {
		hc.SetSessionHeader(header)
	}
	if err := s.conn.Send(ctx, &transport.Message{Frame: initializedNote, Method: "notifications/initialized", Header: header}); err != nil {
		err = fmt.Errorf("notifications/initialized: %w", err)
		if transport.OutcomeOf(err) == transport.Answered {
			return &Error{Code: CodeServerError, Request: req, Attempts: 1, Err: err} // refused: definite
		}
		return err
	}
	if sc, ok := s.conn.(transport.SessionConn); ok && c.cfg.listens() { // sessions of the older revisions only: stateless ones have no such stream
		sc.Listen()
	}
	if c.log.Enabled(ctx, slog.LevelDebug) { // the attributes cost allocations
		c.log.Debug("mcpclient: session initialized", "protocol", res.ProtocolVersion, "server", res.ServerInfo.Name, "receipts", s.receipts)
	}
	return nil
}

// initializedNote is the frame of notifications/initialized, the same for every session:
// transports neither modify nor keep a frame.
var initializedNote = jsonrpc.AppendRequest(nil, "", "notifications/initialized", nil)

// initializeOffer is the revision the client offers in initialize.
func (c *Client) initializeOffer() string {
	if c.cfg.version != "" && !isStateless(c.cfg.version) {
		return c.cfg.version
	}
	return LatestStatefulProtocolVersion
}

// discoverResult is a stateless server's answer to server/discover.
type discoverResult struct {
	SupportedVersions []string                   `json:"supportedVersions"`
	Capabilities      ServerCapabilities         `json:"capabilities"`
	Instructions      string                     `json:"instructions,omitempty"`
	ServerInfo        *Implementation            `json:"serverInfo,omitempty"` // before the spec moved it into _meta
	Meta              map[string]json.RawMessage `json:"_meta,omitempty"`
	TTLMs             *int64                     `json:"ttlMs,omitempty"`
	CacheScope        string                     `json:"cacheScope,omitempty"`
}

// settled is what the answer settles for a session of the revision version.
func (d *discoverResult) settled(version string) InitializeResult {
	return InitializeResult{
		ProtocolVersion: version,
		Capabilities:    d.Capabilities,
		ServerInfo:      d.serverInfo(),
		Instructions:    d.Instructions,
		TTLMs:           d.TTLMs,
		CacheScope:      d.CacheScope,
	}
}

func (d *discoverResult) serverInfo() Implementation {
	var info Implementation
	if raw, ok := d.Meta[metakeys.ServerInfo]; ok && json.Unmarshal(raw, &info) == nil {
		return info
	}
	if d.ServerInfo != nil {
		return *d.ServerInfo
	}
	return info
}

// A lifecycle is what the opening exchange of a connection settled: a stateless revision, or the
// initialize handshake with the revision to offer.
type lifecycle struct {
	stateless bool
	version   string // stateless: the revision to use; otherwise the one initialize offers
	result    *discoverResult
	// asked numbers the server/discover that gave result (see discoverSerials); arrived is when
	// its answer came.
	asked   uint64
	arrived time.Time
	// redial: the probe cost the connection (an older server that ended the session over it);
	// initialize needs a new one.
	redial bool
}

// discoverTimeout bounds the wait for an answer to server/discover: an older server may ignore
// it, or answer 202 and nothing more.
const discoverTimeout = 5 * time.Second

var errNoDiscoverAnswer = errors.New("mcpclient: no answer to server/discover")

// discoverAttempts bounds the server/discover exchanges of one connection: one, and one more
// with the revision a -32022 refusal names.
const discoverAttempts = 2

// discover settles the lifecycle of a new connection by server/discover. Any answer other than
// a discoverResult naming a stateless revision the client speaks, or a -32022 refusal naming one,
// identifies an older server; errors are returned only when nothing was learned (the request did
// not get through) or when the pinned stateless revision is refused.
func (c *Client) discover(ctx context.Context, s *session) (lifecycle, error) {
	pinned := c.cfg.version != "" && isStateless(c.cfg.version)
	version := LatestProtocolVersion
	if pinned {
		version = c.cfg.version
	}
	for range discoverAttempts {
		req, err := c.build(requestSpec{method: "server/discover", version: version})
		if err != nil {
			return lifecycle{}, err
		}
		asked := discoverSerials.Add(1)
		probeCtx, cancel := context.WithTimeoutCause(ctx, discoverTimeout, errNoDiscoverAnswer)
		var a handshakeAttempt
		raw, err := c.exchangeHandshake(probeCtx, s, req, &a)
		cancel()
		lc, retry, err := c.readDiscover(ctx, req, raw, err, version, asked, pinned, &a)
		c.tellAttempt(ctx, &a)
		if retry != "" {
			version = retry
			continue
		}
		return lc, err
	}
	return lifecycle{}, &Error{Code: CodeUnsupportedVersion, Err: errors.New("the server kept refusing the protocol revision it named")}
}

// readDiscover reads the answer to the server/discover numbered asked, which offered version:
// the lifecycle it settles, or the stateless revision to ask again with (retry), or the failure
// of discover. It marks the attempt a as an older server's answer when it is one, so that the
// attempt hook is not told of a failure where the probe learned what it asked; any other error
// stays the attempt's, even where the client goes on to initialize.
func (c *Client) readDiscover(ctx context.Context, req *Request, raw json.RawMessage, err error, version string, asked uint64, pinned bool, a *handshakeAttempt) (lc lifecycle, retry string, _ error) {
	older := lifecycle{version: c.initializeOffer()}
	if errors.Is(err, ErrRefused) {
		return lifecycle{}, "", err
	}
	if errors.Is(err, errNoDiscoverAnswer) && ctx.Err() == nil {
		return older, "", nil // no answer within reason: an older server, or one failing to answer
	}
	if err == nil {
		if !pinned && listsNoStatelessRevision(raw) {
			a.olderServer()
			return older, "", nil // an older server's answer, not worth decoding
		}
		var res discoverResult
		if err := json.Unmarshal(raw, &res); err != nil {
			a.fail(fmt.Errorf("server/discover result: %w", err))
			return older, "", nil
		}
		if v := bestVersion(res.SupportedVersions, version, true); v != "" {
			return lifecycle{stateless: true, version: v, result: &res, asked: asked, arrived: time.Now()}, "", nil
		}
		// An older server that answers every method with an empty result.
		if pinned {
			return lifecycle{}, "", &Error{Code: CodeUnsupportedVersion, Err: fmt.Errorf("server/discover named no revision of %v", res.SupportedVersions)}
		}
		a.olderServer()
		return older, "", nil
	}
	var rpc *RPCError
	switch {
	case errors.As(err, &rpc) && rpc.Code == RPCUnsupportedProtocolVersion:
		supported := rpc.supportedVersions()
		if v := bestVersion(supported, version, true); v != "" {
			return lifecycle{}, v, nil
		}
		if v := bestVersion(supported, "", false); v != "" && !pinned {
			a.olderServer()
			return lifecycle{version: v}, "", nil
		}
		return lifecycle{}, "", &Error{Code: CodeUnsupportedVersion, Request: req, Attempts: 1,
			Err: fmt.Errorf("the server speaks %v; this client speaks %v: %w", supported, supportedVersions, err)}
	case pinned && (rpc != nil || transport.OutcomeOf(err) == transport.Answered):
		return lifecycle{}, "", &Error{Code: CodeServerError, Request: req, Attempts: 1, Err: err}
	case errors.Is(err, transport.ErrSessionNotFound):
		a.olderServer()
		older.redial = true
		return older, "", nil
	case rpc != nil || transport.OutcomeOf(err) == transport.Answered:
		if refusesUnknownMethod(err, rpc) {
			a.olderServer()
		}
		return older, "", nil // whatever refused server/discover is an older server
	}
	return lifecycle{}, "", fmt.Errorf("server/discover: %w", err) // nothing got through; the caller dials again
}

// refusesUnknownMethod reports whether err, with rpc its JSON-RPC error if any, is how a server
// of the revisions with sessions refuses a request it does not know: an HTTP 400, 404 or 405,
// or without an HTTP status, the JSON-RPC error Invalid Request, Method not found or Invalid
// params. A server error (5xx, Internal error, a code of the server's own) is none: it may come
// from a server that knows server/discover and failed to answer it.
func refusesUnknownMethod(err error, rpc *RPCError) bool {
	var se *transport.StatusError
	if errors.As(err, &se) {
		switch se.StatusCode {
		case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed:
			return true
		}
		return false
	}
	if rpc == nil {
		return false
	}
	switch rpc.Code {
	case RPCInvalidRequest, RPCMethodNotFound, RPCInvalidParams:
		return true
	}
	return false
}

// listsNoStatelessRevision reports whether an answer to server/discover surely lists no stateless
// revision this client speaks in its supportedVersions, as decoding it would read them: a look at
// its JSON, which is all an older server's answer needs. false when that cannot tell: an answer
// that is no valid object, a key or revision written with escapes, a list of other values.
func listsNoStatelessRevision(raw []byte) bool {
	var list []byte // the last supportedVersions, the one a decoder keeps
	sure := true
	if !jsonrpc.EachMember(raw, func(key []byte, start, end int) {
		switch {
		case string(key) == "supportedVersions":
			list = raw[start:end]
		case bytes.EqualFold(key, []byte("supportedVersions")):
			sure = false // a decoder takes it too, and which one it keeps is its business
		}
	}) {
		return false
	}
	if !sure || list == nil || string(list) == "null" {
		return sure
	}
	listed := false
	if !jsonrpc.EachElement(list, func(start, end int) {
		v := list[start:end]
		if len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 {
			sure = false
			return
		}
		revision := string(v[1 : len(v)-1])
		listed = listed || (isStateless(revision) && isSupportedVersion(revision))
	}) {
		return false
	}
	return sure && !listed
}

// freshBinding returns the receipt binding the server declares now on s. A session of an older
// revision declared it in initialize, and a server restart ends that session. A stateless
// revision has no session to end: a restart shows only in the epoch, so the binding is read from
// an answer to a server/discover sent after the one numbered after (see rediscover), and a
// session whose server declares another binding is retired, for the next request to open one
// that knows it.
func (c *Client) freshBinding(ctx context.Context, s *session, after uint64) (ReceiptBinding, error) {
	if !s.stateless {
		if !outlivesItsProcess(s) {
			return bindingOf(s), nil
		}
		return c.probeBinding(ctx, s)
	}
	d, err := c.rediscover(ctx, s, after)
	if err != nil {
		return ReceiptBinding{}, fmt.Errorf("confirming the server's receipts: %w", err)
	}
	return d.binding, nil
}

// outlivesItsProcess reports whether s is a session of an older revision that may outlive the
// server process holding its receipts: one with a transport session id (a server may keep its
// sessions in a store of their own, and a restarted process then takes them up, its receipts
// gone), whose receipts are the process's, under an epoch that can tell.
func outlivesItsProcess(s *session) bool {
	if s.stateless || !s.receipts.outlivesSessions() || s.receiptEpoch == "" {
		return false
	}
	sc, ok := s.conn.(transport.SessionConn)
	return ok && sc.SessionID() != ""
}

// probeBinding reads the receipt binding the server declares now by opening a session of its
// own, for a session of an older revision that would not show a restart of the server
// (outlivesItsProcess): initialize is the only place such a server declares it. The probe session
// ends at once, and s is retired when the binding changed.
func (c *Client) probeBinding(ctx context.Context, s *session) (ReceiptBinding, error) {
	ctx, stop := c.boundHandshake(ctx)
	defer stop()
	p, err := c.open(ctx)
	if err != nil {
		return ReceiptBinding{}, fmt.Errorf("confirming the server's receipts: %w", err)
	}
	defer p.kill(errReceiptsProbed)
	if err := c.initialize(ctx, p, s.init.ProtocolVersion); err != nil {
		return ReceiptBinding{}, fmt.Errorf("confirming the server's receipts: %w", err)
	}
	now := bindingOf(p)
	if now != bindingOf(s) {
		s.retire(fmt.Errorf("%w: the server now declares %s, not %s", ErrSessionLost, now, bindingOf(s)))
	}
	return now, nil
}

var errReceiptsProbed = errors.New("mcpclient: a session opened only to read the server's receipts")

// supportedVersions reads data.supported of a -32022 refusal.
func (e *RPCError) supportedVersions() []string {
	var data struct {
		Supported []string `json:"supported"`
	}
	json.Unmarshal(e.Data, &data) // a refusal without the list names nothing
	return data.Supported
}

// bestVersion picks from the server's list the revision to use: prefer if listed, else the
// newest the client speaks of the wanted era. "" when there is none.
func bestVersion(server []string, prefer string, stateless bool) string {
	if prefer != "" && slices.Contains(server, prefer) && isSupportedVersion(prefer) {
		return prefer
	}
	for _, v := range supportedVersions {
		if isStateless(v) == stateless && slices.Contains(server, v) {
			return v
		}
	}
	return ""
}
