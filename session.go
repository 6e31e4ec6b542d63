package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/internal/metakeys"
	"github.com/northstar-mcp/mcpclient/transport"
)

// A session is one connection and the server session it carries. A new connection is always a
// new session, and whatever the old session remembered is assumed gone, its request receipts
// included, unless the server says otherwise: receipts kept for the whole process under an
// epoch that the new session finds unchanged (see receiptsHeld).
//
// The session is its connection's transport.Receiver: Deliver and Fail run on the connection's
// goroutines, from the moment Connect is called, which may be before the connection is attached.
type session struct {
	c *Client
	// conn is set by attach, under mu, once Connect returned it. Code that runs after open
	// returned the session, or on a dispatcher, reads it without mu.
	conn    transport.Conn
	mu      sync.Mutex
	pending pendingCalls // guarded by mu
	// dead: the session takes no new requests. ended: its connection is closed and every
	// pending call was failed. A retired session is dead but not ended until its pending calls
	// have their answers. guarded by mu.
	dead, ended bool
	// attached: attach gave the session its connection, and the client counts it as live.
	// Until then an ended session leaves closing to attach, and the dispatcher waits
	// (dispatchLater): its handlers may answer the server on the connection. guarded by mu.
	attached, dispatchLater bool
	// detach: the ended session leaves its server session open; written once with ended.
	detach bool
	// closing: the connection of the ended session is being closed. guarded by mu.
	closing bool
	// Written once by dial before the session is published, read only after.
	stateless bool // a stateless revision: requests carry their version and capabilities

	// serial names the session among all sessions of the process, so that a record can say
	// which one a request went out on without keeping it alive.
	serial uint64

	// init is what the session opened with. Its revision and receipt binding hold for the
	// session's life; the rest, in a stateless revision, is the last answer to server/discover
	// (discovered, see settled).
	init     InitializeResult
	receipts ReceiptScope
	// receiptEpoch names the server process holding the receipts, as the server declared it
	// with them; "" when it declared none, or when the receipts are only asserted by the
	// caller (WithReceipts), which says nothing about which process holds them.
	receiptEpoch string
	// discovered is the last answer to server/discover of a session of a stateless revision,
	// replaced when it is asked again (see rediscover); nil for other sessions.
	discovered atomic.Pointer[discovery]

	// inbound carries notifications and server requests from the connection to the dispatcher.
	inbound inbox

	// busy is what a session needs only once it does more than carry calls and their answers:
	// made by the first work that needs it (see busyState), so that the thousands of idle
	// sessions of an agent host do not each carry it empty. guarded by mu.
	busy *sessionBusy
}

// sessionBusy is the state of a session that heard from the server unprompted, handled its
// requests, stopped waiting for an answer, took headers from its handshake's interceptors, or
// died. Its fields are guarded by the session's mu.
type sessionBusy struct {
	// cause is why the session died, set when it does.
	cause error
	// ctx ends when the session ends; deliveries, the dispatcher and handlers run under it.
	ctx    context.Context
	cancel context.CancelFunc
	// closed, made when a delivery waits for the connection of the ended session to be
	// closed, is closed then.
	closed chan struct{}

	// handling holds the cancellation of each server request being handled, by id: at most
	// maxServerRequests.
	handling map[string]context.CancelFunc

	// cancelling holds, by request key, the notifications/cancelled being sent; each channel is
	// closed once its notice is out.
	cancelling map[string]chan struct{}
	// abandoned holds the keys of the last requests the client stopped waiting for: a response
	// that comes for one of them is late, not a stray.
	abandoned recentKeys

	// named counts, by the key of a call awaiting its answer, the notifications naming the call
	// by io.modelcontextprotocol/subscriptionId that the dispatcher has not handled yet (see
	// awaitNamed); namedHandled is closed, and forgotten, when one of the counts reaches zero.
	named        map[string]int
	namedHandled chan struct{}

	// header holds the headers the interceptors gave the handshake, which the session's
	// messages that belong to no call carry (see setHeader); nil when they gave none. Never
	// modified once set.
	header http.Header
}

