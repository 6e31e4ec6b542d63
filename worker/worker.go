// Package worker runs, beside a worker's own work, the recovery of the requests its journal
// holds unresolved: those an earlier process (or, with a shared journal, a worker whose claim
// lapsed) sent or was about to send, and never learned the outcome of.
//
// A worker that calls tools with a journal ([mcpclient.WithJournal]) and derives each job's
// request id from the job's key ([mcpclient.IDFromKey] with [mcpclient.WithRequestID]) runs each
// job once: a crash leaves the request in the journal, Run finds it and resends it under the same
// id, and a server that keeps receipts answers the resend from its receipt instead of running the
// tool again. What a resend could run twice (the server restarted and lost its receipts, or keeps
// none) is handed to the Handler with an error matching [mcpclient.ErrOutcomeUnknown], for the
// program to decide after looking at the server's state; the default handler leaves it alone.
//
// Several workers sharing one journal (package journal/postgres) may all run Run: a request
// another worker's live claim holds is not listed, and one another worker claims between the
// listing and the resend is skipped (counted in Summary.Skipped), not reported as a failure.
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/northstar-mcp/mcpclient"
)

// Defaults of Run's options.
const (
	// DefaultInterval is the time between two recovery passes.
	DefaultInterval = 30 * time.Second
	// DefaultConcurrency is how many recovered requests are handled at once.
	DefaultConcurrency = 4
)

// A Job is one request the journal holds unresolved, as a pass found it.
type Job struct {
	// Request is the request as it was frozen: its bytes and id. It is nil when the journal's
	// record could not be read back into a request; Err then says why, and Record holds its ID
	// at least.
	Request *mcpclient.Request
	// Record is what the journal holds of the request: its state, its attempts, when it was
	// created, the receipts it was sent under.
	Record mcpclient.JournalRecord
	// Tool and Arguments are the tool's name and the JSON object of its arguments for a
	// tools/call; both empty for other methods.
	Tool      string
	Arguments json.RawMessage
	// Err is nil when resending the request cannot run it twice: it is safe to repeat, or the
	// server still holds the receipt of its earlier send. Otherwise it matches
	// mcpclient.ErrOutcomeUnknown (the request may have run, and only the server's state tells)
	// or, for a record that could not be read, has Code mcpclient.CodeJournal.
	Err error

	client *mcpclient.Client
}

// Resend sends the job's request again: the same bytes under the same id (see
// [mcpclient.Client.Resend]). For a job with a non-nil Err this is the program's decision, made
// after it established that running the request again is what it wants, or that the server
// will answer from a receipt after all.
func (j *Job) Resend(ctx context.Context) (*mcpclient.Response, error) {
	if j.Request == nil {
		return nil, fmt.Errorf("worker: request %s cannot be resent: %w", j.Record.ID.JSON(), j.Err)
	}
	return j.client.Resend(ctx, j.Request)
}

// Forget removes the request from the client's ledger and journal (see
// [mcpclient.Ledger.Forget]): for a request whose outcome the program established by other
// means, and that it will neither resend nor supersede.
func (j *Job) Forget(context.Context) error {
	return j.client.Ledger().Forget(j.Record.ID)
}

// A Handler decides what becomes of one recovered request: it resends it, supersedes it (with
// the client's Supersede, after an inspection), forgets it, or leaves it for a later pass. An
// error it returns is logged and counted in Summary.Failed; one matching
// mcpclient.ErrRequestInFlight is another holder's claim on the request and counts as skipped.
// A Handler runs in as many goroutines at once as the concurrency allows.
type Handler func(ctx context.Context, job *Job) error

// ResendSafe is the default Handler: it resends the jobs whose Err is nil, which cannot run
// twice, and leaves the others as they are, reporting them in an error so that they are logged
// on every pass until the program decides.
func ResendSafe(ctx context.Context, job *Job) error {
	if job.Err != nil {
		return fmt.Errorf("left alone: %w", job.Err)
	}
	_, err := job.Resend(ctx)
	return err
}

// An Option configures Run and Pass.
type Option func(*config)

type config struct {
	interval    time.Duration
	concurrency int
	handler     Handler
	log         *slog.Logger
	report      func(Summary)
	invalid     error
}

// WithInterval sets the time between the start of two passes of Run (DefaultInterval). A pass
// that takes longer is followed by the next at once.
func WithInterval(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.invalid = errors.Join(c.invalid, fmt.Errorf("worker: interval %v must be positive", d))
		}
		c.interval = d
	}
}

// WithConcurrency sets how many requests a pass handles at once (DefaultConcurrency).
func WithConcurrency(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.invalid = errors.Join(c.invalid, fmt.Errorf("worker: concurrency %d must be at least 1", n))
		}
		c.concurrency = n
	}
}

