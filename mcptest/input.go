package mcptest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/northstar-mcp/mcpclient"
)

// In the stateless revisions a server sends its client no requests. A handler that needs the
// client's input (a tool's ToolCall.Request, a prompt's PromptCall.Request) ends its run
// instead; the server answers input_required with the requests and a requestState, and the
// client sends its request again, under a new id, with the answers (inputResponses) and the
// requestState untouched. The handler then runs again from the start and finds its answers:
// a handler that asks the same things in the same order gets them, round after round.
//
// The requestState carries the answers of the earlier rounds, so that each round's
// inputResponses need only hold the answers to that round's requests. It is signed with a key
// of the Server's own: a client can read it but not change it, nor take it to another request.

// An InputRequest is one request for input a handler asks of its client: sampling/createMessage,
// elicitation/create or roots/list, with its params (nil for none).
type InputRequest struct {
	// Key names the request in inputRequests and the client's answer in inputResponses (stateless
	// revisions only). "" names it input-N, N its place among the requests the run asked so far,
	// from 1: the same in every run of a handler that asks in the same order. A handler that asks
	// from several goroutines at once has no such order, and names its keys.
	Key    string
	Method string
	Params any
}

var (
	// ErrInputRequired ends a handler's run in the stateless revisions when the client has not
	// answered a request for input yet: the server answers input_required, whatever the handler
	// returns, and runs the handler again when the client sends the answers.
	ErrInputRequired = errors.New("mcptest: input required from the client")
	// ErrMissingClientCapability ends a handler's run in the stateless revisions when it asks
	// for input the client's capabilities do not cover: the server answers the request with
	// MissingRequiredClientCapabilityError (-32021, HTTP 400), or fails the task the handler
	// runs as with it, whatever the handler returns.
	ErrMissingClientCapability = errors.New("mcptest: the client did not declare a capability the request needs")
	// errInvalidInputResponse ends a run whose client answered a request for input with
	// something that is no result of its method: the server answers -32602.
	errInvalidInputResponse = errors.New("mcptest: invalid input response")
	// errRunOver fails a request for input made after the handler returned.
	errRunOver = errors.New("mcptest: the handler's run is over")
)

// inputMethods are the methods a server may ask its client for input with.
var inputMethods = map[string]bool{"sampling/createMessage": true, "elicitation/create": true, "roots/list": true}

// inputBinding is the request a requestState belongs to: a state answers for one method, one
// tool or prompt, and the same arguments.
type inputBinding struct {
	Method string `json:"method"`
	Name   string `json:"name"`
	Args   string `json:"args"` // hex SHA-256 of the arguments in canonical form
}

// sealedInput is what a requestState says, under its signature.
type sealedInput struct {
	inputBinding
	// Round is the round of the request that carries the state: 2 for the first resend.
	Round int `json:"round"`
	// Answers are the client's answers to the input requests of the earlier rounds, by key.
	Answers map[string]json.RawMessage `json:"answers,omitempty"`
}

// stateMACContext separates the server's requestState signatures from anything else the key
// might sign.
const stateMACContext = "mcptest requestState v1\x00"

// seal signs v into a requestState: base64url of the JSON, a dot, base64url of its HMAC-SHA256.
func (s *Server) seal(v sealedInput) string {
	payload, _ := json.Marshal(v) // plain values and raw JSON that decoded once
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(s.stateMAC(payload))
}

func (s *Server) stateMAC(payload []byte) []byte {
	mac := hmac.New(sha256.New, s.stateKey[:])
	mac.Write([]byte(stateMACContext))
	mac.Write(payload)
	return mac.Sum(nil)
}

// errForeignState refuses a requestState that fails verification.
var errForeignState = errors.New("requestState was not issued by this server")

// unseal verifies a requestState and returns what it says.
func (s *Server) unseal(state string) (sealedInput, error) {
	payload64, mac64, ok := strings.Cut(state, ".")
	if !ok {
		return sealedInput{}, errForeignState
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(payload64)
	mac, err2 := base64.RawURLEncoding.DecodeString(mac64)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, s.stateMAC(payload)) {
		return sealedInput{}, errForeignState
	}
	var v sealedInput
	if err := json.Unmarshal(payload, &v); err != nil {
		return sealedInput{}, errForeignState
	}
	return v, nil
}

