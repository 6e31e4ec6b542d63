package transport

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/internal/redact"
	"github.com/northstar-mcp/mcpclient/internal/sse"
	"github.com/northstar-mcp/mcpclient/internal/wait"
)

// HTTP is the Streamable HTTP transport of MCP revisions 2025-03-26 to 2026-07-28: every
// message is its own POST to one endpoint, answered with a JSON body or an SSE stream. In the
// stateless revision (2026-07-28) it has no session, GET stream, resumption or DELETE.
//
// It reports how far each POST got. NotDelivered only when the request provably did not reach
// the MCP handler: a POST that failed before the whole request was written, 429 and 503 that
// carry the server's Retry-After, 404 on a known session (wrapping ErrSessionNotFound). 409 is a
// Conflict. Uncertain: a broken response stream that cannot be resumed, any other 5xx (a gateway
// may answer 502, 503 or 504 after the server ran the request) and 429 without Retry-After, a 202
// to a request when no stream can carry its answer, a timeout after writing. A JSON-RPC error in
// a failure's body is the request's answer only when it carries the request's id; one with a
// null or foreign id leaves the status to decide. A response stream that breaks after an event
// id is resumed by GET with Last-Event-ID, after the server's retry: delay; one that ends
// unanswered passes its retry: delay on as the exchange's RetryAfter.
//
// Every reconnection of a stream (a resumption, the GET stream reopened) waits the server's
// retry: delay (1s if it named none), and never less than 100ms. The wait doubles, up to 30s
// or the server's delay if that is longer, after each reconnection that did not settle the
// stream: a reconnection settles a response stream when its connection brings a new event id or
// stays up a second, and the GET stream only when its connection stays up a second, so that a
// server that sends an event and hangs up, again and again, gets ever fewer requests.
//
// A server that stops answering ends the exchange Uncertain with ErrResponseTimeout: no response
// headers within ResponseHeaderTimeout of writing a request, or a response to a request that
// brings nothing for ResponseIdleTimeout (5 minutes each by default). The GET stream, meant to
// be quiet, has only the first bound.
//
// Every request made for a call carries the call's context, values included (for HeaderFunc and
// the http.Client's RoundTripper); the GET stream, which belongs to no call, carries the
// context of the connection, and the DELETE at Close a background one.
//
// The zero value is not usable: URL must be set. An HTTP may be shared by several clients; its
// fields must not change after the first Connect.
type HTTP struct {
	// URL is the MCP endpoint.
	URL string

	// Client sends the requests. nil means a client with a connection pool sized for concurrent
	// callers. Whatever the client, no request follows a redirect to another origin (one not in
	// AllowedRedirectOrigins): the redirected request is not sent, and the request fails as
	// NotDelivered with a *CrossOriginRedirectError.
	Client *http.Client

	// AllowedRedirectOrigins lists the origins ("https://mcp2.example.com", scheme, host and
	// port only) that the endpoint may redirect requests to, for deployments that move
	// sessions between hosts. A listed origin is trusted as the endpoint's own: requests go
	// there with all their headers, Authorization, cookies and the session id included, and its
	// answers count as the endpoint's.
	AllowedRedirectOrigins []string

	// Header holds extra headers sent with every request.
	Header http.Header

	// HeaderFunc, if set, may add headers to each request (a fresh token, say); an error fails
	// the request as NotDelivered. ctx is the context of the call the request belongs to, with
	// its values (a user's token, a tenant, a trace span).
	HeaderFunc func(ctx context.Context, h http.Header) error

	// MaxMessageSize bounds one JSON response body or one SSE event, in bytes; <= 0 means
	// DefaultMaxMessageSize (64 MiB). A larger one fails its exchange with ErrMessageTooLarge
	// and is never fetched again by resumption.
	MaxMessageSize int

	// MaxResumes bounds the consecutive attempts to resume one broken stream without an event
	// arriving in between. Default 3.
	MaxResumes int

	// ResponseHeaderTimeout bounds the wait for the headers of each response, from the moment
	// its request was written; 0 means DefaultResponseHeaderTimeout, a negative value no bound.
	// A server answering a request with JSON sends the headers only with the answer, so this is
	// also the longest such a request may run: a deployment with longer calls raises it, or has
	// its server answer them with an SSE stream, whose headers come at once. A request left
	// without headers ends Uncertain, with ErrResponseTimeout.
	ResponseHeaderTimeout time.Duration

	// ResponseIdleTimeout bounds the silence of the response to a request once its headers
	// came: a JSON body that brings no byte, or an SSE stream (a resumption included) that
	// brings no message, for that long ends the exchange Uncertain, with ErrResponseTimeout,
	// and the stream is not resumed. Keepalive comments and events of other types are no
	// messages: a server trickling them holds no call. 0 means DefaultResponseIdleTimeout, a
	// negative value no bound. The GET stream, meant to be quiet, has none. A server that asks
	// the client for an elicitation or a sampling while it runs a call sends nothing while it
	// waits for the answer: a deployment where a user may take longer raises the bound.
	ResponseIdleTimeout time.Duration

	// Authorizer, if set, gives every request its credentials and, when the server refuses
	// one with 401 (or 403 and a challenge) before running it, obtains new ones; the request is
	// then sent again, the same bytes under the same id. Without one, such a refusal fails the
	// request as NotDelivered with ErrUnauthorized. See package oauth.
	Authorizer Authorizer

	// Logger receives debug records about streams. Default: discard.
	Logger *slog.Logger

	// afterAnswer bounds how long the rest of a response stream is read after its answer;
	// 0 means afterAnswerTimeout. Tests shorten it.
	afterAnswer time.Duration
}

// DefaultMaxMessageSize is the largest message a transport reads unless told otherwise: one JSON
// body or SSE event over HTTP, one line over a byte stream or a server's stdout. Tool results
// carry files and images (a PDF of 10 MiB is 14 MiB of base64), so the bound is generous; what a
// message costs in memory follows its size, never the bound.
const DefaultMaxMessageSize = 64 << 20

// ErrMessageTooLarge reports a message over the transport's size limit: a response body or SSE
// event, a line of a byte stream.
var ErrMessageTooLarge = sse.ErrEventTooLarge

// The bounds on a silent server of the HTTP and SSE transports, unless told otherwise: generous,
// for a request may run for minutes, but finite, so that a server that never answers holds no
// call, and none of its goroutines, for as long as the caller's context allows, which for
// context.Background() is forever.
const (
	DefaultResponseHeaderTimeout = 5 * time.Minute
	DefaultResponseIdleTimeout   = 5 * time.Minute
)

// ErrResponseTimeout reports a server that stopped answering a request: no response headers
// within the response-header timeout of writing it, or a response that brought nothing for the
// idle timeout. The request may have run: the exchange is Uncertain.
var ErrResponseTimeout = errors.New("transport: the server stopped answering")

