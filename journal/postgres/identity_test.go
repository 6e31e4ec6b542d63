package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// A shared journal is read by every worker and by the database's operators: the endpoint's
// password and query values stay out of its rows, and its requests are still recovered.
func TestJournalKeepsNoEndpointSecrets(t *testing.T) {
	const password, token = "hunter2-pg-password", "tok-pg-81c2d4"
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(mcpclient.Tool{Name: "book", InputSchema: []byte(`{"type":"object"}`)},
		func(context.Context, *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
			return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("booked")}}, nil
		}))
	base := srv.Transport().(*transport.HTTP)
	u, err := url.Parse(base.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("alice", password)
	u.RawQuery = "token=" + token
	tr := &transport.HTTP{URL: u.String(), Client: base.Client}

	table := "journal_endpoint_secrets"
	ctx := context.Background()
	j := open(t, table)
	c, err := mcpclient.Connect(ctx, tr, mcpclient.WithJournal(j),
		mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{Mode: mcpclient.RetryNever}))
	if err != nil {
		t.Fatal(err)
	}
	srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "book"})
	_, err = c.CallTool(ctx, "book", map[string]any{"seat": "12A"})
	var e *mcpclient.Error
	if !errors.As(err, &e) || e.Code != mcpclient.CodeOutcomeUnknown {
		t.Fatalf("%v, want an unknown outcome", err)
	}
	c.Close()
	awaitSettles(t, j)

	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT t::text FROM "+table+" t")
	if err != nil {
		t.Fatal(err)
	}
	texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(texts) != 1 {
		t.Fatalf("rows %v, %v: want the one request", texts, err)
	}
	for _, secret := range []string{password, token} {
		if strings.Contains(texts[0], secret) {
			t.Errorf("the journal's row holds the endpoint's secret %q: %s", secret, texts[0])
		}
	}

	c, err = mcpclient.Connect(ctx, tr, mcpclient.WithJournal(j))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var found []mcpclient.ID
	for r, err := range c.Recover(ctx) {
		if r.Request == nil {
			t.Fatalf("recover: %v", err)
		}
		found = append(found, r.Request.ID())
	}
	if len(found) != 1 || found[0] != e.Request.ID() {
		t.Fatalf("recovered %v, want %v", found, e.Request.ID())
	}
}
