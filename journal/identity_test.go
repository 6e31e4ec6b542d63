package journal_test

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

const (
	endpointPassword = "hunter2-journal-password"
	endpointToken    = "tok-journal-3f9a1c77e2"
)

// withSecrets returns srv's endpoint with a user name and password and a token in its query, as
// deployments that authenticate in the URL give it.
func withSecrets(t *testing.T, srv *mcptest.HTTPServer, token string) *transport.HTTP {
	t.Helper()
	tr := srv.Transport().(*transport.HTTP)
	u, err := url.Parse(tr.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("alice", endpointPassword)
	u.RawQuery = url.Values{"token": {token}, "tenant": {"north"}}.Encode()
	return &transport.HTTP{URL: u.String(), Client: tr.Client}
}

// leaveUncertainThrough makes one call of "book" on tr through the journal at path, whose reply
// is lost after the server ran it; client and journal are closed after, as a process that exits.
func leaveUncertainThrough(t *testing.T, srv *mcptest.HTTPServer, tr transport.Transport, path string, opts ...mcpclient.Option) mcpclient.ID {
	t.Helper()
	srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "book"})
	j := openJournal(t, path)
	defer j.Close()
	ctx := context.Background()
	c, err := mcpclient.Connect(ctx, tr, append([]mcpclient.Option{mcpclient.WithJournal(j),
		mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{Mode: mcpclient.RetryNever})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.CallTool(ctx, "book", map[string]any{"seat": "12A"})
	var e *mcpclient.Error
	if !errors.As(err, &e) || e.Code != mcpclient.CodeOutcomeUnknown {
		t.Fatalf("%v, want an unknown outcome", err)
	}
	return e.Request.ID()
}

// recovered lists the ids Recover finds for a client of tr through the journal at path.
func recovered(t *testing.T, tr transport.Transport, path string) []mcpclient.ID {
	t.Helper()
	j := openJournal(t, path)
	defer j.Close()
	c, err := mcpclient.Connect(context.Background(), tr, mcpclient.WithJournal(j))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var ids []mcpclient.ID
	for r, err := range c.Recover(context.Background()) {
		if r.Request == nil {
			t.Fatalf("recover: %v", err)
		}
		ids = append(ids, r.Request.ID())
	}
	return ids
}

// The journal outlives the process and is read by whoever recovers it: the password and query
// values of the endpoint stay out of it, and the requests are still found for that endpoint.
func TestJournalKeepsNoEndpointSecrets(t *testing.T) {
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(echo, booked))
	path := filepath.Join(t.TempDir(), "journal.db")
	tr := withSecrets(t, srv, endpointToken)
	id := leaveUncertainThrough(t, srv, tr, path)

	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{endpointPassword, endpointToken} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("the journal file holds the endpoint's secret %q", secret)
		}
	}
	j := openJournal(t, path)
	rec, ok, err := j.Lookup(context.Background(), id)
	if err != nil || !ok {
		t.Fatalf("lookup: %v, %v", ok, err)
	}
	j.Close()
	t.Logf("recorded server: %s", rec.Server)

	if ids := recovered(t, tr, path); len(ids) != 1 || ids[0] != id {
		t.Fatalf("recovered %v, want %v", ids, id)
	}
	// The same endpoint under another token may be another account's: it does not take them.
	if ids := recovered(t, withSecrets(t, srv, "another-token"), path); len(ids) != 0 {
		t.Fatalf("a client of the endpoint with another token recovered %v", ids)
	}
}

// A journal written before the endpoint's secrets were kept out of it names the server by its raw
// URL: its requests are still recovered for that endpoint.
func TestJournalRecoversRecordsNamedByTheRawURL(t *testing.T) {
	srv := mcptest.NewTestHTTPServer(t, mcptest.WithTool(echo, booked))
	path := filepath.Join(t.TempDir(), "journal.db")
	tr := withSecrets(t, srv, endpointToken)
	// As the client wrote it before: the identity was the URL itself.
	id := leaveUncertainThrough(t, srv, tr, path, mcpclient.WithServerIdentity(tr.URL))
	if ids := recovered(t, tr, path); len(ids) != 1 || ids[0] != id {
		t.Fatalf("recovered %v, want %v", ids, id)
	}
	if ids := recovered(t, withSecrets(t, srv, "another-token"), path); len(ids) != 0 {
		t.Fatalf("a client of the endpoint with another token recovered %v", ids)
	}
}
