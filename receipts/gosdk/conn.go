package receiptsgosdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/northstar-mcp/mcpclient/receipts"
)

// storeTimeout bounds one store operation made after the client may be gone: settling and
// releasing go on after a disconnect, but not forever.
const storeTimeout = 10 * time.Second

// The JSON-RPC errors of a request refused before it ran: parse error, invalid request, method
// not found, invalid params, and the protocol's header mismatch and unsupported revision. Its
// receipt is released, as the HTTP middleware releases one refused with a 4xx, so that a
// corrected resend is processed anew.
var failedBeforeExecution = map[int]bool{-32700: true, -32600: true, -32601: true, -32602: true, -32020: true, -32022: true}

// rpcClientGone answers, for the client, a request the server sends while no client is there to
// answer it: the handler that waits for it learns at once instead of at the detached deadline.
const rpcClientGone = -32000

var errClosed = errors.New("receiptsgosdk: connection closed")

// A stream is the client's end of one connection.
type stream struct {
	r     io.Reader
	w     io.Writer
	close func() error
}

// A pending request was claimed and passed to the server, which has not answered it yet.
type pending struct {
	id   string // the JSON text of its id, as the client sent it
	hold *receipts.Hold
}

// conn sits between the client's stream and go-sdk's connection over a pipe. One goroutine
// (readClient) reads the client's lines, answers replays and refusals itself, and passes every
// other line to the server unchanged; the server's writes (fromServer) settle the receipts of
// the responses they carry and go on to the client unchanged, but for the replay and
// declaration edits.
type conn struct {
	keeper    *receipts.Keeper
	opts      receipts.Options
	principal string
	client    stream
	lines     *lineReader // owned by readClient

	toServer *io.PipeReader // the server reads the client's lines here
	feed     *io.PipeWriter
	ssem     chan struct{} // one line at a time into feed
	csem     chan struct{} // one line at a time to the client
	wsem     chan struct{} // one server Write at a time

	ctx    context.Context // ends at Close: admissions waiting for a running request stop
	cancel context.CancelFunc

	closeOnce sync.Once
	closeErr  error
	// admissions counts the goroutines that admit a resend of a known id, which may wait.
	admissions sync.WaitGroup

	// sessionOptIn: the client's initialize declared the extension. Owned by readClient.
	sessionOptIn bool

	partial []byte // a line of the server not yet ended; owned by the holder of wsem

	mu        sync.Mutex
	pending   map[string]*pending // by canonical id
	declaring map[string]receipts.Declaration
	gone      bool          // the client's stream ended, or a write to it failed
	deadline  bool          // the detached deadline passed with requests still running
	drained   chan struct{} // closed when pending empties, while the client is gone
}

func newConn(k *receipts.Keeper, principal string, client stream) *conn {
	opts := k.Options()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	return &conn{
		keeper:    k,
		opts:      opts,
		principal: principal,
		client:    client,
		lines:     newLineReader(client.r, int(opts.MaxBodyBytes)),
		toServer:  pr,
		feed:      pw,
		ssem:      make(chan struct{}, 1),
		csem:      make(chan struct{}, 1),
		wsem:      make(chan struct{}, 1),
		ctx:       ctx,
		cancel:    cancel,
		pending:   map[string]*pending{},
		declaring: map[string]receipts.Declaration{},
	}
}

// readClient reads the client's lines until its stream ends, then lets the requests that opted
// in finish (under DisconnectContinue) before the server learns that the stream ended.
func (c *conn) readClient() {
	err := c.pumpClient()
	c.clientEnded(err)
}

func (c *conn) pumpClient() error {
	for {
		line, whole, err := c.lines.next()
		if len(line) > 0 {
			var ferr error
			if whole {
				ferr = c.fromClient(line)
			} else {
				ferr = c.fromClientOversized(line)
			}
			if ferr != nil {
				return ferr
			}
		}
		if err != nil {
			return err
		}
	}
}

// fromClient handles one line of the client. The error is the server's pipe's: the server left.
func (c *conn) fromClient(line []byte) error {
	msg := parseMessage(line)
	if msg.kind != kindRequest {
		return c.sendServer(line)
	}
	switch {
	case msg.method == "initialize":
		if receipts.InitializeOptsIn(msg.params) {
			c.sessionOptIn = true
		}
		c.declareIn(msg.id)
		return c.sendServer(line)
	case msg.method == "server/discover":
		c.declareIn(msg.id)
		return c.sendServer(line)
	case !receipts.Receipted(msg.method) || !(c.sessionOptIn || receipts.RequestOptsIn(msg.params)):
		return c.sendServer(line)
	}
	canon, ok := canonicalID(msg.id)
	if !ok {
		return c.sendServer(line) // no id a response could name: the server refuses it
	}
	key := receipts.Key{Principal: c.principal, ID: string(msg.id)}
	fp := receipts.FingerprintOf(withoutEOL(line))
	if c.known(key) {
		// A resend: its answer may wait for the request running elsewhere, and the lines behind
		// it (an answer that request awaits, a cancellation) must not wait with it.
		held := bytes.Clone(line)
		c.admissions.Add(1)
		go func() {
			defer c.admissions.Done()
			c.admit(key, fp, canon, held)
		}()
		return nil
	}
	return c.admit(key, fp, canon, line)
}

