package journal_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/journal"
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

// unresolvedIn reads what j holds unresolved for server "s": the records, and the ids of those
// that did not decode.
func unresolvedIn(t *testing.T, j *journal.File) (found map[mcpclient.ID]mcpclient.JournalRecord, corrupt []mcpclient.ID) {
	t.Helper()
	found = map[mcpclient.ID]mcpclient.JournalRecord{}
	for rec, err := range j.Unresolved(context.Background(), "s") {
		switch {
		case errors.Is(err, journal.ErrCorrupt) && !rec.ID.IsZero():
			corrupt = append(corrupt, rec.ID)
		case err != nil:
			t.Fatal(err)
		default:
			found[rec.ID] = rec
		}
	}
	return found, corrupt
}

// uncertainRecords are n requests left uncertain, as an earlier version would hold them.
func uncertainRecords(n int) []mcpclient.JournalRecord {
	at := time.Now().UTC().Truncate(time.Millisecond)
	recs := make([]mcpclient.JournalRecord, n)
	for i := range recs {
		recs[i] = newRecord(fmt.Sprintf(`{"n":%d}`, i))
		recs[i].State, recs[i].Reached, recs[i].Open, recs[i].Attempts = mcpclient.StateUncertain, true, false, 1
		recs[i].Created, recs[i].Updated = at, at
	}
	return recs
}

// A large file of an earlier version is read whole, over several transactions, and a request in
// it that does not decode is reported by its id, at every open, without hiding the others.
func TestEarlierFileReadPastACorruptRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	recs := uncertainRecords(2500)
	writeEarlierFile(t, path, recs...)
	damaged := recs[1234].ID
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("standing")).Put([]byte(damaged.JSON()), []byte("{not json"))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		j := openJournal(t, path)
		found, corrupt := unresolvedIn(t, j)
		if len(found) != len(recs)-1 || len(corrupt) != 1 || corrupt[0] != damaged {
			t.Fatalf("%d recovered and %v corrupt, want %d and %v", len(found), corrupt, len(recs)-1, damaged)
		}
		for _, rec := range recs {
			if got, ok := found[rec.ID]; rec.ID != damaged && (!ok || !reflect.DeepEqual(got, rec)) {
				t.Fatalf("%+v, want %+v", got, rec)
			}
		}
		if n := j.Stats().Held; n != len(recs) {
			t.Fatalf("the file holds %d requests, want %d", n, len(recs))
		}
		j.Close()
	}
	// The damaged request can still be forgotten.
	j := openJournal(t, path)
	if err := j.Forget(context.Background(), damaged); err != nil {
		t.Fatal(err)
	}
	if _, corrupt := unresolvedIn(t, j); len(corrupt) != 0 || j.Stats().Held != len(recs)-1 {
		t.Fatalf("after forgetting it: %v corrupt, %d held", corrupt, j.Stats().Held)
	}
}

// A process that dies while moving an earlier version's requests leaves each in one form or the
// other, and the next open moves the rest.
func TestEarlierFileMovedByTheNextOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	recs := uncertainRecords(5)
	writeEarlierFile(t, path, recs...)
	if err := journal.RenumberSome(path, 2); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	var left int
	db.View(func(tx *bolt.Tx) error {
		left = tx.Bucket([]byte("requests")).Stats().KeyN
		return nil
	})
	db.Close()
	if left != 3 {
		t.Fatalf("%d requests left in the earlier form, want 3", left)
	}
	j := openJournal(t, path)
	found, corrupt := unresolvedIn(t, j)
	if len(found) != len(recs) || len(corrupt) != 0 {
		t.Fatalf("%d recovered, %v corrupt; want all %d", len(found), corrupt, len(recs))
	}
	for _, rec := range recs {
		if !reflect.DeepEqual(found[rec.ID], rec) {
			t.Fatalf("%+v, want %+v", found[rec.ID], rec)
		}
	}
}

// A settled request whose record no longer decodes is pruned like the others, and does not hold
// back the pruning of those that settled after it.
func TestPruneGoesPastACorruptRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := journal.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	damaged, kept := newRecord(`{"n":1}`), newRecord(`{"n":2}`)
	for _, rec := range []mcpclient.JournalRecord{damaged, kept} {
		claimOf(t, j, rec).Settle(mcpclient.StateAnswered, true, 1)
	}
	j.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("standing")).Put([]byte(damaged.ID.JSON()), []byte("{not json"))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	j = openJournal(t, path, journal.WithRetention(time.Nanosecond))
	claimOf(t, j, newRecord(`{"n":3}`)) // a write, which prunes
	for _, id := range []mcpclient.ID{damaged.ID, kept.ID} {
		if _, ok, _ := j.Lookup(context.Background(), id); ok {
			t.Errorf("request %s kept past the retention", id)
		}
	}
	if n := j.Stats().Held; n != 1 {
		t.Fatalf("the file holds %d requests, want 1", n)
	}
}

// What a hand writes where earlier versions kept how a request stands is read at the next open as
// the request's latest record: a damaged one is reported by its id, the record it replaced is
// gone, and forgetting the id leaves nothing of it behind.
func TestEarlierStateWrittenOverARequestReplacesIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	rec := newRecord(`{"n":1}`)
	j, err := journal.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	claimOf(t, j, rec).Settle(mcpclient.StateUncertain, true, 1)
	j.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("standing")).Put([]byte(rec.ID.JSON()), []byte("{not json"))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	j = openJournal(t, path)
	if found, corrupt := unresolvedIn(t, j); len(found) != 0 || len(corrupt) != 1 || corrupt[0] != rec.ID {
		t.Fatalf("recovered %v, corrupt %v; want only %v corrupt", found, corrupt, rec.ID)
	}
	if n := j.Stats().Held; n != 1 {
		t.Fatalf("the file holds %d requests, want 1", n)
	}
	if err := j.Forget(context.Background(), rec.ID); err != nil {
		t.Fatal(err)
	}
	j.Close()
	j = openJournal(t, path)
	if found, corrupt := unresolvedIn(t, j); len(found) != 0 || len(corrupt) != 0 || j.Stats().Held != 0 {
		t.Fatalf("after forgetting it: recovered %v, corrupt %v, %d held", found, corrupt, j.Stats().Held)
	}
}
