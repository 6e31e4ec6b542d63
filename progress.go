package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/northstar-mcp/mcpclient/transport"
)

// Progress is one progress report of a request in flight (notifications/progress).
type Progress struct {
	Progress float64 `json:"progress"`
	// Total is the amount the work is done at, or 0 when the server does not know it.
	Total   float64 `json:"total,omitempty"`
	Message string  `json:"message,omitempty"`
}

// A ProgressHandler receives the progress of one request. Reports sent on the answer's own stream
// arrive before the call returns; over the older Streamable HTTP revisions a server answering
// with plain JSON sends them on the GET stream, and they may arrive up to half a second after the
// call returned. It runs on the goroutine that reads the connection: it must return quickly and
// must not call the client.
type ProgressHandler func(Progress)

// progressRegistry routes progress reports to the calls waiting for them, by token.
type progressRegistry struct {
	mu      sync.Mutex
	byToken map[string]*progressWatch // guarded by mu
	closed  bool                      // guarded by mu
	// trails are the removals waiting for a call's last reports (see progressTrail), made by
	// the first: a client whose calls never asked for progress has none. guarded by mu.
	trails *progressTrails
}

// progressTrails are the removals of a progressRegistry waiting for a call's last reports; the
// client owns them, and Close ends them.
type progressTrails struct {
	waiting map[*time.Timer]func() // guarded by the registry's mu
	running sync.WaitGroup         // removals scheduled and not yet done or stopped
}

// removeLater runs remove after d, unless the client closes first, which runs it at once.
func (r *progressRegistry) removeLater(d time.Duration, remove func()) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		remove() // it takes the lock itself
		return
	}
	defer r.mu.Unlock()
	if r.trails == nil {
		r.trails = &progressTrails{waiting: make(map[*time.Timer]func())}
	}
	trails := r.trails
	trails.running.Add(1)
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		defer trails.running.Done()
		remove()
		r.mu.Lock()
		delete(trails.waiting, t)
		r.mu.Unlock()
	})
	trails.waiting[t] = remove
}

// close runs the removals still waiting and waits for those under way.
func (r *progressRegistry) close() {
	r.mu.Lock()
	r.closed = true
	trails := r.trails
	var waiting map[*time.Timer]func()
	if trails != nil {
		waiting, trails.waiting = trails.waiting, nil
	}
	r.mu.Unlock()
	if trails == nil {
		return
	}
	for t, remove := range waiting {
		if t.Stop() {
			remove()
			trails.running.Done()
		}
	}
	trails.running.Wait()
}

type progressWatch struct {
	handler ProgressHandler
	touch   func() // resets the idle timeout
}

func (r *progressRegistry) add(token string, w *progressWatch) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byToken == nil {
		r.byToken = make(map[string]*progressWatch)
	}
	r.byToken[token] = w
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.byToken[token] == w {
			delete(r.byToken, token)
		}
	}
}

// deliver routes notifications/progress. Reports for tokens nobody waits on are dropped.
func (r *progressRegistry) deliver(params json.RawMessage) {
	var p struct {
		Token ID `json:"progressToken"`
		Progress
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	r.mu.Lock()
	w := r.byToken[p.Token.JSON()]
	r.mu.Unlock()
	if w == nil {
		return
	}
	if w.touch != nil {
		w.touch()
	}
	if w.handler != nil {
		w.handler(p.Progress)
	}
}

// progressTrail is how long a call's progress handler outlives the call when its reports travel
// on another stream than its answer.
const progressTrail = 500 * time.Millisecond

// progressMayTrail reports whether progress can arrive after the answer: on an older HTTP
// session, where a server answering with JSON sends it on the GET stream.
func (c *Client) progressMayTrail() bool {
	s := c.current()
	if s == nil || s.stateless {
		return false
	}
	_, ok := s.conn.(transport.SessionConn)
	return ok
}

// listenForProgress opens the transport's channel for unprompted messages (the HTTP GET stream
// of the older revisions), where a server answering with plain JSON sends its progress reports.
func (c *Client) listenForProgress() {
	if s := c.current(); s != nil && !s.stateless {
		if sc, ok := s.conn.(transport.SessionConn); ok {
			sc.Listen()
		}
	}
}

// watchCall applies a request's progress handler and timeouts to the context of one Do call. The
// returned stop must be called when the call ends; follow moves the handler to another progress
// token (a re-issue's), on the goroutine that runs the call.
func (c *Client) watchCall(ctx context.Context, req *Request) (_ context.Context, stop func(), follow func(token string)) {
	if req.progress == nil && req.idle <= 0 && req.max <= 0 {
		return ctx, func() {}, func(string) {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	var timers []*time.Timer
	if req.max > 0 {
		timers = append(timers, time.AfterFunc(req.max, func() {
			cancel(fmt.Errorf("%w after %v: %w", ErrCallTimeout, req.max, context.DeadlineExceeded))
		}))
	}
	w := &progressWatch{handler: req.progress}
	if req.idle > 0 {
		idle := time.AfterFunc(req.idle, func() {
			cancel(fmt.Errorf("%w: nothing for %v: %w", ErrCallTimeout, req.idle, context.DeadlineExceeded))
		})
		timers = append(timers, idle)
		w.touch = func() { idle.Reset(req.idle) }
	}
	remove := c.progress.add(req.key, w)
	trail := c.progressMayTrail()
	stop = func() {
		if trail && req.progress != nil {
			// Reports on another stream than the answer may still be on their way.
			c.progress.removeLater(progressTrail, remove)
		} else {
			remove()
		}
		for _, t := range timers {
			t.Stop()
		}
		cancel(nil)
	}
	follow = func(token string) {
		remove()
		remove = c.progress.add(token, w)
	}
	return ctx, stop, follow
}
