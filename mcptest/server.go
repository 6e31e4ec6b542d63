// Package mcptest is an in-memory MCP server for tests and demos: tools are Go funcs, request
// receipts follow the "Northstar" receipt design, and faults can be injected at will.
//
// Besides tools it serves resources and resource templates (with subscriptions, see
// ResourceUpdated), prompts, completion and logging (see Log), skills under the Skills extension
// (WithSkill), and what a test registers for an extension's methods (WithMethod, WithExtension);
// a running tool reports progress and asks its client (sampling, elicitation, roots, ...) through
// its ToolCall, a prompt through its PromptCall: with server requests in the session revisions,
// with multi round-trip requests (input_required) in the stateless ones. SessionInfos and
// NotificationsReceived show what clients declared and sent.
//
// A Server works outside tests too (the quickstart uses one), in memory (Transport), over
// Streamable HTTP (NewHTTPServer), or over a byte stream such as a process's stdin and stdout
// (ServeStream). In tests, NewTestServer and NewClient wire cleanup and logging to testing.TB.
package mcptest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/receipts"
	"github.com/northstar-mcp/mcpclient/transport"
)

// Mode is how a Server treats a request id it has seen before.
type Mode int

const (
	// ModeReceipts (the default) keeps a receipt per request id of a request that opted in, by
	// the same rules and code as the receipts middleware (package receipts) a real server puts
	// in front of its handler: every method but initialize, server/discover, ping and
	// subscriptions/listen; keyed by the principal (over HTTP, the bearer token's issuer and
	// subject) and the id; fingerprinted by the SHA-256 of the bytes that carried the request,
	// exactly as received. The same id with the same bytes gets the reply, marked as a replay
	// (over HTTP also by the Mcp-Receipt-Replay header), and runs once; while the first is
	// still running, the resend waits for its reply (up to receipts.DefaultWait, then 409
	// MCP_REQUEST_IN_FLIGHT); the same id with other bytes, however little they differ, is
	// refused with 409 MCP_REQUEST_ID_REUSED; a full store refuses new ids with 503 and evicts
	// nothing. Receipts are the process's: they outlive the session that made them (its
	// expiry, its DELETE), not a Restart. The server declares the receipts extension
	// (receipts.ExtensionID) with scope process and an epoch, new at every Restart
	// (see ReceiptEpoch). A request opts in in its own _meta in a stateless revision, and
	// otherwise by its session's initialize or its Mcp-Request-Receipts header. A request that
	// did not opt in runs as in ModeNone.
	ModeReceipts Mode = iota
	// ModeInFlightRefusal keeps no receipts but refuses, with JSON-RPC -32600, a request whose id
	// is still in flight, as the Ruby SDK does; a finished id is free again.
	ModeInFlightRefusal
	// ModeNone remembers nothing: a repeated id simply runs again.
	ModeNone
)

// DefaultMaxReceipts is the receipt store's capacity unless WithMaxReceipts says otherwise.
const DefaultMaxReceipts = 1024

// A ToolFunc runs one tools/call. An error becomes a result with isError set, except one made
// by ProtocolError, which fails the call with a JSON-RPC error; the receipt store retains either
// like any other reply. ctx ends when the server closes or restarts, or the client
// cancels the request (notifications/cancelled): the server then sends no response to the
// request, whatever the func returns, though a receipt keeps the reply for a resend of its id.
// In the stateless revisions it also ends when a request for input ends the run (see
// ToolCall.RequestAll).
type ToolFunc func(ctx context.Context, call *ToolCall) (*mcpclient.CallToolResult, error)

// ToolCall is what a ToolFunc is called with. Besides the request, it is the tool's way back to
// the client that called it while it runs: Progress reports progress, Request asks the client
// (sampling, elicitation, roots, ...).
type ToolCall struct {
	ID        mcpclient.ID
	Name      string
	Arguments []byte // raw JSON, nil when absent
	// ProgressToken is the request's _meta.progressToken, raw JSON; nil when the client asked
	// for no progress reports.
	ProgressToken []byte

	srv       *Server
	session   *sessionState // nil for a call outside a live session
	input     *inputRun     // the run's input, in the stateless revisions; see RequestAll
	promotion *promotion    // how the call may become a task midway; see StartTask

	mu   sync.Mutex // guards out and task, which change when the call becomes a task
	out  outlet     // the way to the calling client: see Progress
	task *task      // the task the call runs as; nil for a plain tools/call
}

