package journal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/journal"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/receipts"
)

// leaveUncertain makes one call of tool "book" through a journal at path, whose reply the server
// loses after running it, and returns the request the call ended unknown with; the client and the
// journal are closed after, as a process that exits.
func leaveUncertain(t *testing.T, srv *mcptest.HTTPServer, path string, opts ...mcpclient.CallOption) *mcpclient.Request {
	t.Helper()
	srv.Inject(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: "book"})
	j := openJournal(t, path)
	defer j.Close()
	ctx := context.Background()
	c, err := mcpclient.Connect(ctx, srv.Transport(), mcpclient.WithJournal(j),
		mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{Mode: mcpclient.RetryNever}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.CallTool(ctx, "book", map[string]any{"seat": "12A"}, opts...)
	var e *mcpclient.Error
	if !errors.As(err, &e) || e.Code != mcpclient.CodeOutcomeUnknown {
		t.Fatalf("%v, want an unknown outcome", err)
	}
	return e.Request
}

func recoverAll(t *testing.T, c *mcpclient.Client) (recovered []mcpclient.Recovered, errs []error) {
	t.Helper()
	for r, err := range c.Recover(context.Background()) {
		if r.Request == nil {
			t.Fatalf("recovery failed: %v", err)
		}
		recovered, errs = append(recovered, r), append(errs, err)
	}
	return recovered, errs
}

// A request left uncertain by an earlier process, under receipts that name no server process
// (no epoch), is recovered as an unknown outcome with its exact bytes, for the caller to inspect;
// nothing is sent by recovering it, and a Resend the caller decides on sends the same bytes
// under the same id.
func TestRecoverWithoutEpochIsUnknown(t *testing.T) {
	srv := mcptest.NewHTTPServer(mcptest.WithTool(echo, booked), mcptest.WithoutReceiptEpoch())
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "journal.db")
	lost := leaveUncertain(t, srv, path)

	j := openJournal(t, path)
	ctx := context.Background()
	c := connectThrough(t, srv.Transport(), j)
	got, errs := recoverAll(t, c)
	if len(got) != 1 {
		t.Fatalf("recovered %d requests, want 1", len(got))
	}
	req := got[0].Request
	if req.ID() != lost.ID() || !bytes.Equal(req.Bytes(), lost.Bytes()) || req.Fingerprint() != lost.Fingerprint() {
		t.Fatalf("recovered %s %q, want %s %q", req.ID(), req.Bytes(), lost.ID(), lost.Bytes())
	}
	var e *mcpclient.Error
	if !errors.As(errs[0], &e) || e.Code != mcpclient.CodeOutcomeUnknown || e.Request != req {
		t.Fatalf("err = %v, want an unknown outcome naming the request", errs[0])
	}
	if n := len(srv.Received(lost.ID())); n != 1 {
		t.Fatalf("recovery sent the request: received %d times", n)
	}
	// The caller looked, and decides to re-read it: the same bytes under the same id, and the
	// receipt the server still holds answers without running it again.
	if _, err := c.Resend(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n := srv.Executions("book"); n != 1 {
		t.Fatalf("%d executions, want 1", n)
	}
	for i, b := range srv.Received(lost.ID()) {
		if !bytes.Equal(b, lost.Bytes()) {
			t.Fatalf("send %d: %q, want %q", i, b, lost.Bytes())
		}
	}
	if _, errs := recoverAll(t, c); len(errs) != 0 {
		t.Fatalf("still unresolved after the answer: %v", errs)
	}
}

// A request that is safe to repeat is recovered for a Resend.
func TestRecoverSafeRequest(t *testing.T) {
	srv := mcptest.NewHTTPServer(mcptest.WithTool(echo, booked), mcptest.WithoutReceiptEpoch())
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "journal.db")
	lost := leaveUncertain(t, srv, path, mcpclient.WithIdempotent())
	j := openJournal(t, path)
	c := connectThrough(t, srv.Transport(), j)
	got, errs := recoverAll(t, c)
	if len(got) != 1 || errs[0] != nil || got[0].Request.ID() != lost.ID() {
		t.Fatalf("recovered %v, %v", got, errs)
	}
}

// Another server's requests are not this client's to recover.
func TestRecoverOnlyThisServer(t *testing.T) {
	srv := mcptest.NewHTTPServer(mcptest.WithTool(echo, booked))
	defer srv.Close()
	other := mcptest.NewHTTPServer(mcptest.WithTool(echo, booked))
	defer other.Close()
	path := filepath.Join(t.TempDir(), "journal.db")
	leaveUncertain(t, srv, path)
	j := openJournal(t, path)
	c := connectThrough(t, other.Transport(), j)
	if got, _ := recoverAll(t, c); len(got) != 0 {
		t.Fatalf("recovered %d requests of another server", len(got))
	}
}

