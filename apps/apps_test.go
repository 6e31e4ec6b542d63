package apps_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/apps"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

const viewHTML = `<!DOCTYPE html><html><body><h1>weather</h1></body></html>`

func toolWithMeta(name, meta string) mcpclient.Tool {
	t := mcpclient.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)}
	if meta != "" {
		t.Meta = json.RawMessage(meta)
	}
	return t
}

func textResult(s string) *mcpclient.CallToolResult {
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(s)}}
}

// content serves one content item for any URI asked.
func content(mimeType, text string, meta string) mcptest.ResourceFunc {
	return func(_ context.Context, uri string) ([]mcpclient.ResourceContents, error) {
		rc := mcpclient.ResourceContents{URI: uri, MIMEType: mimeType, Text: text}
		if meta != "" {
			rc.Meta = json.RawMessage(meta)
		}
		return []mcpclient.ResourceContents{rc}, nil
	}
}

// appServer is a server with a view, tools of every visibility and hostile resources. calls
// records the tools the server ran, and caps the capabilities the client declared.
type appServer struct {
	srv   *mcptest.Server
	mu    sync.Mutex
	calls []string
	caps  mcpclient.ClientCapabilities
}

func (a *appServer) tool(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, call.Name)
	a.caps = call.ClientCapabilities()
	return textResult("ran " + call.Name), nil
}

func (a *appServer) ran() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.calls)
}

func newAppServer(t *testing.T) *appServer {
	a := &appServer{}
	res := func(uri, mimeType string, read mcptest.ResourceFunc) mcptest.Option {
		return mcptest.WithResource(mcpclient.Resource{URI: uri, Name: uri, MIMEType: mimeType}, read)
	}
	a.srv = mcptest.NewTestServer(t,
		mcptest.WithTool(toolWithMeta("show_weather", `{"ui":{"resourceUri":"ui://weather/view","visibility":["model","app"]}}`), a.tool),
		mcptest.WithTool(toolWithMeta("refresh", `{"ui":{"resourceUri":"ui://weather/view","visibility":["app"]}}`), a.tool),
		mcptest.WithTool(toolWithMeta("forecast_for_model", `{"ui":{"visibility":["model"]}}`), a.tool),
		mcptest.WithTool(toolWithMeta("plain", ""), a.tool),
		mcptest.WithTool(toolWithMeta("bad_uri", `{"ui":{"resourceUri":"https://evil.example/view.html"}}`), a.tool),
		mcptest.WithTool(toolWithMeta("garbled", `{"ui":{"visibility":"app"}}`), a.tool),
		res("ui://weather/view", apps.MIMEType, content(apps.MIMEType, viewHTML,
			`{"ui":{"csp":{"connectDomains":["https://api.weather.example"],"resourceDomains":["https://cdn.example"]},"permissions":{"geolocation":{},"camera":{}},"domain":"abc.apps.example","prefersBorder":true},"other":1}`)),
		res("ui://weather/blob", apps.MIMEType, func(_ context.Context, uri string) ([]mcpclient.ResourceContents, error) {
			return []mcpclient.ResourceContents{{URI: uri, MIMEType: `text/html; profile="mcp-app"; charset=utf-8`,
				Blob: base64.StdEncoding.EncodeToString([]byte(viewHTML))}}, nil
		}),
		res("ui://weather/plain-html", "text/html", content("text/html", viewHTML, "")),
		res("ui://weather/other-profile", apps.MIMEType, content("text/html;profile=mcp-app-v2", viewHTML, "")),
		res("ui://weather/big", apps.MIMEType, content(apps.MIMEType, strings.Repeat("x", apps.DefaultMaxSize+1), "")),
		res("ui://weather/big-blob", apps.MIMEType, func(_ context.Context, uri string) ([]mcpclient.ResourceContents, error) {
			return []mcpclient.ResourceContents{{URI: uri, MIMEType: apps.MIMEType,
				Blob: base64.StdEncoding.EncodeToString(make([]byte, 4096))}}, nil
		}),
		res("ui://weather/elsewhere", apps.MIMEType, func(context.Context, string) ([]mcpclient.ResourceContents, error) {
			return []mcpclient.ResourceContents{{URI: "ui://weather/view", MIMEType: apps.MIMEType, Text: viewHTML}}, nil
		}),
		mcptest.WithResource(mcpclient.Resource{URI: "ui://weather/listed", Name: "listed", MIMEType: apps.MIMEType,
			Meta: json.RawMessage(`{"ui":{"prefersBorder":false,"csp":{"frameDomains":["https://video.example"]}}}`)},
			content(apps.MIMEType, viewHTML, "")),
		res("ui://weather/bad-meta", apps.MIMEType, content(apps.MIMEType, viewHTML, `{"ui":{"csp":"none"}}`)),
		res("https://weather.example/view", apps.MIMEType, content(apps.MIMEType, viewHTML, "")),
	)
	return a
}

