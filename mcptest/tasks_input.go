package mcptest

// Input requests of the tasks of the tasks extension.
//
// A task of the extension is one run of its tool, however long it takes. When the tool asks its
// client for input (ToolCall.Request, RequestAll, RequestInput), the task moves to
// input_required and tasks/get shows the requests in its inputRequests, by key, until
// tasks/update brings their answers; the tool waits in its request meanwhile. Once nothing is
// outstanding the task is working again, and the tool goes on with the answers: unlike a multi
// round-trip request, nothing runs again, so the tool asks each thing once.
//
// A key names one request over the task's whole life, as the extension asks: asking a key the
// task asked before is an error. A tasks/update may answer some of the outstanding requests and
// leave the others for later. Its answers to keys the task does not wait on (never asked,
// already answered, given up by a tool whose context ended) are ignored; an answer to an
// outstanding key that is no result of its method refuses the whole tasks/update with -32602
// and delivers none of its answers, so that the client may send them again, corrected.
//
// The client's capabilities are those the request that created the task declared: a request for
// input they do not cover fails the task with the -32021 that would have refused a plain call.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/tasks"
)

// A pendingInput is a request for input a task waits on.
type pendingInput struct {
	wireRequest
	answer chan json.RawMessage // buffered: the one answer a tasks/update delivers
}

// errTaskEnded fails a request for input of a task that ended (cancelled, or failed for a
// request the client cannot answer) before its answers came.
var errTaskEnded = errors.New("mcptest: the task ended before the client answered")

// requestTaskInput asks the client of t, the task of the extension that c runs as, for input,
// and waits for the answers (see above).
func (s *Server) requestTaskInput(ctx context.Context, c *ToolCall, t *task, reqs []InputRequest) ([]json.RawMessage, error) {
	asked, err := askedOf(reqs)
	if err != nil {
		return nil, err
	}
	if refusal, err := uncovered(c.ClientCapabilities(), asked); err != nil {
		s.finishTask(t, refusal)
		t.cancel(err)
		return nil, err
	}

	s.mu.Lock()
	if t.terminalLocked() {
		s.mu.Unlock()
		return nil, errTaskEnded
	}
	keys := make([]string, len(asked))
	n := t.asked
	for i, a := range asked {
		n++
		keys[i] = a.key
		if keys[i] == "" {
			keys[i] = "input-" + strconv.Itoa(n)
		}
		if t.keys[keys[i]] || slices.Contains(keys[:i], keys[i]) {
			s.mu.Unlock()
			return nil, fmt.Errorf("mcptest: the input request key %q is asked twice in one task", keys[i])
		}
	}
	t.asked = n
	if t.keys == nil {
		t.keys = make(map[string]bool)
	}
	if t.inputs == nil {
		t.inputs = make(map[string]*pendingInput)
	}
	pending := make([]*pendingInput, len(asked))
	for i, a := range asked {
		pending[i] = &pendingInput{wireRequest{a.method, a.params}, make(chan json.RawMessage, 1)}
		t.keys[keys[i]] = true
		t.inputs[keys[i]] = pending[i]
	}
	t.status, t.message, t.updated = tasks.InputRequired, "waiting for input from the client", time.Now()
	s.taskNoteLocked(t) // a task of the extension: its listeners hear of it now
	s.mu.Unlock()

	answers := make([]json.RawMessage, len(pending))
	for i, p := range pending {
		select {
		case answers[i] = <-p.answer:
		case <-ctx.Done():
			s.withdrawInputs(t, keys[i:])
			return nil, context.Cause(ctx)
		case <-t.done:
			return nil, errTaskEnded
		}
	}
	return answers, nil
}

// withdrawInputs gives up the requests of t under keys that are still outstanding: a tool whose
// context ended waits on them no more.
func (s *Server) withdrawInputs(t *task, keys []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for _, k := range keys {
		if _, ok := t.inputs[k]; ok {
			delete(t.inputs, k)
			changed = true
		}
	}
	if changed && !t.terminalLocked() {
		s.inputsChangedLocked(t)
		s.taskNoteLocked(t)
	}
}

// inputsChangedLocked records that requests of t were answered or given up: the task is
// working again once none is outstanding.
func (s *Server) inputsChangedLocked(t *task) {
	t.updated = time.Now()
	if len(t.inputs) == 0 && t.status == tasks.InputRequired {
		t.status, t.message = tasks.Working, ""
	}
}

// answerInputsLocked delivers the answers of a tasks/update (responses, by key) to the requests
// of t they answer, and reports whether it delivered any. A refusal answers an update that
// answers an outstanding request with something that is no result of its method; it delivers
// nothing.
func (s *Server) answerInputsLocked(t *task, responses map[string]json.RawMessage) (delivered bool, refusal *answer) {
	for _, k := range slices.Sorted(maps.Keys(responses)) {
		p := t.inputs[k]
		if p == nil {
			continue
		}
		err := errors.New("no object")
		if isObject(responses[k]) {
			err = checkInputResponse(p.Method, responses[k])
		}
		if err != nil {
			a := errorAnswer(mcpclient.RPCInvalidParams, fmt.Sprintf("inputResponses[%q] is no result of %s: %v", k, p.Method, err), nil)
			return false, &a
		}
	}
	for k, raw := range responses {
		if p := t.inputs[k]; p != nil {
			p.answer <- raw // buffered, and a request leaves t.inputs when answered: never blocks
			delete(t.inputs, k)
			delivered = true
		}
	}
	if delivered {
		s.inputsChangedLocked(t)
	}
	return delivered, nil
}

// inputRequestsLocked is what tasks/get shows of the requests t waits on: nil unless it is
// input_required.
func (t *task) inputRequestsLocked() map[string]wireRequest {
	if t.status != tasks.InputRequired || len(t.inputs) == 0 {
		return nil
	}
	out := make(map[string]wireRequest, len(t.inputs))
	for k, p := range t.inputs {
		out[k] = p.wireRequest
	}
	return out
}
