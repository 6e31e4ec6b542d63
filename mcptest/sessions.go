package mcptest

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/northstar-mcp/mcpclient"
)

// sessionState is what the server holds for one session beyond its existence: the events of
// its SSE streams, for resumption, the outbox of its standalone GET stream, what the client
// declared in initialize, its log level and subscriptions, and the server's own requests
// awaiting the client's answer.
type sessionState struct {
	id  string
	seq int // creation order, for SessionInfos
	// stateless: the state of one request of a stateless revision (see statelessSession), not of
	// a session.
	stateless bool
	// receiptsOptIn: the session (its initialize), or the stateless request, opted into
	// receipts.
	receiptsOptIn bool
	events        *eventStore
	// outbox carries notifications to the session's GET stream, if one is open; full, it drops
	// them, as a server does for a client that does not listen.
	outbox chan []byte
	// lost is closed when the session's connection ends or the session is deleted.
	lost     chan struct{}
	lostOnce sync.Once

	mu       sync.Mutex
	version  string                       // negotiated revision
	client   mcpclient.Implementation     // clientInfo
	caps     mcpclient.ClientCapabilities // the client's capabilities
	logLevel mcpclient.LoggingLevel       // "" until logging/setLevel
	subs     map[string]bool              // subscribed resource URIs
	direct   outlet                       // the connection (in memory, legacy stream); nil: outbox
	pending  map[string]chan answer       // server request id -> where its answer goes
}

// An outlet carries frames from the server to one client: over its in-memory connection, its
// legacy SSE stream, its GET stream, or the SSE stream answering one request.
type outlet interface {
	send(ctx context.Context, frame []byte) error
	// prime is called once a request is admitted (past faults, the session check and the
	// in-flight check), before it runs: an outlet whose transport answers later opens what it
	// can now (an SSE response's stream and priming event, a legacy POST's 202), so that the
	// client knows the request arrived and can cancel it while it runs.
	prime()
}

// outletFunc is an outlet with nothing to prime.
type outletFunc func(ctx context.Context, frame []byte) error

func (f outletFunc) send(ctx context.Context, frame []byte) error { return f(ctx, frame) }
func (outletFunc) prime()                                         {}

func newSessionState(id string, seq int) *sessionState {
	return &sessionState{
		id:      id,
		seq:     seq,
		events:  newEventStore(),
		outbox:  make(chan []byte, 64),
		lost:    make(chan struct{}),
		subs:    make(map[string]bool),
		pending: make(map[string]chan answer),
	}
}

// errSessionLost ends a server request whose session ended first.
var errSessionLost = errors.New("mcptest: the session ended")

// attach makes out the session's way to its client, for a transport with a connection of its
// own (in memory, legacy HTTP+SSE).
func (st *sessionState) attach(out outlet) {
	st.mu.Lock()
	st.direct = out
	st.mu.Unlock()
}

// lose marks the session's connection ended: its pending server requests fail.
func (st *sessionState) lose() { st.lostOnce.Do(func() { close(st.lost) }) }

// notify sends a notification to the session: on its connection, or to its GET stream's outbox
// (dropped when full, as for a client that does not listen).
func (st *sessionState) notify(ctx context.Context, frame []byte) error {
	return st.deliver(ctx, frame, false)
}

// send sends a frame that must not be dropped (a server request): on the session's connection,
// or through its GET stream's outbox, waiting for room.
func (st *sessionState) send(ctx context.Context, frame []byte) error {
	return st.deliver(ctx, frame, true)
}

func (st *sessionState) deliver(ctx context.Context, frame []byte, wait bool) error {
	st.mu.Lock()
	direct := st.direct
	st.mu.Unlock()
	if direct != nil {
		return direct.send(ctx, frame)
	}
	if !wait {
		select {
		case st.outbox <- frame:
		default:
		}
		return nil
	}
	select {
	case st.outbox <- frame:
		return nil
	case <-st.lost:
		return errSessionLost
	case <-ctx.Done():
		return ctx.Err()
	}
}

// await registers a server request under key and returns where its answer will arrive.
func (st *sessionState) await(key string) chan answer {
	ch := make(chan answer, 1)
	st.mu.Lock()
	st.pending[key] = ch
	st.mu.Unlock()
	return ch
}

func (st *sessionState) forget(key string) {
	st.mu.Lock()
	delete(st.pending, key)
	st.mu.Unlock()
}

// resolve hands the client's answer to the server request key; false if none awaits it.
func (st *sessionState) resolve(key string, a answer) bool {
	st.mu.Lock()
	ch, ok := st.pending[key]
	delete(st.pending, key)
	st.mu.Unlock()
	if ok {
		ch <- a
	}
	return ok
}

// admits reports whether the session's log level lets a record of level through.
func (st *sessionState) admits(level mcpclient.LoggingLevel) bool {
	st.mu.Lock()
	min := st.logLevel
	st.mu.Unlock()
	if min == "" {
		// A session hears everything until it sets a level; a request of a stateless revision
		// hears nothing unless its _meta asks for a level.
		return !st.stateless
	}
	return levelRank[level] >= levelRank[min]
}

// capabilities returns what the client declared; none for a nil st, a call outside a session.
func (st *sessionState) capabilities() mcpclient.ClientCapabilities {
	if st == nil {
		return mcpclient.ClientCapabilities{}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.caps
}

func (st *sessionState) subscribed(uri string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.subs[uri]
}

// SessionInfo is what the server knows of one live session.
type SessionInfo struct {
	// ID is the session id (Mcp-Session-Id over Streamable HTTP).
	ID string
	// ProtocolVersion is the revision negotiated in initialize.
	ProtocolVersion string
	// ClientInfo and ClientCapabilities are what the client declared in initialize.
	ClientInfo         mcpclient.Implementation
	ClientCapabilities mcpclient.ClientCapabilities
	// LogLevel is the level set by logging/setLevel, or "" before any: every level is sent.
	LogLevel mcpclient.LoggingLevel
	// Subscriptions are the resource URIs the session subscribed to, sorted.
	Subscriptions []string
}

func (st *sessionState) info() SessionInfo {
	st.mu.Lock()
	defer st.mu.Unlock()
	subs := make([]string, 0, len(st.subs))
	for uri := range st.subs {
		subs = append(subs, uri)
	}
	slices.Sort(subs)
	return SessionInfo{
		ID:                 st.id,
		ProtocolVersion:    st.version,
		ClientInfo:         st.client,
		ClientCapabilities: st.caps,
		LogLevel:           st.logLevel,
		Subscriptions:      subs,
	}
}

// SessionInfos returns what the server knows of each live session, oldest first.
func (s *Server) SessionInfos() []SessionInfo {
	sessions := s.liveSessions()
	out := make([]SessionInfo, len(sessions))
	for i, st := range sessions {
		out[i] = st.info()
	}
	return out
}

// liveSessions returns the sessions of the current epoch, oldest first.
func (s *Server) liveSessions() []*sessionState {
	s.mu.Lock()
	out := make([]*sessionState, 0, len(s.epoch.sessions))
	for _, st := range s.epoch.sessions {
		out = append(out, st)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b *sessionState) int { return a.seq - b.seq })
	return out
}
