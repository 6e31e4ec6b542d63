// Package apps is the host side of MCP Apps (extension io.modelcontextprotocol/ui, SEP-1865):
// what a Go host needs to show a server's interactive views and to keep the model and the views
// to the tools each may use.
//
// A server links a tool to a view with the tool's _meta.ui ([UIOf]): the view's ui:// resource
// and the tool's visibility, "model" (the agent may see and call it), "app" (the view may call
// it), or both, the default. The host:
//
//   - declares the extension ([Declare]), so that a server offers its UI-enabled tools;
//   - offers the model only the tools visible to it ([ModelTools]);
//   - reads a view's HTML with [ReadUI], which refuses anything but a ui:// URI answered with
//     text/html;profile=mcp-app content within a size bound, and returns the resource's
//     _meta.ui (CSP domains, permissions, dedicated domain, border preference) from which the
//     host builds the sandbox;
//   - carries the view's tools/call requests with [CallFromApp], which refuses a tool the view
//     may not call and otherwise calls it as the client calls any tool (same ledger, receipts,
//     retry rules).
//
// Rendering the view (sandboxed iframe, postMessage bridge, ui/* messages) is the host's user
// interface and outside this package. The package is built on the client's public API alone;
// its calls take a mcpclient.Caller: a *mcpclient.Client, or a plugin that decorates one.
package apps

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"slices"
	"strings"

	"github.com/northstar-mcp/mcpclient"
)

// Extension is the identifier of MCP Apps under capabilities.extensions.
const Extension = "io.modelcontextprotocol/ui"

// MIMEType is the media type of a view's HTML: text/html with the mcp-app profile.
const MIMEType = "text/html;profile=mcp-app"

// Declare declares MCP Apps in the client's capabilities, with the one content type this
// package reads (mimeTypes, which the extension requires). A server may then offer tools with
// views, and may offer them only then.
func Declare() mcpclient.Option {
	return mcpclient.WithExtension(Extension, map[string][]string{"mimeTypes": {MIMEType}})
}

// Visibility says who may use a tool.
type Visibility string

const (
	// Model: the agent sees the tool and may call it.
	Model Visibility = "model"
	// App: a view of the same server may call the tool.
	App Visibility = "app"
)

var (
	// ErrNotUIURI: a URI is not an acceptable ui:// URI (another scheme, no host, a dot
	// segment, a fragment, user information, a backslash or a control character).
	ErrNotUIURI = errors.New("apps: not a ui:// resource URI")
	// ErrMalformedMeta: a tool's or resource's _meta.ui does not have the extension's shape.
	ErrMalformedMeta = errors.New("apps: malformed _meta.ui")
	// ErrNotAppHTML: resources/read answered without text/html;profile=mcp-app content for
	// the URI asked.
	ErrNotAppHTML = errors.New("apps: no text/html;profile=mcp-app content")
	// ErrTooLarge: the view's HTML is larger than the bound (see MaxSize); errors.As finds a
	// *TooLargeError.
	ErrTooLarge = errors.New("apps: view too large")
	// ErrNotForApp: a view asked to call a tool whose visibility does not include "app", or
	// one the server does not list.
	ErrNotForApp = errors.New("apps: tool not callable from an app")
)

// ToolUI is what a tool's _meta.ui says.
type ToolUI struct {
	// ResourceURI is the ui:// resource of the tool's view; "" when the tool has none. Check it
	// with Validate before use: it comes from the server as it is.
	ResourceURI string
	// Visibility is who may use the tool, as the server says; nil when it says nothing, which
	// means both the model and the app.
	Visibility []Visibility

	err error // the reason _meta.ui was not understood; nil when it was
}

// toolUIWire is _meta.ui on a tool. Visibility is raw so that an absent value, which means
// both, stays apart from an empty or malformed one, which means neither.
type toolUIWire struct {
	ResourceURI *string         `json:"resourceUri"`
	Visibility  json.RawMessage `json:"visibility"`
}

// legacyResourceURIKey is the flat _meta key that preceded _meta.ui.resourceUri; servers built
// on earlier SDKs send it, alone or beside _meta.ui.
const legacyResourceURIKey = "ui/resourceUri"

