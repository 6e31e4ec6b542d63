package apps

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/northstar-mcp/mcpclient"
)

// DefaultMaxSize is the largest view ReadUI returns, in bytes of HTML, unless MaxSize says
// otherwise.
const DefaultMaxSize = 5 << 20

// View is a view's HTML and what the server says about showing it.
type View struct {
	// URI is the ui:// URI read.
	URI string
	// MIMEType is the content's media type as the server wrote it (text/html;profile=mcp-app,
	// perhaps with other parameters).
	MIMEType string
	// HTML is the view's document, decoded from base64 when the server sent a blob.
	HTML string
	// UI is the resource's _meta.ui: from the content read, else from the listing given with
	// Listed.
	UI ResourceUI
	// Meta is the content item's whole _meta, and ResultMeta the resources/read result's.
	Meta, ResultMeta json.RawMessage
}

// ResourceUI is a view resource's _meta.ui: what the host needs to sandbox the view.
type ResourceUI struct {
	// CSP lists the origins the view may reach; empty lists mean none (the extension's
	// restrictive default policy).
	CSP CSP `json:"csp"`
	// Permissions are the browser capabilities the view asks for; a host may refuse them.
	Permissions Permissions `json:"permissions"`
	// Domain is the dedicated sandbox origin the server asks for, in a host-specific format;
	// "" for the host's default.
	Domain string `json:"domain,omitempty"`
	// PrefersBorder is whether the view asks for a visible border and background; nil leaves
	// it to the host.
	PrefersBorder *bool `json:"prefersBorder,omitempty"`
}

// CSP are the origins a view declares, each list mapping to Content-Security-Policy
// directives; the host must not allow an origin no list declares.
type CSP struct {
	// ConnectDomains: fetch, XHR and WebSocket (connect-src).
	ConnectDomains []string `json:"connectDomains,omitempty"`
	// ResourceDomains: scripts, images, styles, fonts and media (script-src, img-src,
	// style-src, font-src, media-src).
	ResourceDomains []string `json:"resourceDomains,omitempty"`
	// FrameDomains: nested iframes (frame-src); none when empty.
	FrameDomains []string `json:"frameDomains,omitempty"`
	// BaseURIDomains: the document's base URI (base-uri); 'self' when empty.
	BaseURIDomains []string `json:"baseUriDomains,omitempty"`
}

// Permissions are the Permission Policy features a view asks for. The extension writes each as
// an empty object when asked; here true means asked.
type Permissions struct {
	Camera         bool
	Microphone     bool
	Geolocation    bool
	ClipboardWrite bool
}

// UnmarshalJSON reads the extension's shape: a feature is asked for when its member is present
// and not null or false.
func (p *Permissions) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	asked := func(name string) bool {
		v, ok := raw[name]
		return ok && !isNull(v) && string(v) != "false"
	}
	*p = Permissions{Camera: asked("camera"), Microphone: asked("microphone"),
		Geolocation: asked("geolocation"), ClipboardWrite: asked("clipboardWrite")}
	return nil
}

// MarshalJSON writes the extension's shape: an empty object for each feature asked for.
func (p Permissions) MarshalJSON() ([]byte, error) {
	m := map[string]struct{}{}
	for name, asked := range map[string]bool{"camera": p.Camera, "microphone": p.Microphone,
		"geolocation": p.Geolocation, "clipboardWrite": p.ClipboardWrite} {
		if asked {
			m[name] = struct{}{}
		}
	}
	return json.Marshal(m)
}

// ResourceUIOf returns the _meta.ui of a resource as resources/list lists it, and whether it
// has one; an error wrapping ErrMalformedMeta when it is not of the extension's shape.
func ResourceUIOf(r *mcpclient.Resource) (ResourceUI, bool, error) {
	if r == nil {
		return ResourceUI{}, false, nil
	}
	return resourceUIOf(r.Meta)
}

