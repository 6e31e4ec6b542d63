package receipts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/internal/metakeys"
)

// headerSession is the Streamable HTTP transport's session header.
const headerSession = "Mcp-Session-Id"

// retryAfterFull is the Retry-After of a full refusal: a store full of running requests frees
// as they end, which is seconds for most tools.
const retryAfterFull = "1"

// errDetachedDeadline ends a request that ran on too long after its client left.
var errDetachedDeadline = errors.New("receipts: the request ran past its deadline after its client disconnected")

// HTTP returns middleware that keeps request receipts for next, a Streamable HTTP MCP handler
// of any SDK (or a reverse proxy to a server in another language), stateful or stateless.
//
// For a POST of one JSON-RPC request that opted in (see below) it answers the receipt rules
// itself: a byte-identical resend of an answered request gets the stored response, marked as a
// replay, without reaching next; a resend of one still running waits for it; a reused id, an
// outcome in doubt or a full store are refused with the extension's errors. A request it lets
// run reaches next with its body restored, and the response next writes (a JSON body, or the
// event of an event stream that carries the response, every other event passing through
// untouched) is kept as the receipt. If next answers with an HTTP client error (4xx) and no
// JSON-RPC response, the request failed before it ran and no receipt is kept; a server error, a
// panic or no response at all leaves its outcome in doubt.
//
// A request opts in by HeaderOptIn ("Mcp-Request-Receipts: 1"), by its per-request client
// capabilities in _meta (2026-07-28 and later), or by belonging to a session whose initialize
// declared the extension (the middleware sees the initialize and the session id of its answer).
// Every other request, and every GET and DELETE, passes through untouched. initialize,
// server/discover and ping get no receipt; the middleware adds its Declaration to the
// capabilities of the initialize and server/discover results.
//
// Receipts are kept per principal (Options.Principal): see BearerPrincipal for the default and
// for why tokens must be verified in front of this middleware.
//
// With DisconnectContinue, next runs an opted-in request with a context that the client's
// disconnect does not cancel, bounded by Options.DetachedTimeout once the client is gone, and
// its writes still succeed, so the response is kept for the resend. With DisconnectCancel, the
// disconnect cancels next's context, and a request that wrote no response keeps a cancellation
// error as its receipt.
//
// The middleware removes Accept-Encoding from the requests it reads the answers of, so that it
// reads them uncompressed.
func HTTP(next http.Handler, opts Options) http.Handler {
	k := NewKeeper(opts)
	return &middleware{next: next, keeper: k, opts: k.opts, sessions: newOptedSessions(k.opts.MaxSessions)}
}

type middleware struct {
	next     http.Handler
	keeper   *Keeper
	opts     Options
	sessions *optedSessions
}

// A request is what the middleware read of a POST.
type request struct {
	id      string // the JSON text of the id, for a request
	optedIn bool
	// receipted: a request that gets a receipt if it opted in.
	receipted bool
	// declares: initialize or server/discover, whose result carries the declaration.
	declares bool
	// initOptIn: an initialize that declares the extension.
	initOptIn bool
	// mismatch: a request of the stateless revision whose opt-in header and body disagree.
	mismatch bool
}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		m.serveDelete(w, r)
		return
	default:
		m.next.ServeHTTP(w, r)
		return
	}
	body, tooLarge, err := readBody(r, m.opts.MaxBodyBytes)
	if err != nil {
		http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if tooLarge {
		if m.headerOptedIn(r) {
			writeJSON(w, http.StatusRequestEntityTooLarge, errorResponse("", RPCInvalidRequest,
				"request body larger than the receipts middleware reads", ""))
			return
		}
		// Nothing said this request opted in: it passes through, its receipt never kept.
		rest := r.Body
		r.Body = readCloser{io.MultiReader(bytes.NewReader(body), rest), rest}
		m.next.ServeHTTP(w, r)
		return
	}
	restoreBody(r, body)
	req := m.read(r, body)
	switch {
	case req.declares:
		m.serveDeclaring(w, r, req)
	case req.mismatch:
		writeJSON(w, http.StatusBadRequest, errorResponse(req.id, rpcHeaderMismatch,
			"the "+HeaderOptIn+" header and the request's _meta disagree on whether it opts into request receipts", ""))
	case req.receipted && req.optedIn:
		m.serveReceipted(w, r, req, body)
	default:
		m.next.ServeHTTP(w, r)
	}
}

type readCloser struct {
	io.Reader
	io.Closer
}

// readBody reads up to max bytes of r's body; tooLarge is true, with max+1 bytes read and the
// rest left in r.Body, when there is more.
func readBody(r *http.Request, max int64) (body []byte, tooLarge bool, err error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, false, nil
	}
	size := int64(512)
	if r.ContentLength > 0 {
		size = min(r.ContentLength, max) + 1
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	if _, err := buf.ReadFrom(io.LimitReader(r.Body, max+1)); err != nil {
		return nil, false, err
	}
	return buf.Bytes(), int64(buf.Len()) > max, nil
}

