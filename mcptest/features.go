package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
)

// RPCResourceNotFound is the JSON-RPC error code of resources/read for a URI that no resource or
// template serves.
const RPCResourceNotFound = -32002

// A ResourceFunc reads a resource: a registered one by its URI, or one that a template's URI
// matches. An *mcpclient.RPCError it returns is sent as it is; any other error as an internal
// error (-32603) carrying its text. ctx ends when the server closes or restarts, or the client
// cancels the request.
type ResourceFunc func(ctx context.Context, uri string) ([]mcpclient.ResourceContents, error)

type resourceEntry struct {
	res  mcpclient.Resource
	read ResourceFunc
}

type templateEntry struct {
	tmpl mcpclient.ResourceTemplate
	read ResourceFunc
}

// WithResource registers a resource, listed by resources/list and read by resources/read with
// read. A later registration under the same URI replaces the earlier. Any resource or template
// makes the server declare capabilities.resources (subscribe and listChanged).
func WithResource(r mcpclient.Resource, read ResourceFunc) Option {
	return optionFunc(func(s *Server) { addResourceLocked(s, r, read) })
}

func addResourceLocked(s *Server, r mcpclient.Resource, read ResourceFunc) {
	if _, ok := s.resources[r.URI]; !ok {
		s.resourceOrder = append(s.resourceOrder, r.URI)
	}
	s.resources[r.URI] = &resourceEntry{res: r, read: read}
}

// WithResourceTemplate registers a resource template, listed by resources/templates/list. A
// resources/read whose URI no registered resource has is served by the first template, in
// registration order, whose URI template matches it (RFC 6570 level 1: see MatchURITemplate).
func WithResourceTemplate(t mcpclient.ResourceTemplate, read ResourceFunc) Option {
	return optionFunc(func(s *Server) {
		for _, e := range s.templates {
			if e.tmpl.URITemplate == t.URITemplate {
				e.tmpl, e.read = t, read
				return
			}
		}
		s.templates = append(s.templates, &templateEntry{tmpl: t, read: read})
	})
}

// A PromptFunc renders a prompt with the client's arguments. Its errors are sent as a
// ResourceFunc's are.
type PromptFunc func(ctx context.Context, args map[string]string) (*mcpclient.GetPromptResult, error)

// A PromptCallFunc renders a prompt for one prompts/get, and may ask the client for input while
// it does (see PromptCall). Its errors are sent as a ResourceFunc's are.
type PromptCallFunc func(ctx context.Context, call *PromptCall) (*mcpclient.GetPromptResult, error)

// A PromptCall is what a PromptCallFunc is called with: the prompts/get request, and the way to
// ask its client for input, as a ToolCall's.
type PromptCall struct {
	Name      string
	Arguments map[string]string // never nil

	srv     *Server
	session *sessionState // nil outside a live session
	out     outlet        // the way to the client that asked
	input   *inputRun     // the run's input, in the stateless revisions
}

// Request asks the client for input, as ToolCall.Request does.
func (c *PromptCall) Request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	res, err := c.RequestAll(ctx, InputRequest{Method: method, Params: params})
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// RequestAll asks the client for several inputs at once, as ToolCall.RequestAll does: in the
// stateless revisions a missing answer ends the run, and prompts/get answers input_required.
func (c *PromptCall) RequestAll(ctx context.Context, reqs ...InputRequest) ([]json.RawMessage, error) {
	switch {
	case len(reqs) == 0:
		return []json.RawMessage{}, nil
	case c.input != nil:
		return c.input.request(reqs)
	case c.session == nil || c.out == nil:
		return nil, errNoClient
	}
	return c.srv.requestEach(ctx, c.session, c.out, reqs)
}

// Round returns the round of the multi round-trip request, as ToolCall.Round does.
func (c *PromptCall) Round() int {
	if c.input == nil {
		return 1
	}
	return c.input.round
}