// busyState returns the session's busy state, made on first need. s.mu is held.
func (s *session) busyState() *sessionBusy {
	if s.busy == nil {
		s.busy = new(sessionBusy)
	}
	return s.busy
}

// setHeader makes h the headers of the session's messages that belong to no call:
// notifications/initialized, the answers to the server's requests, the caller's notifications,
// and, on a connection that has them, its own requests (the GET stream, the DELETE at Close).
func (s *session) setHeader(h http.Header) {
	s.mu.Lock()
	s.busyState().header = h
	s.mu.Unlock()
}

// ownHeader returns the headers of the session's messages that belong to no call.
func (s *session) ownHeader() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy == nil {
		return nil
	}
	return s.busy.header
}

// withHeaders returns the headers that name a request, with extra's besides; the request's win.
func withHeaders(own, extra http.Header) http.Header {
	if len(extra) == 0 {
		return own
	}
	h := make(http.Header, len(own)+len(extra))
	for k, vs := range extra {
		h[http.CanonicalHeaderKey(k)] = slices.Clone(vs)
	}
	for k, vs := range own {
		h[k] = vs
	}
	return h
}

// A pendingCall waits for the answer to the request key sent on the session. Whoever removes the
// call from the pending calls gives it its one reply (give); the caller takes it after answered
// (reply). A channel of replies would take a buffer of its own, since a reply holds pointers.
type pendingCall struct {
	key      string
	r        reply         // written once, by give, before answered receives
	answered chan struct{} // buffered: give never waits
	// msg is the message sent for the call, made with it rather than apart: Send takes a
	// pointer, which would put a message of its own on the heap for every exchange.
	msg transport.Message
}

func newPendingCall(key string) *pendingCall {
	return &pendingCall{key: key, answered: make(chan struct{}, 1)}
}

// give hands p its reply. It is called once, by whoever removed p from the pending calls.
func (p *pendingCall) give(r reply) {
	p.r = r
	p.answered <- struct{}{}
}

// reply waits for p's reply, once p was removed from the pending calls.
func (p *pendingCall) reply() reply {
	<-p.answered
	return p.r
}

// pendingCalls are the calls awaiting answers on a session, by request key. The first is held
// apart from the map, which is made for a second: the handshake, and a client that makes one call
// at a time, never need it.
type pendingCalls struct {
	one  *pendingCall
	more map[string]*pendingCall
}

// get returns the call awaiting key, or nil.
func (pc *pendingCalls) get(key string) *pendingCall { return awaiting(pc, key) }

// awaiting returns the call in pc awaiting key, or nil. A key read from a frame is looked up as
// its bytes, without a copy.
func awaiting[K string | []byte](pc *pendingCalls, key K) *pendingCall {
	if pc.one != nil && pc.one.key == string(key) {
		return pc.one
	}
	return pc.more[string(key)]
}

// add adds p, whose key no call awaits.
func (pc *pendingCalls) add(p *pendingCall) {
	if pc.one == nil {
		pc.one = p
		return
	}
	if pc.more == nil {
		pc.more = make(map[string]*pendingCall)
	}
	pc.more[p.key] = p
}

// remove removes p, which awaits.
func (pc *pendingCalls) remove(p *pendingCall) {
	if pc.one == p {
		pc.one = nil
		return
	}
	delete(pc.more, p.key)
}

func (pc *pendingCalls) len() int {
	n := len(pc.more)
	if pc.one != nil {
		n++
	}
	return n
}

type reply struct {
	result json.RawMessage
	err    error // *RPCError, a transport error, or errMalformedAnswer
}

func newSession(c *Client) *session {
	return &session{c: c, serial: sessionSerials.Add(1)}
}

// sessionSerials numbers the sessions of the process, from 1.
var sessionSerials atomic.Uint64

// lifetime returns the context that ends when the session ends, made on first use.
func (s *session) lifetime() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.busyState()
	if b.ctx == nil {
		b.ctx, b.cancel = context.WithCancel(context.Background())
		if s.ended {
			b.cancel()
		}
	}
	return b.ctx
}