// Server is an in-memory MCP server. Create it with NewServer; it is ready at once, and each
// Transport it hands out connects to it. A Server is safe for concurrent use.
type Server struct {
	mode        Mode
	maxReceipts int
	pageSize    int
	versions    []string
	info        mcpclient.Implementation
	log         *slog.Logger
	// HTTP only: answer requests with SSE streams whose priming event carries this retry: hint
	// (nil: answer with JSON), and the status of an in-flight refusal.
	sse            *time.Duration
	inFlightStatus int
	auth           *protection // WithAuthorization: the tokens requests need
	// noEpoch: the receipt declaration names no epoch (WithoutReceiptEpoch).
	noEpoch bool
	// stateKey signs the requestState of multi round-trip requests. It is the Server's, kept
	// across Restart as servers behind one address share theirs: a state from any of them
	// verifies, a state from another server does not.
	stateKey [32]byte

	// ctx ends at Close; handler contexts derive from the epoch context below.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // connection loops and request handlers

	mu          sync.Mutex
	closed      bool
	tools       map[string]*toolEntry
	toolOrder   []string
	conns       map[*conn]struct{}
	legacy      map[string]*legacySession // HTTP+SSE streams by id
	epoch       *epoch                    // replaced by Restart
	faults      []*activeFault            // in injection order
	running     map[string]int            // request id -> handlers running, for Close's report
	cancels     map[string]*tracked       // session and request id -> running request
	executions  map[string]int            // tool -> executions
	executedBy  map[execKey]int           // tool and id -> executions
	received    map[string][][]byte       // request id -> frames received
	framesTotal int

	resources     map[string]*resourceEntry // by URI
	resourceOrder []string
	templates     []*templateEntry // in registration order
	prompts       map[string]*promptEntry
	promptOrder   []string
	completion    CompletionFunc
	notes         map[string]int // notification method -> received
	noteSignal    chan struct{}  // closed and replaced when a notification arrives
	sessionSeq    int            // sessions opened
	requestSeq    int            // server requests sent

	taskPoll time.Duration // pollInterval of tasks; see WithTaskPollInterval
	maxTasks int           // bound of each epoch's task store; see WithMaxTasks
	taskTTL  time.Duration // ttl of the tasks extension's tasks; see WithTaskTTL
	// deferredTasks are the tools whose calls become tasks of the extension when the tool says
	// so; see WithDeferredTask.
	deferredTasks map[string]bool

	// allowedHosts are the host names besides loopback ones an HTTPServer on a loopback address
	// serves; see WithAllowedHosts.
	allowedHosts map[string]bool
	cacheTTL     time.Duration // see WithCacheHints
	cacheScope   string
	// listeners are the open subscriptions/listen streams of the stateless revisions.
	listeners map[*listener]struct{}

	methods    map[string]MethodFunc      // see WithMethod
	extensions map[string]json.RawMessage // declared in initialize; see WithExtension

	skills     []*skillEntry         // see WithSkill, in registration order
	skillFiles map[string]*skillFile // by URI
}

// An epoch is the life of the server between restarts: its sessions, receipts and in-flight
// ids. Restart drops the whole epoch at once.
type epoch struct {
	ctx      context.Context
	cancel   context.CancelFunc
	sessions map[string]*sessionState
	// receipts keeps the receipts in receiptStore, whose epoch is random, so that a client
	// never finds the same one after a restart, in this server or another.
	receipts     *receipts.Keeper
	receiptStore *receipts.MemoryStore
	inFlight     map[string]bool
	// tasks are the tasks of the epoch, by id, and their ids in creation order, for
	// tasks/list; made on first use, guarded by Server.mu (see tasks.go).
	tasks     map[string]*task
	taskOrder []string
}

type execKey struct{ tool, id string }