// ClientCapabilities returns the capabilities of the client that asked, as
// ToolCall.ClientCapabilities does.
func (c *PromptCall) ClientCapabilities() mcpclient.ClientCapabilities {
	return c.session.capabilities()
}

type promptEntry struct {
	prompt mcpclient.Prompt
	get    PromptCallFunc
}

// WithPrompt registers a prompt, listed by prompts/list and rendered by prompts/get with get;
// prompts/get refuses (-32602) an unknown name or a missing required argument. A later
// registration under the same name replaces the earlier. Any prompt makes the server declare
// capabilities.prompts (listChanged).
func WithPrompt(p mcpclient.Prompt, get PromptFunc) Option {
	var call PromptCallFunc
	if get != nil {
		call = func(ctx context.Context, c *PromptCall) (*mcpclient.GetPromptResult, error) {
			return get(ctx, c.Arguments)
		}
	}
	return WithPromptCall(p, call)
}

// WithPromptCall registers a prompt as WithPrompt does, rendered by get, which may ask the
// client for input (see PromptCall).
func WithPromptCall(p mcpclient.Prompt, get PromptCallFunc) Option {
	return optionFunc(func(s *Server) {
		if _, ok := s.prompts[p.Name]; !ok {
			s.promptOrder = append(s.promptOrder, p.Name)
		}
		s.prompts[p.Name] = &promptEntry{prompt: p, get: get}
	})
}

// A CompletionFunc answers completion/complete: suggestions for the argument name of ref, whose
// value so far is value; known holds the other arguments the client already chose (nil when
// none). Its errors are sent as a ResourceFunc's are.
type CompletionFunc func(ctx context.Context, ref mcpclient.CompletionReference, name, value string, known map[string]string) (*mcpclient.Completion, error)

// WithCompletion answers completion/complete with f and declares capabilities.completions.
// Default: no completion (method not found).
func WithCompletion(f CompletionFunc) Option {
	return optionFunc(func(s *Server) { s.completion = f })
}

// handlerAnswer turns what a resource, prompt or completion func returned into an answer.
func handlerAnswer(v any, err error) answer {
	if err != nil {
		var rpc *mcpclient.RPCError
		if errors.As(err, &rpc) {
			body, _ := json.Marshal(rpc) // plain fields
			return answer{body: body, isError: true}
		}
		return errorAnswer(mcpclient.RPCInternalError, err.Error(), nil)
	}
	return resultAnswer(v)
}

// guard runs f, turning a panic into an error.
func guard[T any](what string, f func() (T, error)) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			var zero T
			v, err = zero, fmt.Errorf("%s panicked: %v", what, p)
		}
	}()
	return f()
}

func (s *Server) listResources(m jsonrpc.Message) answer {
	return listAnswer(s, m, func() []string { return s.resourceOrder },
		func(uri string) mcpclient.Resource { return s.resources[uri].res },
		func(resources []*mcpclient.Resource, next string) any {
			return mcpclient.ListResourcesResult{Resources: resources, NextCursor: next}
		})
}

func (s *Server) listResourceTemplates(m jsonrpc.Message) answer {
	return listAnswer(s, m, func() []*templateEntry { return s.templates },
		func(e *templateEntry) mcpclient.ResourceTemplate { return e.tmpl },
		func(templates []*mcpclient.ResourceTemplate, next string) any {
			return mcpclient.ListResourceTemplatesResult{ResourceTemplates: templates, NextCursor: next}
		})
}

type uriParams struct {
	URI string `json:"uri"`
}

func readURI(m jsonrpc.Message) (string, *answer) {
	var p uriParams
	if err := json.Unmarshal(m.Params, &p); err != nil || p.URI == "" {
		a := errorAnswer(mcpclient.RPCInvalidParams, m.Method+" needs params with a uri", nil)
		return "", &a
	}
	return p.URI, nil
}