// opened lets go of what the handshake needed and an idle session does not: the map of calls
// awaiting answers, if the handshake made one, made again when calls need it.
func (s *session) opened() {
	s.mu.Lock()
	if s.pending.len() == 0 {
		s.pending.more = nil
	}
	s.mu.Unlock()
}

func (s *session) isDead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead
}

// kill ends the session: every request awaiting an answer on it gets an uncertain outcome, since
// its bytes were sent and no answer will come.
func (s *session) kill(cause error) { s.end(cause, false) }

// retire makes the session dead to new requests but lets the calls awaiting answers on it have
// them, then ends it. A server that forgot the session (404) may still answer the requests it
// was executing, over their own streams: killing the session would make each of those outcomes
// unknown, and every request that was merely concurrent with the lost one would pay for it.
func (s *session) retire(cause error) {
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		return
	}
	s.dead = true
	s.busyState().cause = cause
	drained := s.pending.len() == 0
	s.mu.Unlock()
	if drained {
		s.end(cause, false)
	}
}

// endIfDrained ends a retired session once no call awaits an answer on it.
func (s *session) endIfDrained() {
	s.mu.Lock()
	drained := s.dead && !s.ended && s.pending.len() == 0
	var cause error
	if s.dead {
		cause = s.busy.cause // made when it died
	}
	s.mu.Unlock()
	if drained {
		s.end(cause, false)
	}
}

// end kills the session; detach leaves the server session open if the transport can.
func (s *session) end(cause error, detach bool) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	if !s.dead {
		s.dead = true
		s.busyState().cause = cause
	}
	s.ended, s.detach = true, detach
	attached := s.attached
	pending := s.pending
	s.pending = pendingCalls{}
	var cancel context.CancelFunc
	if s.busy != nil {
		cancel = s.busy.cancel
	}
	s.mu.Unlock()

	if cancel != nil {
		cancel()
	}
	// Pending calls learn their fate first: closing a process transport may take its shutdown
	// timeouts.
	if pending.len() > 0 {
		lost := &transport.Error{Outcome: transport.Uncertain, Err: fmt.Errorf("%w: %w", ErrSessionLost, cause)}
		if pending.one != nil {
			pending.one.give(reply{err: lost})
		}
		for _, p := range pending.more {
			p.give(reply{err: lost})
		}
	}
	s.inbound.close()
	if attached {
		// end may run on a goroutine of the connection's (an answer that drains a retired
		// session arrives on a response stream, a reader meets the end of its stream), and
		// closing waits for those goroutines.
		go s.finish()
	}
}

// finish closes the connection of an ended session and lets the client forget the session.
func (s *session) finish() {
	s.startClosing()
	closeConn := s.conn.Close
	if sc, ok := s.conn.(transport.SessionConn); ok && s.detach {
		closeConn = sc.Detach
	}
	if err := closeConn(); err != nil {
		s.c.log.Warn("mcpclient: closing the connection", "err", err)
	}
	s.c.sessionEnded(s)
}

// attach gives the session the connection Connect returned, once the client counts the session
// as live. A session whose connection ended while it was connecting is finished here, and a
// dispatcher that messages wait for is started.
func (s *session) attach(conn transport.Conn) {
	s.mu.Lock()
	s.conn, s.attached = conn, true
	ended := s.ended
	dispatch := !ended && s.dispatchLater
	if dispatch {
		s.c.wg.Add(1) // before end can let the session's own count go
	}
	s.mu.Unlock()
	if ended {
		s.finish()
	}
	if dispatch {
		go s.dispatch()
	}
}