func TestDeclareSendsTheExtensionWithItsMIMEType(t *testing.T) {
	a := newAppServer(t)
	c := mcptest.NewClient(t, a.srv, apps.Declare())
	if _, err := c.CallTool(testCtx(t), "plain", nil); err != nil {
		t.Fatal(err)
	}
	raw, ok := a.caps.Extensions[apps.Extension]
	if !ok {
		t.Fatalf("the client declared extensions %v, not %s", a.caps.Extensions, apps.Extension)
	}
	var settings struct{ MimeTypes []string }
	if err := json.Unmarshal(raw, &settings); err != nil || !slices.Equal(settings.MimeTypes, []string{apps.MIMEType}) {
		t.Errorf("settings %s, want mimeTypes [%s]", raw, apps.MIMEType)
	}
}

func TestModelAndAppToolsFollowVisibility(t *testing.T) {
	a := newAppServer(t)
	c := mcptest.NewClient(t, a.srv)
	tools, err := c.CachedTools(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	names := func(ts []*mcpclient.Tool) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Name)
		}
		slices.Sort(out)
		return out
	}
	// garbled says visibility "app" without an array: whom it is for is unclear, so neither.
	if got, want := names(apps.ModelTools(tools)), []string{"bad_uri", "forecast_for_model", "plain", "show_weather"}; !slices.Equal(got, want) {
		t.Errorf("model tools %v, want %v", got, want)
	}
	if got, want := names(apps.AppTools(tools)), []string{"bad_uri", "plain", "refresh", "show_weather"}; !slices.Equal(got, want) {
		t.Errorf("app tools %v, want %v", got, want)
	}
}

func TestCallFromApp(t *testing.T) {
	a := newAppServer(t)
	c := mcptest.NewClient(t, a.srv)
	ctx := testCtx(t)

	id := mcpclient.StringID("app-call-1")
	res, err := apps.CallFromApp(ctx, c, "refresh", map[string]any{"city": "Oslo"}, mcpclient.WithRequestID(id))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].Text; got != "ran refresh" {
		t.Errorf("result %q", got)
	}
	// The call went the client's way: its id is the one pinned, and the ledger holds it.
	if _, ok := c.Ledger().Lookup(id); !ok {
		t.Error("the ledger does not hold the app's call")
	}
	if len(a.srv.Received(id)) == 0 {
		t.Error("the server did not receive the call under the pinned id")
	}

	for _, name := range []string{"forecast_for_model", "garbled", "no_such_tool"} {
		_, err := apps.CallFromApp(ctx, c, name, nil)
		if !errors.Is(err, apps.ErrNotForApp) {
			t.Errorf("%s: err %v, want ErrNotForApp", name, err)
		}
		var e *mcpclient.Error
		if !errors.As(err, &e) || e.Code != mcpclient.CodeInvalidArgument {
			t.Errorf("%s: err %v, want a *mcpclient.Error with CodeInvalidArgument", name, err)
		}
	}
	if got := a.ran(); !slices.Equal(got, []string{"refresh"}) {
		t.Errorf("the server ran %v, want only refresh", got)
	}
}

