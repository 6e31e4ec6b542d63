package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/northstar-mcp/mcpclient/internal/redact"
	"github.com/northstar-mcp/mcpclient/internal/sse"
)

// ErrCrossOriginEndpoint reports a legacy server whose endpoint event names another origin than
// its stream's (where the stream's redirects, if any, led): the client would send its messages,
// and their credentials, elsewhere.
var ErrCrossOriginEndpoint = errors.New("transport: endpoint on another origin")

// SSE is the HTTP+SSE transport of MCP 2024-11-05. Connect opens an event stream with GET; its
// first event, "endpoint", names the URL (resolved against the stream's, after its redirects,
// and required to be of the same origin) to which every message is POSTed. Answers come over the
// stream.
//
// The stream is the session: when it drops, every request awaiting an answer becomes uncertain
// and nothing is resumed; the client's next request opens a new stream, a new session.
//
// The zero value is not usable: URL must be set. Its fields must not change after the first
// Connect.
type SSE struct {
	// URL is the SSE endpoint.
	URL string
	// Client sends the requests; nil means the pooled client the HTTP transport uses. No
	// request follows a redirect to another origin unless to one of AllowedRedirectOrigins
	// (see HTTP.Client).
	Client *http.Client
	// AllowedRedirectOrigins lists the origins the stream and the endpoint may redirect
	// requests to, trusted as their own (see HTTP.AllowedRedirectOrigins).
	AllowedRedirectOrigins []string
	// Header holds extra headers sent with every request.
	Header http.Header
	// HeaderFunc, if set, may add headers to each request.
	HeaderFunc func(ctx context.Context, h http.Header) error
	// ResponseHeaderTimeout bounds the wait for the headers of the response to each POST, from
	// the moment it was written; 0 means DefaultResponseHeaderTimeout, a negative value no
	// bound. The server answers a POST at once, the answer coming over the stream: a POST left
	// without headers ends Uncertain, with ErrResponseTimeout. The stream itself, the session,
	// is meant to be quiet and has no bound.
	ResponseHeaderTimeout time.Duration
	// MaxMessageSize bounds one SSE event, in bytes; <= 0 means DefaultMaxMessageSize (64 MiB).
	// A larger event ends the stream, and with it the session: the requests awaiting answers
	// become uncertain.
	MaxMessageSize int
	// Authorizer, if set, gives every request its credentials and obtains new ones when the
	// server refuses one before running it (see HTTP.Authorizer).
	Authorizer Authorizer
	// Logger receives debug records. Default: discard.
	Logger *slog.Logger
}

// Connect opens the stream and waits, within ctx, for the endpoint event. The messages of the
// stream go to r, on a goroutine of the connection's.
func (t *SSE) Connect(ctx context.Context, r Receiver) (Conn, error) {
	streamURL, err := url.Parse(t.URL)
	if err != nil || (streamURL.Scheme != "http" && streamURL.Scheme != "https") || streamURL.Host == "" {
		return nil, &Error{Outcome: NotDelivered, Err: fmt.Errorf("%w: invalid SSE endpoint %q", ErrMisconfigured, redact.URL(t.URL))}
	}
	allowed, err := parseOrigins(t.AllowedRedirectOrigins)
	if err != nil {
		return nil, &Error{Outcome: NotDelivered, Err: err}
	}
	c := &sseConn{t: t, client: redirectChecked(t.Client, allowed), recv: r,
		ended: make(chan struct{}), log: t.Logger, maxSize: t.MaxMessageSize}
	if c.log == nil {
		c.log = discardLogger
	}
	if c.maxSize <= 0 {
		c.maxSize = DefaultMaxMessageSize
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, c.cancel) // until the endpoint arrives, ctx bounds the stream
	fail := func(err error) (Conn, error) {
		c.cancel()
		return nil, &Error{Outcome: NotDelivered, Err: err}
	}

	resp, err := doAuthorized(ctx, c.client, t.Authorizer, func() (*http.Request, error) {
		req, err := http.NewRequestWithContext(c.ctx, http.MethodGet, streamURL.String(), nil)
		if err != nil {
			return nil, err
		}
		if err := c.headers(ctx, req.Header); err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "text/event-stream")
		return req, nil
	})
	if err != nil {
		return fail(redactQuery(err))
	}
	mediaType := mediaTypeOf(resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK || mediaType != "text/event-stream" {
		return fail(&StatusError{resp.StatusCode, readStart(resp.Body)})
	}
	if resp.Request != nil && resp.Request.URL != nil {
		// The stream is where its redirects led: its endpoint is relative to that URL, and of
		// its origin.
		streamURL = resp.Request.URL
	}
	events := sse.NewReader(resp.Body, c.maxSize)
	for {
		ev, err := events.Next()
		if err != nil {
			resp.Body.Close()
			return fail(fmt.Errorf("transport: the stream ended before its endpoint event: %w", err))
		}
		if ev.Type != "endpoint" {
			continue
		}
		endpoint, err := streamURL.Parse(string(bytes.TrimSpace(ev.Data)))
		if err != nil {
			resp.Body.Close()
			// Not the event's text: it holds the session id (see redactQuery).
			return fail(fmt.Errorf("transport: the endpoint event is no URL: %w", errors.Unwrap(err)))
		}
		if !sameOrigin(endpoint, streamURL) {
			resp.Body.Close()
			return fail(fmt.Errorf("%w: stream %s, endpoint %s", ErrCrossOriginEndpoint, redact.URL(t.URL), redact.URL(endpoint.String())))
		}
		c.endpoint = endpoint.String()
		break
	}
	if !stop() { // ctx ended while the stream opened
		resp.Body.Close()
		return fail(ctx.Err())
	}
	c.wg.Add(1)
	go c.read(events, resp.Body)
	return c, nil
}

