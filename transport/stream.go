package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
)

// Stream is a [Transport] over byte streams: each Connect opens one (a socket, a pipe) and speaks
// newline-delimited JSON-RPC on it, as described at [NewStreamConn].
//
// Whether a new stream continues an old server session is up to the server behind Open; the
// client treats every connection as a new session.
type Stream struct {
	// Open opens one byte stream to the server. An error fails Connect with a NotDelivered
	// *Error: no frame was written yet. The stream's Close must unblock a Read in progress, as
	// it does for net.Conn and *os.File pipes.
	Open func(ctx context.Context) (io.ReadWriteCloser, error)

	// MaxFrameSize bounds an incoming line in bytes, without its line terminator; <= 0 means
	// DefaultMaxMessageSize (64 MiB). NewStreamConn says what becomes of a longer line.
	MaxFrameSize int
}

// Connect opens a stream with s.Open and returns a Conn speaking newline-delimited JSON-RPC on
// it. If ctx is already done, or Open fails, the error is a NotDelivered *Error.
func (s *Stream) Connect(ctx context.Context) (Conn, error) {
	if s.Open == nil {
		return nil, &Error{Outcome: NotDelivered, Err: errors.New("Stream.Open is nil")}
	}
	if err := ctx.Err(); err != nil {
		return nil, &Error{Outcome: NotDelivered, Err: err}
	}
	rwc, err := s.Open(ctx)
	if err != nil {
		if rwc != nil {
			rwc.Close()
		}
		return nil, &Error{Outcome: NotDelivered, Err: err}
	}
	if rwc == nil {
		return nil, &Error{Outcome: NotDelivered, Err: errors.New("Stream.Open returned no stream")}
	}
	return NewStreamConn(rwc, s.MaxFrameSize), nil
}

// NewStreamConn returns a Conn speaking newline-delimited JSON-RPC over rwc. It owns rwc and
// closes it on Close.
//
// Send writes msg.Frame followed by "\n" in one Write call, one Send at a time, so frames of
// concurrent Sends never interleave. A frame that is empty or contains '\n' or '\r' is refused
// before anything is written, with a NotDelivered *Error: it would corrupt the stream. A write
// that fails before its first byte is NotDelivered. A write that fails after some bytes is
// Uncertain, and it ends the connection, since the peer now holds half a line that the next
// frame would garble: the Conn closes itself, Receive reports the end, and every request
// awaiting an answer becomes uncertain. Send honors ctx: when rwc has a SetWriteDeadline method
// (net.Conn and *os.File pipes do), the end of ctx interrupts a blocked write through a
// deadline; otherwise ctx is only checked before writing.
//
// Receive returns the next non-empty line, without its "\n" and without a "\r" before it. A
// last line that the stream ends without a newline is returned too.
//
// A line longer than maxFrameSize bytes (<= 0 means DefaultMaxMessageSize) is read to its
// newline and dropped, no more than the limit of it ever held; memory otherwise follows the
// lines read, never the limit. What the line was is read from it on the way (the id of a
// JSON-RPC response may come anywhere in it):
//   - an answer: once the line has ended, Receive returns, for each request it answers, an
//     Uncertain *Error with the request's id wrapping ErrMessageTooLarge (the request may have
//     run), and the connection goes on with the next line;
//   - a request or a notification: it is dropped, and the connection goes on;
//   - anything else, such as a response whose id cannot be read or a line that is no JSON-RPC:
//     the line may answer a request it does not name, so the connection ends, lest that request
//     wait for an answer that was thrown away: Receive returns an *Error without an id wrapping
//     ErrMessageTooLarge, and every request awaiting an answer becomes uncertain.
//
// The returned Conn counts oversized lines; its method OversizedFrames() int64 reports the count
// (reach it with a type assertion).
//
// Receive honors ctx and returns ctx.Err() when ctx ends first; the connection lives on. When
// the stream ends (EOF) or a read fails, Receive returns an error that wraps io.EOF or the read
// error and is not an *Error: the connection has ended.
//
// After Close, Send returns a NotDelivered *Error wrapping ErrClosed and Receive an error
// wrapping ErrClosed. Close closes rwc; it is idempotent and safe to call concurrently. A
// Receive blocked in rwc.Read is unblocked by closing rwc, as it is for pipes, sockets and
// net.Pipe: a custom ReadWriteCloser must behave the same way, or its reader goroutine outlives
// the Conn.
func NewStreamConn(rwc io.ReadWriteCloser, maxFrameSize int) Conn {
	c := newStreamConn(rwc, rwc, rwc.Close, maxFrameSize, streamHooks{})
	go c.readLoop()
	return c
}

