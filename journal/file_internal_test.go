package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/northstar-mcp/mcpclient"
)

// A write that fails leaves the file as it was, and what the File remembers of it too: the request
// a failed write would have recorded has no number, is not found, and is recorded by a later
// claim.
func TestFailedWriteLeavesNoNumber(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { j.Close() }()
	ctx := context.Background()
	now := time.Now()
	rec := mcpclient.JournalRecord{ID: mcpclient.StringID("lost in a failed write"), Method: "tools/call", Frame: []byte(`{}`),
		Server: "s", State: mcpclient.StatePending, Open: true, Created: now, Updated: now}
	key := rec.ID.JSON()
	c := &claim{j: j, key: key}
	claimed := &op{done: make(chan struct{}), apply: func(tx *bolt.Tx, now time.Time) error {
		return j.claim(tx, now, key, &rec, appendFrozen(nil, &rec), c)
	}}
	broken := errors.New("the disk is gone")
	failing := &op{done: make(chan struct{}), apply: func(*bolt.Tx, time.Time) error { return broken }}
	j.mu.Lock()
	j.claimed[key] = true
	j.queue = append(j.queue, claimed, failing)
	j.mu.Unlock()
	j.signal()
	<-claimed.done
	<-failing.done
	if !errors.Is(claimed.err, broken) {
		t.Fatalf("the claim's write: %v, want it failed with the transaction", claimed.err)
	}
	j.release(key)
	if num, ok := j.numberOf(key); ok {
		t.Fatalf("the failed write left number %d", num)
	}
	if _, ok, err := j.Lookup(ctx, rec.ID); ok || err != nil {
		t.Fatalf("lookup after the failed write: %v, %v", ok, err)
	}
	again, err := j.Claim(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, known := again.Prior(); known {
		t.Fatal("the claim after the failed write found the request known")
	}
	again.Settle(mcpclient.StateAnswered, true, 1)
	j.Close()
	if j, err = OpenFile(path); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := j.Lookup(ctx, rec.ID); err != nil || !ok || got.State != mcpclient.StateAnswered {
		t.Fatalf("after reopening: %+v, %v, %v", got, ok, err)
	}
	if n := j.Stats().Held; n != 1 {
		t.Fatalf("the file holds %d requests, want 1", n)
	}
}

// A settle is in the writer's transaction and still among those not yet written between its
// batch and the writer's next step: a Lookup queued then must count it once.
func TestLookupCountsASettleOnce(t *testing.T) {
	j := openInTemp(t)
	ctx := context.Background()
	now := time.Now()
	rec := mcpclient.JournalRecord{ID: mcpclient.StringID("settled while read"), Method: "tools/call", Frame: []byte(`{}`),
		Server: "s", State: mcpclient.StatePending, Open: true, Created: now, Updated: now}
	c, err := j.Claim(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	committed, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	j.committed = func() {
		once.Do(func() {
			close(committed)
			<-resume
		})
	}
	c.Settle(mcpclient.StateAnswered, true, 1)
	<-committed
	type found struct {
		rec mcpclient.JournalRecord
		ok  bool
		err error
	}
	read := make(chan found)
	go func() {
		got, ok, err := j.Lookup(ctx, rec.ID)
		read <- found{got, ok, err}
	}()
	for queued := false; !queued; runtime.Gosched() { // the lookup queued while the writer is held
		j.mu.Lock()
		queued = len(j.queue) > 0
		j.mu.Unlock()
	}
	close(resume)
	f := <-read
	got, ok, err := f.rec, f.ok, f.err
	if err != nil || !ok {
		t.Fatalf("lookup: %v, %v", ok, err)
	}
	if got.State != mcpclient.StateAnswered || got.Open || got.Attempts != 1 {
		t.Fatalf("between the commit and the writer's next step the journal holds %v, open %v, %d attempts; want answered, settled, 1 attempt",
			got.State, got.Open, got.Attempts)
	}
}

// A new file's checkpoints do not remap the database as it grows: bbolt copies the whole of the
// writer's transaction out of the mapping before it remaps, and the callers queued meanwhile wait
// for the copy.
func TestCheckpointsOfAGrowingFileKeepTheMapping(t *testing.T) {
	j := openInTemp(t)
	mapped := j.db.Info().Data
	frame := bytes.Repeat([]byte("a"), 1024)
	for i := range 8 {
		for k := range 256 { // a MiB of requests for each checkpoint
			rec := logRecord(fmt.Sprintf("r%d-%d", i, k))
			rec.Frame = frame
			mustClaim(t, j, rec).Settle(mcpclient.StateAnswered, true, 1)
		}
		checkpointNow(t, j)
	}
	if got := j.db.Info().Data; got != mapped {
		t.Fatalf("the database was remapped as 8 MiB of requests were checkpointed into it (at %#x, then %#x)", mapped, got)
	}
}