// Under receipts the server keeps for its process, with the same epoch after the restart, the
// recovered request is resent and the receipt answers it without running it again.
func TestRecoverUnderTheSameEpochResends(t *testing.T) {
	srv := mcptest.NewHTTPServer(mcptest.WithTool(echo, booked))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "journal.db")
	lost := leaveUncertain(t, srv, path)
	j := openJournal(t, path)
	ctx := context.Background()
	c := connectThrough(t, srv.Transport(), j)
	got, errs := recoverAll(t, c)
	if len(got) != 1 || errs[0] != nil || got[0].Record.Receipts.Epoch != srv.Server.ReceiptEpoch() {
		t.Fatalf("recovered %+v, %v", got, errs)
	}
	resp, err := c.Resend(ctx, got[0].Request)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Request.ID() != lost.ID() || srv.Executions("book") != 1 {
		t.Fatalf("answered for %s, %d executions", resp.Request.ID(), srv.Executions("book"))
	}
}

// A server restarted after the request was sent holds no receipt of it: recovered as unknown;
// and one that restarts between Recover and the Resend gets nothing sent.
func TestRecoverAfterServerRestart(t *testing.T) {
	for _, when := range []string{"before recovery", "between recovery and resend"} {
		t.Run(when, func(t *testing.T) {
			srv := mcptest.NewHTTPServer(mcptest.WithTool(echo, booked))
			defer srv.Close()
			path := filepath.Join(t.TempDir(), "journal.db")
			lost := leaveUncertain(t, srv, path)
			if when == "before recovery" {
				srv.Server.Restart()
			}
			j := openJournal(t, path)
			ctx := context.Background()
			c, err := mcpclient.Connect(ctx, srv.Transport(), mcpclient.WithJournal(j))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			got, errs := recoverAll(t, c)
			if len(got) != 1 {
				t.Fatalf("recovered %d", len(got))
			}
			if when == "before recovery" {
				if !errors.Is(errs[0], mcpclient.ErrOutcomeUnknown) {
					t.Fatalf("err = %v, want ErrOutcomeUnknown", errs[0])
				}
				return
			}
			if errs[0] != nil {
				t.Fatal(errs[0])
			}
			srv.Server.Restart()
			if err := c.Ping(ctx); err != nil { // the client meets the new epoch
				t.Fatal(err)
			}
			_, err = c.Resend(ctx, got[0].Request)
			if !errors.Is(err, mcpclient.ErrOutcomeUnknown) || !errors.Is(err, mcpclient.ErrSessionLost) {
				t.Fatalf("err = %v, want ErrOutcomeUnknown caused by ErrSessionLost", err)
			}
			if n := len(srv.Received(lost.ID())); n != 1 || srv.Executions("book") != 1 {
				t.Fatalf("received %d times, %d executions", n, srv.Executions("book"))
			}
		})
	}
}

// A record that no longer decodes is reported by its id, and the other requests are still
// recovered.
func TestRecoverPastACorruptRecord(t *testing.T) {
	srv := mcptest.NewHTTPServer(mcptest.WithTool(echo, booked))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "journal.db")
	first := leaveUncertain(t, srv, path)
	second := leaveUncertain(t, srv, path)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("standing")).Put([]byte(first.ID().JSON()), []byte("{not json"))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	j := openJournal(t, path)
	c := connectThrough(t, srv.Transport(), j)
	var corrupt, recovered []mcpclient.ID
	for r, err := range c.Recover(context.Background()) {
		switch {
		case r.Request != nil && err == nil:
			recovered = append(recovered, r.Request.ID())
		case r.Request == nil && errors.Is(err, mcpclient.ErrJournal) && errors.Is(err, journal.ErrCorrupt):
			corrupt = append(corrupt, r.Record.ID)
		default:
			t.Fatalf("recovered %+v, %v", r, err)
		}
	}
	if len(corrupt) != 1 || corrupt[0] != first.ID() || len(recovered) != 1 || recovered[0] != second.ID() {
		t.Fatalf("corrupt %v, recovered %v; want %v and %v", corrupt, recovered, first.ID(), second.ID())
	}
}