// timeoutOr returns d, or def when d is 0; a negative d means no bound, 0.
func timeoutOr(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// StatusError is an HTTP response that carried no answer the client could use.
type StatusError struct {
	StatusCode int
	// Body is the start of the response body, for the error message.
	Body []byte
}

func (e *StatusError) Error() string {
	body := bytes.TrimSpace(e.Body)
	if len(body) == 0 {
		return fmt.Sprintf("HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	}
	return fmt.Sprintf("HTTP %d %s: %s", e.StatusCode, http.StatusText(e.StatusCode), body)
}

// Connect checks the URL and returns a connection, a [SessionConn], whose answers and streams go
// to r. It sends nothing: the client's initialize is the first request, and the session id the
// server returns with it is kept by the connection.
//
// Frames go to r on the goroutine that read them: the caller's own, within Send, for a JSON
// answer and for a response stream until it has brought the answer; a goroutine of the
// connection's for the rest of a response stream and for the GET stream.
func (t *HTTP) Connect(ctx context.Context, r Receiver) (Conn, error) {
	endpoint, ok := endpointURL(t.URL)
	if !ok {
		return nil, &Error{Outcome: NotDelivered, Err: fmt.Errorf("%w: invalid MCP endpoint %q", ErrMisconfigured, redact.URL(t.URL))}
	}
	if err := ctx.Err(); err != nil {
		return nil, &Error{Outcome: NotDelivered, Err: err}
	}
	allowed, err := parseOrigins(t.AllowedRedirectOrigins)
	if err != nil {
		return nil, &Error{Outcome: NotDelivered, Err: err}
	}
	c := &httpConn{
		t:             t,
		url:           endpoint,
		client:        redirectChecked(t.Client, allowed),
		maxSize:       t.MaxMessageSize,
		resumes:       t.MaxResumes,
		headerTimeout: timeoutOr(t.ResponseHeaderTimeout, DefaultResponseHeaderTimeout),
		idleTimeout:   timeoutOr(t.ResponseIdleTimeout, DefaultResponseIdleTimeout),
		afterAnswer:   cmp.Or(t.afterAnswer, afterAnswerTimeout),
		log:           t.Logger,
		recv:          r,
	}
	if c.maxSize <= 0 {
		c.maxSize = DefaultMaxMessageSize
	}
	if c.resumes <= 0 {
		c.resumes = 3
	}
	if c.log == nil {
		c.log = discardLogger
	}
	return c, nil
}

// endpointURL returns the URL the requests to the MCP endpoint raw go to, and whether raw is
// one: an absolute http or https URL.
func endpointURL(raw string) (string, bool) {
	// A process mostly connects to one endpoint, over and over: the last one checked is
	// remembered, rather than parsed and written out again for every connection.
	if e := lastEndpoint.Load(); e != nil && e.raw == raw {
		return e.url, true
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", false
	}
	e := &checkedEndpoint{raw: raw, url: u.String()}
	if e.url == raw {
		e.url = raw // the string the caller holds anyway, rather than a copy
	}
	lastEndpoint.Store(e)
	return e.url, true
}

// lastEndpoint is the endpoint endpointURL checked last.
var lastEndpoint atomic.Pointer[checkedEndpoint]

type checkedEndpoint struct{ raw, url string }

// discardLogger is the Logger of connections given none.
var discardLogger = slog.New(slog.DiscardHandler)

var _ SessionHeaderConn = (*httpConn)(nil)

// httpConn is one session with a Streamable HTTP endpoint.
type httpConn struct {
	t       *HTTP
	url     string
	client  *http.Client
	maxSize int
	resumes int
	// headerTimeout and idleTimeout bound a silent server; 0: no bound.
	headerTimeout, idleTimeout time.Duration
	// afterAnswer bounds the reading of a response stream after its answer.
	afterAnswer time.Duration
	log         *slog.Logger
	recv        Receiver
	streams     sync.WaitGroup // stream readers

	mu      sync.Mutex
	session string // Mcp-Session-Id, once the server gave one; guarded by mu
	// sessionHeader goes with the requests that carry no Message: the GET stream and the
	// DELETE (see SetSessionHeader). guarded by mu.
	sessionHeader http.Header
	version       string // MCP-Protocol-Version, once negotiated; guarded by mu
	stateless     bool   // a stateless revision: no session, no GET stream, no resumption; guarded by mu
	listening     bool   // the GET stream was asked for; guarded by mu
	// serverStreamOpened is closed when the server has answered the first GET; guarded by mu.
	serverStreamOpened chan struct{}
	// serverStreamCtx, made by the first Listen, ends at Close: the GET stream runs under it.
	// guarded by mu.
	serverStreamCtx  context.Context
	stopServerStream context.CancelFunc
	// inflight lists the requests whose responses are being read, for Close to end them.
	// guarded by mu.
	inflight *exchange
	closed   bool // guarded by mu
	// serverStreamUp: the GET stream is open or being resumed; guarded by mu.
	serverStreamUp bool
	// awaitingServerStream holds the requests answered 202, whose answers can only come on the
	// GET stream; they fail when it ends for good. guarded by mu.
	awaitingServerStream map[string]struct{}
	// answeredEarly holds the last requests answered on the GET stream before their 202 was
	// read, so that such a request is not awaited again; made when the GET stream first
	// brings an answer. guarded by mu.
	answeredEarly *recentIDs

	closeOnce sync.Once
}

// SetProtocolVersion makes every later request carry MCP-Protocol-Version. A stateless revision
// (2026-07-28 and later) also ends the session machinery: no session id, no GET stream, no
// resumption, no DELETE, and abandoning a response stream is the cancellation.
func (c *httpConn) SetProtocolVersion(v string) {
	c.mu.Lock()
	c.version = v
	c.stateless = v >= statelessRevision
	if c.stateless {
		c.session = ""
	}
	c.mu.Unlock()
}

// statelessRevision is the first revision without sessions.
const statelessRevision = "2026-07-28"

// SetSessionHeader makes the GET stream and the DELETE at Close carry h.
func (c *httpConn) SetSessionHeader(h http.Header) {
	c.mu.Lock()
	c.sessionHeader = h
	c.mu.Unlock()
}

// ownHeader returns the headers of the connection's requests that carry no Message.
func (c *httpConn) ownHeader() http.Header {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionHeader
}

// CancelsByClosing reports whether closing a request's response stream cancels it.
func (c *httpConn) CancelsByClosing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stateless
}

// SessionID returns the session id the server assigned, or "".
func (c *httpConn) SessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

// Listen opens the standalone GET stream for messages the server sends on its own, once, and
// returns when the server has answered the GET (or listenTimeout passed): a server that sends
// its requests there drops those sent before the stream exists. A server answering 405 offers
// no stream, and that is no error. Concurrent callers all wait for that first answer.
func (c *httpConn) Listen() {
	c.mu.Lock()
	if !c.listening && !c.closed && !c.stateless {
		c.listening = true
		c.serverStreamOpened = make(chan struct{})
		c.serverStreamCtx, c.stopServerStream = context.WithCancel(context.Background())
		c.streams.Add(1) // under mu: shutdown waits for streams only after it set closed
		go c.serverStream(c.serverStreamCtx, c.serverStreamOpened)
	}
	opened, ctx := c.serverStreamOpened, c.serverStreamCtx
	c.mu.Unlock()
	if opened == nil {
		return
	}
	t := time.NewTimer(listenTimeout)
	defer t.Stop()
	select {
	case <-opened:
	case <-t.C:
	case <-ctx.Done():
	}
}

// listenTimeout bounds how long Listen waits for the server to answer the GET.
const listenTimeout = 5 * time.Second

// newRequest makes a request to the endpoint. body, if not nil, is its body: a *bytes.Reader,
// which net/http knows to be in memory (the headers and the body then go out in one write).
// vals, if it has the room, holds the values of the headers set here.
func (c *httpConn) newRequest(ctx context.Context, method string, body *bytes.Reader, msgHeader http.Header, vals []string) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = body
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url, r)
	if err != nil {
		return nil, err
	}
	h := req.Header
	addHeaders(h, c.t.Header)
	// One array holds every value set here, each header a slice of one element capped there,
	// so that an append by a RoundTripper copies instead of overwriting its neighbour. The
	// message's headers come first, so that the session's and the content's win over them.
	if n := 4 + len(msgHeader); cap(vals) < n {
		vals = make([]string, 0, n)
	}
	hv := headerValues{h: h, vals: vals[:0]}
	for k, vs := range msgHeader {
		hv.setAll(http.CanonicalHeaderKey(k), vs)
	}
	switch method {
	case http.MethodPost:
		hv.set("Content-Type", "application/json")
		hv.set("Accept", "application/json, text/event-stream")
	case http.MethodGet:
		hv.set("Accept", "text/event-stream")
	}
	c.mu.Lock()
	if c.session != "" {
		hv.set("Mcp-Session-Id", c.session)
	}
	if c.version != "" {
		hv.set("Mcp-Protocol-Version", c.version)
	}
	c.mu.Unlock()
	if c.t.HeaderFunc != nil {
		if err := c.t.HeaderFunc(ctx, h); err != nil {
			return nil, err
		}
	}
	return req, nil
}

