// Package flight runs one call per key at a time: the callers that come while it runs wait for
// it and share its result.
//
// A call ends on every path: a return, a panic or runtime.Goexit in fn all publish its end and
// free its key, so that no waiter is left waiting on a call nobody will finish.
package flight

import (
	"context"
	"errors"
	"sync"
)

// ErrPanicked is what the waiters of a call get when fn panicked or ended its goroutine rather
// than returning: there is no result to share, and the panic is the business of the goroutine
// that ran fn, which it goes on unwinding.
var ErrPanicked = errors.New("flight: the shared call panicked or ended its goroutine")

// ErrStopped is what a waiter gets when its stop channel closed before the call ended.
var ErrStopped = errors.New("flight: stopped while waiting for the shared call")

// A Group runs one call per key at a time. The zero Group is ready to use; it must not be copied.
type Group[K comparable, V any] struct {
	mu sync.Mutex
	// running lists the calls running, newest first. A list rather than a map: a group seldom
	// runs calls for more than a key or two at once, and a call then costs no map. guarded by
	// mu.
	running *call[K, V]
}

type call[K comparable, V any] struct {
	key  K
	next *call[K, V] // the next in the Group's list; guarded by its mu
	// done, made by the first waiter (under the Group's mu), is closed once the call has ended,
	// however it ended: a call nobody waits for makes no channel.
	done chan struct{}
	// Written by the goroutine running fn before done is closed, read by waiters after.
	val V
	err error
	// returned: fn returned rather than panicking or ending its goroutine.
	returned bool
	// leaderCancelled: fn returned an error once the context of the caller running it had
	// ended. The error is that caller's news, very likely its own cancellation; a waiter must
	// not take it for the call's result.
	leaderCancelled bool
}

// find returns the call running for key, or nil. g.mu is held.
func (g *Group[K, V]) find(key K) *call[K, V] {
	for c := g.running; c != nil; c = c.next {
		if c.key == key {
			return c
		}
	}
	return nil
}

// remove takes c off the list of running calls. g.mu is held.
func (g *Group[K, V]) remove(c *call[K, V]) {
	for p := &g.running; *p != nil; p = &(*p).next {
		if *p == c {
			*p = c.next
			return
		}
	}
}

// Do runs fn and returns its result, unless a call for key is running already: then it waits
// for that call and returns its result instead. A waiter stops waiting, whichever comes first,
// when the call ends, when its own ctx ends (with ctx.Err()) or when the channel stop returns
// closes (with ErrStopped). stop may be nil; it is called only by a caller that waits, so a
// caller that runs fn need not make a channel.
//
// A waiter whose call ended in a panic or runtime.Goexit gets ErrPanicked; the panic itself goes
// on unwinding the goroutine that ran fn. A waiter whose call returned an error after the
// context of its caller ended does not get that error: it tries again, running fn itself unless
// another call has started.
func (g *Group[K, V]) Do(ctx context.Context, stop func() <-chan struct{}, key K, fn func() (V, error)) (V, error) {
	var zero V
	for {
		g.mu.Lock()
		c := g.find(key)
		if c == nil {
			c = &call[K, V]{key: key, next: g.running}
			g.running = c
			g.mu.Unlock()
			g.run(ctx, c, fn)
			return c.val, c.err
		}
		if c.done == nil {
			c.done = make(chan struct{})
		}
		done := c.done
		g.mu.Unlock()

		var stopped <-chan struct{}
		if stop != nil {
			stopped = stop()
		}
		select {
		case <-done:
		case <-ctx.Done():
			return zero, ctx.Err()
		case <-stopped:
			return zero, ErrStopped
		}
		switch {
		case !c.returned:
			return zero, ErrPanicked
		case c.leaderCancelled:
			continue
		}
		return c.val, c.err
	}
}

// run runs fn as the call c, and ends c in a deferred function, so that a panic or
// runtime.Goexit in fn ends it too.
func (g *Group[K, V]) run(ctx context.Context, c *call[K, V], fn func() (V, error)) {
	defer func() {
		g.mu.Lock()
		g.remove(c)
		done := c.done
		g.mu.Unlock()
		if done != nil {
			close(done)
		}
	}()
	c.val, c.err = fn()
	c.leaderCancelled = c.err != nil && ctx.Err() != nil
	c.returned = true
}