type toolEntry struct {
	tool mcpclient.Tool
	fn   ToolFunc
}

// An Option configures a Server.
type Option interface{ apply(*Server) }

type optionFunc func(*Server)

func (f optionFunc) apply(s *Server) { f(s) }

// WithMode sets how repeated ids are treated. Default ModeReceipts.
func WithMode(m Mode) Option { return optionFunc(func(s *Server) { s.mode = m }) }

// WithMaxReceipts bounds the receipt store. Default DefaultMaxReceipts.
func WithMaxReceipts(n int) Option {
	return optionFunc(func(s *Server) {
		if n > 0 {
			s.maxReceipts = n
		}
	})
}

// WithoutReceiptEpoch makes a server in ModeReceipts declare its receipts without an epoch, as
// a server that does not name its process does: a client that loses its session cannot tell
// whether the receipts survived, and must assume they did not.
func WithoutReceiptEpoch() Option { return optionFunc(func(s *Server) { s.noEpoch = true }) }

// WithTool registers a tool, described by tool and opts (its annotation hints, say:
// ReadOnlyHint, IdempotentHint, DestructiveHint, OpenWorldHint). A later registration under
// the same name replaces the earlier.
func WithTool(tool mcpclient.Tool, fn ToolFunc, opts ...ToolOption) Option {
	tool = describeTool(tool, opts)
	return optionFunc(func(s *Server) { s.addToolLocked(tool, fn) })
}

// WithPageSize makes tools/list, resources/list, resources/templates/list and prompts/list
// answer n items a page. Default: all items in one page.
func WithPageSize(n int) Option { return optionFunc(func(s *Server) { s.pageSize = n }) }

// WithProtocolVersions sets the revisions the server speaks, preferred first; it answers
// initialize with the client's revision if listed, else with the first revision with sessions it
// speaks. Listing mcpclient.ProtocolVersion20260728 makes it speak that stateless revision too,
// to requests without a session (server/discover first, as this module's client asks): each
// client then gets the revision its negotiation chooses. Default: the four revisions with
// sessions, 2024-11-05 through 2025-11-25, which most servers still speak.
func WithProtocolVersions(versions ...string) Option {
	return optionFunc(func(s *Server) { s.versions = slices.Clone(versions) })
}

// WithServerInfo sets the serverInfo of the initialize result.
func WithServerInfo(info mcpclient.Implementation) Option {
	return optionFunc(func(s *Server) { s.info = info })
}

// WithLogger sets where the server logs. Default: discard.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(s *Server) {
		if l != nil {
			s.log = l
		}
	})
}

// WithSSEResponses makes an HTTPServer answer requests with SSE streams: a priming event with
// an event id and, if retry > 0, a retry: hint, sent as soon as the request is admitted; then
// what a tool sends while it runs (ToolCall.Progress; ToolCall.Request in the session
// revisions); then the answer.
// Default: JSON bodies, with what a tool sends going to the session's GET stream.
func WithSSEResponses(retry time.Duration) Option {
	return optionFunc(func(s *Server) { s.sse = &retry })
}

// WithInFlightStatus sets the HTTP status with which an HTTPServer in ModeInFlightRefusal
// refuses an id still in flight: 409 as the Ruby SDK (the default), or 400 as the Go SDK. The
// body is a JSON-RPC -32600 error either way.
func WithInFlightStatus(code int) Option {
	return optionFunc(func(s *Server) { s.inFlightStatus = code })
}

// WithAllowedHosts names hosts an HTTPServer listening on a loopback address serves besides
// localhost and the loopback IPs, for a test that reaches it under other names (a proxy in
// front, a dialer that maps names to it): the server otherwise refuses with 403 a request whose
// Host or Origin names another host, as a local server must against DNS rebinding. "*" allows
// every host.
func WithAllowedHosts(hosts ...string) Option {
	return optionFunc(func(s *Server) {
		if s.allowedHosts == nil {
			s.allowedHosts = make(map[string]bool)
		}
		for _, h := range hosts {
			s.allowedHosts[strings.ToLower(h)] = true
		}
	})
}

