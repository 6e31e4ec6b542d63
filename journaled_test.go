package mcpclient_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/journal"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

var _ mcpclient.JournalLookup = (*journal.File)(nil)

// Journaled reads what the journal holds under an id, the exact bytes included; a client
// without a journal holds nothing there.
func TestJournaled(t *testing.T) {
	t.Parallel()
	var k counter
	srv := mcptest.NewTestServer(t, mcptest.WithTool(unsafeTool, k.tool))
	ctx := testCtx(t)

	plain := connect(t, srv.Transport())
	if _, ok, err := plain.Journaled(ctx, mcpclient.StringID("b5e1c1de-7a53-4c53-9f4e-3c0f8e2a9d11")); ok || err != nil {
		t.Fatalf("a client without a journal: %v, %v", ok, err)
	}

	j, err := journal.OpenFile(filepath.Join(t.TempDir(), "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	c := connect(t, srv.Transport(), mcpclient.WithJournal(j))
	req := callReq(t, c, "reserve", map[string]string{"room": "12"})
	if _, ok, err := c.Journaled(ctx, req.ID()); ok || err != nil {
		t.Fatalf("before the request was sent: %v, %v", ok, err)
	}
	if _, err := c.Do(ctx, req); err != nil {
		t.Fatal(err)
	}
	rec, ok, err := c.Journaled(ctx, req.ID())
	if !ok || err != nil || rec.ID != req.ID() || !bytes.Equal(rec.Frame, req.Bytes()) || rec.State != mcpclient.StateAnswered {
		t.Fatalf("Journaled = %+v, %v, %v; want the request's bytes, answered", rec, ok, err)
	}
}

// RequestIDOf reads the id a call's options pin, the last one when several do.
func TestRequestIDOf(t *testing.T) {
	a, b := mcpclient.StringID("a"), mcpclient.IntID(7)
	for _, tc := range []struct {
		opts []mcpclient.CallOption
		want mcpclient.ID
	}{
		{nil, mcpclient.ID{}},
		{[]mcpclient.CallOption{mcpclient.WithIdempotent(), nil}, mcpclient.ID{}},
		{[]mcpclient.CallOption{mcpclient.WithMeta("k", "v"), mcpclient.WithRequestID(a)}, a},
		{[]mcpclient.CallOption{mcpclient.WithRequestID(a), mcpclient.WithRequestID(b)}, b},
	} {
		if got := mcpclient.RequestIDOf(tc.opts...); got != tc.want {
			t.Errorf("RequestIDOf(%d options) = %v, want %v", len(tc.opts), got, tc.want)
		}
	}
}