func restoreBody(r *http.Request, body []byte) {
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
}

// headerOptedIn reports whether r opted in by its header or its session.
func (m *middleware) headerOptedIn(r *http.Request) bool {
	if headerSaysOptIn(r) {
		return true
	}
	sid := r.Header.Get(headerSession)
	return sid != "" && m.sessions.has(sid)
}

// headerSaysOptIn reports whether r carries the opt-in header; any value but 1 is its absence.
func headerSaysOptIn(r *http.Request) bool {
	return strings.TrimSpace(r.Header.Get(HeaderOptIn)) == "1"
}

// rpcHeaderMismatch is the protocol's error code for a request whose headers say other than its
// body.
const rpcHeaderMismatch = -32020

// read reads what the middleware needs of a POST body: one JSON-RPC request, its id and method,
// and whether it opted in. A batch, a notification or a response is none of its business.
func (m *middleware) read(r *http.Request, body []byte) request {
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return request{}
	}
	msgs, err := jsonrpc.Decode(body)
	if err != nil || len(msgs) != 1 || msgs[0].Kind() != jsonrpc.KindRequest {
		return request{}
	}
	msg := msgs[0]
	id := string(bytes.TrimSpace(msg.ID))
	if id == "null" {
		return request{}
	}
	req := request{id: id}
	switch msg.Method {
	case "initialize":
		req.declares = true
		req.initOptIn = InitializeOptsIn(msg.Params)
	case "server/discover":
		req.declares = true
	}
	if !Receipted(msg.Method) {
		return req
	}
	req.receipted = true
	meta := metaOf(msg.Params)
	if _, stateless := meta[metakeys.ProtocolVersion]; stateless {
		// The stateless revision, whose every request carries its protocol version in _meta:
		// the body alone opts in, frozen with the bytes a resend repeats; the header only
		// mirrors it.
		req.optedIn = metaOptsIn(meta)
		req.mismatch = req.optedIn != headerSaysOptIn(r)
		return req
	}
	req.optedIn = m.headerOptedIn(r) || metaOptsIn(meta)
	return req
}

// hasMember reports whether the JSON object doc has a member at path, through nested objects.
// Keys match exactly, after unescaping, the last of duplicates counting, as a client wrote them.
func hasMember(doc json.RawMessage, path ...string) bool {
	for _, key := range path {
		var obj map[string]json.RawMessage
		if json.Unmarshal(doc, &obj) != nil {
			return false
		}
		var ok bool
		if doc, ok = obj[key]; !ok {
			return false
		}
	}
	return true
}

// passRequest returns the request next gets: r with ctx, asking for no compression, so that the
// middleware can read the answer.
func passRequest(r *http.Request, ctx context.Context) *http.Request {
	r2 := r.WithContext(ctx)
	if r.Header.Get("Accept-Encoding") != "" {
		r2.Header = r.Header.Clone()
		r2.Header.Del("Accept-Encoding")
	}
	return r2
}

func (m *middleware) serveDelete(w http.ResponseWriter, r *http.Request) {
	iw := newInterceptor(w, r.Context(), "", 0)
	m.next.ServeHTTP(iw, r)
	iw.finish()
	if sid := r.Header.Get(headerSession); sid != "" && iw.statusCode() < 300 {
		m.sessions.remove(sid)
	}
}

// serveDeclaring passes an initialize or server/discover to next, adding the declaration to
// its result, and remembers the session of an initialize that opted in.
func (m *middleware) serveDeclaring(w http.ResponseWriter, r *http.Request, req request) {
	decl, err := m.keeper.Declaration(r.Context())
	if err != nil {
		m.opts.Logger.ErrorContext(r.Context(), "receipts: store describe failed; the answer goes without the declaration", "err", err)
		m.next.ServeHTTP(w, r)
		return
	}
	iw := newInterceptor(w, r.Context(), req.id, m.opts.MaxResponseBytes).holding(func(resp []byte) []byte {
		out, _ := Declare(resp, decl)
		return out
	})
	m.next.ServeHTTP(iw, passRequest(r, r.Context()))
	iw.finish()
	if sid := w.Header().Get(headerSession); req.initOptIn && sid != "" && iw.statusCode() < 300 {
		m.sessions.add(sid)
	}
}

// serveReceipted applies the receipt rules to an opted-in request.
func (m *middleware) serveReceipted(w http.ResponseWriter, r *http.Request, req request, body []byte) {
	key := Key{Principal: m.opts.Principal(r), ID: req.id}
	adm, err := m.keeper.Admit(r.Context(), key, FingerprintOf(body))
	if err != nil {
		if r.Context().Err() != nil {
			return // the client left while its resend waited: nobody to answer
		}
		w.Header().Set("Retry-After", retryAfterFull)
		writeJSON(w, http.StatusServiceUnavailable, errorResponse(req.id, RPCFull, "receipt store unavailable: "+err.Error(), ""))
		return
	}
	switch adm.Verdict {
	case Run:
		m.run(w, r, req, adm.Hold)
	case Replay:
		writeReplay(w, r, adm.Response)
	case InFlight, Reused:
		resp, _ := ErrorResponse(adm.Verdict, req.id)
		writeJSON(w, http.StatusConflict, resp)
	case InDoubt:
		resp, _ := ErrorResponse(adm.Verdict, req.id)
		writeJSON(w, http.StatusOK, resp)
	case Full:
		resp, _ := ErrorResponse(adm.Verdict, req.id)
		w.Header().Set("Retry-After", retryAfterFull)
		writeJSON(w, http.StatusServiceUnavailable, resp)
	}
}

