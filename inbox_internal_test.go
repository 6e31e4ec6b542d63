package mcpclient

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
)

// limitedInbox is an inbox bounded by limits of its own, as a session's is by its client's.
type limitedInbox struct {
	inbox
	limits inboxLimits
}

func newInbox(limits inboxLimits) *limitedInbox { return &limitedInbox{limits: limits} }

func (b *limitedInbox) put(ctx context.Context, m jsonrpc.Message, awaiting func() bool, start func()) error {
	return b.inbox.put(ctx, m, &b.limits, awaiting, start)
}

// inboxMsg is a notification whose params take n bytes.
func inboxMsg(n int) jsonrpc.Message {
	return jsonrpc.Message{Method: "notifications/message", Params: []byte(`"` + strings.Repeat("x", n-2) + `"`)}
}

// The queue for handlers is bounded in bytes as well as in messages: a server sending large
// notifications to a slow handler is held back long before 64 of them are queued, and any one
// message the transport accepted fits into an empty queue.
func TestInboxIsBoundedInBytes(t *testing.T) {
	const mib = 1 << 20
	limits := inboxLimits{soft: inboxSoftLimit, softBytes: 2 * mib, hardBytes: 4 * mib}
	notAwaiting := func() bool { return false }
	awaiting := func() bool { return true }
	noDispatcher := func() {}

	t.Run("backpressure", func(t *testing.T) {
		b := newInbox(limits)
		ctx := context.Background()
		if err := b.put(ctx, inboxMsg(3*mib), notAwaiting, noDispatcher); err != nil {
			t.Fatalf("a message over the soft limit into an empty inbox: %v", err)
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if err := b.put(short, inboxMsg(mib), notAwaiting, noDispatcher); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a second message past the soft limit: %v, want the reader held back", err)
		}
		if _, ok := b.next(); !ok {
			t.Fatal("the queued message is gone")
		}
		if err := b.put(ctx, inboxMsg(mib), notAwaiting, noDispatcher); err != nil {
			t.Fatalf("after the dispatcher took the message: %v", err)
		}
	})
	t.Run("spill", func(t *testing.T) {
		b := newInbox(limits)
		ctx := context.Background()
		if err := b.put(ctx, inboxMsg(5*mib), awaiting, noDispatcher); err != nil {
			t.Fatalf("a message over the hard limit into an empty inbox: %v", err)
		}
		if err := b.put(ctx, inboxMsg(mib), awaiting, noDispatcher); !errors.Is(err, ErrInboundOverflow) {
			t.Fatalf("past the hard limit while a call awaits an answer: %v, want ErrInboundOverflow", err)
		}
		b = newInbox(limits)
		for i := range 3 {
			if err := b.put(ctx, inboxMsg(mib), awaiting, noDispatcher); err != nil {
				t.Fatalf("message %d within the hard limit: %v", i, err)
			}
		}
	})
}

// A reader waiting for room wakes when a call starts awaiting an answer, however the signal and
// the wait interleave: the channel that carries the signal exists before any reader can wait.
func TestInboxWakesAReaderWhenACallAwaits(t *testing.T) {
	limits := inboxLimits{soft: 1, softBytes: 1 << 20, hardBytes: 4 << 20}
	for range 200 {
		b := newInbox(limits)
		var awaitingNow atomic.Bool
		if err := b.put(context.Background(), inboxMsg(10), awaitingNow.Load, func() {}); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- b.put(context.Background(), inboxMsg(10), awaitingNow.Load, func() {}) }()
		awaitingNow.Store(true)
		b.signal()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("put: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the reader still waits for room, though a call awaits an answer")
		}
	}
}