// WithFault injects f before the first connection; see Inject.
func WithFault(f Fault) Option { return optionFunc(func(s *Server) { s.injectLocked(f) }) }

// NewServer returns a running server.
func NewServer(opts ...Option) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		maxReceipts: DefaultMaxReceipts,
		versions: []string{
			mcpclient.ProtocolVersion20251125, mcpclient.ProtocolVersion20250618,
			mcpclient.ProtocolVersion20250326, mcpclient.ProtocolVersion20241105,
		},
		info:           mcpclient.Implementation{Name: "mcptest", Version: mcpclient.Version},
		inFlightStatus: http.StatusConflict,
		cacheScope:     "private",
		listeners:      make(map[*listener]struct{}),
		log:            slog.New(slog.DiscardHandler),
		ctx:            ctx,
		cancel:         cancel,
		tools:          make(map[string]*toolEntry),
		conns:          make(map[*conn]struct{}),
		running:        make(map[string]int),
		cancels:        make(map[string]*tracked),
		executions:     make(map[string]int),
		executedBy:     make(map[execKey]int),
		received:       make(map[string][][]byte),
		resources:      make(map[string]*resourceEntry),
		prompts:        make(map[string]*promptEntry),
		notes:          make(map[string]int),
		noteSignal:     make(chan struct{}),
	}
	rand.Read(s.stateKey[:]) // never fails
	for _, o := range opts {
		if o != nil {
			o.apply(s)
		}
	}
	s.epoch = s.newEpoch() // the first receipt store takes its capacity from the options
	return s
}

func (s *Server) newEpoch() *epoch {
	ctx, cancel := context.WithCancel(s.ctx)
	keeper, store := s.newReceiptKeeper()
	return &epoch{
		ctx:          ctx,
		cancel:       cancel,
		sessions:     make(map[string]*sessionState),
		receipts:     keeper,
		receiptStore: store,
		inFlight:     make(map[string]bool),
	}
}

// AddTool registers a tool on a running server, described by tool and opts as by WithTool.
// Listeners of the stateless revisions that asked for tool list changes hear of it; sessions
// hear of it when the test sends notifications/tools/list_changed (Notify).
func (s *Server) AddTool(tool mcpclient.Tool, fn ToolFunc, opts ...ToolOption) {
	tool = describeTool(tool, opts)
	s.mu.Lock()
	s.addToolLocked(tool, fn)
	s.mu.Unlock()
	s.notifyListeners("notifications/tools/list_changed", nil, "")
}

func (s *Server) addToolLocked(tool mcpclient.Tool, fn ToolFunc) {
	if _, ok := s.tools[tool.Name]; !ok {
		s.toolOrder = append(s.toolOrder, tool.Name)
	}
	if len(tool.InputSchema) == 0 {
		tool.InputSchema = []byte(`{"type":"object"}`)
	}
	s.tools[tool.Name] = &toolEntry{tool: tool, fn: fn}
}

// Transport returns a transport whose connections reach this server.
func (s *Server) Transport() transport.Transport {
	return &transport.Memory{Accept: s.Accept}
}

// errServerClosed refuses connections to a closed server.
var errServerClosed = errors.New("mcptest: server closed")

// Accept serves the server end of a new in-memory connection, for callers who build their own
// transport.Memory (to install a SendHook, say).
func (s *Server) Accept(server *transport.MemoryConn) error {
	c := &conn{srv: s, mc: server}
	if !s.addConn(c, true) {
		return errServerClosed
	}
	go c.serve()
	return nil
}

// addConn registers c among the open connections, which Close closes, and reports false once
// the server is closed. served counts c's serving goroutine among those Close waits for.
func (s *Server) addConn(c *conn, served bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	if served {
		s.wg.Add(1)
	}
	return true
}

// Restart simulates a server restart: receipts, sessions and in-flight ids are forgotten, running
// requests are cancelled and their replies never sent. Connections stay open, but their sessions
// are unknown from now on, as an HTTP server answers 404 to a session id from before its restart.
func (s *Server) Restart() {
	s.mu.Lock()
	old := s.epoch
	s.epoch = s.newEpoch()
	s.mu.Unlock()
	old.cancel()
	s.log.Info("mcptest: restarted")
}