// Send POSTs one message. For a request, the answer goes to the Receiver before Send returns:
// read from a JSON body, or from an SSE stream, whose remainder is read in the background. Only
// a request accepted with 202 has its answer come later, on the GET stream.
func (c *httpConn) Send(ctx context.Context, msg *Message) error {
	c.mu.Lock()
	closed, sessionKnown := c.closed, c.session != ""
	c.mu.Unlock()
	if closed {
		return &Error{Outcome: NotDelivered, ID: msg.ID, Err: ErrClosed}
	}

	// A response stream outlives Send: it lives as long as the connection and the caller's
	// interest in the answer. It keeps the caller's values, for HeaderFunc and RoundTrippers.
	reqCtx, abort := context.WithCancelCause(context.WithoutCancel(ctx))
	x := c.track(ctx, abort)
	if x == nil {
		abort(context.Cause(ctx))
		return &Error{Outcome: NotDelivered, ID: msg.ID, Err: ErrClosed}
	}
	if ctx.Done() != nil { // a context that cannot end needs no watching
		x.unbind = context.AfterFunc(ctx, x.cancel)
	}

	// A refusal for want of credentials came before the server ran anything: once authorized,
	// the same bytes go again under the same id.
	var resp *http.Response
	for rounds := 0; ; rounds++ {
		// A request answered before it was written whole may still be read by net/http:
		// a later round makes its own.
		trace, body, vals := &x.trace, &x.frame, x.vals[:0]
		if rounds == 0 {
			body.Reset(msg.Frame)
		} else {
			trace, body, vals = new(requestTrace), bytes.NewReader(msg.Frame), nil
		}
		traced := trace.start(reqCtx, c.headerTimeout, abort)
		req, err := c.newRequest(traced, http.MethodPost, body, msg.Header, vals)
		if err == nil {
			err = authorize(reqCtx, c.t.Authorizer, req)
		}
		if err != nil {
			c.release(x)
			return &Error{Outcome: NotDelivered, ID: msg.ID, Err: err}
		}
		resp, err = c.client.Do(req)
		trace.done()
		if err != nil {
			err = timedOut(reqCtx, err)
			c.release(x)
			return deliveryFailure(ctx, msg.ID, trace.wrote.Load(), redactQuery(err))
		}
		if !challenged(resp) {
			break
		}
		if err := reauthorize(reqCtx, c.t.Authorizer, req, resp, rounds); err != nil {
			c.release(x)
			return &Error{Outcome: NotDelivered, ID: msg.ID, Err: err}
		}
	}
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		valid := validSessionID(sid)
		c.mu.Lock()
		// The id comes with the answer to initialize; one handed out before (to a probe) must
		// not stand in its way.
		adopt := !c.stateless && (c.session == "" || msg.Method == "initialize")
		if adopt && valid {
			c.session = sid
		}
		c.mu.Unlock()
		if adopt && !valid {
			// The protocol allows visible ASCII only, and the id would be echoed in the
			// headers of every later request (net/http passes spaces and bytes over 0x7E).
			// A session opened with one is refused, definitely: asking again gets the same
			// id. The id itself stays out of errors and logs.
			if msg.Method == "initialize" {
				c.release(x)
				resp.Body.Close()
				return &Error{Outcome: Answered, ID: msg.ID, Err: fmt.Errorf("%w (%d bytes, not all visible ASCII)", ErrInvalidSessionID, len(sid))}
			}
			c.log.Debug("transport: ignored an Mcp-Session-Id that is not visible ASCII", "method", msg.Method)
		}
	}

	switch code := resp.StatusCode; {
	case code == http.StatusAccepted:
		drain(resp.Body)
		c.release(x)
		if msg.IsRequest() && !c.awaitOnServerStream(msg.ID) {
			// Nothing will ever carry the answer: waiting would only reach the deadline.
			return &Error{Outcome: Uncertain, ID: msg.ID, Err: ErrNoAnswerStream}
		}
		return nil
	case code >= 200 && code < 300:
		if !msg.IsRequest() {
			drain(resp.Body)
			c.release(x)
			return nil
		}
		return c.readAnswer(reqCtx, x, resp, msg)
	default:
		defer c.release(x)
		return postFailure(resp, msg.ID, sessionKnown)
	}
}

// ErrNoAnswerStream reports a request the server accepted with 202, leaving its answer to the GET
// stream, when there is no such stream: a stateless revision has none, and a server may refuse
// it (405) or end it. The request may run; its answer cannot arrive.
var ErrNoAnswerStream = errors.New("transport: 202 Accepted, and no stream can carry the answer")

// awaitOnServerStream opens the GET stream if it is not open and records that id's answer will
// come there. It reports false when no stream can carry it.
func (c *httpConn) awaitOnServerStream(id string) bool {
	c.mu.Lock()
	stateless := c.stateless
	c.mu.Unlock()
	if stateless {
		return false
	}
	c.Listen()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.serverStreamUp {
		return false
	}
	if c.answeredEarly != nil && c.answeredEarly.take(id) {
		return true
	}
	if c.awaitingServerStream == nil {
		c.awaitingServerStream = make(map[string]struct{})
	}
	c.awaitingServerStream[id] = struct{}{}
	return true
}