// bindingOf is the binding of a request: its method, the tool or prompt it names and its
// arguments, in a canonical form that does not depend on spacing or key order. No arguments and
// an empty object bind alike.
func bindingOf(method, name string, args []byte) inputBinding {
	var v any
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if len(bytes.TrimSpace(args)) == 0 || dec.Decode(&v) != nil || v == nil {
		v = map[string]any{}
	}
	canon, _ := json.Marshal(v) // decoded JSON marshals
	sum := sha256.Sum256(canon)
	return inputBinding{Method: method, Name: name, Args: hex.EncodeToString(sum[:])}
}

// An inputRun is one run of a handler of a stateless request that may ask its client for input:
// the answers the request brought, and how the run ended if a request for input ended it.
type inputRun struct {
	srv     *Server
	caps    mcpclient.ClientCapabilities
	bind    inputBinding
	round   int
	carried map[string]json.RawMessage // the answers of earlier rounds, from the requestState
	fresh   map[string]json.RawMessage // the request's inputResponses

	mu     sync.Mutex
	cancel context.CancelCauseFunc    // ends the handler's ctx; set by runInputs
	asked  int                        // requests for input made so far
	keys   map[string]bool            // their keys
	used   map[string]json.RawMessage // the answers the run read, by key
	ended  *answer                    // the request's answer, once a request for input ended the run
	endErr error                      // what the handler was told when its run ended
	over   bool                       // the handler returned
}