// Close stops the server: it refuses new connections, closes open ones, cancels running requests
// and waits for them to finish. Every few seconds of waiting it logs the request ids it still
// waits on. Close is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		for c := range s.conns {
			c.mc.Close()
		}
	}
	s.mu.Unlock()
	s.cancel()

	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	tick := time.NewTicker(closeReportInterval)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-tick.C:
			s.log.Warn("mcptest: Close is waiting for requests", "ids", s.runningIDs())
		}
	}
}

const closeReportInterval = 5 * time.Second

func (s *Server) runningIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.running))
	for id := range s.running {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Executions returns how many times the tool's func ran.
func (s *Server) Executions(tool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.executions[tool]
}

// ExecutionsOf returns how many times the tool's func ran for requests under id.
func (s *Server) ExecutionsOf(tool string, id mcpclient.ID) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.executedBy[execKey{tool, id.JSON()}]
}

// Received returns copies of the frames received that carried a request under id, in arrival
// order. The server keeps them for its lifetime, as a test server may: do not feed it an
// unbounded stream of requests.
func (s *Server) Received(id mcpclient.ID) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	frames := s.received[id.JSON()]
	out := make([][]byte, len(frames))
	for i, f := range frames {
		out[i] = slices.Clone(f)
	}
	return out
}

func (s *Server) countFrame() {
	s.mu.Lock()
	s.framesTotal++
	s.mu.Unlock()
}

// FramesReceived returns the number of frames received from all clients.
func (s *Server) FramesReceived() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.framesTotal
}

// Sessions returns the number of live sessions: opened by initialize, not yet ended by DELETE,
// expiry or restart.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.epoch.sessions)
}

// ReceiptEpoch returns the epoch the server declares with its receipts now: an opaque id of the
// server process, new at every Restart. It is "" when the server declares none: a mode other
// than ModeReceipts, or WithoutReceiptEpoch.
func (s *Server) ReceiptEpoch() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.receiptEpochLocked(s.epoch)
}

// receiptEpochLocked is the epoch ep declares, or "". s.mu is held.
func (s *Server) receiptEpochLocked(ep *epoch) string {
	if s.mode != ModeReceipts {
		return ""
	}
	return s.receiptDeclarationLocked(ep).Epoch
}

// receiptDeclarationLocked is what ep declares of its receipts: the keeper's own declaration,
// as a server behind the receipts middleware makes it. s.mu is held.
func (s *Server) receiptDeclarationLocked(ep *epoch) receipts.Declaration {
	d, _ := ep.receipts.Declaration(context.Background()) // a MemoryStore always describes itself
	if s.noEpoch {
		d.Epoch = ""
	}
	return d
}

// Receipts returns the number of receipts held.
func (s *Server) Receipts() int {
	s.mu.Lock()
	ep := s.epoch
	s.mu.Unlock()
	return ep.receiptStore.Len()
}

func (s *Server) String() string { return fmt.Sprintf("mcptest.Server(%s)", s.info.Name) }

// Notify sends a notification to every live session, as a server announces list changes:
// over its in-memory connection or legacy stream, or to its Streamable HTTP GET stream (dropped
// there when the client does not listen). params may be nil.
func (s *Server) Notify(method string, params any) error {
	return s.notifySessions(method, params, func(*sessionState) bool { return true })
}

// notifySessions sends a notification to the live sessions that want it.
func (s *Server) notifySessions(method string, params any, wants func(*sessionState) bool) error {
	var raw []byte
	if params != nil {
		var err error
		if raw, err = json.Marshal(params); err != nil {
			return err
		}
	}
	frame := jsonrpc.AppendRequest(nil, "", method, raw)
	s.notifyListeners(method, raw, "")
	for _, st := range s.liveSessions() {
		if !wants(st) {
			continue
		}
		if err := st.notify(s.ctx, frame); err != nil {
			s.log.Debug("mcptest: notification not sent", "method", method, "err", err)
		}
	}
	return nil
}
