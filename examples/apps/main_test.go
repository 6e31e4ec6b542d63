package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The example does what it says: the app-only tool is kept from the model, the view is read
// with its CSP, the view's call goes through the ledger, and an unlisted tool is refused.
func TestApps(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"the model is offered [get_weather], the view may call [get_weather refresh_dashboard]",
		"resource ui://weather/dashboard (text/html;profile=mcp-app)",
		"connect-src https://api.weather.example, border true",
		`view called refresh_dashboard: refreshed {"city":"Oslo"} (in the ledger: true)`,
		"view called delete_everything: refused:",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
