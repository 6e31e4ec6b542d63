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

// Connect opens a new pipe and hands its server end to m.Accept.
func (m *Memory) Connect(ctx context.Context) (Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, &Error{Outcome: NotDelivered, Err: err}
	}
	client, server := Pipe()
	client.hook = m.BeforeSend
	if err := m.Accept(server); err != nil {
		client.Close()
		return nil, &Error{Outcome: NotDelivered, Err: err}
	}
	return client, nil
}

// Pipe returns the two ends of a new in-memory connection. Frames sent on one end arrive, in
// order and as private copies, at the other. Closing either end closes both.
func Pipe() (client, server *MemoryConn) {
	p := &pipe{done: make(chan struct{})}
	toServer := make(chan delivery, pipeBuffer)
	toClient := make(chan delivery, pipeBuffer)
	client = &MemoryConn{pipe: p, in: toClient, out: toServer}
	server = &MemoryConn{pipe: p, in: toServer, out: toClient}
	return client, server
}

// pipeBuffer bounds the frames in flight in each direction; a full pipe blocks the sender,
// which is the backpressure a socket would give.
const pipeBuffer = 16

type pipe struct {
	done chan struct{}
	once sync.Once
}

type delivery struct {
	frame []byte
	err   *Error
}

// MemoryConn is one end of an in-memory connection. It implements [Conn].
type MemoryConn struct {
	pipe *pipe
	in   <-chan delivery
	out  chan<- delivery
	hook SendHook // client end only; set before the conn is shared
}

// Send delivers a copy of msg.Frame to the other end, after the SendHook if one is installed.
func (c *MemoryConn) Send(ctx context.Context, msg *Message) error {
	var hookErr error
	if c.hook != nil {
		var deliver bool
		deliver, hookErr = c.hook(msg)
		if !deliver {
			return hookErr
		}
	}
	if err := c.push(ctx, delivery{frame: bytes.Clone(msg.Frame)}); err != nil {
		return err
	}
	return hookErr
}

// FailExchange makes the other end's Receive return e, as a network transport does when the
// exchange of one request broke. e.ID must name the request. It is how an in-memory server
// drops a reply, refuses a frame, or reports a lost session.
func (c *MemoryConn) FailExchange(ctx context.Context, e *Error) error {
	if e == nil || e.ID == "" {
		return errors.New("transport: FailExchange needs an *Error with an ID")
	}
	return c.push(ctx, delivery{err: e})
}

func (c *MemoryConn) push(ctx context.Context, d delivery) error {
	select {
	case <-c.pipe.done:
		return &Error{Outcome: NotDelivered, Err: ErrClosed}
	default:
	}
	select {
	case c.out <- d:
		return nil
	case <-c.pipe.done:
		return &Error{Outcome: NotDelivered, Err: ErrClosed}
	case <-ctx.Done():
		return &Error{Outcome: NotDelivered, Err: ctx.Err()}
	}
}

// Receive returns the next frame sent by the other end, or the next exchange failure it
// reported. Frames already queued when the pipe closes are still returned before ErrClosed.
func (c *MemoryConn) Receive(ctx context.Context) ([]byte, error) {
	select {
	case d := <-c.in:
		return d.unpack()
	case <-c.pipe.done:
		select {
		case d := <-c.in:
			return d.unpack()
		default:
			return nil, ErrClosed
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (d delivery) unpack() ([]byte, error) {
	if d.err != nil {
		return nil, d.err
	}
	return d.frame, nil
}

// Close closes both ends of the pipe. It is idempotent.
func (c *MemoryConn) Close() error {
	c.pipe.once.Do(func() { close(c.pipe.done) })
	return nil
}

// Done returns a channel that is closed when the pipe closes, from either end. It is never
// sent on.
func (c *MemoryConn) Done() <-chan struct{} { return c.pipe.done }
