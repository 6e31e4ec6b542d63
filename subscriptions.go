package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/northstar-mcp/mcpclient/internal/metakeys"
)

// SubscriptionFilter says which notifications a subscription asks for; the server sends no
// others.
type SubscriptionFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
	// TaskIDs asks for notifications/tasks of these tasks of the tasks extension (package
	// tasks reads them with WithStatusHandler); the listen request then declares the
	// extension, which the server requires of it.
	TaskIDs []string `json:"taskIds,omitempty"`
}

// A Subscription is an open subscriptions/listen request (2026-07-28): until it ends, the
// notifications it asked for reach the client's handlers (WithNotificationHandler,
// WithResourceUpdatedHandler) and its own bookkeeping (a tools list_changed empties the
// ListTools cache).
type Subscription struct {
	// Acknowledged is the part of the filter the server agreed to honour.
	Acknowledged SubscriptionFilter

	cancel context.CancelFunc
	done   chan struct{} // closed when the listen request ends; err is set before
	err    error
}

// Done returns a channel closed when the subscription ends. It is never sent on.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Err returns why the subscription ended: nil when the server closed it gracefully or Close
// ended it, an *Error otherwise. It is nil while the subscription runs.
func (s *Subscription) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Close ends the subscription (on HTTP by closing its stream, elsewhere with
// notifications/cancelled) and waits until it has ended. It is idempotent.
func (s *Subscription) Close() error {
	s.cancel()
	<-s.done
	return nil
}

// acks delivers notifications/subscriptions/acknowledged to the Listen call waiting for it.
type acks struct {
	mu      sync.Mutex
	waiting map[string]chan SubscriptionFilter // subscription (request) id -> waiter
}

func (a *acks) wait(id string) (chan SubscriptionFilter, func()) {
	ch := make(chan SubscriptionFilter, 1)
	a.mu.Lock()
	if a.waiting == nil {
		a.waiting = make(map[string]chan SubscriptionFilter)
	}
	a.waiting[id] = ch
	a.mu.Unlock()
	return ch, func() {
		a.mu.Lock()
		delete(a.waiting, id)
		a.mu.Unlock()
	}
}

func (a *acks) deliver(params json.RawMessage) {
	var p struct {
		Meta          map[string]json.RawMessage `json:"_meta"`
		Notifications SubscriptionFilter         `json:"notifications"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	var id ID
	if json.Unmarshal(p.Meta[metakeys.SubscriptionID], &id) != nil {
		return
	}
	a.mu.Lock()
	ch := a.waiting[id.JSON()]
	a.mu.Unlock()
	if ch != nil {
		select {
		case ch <- p.Notifications:
		default:
		}
	}
}

// Listen opens a subscription for the notifications filter asks for, and returns once the
// server acknowledged it. It runs until ctx ends, Close is called, or the server ends it. A
// stream that breaks is listened to again under a new id (listening is safe to repeat) within
// the client's retry policy; after that the subscription ends with the error, and the caller
// may Listen again. It fails with ErrNotStateless in the older revisions, where Subscribe and
// the notification handlers serve.
func (c *Client) Listen(ctx context.Context, filter SubscriptionFilter) (*Subscription, error) {
	if !c.stateless() {
		return nil, returned(&Error{Code: CodeInvalidArgument, Err: fmt.Errorf("%w: use Subscribe", ErrNotStateless)})
	}
	var opts []CallOption
	if len(filter.TaskIDs) > 0 {
		opts = append(opts, WithExtension(tasksExtension, nil))
	}
	req, err := c.newRequest("subscriptions/listen", struct {
		Notifications SubscriptionFilter `json:"notifications"`
	}{filter}, opts)
	if err != nil {
		return nil, returned(err)
	}
	ack, stopWaiting := c.acks.wait(req.key)
	defer stopWaiting()
	runCtx, cancel := context.WithCancel(c.lifetime())
	sub := &Subscription{cancel: cancel, done: make(chan struct{})}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cancel()
		return nil, returned(&Error{Code: CodeClosed, Err: ErrClosed})
	}
	c.wg.Add(2) // the subscription's goroutines end before Close returns
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		defer close(sub.done)
		defer cancel()
		_, err := c.do(runCtx, req)
		if err != nil && runCtx.Err() == nil {
			sub.err = returned(err)
		}
	}()
	select {
	case sub.Acknowledged = <-ack:
		go func() { // the caller's context bounds the subscription too
			defer c.wg.Done()
			select {
			case <-ctx.Done():
				cancel()
			case <-sub.done:
			}
		}()
		return sub, nil
	case <-sub.done:
		c.wg.Done() // the watcher never started
		if sub.err != nil {
			return nil, sub.err
		}
		return nil, returned(&Error{Code: CodeProtocol, Request: req, Err: errors.New("the subscription ended before it was acknowledged")})
	case <-ctx.Done():
		c.wg.Done() // the watcher never started
		sub.Close()
		return nil, returned(&Error{Code: CodeOutcomeUnknown, Request: req, Err: context.Cause(ctx)})
	}
}
