package mcptest

// Tasks the tool starts (the tasks extension).
//
// A server that needs its client's input to decide whether to run a call as a task asks it by
// multi round-trip requests on the call itself, and answers with the task on the last round; the
// extension keeps this input apart from that of the task, which tasks/get and tasks/update
// carry. The tools of WithDeferredTask work so: a call of theirs that opted into the extension
// runs as a plain call of the stateless revision (input_required, the tool run again with the
// answers) until the tool calls ToolCall.StartTask. The server then answers that round's
// tools/call with the CreateTaskResult, and the tool runs on in the same run, its outcome the
// task's. A tool that returns without StartTask answers as a plain call, with its result.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/northstar-mcp/mcpclient"
)

// WithDeferredTask makes the calls of tool that opt into the tasks extension start as plain
// calls, which become tasks when the tool calls ToolCall.StartTask: the tool may gather input
// by multi round-trip requests first. It concerns only a tool that may run as a task
// (Execution.TaskSupport "optional" or "required"); calls that do not opt in, and those of the
// session revisions, run as they would without it.
func WithDeferredTask(tool string) Option {
	return optionFunc(func(s *Server) {
		if s.deferredTasks == nil {
			s.deferredTasks = make(map[string]bool)
		}
		s.deferredTasks[tool] = true
	})
}

// ErrNoTask fails ToolCall.StartTask for a call that cannot become a task: its tool is none of
// WithDeferredTask's, or may not run as a task, or its request did not opt into the tasks
// extension, or the server refused a new task (closed, its store full). The call goes on as a
// plain one.
var ErrNoTask = errors.New("mcptest: the call cannot become a task")

// A promotion is how a plain call of a tool of WithDeferredTask becomes a task. The tool runs
// under a ctx of its own, in a goroutine of its own, so that it may outlive the request: the
// request's end ends the ctx until the tool starts its task, the epoch's end always.
type promotion struct {
	ep      *epoch
	request context.Context         // the request's ctx
	cancel  context.CancelCauseFunc // ends the tool's ctx
	started chan answer             // the CreateTaskResult, once the tool started its task

	mu     sync.Mutex
	detach func() bool // stops the request's end from ending the tool's ctx
	over   bool        // the tool returned
	task   *task       // the task the tool started
}

// executeDeferringTask runs a call that may become a task midway, and answers as the call does:
// with its result, or with the task when the tool starts one first.
func (s *Server) executeDeferringTask(ctx context.Context, ep *epoch, call *ToolCall, key string) answer {
	toolCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	p := &promotion{ep: ep, request: ctx, cancel: cancel, started: make(chan answer, 1)}
	p.detach = context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	stopEpoch := context.AfterFunc(ep.ctx, func() { cancel(context.Cause(ep.ctx)) })
	call.promotion = p
	finished := make(chan answer, 1)
	// The request is one the wait group counts: Close cannot be done waiting yet.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel(nil)
		defer stopEpoch()
		a := s.execute(toolCtx, call, key)
		p.mu.Lock()
		p.over = true
		t := p.task
		p.mu.Unlock()
		if t != nil {
			s.finishTask(t, a)
			return
		}
		finished <- a
	}()
	select {
	case a := <-finished:
		return a
	case a := <-p.started:
		return a
	}
}

// StartTask makes the call a task of the tasks extension from here on: the server answers the
// request with the new task (a CreateTaskResult), and the tool runs on as the task, its ctx ended
// by tasks/cancel, Close and Restart rather than by the request's end, its outcome the task's,
// its requests for input the task's (see RequestAll). It is for the tools of WithDeferredTask,
// which gather input by multi round-trip requests before they commit to a task; for a call that
// already runs as a task it does nothing.
//
// It fails with ErrNoTask when the call cannot become a task, and with the error the tool was
// told when a request for input ended its run (ErrInputRequired, ...) or when the request's ctx
// ended: the call goes on as a plain one, or ends.
func (c *ToolCall) StartTask() error {
	if c.currentTask() != nil {
		return nil
	}
	p := c.promotion
	if p == nil {
		return ErrNoTask
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.task != nil:
		return nil
	case p.over:
		return errRunOver
	}
	if err := c.input.endedWith(); err != nil {
		return err
	}
	if !p.detach() {
		return context.Cause(p.request)
	}
	t, created, refusal := c.srv.registerTask(p.ep, c, c.srv.extensionTaskTTL(), true, p.cancel)
	if refusal != nil {
		p.detach = context.AfterFunc(p.request, func() { p.cancel(context.Cause(p.request)) })
		var e mcpclient.RPCError
		json.Unmarshal(refusal.body, &e) // our own error object
		return fmt.Errorf("%w: %s", ErrNoTask, e.Message)
	}
	p.task = t
	p.started <- created
	return nil
}