// answeredOnServerStream notes the responses an event of the GET stream carries.
func (c *httpConn) answeredOnServerStream(data []byte) {
	if !bytes.Contains(data, []byte(`"result"`)) && !bytes.Contains(data, []byte(`"error"`)) {
		return // a notification or a server request: spare it the decoding
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, raw := range jsonrpc.ResponseIDs(data) {
		id := string(bytes.TrimSpace(raw))
		if _, ok := c.awaitingServerStream[id]; ok {
			delete(c.awaitingServerStream, id)
		} else {
			if c.answeredEarly == nil {
				c.answeredEarly = new(recentIDs)
			}
			c.answeredEarly.add(id)
		}
	}
}

// serverStreamEnded fails the requests whose answers only the GET stream could have carried.
func (c *httpConn) serverStreamEnded(cause error) {
	c.mu.Lock()
	c.serverStreamUp = false
	orphans := c.awaitingServerStream
	c.awaitingServerStream = nil
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return // the client closed the connection, and knows
	}
	for id := range orphans {
		c.failExchange(id, Uncertain, 0, fmt.Errorf("%w: the GET stream ended: %w", ErrNoAnswerStream, cause))
	}
}

// recentIDs remembers the last few ids added, for a bounded memory of what has been seen.
type recentIDs struct {
	ids  [16]string
	next int
}

func (r *recentIDs) add(id string) {
	r.ids[r.next] = id
	r.next = (r.next + 1) % len(r.ids)
}

// take reports whether id was added, and forgets it.
func (r *recentIDs) take(id string) bool {
	for i, seen := range r.ids {
		if seen == id {
			r.ids[i] = ""
			return true
		}
	}
	return false
}

// ErrInvalidSessionID reports an Mcp-Session-Id that is not visible ASCII (0x21 to 0x7E), as the
// protocol requires. The answer to initialize that carries one fails with it, as an Answered
// *Error: the client never sends such an id.
var ErrInvalidSessionID = errors.New("transport: Mcp-Session-Id is not visible ASCII")

func validSessionID(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7E {
			return false
		}
	}
	return s != ""
}

// sessionRefusal recognizes how TypeScript SDK servers refuse an unknown session: 400 with a
// -32000 error about the session id, where the protocol says 404. Only a request that carried a
// session id is judged by it.
func sessionRefusal(body []byte) bool {
	var e struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}
	obj := errorObject(body)
	if obj == nil || json.Unmarshal(obj, &e) != nil || e.Code != -32000 {
		return false
	}
	return strings.Contains(strings.ToLower(e.Message), "session")
}

// A requestTrace follows one request through net/http: whether it was written whole (until then,
// a failure cannot have let the server run it, which needs the whole body), and from then on how
// long the server takes to begin its response. The hooks net/http calls live in it, so that
// tracing a request costs one allocation besides the hooks themselves.
type requestTrace struct {
	hooks         httptrace.ClientTrace
	headerTimeout time.Duration
	abort         context.CancelCauseFunc
	wrote         atomic.Bool

	mu    sync.Mutex
	timer *time.Timer // the wait for the response; guarded by mu
	over  bool        // Do returned; guarded by mu
}

// traceRequest returns ctx with a trace of the request sent under it. With headerTimeout > 0,
// abort is called with an error wrapping ErrResponseTimeout when the response has not begun that
// long after the request (or a redirected one) was written.
func traceRequest(ctx context.Context, headerTimeout time.Duration, abort context.CancelCauseFunc) (*requestTrace, context.Context) {
	rt := new(requestTrace)
	return rt, rt.start(ctx, headerTimeout, abort)
}

// start makes rt, a zero requestTrace, the trace of the request sent under the context it
// returns, as traceRequest does.
func (rt *requestTrace) start(ctx context.Context, headerTimeout time.Duration, abort context.CancelCauseFunc) context.Context {
	rt.headerTimeout, rt.abort = headerTimeout, abort
	rt.hooks.WroteRequest = rt.wroteRequest
	if headerTimeout > 0 {
		rt.hooks.GotFirstResponseByte = rt.stopWaiting
	}
	return httptrace.WithClientTrace(ctx, &rt.hooks)
}

func (rt *requestTrace) wroteRequest(info httptrace.WroteRequestInfo) {
	if info.Err != nil {
		return
	}
	rt.wrote.Store(true)
	if rt.headerTimeout <= 0 {
		return
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.over {
		return // a server may answer before the request was written whole
	}
	// A redirected request starts the wait again.
	if rt.timer == nil {
		rt.timer = time.AfterFunc(rt.headerTimeout, rt.expire)
	} else {
		rt.timer.Reset(rt.headerTimeout)
	}
}

func (rt *requestTrace) expire() {
	rt.abort(fmt.Errorf("%w: no response %v after the request was written", ErrResponseTimeout, rt.headerTimeout))
}

func (rt *requestTrace) stopWaiting() {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.timer != nil {
		rt.timer.Stop()
	}
}

// done ends the trace once Do has returned.
func (rt *requestTrace) done() {
	rt.mu.Lock()
	rt.over = true
	rt.mu.Unlock()
	rt.stopWaiting()
}

// timedOut names the server's silence as the cause of err when it was what ended the request
// sent under ctx.
func timedOut(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, ErrResponseTimeout) {
		return fmt.Errorf("%w: %w", cause, err)
	}
	return err
}

// A watchdog closes bite, the body it watches, when it has not been fed for its timeout; a nil or zero watchdog, or one
// started with no timeout, watches nothing. Feeding only notes the time: the timer, armed once,
// looks at that time when it fires and waits again for what remains, so that a body read in
// many small pieces does not reset a timer for each.
type watchdog struct {
	timeout time.Duration
	bite    io.Closer // a body already held as one, rather than a closure of its own
	started time.Time
	fedAt   atomic.Int64 // since started, in nanoseconds
	bitten  atomic.Bool

	mu      sync.Mutex
	timer   *time.Timer // guarded by mu
	stopped bool        // guarded by mu
}

// start arms w: bite is closed once w has gone unfed for timeout. A timeout <= 0 arms nothing.
func (w *watchdog) start(timeout time.Duration, bite io.Closer) {
	if timeout <= 0 {
		return
	}
	w.timeout, w.bite, w.started = timeout, bite, time.Now()
	w.timer = time.AfterFunc(timeout, w.expire)
}

func (w *watchdog) feed() {
	if w != nil && w.timeout > 0 {
		w.fedAt.Store(int64(time.Since(w.started)))
	}
}

func (w *watchdog) expire() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	if quiet := time.Since(w.started) - time.Duration(w.fedAt.Load()); quiet < w.timeout {
		w.timer.Reset(w.timeout - quiet)
		w.mu.Unlock()
		return
	}
	w.bitten.Store(true)
	w.mu.Unlock()
	w.bite.Close()
}