// streamHooks let the stdio transport reuse the stream conn.
type streamHooks struct {
	// oversized, if set, is told of every line over the limit: its length, the ids of the
	// requests it answered, and whether it named every request it may answer (when it did not,
	// the connection ends).
	oversized func(n int, ids []string, named bool)
	// ended, if set, turns the error that ended reading into the error Receive reports. It
	// runs on the reader goroutine and must return promptly once the conn is closed (done).
	ended func(readErr error) error
}

// streamConn implements the Conn of NewStreamConn.
type streamConn struct {
	r       io.Reader
	w       io.Writer
	closeFn func() error // closes the writing side and, for plain streams, the reading side
	max     int
	hooks   streamHooks

	// wsem is the write lock: a one-slot semaphore, so that a Send waiting for it honors its
	// context and Close.
	wsem chan struct{}
	wbuf []byte // frame plus newline; guarded by wsem

	frames chan delivery // the reader hands lines and exchange failures over, unbuffered
	// push, once set, takes lines and the end of reading instead of Receive; pushSet is closed
	// when it is, so that a reader waiting to hand a line to Receive hands it to push instead.
	push    atomic.Pointer[func(frame []byte, err error)]
	pushSet chan struct{}
	readEnd chan struct{} // closed when the reader goroutine returns
	readErr error         // why reading ended; written before readEnd is closed

	done      chan struct{} // closed by shutdown
	closeOnce sync.Once
	cause     error // why the conn was closed; written before done is closed
	closeErr  error

	oversizedN atomic.Int64
}

