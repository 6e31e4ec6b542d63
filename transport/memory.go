package transport

import (
	"bytes"
	"context"
	"errors"
	"sync"
)

// A SendHook sees every frame a client sends over an in-memory connection before the server
// does, to inject faults. deliver says whether the server receives the frame; err, if not nil,
// is what Send returns. So (false, NotDelivered error) models a refused dial, (true, Uncertain
// error) a reset after the bytes left, and (false, nil) a frame lost without a trace.
type SendHook func(msg *Message) (deliver bool, err error)

// Memory is a [Transport] whose connections are in-process pipes to a server, such as
// mcptest's. The zero value is not usable: Accept must be set.
type Memory struct {
	// Accept receives the server end of every new connection and owns it from then on. An
	// error fails Connect with a NotDelivered *Error.
	Accept func(server *MemoryConn) error

	// BeforeSend, if set, is installed on the client end of every new connection.
	BeforeSend SendHook
}

// Connect opens a new pipe delivering to r and hands its server end to m.Accept.
func (m *Memory) Connect(ctx context.Context, r Receiver) (Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, &Error{Outcome: NotDelivered, Err: err}
	}
	client, server := newPipe(r)
	client.hook = m.BeforeSend
	if err := m.Accept(server); err != nil {
		client.Close()
		return nil, &Error{Outcome: NotDelivered, Err: err}
	}
	return client, nil
}

// Pipe returns the two ends of a new in-memory connection, for a server scripted by hand.
//
// What the client end sends, the server end's Receive returns, in order and as private copies;
// up to 16 frames wait there, and a client sending more waits for the server, the backpressure
// a socket would give. What the server end sends, and the exchange failures it reports, go to r
// within the server's call, on the server's goroutine: the frames of one goroutine arrive in
// order, each as a private copy, and a server goroutine waits while r holds a frame up.
//
// Closing either end closes both; when the server end closes first, r learns that the connection
// ended, with ErrClosed.
func Pipe(r Receiver) (client Conn, server *MemoryConn) {
	return newPipe(r)
}

func newPipe(r Receiver) (*memoryClientConn, *MemoryConn) {
	p := &pipe{done: make(chan struct{}), toServer: make(chan []byte, pipeBuffer), recv: r}
	return &memoryClientConn{pipe: p}, &MemoryConn{pipe: p}
}

// pipeBuffer bounds the frames waiting for the server; a full pipe blocks the client's Send.
const pipeBuffer = 16

type pipe struct {
	done     chan struct{}
	once     sync.Once
	toServer chan []byte
	recv     Receiver // the client's
}

// close closes the pipe and reports whether this call did.
func (p *pipe) close() bool {
	closed := false
	p.once.Do(func() {
		close(p.done)
		closed = true
	})
	return closed
}

func (p *pipe) isClosed() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// memoryClientConn is the client end of a pipe.
type memoryClientConn struct {
	pipe *pipe
	hook SendHook // set before the conn is shared
}

// Send queues a copy of msg.Frame for the server, after the SendHook if one is installed.
func (c *memoryClientConn) Send(ctx context.Context, msg *Message) error {
	var hookErr error
	if c.hook != nil {
		var deliver bool
		deliver, hookErr = c.hook(msg)
		if !deliver {
			return hookErr
		}
	}
	if c.pipe.isClosed() {
		return &Error{Outcome: NotDelivered, Err: ErrClosed}
	}
	select {
	case c.pipe.toServer <- bytes.Clone(msg.Frame):
		return hookErr
	case <-c.pipe.done:
		return &Error{Outcome: NotDelivered, Err: ErrClosed}
	case <-ctx.Done():
		return &Error{Outcome: NotDelivered, Err: ctx.Err()}
	}
}

// Close closes both ends of the pipe. It is idempotent.
func (c *memoryClientConn) Close() error {
	c.pipe.close()
	return nil
}

// MemoryConn is the server end of an in-memory connection (see [Pipe]).
type MemoryConn struct {
	pipe *pipe
}

// Send hands a copy of msg.Frame to the client end's Receiver, and returns once it has taken it.
func (c *MemoryConn) Send(ctx context.Context, msg *Message) error {
	if err := c.check(ctx); err != nil {
		return err
	}
	c.pipe.recv.Deliver(bytes.Clone(msg.Frame), "")
	return nil
}

// FailExchange reports e to the client end's Receiver, as a network transport does when the
// exchange of one request broke. e.ID must name the request. It is how an in-memory server
// drops a reply, refuses a frame, or reports a lost session.
func (c *MemoryConn) FailExchange(ctx context.Context, e *Error) error {
	if e == nil || e.ID == "" {
		return errors.New("transport: FailExchange needs an *Error with an ID")
	}
	if err := c.check(ctx); err != nil {
		return err
	}
	c.pipe.recv.Fail(e)
	return nil
}

func (c *MemoryConn) check(ctx context.Context) error {
	if c.pipe.isClosed() {
		return &Error{Outcome: NotDelivered, Err: ErrClosed}
	}
	if err := ctx.Err(); err != nil {
		return &Error{Outcome: NotDelivered, Err: err}
	}
	return nil
}

// Receive returns the next frame the client sent. Frames already queued when the pipe closes are
// still returned before ErrClosed.
func (c *MemoryConn) Receive(ctx context.Context) ([]byte, error) {
	select {
	case frame := <-c.pipe.toServer:
		return frame, nil
	case <-c.pipe.done:
		select {
		case frame := <-c.pipe.toServer:
			return frame, nil
		default:
			return nil, ErrClosed
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close closes both ends of the pipe, and tells the client end's Receiver that the connection
// ended unless the client end had closed it first. It is idempotent.
func (c *MemoryConn) Close() error {
	if c.pipe.close() {
		c.pipe.recv.Fail(ErrClosed)
	}
	return nil
}

// Done returns a channel that is closed when the pipe closes, from either end. It is never
// sent on.
func (c *MemoryConn) Done() <-chan struct{} { return c.pipe.done }
