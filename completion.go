package mcpclient

import "context"

// CompletionReference names what an argument belongs to: a prompt or a resource template.
type CompletionReference struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
	URI  string `json:"uri,omitempty"`
}

// PromptReference refers to the prompt name.
func PromptReference(name string) CompletionReference {
	return CompletionReference{Type: "ref/prompt", Name: name}
}

// ResourceReference refers to the resource template uri.
func ResourceReference(uri string) CompletionReference {
	return CompletionReference{Type: "ref/resource", URI: uri}
}

// Completion is the server's suggestions for an argument value.
type Completion struct {
	Values  []string `json:"values"`
	Total   *int     `json:"total,omitempty"`
	HasMore bool     `json:"hasMore,omitempty"`
}

// Complete asks for completions of the argument name, whose value so far is value. known holds
// the values of arguments already chosen, for servers that complete one from another.
func (c *Client) Complete(ctx context.Context, ref CompletionReference, name, value string, known map[string]string, opts ...CallOption) (*Completion, error) {
	type argument struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	type knownArgs struct {
		Arguments map[string]string `json:"arguments,omitempty"`
	}
	params := struct {
		Ref      CompletionReference `json:"ref"`
		Argument argument            `json:"argument"`
		Context  *knownArgs          `json:"context,omitempty"`
	}{Ref: ref, Argument: argument{name, value}}
	if len(known) > 0 {
		params.Context = &knownArgs{known}
	}
	var res struct {
		Completion Completion `json:"completion"`
	}
	if err := c.call(ctx, "completion/complete", params, &res, opts...); err != nil {
		return nil, err
	}
	return &res.Completion, nil
}