// A recovered request the caller replaces, after a look at the server, is replaced as in the
// process that sent it: the new request carries the old id in _meta.supersedes and none of the
// _meta the old one was sent with, the journal links the two, and the old one is no longer
// recovered.
func TestSupersedeARecoveredRequest(t *testing.T) {
	srv := mcptest.NewHTTPServer(mcptest.WithTool(echo, booked), mcptest.WithoutReceiptEpoch())
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "journal.db")
	lost := leaveUncertain(t, srv, path, mcpclient.WithMeta("trace", "t1"))
	j := openJournal(t, path)
	c := connectThrough(t, srv.Transport(), j)
	ctx := context.Background()
	got, _ := recoverAll(t, c)
	if len(got) != 1 {
		t.Fatalf("recovered %d", len(got))
	}
	resp, err := c.Supersede(ctx, got[0].Request, mcpclient.Inspection{Checked: "bookings", Found: "none for 12A"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sent struct {
		Params struct {
			Name      string                     `json:"name"`
			Arguments map[string]any             `json:"arguments"`
			Meta      map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal(resp.Request.Bytes(), &sent); err != nil {
		t.Fatal(err)
	}
	if p := sent.Params; p.Name != "book" || p.Arguments["seat"] != "12A" || len(p.Meta) != 1 || string(p.Meta["supersedes"]) != lost.ID().JSON() {
		t.Fatalf("the replacement sent %s", resp.Request.Bytes())
	}
	if rec, _, _ := j.Lookup(ctx, lost.ID()); rec.SupersededBy != resp.Request.ID() {
		t.Fatalf("the old record is superseded by %v, want %v", rec.SupersededBy, resp.Request.ID())
	}
	if got, _ := recoverAll(t, c); len(got) != 0 {
		t.Fatalf("still recovered after it was replaced: %+v", got)
	}
}

// agedJournal reads its records as if they had been written age earlier: a process that
// recovers them a long time after they were sent.
type agedJournal struct {
	mcpclient.Journal
	age time.Duration
}

func (j agedJournal) Claim(ctx context.Context, rec mcpclient.JournalRecord) (mcpclient.JournalClaim, error) {
	c, err := j.Journal.Claim(ctx, rec)
	if err != nil {
		return c, err
	}
	return agedClaim{c, j.age}, nil
}

type agedClaim struct {
	mcpclient.JournalClaim
	age time.Duration
}

func (c agedClaim) Prior() (mcpclient.JournalRecord, bool) {
	rec, ok := c.JournalClaim.Prior()
	rec.Created = rec.Created.Add(-c.age)
	return rec, ok
}

func (j agedJournal) Unresolved(ctx context.Context, server string) iter.Seq2[mcpclient.JournalRecord, error] {
	return func(yield func(mcpclient.JournalRecord, error) bool) {
		for rec, err := range j.Journal.Unresolved(ctx, server) {
			rec.Created = rec.Created.Add(-j.age)
			if !yield(rec, err) {
				return
			}
		}
	}
}

// A request sent longer ago than the server keeps receipts is recovered as an unknown outcome,
// even under the same epoch: its receipt may have been pruned, and a same-id resend would then
// run it again. Within the retention the same request is resent as before.
func TestRecoverPastTheReceiptRetentionIsUnknown(t *testing.T) {
	for _, c := range []struct {
		age     time.Duration
		unknown bool
	}{{receipts.DefaultRetention / 2, false}, {receipts.DefaultRetention + time.Hour, true}} {
		t.Run(c.age.String(), func(t *testing.T) {
			srv := mcptest.NewHTTPServer(mcptest.WithTool(echo, booked))
			defer srv.Close()
			path := filepath.Join(t.TempDir(), "journal.db")
			leaveUncertain(t, srv, path)
			cl := connectThrough(t, srv.Transport(), agedJournal{openJournal(t, path), c.age})
			got, errs := recoverAll(t, cl)
			if len(got) != 1 {
				t.Fatalf("recovered %d requests", len(got))
			}
			if c.unknown != errors.Is(errs[0], mcpclient.ErrOutcomeUnknown) {
				t.Fatalf("recovered %s after %s: %v", got[0].Request.ID(), c.age, errs[0])
			}
			if !c.unknown {
				if _, err := cl.Resend(context.Background(), got[0].Request); err != nil {
					t.Fatal(err)
				}
			}
			if n := srv.Executions("book"); n != 1 {
				t.Errorf("%d executions", n)
			}
		})
	}
}

// A request answered in an earlier process longer ago than the server keeps receipts is not sent
// again under its id, even under the same epoch: the receipt that would answer it may be gone.
// Within the retention the receipt answers it, and nothing runs twice either way.
func TestAnsweredIDPastTheReceiptRetentionIsNotSent(t *testing.T) {
	for _, c := range []struct {
		age     time.Duration
		refused bool
	}{{receipts.DefaultRetention / 2, false}, {receipts.DefaultRetention + time.Hour, true}} {
		t.Run(c.age.String(), func(t *testing.T) {
			srv := mcptest.NewHTTPServer(mcptest.WithTool(echo, booked))
			defer srv.Close()
			path := filepath.Join(t.TempDir(), "journal.db")
			id := mcpclient.StringID("6f1c1ef0-7d0e-4a6b-9d7f-2b1f3e4c5a6d")
			args := map[string]any{"seat": "12A"}
			j := openJournal(t, path)
			first := connectThrough(t, srv.Transport(), j)
			if _, err := first.CallTool(context.Background(), "book", args, mcpclient.WithRequestID(id)); err != nil {
				t.Fatal(err)
			}
			first.Close()
			j.Close()
			later := connectThrough(t, srv.Transport(), agedJournal{openJournal(t, path), c.age})
			resp := new(mcpclient.Response)
			_, err := later.CallTool(context.Background(), "book", args, mcpclient.WithRequestID(id), mcpclient.WithResponse(resp))
			if c.refused != errors.Is(err, mcpclient.ErrAlreadyAnswered) || (!c.refused && (err != nil || !resp.Replayed)) {
				t.Fatalf("the same id %s later: %v (replayed %v)", c.age, err, resp.Replayed)
			}
			if n := srv.Executions("book"); n != 1 {
				t.Errorf("%d executions", n)
			}
		})
	}
}
