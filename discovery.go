package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	flightgroup "github.com/northstar-mcp/mcpclient/internal/flight"
	"github.com/northstar-mcp/mcpclient/transport"
)

// In a stateless revision the answer to server/discover stands for the session: the revision,
// the server's capabilities, the receipts it keeps. The server says how long that answer stays
// fresh (ttlMs, as for its listings), and past that the client asks again before relying on it:
// the next request of a stale session asks first, one discover for all the requests that come
// meanwhile, and the answer replaces the one held. What the revision and the receipt binding
// are never changes on a live session: an answer that names others retires it, and the next
// request opens a session that knows them.

// A discovery is one answer to server/discover, as a session of a stateless revision holds it.
type discovery struct {
	result InitializeResult
	// binding is the receipt binding the answer declares, with WithReceipts standing in for a
	// server that declares none.
	binding ReceiptBinding
	// asked numbers the server/discover that got it among those the process sent (see
	// discoverSerials).
	asked uint64
	// staleAt is when it goes stale (see discoveryStaleAt); zero: it stays fresh.
	staleAt time.Time
}

// stale reports whether d is past its lifetime at now.
func (d *discovery) stale(now time.Time) bool { return !d.staleAt.IsZero() && !now.Before(d.staleAt) }

// discoveryStaleAt is when an answer to server/discover that arrived at arrival with ttlMs goes
// stale; zero when it stays fresh for the session's life.
//
// A positive ttlMs is a lifetime: past it, the next request asks server/discover again first,
// which costs one round trip per lifetime, the price the server chose.
//
// A ttlMs of 0 (or a negative one, read as 0) says the answer is stale at once, and the spec lets
// a client re-ask "every time the result is needed". Taken for every request that would put a
// server/discover in front of each one, the round trip the stateless revision exists to remove.
// The client does not need it there: every request carries its own revision and capabilities,
// and the server judges each against what it serves now, refusing a revision it dropped
// (-32022) or a method it no longer has, so the answer to the request itself corrects a stale
// view. The one decision no answer corrects afterwards, resending an id on the strength of the
// server's receipts, reads a fresh answer every time whatever the lifetime (freshBinding). So
// 0 is held like an absent ttlMs, which the spec leaves to the client's own heuristics: until
// something the server answers says otherwise.
func discoveryStaleAt(arrival time.Time, ttlMs *int64) time.Time {
	if ttlMs == nil || *ttlMs <= 0 {
		return time.Time{}
	}
	return arrival.Add(time.Duration(*ttlMs) * time.Millisecond)
}

// settled returns what the session settled: the last answer to server/discover, for a stateless
// revision, or the answer to initialize.
func (s *session) settled() InitializeResult {
	if d := s.discovered.Load(); d != nil {
		return d.result
	}
	return s.init
}

// discoverSerials numbers the server/discover requests of the process as they are sent, from 1:
// whether an answer was asked for after some moment is a matter of order, which a clock that
// does not move between the two (a coarse one, a test's) could not tell.
var discoverSerials atomic.Uint64

// rediscover returns an answer to a server/discover on s, a session of a stateless revision,
// sent after the one numbered after: the one s holds if it is, or else a new one. Callers share
// one server/discover per session at a time: one sent no later than after is waited for, and
// then another is asked. The answer replaces the one s holds, or retires s when it names another
// receipt binding or no longer the revision of s.
func (c *Client) rediscover(ctx context.Context, s *session, after uint64) (*discovery, error) {
	if d := s.discovered.Load(); d != nil && d.asked > after {
		return d, nil
	}
	for {
		d, err := c.discovers.Do(ctx, c.closing, s, func() (*discovery, error) { return c.askDiscover(ctx, s) })
		switch {
		case errors.Is(err, flightgroup.ErrPanicked):
			continue // the panic is the business of the caller that asked
		case errors.Is(err, flightgroup.ErrStopped):
			return nil, &Error{Code: CodeClosed, Err: ErrClosed}
		case err != nil && err == ctx.Err():
			return nil, &transport.Error{Outcome: transport.NotDelivered, Err: err}
		case err != nil:
			return nil, err
		case d.asked <= after:
			continue // the server may have changed after it answered: ask again
		}
		return d, nil
	}
}

// askDiscover sends server/discover on s and takes its answer as the session's.
func (c *Client) askDiscover(ctx context.Context, s *session) (*discovery, error) {
	version := s.init.ProtocolVersion
	req, err := c.build(requestSpec{method: "server/discover", version: version})
	if err != nil {
		return nil, err
	}
	asked := discoverSerials.Add(1)
	probeCtx, cancel := context.WithTimeoutCause(ctx, discoverTimeout, errNoDiscoverAnswer)
	raw, err := c.sendHandshake(probeCtx, s, req)
	cancel()
	var rpc *RPCError
	if errors.As(err, &rpc) && rpc.Code == RPCUnsupportedProtocolVersion {
		s.retire(fmt.Errorf("%w: the server no longer speaks %s: %w", ErrSessionLost, version, err))
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	arrived := time.Now()
	var res discoverResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, &Error{Code: CodeProtocol, Request: req, Attempts: 1, Err: fmt.Errorf("server/discover result: %w", err)}
	}
	d := &discovery{result: res.settled(version), asked: asked, staleAt: discoveryStaleAt(arrived, res.TTLMs),
		binding: ReceiptBinding{Scope: c.cfg.receipts}}
	if r, ok := res.Capabilities.RequestReceipts(); ok {
		d.binding = ReceiptBinding{Scope: r.Scope, Epoch: r.Epoch}
	}
	switch {
	case d.binding != bindingOf(s):
		// What went out on s went out under the binding s holds, and the ledger says so; the
		// new one is for a new session.
		s.retire(fmt.Errorf("%w: the server now declares %s, not %s", ErrSessionLost, d.binding, bindingOf(s)))
	case !slices.Contains(res.SupportedVersions, version):
		s.retire(fmt.Errorf("%w: the server no longer lists %s among %v", ErrSessionLost, version, res.SupportedVersions))
	default:
		s.discovered.Store(d)
		c.log.Debug("mcpclient: server/discover asked again", "protocol", version, "stale_at", d.staleAt)
	}
	return d, nil
}