// known reports whether the store may hold a receipt under key.
func (c *conn) known(key receipts.Key) bool {
	_, err := c.opts.Store.Lookup(c.ctx, key)
	return !errors.Is(err, receipts.ErrNotFound)
}

// admit applies the receipt rules to an opted-in request: it reaches the server only when the
// keeper lets it run.
func (c *conn) admit(key receipts.Key, fp receipts.Fingerprint, canon string, line []byte) error {
	adm, err := c.keeper.Admit(c.ctx, key, fp)
	if err != nil {
		if c.ctx.Err() != nil {
			return nil // closed: nobody to answer
		}
		// A store out of reach: the request must not run, and may be sent again (§8.8).
		resp, _ := receipts.ErrorResponse(receipts.Full, key.ID)
		c.sendClient(resp)
		return nil
	}
	switch adm.Verdict {
	case receipts.Run:
		if !c.track(canon, &pending{id: key.ID, hold: adm.Hold}) {
			// The same request is awaiting its response on this connection under another
			// spelling of its id: the server refuses the duplicate before running it.
			c.release(adm.Hold)
			return c.sendServer(line)
		}
		if err := c.sendServer(line); err != nil {
			if p := c.take(canon); p != nil {
				c.release(p.hold) // it never reached the server
			}
			return err
		}
	case receipts.Replay:
		c.sendClient(receipts.MarkReplay(adm.Response))
	default:
		resp, _ := receipts.ErrorResponse(adm.Verdict, key.ID)
		c.sendClient(resp)
	}
	return nil
}

// fromClientOversized handles a line longer than MaxBodyBytes, of which line is the head. It
// passes to the server piece by piece, never held whole, unless its head names a request of a
// session that opted in: a request that ran without its receipt could run again on a resend,
// so it is dropped unread and refused, as the HTTP middleware refuses a body too large with 413.
// A request that opts in by its _meta alone cannot be told from the head: it passes through,
// without a receipt.
func (c *conn) fromClientOversized(line []byte) error {
	h := scanHead(line)
	if c.sessionOptIn && h.request() && receipts.Receipted(h.method) {
		c.lines.skipRest()
		c.sendClient(tooLargeResponse(h.id, c.opts.MaxBodyBytes))
		return nil
	}
	if err := c.acquire(c.ssem); err != nil {
		return err
	}
	defer c.releaseSem(c.ssem)
	if _, err := c.feed.Write(line); err != nil {
		return err
	}
	var serverErr error
	c.lines.rest(func(piece []byte) error {
		_, serverErr = c.feed.Write(piece)
		return serverErr
	})
	return serverErr
}

func tooLargeResponse(id json.RawMessage, max int64) []byte {
	if _, ok := canonicalID(id); !ok {
		id = json.RawMessage("null")
	}
	msg, _ := json.Marshal(fmt.Sprintf("request line longer than the %d bytes a receipt is kept for; it was not run", max))
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`, bytes.TrimSpace(id), receipts.RPCInvalidRequest, msg)
}

// declareIn remembers to add the declaration to the result of the initialize or server/discover
// request id.
func (c *conn) declareIn(id json.RawMessage) {
	canon, ok := canonicalID(id)
	if !ok {
		return
	}
	decl, err := c.keeper.Declaration(c.ctx)
	if err != nil {
		c.opts.Logger.ErrorContext(c.ctx, "receipts: store describe failed; the answer goes without the declaration", "err", err)
		return
	}
	c.mu.Lock()
	c.declaring[canon] = decl
	c.mu.Unlock()
}

// clientEnded: the client's stream ended (or the server's pipe, or Close). Under
// DisconnectContinue the server keeps reading from a stream that has not ended until every
// claimed request is answered or DetachedTimeout passed: go-sdk cancels its handlers and drops
// their responses once its stream ends, and those responses are what a resend collects.
func (c *conn) clientEnded(error) {
	c.mu.Lock()
	c.gone = true
	var drained chan struct{}
	if c.opts.Disconnect == receipts.DisconnectContinue && len(c.pending) > 0 {
		drained = make(chan struct{})
		c.drained = drained
	}
	c.mu.Unlock()
	if drained != nil {
		timer := time.NewTimer(c.opts.DetachedTimeout)
		select {
		case <-drained:
		case <-c.ctx.Done():
		case <-timer.C:
			c.mu.Lock()
			c.deadline = true
			c.mu.Unlock()
		}
		timer.Stop()
	}
	c.feed.CloseWithError(io.EOF)
}

// fromServer takes what the server writes to its client.
func (c *conn) fromServer(p []byte) (int, error) {
	if err := c.acquire(c.wsem); err != nil {
		return 0, err
	}
	defer c.releaseSem(c.wsem)
	rest := p
	if len(c.partial) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			c.partial = append(c.partial, p...)
			return len(p), nil
		}
		c.partial = append(c.partial, p[:i+1]...)
		c.serverLine(c.partial)
		c.partial = c.partial[:0]
		rest = p[i+1:]
	}
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			c.partial = append(c.partial, rest...)
			break
		}
		c.serverLine(rest[:i+1])
		rest = rest[i+1:]
	}
	if cap(c.partial) > readBufferSize && len(c.partial) == 0 {
		c.partial = nil
	}
	return len(p), nil
}

// serverLine handles one line the server wrote: a response to a request that awaits it settles
// its receipt before it goes to the client, so that a client that saw an answer always finds it
// in the receipt.
func (c *conn) serverLine(line []byte) {
	if !c.awaitingServer() {
		c.sendClient(line)
		return
	}
	msg := parseMessage(line)
	switch msg.kind {
	case kindResponse:
		if canon, ok := canonicalID(msg.id); ok {
			if decl, ok := c.takeDeclaring(canon); ok {
				line, _ = receipts.Declare(line, decl)
			}
			if p := c.take(canon); p != nil {
				c.settle(p, msg, line)
			}
		}
	case kindRequest:
		if c.clientGone() {
			c.answerForGoneClient(msg.id)
			return
		}
	}
	c.sendClient(line)
}

// awaitingServer reports whether a response of the server may matter to the adapter, or the
// server may ask a client that is gone.
func (c *conn) awaitingServer() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending) > 0 || len(c.declaring) > 0 || c.gone
}

func (c *conn) answerForGoneClient(id json.RawMessage) {
	resp := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":"the client disconnected; nobody can answer"}}`+"\n", id, rpcClientGone)
	c.sendServer(resp)
}