// UIOf returns what the tool's _meta.ui says, and whether it says anything: false for a tool
// without _meta.ui (nor the deprecated _meta["ui/resourceUri"]), a plain tool that both the model
// and a view may use. A _meta.ui that is not of the extension's shape is reported as present,
// with Validate returning ErrMalformedMeta and the tool visible to no one: a host that cannot
// tell whom the server meant the tool for offers it to neither.
func UIOf(tool *mcpclient.Tool) (ToolUI, bool) {
	if tool == nil || len(tool.Meta) == 0 {
		return ToolUI{}, false
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(tool.Meta, &meta); err != nil {
		return ToolUI{}, false // a tool's _meta that is no object says nothing about a view
	}
	rawUI, hasUI := meta["ui"]
	rawLegacy, hasLegacy := meta[legacyResourceURIKey]
	if !hasUI && !hasLegacy {
		return ToolUI{}, false
	}
	var ui ToolUI
	if hasUI {
		var w toolUIWire
		if err := json.Unmarshal(rawUI, &w); err != nil || isNull(rawUI) {
			return ToolUI{err: fmt.Errorf("%w: tool %s: %s", ErrMalformedMeta, tool.Name, describe(rawUI, err))}, true
		}
		if w.ResourceURI != nil {
			ui.ResourceURI = *w.ResourceURI
		}
		if len(w.Visibility) > 0 && !isNull(w.Visibility) {
			var vis []Visibility
			if err := json.Unmarshal(w.Visibility, &vis); err != nil {
				return ToolUI{ResourceURI: ui.ResourceURI,
					err: fmt.Errorf("%w: tool %s: visibility %s is not an array of strings", ErrMalformedMeta, tool.Name, truncate(w.Visibility))}, true
			}
			ui.Visibility = vis
			if ui.Visibility == nil {
				ui.Visibility = []Visibility{}
			}
		}
	}
	if ui.ResourceURI == "" && hasLegacy {
		if err := json.Unmarshal(rawLegacy, &ui.ResourceURI); err != nil {
			ui.err = fmt.Errorf("%w: tool %s: _meta[%q] is not a string", ErrMalformedMeta, tool.Name, legacyResourceURIKey)
		}
	}
	if ui.err == nil && ui.ResourceURI != "" {
		if err := CheckURI(ui.ResourceURI); err != nil {
			ui.err = fmt.Errorf("tool %s: resourceUri: %w", tool.Name, err)
		}
	}
	return ui, true
}

// Validate reports what is wrong with the tool's _meta.ui: ErrMalformedMeta when it is not of
// the extension's shape, ErrNotUIURI when its resourceUri is not an acceptable ui:// URI; nil
// when nothing is.
func (u ToolUI) Validate() error { return u.err }

// VisibleToModel reports whether the model may see and call the tool: its visibility includes
// "model", or is absent. A malformed _meta.ui makes the tool visible to no one.
func (u ToolUI) VisibleToModel() bool { return u.allows(Model) }

// CallableByApp reports whether a view of the same server may call the tool: its visibility
// includes "app", or is absent. A malformed _meta.ui makes the tool callable by no one.
func (u ToolUI) CallableByApp() bool { return u.allows(App) }

func (u ToolUI) allows(v Visibility) bool {
	if u.err != nil && errors.Is(u.err, ErrMalformedMeta) {
		return false
	}
	return u.Visibility == nil || slices.Contains(u.Visibility, v)
}

// ModelTools returns the tools the model may be offered: those whose visibility includes
// "model" (or says nothing), in their order. The extension requires the host to keep the others
// out of the agent's tool list; they stay callable by views (see AppTools, CallFromApp).
func ModelTools(tools []*mcpclient.Tool) []*mcpclient.Tool {
	return filter(tools, ToolUI.VisibleToModel)
}

// AppTools returns the tools a view of the same server may call: those whose visibility
// includes "app" (or says nothing), in their order.
func AppTools(tools []*mcpclient.Tool) []*mcpclient.Tool {
	return filter(tools, ToolUI.CallableByApp)
}

func filter(tools []*mcpclient.Tool, keep func(ToolUI) bool) []*mcpclient.Tool {
	out := make([]*mcpclient.Tool, 0, len(tools))
	for _, t := range tools {
		if t == nil {
			continue
		}
		ui, _ := UIOf(t)
		if keep(ui) {
			out = append(out, t)
		}
	}
	return out
}

// CheckURI returns nil if uri is a ui:// URI a host may read and key a view by, and an error
// wrapping ErrNotUIURI if not. Beyond the scheme (exactly "ui", lower case, as the extension
// writes it) it refuses what lets two spellings name one view or smuggles a different one past
// a reviewer: no host, user information, a port, a fragment, "." or ".." path segments (also
// percent-encoded), backslashes, and spaces or control characters.
func CheckURI(uri string) error {
	bad := func(why string) error { return fmt.Errorf("%w: %q: %s", ErrNotUIURI, truncateString(uri), why) }
	if !strings.HasPrefix(uri, "ui://") {
		return bad("the scheme is not ui://")
	}
	for _, r := range uri {
		if r <= ' ' || r == 0x7f || r == '\\' {
			return bad("it has a space, a control character or a backslash")
		}
	}
	u, err := url.Parse(uri)
	if err != nil {
		return bad(err.Error())
	}
	switch {
	case u.Host == "":
		return bad("it names no host")
	case u.User != nil:
		return bad("it has user information")
	case u.Port() != "" || strings.HasSuffix(u.Host, ":"):
		return bad("it has a port")
	case u.Fragment != "" || strings.Contains(uri, "#"):
		return bad("it has a fragment")
	}
	for _, seg := range strings.Split(u.EscapedPath(), "/") {
		decoded, err := url.PathUnescape(seg)
		if err != nil {
			return bad("a path segment does not decode")
		}
		if decoded == "." || decoded == ".." {
			return bad("it has a dot segment")
		}
		if strings.ContainsAny(decoded, "/\\") {
			return bad("a path segment encodes a slash")
		}
	}
	return nil
}

// isAppHTML reports whether mediaType is text/html with profile mcp-app: the type and
// parameter names compare without case, the profile value exactly, other parameters (charset)
// are allowed, and quoting and spaces are as RFC 2045 allows.
func isAppHTML(mediaType string) bool {
	t, params, err := mime.ParseMediaType(mediaType)
	if err != nil || t != "text/html" {
		return false
	}
	return params["profile"] == "mcp-app"
}

func isNull(raw json.RawMessage) bool { return strings.TrimSpace(string(raw)) == "null" }

func describe(raw json.RawMessage, err error) string {
	if err != nil {
		return err.Error()
	}
	return "it is " + truncate(raw)
}

func truncate(raw json.RawMessage) string { return truncateString(string(raw)) }

func truncateString(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
