package apps_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/apps"
)

func TestCheckURI(t *testing.T) {
	for _, uri := range []string{"ui://weather-dashboard", "ui://weather/view.html", "ui://srv/a/b?theme=dark", "ui://srv/a%20b"} {
		if err := apps.CheckURI(uri); err != nil {
			t.Errorf("%s refused: %v", uri, err)
		}
	}
	for _, uri := range []string{
		"", "https://srv/view", "UI://srv/view", "ui:/srv/view", "ui:srv", "ui:///view",
		"ui://srv/../etc", "ui://srv/a/./b", "ui://srv/%2E%2E/x", "ui://srv/a%2fb",
		"ui://user@srv/view", "ui://srv:8080/view", "ui://srv/view#frag",
		"ui://srv/a\\b", "ui://srv/a b", "ui://srv/\x00", "ui://srv/%zz",
	} {
		if err := apps.CheckURI(uri); !errors.Is(err, apps.ErrNotUIURI) {
			t.Errorf("%q: err %v, want ErrNotUIURI", uri, err)
		}
	}
}

func TestUIOf(t *testing.T) {
	cases := []struct {
		name       string
		meta       string
		present    bool
		uri        string
		model, app bool
		err        error
	}{
		{"no meta", ``, false, "", true, true, nil},
		{"meta without ui", `{"other":1}`, false, "", true, true, nil},
		{"both", `{"ui":{"resourceUri":"ui://s/v","visibility":["model","app"]}}`, true, "ui://s/v", true, true, nil},
		{"visibility absent", `{"ui":{"resourceUri":"ui://s/v"}}`, true, "ui://s/v", true, true, nil},
		{"app only", `{"ui":{"visibility":["app"]}}`, true, "", false, true, nil},
		{"model only", `{"ui":{"visibility":["model"]}}`, true, "", true, false, nil},
		{"empty visibility", `{"ui":{"visibility":[]}}`, true, "", false, false, nil},
		{"unknown visibility", `{"ui":{"visibility":["robot"]}}`, true, "", false, false, nil},
		{"legacy key", `{"ui/resourceUri":"ui://s/old"}`, true, "ui://s/old", true, true, nil},
		{"ui wins over legacy", `{"ui":{"resourceUri":"ui://s/new"},"ui/resourceUri":"ui://s/old"}`, true, "ui://s/new", true, true, nil},
		{"not ui scheme", `{"ui":{"resourceUri":"https://evil/x"}}`, true, "https://evil/x", true, true, apps.ErrNotUIURI},
		{"visibility a string", `{"ui":{"visibility":"app"}}`, true, "", false, false, apps.ErrMalformedMeta},
		{"ui not an object", `{"ui":"ui://s/v"}`, true, "", false, false, apps.ErrMalformedMeta},
		{"ui null", `{"ui":null}`, true, "", false, false, apps.ErrMalformedMeta},
		{"resourceUri a number", `{"ui":{"resourceUri":7}}`, true, "", false, false, apps.ErrMalformedMeta},
		{"legacy not a string", `{"ui/resourceUri":7}`, true, "", false, false, apps.ErrMalformedMeta},
	}
	for _, tc := range cases {
		tool := &mcpclient.Tool{Name: tc.name}
		if tc.meta != "" {
			tool.Meta = json.RawMessage(tc.meta)
		}
		ui, ok := apps.UIOf(tool)
		if ok != tc.present || ui.ResourceURI != tc.uri || ui.VisibleToModel() != tc.model || ui.CallableByApp() != tc.app {
			t.Errorf("%s: present %v uri %q model %v app %v, want %v %q %v %v",
				tc.name, ok, ui.ResourceURI, ui.VisibleToModel(), ui.CallableByApp(), tc.present, tc.uri, tc.model, tc.app)
		}
		if err := ui.Validate(); (tc.err == nil) != (err == nil) || (tc.err != nil && !errors.Is(err, tc.err)) {
			t.Errorf("%s: Validate %v, want %v", tc.name, err, tc.err)
		}
	}
	ui, _ := apps.UIOf(&mcpclient.Tool{Meta: json.RawMessage(`{"ui":{"visibility":["app","model"]}}`)})
	if !slices.Equal(ui.Visibility, []apps.Visibility{apps.App, apps.Model}) {
		t.Errorf("visibility %v", ui.Visibility)
	}
}

func TestPermissionsRoundTrip(t *testing.T) {
	var p apps.Permissions
	if err := json.Unmarshal([]byte(`{"camera":{},"microphone":null,"clipboardWrite":{},"geolocation":false}`), &p); err != nil {
		t.Fatal(err)
	}
	if p != (apps.Permissions{Camera: true, ClipboardWrite: true}) {
		t.Errorf("permissions %+v", p)
	}
	b, _ := json.Marshal(p)
	if string(b) != `{"camera":{},"clipboardWrite":{}}` {
		t.Errorf("marshalled %s", b)
	}
}