// newStreamConn returns a stream conn; the caller starts its reader with go c.readLoop().
func newStreamConn(r io.Reader, w io.Writer, closeFn func() error, maxFrameSize int, hooks streamHooks) *streamConn {
	if maxFrameSize <= 0 {
		maxFrameSize = DefaultMaxMessageSize
	}
	return &streamConn{
		r:       r,
		w:       w,
		closeFn: closeFn,
		max:     maxFrameSize,
		hooks:   hooks,
		wsem:    make(chan struct{}, 1),
		frames:  make(chan delivery),
		pushSet: make(chan struct{}),
		readEnd: make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// readBufferSize is the size of the buffered reader; lines longer than it are assembled.
const readBufferSize = 64 << 10

// maxKeptWriteBuffer bounds the write buffer a conn keeps between Sends.
const maxKeptWriteBuffer = 64 << 10

// aLongTimeAgo is a deadline in the past, which interrupts a blocked write at once.
var aLongTimeAgo = time.Unix(1, 0)

type writeDeadliner interface {
	SetWriteDeadline(t time.Time) error
}

// The frames Send refuses before writing anything.
var (
	errEmptyFrame     = errors.New("empty frame")
	errFrameLineBreak = errors.New("frame contains a line break, which would split it on a newline-delimited stream")
)

// Send writes msg.Frame and a newline. See NewStreamConn for the outcomes.
func (c *streamConn) Send(ctx context.Context, msg *Message) error {
	if len(msg.Frame) == 0 {
		return &Error{Outcome: NotDelivered, ID: msg.ID, Err: errEmptyFrame}
	}
	if bytes.IndexByte(msg.Frame, '\n') >= 0 || bytes.IndexByte(msg.Frame, '\r') >= 0 {
		return &Error{Outcome: NotDelivered, ID: msg.ID, Err: errFrameLineBreak}
	}
	if err := ctx.Err(); err != nil {
		return &Error{Outcome: NotDelivered, ID: msg.ID, Err: err}
	}
	select {
	case c.wsem <- struct{}{}:
	case <-c.done:
		return &Error{Outcome: NotDelivered, ID: msg.ID, Err: c.cause}
	case <-ctx.Done():
		return &Error{Outcome: NotDelivered, ID: msg.ID, Err: ctx.Err()}
	}
	defer func() { <-c.wsem }()
	// The select above picks at random among ready cases: look again.
	select {
	case <-c.done:
		return &Error{Outcome: NotDelivered, ID: msg.ID, Err: c.cause}
	default:
	}
	if err := ctx.Err(); err != nil {
		return &Error{Outcome: NotDelivered, ID: msg.ID, Err: err}
	}

	buf := append(c.wbuf[:0], msg.Frame...)
	buf = append(buf, '\n')
	n, werr := c.write(ctx, buf)
	if cap(buf) <= maxKeptWriteBuffer {
		c.wbuf = buf[:0]
	} else {
		c.wbuf = nil
	}
	if werr == nil {
		return nil
	}

	cause := werr
	select {
	case <-c.done:
		cause = fmt.Errorf("%w (%w)", c.cause, werr)
	default:
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(werr, os.ErrDeadlineExceeded) {
			cause = fmt.Errorf("%w (%w)", ctxErr, werr)
		}
	}
	if n <= 0 {
		return &Error{Outcome: NotDelivered, ID: msg.ID, Err: cause}
	}
	// The peer holds part of a line: the stream is corrupt from here on.
	c.shutdown(fmt.Errorf("%w: a partial write broke the stream: %w", ErrClosed, werr))
	return &Error{Outcome: Uncertain, ID: msg.ID,
		Err: fmt.Errorf("partial write (%d of %d bytes) ended the connection: %w", n, len(buf), cause)}
}

// write writes buf, interrupting the write through a deadline when ctx ends, if it can.
func (c *streamConn) write(ctx context.Context, buf []byte) (int, error) {
	dl, ok := c.w.(writeDeadliner)
	if !ok || ctx.Done() == nil {
		return c.checkedWrite(buf)
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		dl.SetWriteDeadline(aLongTimeAgo)
		close(fired)
	})
	n, err := c.checkedWrite(buf)
	if !stop() {
		// The deadline was set, or is being set: wait for it and clear it for the next Send.
		<-fired
		dl.SetWriteDeadline(time.Time{})
	}
	return n, err
}

func (c *streamConn) checkedWrite(buf []byte) (int, error) {
	n, err := c.w.Write(buf)
	if err == nil && n < len(buf) {
		err = io.ErrShortWrite
	}
	return n, err
}

// Receive returns the next line. See NewStreamConn.
func (c *streamConn) Receive(ctx context.Context) ([]byte, error) {
	select {
	case <-c.done:
		return nil, c.cause
	default:
	}
	select {
	case d := <-c.frames:
		return d.unpack()
	case <-c.readEnd:
		select {
		case <-c.done:
			return nil, c.cause
		default:
		}
		return nil, c.readErr
	case <-c.done:
		return nil, c.cause
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close closes the stream. It is idempotent; calls after the first return nil.
func (c *streamConn) Close() error {
	return c.shutdown(ErrClosed)
}

// shutdown closes the conn for cause, once.
func (c *streamConn) shutdown(cause error) error {
	var err error
	c.closeOnce.Do(func() {
		c.cause = cause
		close(c.done)
		err = c.closeFn()
	})
	return err
}

// OversizedFrames reports how many incoming lines were over the size limit.
func (c *streamConn) OversizedFrames() int64 { return c.oversizedN.Load() }

// readLoop reads lines and hands them to Receive until reading fails. Once the conn is closed it
// drops what it reads, so that a peer can still flush its output and exit; reading then ends
// with the stream (for plain streams at once, since Close closed it).
func (c *streamConn) readLoop() {
	err := c.readLines()
	select {
	case <-c.done:
	default:
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("transport: the peer ended the stream: %w", err)
		} else {
			err = fmt.Errorf("transport: reading the stream: %w", err)
		}
		if c.hooks.ended != nil {
			if e := c.hooks.ended(err); e != nil {
				err = e
			}
		}
	}
	c.readErr = err
	close(c.readEnd)
	if push := c.push.Load(); push != nil {
		select {
		case <-c.done: // closed by the client, which knows
		default:
			(*push)(nil, err)
		}
	}
}

func (c *streamConn) readLines() error {
	br := bufio.NewReaderSize(c.r, readBufferSize)
	for {
		line, over, err := c.readLine(br)
		switch {
		case over != nil:
			c.oversized(over, err != nil)
		case line != nil:
			c.handOver(delivery{frame: line})
		}
		if err != nil {
			return err
		}
	}
}

// handOver gives a line, or the failure of an exchange, to push, or to Receive until push is set.
func (c *streamConn) handOver(d delivery) {
	if push := c.push.Load(); push != nil {
		(*push)(d.unpack())
		return
	}
	select {
	case c.frames <- d:
	case <-c.pushSet:
		(*c.push.Load())(d.unpack())
	case <-c.done:
	}
}

// Push hands every later line, and the end of reading, to deliver, on the reader goroutine.
func (c *streamConn) Push(deliver func(frame []byte, err error)) {
	if c.push.Swap(&deliver) == nil {
		close(c.pushSet)
	}
}

// An oversizedLine is what is kept of a line over the limit: its length, and what was read of
// its JSON-RPC envelope.
type oversizedLine struct {
	n    int
	skim jsonrpc.Skimmer
}

// readLine returns the next line worth returning, nil for an empty one, or what was read of a
// line over the limit; and the error that ended the stream, if it did.
func (c *streamConn) readLine(br *bufio.Reader) (line []byte, over *oversizedLine, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case over != nil:
			over.n += len(chunk)
			over.skim.Write(chunk)
		case len(line)+len(chunk)-2 > c.max: // room for "\r\n"
			over = &oversizedLine{n: len(line) + len(chunk)}
			over.skim.Write(line)
			over.skim.Write(chunk)
			line = nil
		default:
			line = append(line, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if over != nil {
			return nil, over, err
		}
		n := len(line)
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		switch {
		case len(line) > c.max:
			over = &oversizedLine{n: n}
			over.skim.Write(line)
			return nil, over, err
		case len(bytes.TrimSpace(line)) == 0:
			line = nil
		}
		return line, nil, err
	}
}

// oversized settles a line over the limit (see NewStreamConn): the requests it answers end with
// ErrMessageTooLarge; a request or notification is dropped; a line that may answer a request
// it does not name ends the connection. streamEnded says the stream ended with the line, which
// ends the connection anyway.
func (c *streamConn) oversized(over *oversizedLine, streamEnded bool) {
	c.oversizedN.Add(1)
	raw, named := over.skim.Responses()
	ids := make([]string, 0, len(raw))
	for _, id := range raw {
		key, ok := messageID(id)
		if !ok {
			named = false
			break
		}
		ids = append(ids, key)
	}
	if c.hooks.oversized != nil {
		c.hooks.oversized(over.n, ids, named)
	}
	if !named {
		if streamEnded {
			return
		}
		tooLarge := fmt.Errorf("%w: a line of %d bytes, over the limit of %d, names no request it may answer: the connection ends",
			ErrMessageTooLarge, over.n, c.max)
		c.handOver(delivery{err: &Error{Outcome: Uncertain, Err: tooLarge}})
		// Reading goes on, dropping what comes, until the stream closes: a server process must
		// not block on a full stdout while it is being shut down.
		c.shutdown(fmt.Errorf("%w: %w", ErrClosed, tooLarge))
		return
	}
	for _, id := range ids {
		c.handOver(delivery{err: &Error{Outcome: Uncertain, ID: id,
			Err: fmt.Errorf("%w: the answer is a line of %d bytes, over the limit of %d", ErrMessageTooLarge, over.n, c.max)}})
	}
}

// messageID returns an id read from the stream in the form Message.ID gives it: a string as
// encoding/json encodes it, an integer in decimal. ok is false for anything else, which names
// no request.
func messageID(raw []byte) (id string, ok bool) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		b, err := json.Marshal(s)
		return string(b), err == nil
	}
	digits := bytes.TrimPrefix(raw, []byte("-"))
	if len(digits) == 0 || (digits[0] == '0' && len(digits) > 1) || bytes.ContainsFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) {
		return "", false // not an integer as JSON writes them
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return "", false
	}
	return strconv.FormatInt(n, 10), true
}
