package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/transport"
)

// A conn is the server side of one in-memory connection. Its session lives as long as the
// server knows it: a restart or an expiry fault ends it while the connection stays open.
type conn struct {
	srv *Server
	mc  *transport.MemoryConn
	// stream: the connection stands for a byte stream (see ServeStream), which cannot report a
	// refused exchange: a refusal is answered with a JSON-RPC error instead.
	stream bool

	mu      sync.Mutex
	session string        // set by initialize; guarded by mu
	running int           // requests started and not yet answered; guarded by mu
	idle    chan struct{} // closed when running drops to 0, for awaitIdle; guarded by mu
}

// errDropped is the cause of an exchange a Drop fault or a restart broke.
var errDropped = errors.New("mcptest: connection reset (injected fault)")

func (c *conn) serve() {
	s := c.srv
	defer s.wg.Done()
	defer c.finish()
	for {
		frame, err := c.mc.Receive(s.ctx)
		if err != nil {
			return
		}
		c.onFrame(frame)
	}
}

// finish ends the connection: it closes it, forgets it, and loses its session.
func (c *conn) finish() {
	s := c.srv
	c.mc.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.loseSession()
}

// loseSession fails the pending server requests of the connection's session: they will get no
// answer.
func (c *conn) loseSession() {
	if st := c.srv.sessionState(nil, c.sessionID()); st != nil {
		st.lose()
	}
}

func (c *conn) sessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

func (c *conn) onFrame(frame []byte) {
	s := c.srv
	s.countFrame()
	msgs, err := jsonrpc.Decode(frame)
	if err != nil {
		c.reply(jsonrpc.Message{}, errorAnswer(mcpclient.RPCParseError, err.Error(), nil))
		return
	}
	for _, m := range msgs {
		switch m.Kind() {
		case jsonrpc.KindRequest:
			var id mcpclient.ID
			if err := json.Unmarshal(m.ID, &id); err != nil {
				c.reply(jsonrpc.Message{}, errorAnswer(mcpclient.RPCInvalidRequest, err.Error(), nil))
				continue
			}
			c.start(m, id.JSON(), frame)
		case jsonrpc.KindNotification:
			s.onNotification(c.sessionID(), m)
		case jsonrpc.KindResponse:
			s.onResponse(c.sessionID(), m)
		default:
			c.reply(m, errorAnswer(mcpclient.RPCInvalidRequest, "not a JSON-RPC 2.0 request", nil))
		}
	}
}

// start runs a request on its own goroutine, so that a slow tool holds up nothing else.
//
// A request on a connection without a session, other than initialize, is of a stateless
// revision when the server speaks one: its _meta says what a session would have.
func (c *conn) start(m jsonrpc.Message, key string, frame []byte) {
	s := c.srv
	session := c.sessionID()
	var stateless *sessionState
	var rm requestMeta
	if session == "" && m.Method != "initialize" && len(s.statelessVersions()) > 0 {
		var refusal *statelessRefusal
		if rm, refusal = s.admitStatelessFrame(m); refusal != nil {
			c.reply(m, errorAnswer(refusal.code, refusal.message, refusal.data))
			return
		}
		stateless = statelessSession(rm)
	}
	t, ok := s.track(session, key, requestOrigin{frame: frame})
	if !ok {
		return
	}
	c.mu.Lock()
	c.running++
	c.mu.Unlock()
	go func() {
		defer c.answered()
		defer s.untrack(session, key, t)
		if stateless != nil && m.Method == "subscriptions/listen" {
			c.listen(t, m, rm)
			return
		}
		v := s.process(t.ctx, t.ep, session, m, key, outletFunc(c.send), stateless)
		switch {
		case v.refuse != nil && c.stream:
			c.reply(m, refusalAnswer(v.refuse))
		case v.refuse != nil:
			c.failExchange(key, transport.NotDelivered, v.refuse, v.retryAfter)
		case v.drop:
			c.failExchange(key, transport.Uncertain, errDropped, 0)
		case s.unanswered(t, key):
		default:
			if v.session != "" {
				c.mu.Lock()
				c.session = v.session
				c.mu.Unlock()
				if st := s.sessionState(t.ep, v.session); st != nil {
					st.attach(outletFunc(c.send))
				}
			}
			c.reply(m, v.answer)
		}
	}()
}

// listen runs a subscription on the connection until the client cancels it
// (notifications/cancelled), the connection ends or the server restarts or closes.
func (c *conn) listen(t *tracked, m jsonrpc.Message, rm requestMeta) {
	filter, taskIDs, bad := c.srv.listenRequest(m, rm)
	if bad != nil {
		c.reply(m, *bad)
		return
	}
	err := c.srv.serveListen(t.ctx, m.ID, filter, taskIDs, func(frame []byte) error { return c.send(t.ctx, frame) })
	if errors.Is(err, errServerClosed) {
		c.reply(m, errorAnswer(mcpclient.RPCInternalError, "server closed", nil))
	}
}

// answered counts a request of the connection done.
func (c *conn) answered() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running--; c.running == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
}

// awaitIdle waits until no request of the connection is running, or ctx ends (its cause is
// returned).
func (c *conn) awaitIdle(ctx context.Context) error {
	c.mu.Lock()
	if c.running == 0 {
		c.mu.Unlock()
		return nil
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	idle := c.idle
	c.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// refusalAnswer is the JSON-RPC error with which a byte stream, which has no other way to turn
// a request away, answers one refused before it ran.
func refusalAnswer(err error) answer {
	if errors.Is(err, transport.ErrSessionNotFound) {
		return errorAnswer(mcpclient.RPCInvalidRequest, "no session: "+err.Error(), nil)
	}
	return errorAnswer(mcpclient.RPCInternalError, err.Error(), nil)
}

// send is the connection's outlet: what the server sends its client unasked.
func (c *conn) send(ctx context.Context, frame []byte) error {
	return c.mc.Send(ctx, &transport.Message{Frame: frame})
}

func (c *conn) reply(m jsonrpc.Message, a answer) {
	var frame []byte
	if a.isError {
		frame = jsonrpc.AppendError(nil, m.ID, a.body)
	} else {
		frame = jsonrpc.AppendResult(nil, m.ID, a.body)
	}
	if err := c.mc.Send(c.srv.ctx, &transport.Message{Frame: frame}); err != nil {
		c.srv.log.Debug("mcptest: reply not sent", "err", err)
	}
}

func (c *conn) failExchange(key string, outcome transport.Outcome, cause error, retryAfter time.Duration) {
	err := c.mc.FailExchange(c.srv.ctx, &transport.Error{Outcome: outcome, ID: key, RetryAfter: retryAfter, Err: cause})
	if err != nil {
		c.srv.log.Debug("mcptest: exchange failure not reported", "err", err)
	}
}