func (w *watchdog) stop() {
	if w == nil || w.timeout <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	w.timer.Stop()
}

// silenced wraps err, which ended what w watched, with ErrResponseTimeout if w bit.
func (w *watchdog) silenced(err error, what string) error {
	if w == nil || !w.bitten.Load() {
		return err
	}
	return fmt.Errorf("%w: %s for %v: %w", ErrResponseTimeout, what, w.timeout, err)
}

// deliveryFailure reads an error of http.Client.Do as a delivery outcome. A refused redirect
// was refused before the redirected request was sent; what was written went to the endpoint,
// which answered with the redirect and so did not take the request.
func deliveryFailure(ctx context.Context, id string, wrote bool, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		err = fmt.Errorf("%w: %w", cause, err)
	}
	if wrote && !errors.Is(err, ErrCrossOriginRedirect) {
		return &Error{Outcome: Uncertain, ID: id, Err: err}
	}
	return &Error{Outcome: NotDelivered, ID: id, Err: err}
}

// postFailure reads a POST's failure status as a delivery outcome: 404 on a known session
// lost it, 409 is a conflict, 401 and 403 refused it at the door, 429 and 503 with the server's Retry-After turned the request away
// before reading it, another 4xx refused it, and a 5xx may follow its execution (a gateway
// answering for a server that ran the request). A JSON-RPC error in the body is the server's
// answer when it carries the request's id; one with another id answers another request, and one
// with a null id only details a refusal the status already made.
func postFailure(resp *http.Response, id string, sessionKnown bool) error {
	code := resp.StatusCode
	body := readStart(resp.Body)
	status := &StatusError{code, body}
	switch {
	case code == http.StatusNotFound && sessionKnown, code == http.StatusBadRequest && sessionKnown && sessionRefusal(body):
		return &Error{Outcome: NotDelivered, ID: id, Err: fmt.Errorf("%w: %w", ErrSessionNotFound, status)}
	case code == http.StatusConflict:
		return &Error{Outcome: Conflict, ID: id, Reply: errorObject(body), Err: status}
	case code == http.StatusUnauthorized, code == http.StatusForbidden:
		// Refused at the door, before the MCP handler: nothing ran.
		return &Error{Outcome: NotDelivered, ID: id, Err: fmt.Errorf("%w: %w", ErrUnauthorized, status)}
	}
	delay, hinted := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	if hinted && (code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable) {
		return &Error{Outcome: NotDelivered, ID: id, RetryAfter: delay, Err: status}
	}
	reply, replyID := errorReply(body)
	if reply != nil && replyID == id {
		return &Error{Outcome: Answered, ID: id, Reply: reply, Err: status}
	}
	if code >= 500 || code == http.StatusTooManyRequests {
		return &Error{Outcome: Uncertain, ID: id, RetryAfter: delay, Err: status}
	}
	if replyID != "null" {
		reply = nil
	}
	return &Error{Outcome: Answered, ID: id, Reply: reply, Err: status}
}

// readAnswer reads a 2xx answer to the request of exchange x, by its media type.
func (c *httpConn) readAnswer(ctx context.Context, x *exchange, resp *http.Response, msg *Message) error {
	id := msg.ID
	mediaType := mediaTypeOf(resp.Header.Get("Content-Type"))
	switch mediaType {
	case "application/json":
		defer c.release(x)
		// Closing the body ends a read in progress.
		x.body = resp.Body
		x.silence.start(c.idleTimeout, x.body)
		body, err := readLimited(x, resp.ContentLength, c.maxSize)
		x.silence.stop()
		if err != nil {
			// The server answered; the answer could not be read.
			return &Error{Outcome: Uncertain, ID: id, Err: x.silence.silenced(err, "no byte of the answer")}
		}
		if len(bytes.TrimSpace(body)) == 0 {
			return &Error{Outcome: Uncertain, ID: id, Err: errors.New("transport: empty answer body")}
		}
		if !c.recv.Deliver(body, id) {
			// A JSON body is the only answer a POST gets: one for another id leaves this
			// request's outcome unknown rather than pending forever.
			c.failExchange(id, Uncertain, 0, errors.New("transport: the answer body is not a response to the request"))
		}
		return nil
	case "text/event-stream":
		if !c.startStream() {
			c.release(x)
			resp.Body.Close()
			return &Error{Outcome: Uncertain, ID: id, Err: ErrClosed}
		}
		// Frames go to the client on this goroutine, the caller's, until the answer has gone: a
		// new goroutine would grow its stack from the minimum through the reading, decoding and
		// routing of every answer, and hand the answer over to the caller besides. What follows
		// the answer, normally just the end of the stream, is left to a goroutine of its own, so
		// that a server keeping the stream open does not hold the caller.
		rest := c.responseStream(ctx, resp.Body, id, msg.Header)
		if rest == nil {
			c.streams.Done()
			c.release(x)
			return nil
		}
		// The caller has its answer and will likely cancel its context as it returns: reading
		// to the end keeps the connection for the next request.
		if x.unbind != nil {
			x.unbind()
		}
		go func() {
			defer c.streams.Done()
			defer c.release(x)
			// Nothing is meant to follow an answer: a stream that stays open after it is not
			// kept for long.
			t := time.AfterFunc(c.afterAnswer, func() { c.release(x) })
			defer t.Stop()
			rest()
		}()
		return nil
	}
	body := readStart(resp.Body)
	c.release(x)
	return &Error{Outcome: Uncertain, ID: id, Err: fmt.Errorf("transport: unexpected Content-Type %q: %w",
		resp.Header.Get("Content-Type"), &StatusError{resp.StatusCode, body})}
}

// mediaTypeOf returns the media type of a Content-Type value as mime.ParseMediaType reads it
// (lower case, without parameters; "" if it reads none). The two types servers answer with are
// recognized without the parser, which allocates for every answer.
func mediaTypeOf(contentType string) string {
	t, _, _ := strings.Cut(contentType, ";")
	switch strings.TrimSpace(t) {
	case "application/json":
		return "application/json"
	case "text/event-stream":
		return "text/event-stream"
	}
	t, _, _ = mime.ParseMediaType(contentType)
	return t
}

// afterAnswerTimeout bounds how long the rest of a response stream is read after its answer.
const afterAnswerTimeout = 10 * time.Second

// An exchange is a POST whose response is being read. Its request runs under a context of its
// own, which a response stream outlives the caller's with, and which abort ends; Close ends it.
// What the exchange needs lives in this one value, so that a request costs few allocations.
type exchange struct {
	caller context.Context
	abort  context.CancelCauseFunc
	unbind func() bool // stops the caller's context from ending the exchange; nil if it cannot end

	body    io.ReadCloser // a JSON answer being read
	silence watchdog      // the silence of that body

	// The first round of the POST is made of these, rather than of allocations of its own.
	trace requestTrace
	frame bytes.Reader // the body
	vals  [6]string    // its header values (see newRequest)

	prev, next *exchange
}

// cancel ends the exchange, naming the caller's cause if the caller's context ended (a call's
// timeout), so that a failure read later says what ended it.
func (x *exchange) cancel() { x.abort(context.Cause(x.caller)) }

