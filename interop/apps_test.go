package interop_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/apps"
	"github.com/northstar-mcp/mcpclient/transport"
)

// appsServerVersion is the @modelcontextprotocol/server-basic-vanillajs release under test;
// APPS_SERVER_VERSION overrides it.
const appsServerVersion = "2.0.3"

func appsServerVersionToUse() string {
	if v := os.Getenv("APPS_SERVER_VERSION"); v != "" {
		return v
	}
	return appsServerVersion
}

// appsServerEntry installs the server with apps-server.sh, once per test binary, and returns
// the path of its entry point, or why it cannot be had.
var appsServerEntry = sync.OnceValues(func() (string, error) {
	for _, tool := range []string{"node", "npm", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("%s not found in PATH", tool)
		}
	}
	cmd := exec.Command("bash", "apps-server.sh", appsServerVersionToUse())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("bash apps-server.sh: %v\n%s", err, stderr.String())
	}
	entry := strings.TrimSpace(string(out))
	if _, err := os.Stat(entry); err != nil {
		return "", fmt.Errorf("apps-server.sh printed %q: %v", entry, err)
	}
	return entry, nil
})

// TestAppsServer runs the apps package against the MCP Apps example server of the ext-apps
// repository over stdio: the tool's _meta.ui names a ui:// view, ReadUI reads it as
// text/html;profile=mcp-app, and a view's call of that tool goes through CallFromApp.
func TestAppsServer(t *testing.T) {
	entry, err := appsServerEntry()
	if err != nil {
		t.Skipf("server-basic-vanillajs unavailable (needs node and npm, and the npm registry on first use): %v", err)
	}
	noOrphans(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tr := &transport.Command{Path: "node", Args: []string{entry, "--stdio"}, Stderr: os.Stderr,
		CloseTimeout: 3 * time.Second, TermTimeout: 2 * time.Second}
	c, err := mcpclient.Connect(ctx, tr, apps.Declare())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	tools, err := c.CachedTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var withView *mcpclient.Tool
	var ui apps.ToolUI
	for _, tool := range tools {
		if u, ok := apps.UIOf(tool); ok && u.ResourceURI != "" {
			withView, ui = tool, u
			break
		}
	}
	if withView == nil {
		t.Fatalf("no tool of %d lists a view in _meta.ui", len(tools))
	}
	if err := ui.Validate(); err != nil {
		t.Fatalf("tool %s: %v", withView.Name, err)
	}
	t.Logf("tool %s: view %s, visibility %v; model tools %d of %d", withView.Name, ui.ResourceURI, ui.Visibility,
		len(apps.ModelTools(tools)), len(tools))

	var listed *mcpclient.Resource
	for r, err := range c.Resources(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if r.URI == ui.ResourceURI {
			listed = r
		}
	}
	if !strings.Contains(string(withView.Meta), `"ui"`) {
		t.Errorf("tool %s: the view came from the deprecated flat key alone: _meta %s", withView.Name, withView.Meta)
	}
	if listed == nil {
		t.Logf("the view %s is not in resources/list (the extension allows that)", ui.ResourceURI)
	}
	view, err := apps.ReadUI(ctx, c, ui.ResourceURI, apps.Listed(listed))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.ToLower(view.HTML), "<html") {
		t.Errorf("the view is not an HTML document: %.200q", view.HTML)
	}
	t.Logf("view %s: %d bytes of %s, ui %+v", view.URI, len(view.HTML), view.MIMEType, view.UI)

	if ui.CallableByApp() {
		res, err := apps.CallFromApp(ctx, c, withView.Name, map[string]any{})
		if err != nil {
			t.Fatalf("CallFromApp(%s): %v", withView.Name, err)
		}
		if res.IsError {
			t.Errorf("CallFromApp(%s) answered an error: %+v", withView.Name, res.Content)
		}
	}
}
