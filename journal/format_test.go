package journal_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/northstar-mcp/mcpclient"
)

// writeEarlierFile writes recs to a new file at path as earlier versions of the journal did: each
// frozen request as JSON under its id in bucket "requests", how it stands as JSON in bucket
// "standing", and the settled ones in bucket "settled" by when they settled.
func writeEarlierFile(t *testing.T, path string, recs ...mcpclient.JournalRecord) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		buckets := map[string]*bolt.Bucket{}
		for _, name := range []string{"requests", "standing", "settled"} {
			b, err := tx.CreateBucket([]byte(name))
			if err != nil {
				return err
			}
			buckets[name] = b
		}
		for _, rec := range recs {
			key := []byte(rec.ID.JSON())
			frozen := rec
			frozen.State, frozen.Attempts, frozen.Receipts, frozen.Updated, frozen.SupersededBy = 0, 0, mcpclient.ReceiptBinding{}, time.Time{}, mcpclient.ID{}
			frozen.Reached, frozen.Open = false, false
			v, err := json.Marshal(frozen)
			if err != nil {
				return err
			}
			if err := buckets["requests"].Put(key, v); err != nil {
				return err
			}
			st := map[string]any{"state": rec.State, "reached": rec.Reached, "open": rec.Open, "attempts": rec.Attempts,
				"receipts": rec.Receipts, "updated": rec.Updated}
			if rec.Settled() {
				at := rec.Updated.UnixNano()
				st["settledAt"] = at
				if err := buckets["settled"].Put(append(binary.BigEndian.AppendUint64(nil, uint64(at)), key...), nil); err != nil {
					return err
				}
			}
			if v, err = json.Marshal(st); err != nil {
				return err
			}
			if err := buckets["standing"].Put(key, v); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// A file an earlier version wrote, its values in JSON, is read as it was written, and its
// requests are claimed and settled as any other.
func TestReadsWhatEarlierVersionsWrote(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	at := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond) // within the retention
	uncertain := newRecord(`{"n":1}`)
	uncertain.State, uncertain.Reached, uncertain.Open, uncertain.Attempts = mcpclient.StateUncertain, true, false, 2
	uncertain.Receipts = mcpclient.ReceiptBinding{Scope: mcpclient.ReceiptScopeProcess, Epoch: "e1"}
	uncertain.Created, uncertain.Updated = at, at
	answered := newRecord(`{"n":2}`)
	answered.State, answered.Open, answered.Attempts, answered.Created, answered.Updated = mcpclient.StateAnswered, false, 1, at, at
	writeEarlierFile(t, path, uncertain, answered)

	j := openJournal(t, path)
	ctx := context.Background()
	var found []mcpclient.JournalRecord
	for rec, err := range j.Unresolved(ctx, "s") {
		if err != nil {
			t.Fatal(err)
		}
		found = append(found, rec)
	}
	if len(found) != 1 || !reflect.DeepEqual(found[0], uncertain) {
		t.Fatalf("unresolved %+v, want only %+v", found, uncertain)
	}
	if rec, ok, err := j.Lookup(ctx, answered.ID); err != nil || !ok || !reflect.DeepEqual(rec, answered) {
		t.Fatalf("lookup %+v (%v, %v), want %+v", rec, ok, err, answered)
	}
	c := claimOf(t, j, uncertain)
	if prior, ok := c.Prior(); !ok || !reflect.DeepEqual(prior, uncertain) {
		t.Fatalf("prior %+v (%v), want %+v", prior, ok, uncertain)
	}
	c.Settle(mcpclient.StateAnswered, true, 1)
	j.Close()

	j = openJournal(t, path)
	rec, ok, err := j.Lookup(ctx, uncertain.ID)
	if err != nil || !ok || rec.State != mcpclient.StateAnswered || rec.Attempts != 3 || !rec.Reached || rec.Open ||
		string(rec.Frame) != string(uncertain.Frame) || rec.Receipts != uncertain.Receipts {
		t.Fatalf("after a claim and a settle: %+v (%v, %v)", rec, ok, err)
	}
	if n := j.Stats().Held; n != 2 {
		t.Fatalf("the file holds %d requests, want 2", n)
	}
}
