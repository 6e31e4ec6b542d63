package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"

	"github.com/northstar-mcp/mcpclient"
)

// User is the context key of the user whose token the plugin sends: context.WithValue(ctx, User{}, "ada").
type User struct{}

// ErrDenied is in the chain of a call to a tool the policy denies; nothing was sent.
var ErrDenied = errors.New("plugin: tool denied by policy")

// Plugin adds a token chosen per user, denies tools, logs every attempt of every request and
// counts them by outcome.
type Plugin struct {
	Tokens map[string]string // by user
	Deny   map[string]bool   // by tool name
	Log    *slog.Logger

	mu       sync.Mutex
	attempts map[string]int // by outcome
}

// Options are what Connect takes to install the plugin.
func (p *Plugin) Options() []mcpclient.Option {
	return []mcpclient.Option{mcpclient.WithInterceptors(p.intercept), mcpclient.WithAttemptHook(p.attempt)}
}

func (p *Plugin) intercept(next mcpclient.Handler) mcpclient.Handler {
	return func(ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
		if tool := x.Request.Name(); x.Request.Method() == "tools/call" && p.Deny[tool] {
			return nil, fmt.Errorf("%w: %s", ErrDenied, tool)
		}
		if user, ok := ctx.Value(User{}).(string); ok {
			x.Header.Set("Authorization", "Bearer "+p.Tokens[user])
		}
		return next(ctx, x)
	}
}

func (p *Plugin) attempt(_ context.Context, ev mcpclient.AttemptEvent) {
	p.mu.Lock()
	if p.attempts == nil {
		p.attempts = map[string]int{}
	}
	p.attempts[ev.Outcome.String()]++
	p.mu.Unlock()
	p.Log.Info("attempt", "method", ev.Method, "tool", ev.Tool, "id", ev.ID, "n", ev.Attempt,
		"outcome", ev.Outcome, "status", ev.HTTPStatus, "took", ev.Latency, "next_in", ev.Delay, "err", ev.Err)
}

// Attempts returns the attempts counted so far, by outcome.
func (p *Plugin) Attempts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.attempts)
}

// Functions offers the server's tools, but those denied, as LLM function-calling APIs take them.
func (p *Plugin) Functions(ctx context.Context, c mcpclient.Caller) ([]map[string]any, error) {
	var fns []map[string]any
	for tool, err := range c.Tools(ctx) {
		if err != nil {
			return nil, err
		}
		if !p.Deny[tool.Name] {
			fns = append(fns, map[string]any{"name": tool.Name, "description": tool.Description, "parameters": tool.InputSchema})
		}
	}
	return fns, nil
}
