package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// A level is how much a check weighs: a failed MUST fails its scenario, a failed SHOULD is a
// warning, as the official suite's WARNING.
type level int

const (
	must level = iota
	should
)

// A check is one thing a scenario verified.
type check struct {
	name   string
	level  level
	ok     bool
	detail string
}

// An outcome is what one run of a scenario found.
type outcome struct {
	name    string // the run's name: side:target/scenario@revision
	checks  []check
	skipped string // why the scenario did not apply, if it did not
	aborted string // why the scenario stopped before its end
}

// passed reports whether every MUST held and the run checked something.
func (o *outcome) passed() bool {
	if o.aborted != "" {
		return false
	}
	n := 0
	for _, c := range o.checks {
		if c.level == must {
			if !c.ok {
				return false
			}
			n++
		}
	}
	return n > 0
}

// failures lists the failed checks, MUSTs first.
func (o *outcome) failures(lv level) []string {
	var out []string
	for _, c := range o.checks {
		if !c.ok && c.level == lv {
			out = append(out, c.name+": "+c.detail)
		}
	}
	if lv == must && o.aborted != "" {
		out = append(out, "aborted: "+o.aborted)
	}
	return out
}

// A run is the state of one scenario run, handed to its func. Its methods are safe for
// concurrent use: scenarios check from the goroutines they start.
type run struct {
	ctx context.Context
	mu  sync.Mutex
	out *outcome
}

// errAbort ends a scenario run early; run recovers it.
type errAbort struct{ why string }

func (r *run) record(name string, lv level, ok bool, format string, args ...any) bool {
	detail := ""
	if !ok {
		detail = fmt.Sprintf(format, args...)
	}
	r.mu.Lock()
	r.out.checks = append(r.out.checks, check{name: name, level: lv, ok: ok, detail: detail})
	r.mu.Unlock()
	return ok
}

// must records a MUST check: ok, or else the detail format says what was seen.
func (r *run) must(name string, ok bool, format string, args ...any) bool {
	return r.record(name, must, ok, format, args...)
}

// should records a SHOULD check.
func (r *run) should(name string, ok bool, format string, args ...any) bool {
	return r.record(name, should, ok, format, args...)
}

// require records a MUST check and ends the run if it failed: what follows depends on it.
func (r *run) require(name string, ok bool, format string, args ...any) {
	if !r.must(name, ok, format, args...) {
		panic(errAbort{name + " failed"})
	}
}

// abort ends the run: something the scenario needs did not happen (a transport error, say).
func (r *run) abort(format string, args ...any) {
	panic(errAbort{fmt.Sprintf(format, args...)})
}

// skip ends the run as not applicable.
func (r *run) skip(format string, args ...any) {
	r.mu.Lock()
	r.out.skipped = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	panic(errAbort{})
}

// execute runs fn as the scenario run named name, within timeout.
func execute(ctx context.Context, name string, timeout time.Duration, fn func(*run)) *outcome {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r := &run{ctx: ctx, out: &outcome{name: name}}
	func() {
		defer func() {
			if p := recover(); p != nil {
				a, ok := p.(errAbort)
				if !ok {
					panic(p)
				}
				r.mu.Lock()
				r.out.aborted = a.why
				r.mu.Unlock()
			}
		}()
		fn(r)
	}()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.out.skipped != "" {
		r.out.aborted = ""
	}
	return r.out
}

// runAll runs every job, jobs at a time, and returns the outcomes in the jobs' order.
func runAll(ctx context.Context, jobs []job, parallel int) []*outcome {
	out := make([]*outcome, len(jobs))
	sem := make(chan struct{}, max(parallel, 1))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = execute(ctx, j.name, j.timeout, j.fn)
		}()
	}
	wg.Wait()
	return out
}

// A job is one scenario run to make.
type job struct {
	name    string
	timeout time.Duration
	fn      func(*run)
}

// selected returns the jobs whose name contains one of only (all when only is empty).
func selected(jobs []job, only string) []job {
	if only == "" {
		return jobs
	}
	return slices.DeleteFunc(slices.Clone(jobs), func(j job) bool { return !strings.Contains(j.name, only) })
}