// exchange sends req once on the session, with the HTTP headers extra besides its own, and waits
// for its answer.
func (s *session) exchange(ctx context.Context, req *Request, extra http.Header) (json.RawMessage, error) {
	if err := s.awaitCancelNotice(ctx, req.key); err != nil {
		return nil, &transport.Error{Outcome: transport.NotDelivered, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return nil, &transport.Error{Outcome: transport.NotDelivered, Err: err}
	}
	p := newPendingCall(req.key)
	p.msg = transport.Message{Frame: req.frame, ID: req.key, Method: req.method, Header: withHeaders(req.header, extra)}
	s.mu.Lock()
	if s.dead {
		cause := s.busy.cause // made when it died
		s.mu.Unlock()
		return nil, &transport.Error{Outcome: transport.NotDelivered, Err: fmt.Errorf("%w: %w", ErrSessionLost, cause)}
	}
	if s.pending.get(req.key) != nil {
		s.mu.Unlock()
		// The ledger lets one flight run per id, so this is a bug, and sending would make two
		// answers indistinguishable.
		return nil, &transport.Error{Outcome: transport.NotDelivered, Err: fmt.Errorf("request %s is already awaiting an answer", req.key)}
	}
	s.pending.add(p)
	s.mu.Unlock()
	// A reader waiting for room in the inbox must not wait any longer: this call's answer
	// may come behind the messages it would hold up (see inbox).
	s.inbound.signal()

	err := s.conn.Send(ctx, &p.msg)
	if err != nil {
		if !s.forget(p) {
			// Something was routed to the call before Send gave up (an answer on a legacy
			// stream, then a 502 for the POST): an answer is the request's outcome, and the
			// later send error cannot undo it.
			if r := p.reply(); isAnswer(r) {
				return r.result, withReply(r.err)
			}
		}
		switch {
		case errors.Is(err, transport.ErrSessionNotFound):
			s.retire(err)
		case connEnded(err):
			s.kill(err)
		}
		if ctx.Err() != nil && transport.OutcomeOf(err) == transport.Uncertain {
			// The caller gave up while the answer was being read (an HTTP POST answered
			// with JSON): the request was sent, so the server is told.
			s.abandon(req, extra, context.Cause(ctx))
		}
		return nil, withReply(err)
	}
	select {
	case <-p.answered:
		r := p.r
		s.awaitNamed(ctx, req.key)
		return r.result, withReply(r.err)
	case <-ctx.Done():
		if !s.forget(p) {
			// The reply won the race; an answer is still the answer, and any other reply
			// says as much about the exchange as the context does.
			r := p.reply()
			return r.result, withReply(r.err)
		}
		cause := context.Cause(ctx)
		s.abandon(req, extra, cause)
		return nil, cause
	}
}

// abandon tells the server the client no longer waits for req, unless the protocol forbids it
// (initialize) or the transport already did by closing the exchange. The notice carries the
// headers extra that req's exchange carried: what let req through lets its cancellation through.
// It goes on a goroutine of the session's: the caller has stopped waiting and must not wait for
// a slow server to take it. A later send under the same id waits for it instead (see
// awaitCancelNotice), so that the notice cannot reach the server after a resend and cancel that.
func (s *session) abandon(req *Request, extra http.Header, cause error) {
	sc, ok := s.conn.(transport.SessionConn)
	notify := req.method != "initialize" && !(ok && sc.CancelsByClosing())
	s.mu.Lock()
	b := s.busyState()
	b.abandoned.add(req.key)
	if s.ended || !notify {
		s.mu.Unlock()
		return
	}
	sent := make(chan struct{})
	if b.cancelling == nil {
		b.cancelling = make(map[string]chan struct{})
	}
	b.cancelling[req.key] = sent
	s.c.wg.Add(1) // while the session's own count is held: it has not ended
	s.mu.Unlock()
	extra = extra.Clone() // an interceptor's goroutine may still hold the exchange's
	go func() {
		defer s.c.wg.Done()
		s.sendCancelled(req, extra, cause)
		s.mu.Lock()
		if b.cancelling[req.key] == sent {
			delete(b.cancelling, req.key)
		}
		s.mu.Unlock()
		close(sent)
	}()
}

// awaitCancelNotice waits until a notifications/cancelled for key, if one is being sent, has
// been, or ctx ends.
func (s *session) awaitCancelNotice(ctx context.Context, key string) error {
	var sent chan struct{}
	s.mu.Lock()
	if s.busy != nil {
		sent = s.busy.cancelling[key]
	}
	s.mu.Unlock()
	if sent == nil {
		return nil
	}
	select {
	case <-sent:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// cancelNoticeTimeout bounds the sending of notifications/cancelled, which runs after the
// caller's context ended.
const cancelNoticeTimeout = 2 * time.Second

// sendCancelled tells the server the client no longer waits for req, with the headers header.
// The request's outcome stays unknown: the server may have finished it, and one that keeps
// receipts may still answer a Resend.
func (s *session) sendCancelled(req *Request, header http.Header, cause error) {
	params, _ := json.Marshal(struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason,omitempty"`
	}{json.RawMessage(req.key), cause.Error()})
	frame := jsonrpc.AppendRequest(nil, "", "notifications/cancelled", params)
	ctx, cancel := context.WithTimeout(s.lifetime(), cancelNoticeTimeout)
	defer cancel()
	if err := s.conn.Send(ctx, &transport.Message{Frame: frame, Method: "notifications/cancelled", Header: header}); err != nil {
		s.c.log.Debug("mcpclient: notifications/cancelled not sent", "id", req.key, "err", err)
	}
}

// connEnded reports whether a Send failure means the session cannot carry anything more.
func connEnded(err error) bool {
	return errors.Is(err, transport.ErrSessionNotFound) || errors.Is(err, transport.ErrClosed) ||
		errors.Is(err, transport.ErrProcessExited)
}

// withReply puts the JSON-RPC error a transport failure carried (an HTTP 400 or 409 with a
// JSON-RPC body) in the error's chain, so that it is classified as the server's answer.
func withReply(err error) error {
	if err == nil {
		return nil // before te, which escapes to errors.As
	}
	var te *transport.Error
	if !errors.As(err, &te) || te.Reply == nil {
		return err
	}
	rpc := new(RPCError)
	if json.Unmarshal(te.Reply, rpc) != nil {
		return err
	}
	return fmt.Errorf("%w (%w)", rpc, err)
}

// forget removes p from the pending calls if it is still there, and reports whether it was: when
// it was not, a reply is on its way to p, or there already.
func (s *session) forget(p *pendingCall) bool {
	s.mu.Lock()
	removed := s.pending.get(p.key) == p
	if removed {
		s.pending.remove(p)
	}
	s.mu.Unlock()
	s.endIfDrained()
	return removed
}

// isAnswer reports whether r is the server's answer to the call (a result, a JSON-RPC error, or
// a response for its id that does not parse), rather than a failure of the exchange.
func isAnswer(r reply) bool {
	var rpc *RPCError
	var malformed *errMalformedAnswer
	return r.err == nil || errors.As(r.err, &rpc) || errors.As(r.err, &malformed)
}

// resolve hands r to the call awaiting key. It reports false when no call awaits it: an unknown
// id, or a second answer to one id.
func (s *session) resolve(key string, r reply) bool {
	p := s.take(key)
	if p != nil {
		p.give(r)
	}
	return p != nil
}

// take removes and returns the call awaiting key, or nil.
func (s *session) take(key string) *pendingCall { return takeAwaiting(s, key) }

// takeAwaiting is take for a key given as a string or, read from a frame, as its bytes, which
// it does not copy.
func takeAwaiting[K string | []byte](s *session, key K) *pendingCall {
	s.mu.Lock()
	p := awaiting(&s.pending, key)
	if p != nil {
		s.pending.remove(p)
	}
	s.mu.Unlock()
	if p != nil {
		s.endIfDrained()
	}
	return p
}

// Deliver routes a frame the connection read (see transport.Receiver), and reports whether it
// held the response to awaited.
func (s *session) Deliver(frame []byte, awaited string) (answered bool) {
	if s.hasEnded() {
		s.awaitClosing() // nobody awaits anything on an ended session
		return false
	}
	answered, err := s.route(frame, awaited)
	if err != nil {
		s.kill(err)
	}
	return answered
}

// Fail takes a failure the connection reports (see transport.Receiver): of one exchange, or of
// the connection, which ends the session.
func (s *session) Fail(err error) {
	if s.hasEnded() {
		s.awaitClosing()
		return
	}
	var te *transport.Error
	if !errors.As(err, &te) || te.ID == "" {
		s.kill(err)
		return
	}
	if errors.Is(err, transport.ErrSessionNotFound) {
		// Dead before the caller hears of it, so that its retry finds a new session; the
		// session goes on for the calls still awaiting answers.
		s.retire(err)
		if p := s.take(te.ID); p != nil {
			p.give(reply{err: err})
		}
		return
	}
	if !s.resolve(te.ID, reply{err: err}) {
		s.c.log.Debug("mcpclient: exchange failure for a request nobody awaits", "id", te.ID, "err", err)
	}
}

func (s *session) hasEnded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// startClosing lets the deliveries that wait in awaitClosing go: the connection is being closed.
func (s *session) startClosing() {
	var closed chan struct{}
	s.mu.Lock()
	s.closing = true
	if s.busy != nil {
		closed = s.busy.closed
	}
	s.mu.Unlock()
	if closed != nil {
		close(closed)
	}
}

// awaitClosing holds a delivery to an ended session until its connection is being closed, so
// that a server goes on sending no faster than it would to a client that stopped reading: the
// connection does not read its next frame until the delivery returns.
func (s *session) awaitClosing() {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return
	}
	b := s.busyState()
	if b.closed == nil {
		b.closed = make(chan struct{})
	}
	closed := b.closed
	s.mu.Unlock()
	<-closed
}

// startDispatcher starts the goroutine that empties the inbox, or leaves it to attach. The inbox
// calls it while the session is open, so an attached session's own count in the client's
// WaitGroup is held.
func (s *session) startDispatcher() {
	s.mu.Lock()
	attached := s.attached
	s.dispatchLater = !attached
	s.mu.Unlock()
	if attached {
		s.c.wg.Add(1)
		go s.dispatch()
	}
}

// awaitingAnswers reports whether a call awaits an answer on the session.
func (s *session) awaitingAnswers() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending.len() > 0
}

