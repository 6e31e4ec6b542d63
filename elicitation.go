package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"unicode/utf8"
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
// asks for values described by RequestedSchema; in URL mode it asks the user to visit URL. An
// ElicitationHandler sees form mode only: URL mode reaches a URLElicitationHandler, as
// URLElicitParams, and only with a URL the client checked.
type ElicitParams struct {
	Mode            string          `json:"mode,omitempty"`
	Message         string          `json:"message"`
	RequestedSchema json.RawMessage `json:"requestedSchema,omitempty"`
	URL             string          `json:"url,omitempty"`           // URL mode only
	ElicitationID   string          `json:"elicitationId,omitempty"` // URL mode only
	Meta            json.RawMessage `json:"_meta,omitempty"`
}

// ElicitResult is the client's answer to elicitation/create. In URL mode only Action and Meta
// are sent: accept means the user agreed to visit the URL, and nothing the user enters there
// passes through the client.
type ElicitResult struct {
	Action  string          `json:"action"`
	Content map[string]any  `json:"content,omitempty"`
	Meta    json.RawMessage `json:"_meta,omitempty"`
}

// An ElicitationHandler asks the user, in a form, what the server wants to know.
type ElicitationHandler func(ctx context.Context, params *ElicitParams) (*ElicitResult, error)

// URLElicitParams are the params of a URL-mode elicitation/create: the server asks the user to
// visit URL, to do there what must not pass through the client (enter a credential, authorize
// a third party, pay).
type URLElicitParams struct {
	Message string
	// URL is where the server wants the user to go: https, or http to a loopback host
	// (localhost, 127.0.0.0/8, ::1); it has a host and no userinfo. Open URL.String(), nothing
	// else the server sent.
	URL *url.URL
	// Host is URL's host name, without port and brackets, as the URL spells it: the domain to
	// show the user before asking to open the URL. It is ASCII: an internationalized domain
	// comes in its xn-- form, so that letters of another script cannot pass for a familiar
	// domain.
	Host          string
	ElicitationID string
	Meta          json.RawMessage
}

// A URLElicitationHandler asks the user whether to visit the URL a server names, showing at least
// the message and the host, and opens it (in a browser, say) only if the user agrees; it never
// fetches the URL itself. It answers accept when the user agreed, decline or cancel otherwise;
// any Content of its result is left out of the answer.
type URLElicitationHandler func(ctx context.Context, params *URLElicitParams) (*ElicitResult, error)

// elicitationCapability is the elicitation capability the client declares: the modes it has a
// handler for, or nil.
func (c *config) elicitationCapability() json.RawMessage {
	switch {
	case c.elicitation != nil && c.urlElicitation != nil:
		return json.RawMessage(`{"form":{},"url":{}}`)
	case c.elicitation != nil:
		return json.RawMessage(`{"form":{}}`)
	case c.urlElicitation != nil:
		return json.RawMessage(`{"url":{}}`)
	}
	return nil
}

func (c *Client) elicit(ctx context.Context, raw json.RawMessage) (any, error) {
	var p ElicitParams
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, &RPCError{Code: RPCInvalidParams, Message: "elicitation/create params: " + err.Error()}
	}
	switch p.Mode {
	case "", ElicitModeForm:
		if c.cfg.elicitation == nil {
			return nil, &RPCError{Code: RPCInvalidParams, Message: "elicitation/create: the client does not support form mode"}
		}
		res, err := c.cfg.elicitation(ctx, &p)
		if err != nil {
			return nil, err
		}
		if res == nil {
			return nil, errors.New("the elicitation handler returned no result")
		}
		if res.Action == ElicitAccept {
			res.Content = withSchemaDefaults(p.RequestedSchema, res.Content)
		}
		return res, nil
	case ElicitModeURL:
		if c.cfg.urlElicitation == nil {
			return nil, &RPCError{Code: RPCInvalidParams, Message: "elicitation/create: the client does not support URL mode"}
		}
		u, err := checkElicitationURL(p.URL)
		if err != nil {
			return nil, &RPCError{Code: RPCInvalidParams, Message: "elicitation/create: " + err.Error()}
		}
		res, err := c.cfg.urlElicitation(ctx, &URLElicitParams{Message: p.Message, URL: u, Host: u.Hostname(),
			ElicitationID: p.ElicitationID, Meta: p.Meta})
		if err != nil {
			return nil, err
		}
		if res == nil {
			return nil, errors.New("the URL elicitation handler returned no result")
		}
		return &ElicitResult{Action: res.Action, Meta: res.Meta}, nil
	}
	return nil, &RPCError{Code: RPCInvalidParams, Message: fmt.Sprintf("elicitation/create: unknown mode %.20q", p.Mode)}
}

// checkElicitationURL parses the URL of a URL-mode elicitation and refuses one that a user
// should not be sent to: it could run code in the client's context (javascript:, data:), read
// local files (file:), travel unencrypted beyond this machine, or show one domain and lead to
// another (userinfo before the host, letters of another script imitating a familiar domain).
func checkElicitationURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("no url")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error // its text repeats the whole url, which the server knows
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("the url does not parse: %w", err)
	}
	if u.User != nil {
		return nil, errors.New("the url carries userinfo, which would show one host and lead to another")
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return nil, errors.New("the url names no host")
	}
	for _, r := range u.Hostname() {
		if r >= utf8.RuneSelf {
			return nil, errors.New("the url's host has characters outside ASCII; send an internationalized domain in its xn-- form")
		}
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !loopbackHost(u.Hostname()) {
			return nil, errors.New("an http url must lead to this machine (localhost, 127.0.0.0/8, ::1); use https")
		}
	default:
		return nil, fmt.Errorf("url scheme %.20q: only https is allowed, and http to this machine", u.Scheme)
	}
	return u, nil
}

// loopbackHost reports whether host names this machine without a name lookup.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
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
