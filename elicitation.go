package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
)

// Elicitation modes.
const (
	ElicitModeForm = "form"
	ElicitModeURL  = "url"
)

// Elicitation actions.
const (
	ElicitAccept  = "accept"
	ElicitDecline = "decline"
	ElicitCancel  = "cancel"
)

// ElicitParams are the params of elicitation/create. In form mode (the default) the server
// asks for values described by RequestedSchema; in URL mode it asks the user to visit URL.
type ElicitParams struct {
	Mode            string          `json:"mode,omitempty"`
	Message         string          `json:"message"`
	RequestedSchema json.RawMessage `json:"requestedSchema,omitempty"`
	URL             string          `json:"url,omitempty"`
	ElicitationID   string          `json:"elicitationId,omitempty"`
	Meta            json.RawMessage `json:"_meta,omitempty"`
}

// ElicitResult is the client's answer to elicitation/create.
type ElicitResult struct {
	Action  string          `json:"action"`
	Content map[string]any  `json:"content,omitempty"`
	Meta    json.RawMessage `json:"_meta,omitempty"`
}

// An ElicitationHandler asks the user what the server wants to know.
type ElicitationHandler func(ctx context.Context, params *ElicitParams) (*ElicitResult, error)

// WithElicitationHandler declares the elicitation capability, in form and URL modes, and
// answers elicitation/create with h. When h accepts a form, fields it leaves out that the schema
// gives a default take that default (SEP-1034). Default: no elicitation.
func WithElicitationHandler(h ElicitationHandler) Option {
	return optionFunc(func(c *config) { c.elicitation = h })
}

func (c *Client) elicit(ctx context.Context, raw json.RawMessage) (any, error) {
	var p ElicitParams
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, &RPCError{Code: RPCInvalidParams, Message: "elicitation/create params: " + err.Error()}
	}
	res, err := c.cfg.elicitation(ctx, &p)
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, errors.New("the elicitation handler returned no result")
	}
	if res.Action == ElicitAccept && p.Mode != ElicitModeURL {
		res.Content = withSchemaDefaults(p.RequestedSchema, res.Content)
	}
	return res, nil
}

// withSchemaDefaults fills the fields a form left out with the defaults its schema declares.
func withSchemaDefaults(schema json.RawMessage, content map[string]any) map[string]any {
	var s struct {
		Properties map[string]struct {
			Default json.RawMessage `json:"default"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return content
	}
	for name, prop := range s.Properties {
		if prop.Default == nil {
			continue
		}
		if _, set := content[name]; set {
			continue
		}
		var v any
		if json.Unmarshal(prop.Default, &v) != nil {
			continue
		}
		if content == nil {
			content = make(map[string]any)
		}
		content[name] = v
	}
	return content
}
