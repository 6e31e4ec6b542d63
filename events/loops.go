package events

import (
	"context"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/wait"
)

// DefaultPollFloor is the shortest wait PollLoop leaves between two polls, whatever nextPollMs
// says, unless PollFloor says otherwise: a server answering 0 cannot make it spin.
const DefaultPollFloor = time.Second

// DefaultHealthCheck is how often KeepSubscribed refreshes a subscription granted no expiry,
// unless HealthCheck says otherwise: the refresh is where the cursor advances and delivery
// problems show.
const DefaultHealthCheck = time.Hour

// A LoopOption configures PollLoop or KeepSubscribed.
type LoopOption func(*loopConfig)

type loopConfig struct {
	floor       time.Duration
	healthCheck time.Duration
}

func newLoopConfig(opts []LoopOption) loopConfig {
	cfg := loopConfig{floor: DefaultPollFloor, healthCheck: DefaultHealthCheck}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// PollFloor sets PollLoop's shortest wait between two polls. Default DefaultPollFloor; d <= 0
// keeps the default.
func PollFloor(d time.Duration) LoopOption {
	return func(c *loopConfig) {
		if d > 0 {
			c.floor = d
		}
	}
}

// HealthCheck sets how often KeepSubscribed refreshes a subscription granted no expiry. Default
// DefaultHealthCheck; d <= 0 keeps the default.
func HealthCheck(d time.Duration) LoopOption {
	return func(c *loopConfig) {
		if d > 0 {
			c.healthCheck = d
		}
	}
}

// PollLoop polls p's event type until ctx ends (it then returns nil), h returns an error (which
// it returns), or a poll fails (the error, as Poll's: ErrNotFound for an event type the server
// no longer offers, say). It hands h every answer, events or none, in order, on the caller's
// goroutine.
//
// It starts at p.Cursor and then polls from the cursor of the last answer: the fresh one after
// truncated, and null again after a null (or absent) one. It polls again at once while the
// answer says hasMore, and otherwise waits nextPollMs, never less than the floor (PollFloor).
// h sees each answer's cursor: a caller that persists it may start a later PollLoop there.
func PollLoop(ctx context.Context, c mcpclient.Caller, p PollParams, h func(ctx context.Context, res *PollResult) error, opts ...LoopOption) error {
	cfg := newLoopConfig(opts)
	for {
		res, err := Poll(ctx, c, &p)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		p.Cursor = res.Cursor
		if h != nil {
			if err := h(ctx, res); err != nil {
				return err
			}
		}
		pause := max(res.NextPoll(), cfg.floor)
		if res.HasMore {
			pause = 0
		}
		if !wait.For(ctx, pause) {
			return nil
		}
	}
}

// KeepSubscribed subscribes with p (events/subscribe) and refreshes the subscription, under the
// same key (name, arguments, delivery URL), before each grant expires: halfway to its
// refreshBefore, or every HealthCheck when the server granted no expiry. Each refresh carries
// the cursor of the answer before it (null after a null one). It hands h every answer, on the
// caller's goroutine, and runs until ctx ends (it then returns nil), h returns an error, or a
// subscribe fails. It does not unsubscribe: a subscription left alone lapses at its grant's
// expiry; call Unsubscribe to end it at once.
func KeepSubscribed(ctx context.Context, c mcpclient.Caller, p SubscribeParams, h func(ctx context.Context, res *SubscribeResult) error, opts ...LoopOption) error {
	cfg := newLoopConfig(opts)
	for {
		res, err := Subscribe(ctx, c, &p)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		p.Cursor = res.Cursor
		if h != nil {
			if err := h(ctx, res); err != nil {
				return err
			}
		}
		pause := cfg.healthCheck
		if until, expires := res.Expiry(); expires {
			pause = time.Until(until) / 2
		}
		if !wait.For(ctx, pause) {
			return nil
		}
	}
}