// readResource serves resources/read: the resource registered under the URI, else the skill file
// (see WithSkill), else the first template that matches it. notFound is the error code of a URI
// that names nothing: the revision's.
func (s *Server) readResource(ctx context.Context, m jsonrpc.Message, notFound int64) answer {
	uri, bad := readURI(m)
	if bad != nil {
		return *bad
	}
	if contents := s.readSkillFile(uri); contents != nil {
		return resultAnswer(mcpclient.ReadResourceResult{Contents: contents})
	}
	var read ResourceFunc
	s.mu.Lock()
	if r := s.resources[uri]; r != nil {
		read = r.read
	} else {
		for _, e := range s.templates {
			if _, ok := MatchURITemplate(e.tmpl.URITemplate, uri); ok {
				read = e.read
				break
			}
		}
	}
	s.mu.Unlock()
	if read == nil {
		return errorAnswer(notFound, "Resource not found", map[string]string{"uri": uri})
	}
	contents, err := guard("resource "+uri, func() ([]mcpclient.ResourceContents, error) { return read(ctx, uri) })
	if contents == nil {
		contents = []mcpclient.ResourceContents{}
	}
	return handlerAnswer(mcpclient.ReadResourceResult{Contents: contents}, err)
}

// subscribe serves resources/subscribe and resources/unsubscribe for the session.
func (s *Server) subscribe(st *sessionState, m jsonrpc.Message) answer {
	uri, bad := readURI(m)
	if bad != nil {
		return *bad
	}
	if st == nil {
		return errorAnswer(mcpclient.RPCInternalError, "no session", nil)
	}
	st.mu.Lock()
	if m.Method == "resources/subscribe" {
		st.subs[uri] = true
	} else {
		delete(st.subs, uri)
	}
	st.mu.Unlock()
	return answer{body: []byte("{}")}
}

// ResourceUpdated sends notifications/resources/updated for uri to the sessions subscribed to
// it.
func (s *Server) ResourceUpdated(uri string) {
	raw, _ := json.Marshal(uriParams{uri})
	s.notifyListeners("notifications/resources/updated", raw, uri)
	s.notifySessions("notifications/resources/updated", uriParams{uri}, func(st *sessionState) bool {
		return st.subscribed(uri)
	})
}

// ResourceListChanged sends notifications/resources/list_changed to every live session.
func (s *Server) ResourceListChanged() { s.Notify("notifications/resources/list_changed", nil) }

// PromptListChanged sends notifications/prompts/list_changed to every live session.
func (s *Server) PromptListChanged() { s.Notify("notifications/prompts/list_changed", nil) }

func (s *Server) listPrompts(m jsonrpc.Message) answer {
	return listAnswer(s, m, func() []string { return s.promptOrder },
		func(name string) mcpclient.Prompt { return s.prompts[name].prompt },
		func(prompts []*mcpclient.Prompt, next string) any {
			return mcpclient.ListPromptsResult{Prompts: prompts, NextCursor: next}
		})
}