// route hands what the server sent to the calls awaiting answers and to the dispatcher, and
// reports whether it held a response for the id awaited, usable or not. An error ends the
// session.
func (s *session) route(frame []byte, awaited string) (answered bool, err error) {
	msgs, err := jsonrpc.Decode(frame)
	if err != nil {
		resolved := false
		for _, raw := range jsonrpc.ResponseIDs(frame) {
			key, err2 := idKey(raw)
			if err2 != nil {
				continue
			}
			answered = answered || key == awaited
			if s.resolve(key, reply{err: &errMalformedAnswer{err}}) {
				resolved = true
			}
		}
		if !resolved {
			s.c.log.Warn("mcpclient: dropped a malformed frame", "err", err, "frame", truncate(frame, 200))
		}
		return answered, nil
	}
	for _, m := range msgs {
		switch m.Kind() {
		case jsonrpc.KindResponse:
			if key := s.routeResponse(m); key != "" && key == awaited {
				answered = true
			}
		case jsonrpc.KindNotification, jsonrpc.KindRequest:
			if m.Method == "notifications/progress" {
				// Inline, so that a call sees every report sent before its answer; the
				// caller's own handler, if any, still gets it in order below.
				s.c.progress.deliver(m.Params)
				if s.c.cfg.notifications["notifications/progress"] == nil && s.c.cfg.notifications["*"] == nil {
					continue
				}
			}
			if m.Kind() == jsonrpc.KindNotification {
				s.countNamed(m.Params)
			}
			if err := s.inbound.put(s.lifetime(), m, &s.c.cfg.inbox, s.awaitingAnswers, s.startDispatcher); err != nil {
				return answered, err
			}
		default:
			// A reply-shaped message for an id we await is its answer, if an unusable one:
			// failing the call now beats leaving it to time out.
			if m.Method == "" && m.ID != nil {
				if key, err := idKey(m.ID); err == nil {
					answered = answered || key == awaited
					if s.resolve(key, reply{err: &errMalformedAnswer{invalidResponse(m)}}) {
						continue
					}
				}
			}
			s.c.log.Warn("mcpclient: dropped a message that is no JSON-RPC request, notification or response", "frame", truncate(frame, 200))
		}
	}
	return answered, nil
}

