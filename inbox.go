package mcpclient

import (
	"context"
	"sync"

	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
)

// An inbox carries notifications and server requests from a session's reader to its dispatcher,
// so that handlers never stall the routing of responses.
//
// Up to its soft limits (in messages and in bytes) it is a plain bounded queue: a reader
// that finds it full waits, the backpressure a slow handler deserves. Waiting is only safe while
// no call awaits an answer, though: a handler may itself call the Client (a list_changed handler
// listing tools, a sampling handler asking for a resource) and wait for an answer that only the
// reader can route. So while any call awaits an answer the reader goes on queueing, up to
// its hard limit in bytes; past that the server is flooding the client and the session ends with
// ErrInboundOverflow. An empty inbox takes any message: the transport has already bounded its
// size, and a message larger than the limits must still reach its handler.
type inbox struct {
	mu      sync.Mutex
	msgs    []jsonrpc.Message // oldest first; guarded by mu
	bytes   int               // the sizes of msgs; guarded by mu
	closed  bool              // guarded by mu
	running bool              // a dispatcher is emptying the inbox; guarded by mu

	// changed is signalled when the dispatcher takes a message or a call starts awaiting an
	// answer: a waiting reader looks again. Made by the first put, since only a non-empty inbox
	// makes a reader wait; an idle session that never hears from the server holds no channel.
	// guarded by mu.
	changed chan struct{}
}

// inboxLimits bound an inbox: soft, the messages and bytes queued before the reader waits for
// room; hardBytes, the bytes queued while a call awaits an answer.
type inboxLimits struct {
	soft, softBytes, hardBytes int
}

// The limits of every session's inbox, unless a test says otherwise.
const (
	inboxSoftLimit      = 64
	inboxSoftLimitBytes = 16 << 20
	inboxHardLimitBytes = 64 << 20
)

// inboxOverhead is what a queued message costs beyond its raw fields.
const inboxOverhead = 128

// signal wakes a reader waiting for room.
func (b *inbox) signal() {
	b.mu.Lock()
	ch := b.changed
	b.mu.Unlock()
	if ch != nil {
		signal(ch)
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// put queues m for the dispatcher within limits (the client's, which the inbox does not keep:
// every session would carry the pointer), waiting for room while awaiting reports that no call
// awaits an answer, and calls start when no dispatcher is running: an idle session keeps no
// goroutine. It fails with ctx's error, or with ErrInboundOverflow. A closed inbox drops m.
func (b *inbox) put(ctx context.Context, m jsonrpc.Message, limits *inboxLimits, awaiting func() bool, start func()) error {
	size := len(m.ID) + len(m.Method) + len(m.Params) + inboxOverhead
	for {
		spill := awaiting()
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return nil
		}
		if b.changed == nil {
			b.changed = make(chan struct{}, 1)
		}
		changed := b.changed
		roomy := len(b.msgs) < limits.soft && b.bytes+size <= limits.softBytes
		if len(b.msgs) == 0 || roomy || (spill && b.bytes+size <= limits.hardBytes) {
			b.msgs = append(b.msgs, m)
			b.bytes += size
			if !b.running {
				// Under mu: close, which the session's end calls before it lets the client's
				// WaitGroup go, then waits for the dispatcher to be counted.
				b.running = true
				start()
			}
			b.mu.Unlock()
			return nil
		}
		b.mu.Unlock()
		if spill {
			return ErrInboundOverflow
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// next returns the oldest message; ok is false when there is none, and the dispatcher that asked
// must then end (the next put starts another).
func (b *inbox) next() (m jsonrpc.Message, ok bool) {
	b.mu.Lock()
	if len(b.msgs) == 0 {
		b.running = false
		b.mu.Unlock()
		return jsonrpc.Message{}, false
	}
	m = b.msgs[0]
	b.msgs[0] = jsonrpc.Message{} // the backing array must not pin it
	b.msgs = b.msgs[1:]
	b.bytes -= len(m.ID) + len(m.Method) + len(m.Params) + inboxOverhead
	if len(b.msgs) == 0 {
		b.msgs = nil // let a spilled backlog's array go
	}
	ch := b.changed
	b.mu.Unlock()
	signal(ch)
	return m, true
}

// close makes put drop what comes later; what is queued is still dispatched.
func (b *inbox) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
}