// run passes a claimed request to next and settles (or releases) its receipt from what next
// answered.
func (m *middleware) run(w http.ResponseWriter, r *http.Request, req request, hold *Hold) {
	execCtx, stop := m.executionContext(r)
	defer stop()
	iw := newInterceptor(w, r.Context(), req.id, m.opts.MaxResponseBytes)
	settled := false
	settle := func(do func(ctx context.Context)) {
		storeCtx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), storeTimeout)
		defer cancel()
		do(storeCtx)
		settled = true
	}
	// The response of an event stream is final once sent: a resend need not wait for the
	// handler to end its stream.
	iw.streamed = func(response []byte) {
		settle(func(ctx context.Context) { hold.Settle(ctx, response) })
	}
	defer func() {
		if !settled { // next panicked: it may have run
			settle(func(ctx context.Context) { hold.SettleInDoubt(ctx, "the handler panicked") })
		}
	}()
	m.next.ServeHTTP(iw, passRequest(r, execCtx))
	iw.finish()
	if settled {
		return
	}
	cause := context.Cause(execCtx)
	settle(func(ctx context.Context) { m.conclude(ctx, iw, hold, req, r, cause) })
}

// conclude settles or releases the receipt of a request from what next answered, once it
// returned without a response read on the way.
func (m *middleware) conclude(storeCtx context.Context, iw *interceptor, hold *Hold, req request, r *http.Request, cause error) {
	status := iw.statusCode()
	switch {
	case refusedBeforeExecution(status, iw.Header()) && !iw.overflowed():
		hold.Release(storeCtx)
	case iw.response != nil && status < 300:
		hold.Settle(storeCtx, iw.response)
	case m.opts.Disconnect == DisconnectCancel && r.Context().Err() != nil:
		hold.Settle(storeCtx, CancelledResponse(req.id))
	case errors.Is(cause, errDetachedDeadline):
		hold.SettleInDoubt(storeCtx, "the request ran past its deadline after its client disconnected, without a response")
	case status >= 500:
		hold.SettleInDoubt(storeCtx, "the handler failed with HTTP status "+strconv.Itoa(status)+" and no response")
	case iw.overflowed():
		hold.SettleInDoubt(storeCtx, "the response was larger than the receipt store keeps")
	default:
		hold.SettleInDoubt(storeCtx, "the handler returned no response")
	}
}

// refusedBeforeExecution reports whether a handler's status says it refused the request before
// running it: any 4xx (malformed, unauthorized, unknown session or method, a header mismatch),
// whatever body carries it, and a 503 that says when to come back. Any other 5xx may follow an
// execution.
func refusedBeforeExecution(status int, h http.Header) bool {
	return status >= 400 && status < 500 || status == http.StatusServiceUnavailable && h.Get("Retry-After") != ""
}

// executionContext returns the context next runs a claimed request with, and the function that
// ends it. With DisconnectContinue it keeps r's values but not its cancellation, and a watcher
// (ended by stop) cancels it DetachedTimeout after the client left.
func (m *middleware) executionContext(r *http.Request) (ctx context.Context, stop func()) {
	client := r.Context()
	if m.opts.Disconnect == DisconnectCancel {
		return client, func() {}
	}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(client))
	stopWatch, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-stopWatch:
			return
		case <-client.Done():
		}
		timer := time.NewTimer(m.opts.DetachedTimeout)
		defer timer.Stop()
		select {
		case <-stopWatch:
		case <-timer.C:
			cancel(errDetachedDeadline)
		}
	}()
	return ctx, func() {
		close(stopWatch)
		<-watched
		cancel(nil)
	}
}

// writeReplay answers with a stored response, marked as a replay, as JSON unless the client
// accepts only an event stream.
func writeReplay(w http.ResponseWriter, r *http.Request, stored []byte) {
	body := MarkReplay(stored)
	w.Header().Set(HeaderReplay, "1")
	if acceptsOnlyEvents(r.Header.Values("Accept")) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		w.Write(appendEvent(nil, body))
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// acceptsOnlyEvents reports whether Accept names text/event-stream and nothing that covers JSON.
func acceptsOnlyEvents(accept []string) bool {
	events := false
	for _, v := range accept {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "text/event-stream":
				events = true
			case "application/json", "application/*", "*/*":
				return false
			}
		}
	}
	return events
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	w.Write(body)
}