// Read reads the JSON answer, feeding the watchdog with every read that brings bytes.
func (x *exchange) Read(p []byte) (int, error) {
	n, err := x.body.Read(p)
	if n > 0 {
		x.silence.feed()
	}
	return n, err
}

// release ends the exchange and takes it off the list; it may be called more than once.
func (c *httpConn) release(x *exchange) {
	if x.unbind != nil {
		x.unbind()
	}
	c.untrack(x)
	x.cancel()
}

// track lists an exchange of the caller's context, whose request abort ends, unless the
// connection is closed: then it returns nil.
func (c *httpConn) track(caller context.Context, abort context.CancelCauseFunc) *exchange {
	x := &exchange{caller: caller, abort: abort}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	x.next = c.inflight
	if x.next != nil {
		x.next.prev = x
	}
	c.inflight = x
	return x
}

// untrack takes x off the list of exchanges; shutdown may have done so already.
func (c *httpConn) untrack(x *exchange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if x.prev != nil {
		x.prev.next = x.next
	} else if c.inflight == x {
		c.inflight = x.next
	}
	if x.next != nil {
		x.next.prev = x.prev
	}
	x.prev, x.next = nil, nil
}

// startStream counts a stream goroutine about to start, unless the connection is closed: shutdown
// sets closed before it waits for the count, so no stream starts after that wait began.
func (c *httpConn) startStream() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.streams.Add(1)
	return true
}

// responseStream reads the SSE stream answering request id, resuming it by GET with
// Last-Event-ID when it breaks before the answer came, with the request's headers. It reports
// the exchange broken when the stream cannot be resumed. It returns as soon as the answer was
// delivered, and rest reads the remainder of the stream (nil when there is none to read).
func (c *httpConn) responseStream(ctx context.Context, body io.ReadCloser, id string, header http.Header) (rest func()) {
	st := &stream{c: c, id: id, header: header, pause: true}
	err := st.read(ctx, body)
	c.mu.Lock()
	resumable := !c.stateless // stateless revisions lose a broken stream's request
	c.mu.Unlock()
	for !st.answered {
		if ctx.Err() != nil {
			return nil // closed, or the caller stopped waiting
		}
		if errors.Is(err, ErrMessageTooLarge) || errors.Is(err, ErrResponseTimeout) || st.lastID == "" || !resumable {
			// Without an event id there is nothing to resume from; an oversized event would
			// only be replayed, and a server that went quiet would be quiet again. The
			// server's retry: delay still says when to ask again.
			c.failExchange(id, Uncertain, st.retry, streamEnded(err))
			return nil
		}
		body, err = st.resume(ctx, true)
		if body == nil {
			c.failExchange(id, Uncertain, st.retry, err)
			return nil
		}
		err = st.read(ctx, body)
	}
	return st.rest
}

// streamEnded names the end of a response stream that came without the answer.
func streamEnded(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return errors.New("transport: the response stream ended before the answer")
	}
	return err
}

// serverStream keeps the standalone GET stream open until ctx ends, at Close.
func (c *httpConn) serverStream(ctx context.Context, opened chan struct{}) {
	defer c.streams.Done()
	st := &stream{c: c}
	err := ErrClosed
	defer func() { c.serverStreamEnded(err) }()
	for first := true; ctx.Err() == nil; first = false {
		var body io.ReadCloser
		body, err = st.resume(ctx, !first)
		if body != nil && first {
			c.mu.Lock()
			c.serverStreamUp = true
			c.mu.Unlock()
		}
		if first {
			close(opened)
		}
		if body == nil {
			c.log.Debug("transport: no server stream", "err", err)
			return
		}
		err = streamEnded(st.read(ctx, body))
	}
	err = ErrClosed
}

// A stream is the client's view of one SSE stream across its connections.
type stream struct {
	c  *httpConn
	id string // the request it answers; "" for the GET stream
	// header is the request's Message.Header, which a resumption carries too; the GET stream
	// carries the connection's session header.
	header   http.Header
	lastID   string
	retry    time.Duration
	answered bool
	failures int // consecutive failed connections without an event
	// unsettled counts the reconnections since the stream last settled; each doubles the wait
	// before the next (see wait).
	unsettled int
	// silence ends a connection of a response stream that brings no message for the idle
	// timeout; nil for the GET stream, and between connections.
	silence *watchdog
	// pause: read returns once the answer was delivered, leaving the rest of the stream to rest.
	pause bool
	rest  func()
}

// read delivers the events of one connection of the stream, until it ends or, when the stream
// pauses, until the answer has been delivered: rest then reads the remainder.
func (st *stream) read(ctx context.Context, body io.ReadCloser) error {
	r := sse.NewReader(body, st.c.maxSize)
	r.Resume(st.lastID, st.retry, st.retry > 0)
	opened, lastID := time.Now(), st.lastID
	if st.id != "" {
		// Closing the body ends a read in progress.
		st.silence = new(watchdog)
		st.silence.start(st.c.idleTimeout, body)
	}
	err := st.events(ctx, r)
	st.silence.stop()
	if err != errAnswered {
		err = st.silence.silenced(err, "no message on the response stream")
	}
	st.silence = nil
	// A connection that stayed up cannot make a storm, however often it ends. A response
	// stream lives until its answer, and a server polling a long request hands out a new event
	// id per connection: that is progress. The GET stream lives as long as the connection, so
	// only staying up settles it: a server that sends an event and hangs up, again and again,
	// gets ever longer waits.
	if time.Since(opened) >= steadyConnection || (st.id != "" && st.lastID != lastID) {
		st.unsettled = 0
	}
	if err == errAnswered {
		st.rest = func() {
			st.pause = false
			st.events(ctx, r)
			body.Close()
		}
		return nil
	}
	body.Close()
	return err
}

// errAnswered stops a pausing stream's reading once the answer has been delivered.
var errAnswered = errors.New("transport: answered")

func (st *stream) events(ctx context.Context, r *sse.Reader) error {
	for {
		ev, err := r.Next()
		if id := r.LastEventID(); id != st.lastID {
			// A new event id is progress even without data: a server polling a long call
			// sends only priming events until the answer is ready.
			st.lastID, st.failures = id, 0
		}
		if d, ok := r.Retry(); ok {
			st.retry = d
		}
		if err != nil {
			return err
		}
		st.failures = 0
		if ev.Type != "" && ev.Type != "message" {
			continue
		}
		st.silence.feed()
		if st.id == "" {
			st.c.answeredOnServerStream(ev.Data)
		}
		awaited := st.id
		if st.answered {
			awaited = ""
		}
		answer := st.c.recv.Deliver(ev.Data, awaited)
		if answer {
			st.answered = true
			if st.pause {
				return errAnswered
			}
		}
	}
}

