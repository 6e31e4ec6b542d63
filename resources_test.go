package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// featResourceBackend starts a server with seven resources and three templates, listed two a
// page.
func featResourceBackend(t *testing.T, b featBackend) (*mcptest.Server, mcptest.Dialer) {
	opts := []mcptest.Option{mcptest.WithPageSize(2)}
	for i := range 5 {
		uri := fmt.Sprintf("mem://doc/%d", i)
		opts = append(opts, mcptest.WithResource(
			mcpclient.Resource{URI: uri, Name: fmt.Sprintf("doc%d", i), MIMEType: "text/plain"},
			func(_ context.Context, uri string) ([]mcpclient.ResourceContents, error) {
				return []mcpclient.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: "content of " + uri}}, nil
			}))
	}
	byTemplate := func(tmpl string) mcptest.ResourceFunc {
		return func(_ context.Context, uri string) ([]mcpclient.ResourceContents, error) {
			vars, ok := mcptest.MatchURITemplate(tmpl, uri)
			if !ok {
				return nil, fmt.Errorf("%s does not match %s", uri, tmpl)
			}
			b, _ := json.Marshal(vars)
			return []mcpclient.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}, nil
		}
	}
	for _, tmpl := range []string{"file:///logs/{date}/{name}", "db://{table}", "mem://doc/{id}"} {
		opts = append(opts, mcptest.WithResourceTemplate(mcpclient.ResourceTemplate{URITemplate: tmpl, Name: tmpl}, byTemplate(tmpl)))
	}
	opts = append(opts,
		mcptest.WithResource(mcpclient.Resource{URI: "mem://broken", Name: "broken"},
			func(context.Context, string) ([]mcpclient.ResourceContents, error) {
				return nil, errors.New("disk on fire")
			}),
		mcptest.WithResource(mcpclient.Resource{URI: "mem://private", Name: "private"},
			func(context.Context, string) ([]mcpclient.ResourceContents, error) {
				return nil, &mcpclient.RPCError{Code: -32001, Message: "forbidden"}
			}))
	return b.start(t, opts...)
}

func TestFeaturesResources(t *testing.T) {
	t.Parallel()
	featEach(t, func(t *testing.T, b featBackend) {
		_, d := featResourceBackend(t, b)
		c := mcptest.NewClient(t, d)
		ctx := testCtx(t)

		caps := c.ServerCapabilities()
		if caps.Resources == nil || !caps.Resources.Subscribe || !caps.Resources.ListChanged {
			t.Errorf("capabilities.resources %+v, want subscribe and listChanged", caps.Resources)
		}

		first, err := c.ListResourcesPage(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(first.Resources) != 2 || first.NextCursor == "" {
			t.Errorf("first page: %d resources, cursor %q; want 2 and a cursor", len(first.Resources), first.NextCursor)
		}
		all, err := mcpclient.Collect(c.Resources(ctx))
		if err != nil {
			t.Fatal(err)
		}
		var uris []string
		for _, r := range all {
			uris = append(uris, r.URI)
		}
		want := []string{"mem://doc/0", "mem://doc/1", "mem://doc/2", "mem://doc/3", "mem://doc/4", "mem://broken", "mem://private"}
		if !slices.Equal(uris, want) {
			t.Errorf("resources %v, want %v", uris, want)
		}
		if all[0].Name != "doc0" || all[0].MIMEType != "text/plain" {
			t.Errorf("resource %+v lost its fields", all[0])
		}

		templates, err := mcpclient.Collect(c.ResourceTemplates(ctx))
		if err != nil {
			t.Fatal(err)
		}
		var tmpls []string
		for _, tm := range templates {
			tmpls = append(tmpls, tm.URITemplate)
		}
		if want := []string{"file:///logs/{date}/{name}", "db://{table}", "mem://doc/{id}"}; !slices.Equal(tmpls, want) {
			t.Errorf("templates %v, want %v", tmpls, want)
		}

		// A registered URI wins over a template that matches it too.
		res, err := c.ReadResource(ctx, "mem://doc/3")
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Contents) != 1 || res.Contents[0].Text != "content of mem://doc/3" || res.Contents[0].URI != "mem://doc/3" {
			t.Errorf("exact read: %+v", res.Contents)
		}

		for uri, vars := range map[string]string{
			"file:///logs/2026-01-02/app.log": `{"date":"2026-01-02","name":"app.log"}`,
			"db://users":                      `{"table":"users"}`,
			"db://a%20b":                      `{"table":"a b"}`,
			"mem://doc/77":                    `{"id":"77"}`,
		} {
			res, err := c.ReadResource(ctx, uri)
			if err != nil {
				t.Errorf("read %s: %v", uri, err)
				continue
			}
			if len(res.Contents) != 1 || res.Contents[0].Text != vars || res.Contents[0].MIMEType != "application/json" {
				t.Errorf("read %s: %+v, want %s", uri, res.Contents, vars)
			}
		}

		for _, uri := range []string{"mem://nothing", "file:///logs/only-one-segment", "db://a/b", "db://"} {
			_, err := c.ReadResource(ctx, uri)
			rpc := featRPCError(t, err)
			want := int64(mcptest.RPCResourceNotFound)
			if b.stateless() {
				want = mcpclient.RPCInvalidParams // the stateless revisions' code for it
			}
			if rpc.Code != want || rpc.Message != "Resource not found" {
				t.Errorf("read %s: %v, want %d Resource not found", uri, rpc, want)
			}
			var data struct {
				URI string `json:"uri"`
			}
			if json.Unmarshal(rpc.Data, &data) != nil || data.URI != uri {
				t.Errorf("read %s: error data %s, want the uri", uri, rpc.Data)
			}
		}

		_, err = c.ReadResource(ctx, "mem://broken")
		if rpc := featRPCError(t, err); rpc.Code != mcpclient.RPCInternalError || !strings.Contains(rpc.Message, "disk on fire") {
			t.Errorf("failing read: %v", rpc)
		}
		_, err = c.ReadResource(ctx, "mem://private")
		if rpc := featRPCError(t, err); rpc.Code != -32001 || rpc.Message != "forbidden" {
			t.Errorf("read refused with an RPCError: %v", rpc)
		}
	})
}