// resourceUIOf reads _meta.ui out of a _meta object.
func resourceUIOf(meta json.RawMessage) (ResourceUI, bool, error) {
	if len(meta) == 0 || isNull(meta) {
		return ResourceUI{}, false, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(meta, &m); err != nil {
		return ResourceUI{}, false, fmt.Errorf("%w: _meta is not an object", ErrMalformedMeta)
	}
	raw, ok := m["ui"]
	if !ok || isNull(raw) {
		return ResourceUI{}, false, nil
	}
	var ui ResourceUI
	if err := json.Unmarshal(raw, &ui); err != nil {
		return ResourceUI{}, true, fmt.Errorf("%w: %v", ErrMalformedMeta, err)
	}
	return ui, true, nil
}

// TooLargeError is the error of a view larger than the bound; it matches ErrTooLarge.
type TooLargeError struct {
	URI   string
	Size  int64 // bytes of HTML, or at least this many when the size is bounded from below
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("apps: view %s has %d bytes of HTML, more than the %d allowed", e.URI, e.Size, e.Limit)
}

// Is makes errors.Is(err, ErrTooLarge) hold.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// A ReadOption adjusts ReadUI.
type ReadOption func(*readConfig)

type readConfig struct {
	maxSize  int64
	listed   *mcpclient.Resource
	callOpts []mcpclient.CallOption
}

// MaxSize bounds the view's HTML to n bytes (after base64 decoding); a larger view is refused
// whole with a *TooLargeError. n <= 0 means DefaultMaxSize. The bound is on what ReadUI returns:
// the response itself is bounded by the client's transport limits.
func MaxSize(n int64) ReadOption { return func(c *readConfig) { c.maxSize = n } }

// Listed gives the resource as resources/list listed it: its _meta.ui is used when the content
// read carries none, as the extension allows.
func Listed(r *mcpclient.Resource) ReadOption { return func(c *readConfig) { c.listed = r } }

// WithCallOptions passes opts to the resources/read request.
func WithCallOptions(opts ...mcpclient.CallOption) ReadOption {
	return func(c *readConfig) { c.callOpts = append(c.callOpts, opts...) }
}

// ReadUI reads the view at uri with resources/read and returns its HTML and _meta.ui. It
// refuses, before sending, a uri CheckURI refuses (ErrNotUIURI); after reading, an answer with
// no content item for uri of type text/html;profile=mcp-app (ErrNotAppHTML), HTML larger than
// the bound (*TooLargeError, never part of it), and a _meta.ui not of the extension's shape
// (ErrMalformedMeta). Local refusals are *mcpclient.Error with CodeInvalidArgument, refusals of
// the answer CodeProtocol; errors of the request are the client's.
func ReadUI(ctx context.Context, c mcpclient.Caller, uri string, opts ...ReadOption) (*View, error) {
	cfg := readConfig{}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.maxSize <= 0 {
		cfg.maxSize = DefaultMaxSize
	}
	if err := CheckURI(uri); err != nil {
		return nil, &mcpclient.Error{Code: mcpclient.CodeInvalidArgument, Err: err}
	}
	res, err := c.ReadResource(ctx, uri, cfg.callOpts...)
	if err != nil {
		return nil, err
	}
	view, err := viewOf(res, uri, cfg)
	if err != nil {
		return nil, &mcpclient.Error{Code: mcpclient.CodeProtocol, Err: err}
	}
	return view, nil
}

func viewOf(res *mcpclient.ReadResourceResult, uri string, cfg readConfig) (*View, error) {
	var item *mcpclient.ResourceContents
	var seen []string
	for i := range res.Contents {
		rc := &res.Contents[i]
		if rc.URI != uri {
			seen = append(seen, fmt.Sprintf("%q", truncateString(rc.URI)))
			continue
		}
		if isAppHTML(rc.MIMEType) {
			item = rc
			break
		}
		seen = append(seen, fmt.Sprintf("%q", truncateString(rc.MIMEType)))
	}
	if item == nil {
		return nil, fmt.Errorf("%w for %s among %d content item(s) %v", ErrNotAppHTML, uri, len(res.Contents), seen)
	}
	html, err := decodeBounded(item, uri, cfg.maxSize)
	if err != nil {
		return nil, err
	}
	ui, found, err := resourceUIOf(item.Meta)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", uri, err)
	}
	if !found && cfg.listed != nil && cfg.listed.URI == uri {
		if ui, _, err = ResourceUIOf(cfg.listed); err != nil {
			return nil, fmt.Errorf("%s as listed: %w", uri, err)
		}
	}
	return &View{URI: uri, MIMEType: item.MIMEType, HTML: html, UI: ui, Meta: item.Meta, ResultMeta: res.Meta}, nil
}

// decodeBounded returns the item's HTML, refusing it whole when it exceeds max bytes; a blob's
// size is bounded from its encoded length before anything is decoded.
func decodeBounded(item *mcpclient.ResourceContents, uri string, max int64) (string, error) {
	switch {
	case item.Text != "" && item.Blob != "":
		return "", fmt.Errorf("%w: %s carries both text and blob", ErrNotAppHTML, uri)
	case item.Blob != "":
		if least := int64(len(item.Blob))/4*3 - 2; least > max {
			return "", &TooLargeError{URI: uri, Size: least, Limit: max}
		}
		b, err := base64.StdEncoding.DecodeString(item.Blob)
		if err != nil {
			return "", fmt.Errorf("%w: %s: the blob is not base64: %v", ErrNotAppHTML, uri, err)
		}
		if int64(len(b)) > max {
			return "", &TooLargeError{URI: uri, Size: int64(len(b)), Limit: max}
		}
		return string(b), nil
	case item.Text == "":
		return "", fmt.Errorf("%w: %s carries no HTML", ErrNotAppHTML, uri)
	default:
		if int64(len(item.Text)) > max {
			return "", &TooLargeError{URI: uri, Size: int64(len(item.Text)), Limit: max}
		}
		return item.Text, nil
	}
}