// resume opens the stream (again) with GET, from the last event id if there is one, first
// waiting the server's retry delay when delay is set. Attempts that bring no event count against
// the limit. It returns a nil body when the stream cannot be had.
func (st *stream) resume(ctx context.Context, delay bool) (io.ReadCloser, error) {
	var lastErr error
	for {
		if st.failures >= st.c.resumes {
			return nil, fmt.Errorf("transport: stream not resumed after %d attempts: %w", st.failures, lastErr)
		}
		if delay || st.failures > 0 {
			if !wait.For(ctx, st.wait()) {
				return nil, context.Cause(ctx)
			}
			st.unsettled++
		}
		st.failures++
		resp, err := st.get(ctx)
		if errors.Is(err, ErrCrossOriginRedirect) {
			return nil, err // the server will redirect again
		}
		if err != nil {
			lastErr = redactQuery(err)
			continue
		}
		mediaType := mediaTypeOf(resp.Header.Get("Content-Type"))
		switch {
		case resp.StatusCode == http.StatusOK && mediaType == "text/event-stream":
			return resp.Body, nil
		case resp.StatusCode == http.StatusNotFound:
			body := readStart(resp.Body)
			return nil, fmt.Errorf("%w: %w", ErrSessionNotFound, &StatusError{resp.StatusCode, body})
		case resp.StatusCode == http.StatusMethodNotAllowed, resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests:
			body := readStart(resp.Body)
			return nil, &StatusError{resp.StatusCode, body}
		default:
			lastErr = &StatusError{resp.StatusCode, readStart(resp.Body)}
			if d := retryAfter(resp.Header.Get("Retry-After"), time.Now()); d > 0 {
				st.retry = d
			}
		}
	}
}

// get sends one GET of the stream, from the last event id if there is one. The GET has a context
// of its own, for the response-header timeout, which ends when its body is closed.
func (st *stream) get(ctx context.Context) (*http.Response, error) {
	ctx, abort := context.WithCancelCause(ctx)
	trace, traced := traceRequest(ctx, st.c.headerTimeout, abort)
	resp, err := doAuthorized(ctx, st.c.client, st.c.t.Authorizer, func() (*http.Request, error) {
		header := st.header
		if st.id == "" {
			header = st.c.ownHeader()
		}
		req, err := st.c.newRequest(traced, http.MethodGet, nil, header, nil)
		if err == nil && st.lastID != "" {
			req.Header.Set("Last-Event-ID", st.lastID)
		}
		return req, err
	})
	trace.done()
	if err != nil {
		err = timedOut(ctx, err)
		abort(nil)
		return nil, err
	}
	resp.Body = cancelOnClose{resp.Body, abort}
	return resp, nil
}

// cancelOnClose is a response body that ends its request's context when closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

// defaultRetry is the reconnection delay of a stream whose server named none.
const defaultRetry = time.Second

const (
	// minReconnectDelay is the least a stream waits before it reconnects, whatever its
	// server's retry: says: a server asking for 1 ms and hanging up at once would get hundreds
	// of requests a second.
	minReconnectDelay = 100 * time.Millisecond
	// maxReconnectDelay caps the doubling of the wait of a stream that does not settle; a
	// server's retry: above it is still honoured.
	maxReconnectDelay = 30 * time.Second
	// steadyConnection is how long a connection of a stream must stay up to settle the stream.
	steadyConnection = time.Second
)

// wait returns how long to wait before the next connection: the server's retry: delay (or
// defaultRetry), at least minReconnectDelay, doubled for every reconnection since the stream
// last settled, up to maxReconnectDelay.
func (st *stream) wait() time.Duration {
	d := defaultRetry
	if st.retry > 0 {
		d = st.retry
	}
	d = max(d, minReconnectDelay)
	limit := max(d, maxReconnectDelay)
	for range st.unsettled {
		if d >= limit/2 {
			return limit
		}
		d *= 2
	}
	return d
}

func (c *httpConn) failExchange(id string, outcome Outcome, retryAfter time.Duration, err error) {
	c.log.Debug("transport: exchange broken", "id", id, "err", err)
	c.recv.Fail(&Error{Outcome: outcome, ID: id, RetryAfter: retryAfter, Err: err})
}

// Close ends the streams and, when the server gave a session id, ends the session with DELETE
// (a 405 answer, a server that keeps sessions itself, is fine).
func (c *httpConn) Close() error {
	c.shutdown(true)
	return nil
}

// Detach ends the streams but leaves the server session alone.
func (c *httpConn) Detach() error {
	c.shutdown(false)
	return nil
}

func (c *httpConn) shutdown(endSession bool) {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		session := c.session
		var cancels []func()
		for x := c.inflight; x != nil; {
			next := x.next
			cancels = append(cancels, x.cancel)
			x.prev, x.next = nil, nil
			x = next
		}
		c.inflight = nil
		stopServerStream := c.stopServerStream
		c.mu.Unlock()
		for _, cancel := range cancels {
			cancel()
		}
		if stopServerStream != nil {
			stopServerStream()
		}
		c.streams.Wait()
		if session == "" || !endSession {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
		defer cancel()
		req, err := c.newRequest(ctx, http.MethodDelete, nil, c.ownHeader(), nil)
		if err == nil {
			err = authorize(ctx, c.t.Authorizer, req)
		}
		if err != nil {
			return
		}
		resp, err := c.client.Do(req)
		if err != nil {
			c.log.Debug("transport: DELETE of the session failed", "err", redactQuery(err))
			return
		}
		drain(resp.Body)
	})
}

// deleteTimeout bounds the DELETE that ends a session at Close.
const deleteTimeout = 5 * time.Second

// retryAfter reads a Retry-After header: seconds, or an HTTP date; 0 when there is none.
func retryAfter(v string, now time.Time) time.Duration {
	d, _ := parseRetryAfter(v, now)
	return d
}