// getPrompt serves prompts/get. st and out are the client's session and the way back to it, for
// a prompt that asks for input; st is the request's own in the stateless revisions.
func (s *Server) getPrompt(ctx context.Context, m jsonrpc.Message, st *sessionState, out outlet) answer {
	var p struct {
		Name      string            `json:"name"`
		Arguments map[string]string `json:"arguments"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil || p.Name == "" {
		return errorAnswer(mcpclient.RPCInvalidParams, "prompts/get needs params with a name and string arguments", nil)
	}
	s.mu.Lock()
	e := s.prompts[p.Name]
	s.mu.Unlock()
	if e == nil {
		return errorAnswer(mcpclient.RPCInvalidParams, "unknown prompt: "+p.Name, nil)
	}
	for _, a := range e.prompt.Arguments {
		if _, ok := p.Arguments[a.Name]; a.Required && !ok {
			return errorAnswer(mcpclient.RPCInvalidParams, "prompt "+p.Name+" needs the argument "+a.Name, nil)
		}
	}
	if p.Arguments == nil {
		p.Arguments = map[string]string{}
	}
	call := &PromptCall{Name: p.Name, Arguments: p.Arguments, srv: s, session: st, out: out}
	if st != nil && st.stateless {
		args, _ := json.Marshal(p.Arguments) // strings marshal
		in, bad := s.openInputs(st, bindingOf(m.Method, p.Name, args), m.Params)
		if bad != nil {
			return *bad
		}
		call.input = in
	}
	return runInputs(ctx, call.input, func(ctx context.Context) answer {
		res, err := guard("prompt "+p.Name, func() (*mcpclient.GetPromptResult, error) { return e.get(ctx, call) })
		if err == nil && res == nil {
			res = &mcpclient.GetPromptResult{}
		}
		if res != nil && res.Messages == nil {
			res.Messages = []mcpclient.PromptMessage{}
		}
		return handlerAnswer(res, err)
	})
}

func (s *Server) complete(ctx context.Context, m jsonrpc.Message) answer {
	s.mu.Lock()
	f := s.completion
	s.mu.Unlock()
	if f == nil {
		return errorAnswer(mcpclient.RPCMethodNotFound, "method not found: "+m.Method, nil)
	}
	var p struct {
		Ref      mcpclient.CompletionReference `json:"ref"`
		Argument struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"argument"`
		Context struct {
			Arguments map[string]string `json:"arguments"`
		} `json:"context"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil || p.Argument.Name == "" ||
		(p.Ref.Type != "ref/prompt" && p.Ref.Type != "ref/resource") {
		return errorAnswer(mcpclient.RPCInvalidParams, "completion/complete needs a ref/prompt or ref/resource ref and an argument name", nil)
	}
	c, err := guard("completion", func() (*mcpclient.Completion, error) {
		return f(ctx, p.Ref, p.Argument.Name, p.Argument.Value, p.Context.Arguments)
	})
	if err == nil && c == nil {
		c = &mcpclient.Completion{}
	}
	if c != nil && c.Values == nil {
		c.Values = []string{}
	}
	return handlerAnswer(struct {
		Completion *mcpclient.Completion `json:"completion"`
	}{c}, err)
}

// levelRank orders the logging levels, least severe first.
var levelRank = map[mcpclient.LoggingLevel]int{
	mcpclient.LevelDebug:     0,
	mcpclient.LevelInfo:      1,
	mcpclient.LevelNotice:    2,
	mcpclient.LevelWarning:   3,
	mcpclient.LevelError:     4,
	mcpclient.LevelCritical:  5,
	mcpclient.LevelAlert:     6,
	mcpclient.LevelEmergency: 7,
}

func (s *Server) setLogLevel(st *sessionState, m jsonrpc.Message) answer {
	var p struct {
		Level mcpclient.LoggingLevel `json:"level"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return errorAnswer(mcpclient.RPCInvalidParams, "logging/setLevel params: "+err.Error(), nil)
	}
	if _, ok := levelRank[p.Level]; !ok {
		return errorAnswer(mcpclient.RPCInvalidParams, fmt.Sprintf("unknown logging level %q", p.Level), nil)
	}
	if st == nil {
		return errorAnswer(mcpclient.RPCInternalError, "no session", nil)
	}
	st.mu.Lock()
	st.logLevel = p.Level
	st.mu.Unlock()
	return answer{body: []byte("{}")}
}

// Log sends a log record (notifications/message) to every live session whose level admits
// level: a session that never sent logging/setLevel gets every record, debug included; one that
// did gets the records of its level and above. logger may be empty; data is any JSON value.
func (s *Server) Log(level mcpclient.LoggingLevel, logger string, data any) error {
	if _, ok := levelRank[level]; !ok {
		return fmt.Errorf("mcptest: unknown logging level %q", level)
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return err
	}
	return s.notifySessions("notifications/message", mcpclient.LogMessage{Level: level, Logger: logger, Data: raw},
		func(st *sessionState) bool { return st.admits(level) })
}
