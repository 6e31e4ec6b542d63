package mcptest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/northstar-mcp/mcpclient/transport"
)

// maxStreamLine bounds a line ServeStream reads, without its terminator.
const maxStreamLine = transport.DefaultMaxMessageSize

// ServeStream serves one client over a byte stream, as an MCP server does over stdio: it reads
// newline-delimited JSON-RPC from r and writes what the server sends to w, a message a line. The
// connection is a session of the server like one made through Transport, with the same tools,
// receipts and faults. A program that calls ServeStream with os.Stdin and os.Stdout is a server
// that transport.Command can run.
//
// Each line is one frame (a message or a batch); a "\r" before its newline is dropped, and blank
// lines are skipped. A line longer than 64 MiB (transport.DefaultMaxMessageSize) is not served:
// it ends ServeStream with an error wrapping transport.ErrMessageTooLarge. Each message written
// to w takes one Write call, one at a time; a failed write ends ServeStream with its error.
//
// A byte stream has no way to say that an exchange broke. A request the server refuses before it
// runs (a Fail fault, an expired or unknown session, a request before initialize such as
// server/discover) is answered with a JSON-RPC error. A request whose exchange a fault or a
// Restart breaks (DropBeforeExecution, DropAfterExecution) gets no answer, as from a server that
// lost it: the client's call ends by its own timeout (mcpclient.WithTimeouts) or with the stream.
//
// When r ends, the requests still running finish and their answers are written (the server's
// own requests to the client fail: nothing can answer them), and ServeStream returns nil. It
// returns ctx's cause when ctx ends, and an error when reading or writing fails, a line is too
// long or the server closes. By then the connection is closed and nothing more is written to w.
// Requests still running are the server's: their answers are dropped, and Close cancels them and
// waits for them.
//
// The end of ctx (or of the server, or a failed write) interrupts a Read of r in progress
// through a read deadline when r has a SetReadDeadline method (os.Pipe files, net.Conn), and
// otherwise by closing r if it is an io.Closer (io.PipeReader); a Write in progress is
// interrupted through a write deadline when w has SetWriteDeadline. Deadlines set so are cleared
// before ServeStream returns. A Read or Write that nothing interrupts is waited for.
func (s *Server) ServeStream(ctx context.Context, r io.Reader, w io.Writer) error {
	ctx, end := context.WithCancelCause(ctx)
	defer end(nil)
	out := &streamWriter{w: w, end: end, log: s.log}
	// What the server sends goes through the pipe's server end to out; what the client sends
	// is handed to the connection as it is read, and the pipe's client end only closes the pipe.
	client, server := transport.Pipe(out)
	c := &conn{srv: s, mc: server, stream: true}
	if !s.addConn(c, false) {
		client.Close()
		return errServerClosed
	}
	in := &streamInterrupt{r: r, w: w, done: make(chan struct{})}
	stopInterrupt := context.AfterFunc(ctx, in.interrupt)

	err := readStream(r, c)
	if err == nil {
		c.loseSession()
		err = c.awaitIdle(ctx)
	}
	if ctx.Err() != nil {
		// Reading or waiting was interrupted: report why.
		err = context.Cause(ctx)
	}
	client.Close() // first, so that the server end's close is no news for out
	c.finish()
	out.close()
	if !stopInterrupt() {
		<-in.done
		in.clear()
	}
	return err
}

// readStream hands each line of r to c until r ends (nil) or reading fails.
func readStream(r io.Reader, c *conn) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxStreamLine+len("\r\n"))
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) > maxStreamLine {
			return tooLong()
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		// The scanner reuses its buffer; the connection keeps what it decodes.
		c.onFrame(bytes.Clone(line))
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return tooLong()
	}
	return sc.Err()
}

func tooLong() error {
	return fmt.Errorf("mcptest: a line of more than %d bytes on the stream: %w", maxStreamLine, transport.ErrMessageTooLarge)
}

// A streamWriter is the Receiver of ServeStream's connection: it writes what the server sends
// to the stream.
type streamWriter struct {
	w   io.Writer
	end context.CancelCauseFunc // ends ServeStream, with the cause
	log *slog.Logger

	mu     sync.Mutex // one Write at a time
	closed bool       // nothing more is written; guarded by mu
}

// Deliver writes frame and a newline in one Write.
func (sw *streamWriter) Deliver(frame []byte, _ string) bool {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.closed {
		return false
	}
	// The frame is the Receiver's: its spare capacity may take the newline.
	if _, err := sw.w.Write(append(frame, '\n')); err != nil {
		sw.closed = true
		sw.end(fmt.Errorf("mcptest: writing the stream: %w", err))
	}
	return false
}

// Fail drops the answer of a broken exchange, which a byte stream cannot report, and ends
// ServeStream when the server ended the connection.
func (sw *streamWriter) Fail(err error) {
	var e *transport.Error
	if errors.As(err, &e) && e.ID != "" {
		sw.log.Debug("mcptest: no answer on the stream, which cannot report a broken exchange", "id", e.ID, "err", e.Err)
		return
	}
	sw.end(fmt.Errorf("mcptest: the server ended the connection: %w", err))
}

// close waits for a Write in progress and makes sure none follows.
func (sw *streamWriter) close() {
	sw.mu.Lock()
	sw.closed = true
	sw.mu.Unlock()
}

// aLongTimeAgo is a deadline in the past, which interrupts a blocked Read or Write at once.
var aLongTimeAgo = time.Unix(1, 0)

// A streamInterrupt ends a Read and a Write in progress on ServeStream's stream.
type streamInterrupt struct {
	r    io.Reader
	w    io.Writer
	done chan struct{} // closed when interrupt has returned

	readDeadline, writeDeadline bool // set by interrupt, for clear
}

func (i *streamInterrupt) interrupt() {
	defer close(i.done)
	if d, ok := i.r.(interface{ SetReadDeadline(time.Time) error }); ok && d.SetReadDeadline(aLongTimeAgo) == nil {
		i.readDeadline = true
	} else if c, ok := i.r.(io.Closer); ok {
		c.Close()
	}
	if d, ok := i.w.(interface{ SetWriteDeadline(time.Time) error }); ok && d.SetWriteDeadline(aLongTimeAgo) == nil {
		i.writeDeadline = true
	}
}

// clear removes the deadlines interrupt set, once it has returned.
func (i *streamInterrupt) clear() {
	if i.readDeadline {
		i.r.(interface{ SetReadDeadline(time.Time) error }).SetReadDeadline(time.Time{})
	}
	if i.writeDeadline {
		i.w.(interface{ SetWriteDeadline(time.Time) error }).SetWriteDeadline(time.Time{})
	}
}
