package mcptest

import (
	"context"
	"encoding/json"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
)

// A MethodFunc answers one request of a method the server has no built-in handling for, such as
// an extension's: params are the request's params as sent (nil when absent), and what it returns
// is marshalled as the result. An *mcpclient.RPCError it returns is sent as it is; any other
// error as an internal error (-32603) carrying its text. ctx ends when the server closes or
// restarts, or the client cancels the request.
type MethodFunc func(ctx context.Context, params json.RawMessage) (any, error)

// WithMethod answers requests of method with f, so that a test can serve what an extension adds
// to the protocol (skills/list, say) beside what the server has built in. The built-in methods
// (initialize, tools/*, resources/*, prompts/*, tasks/*, ...) keep their handling: a MethodFunc
// for one of them is never called. A later registration of the same method replaces the
// earlier.
func WithMethod(method string, f MethodFunc) Option {
	return optionFunc(func(s *Server) {
		if s.methods == nil {
			s.methods = make(map[string]MethodFunc)
		}
		s.methods[method] = f
	})
}

// WithExtension makes the server declare the extension id in its capabilities, under
// capabilities.extensions, with settings marshalled to a JSON object; nil declares it with none
// ({}). Settings that do not marshal are declared as {}. The requests of the extension are served
// with WithMethod.
func WithExtension(id string, settings any) Option {
	return optionFunc(func(s *Server) {
		raw := json.RawMessage(`{}`)
		if settings != nil {
			if b, err := json.Marshal(settings); err == nil && len(b) > 0 && b[0] == '{' {
				raw = b
			}
		}
		if s.extensions == nil {
			s.extensions = make(map[string]json.RawMessage)
		}
		s.extensions[id] = raw
	})
}

// callMethod answers a request of a method registered with WithMethod, or refuses it as unknown.
func (s *Server) callMethod(ctx context.Context, m jsonrpc.Message) answer {
	s.mu.Lock()
	f := s.methods[m.Method]
	s.mu.Unlock()
	if f == nil {
		return errorAnswer(mcpclient.RPCMethodNotFound, "method not found: "+m.Method, nil)
	}
	return handlerAnswer(guard(m.Method, func() (any, error) { return f(ctx, m.Params) }))
}