// settle keeps the response to a claimed request, or releases the claim when the server
// refused the request before running it.
func (c *conn) settle(p *pending, msg message, line []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	body := withoutEOL(line)
	switch {
	case msg.hasErr && failedBeforeExecution[msg.errCode]:
		p.hold.Release(ctx)
	case len(body) > c.opts.MaxResponseBytes:
		p.hold.SettleInDoubt(ctx, "the response was larger than the receipt store keeps")
	default:
		p.hold.Settle(ctx, bytes.Clone(body))
	}
}

func (c *conn) release(h *receipts.Hold) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	h.Release(ctx)
}

// track records a claimed request awaiting its response; false when one is already awaited
// under canon.
func (c *conn) track(canon string, p *pending) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.pending[canon]; dup {
		return false
	}
	c.pending[canon] = p
	return true
}

// take removes and returns the request awaiting the response canon names, if any: whoever takes
// it settles it.
func (c *conn) take(canon string) *pending {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending[canon]
	if p == nil {
		return nil
	}
	delete(c.pending, canon)
	if len(c.pending) == 0 && c.drained != nil {
		close(c.drained)
		c.drained = nil
	}
	return p
}

func (c *conn) takeDeclaring(canon string) (receipts.Declaration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.declaring[canon]
	delete(c.declaring, canon)
	return d, ok
}

func (c *conn) clientGone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gone
}

func (c *conn) acquire(sem chan struct{}) error {
	select {
	case sem <- struct{}{}:
		return nil
	case <-c.ctx.Done():
		return errClosed
	}
}

func (c *conn) releaseSem(sem chan struct{}) { <-sem }

// sendServer writes one line into the server's stream.
func (c *conn) sendServer(line []byte) error {
	if err := c.acquire(c.ssem); err != nil {
		return err
	}
	defer c.releaseSem(c.ssem)
	_, err := c.feed.Write(line)
	return err
}

// sendClient writes one line to the client, adding the newline a reply lacks. Once the client is
// gone it drops the line: the server's writes never fail for it, lest go-sdk cancel the requests
// whose responses the receipts wait for.
func (c *conn) sendClient(line []byte) {
	if c.clientGone() || c.acquire(c.csem) != nil {
		return
	}
	defer c.releaseSem(c.csem)
	if len(line) == 0 || line[len(line)-1] != '\n' {
		line = append(line[:len(line):len(line)], '\n')
	}
	if _, err := c.client.w.Write(line); err != nil {
		c.mu.Lock()
		c.gone = true
		c.mu.Unlock()
	}
}

// Close ends the connection: go-sdk calls it once its session is over. A request still awaiting
// its response will get none through this connection; its receipt records why.
func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.toServer.CloseWithError(io.EOF)
		c.feed.CloseWithError(errClosed)
		c.closeErr = c.client.close()
		c.admissions.Wait()
		c.settleAbandoned()
	})
	return c.closeErr
}

// settleAbandoned settles the receipts of the requests the server will no longer answer here.
func (c *conn) settleAbandoned() {
	c.mu.Lock()
	abandoned := c.pending
	c.pending = map[string]*pending{}
	gone, deadline := c.gone, c.deadline
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	for _, p := range abandoned {
		switch {
		case gone && c.opts.Disconnect == receipts.DisconnectCancel:
			p.hold.Settle(ctx, receipts.CancelledResponse(p.id))
		case gone && deadline:
			p.hold.SettleInDoubt(ctx, "the request ran past its deadline after its client disconnected, without a response")
		default:
			p.hold.SettleInDoubt(ctx, "the server ended the connection before it answered")
		}
	}
}