// parseRetryAfter reads a Retry-After header, reporting whether it holds one: seconds, or an
// HTTP date (one in the past means no wait).
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0, false
		}
		// Beyond 292 years the product overflows; such a delay means "not soon", and the
		// callers cap it at what they are willing to wait.
		return time.Duration(min(int64(s), math.MaxInt64/int64(time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// errorObject returns the JSON-RPC error object of a body that is an error response, or nil.
func errorObject(body []byte) []byte {
	reply, _ := errorReply(body)
	return reply
}

// errorReply returns the JSON-RPC error object of a body that is an error response and the JSON
// text of the id it names ("null" for none), or nil.
func errorReply(body []byte) (reply []byte, id string) {
	msgs, err := jsonrpc.Decode(body)
	if err != nil || len(msgs) != 1 || msgs[0].Error == nil {
		return nil, ""
	}
	id = string(bytes.TrimSpace(msgs[0].ID))
	if id == "" {
		id = "null"
	}
	return msgs[0].Error, id
}

// headerValues sets headers whose values share one array.
type headerValues struct {
	h    http.Header
	vals []string
}

// set sets the header named by the canonical key k to v alone.
func (hv *headerValues) set(k, v string) {
	hv.vals = append(hv.vals, v)
	n := len(hv.vals)
	hv.h[k] = hv.vals[n-1 : n : n]
}

// setAll sets the header named by the canonical key k to a copy of vs.
func (hv *headerValues) setAll(k string, vs []string) {
	if len(vs) == 0 {
		return
	}
	start := len(hv.vals)
	hv.vals = append(hv.vals, vs...)
	n := len(hv.vals)
	hv.h[k] = hv.vals[start:n:n]
}

func addHeaders(h, extra http.Header) {
	for k, vs := range extra {
		h[k] = append([]string(nil), vs...)
	}
}

// readStart reads the start of a body that carries no answer, for an error message, and closes
// it.
func readStart(body io.ReadCloser) []byte {
	defer body.Close()
	b, _ := io.ReadAll(io.LimitReader(body, 4096))
	return b
}

func drain(body io.ReadCloser) {
	io.Copy(io.Discard, io.LimitReader(body, 64<<10)) // lets the connection be reused
	body.Close()
}

// readLimited reads a body of at most limit bytes. A declared length over the limit is refused
// at once. One within it is believed only as far as the bytes bear it out: the buffer starts at
// no more than bodyBufferStart and grows fourfold, up to the declared length, while the body
// lasts, so that a server announcing the limit and sending little costs little, and a body of
// megabytes is copied once or twice (io.ReadAll, growing its buffer by a quarter, copies it a
// dozen times over).
func readLimited(r io.Reader, declared int64, limit int) ([]byte, error) {
	if declared > int64(limit) {
		return nil, fmt.Errorf("%w: %d bytes declared, the limit is %d", ErrMessageTooLarge, declared, limit)
	}
	if declared > 0 {
		b := make([]byte, 0, min(declared, bodyBufferStart))
		for int64(len(b)) < declared {
			if len(b) == cap(b) {
				b = append(make([]byte, 0, min(4*int64(cap(b)), declared)), b...)
			}
			n, err := r.Read(b[len(b):cap(b)])
			b = b[:len(b)+n]
			if err == io.EOF && int64(len(b)) < declared {
				return nil, io.ErrUnexpectedEOF
			}
			if err != nil && err != io.EOF {
				return nil, err
			}
		}
		return b, nil
	}
	b, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrMessageTooLarge, limit)
	}
	return b, nil
}

// bodyBufferStart bounds the buffer a declared body length buys before its bytes arrive.
const bodyBufferStart = 1 << 20

// sharedHTTPClient is the client of every HTTP transport given none: one connection pool,
// sized so that concurrent callers reuse connections instead of dialing anew.
var sharedHTTPClient = sync.OnceValue(func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	// MCP's headers are a few hundred bytes; net/http would read 10 MiB of them per response.
	t.MaxResponseHeaderBytes = maxResponseHeaderBytes
	return &http.Client{Transport: t}
})

// maxResponseHeaderBytes bounds the response headers the shared client reads.
const maxResponseHeaderBytes = 1 << 20

// ErrCrossOriginRedirect reports a redirect to another origin that the client refused to
// follow; the error is a *CrossOriginRedirectError.
var ErrCrossOriginRedirect = errors.New("transport: redirect to another origin")

// CrossOriginRedirectError is a redirect the client did not follow: it would have taken a
// request of the session (its body, its credentials, its session id) to another origin, and
// let that origin answer for the endpoint. The redirected request was not sent. It matches
// ErrCrossOriginRedirect, and ErrMisconfigured: the server will redirect again, and only the
// URL or AllowedRedirectOrigins can change that.
type CrossOriginRedirectError struct {
	// From is the origin of the request (scheme://host[:port]), To the one the redirect
	// named; neither has a path, a query or user information.
	From, To string
}

func (e *CrossOriginRedirectError) Error() string {
	return fmt.Sprintf("transport: refused a redirect from %s to another origin, %s", e.From, e.To)
}

// Is reports whether target is ErrCrossOriginRedirect or ErrMisconfigured.
func (e *CrossOriginRedirectError) Is(target error) bool {
	return target == ErrCrossOriginRedirect || target == ErrMisconfigured
}

// parseOrigins reads AllowedRedirectOrigins.
func parseOrigins(list []string) ([]*url.URL, error) {
	origins := make([]*url.URL, 0, len(list))
	for _, s := range list {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("%w: allowed redirect origin %q is no origin (scheme://host[:port])", ErrMisconfigured, s)
		}
		origins = append(origins, u)
	}
	return origins, nil
}

// origin returns the origin of u, scheme://host[:port].
func origin(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
}

// redirectChecked returns c, or the shared client, following redirects as sameOriginRedirects
// says. The transports given no client and no allowed origins share one such client.
func redirectChecked(c *http.Client, allowed []*url.URL) *http.Client {
	if c == nil && len(allowed) == 0 {
		return sharedRedirectChecked()
	}
	return sameOriginRedirects(c, allowed)
}

var sharedRedirectChecked = sync.OnceValue(func() *http.Client { return sameOriginRedirects(nil, nil) })

// sameOriginRedirects returns a copy of c (or of the shared client) that follows no redirect
// off the origin of a request unless to an allowed origin. Every request of a session is for
// its endpoint's origin: the body of a tool call carries its arguments, its headers may carry
// credentials (an API key under a name of its own) and the session id, a bearer of the session,
// and the answer must be the endpoint's.
func sameOriginRedirects(c *http.Client, allowed []*url.URL) *http.Client {
	if c == nil {
		c = sharedHTTPClient()
	}
	cp := *c
	next := c.CheckRedirect
	if next == nil && len(allowed) == 0 {
		// What most connections need, without a closure of their own.
		cp.CheckRedirect = sameOriginOnly
		return &cp
	}
	cp.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		return checkRedirect(req, via, allowed, next)
	}
	return &cp
}

// sameOriginOnly is the redirect check of a client that allows no other origin and had no check
// of its own.
func sameOriginOnly(req *http.Request, via []*http.Request) error {
	return checkRedirect(req, via, nil, nil)
}

// checkRedirect refuses a redirect off the origin of the request unless to an allowed one, then
// defers to next, or else stops after 10 redirects as net/http does.
func checkRedirect(req *http.Request, via []*http.Request, allowed []*url.URL, next func(*http.Request, []*http.Request) error) error {
	if from := via[0].URL; !sameOrigin(req.URL, from) {
		if !slices.ContainsFunc(allowed, func(o *url.URL) bool { return sameOrigin(req.URL, o) }) {
			return &CrossOriginRedirectError{From: origin(from), To: origin(req.URL)}
		}
		// net/http drops the credentials of a request redirected to another domain; an
		// allowed origin is the endpoint's own.
		for _, name := range []string{"Authorization", "Cookie", "Proxy-Authorization"} {
			if v, ok := via[0].Header[name]; ok && req.Header.Get(name) == "" {
				req.Header[name] = v
			}
		}
	}
	if next != nil {
		return next(req, via)
	}
	if len(via) >= 10 {
		return errors.New("transport: stopped after 10 redirects")
	}
	return nil
}

func sameOrigin(a, b *url.URL) bool {
	return a.Scheme == b.Scheme && a.Hostname() == b.Hostname() && portOf(a) == portOf(b)
}

func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}