// openInputs reads what a stateless request brings for the input its handler may ask: its
// inputResponses, each an object (any key: those the handler does not ask for are ignored), and
// its requestState, which must be one this server issued for the same request. bad is the
// refusal (-32602) of a request that brings them malformed.
func (s *Server) openInputs(st *sessionState, bind inputBinding, params []byte) (in *inputRun, bad *answer) {
	refuse := func(format string, args ...any) (*inputRun, *answer) {
		a := errorAnswer(mcpclient.RPCInvalidParams, fmt.Sprintf(format, args...), nil)
		return nil, &a
	}
	var p struct {
		InputResponses json.RawMessage `json:"inputResponses"`
		RequestState   json.RawMessage `json:"requestState"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return refuse("%s params: %v", bind.Method, err)
	}
	in = &inputRun{srv: s, caps: st.capabilities(), bind: bind, round: 1, keys: map[string]bool{}, used: map[string]json.RawMessage{}}
	if p.InputResponses != nil {
		if json.Unmarshal(p.InputResponses, &in.fresh) != nil || in.fresh == nil {
			return refuse("inputResponses must be an object mapping the keys of input requests to the client's results")
		}
		for k, v := range in.fresh {
			if !isObject(v) {
				return refuse("inputResponses[%q] must be an object, the client's result of the input request", k)
			}
		}
	}
	if p.RequestState != nil {
		var state string
		if json.Unmarshal(p.RequestState, &state) != nil {
			return refuse("requestState must be a string")
		}
		sealed, err := s.unseal(state)
		if err == nil && sealed.inputBinding != bind {
			err = errors.New("requestState belongs to another request")
		}
		if err != nil {
			return refuse("invalid requestState: %v", err)
		}
		in.round, in.carried = sealed.Round, sealed.Answers
	}
	return in, nil
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{' && json.Valid(raw)
}

// runInputs runs a handler (run) with in, nil outside the stateless revisions. A request for
// input that ends the run cancels run's ctx, with the error the handler got as the cause, and
// its answer replaces whatever run returns.
func runInputs(ctx context.Context, in *inputRun, run func(ctx context.Context) answer) answer {
	if in == nil {
		return run(ctx)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	in.mu.Lock()
	in.cancel = cancel
	in.mu.Unlock()
	a := run(ctx)
	in.mu.Lock()
	defer in.mu.Unlock()
	in.over = true
	if in.ended != nil {
		return *in.ended
	}
	return a
}

// endedWith returns the error a request for input that ended the run told the handler; nil
// while the run goes on.
func (in *inputRun) endedWith() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.endErr
}

// keysAsked returns how many requests for input the run asked so far, and their keys.
func (in *inputRun) keysAsked() (int, map[string]bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.asked, maps.Clone(in.keys)
}

// end ends the run with a, telling the handler err. in.mu is held.
func (in *inputRun) endLocked(a answer, err error) error {
	in.ended, in.endErr = &a, err
	if in.cancel != nil {
		in.cancel(err)
	}
	return err
}

// A wireRequest is a request for input as inputRequests carry it.
type wireRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// inputAsked is one request for input as the run asks it.
type inputAsked struct {
	key    string
	method string
	params json.RawMessage
}

// request asks the client for input: the answers to reqs, in their order, from the request's
// inputResponses or the earlier rounds' answers. When one is missing, or the client's
// capabilities do not cover one, or an answer is malformed, the run ends (see runInputs).
func (in *inputRun) request(reqs []InputRequest) ([]json.RawMessage, error) {
	asked, err := askedOf(reqs)
	if err != nil {
		return nil, err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	switch {
	case in.over:
		return nil, errRunOver
	case in.ended != nil:
		return nil, in.endErr
	}
	for i := range asked {
		in.asked++
		if asked[i].key == "" {
			asked[i].key = "input-" + strconv.Itoa(in.asked)
		}
		if in.keys[asked[i].key] {
			return nil, fmt.Errorf("mcptest: the input request key %q is asked twice in one run", asked[i].key)
		}
		in.keys[asked[i].key] = true
	}
	if refusal, err := uncovered(in.caps, asked); err != nil {
		return nil, in.endLocked(refusal, err)
	}
	answers := make([]json.RawMessage, len(asked))
	var missing []inputAsked
	for i, a := range asked {
		raw, ok := in.carried[a.key]
		if !ok {
			raw, ok = in.fresh[a.key]
		}
		if !ok {
			missing = append(missing, a)
			continue
		}
		if err := checkInputResponse(a.method, raw); err != nil {
			return nil, in.endLocked(
				errorAnswer(mcpclient.RPCInvalidParams, fmt.Sprintf("inputResponses[%q] is no result of %s: %v", a.key, a.method, err), nil),
				fmt.Errorf("%w: %q: %v", errInvalidInputResponse, a.key, err))
		}
		in.used[a.key] = raw
		answers[i] = raw
	}
	if len(missing) > 0 {
		return nil, in.endLocked(in.inputRequiredLocked(missing), ErrInputRequired)
	}
	return answers, nil
}

// askedOf checks requests for input and returns them as a run asks them, keys not yet given.
func askedOf(reqs []InputRequest) ([]inputAsked, error) {
	asked := make([]inputAsked, 0, len(reqs))
	for _, r := range reqs {
		if !inputMethods[r.Method] {
			return nil, fmt.Errorf("mcptest: %s is not a request for input: a server asks sampling/createMessage, elicitation/create or roots/list", r.Method)
		}
		params, err := inputParams(r.Method, r.Params)
		if err != nil {
			return nil, err
		}
		asked = append(asked, inputAsked{key: r.Key, method: r.Method, params: params})
	}
	return asked, nil
}

// uncovered checks requests for input against the client's capabilities. When some are not
// covered, it returns the refusal (-32021, naming what the client must declare) and the error,
// ErrMissingClientCapability, the asking handler gets.
func uncovered(caps mcpclient.ClientCapabilities, asked []inputAsked) (refusal answer, err error) {
	required := map[string]map[string]struct{}{}
	for _, a := range asked {
		missingCapability(required, caps, a.method, a.params)
	}
	if len(required) == 0 {
		return answer{}, nil
	}
	names := strings.Join(slices.Sorted(maps.Keys(required)), ", ")
	return errorAnswer(rpcMissingRequiredClientCapability, "Missing required client capability: "+names,
			map[string]any{"requiredCapabilities": required}),
		fmt.Errorf("%w: %s", ErrMissingClientCapability, names)
}

// inputRequiredLocked is the input_required answer that asks for missing, with a requestState
// carrying the answers the run read. in.mu is held.
func (in *inputRun) inputRequiredLocked(missing []inputAsked) answer {
	requests := make(map[string]wireRequest, len(missing))
	for _, a := range missing {
		requests[a.key] = wireRequest{a.method, a.params}
	}
	state := in.srv.seal(sealedInput{inputBinding: in.bind, Round: in.round + 1, Answers: maps.Clone(in.used)})
	return resultAnswer(struct {
		ResultType    string                 `json:"resultType"`
		InputRequests map[string]wireRequest `json:"inputRequests"`
		RequestState  string                 `json:"requestState"`
	}{"input_required", requests, state})
}

// inputParams marshals the params of a request for input: a JSON object, {} for nil.
func inputParams(method string, params any) (json.RawMessage, error) {
	if params == nil {
		return json.RawMessage(`{}`), nil
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("mcptest: params of %s: %w", method, err)
	}
	if string(raw) == "null" {
		return json.RawMessage(`{}`), nil
	}
	if !isObject(raw) {
		return nil, fmt.Errorf("mcptest: params of %s must be a JSON object", method)
	}
	return raw, nil
}

// missingCapability adds to required what the client must declare, and did not, for a request
// for input: sampling, roots, or elicitation in the request's mode (form unless it says url).
func missingCapability(required map[string]map[string]struct{}, caps mcpclient.ClientCapabilities, method string, params json.RawMessage) {
	need := func(capability, sub string) {
		if required[capability] == nil {
			required[capability] = map[string]struct{}{}
		}
		if sub != "" {
			required[capability][sub] = struct{}{}
		}
	}
	switch method {
	case "sampling/createMessage":
		if !declared(caps.Sampling) {
			need("sampling", "")
		}
	case "roots/list":
		if caps.Roots == nil {
			need("roots", "")
		}
	case "elicitation/create":
		var p struct {
			Mode string `json:"mode"`
		}
		json.Unmarshal(params, &p) // params are an object; a mode that is no string is form's
		mode := p.Mode
		if mode != "url" {
			mode = "form"
		}
		if !elicitsIn(caps.Elicitation, mode) {
			need("elicitation", mode)
		}
	}
}

func declared(capability json.RawMessage) bool {
	return len(capability) > 0 && string(capability) != "null"
}

// elicitsIn reports whether a client's elicitation capability covers mode. An empty one covers
// form mode: it is how clients declared elicitation before it had modes.
func elicitsIn(capability json.RawMessage, mode string) bool {
	if !declared(capability) {
		return false
	}
	var modes map[string]json.RawMessage
	if json.Unmarshal(capability, &modes) != nil {
		return false
	}
	if len(modes) == 0 {
		return mode == "form"
	}
	_, ok := modes[mode]
	return ok
}

// checkInputResponse checks that raw, a JSON object, is a result of method: an ElicitResult, a
// CreateMessageResult or a ListRootsResult. Members it does not check may be anything.
func checkInputResponse(method string, raw json.RawMessage) error {
	switch method {
	case "elicitation/create":
		var r struct {
			Action  string          `json:"action"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return err
		}
		switch r.Action {
		case mcpclient.ElicitAccept, mcpclient.ElicitDecline, mcpclient.ElicitCancel:
		default:
			return fmt.Errorf("action %q is none of accept, decline, cancel", r.Action)
		}
		if r.Content != nil && !isObject(r.Content) {
			return errors.New("content is no object")
		}
	case "sampling/createMessage":
		var r struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
			Model   *string         `json:"model"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return err
		}
		content := bytes.TrimSpace(r.Content)
		switch {
		case r.Role != "user" && r.Role != "assistant":
			return fmt.Errorf("role %q is neither user nor assistant", r.Role)
		case r.Model == nil:
			return errors.New("no model")
		case len(content) == 0 || (content[0] != '{' && content[0] != '['):
			return errors.New("content is neither a block nor a list of blocks")
		}
	case "roots/list":
		var r struct {
			Roots *[]struct {
				URI string `json:"uri"`
			} `json:"roots"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return err
		}
		if r.Roots == nil {
			return errors.New("no roots")
		}
		for i, root := range *r.Roots {
			if root.URI == "" {
				return fmt.Errorf("root %d has no uri", i)
			}
		}
	}
	return nil
}