// invalidResponse says what is wrong with a response-shaped message of KindInvalid.
func invalidResponse(m jsonrpc.Message) error {
	if m.JSONRPC != jsonrpc.Version {
		return fmt.Errorf("jsonrpc version %q, want %q", m.JSONRPC, jsonrpc.Version)
	}
	return errors.New("a response must carry exactly one of result and error")
}

// errMalformedAnswer marks a response whose id matched but which is no valid answer: an error
// object that is not one, both result and error, an envelope that does not decode. The request
// may have run; resending would only fetch the same garbage.
type errMalformedAnswer struct{ err error }

func (e *errMalformedAnswer) Error() string {
	return "malformed response: " + e.err.Error()
}
func (e *errMalformedAnswer) Unwrap() error { return e.err }

// Is makes a malformed answer match ErrMalformedResponse.
func (e *errMalformedAnswer) Is(target error) bool { return target == ErrMalformedResponse }

// routeResponse hands a response to the call awaiting it, and returns its id's key ("" for an
// unusable id).
func (s *session) routeResponse(m jsonrpc.Message) (key string) {
	raw, plain := plainIDKey(m.ID)
	if !plain {
		var err error
		if key, err = idKey(m.ID); err != nil {
			s.c.log.Warn("mcpclient: dropped a response with an unusable id", "id", truncate(m.ID, 80), "err", err)
			return ""
		}
	}
	var r reply
	if m.Error != nil {
		rpcErr := new(RPCError)
		if err := json.Unmarshal(m.Error, rpcErr); err != nil {
			r.err = &errMalformedAnswer{err}
		} else {
			r.err = rpcErr
		}
	} else {
		r.result = m.Result
	}
	var p *pendingCall
	if plain {
		p = takeAwaiting(s, raw) // the call's own key, rather than a copy of the id's
	} else {
		p = s.take(key)
	}
	if p != nil {
		p.give(r)
		return p.key
	}
	if plain {
		key = string(raw)
	}
	s.mu.Lock()
	late := s.busy != nil && s.busy.abandoned.has(key)
	s.mu.Unlock()
	if late {
		// A server may answer before it learns of the cancellation, or not heed it.
		s.c.log.Debug("mcpclient: dropped a late response to a request the client stopped waiting for", "id", key)
	} else {
		s.c.log.Warn("mcpclient: dropped a response for an id with no request awaiting it (unknown, or answered twice)", "id", key)
	}
	return key
}

