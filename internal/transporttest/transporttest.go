// Package transporttest holds what the tests of transports share: a Receiver that queues what a
// connection delivers, for a test to take in order, as a client reading its connection by hand
// would.
package transporttest

import (
	"bytes"
	"context"
	"sync"

	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
)

// Queue is a transport.Receiver that keeps every frame and failure it is given, in order, for
// Receive. It never blocks a connection. The zero value is ready to use.
type Queue struct {
	mu    sync.Mutex
	items []item        // guarded by mu
	ready chan struct{} // signalled when an item is added; made on first use
}

type item struct {
	frame []byte
	err   error
}

// Deliver queues frame and reports whether it holds a response to awaited.
func (q *Queue) Deliver(frame []byte, awaited string) bool {
	q.add(item{frame: frame})
	return Answers(frame, awaited)
}

// Fail queues err.
func (q *Queue) Fail(err error) { q.add(item{err: err}) }

func (q *Queue) add(it item) {
	q.mu.Lock()
	q.items = append(q.items, it)
	ready := q.readyLocked()
	q.mu.Unlock()
	select {
	case ready <- struct{}{}:
	default:
	}
}

func (q *Queue) readyLocked() chan struct{} {
	if q.ready == nil {
		q.ready = make(chan struct{}, 1)
	}
	return q.ready
}

// Receive returns the next frame delivered, or the next failure, waiting for one within ctx.
func (q *Queue) Receive(ctx context.Context) ([]byte, error) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			it := q.items[0]
			q.items = q.items[1:]
			q.mu.Unlock()
			return it.frame, it.err
		}
		ready := q.readyLocked()
		q.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Len returns how many frames and failures wait to be received.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// Answers reports whether frame holds a response to the request whose id has the JSON text id,
// as a client's Receiver reports it.
func Answers(frame []byte, id string) bool {
	if id == "" || !bytes.Contains(frame, []byte(id)) {
		return false
	}
	msgs, err := jsonrpc.Decode(frame)
	if err != nil {
		return false
	}
	for _, m := range msgs {
		if m.Kind() == jsonrpc.KindResponse && string(bytes.TrimSpace(m.ID)) == id {
			return true
		}
	}
	return false
}
