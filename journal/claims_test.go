package journal_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/journal"
)

// newRecord is a request record of its own id, open, as the client claims a new one.
func newRecord(frame string) mcpclient.JournalRecord {
	id := mcpclient.StringID(uuid.NewString())
	now := time.Now()
	return mcpclient.JournalRecord{ID: id, Method: "tools/call", Frame: []byte(frame),
		Fingerprint: mcpclient.Fingerprint{byte(len(frame))}, Server: "s", State: mcpclient.StatePending, Open: true,
		Created: now, Updated: now}
}

func claimOf(t *testing.T, j *journal.File, rec mcpclient.JournalRecord) mcpclient.JournalClaim {
	t.Helper()
	c, err := j.Claim(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A claim of an id made as soon as its last claim settled finds that settle, never the state
// before it: the settle is queued for the file before the id is free to claim again.
func TestClaimAfterSettleFindsTheSettle(t *testing.T) {
	j := openJournal(t, filepath.Join(t.TempDir(), "journal.db"))
	rec := newRecord(`{"n":1}`)
	ctx := context.Background()
	claimOf(t, j, rec).Settle(mcpclient.StateUncertain, true, 1)
	for i := range 300 {
		c := claimOf(t, j, rec)
		want := mcpclient.StateUncertain
		next := mcpclient.StateAnswered
		if i%2 == 1 {
			want, next = next, want
		}
		done := make(chan struct{})
		go func() { c.Settle(next, true, 1); close(done) }()
		var again mcpclient.JournalClaim
		for {
			var err error
			if again, err = j.Claim(ctx, rec); err == nil {
				break
			} else if !errors.Is(err, mcpclient.ErrRequestInFlight) {
				t.Fatal(err)
			}
		}
		<-done
		prior, ok := again.Prior()
		if !ok || prior.State != next || prior.Open {
			t.Fatalf("round %d: claimed after a settle to %v, found %v (open %v); the state before it was %v", i, next, prior.State, prior.Open, want)
		}
		again.Settle(next, true, 0)
	}
}

// Forget refuses a request an attempt loop holds, and removes it once settled.
func TestForgetRefusesAHeldRequest(t *testing.T) {
	j := openJournal(t, filepath.Join(t.TempDir(), "journal.db"))
	rec := newRecord(`{"n":1}`)
	ctx := context.Background()
	c := claimOf(t, j, rec)
	if err := j.Forget(ctx, rec.ID); !errors.Is(err, mcpclient.ErrRequestInFlight) {
		t.Fatalf("Forget of a held request: %v, want ErrRequestInFlight", err)
	}
	if _, ok, _ := j.Lookup(ctx, rec.ID); !ok {
		t.Fatal("the held request was forgotten")
	}
	c.Settle(mcpclient.StateUncertain, true, 1)
	if err := j.Forget(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := j.Lookup(ctx, rec.ID); ok {
		t.Fatal("the settled request is still there")
	}
}

// A full file never makes room by dropping the original of a re-issue whose attempt loop still
// holds it, though its replacement made it settled.
func TestFullFileKeepsAHeldOriginal(t *testing.T) {
	j := openJournal(t, filepath.Join(t.TempDir(), "journal.db"), journal.WithCapacity(2))
	ctx := context.Background()
	orig := newRecord(`{"n":1}`)
	held := claimOf(t, j, orig)
	reissue := newRecord(`{"n":2}`)
	reissue.Supersedes, reissue.Reissue = orig.ID, true
	claimOf(t, j, reissue)
	if _, err := j.Claim(ctx, newRecord(`{"n":3}`)); !errors.Is(err, mcpclient.ErrLedgerFull) {
		t.Fatalf("a third request in a file of two whose requests are held: %v, want ErrLedgerFull", err)
	}
	if rec, ok, _ := j.Lookup(ctx, orig.ID); !ok || rec.SupersededBy != reissue.ID {
		t.Fatalf("the original: %+v, %v", rec, ok)
	}
	held.Settle(mcpclient.StateUncertain, true, 1)
	if _, err := j.Claim(ctx, newRecord(`{"n":4}`)); err != nil {
		t.Fatalf("once its loop let go of the original: %v", err)
	}
}