// maxAbandoned bounds the keys a session remembers as abandoned.
const maxAbandoned = 256

// recentKeys is a set of the last maxAbandoned keys added; the oldest is forgotten first.
type recentKeys struct {
	set  map[string]struct{}
	ring []string // the keys in set, by when they were added; next is the oldest once it is full
	next int
}

func (r *recentKeys) add(key string) {
	if _, ok := r.set[key]; ok {
		return
	}
	if r.set == nil {
		r.set = make(map[string]struct{})
	}
	if len(r.ring) < maxAbandoned {
		r.ring = append(r.ring, key)
	} else {
		delete(r.set, r.ring[r.next])
		r.ring[r.next] = key
		r.next = (r.next + 1) % maxAbandoned
	}
	r.set[key] = struct{}{}
}

func (r *recentKeys) has(key string) bool {
	_, ok := r.set[key]
	return ok
}

// dispatch runs notification handlers and starts server request handlers, one message at a
// time, until the inbox is empty: the inbox starts it when a message arrives (see inbox.put).
func (s *session) dispatch() {
	defer s.c.wg.Done()
	for {
		m, ok := s.inbound.next()
		if !ok {
			return
		}
		if m.Kind() == jsonrpc.KindRequest {
			s.startServerRequest(m)
			continue
		}
		s.notification(m)
		s.handledNamed(m.Params)
	}
}