func TestFeaturesResourceSubscriptions(t *testing.T) {
	t.Parallel()
	featEach(t, func(t *testing.T, b featBackend) {
		if b.stateless() {
			t.Skip("the stateless revisions have no resources/subscribe: TestStatelessListenAgainstMCPTest")
		}
		srv, d := featResourceBackend(t, b)
		updated := make(chan string, 16)
		c := mcptest.NewClient(t, d, mcpclient.WithResourceUpdatedHandler(func(_ context.Context, uri string) {
			updated <- uri
		}))
		ctx := testCtx(t)

		if err := c.Subscribe(ctx, "mem://doc/1"); err != nil {
			t.Fatal(err)
		}
		if err := c.Subscribe(ctx, "db://users"); err != nil { // a templated resource
			t.Fatal(err)
		}
		infos := srv.SessionInfos()
		if len(infos) != 1 || !slices.Equal(infos[0].Subscriptions, []string{"db://users", "mem://doc/1"}) {
			t.Fatalf("sessions %+v, want one subscribed to db://users and mem://doc/1", infos)
		}

		srv.ResourceUpdated("mem://doc/2") // not subscribed: not sent
		srv.ResourceUpdated("mem://doc/1")
		if got := recv(t, updated, "the update of mem://doc/1"); got != "mem://doc/1" {
			t.Errorf("updated %q, want mem://doc/1", got)
		}
		srv.ResourceUpdated("db://users")
		if got := recv(t, updated, "the update of db://users"); got != "db://users" {
			t.Errorf("updated %q, want db://users", got)
		}

		if err := c.Unsubscribe(ctx, "mem://doc/1"); err != nil {
			t.Fatal(err)
		}
		if subs := srv.SessionInfos()[0].Subscriptions; !slices.Equal(subs, []string{"db://users"}) {
			t.Errorf("subscriptions after unsubscribe: %v", subs)
		}
		// Notifications arrive in order: the marker comes after anything sent for mem://doc/1.
		srv.ResourceUpdated("mem://doc/1")
		srv.ResourceUpdated("db://users")
		if got := recv(t, updated, "the marker update"); got != "db://users" {
			t.Errorf("after unsubscribe got %q, want only the marker db://users", got)
		}
	})
}

func TestFeaturesResourceSubscriptionsArePerSession(t *testing.T) {
	srv := mcptest.NewTestServer(t, mcptest.WithResource(mcpclient.Resource{URI: "mem://a", Name: "a"}, nil))
	got1 := make(chan string, 4)
	got2 := make(chan string, 4)
	c1 := mcptest.NewClient(t, srv, mcpclient.WithResourceUpdatedHandler(func(_ context.Context, uri string) { got1 <- uri }))
	mcptest.NewClient(t, srv, mcpclient.WithResourceUpdatedHandler(func(_ context.Context, uri string) { got2 <- "2:" + uri }),
		mcpclient.WithLogHandler(func(_ context.Context, m *mcpclient.LogMessage) { got2 <- "log" }))
	if err := c1.Subscribe(testCtx(t), "mem://a"); err != nil {
		t.Fatal(err)
	}
	srv.ResourceUpdated("mem://a")
	srv.Log(mcpclient.LevelInfo, "", "marker")
	if got := recv(t, got1, "the update"); got != "mem://a" {
		t.Errorf("subscriber got %q", got)
	}
	if got := recv(t, got2, "the marker"); got != "log" {
		t.Errorf("the other session got %q before the marker, want nothing", got)
	}
}

// The result of resources/read keeps its own _meta, beside the _meta of each content item:
// extensions (MCP Apps, for one) put there what concerns the read as a whole.
func TestReadResourceKeepsTheResultMeta(t *testing.T) {
	t.Parallel()
	srv := testpeer.NewPipe(t, func(c *testpeer.Conn, m testpeer.Msg) bool {
		if m.Method != "resources/read" {
			return false
		}
		c.Send(testpeer.Result(m.ID, `{"contents":[{"uri":"ui://a/view","mimeType":"text/plain","text":"x","_meta":{"item":1}}],"_meta":{"ui":{"prefersBorder":true}}}`))
		return true
	})
	c := connect(t, srv.Transport())
	res, err := c.ReadResource(testCtx(t), "ui://a/view")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(res.Meta), `{"ui":{"prefersBorder":true}}`; got != want {
		t.Errorf("result _meta %s, want %s", got, want)
	}
	if got, want := string(res.Contents[0].Meta), `{"item":1}`; got != want {
		t.Errorf("content _meta %s, want %s", got, want)
	}
}