// WithHandler sets what is done with each recovered request (ResendSafe by default).
func WithHandler(h Handler) Option {
	return func(c *config) {
		if h == nil {
			c.invalid = errors.Join(c.invalid, errors.New("worker: nil handler"))
		}
		c.handler = h
	}
}

// WithLogger sets where Run logs the errors of passes and handlers (slog.Default by default).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l == nil {
			c.invalid = errors.Join(c.invalid, errors.New("worker: nil logger"))
		}
		c.log = l
	}
}

// WithReport has Run and Pass call f with each pass's Summary once the pass is over.
func WithReport(f func(Summary)) Option { return func(c *config) { c.report = f } }

func newConfig(opts []Option) (*config, error) {
	c := &config{interval: DefaultInterval, concurrency: DefaultConcurrency, handler: ResendSafe, log: slog.Default()}
	for _, opt := range opts {
		opt(c)
	}
	return c, c.invalid
}

// A Summary is what one pass did.
type Summary struct {
	// Found is how many unresolved requests the journal listed.
	Found int
	// Handled is how many the Handler returned nil for.
	Handled int
	// Skipped is how many another holder claimed meanwhile (mcpclient.ErrRequestInFlight).
	Skipped int
	// Failed is how many the Handler returned another error for.
	Failed int
	// Err is the error that ended the pass early: the journal could not be read, or the
	// context ended. Nil when the pass listed everything.
	Err error
}

// Run runs a recovery pass at once and then one every interval, until ctx ends; it returns nil
// then, once the handlers under way have returned (they see ctx end). It returns an error at once
// only for options it cannot use, or a client without a journal. A pass whose journal cannot be
// read is logged, and the next pass tries again.
func Run(ctx context.Context, c *mcpclient.Client, opts ...Option) error {
	cfg, err := newConfig(opts)
	if err != nil {
		return err
	}
	if c == nil {
		return errors.New("worker: nil client")
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		began := time.Now()
		s := pass(ctx, c, cfg)
		if unusable(s.Err) {
			return s.Err
		}
		if s.Err != nil && ctx.Err() == nil {
			cfg.log.Error("mcpclient/worker: recovery pass", "err", s.Err)
		}
		if cfg.report != nil {
			cfg.report(s)
		}
		timer.Reset(max(0, cfg.interval-time.Since(began)))
	}
}

// Pass runs one recovery pass: it lists the requests the client's journal holds unresolved for
// the client's server and hands each to the Handler, at most the concurrency at once, and
// returns once every handler returned. Requests a call of this process holds are not listed.
func Pass(ctx context.Context, c *mcpclient.Client, opts ...Option) (Summary, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return Summary{}, err
	}
	if c == nil {
		return Summary{}, errors.New("worker: nil client")
	}
	s := pass(ctx, c, cfg)
	if cfg.report != nil {
		cfg.report(s)
	}
	return s, s.Err
}

// unusable reports whether a pass failed for a reason no later pass can get past: the client
// has no journal, which Recover says with CodeInvalidArgument.
func unusable(err error) bool {
	var e *mcpclient.Error
	return errors.As(err, &e) && e.Code == mcpclient.CodeInvalidArgument
}

func pass(ctx context.Context, c *mcpclient.Client, cfg *config) Summary {
	var (
		s    Summary
		mu   sync.Mutex // guards the counts the handlers write
		wg   sync.WaitGroup
		sema = make(chan struct{}, cfg.concurrency)
	)
	for r, err := range c.Recover(ctx) {
		if r.Request == nil && r.Record.ID.IsZero() {
			// The journal could not be read at all, or the listing stopped with ctx.
			s.Err = err
			break
		}
		job := &Job{Request: r.Request, Record: r.Record, Err: err, client: c}
		if r.Request != nil && r.Request.Method() == "tools/call" {
			job.Tool, job.Arguments = r.Request.Name(), arguments(r.Request.Params())
		}
		select {
		case sema <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			s.Err = context.Cause(ctx)
			break
		}
		s.Found++
		wg.Go(func() {
			defer func() { <-sema }()
			herr := cfg.handler(ctx, job)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case herr == nil:
				s.Handled++
			case errors.Is(herr, mcpclient.ErrRequestInFlight):
				s.Skipped++
			default:
				s.Failed++
				cfg.log.Warn("mcpclient/worker: recovered request", "id", job.Record.ID.String(), "tool", job.Tool, "err", herr)
			}
		})
	}
	wg.Wait() // the handlers' writes happen before it returns
	return s
}

// arguments returns the arguments member of a tools/call's params, or nil.
func arguments(params json.RawMessage) json.RawMessage {
	var p struct {
		Arguments json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(params, &p) != nil {
		return nil
	}
	return p.Arguments
}