// A request that holds a stream open (events/stream, subscriptions/listen) learns what happens on
// it from notifications that name it by io.modelcontextprotocol/subscriptionId, and the server
// sends them on the request's own response stream, before the answer or the break that ends it.
// The reader hands them to the dispatcher and the answer to the caller, each at once, so without
// more the caller could return, and stop listening, while its last notifications still wait in
// the inbox: a stream's final events, the cursor to resume from, its termination, lost. So the
// reader counts the notifications naming a call in flight (countNamed), the dispatcher counts them
// off once handled (handledNamed), and the call returns its answer only when its count is zero
// (awaitNamed), as a call sees every progress report sent before its answer.

// namedCall returns the key of the request a notification's params name by
// io.modelcontextprotocol/subscriptionId, or "".
func namedCall(params json.RawMessage) string {
	if !bytes.Contains(params, []byte(metakeys.SubscriptionID)) {
		return ""
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil || p.Meta[metakeys.SubscriptionID] == nil {
		return ""
	}
	key, err := idKey(p.Meta[metakeys.SubscriptionID])
	if err != nil {
		return ""
	}
	return key
}

// countNamed counts a notification the reader queues for the dispatcher, if it names a call
// awaiting its answer.
func (s *session) countNamed(params json.RawMessage) {
	key := namedCall(params)
	if key == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending.get(key) != nil {
		b := s.busyState()
		if b.named == nil {
			b.named = make(map[string]int)
		}
		b.named[key]++
	}
}

// handledNamed counts off a notification the dispatcher has handled, if countNamed counted it.
// A notification named a call that was no longer awaiting when it came only after the counted
// ones, which the dispatcher handled first.
func (s *session) handledNamed(params json.RawMessage) {
	s.mu.Lock()
	counting := s.busy != nil && len(s.busy.named) > 0
	s.mu.Unlock()
	if !counting {
		return
	}
	key := namedCall(params)
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.busy
	n, ok := b.named[key]
	switch {
	case !ok:
	case n > 1:
		b.named[key] = n - 1
	default:
		delete(b.named, key)
		if b.namedHandled != nil {
			close(b.namedHandled)
			b.namedHandled = nil
		}
	}
}

// awaitNamed waits until the dispatcher has handled the notifications that named the call key
// before its answer came, the caller's ctx ends, or the session does (whose inbox may have
// dropped them).
func (s *session) awaitNamed(ctx context.Context, key string) {
	var ended <-chan struct{} // the session's context is made only for a call that waits
	for {
		s.mu.Lock()
		b := s.busy
		if b == nil || b.named[key] == 0 {
			s.mu.Unlock()
			return
		}
		if b.namedHandled == nil {
			b.namedHandled = make(chan struct{})
		}
		handled := b.namedHandled
		s.mu.Unlock()
		if ended == nil {
			ended = s.lifetime().Done()
		}
		select {
		case <-handled:
		case <-ctx.Done():
			return
		case <-ended:
			return
		}
	}
}

// notification runs the client's own handling of a notification, then the caller's handler.
func (s *session) notification(m jsonrpc.Message) {
	c := s.c
	ctx := s.lifetime()
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("mcpclient: notification handler panicked", "method", m.Method, "panic", p)
		}
	}()
	switch m.Method {
	case "notifications/tools/list_changed":
		c.tools.clear()
	case "notifications/cancelled":
		s.cancelServerRequest(m.Params)
	case "notifications/subscriptions/acknowledged":
		c.acks.deliver(m.Params)
	case "notifications/message":
		if c.cfg.logHandler != nil {
			var msg LogMessage
			if json.Unmarshal(m.Params, &msg) == nil {
				c.cfg.logHandler(ctx, &msg)
			}
		}
	case "notifications/resources/updated":
		if c.cfg.resourceUpdated != nil {
			var p uriParams
			if json.Unmarshal(m.Params, &p) == nil {
				c.cfg.resourceUpdated(ctx, p.URI)
			}
		}
	}
	h := c.cfg.notifications[m.Method]
	if h == nil {
		h = c.cfg.notifications["*"]
	}
	if h == nil {
		c.log.Debug("mcpclient: notification without handler", "method", m.Method)
		return
	}
	h(ctx, m.Method, m.Params)
}
