package transport

import (
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
// newline-delimited JSON-RPC on it.
//
// Whether a new stream continues an old server session is up to the server behind Open; the
// client treats every connection as a new session.
//
// Send writes msg.Frame followed by "\n" in one Write call, one Send at a time, so frames of
// concurrent Sends never interleave. A frame that is empty or contains '\n' or '\r' is refused
// before anything is written, with a NotDelivered *Error: it would corrupt the stream. A write
// that fails before its first byte is NotDelivered. A write that fails after some bytes is
// Uncertain, and it ends the connection, since the peer now holds half a line that the next
// frame would garble: the Conn closes itself, the Receiver learns that the connection ended, and
// every request awaiting an answer becomes uncertain. Send honors ctx: when the stream has a
// SetWriteDeadline method (net.Conn and *os.File pipes do), the end of ctx interrupts a blocked
// write through a deadline; otherwise ctx is only checked before writing.
//
// A goroutine of the connection reads the stream and delivers every non-empty line to the
// Receiver, without its "\n" and without a "\r" before it; a last line that the stream ends
// without a newline is delivered too. While the stream is quiet the connection holds no read
// buffer beyond a small one of its own; large ones are pooled.
//
// A line longer than MaxFrameSize bytes is read to its newline and dropped, no more than the
// limit of it ever held; memory otherwise follows the lines read, never the limit (a line
// longer than a read buffer is held twice while its pieces are joined). What the line
// was is read from it on the way (the id of a JSON-RPC response may come anywhere in it):
//   - an answer: once the line has ended, the Receiver's Fail gets, for each request it answers,
//     an Uncertain *Error with the request's id wrapping ErrMessageTooLarge (the request may
//     have run), and the connection goes on with the next line;
//   - a request or a notification: it is dropped, and the connection goes on;
//   - anything else, such as a response whose id cannot be read or a line that is no JSON-RPC:
//     the line may answer a request it does not name, so the connection ends, lest that request
//     wait for an answer that was thrown away: Fail gets an *Error without an id wrapping
//     ErrMessageTooLarge, and every request awaiting an answer becomes uncertain.
//
// The Conn counts oversized lines; its method OversizedFrames() int64 reports the count (reach it
// with a type assertion).
//
// When the stream ends (EOF) or a read fails, Fail gets an error that wraps io.EOF or the read
// error and is not an *Error: the connection has ended.
//
// After Close, Send returns a NotDelivered *Error wrapping ErrClosed. Close closes the stream; it
// is idempotent and safe to call concurrently. A read blocked in the stream's Read is unblocked
// by closing the stream, as it is for pipes, sockets and net.Pipe: a custom ReadWriteCloser
// must behave the same way, or its reader goroutine outlives the Conn.
type Stream struct {
	// Open opens one byte stream to the server. An error fails Connect with a NotDelivered
	// *Error: no frame was written yet. The stream's Close must unblock a Read in progress, as
	// it does for net.Conn and *os.File pipes.
	Open func(ctx context.Context) (io.ReadWriteCloser, error)

	// MaxFrameSize bounds an incoming line in bytes, without its line terminator; <= 0 means
	// DefaultMaxMessageSize (64 MiB). A longer line is dropped, as described above.
	MaxFrameSize int
}

// Connect opens a stream with s.Open and returns a Conn speaking newline-delimited JSON-RPC on
// it, whose reader delivers to r. If ctx is already done, or Open fails, the error is a
// NotDelivered *Error.
func (s *Stream) Connect(ctx context.Context, r Receiver) (Conn, error) {
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
	c := newStreamConn(rwc, rwc, rwc.Close, s.MaxFrameSize, r, streamHooks{})
	go c.readLoop()
	return c, nil
}

// streamHooks let the stdio transport reuse the stream conn.
type streamHooks struct {
	// oversized, if set, is told of every line over the limit: its length, the ids of the
	// requests it answered, and whether it named every request it may answer (when it did not,
	// the connection ends).
	oversized func(n int, ids []string, named bool)
	// ended, if set, turns the error that ended reading into the error the Receiver is told. It
	// runs on the reader goroutine and must return promptly once the conn is closed (done).
	ended func(readErr error) error
}

// streamConn is the Conn of a Stream, and of a Command over the process's stdin and stdout.
type streamConn struct {
	w       io.Writer
	closeFn func() error // closes the writing side and, for plain streams, the reading side
	max     int
	hooks   streamHooks
	recv    Receiver

	// wsem is the write lock: a one-slot semaphore, so that a Send waiting for it honors its
	// context and Close.
	wsem chan struct{}

	lines   lineReader    // owned by the reader goroutine
	readEnd chan struct{} // closed when the reader goroutine returns

	done      chan struct{} // closed by shutdown
	closeOnce sync.Once
	cause     error     // why the conn was closed; written before done is closed
	endOnce   sync.Once // the end of the connection is reported once, and not after Close

	oversizedN atomic.Int64
}

// newStreamConn returns a stream conn; the caller starts its reader with go c.readLoop().
func newStreamConn(r io.Reader, w io.Writer, closeFn func() error, maxFrameSize int, recv Receiver, hooks streamHooks) *streamConn {
	if maxFrameSize <= 0 {
		maxFrameSize = DefaultMaxMessageSize
	}
	return &streamConn{
		w:       w,
		closeFn: closeFn,
		max:     maxFrameSize,
		hooks:   hooks,
		recv:    recv,
		wsem:    make(chan struct{}, 1),
		lines:   lineReader{src: r},
		readEnd: make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// maxPooledBuffer bounds the buffers kept in a pool for the next user.
const maxPooledBuffer = 64 << 10

// writeBuffers hold a frame and its newline while Send writes them: connections keep none
// between Sends.
var writeBuffers = sync.Pool{New: func() any { return new([]byte) }}

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

// Send writes msg.Frame and a newline. See Stream for the outcomes.
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

	pooled := writeBuffers.Get().(*[]byte)
	buf := append((*pooled)[:0], msg.Frame...)
	buf = append(buf, '\n')
	n, werr := c.write(ctx, buf)
	if cap(buf) <= maxPooledBuffer {
		*pooled = buf[:0]
		writeBuffers.Put(pooled)
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
	broken := fmt.Errorf("%w: a partial write broke the stream: %w", ErrClosed, werr)
	c.fault(broken, broken)
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

// Close closes the stream. It is idempotent; calls after the first return nil.
func (c *streamConn) Close() error {
	c.endOnce.Do(func() {}) // the client knows
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

// fault closes the conn for cause, a fault that leaves the stream unusable, and tells the
// Receiver report.
func (c *streamConn) fault(cause, report error) {
	c.shutdown(cause)
	c.reportEnd(report)
}

// reportEnd tells the Receiver that the connection ended, once, unless the client closed it.
func (c *streamConn) reportEnd(err error) {
	c.endOnce.Do(func() { c.recv.Fail(err) })
}

// OversizedFrames reports how many incoming lines were over the size limit.
func (c *streamConn) OversizedFrames() int64 { return c.oversizedN.Load() }

// readLoop reads lines and delivers them until reading fails, then tells the Receiver the
// connection ended, unless it was closed. Once the conn is closed it drops what it reads, so that
// a peer can still flush its output and exit; reading then ends with the stream (for plain
// streams at once, since Close closed it).
func (c *streamConn) readLoop() {
	defer close(c.readEnd)
	err := c.readLines()
	c.lines.release()
	if c.isClosed() {
		return // closed by the client, which knows, or by a fault already reported
	}
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
	c.reportEnd(err)
}

func (c *streamConn) isClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *streamConn) readLines() error {
	for {
		line, over, err := c.readLine()
		switch {
		case over != nil:
			c.oversized(over, err != nil)
		case line != nil && !c.isClosed():
			c.recv.Deliver(line, "")
		}
		if err != nil {
			return err
		}
	}
}

// Read buffers. A connection reads into a small buffer of its own while its peer may be quiet,
// and into pooled ones while a line is longer than that, so that a connection waiting for its
// peer, as an idle session's does all the time, holds no large buffer: a medium one first,
// which most messages fit, and a large one for a line that fills that.
const (
	idleReadSize   = 512
	mediumReadSize = 4 << 10
	largeReadSize  = 64 << 10
)

var (
	mediumReadBuffers = sync.Pool{New: func() any { return new([mediumReadSize]byte) }}
	largeReadBuffers  = sync.Pool{New: func() any { return new([largeReadSize]byte) }}
)

// maxEmptyReads bounds the reads in a row that bring neither bytes nor an error.
const maxEmptyReads = 100

// A lineReader cuts what it reads from src into lines, as bufio.Reader.ReadSlice does, with a
// buffer that grows while a line is longer than it and shrinks back to the small one between
// lines. It must not be copied once used.
type lineReader struct {
	src     io.Reader
	small   [idleReadSize]byte
	medium  *[mediumReadSize]byte // from its pool while a line needs it
	large   *[largeReadSize]byte  // from its pool while a line needs it
	buf     []byte                // the buffer in use
	r, w    int                   // buf[r:w] was read and not yet returned
	scanned int                   // buf[r:r+scanned] holds no newline
	inLine  bool                  // the last chunk returned did not end its line
	err     error                 // what ended reading, returned once buf[r:w] is empty
}

// next returns the next line, with its newline, or a piece of a line longer than the large
// buffer, or what the stream ended with after its last newline. The chunk is valid until the next
// call. err is the error that ended reading, returned after every byte read before it.
func (l *lineReader) next() (chunk []byte, err error) {
	for empty := 0; ; {
		if i := bytes.IndexByte(l.buf[l.r+l.scanned:l.w], '\n'); i >= 0 {
			end := l.r + l.scanned + i + 1
			chunk = l.buf[l.r:end]
			l.r, l.scanned, l.inLine = end, 0, false
			return chunk, nil
		}
		l.scanned = l.w - l.r
		if l.r < l.w && (l.err != nil || l.w-l.r == largeReadSize) {
			chunk = l.buf[l.r:l.w]
			l.r, l.scanned, l.inLine = l.w, 0, true
			return chunk, nil
		}
		if l.err != nil {
			return nil, l.err
		}
		if l.fill() {
			empty = 0
		} else if empty++; empty == maxEmptyReads {
			l.err = io.ErrNoProgress
		}
	}
}

// fill reads once, into the small buffer between lines, and behind what is unread otherwise,
// moving it to the front of its buffer, or to a larger buffer when it fills its own. It reports
// whether the read brought bytes.
func (l *lineReader) fill() bool {
	unread := l.w - l.r
	switch {
	case unread == 0 && !l.inLine:
		l.release()
		l.buf = l.small[:]
	case unread == 0:
		l.r, l.w = 0, 0 // a line longer than the large buffer goes on in it
	case l.w < len(l.buf):
		// Room behind what is unread.
	case l.r > 0:
		copy(l.buf, l.buf[l.r:l.w])
		l.r, l.w = 0, unread
	case l.medium == nil && l.large == nil:
		l.medium = mediumReadBuffers.Get().(*[mediumReadSize]byte)
		copy(l.medium[:], l.buf[:l.w])
		l.buf = l.medium[:]
	default:
		l.large = largeReadBuffers.Get().(*[largeReadSize]byte)
		copy(l.large[:], l.buf[:l.w])
		l.buf = l.large[:]
		mediumReadBuffers.Put(l.medium)
		l.medium = nil
	}
	n, err := l.src.Read(l.buf[l.w:])
	l.w += n
	l.err = err
	return n > 0
}

// readSmall reads once into the small buffer, for a reader that wants no lines. The bytes are
// valid until the next call.
func (l *lineReader) readSmall() ([]byte, error) {
	n, err := l.src.Read(l.small[:])
	return l.small[:n], err
}

// release returns the pooled buffers the reader holds, and what was read into them with them.
func (l *lineReader) release() {
	if l.medium != nil {
		mediumReadBuffers.Put(l.medium)
		l.medium = nil
	}
	if l.large != nil {
		largeReadBuffers.Put(l.large)
		l.large = nil
	}
	l.buf, l.r, l.w, l.scanned = nil, 0, 0, 0
}

// An oversizedLine is what is kept of a line over the limit: its length, and what was read of
// its JSON-RPC envelope.
type oversizedLine struct {
	n    int
	skim jsonrpc.Skimmer
}

// readLine returns the next line worth delivering, nil for an empty one, or what was read of a
// line over the limit; and the error that ended the stream, if it did.
//
// A line longer than a read buffer is kept as the pieces it was read in, each copied once, and
// joined into one slice of its exact length when it ends within the limit: a slice grown by
// append would copy it over and over, leaving several times the limit of garbage behind a line
// that turns out to be over it. Once the pieces pass the limit they are dropped, and the rest of
// the line is only skimmed.
func (c *streamConn) readLine() (line []byte, over *oversizedLine, err error) {
	var pieces [][]byte
	n := 0 // bytes of the line read so far, its line terminator included
	for {
		chunk, err := c.lines.next()
		n += len(chunk)
		ended := err != nil || endsLine(chunk)
		switch {
		case over != nil:
			over.skim.Write(chunk)
		case n-2 > c.max: // room for "\r\n"
			over = new(oversizedLine)
			for _, p := range pieces {
				over.skim.Write(p)
			}
			over.skim.Write(chunk)
			pieces = nil
		case !ended:
			pieces = append(pieces, bytes.Clone(chunk))
		default:
			line = joinLine(pieces, chunk, n)
		}
		if !ended {
			continue
		}
		if over != nil {
			over.n = n
			return nil, over, err
		}
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

// joinLine returns the pieces of a line and its last chunk in one new slice of n bytes, or nil
// for a line of no bytes.
func joinLine(pieces [][]byte, last []byte, n int) []byte {
	if n == 0 {
		return nil
	}
	line := make([]byte, 0, n)
	for _, p := range pieces {
		line = append(line, p...)
	}
	return append(line, last...)
}

func endsLine(chunk []byte) bool { return len(chunk) > 0 && chunk[len(chunk)-1] == '\n' }

// oversized settles a line over the limit (see Stream): the requests it answers end with
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
		// Reading goes on, dropping what comes, until the stream closes: a server process must
		// not block on a full stdout while it is being shut down.
		c.fault(fmt.Errorf("%w: %w", ErrClosed, tooLarge), &Error{Outcome: Uncertain, Err: tooLarge})
		return
	}
	for _, id := range ids {
		if c.isClosed() {
			return
		}
		c.recv.Fail(&Error{Outcome: Uncertain, ID: id,
			Err: fmt.Errorf("%w: the answer is a line of %d bytes, over the limit of %d", ErrMessageTooLarge, over.n, c.max)})
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