type sseConn struct {
	t        *SSE
	client   *http.Client
	endpoint string
	maxSize  int
	log      *slog.Logger

	ctx    context.Context // ends at Close; the stream runs under it
	cancel context.CancelFunc
	recv   Receiver
	ended  chan struct{} // closed when the stream ends; endErr is set before
	endErr error
	wg     sync.WaitGroup
}

func (c *sseConn) headers(ctx context.Context, h http.Header) error {
	addHeaders(h, c.t.Header)
	if c.t.HeaderFunc != nil {
		return c.t.HeaderFunc(ctx, h)
	}
	return nil
}

// read delivers the stream's messages until it ends, which ends the connection.
func (c *sseConn) read(r *sse.Reader, body io.ReadCloser) {
	defer c.wg.Done()
	defer body.Close()
	for {
		ev, err := r.Next()
		if c.ctx.Err() != nil {
			c.endErr = ErrClosed // by Close, which the client knows of
			close(c.ended)
			return
		}
		if err != nil {
			c.endErr = fmt.Errorf("transport: the SSE stream ended: %w", err)
			close(c.ended)
			c.recv.Fail(c.endErr)
			return
		}
		if ev.Type != "" && ev.Type != "message" {
			continue
		}
		c.recv.Deliver(ev.Data, "")
	}
}

// Send POSTs one message to the endpoint; the answer to a request comes over the stream.
func (c *sseConn) Send(ctx context.Context, msg *Message) error {
	select {
	case <-c.ended:
		return &Error{Outcome: NotDelivered, ID: msg.ID, Err: c.endErr}
	default:
	}
	ctx, abort := context.WithCancelCause(ctx)
	defer abort(nil) // the body is read before Send returns
	trace, traced := traceRequest(ctx, timeoutOr(c.t.ResponseHeaderTimeout, DefaultResponseHeaderTimeout), abort)
	var resp *http.Response
	for rounds := 0; ; rounds++ {
		req, err := http.NewRequestWithContext(traced, http.MethodPost, c.endpoint, bytes.NewReader(msg.Frame))
		if err != nil {
			return &Error{Outcome: NotDelivered, ID: msg.ID, Err: err}
		}
		addHeaders(req.Header, c.t.Header)
		addHeaders(req.Header, msg.Header)
		req.Header.Set("Content-Type", "application/json")
		if c.t.HeaderFunc != nil {
			err = c.t.HeaderFunc(ctx, req.Header)
		}
		if err == nil {
			err = authorize(ctx, c.t.Authorizer, req)
		}
		if err != nil {
			return &Error{Outcome: NotDelivered, ID: msg.ID, Err: err}
		}
		resp, err = c.client.Do(req)
		if err != nil {
			trace.done()
			return deliveryFailure(ctx, msg.ID, trace.wrote.Load(), redactQuery(err)) // ctx's cause names a timeout
		}
		if !challenged(resp) {
			break
		}
		// Refused before anything ran: once authorized, the same bytes go again.
		if err := reauthorize(ctx, c.t.Authorizer, req, resp, rounds); err != nil {
			trace.done()
			return &Error{Outcome: NotDelivered, ID: msg.ID, Err: err}
		}
	}
	trace.done()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		drain(resp.Body)
		return nil
	}
	// The endpoint URL names the session: a 404 there is a lost session.
	return postFailure(resp, msg.ID, true)
}

// Close ends the stream, and with it the session.
func (c *sseConn) Close() error {
	c.cancel()
	c.wg.Wait()
	return nil
}