func TestReadUI(t *testing.T) {
	a := newAppServer(t)
	c := mcptest.NewClient(t, a.srv)
	ctx := testCtx(t)

	v, err := apps.ReadUI(ctx, c, "ui://weather/view")
	if err != nil {
		t.Fatal(err)
	}
	if v.HTML != viewHTML || v.MIMEType != apps.MIMEType {
		t.Errorf("view %q of type %q", v.HTML, v.MIMEType)
	}
	want := apps.ResourceUI{
		CSP:         apps.CSP{ConnectDomains: []string{"https://api.weather.example"}, ResourceDomains: []string{"https://cdn.example"}},
		Permissions: apps.Permissions{Camera: true, Geolocation: true},
		Domain:      "abc.apps.example",
	}
	if v.UI.PrefersBorder == nil || !*v.UI.PrefersBorder {
		t.Errorf("prefersBorder %v, want true", v.UI.PrefersBorder)
	}
	v.UI.PrefersBorder = nil
	if b1, b2 := mustJSON(t, v.UI), mustJSON(t, want); b1 != b2 {
		t.Errorf("ui %s, want %s", b1, b2)
	}
	if !strings.Contains(string(v.Meta), `"other":1`) {
		t.Errorf("content _meta %s lost its other members", v.Meta)
	}

	blob, err := apps.ReadUI(ctx, c, "ui://weather/blob")
	if err != nil {
		t.Fatal(err)
	}
	if blob.HTML != viewHTML {
		t.Errorf("blob view %q", blob.HTML)
	}

	// _meta.ui from the listing when the content carries none.
	var listed *mcpclient.Resource
	for r, err := range c.Resources(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if r.URI == "ui://weather/listed" {
			listed = r
		}
	}
	lv, err := apps.ReadUI(ctx, c, listed.URI, apps.Listed(listed))
	if err != nil {
		t.Fatal(err)
	}
	if lv.UI.PrefersBorder == nil || *lv.UI.PrefersBorder || !slices.Equal(lv.UI.CSP.FrameDomains, []string{"https://video.example"}) {
		t.Errorf("ui from the listing: %s", mustJSON(t, lv.UI))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReadUIRefusesHostileAnswers(t *testing.T) {
	a := newAppServer(t)
	c := mcptest.NewClient(t, a.srv)
	ctx := testCtx(t)
	cases := []struct {
		uri  string
		opts []apps.ReadOption
		want error
		code mcpclient.Code
	}{
		{"ui://weather/plain-html", nil, apps.ErrNotAppHTML, mcpclient.CodeProtocol},
		{"ui://weather/other-profile", nil, apps.ErrNotAppHTML, mcpclient.CodeProtocol},
		{"ui://weather/elsewhere", nil, apps.ErrNotAppHTML, mcpclient.CodeProtocol},
		{"ui://weather/big", nil, apps.ErrTooLarge, mcpclient.CodeProtocol},
		{"ui://weather/big-blob", []apps.ReadOption{apps.MaxSize(1024)}, apps.ErrTooLarge, mcpclient.CodeProtocol},
		{"ui://weather/view", []apps.ReadOption{apps.MaxSize(10)}, apps.ErrTooLarge, mcpclient.CodeProtocol},
		{"ui://weather/bad-meta", nil, apps.ErrMalformedMeta, mcpclient.CodeProtocol},
		{"https://weather.example/view", nil, apps.ErrNotUIURI, mcpclient.CodeInvalidArgument},
		{"ui://weather/../admin", nil, apps.ErrNotUIURI, mcpclient.CodeInvalidArgument},
	}
	for _, tc := range cases {
		v, err := apps.ReadUI(ctx, c, tc.uri, tc.opts...)
		if !errors.Is(err, tc.want) || v != nil {
			t.Errorf("%s: view %v, err %v, want %v", tc.uri, v, err, tc.want)
			continue
		}
		var e *mcpclient.Error
		if !errors.As(err, &e) || e.Code != tc.code {
			t.Errorf("%s: err %v, want code %v", tc.uri, err, tc.code)
		}
	}
	var tooLarge *apps.TooLargeError
	_, err := apps.ReadUI(ctx, c, "ui://weather/big")
	if !errors.As(err, &tooLarge) || tooLarge.Size != apps.DefaultMaxSize+1 || tooLarge.Limit != apps.DefaultMaxSize {
		t.Errorf("err %v, want a *TooLargeError of %d > %d", err, apps.DefaultMaxSize+1, apps.DefaultMaxSize)
	}
	// A URI refused locally never reaches the server.
	before := a.srv.FramesReceived()
	for _, uri := range []string{"https://weather.example/view", "ui://weather/%2e%2e/admin"} {
		if _, err := apps.ReadUI(ctx, c, uri); !errors.Is(err, apps.ErrNotUIURI) {
			t.Errorf("%s: err %v, want ErrNotUIURI", uri, err)
		}
	}
	if after := a.srv.FramesReceived(); after != before {
		t.Errorf("the server received %d frames for URIs refused before sending", after-before)
	}
}

// WithCallOptions reaches the resources/read request: a pinned id is the one the server sees.
func TestReadUIPassesCallOptions(t *testing.T) {
	a := newAppServer(t)
	c := mcptest.NewClient(t, a.srv)
	id := mcpclient.StringID("read-view-1")
	if _, err := apps.ReadUI(testCtx(t), c, "ui://weather/view", apps.WithCallOptions(mcpclient.WithRequestID(id))); err != nil {
		t.Fatal(err)
	}
	if len(a.srv.Received(id)) == 0 {
		t.Error("the server saw no resources/read under the pinned id")
	}
}
