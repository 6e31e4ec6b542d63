package journal

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/northstar-mcp/mcpclient"
)

// holdCommit makes the first checkpoint's commit wait, at walCheckpoint, until release is
// called, then run then; inCommit is closed once it waits. The File is opened with it in place
// and made to checkpoint after every write.
func holdCommit(t *testing.T, then func(j *File)) (j *File, path string, inCommit chan struct{}, release func()) {
	t.Helper()
	inCommit, released := make(chan struct{}), make(chan struct{})
	var once, releaseOnce sync.Once
	release = func() { releaseOnce.Do(func() { close(released) }) }
	walHook = func(p string, j *File) {
		if p == walCheckpoint {
			once.Do(func() {
				close(inCommit)
				<-released
				then(j)
			})
		}
	}
	path = filepath.Join(t.TempDir(), "journal.db")
	j, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		release() // should the test have failed holding it
		j.Close()
		walHook = func(string, *File) {}
	})
	j.read(func(*bolt.Tx) { j.interval = 0 })
	return j, path, inCommit, release
}

// claimWithin claims rec, failing the test if the claim takes longer than a checkpoint held
// for the test would let it.
func claimWithin(t *testing.T, j *File, rec mcpclient.JournalRecord) mcpclient.JournalClaim {
	t.Helper()
	type claimed struct {
		c   mcpclient.JournalClaim
		err error
	}
	done := make(chan claimed, 1)
	go func() {
		c, err := j.Claim(context.Background(), rec)
		done <- claimed{c, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.c
	case <-time.After(10 * time.Second):
		t.Fatalf("the claim of %s waited for the checkpoint's commit", rec.ID.JSON())
		return nil
	}
}

// New requests are recorded while a checkpoint's commit is under way, without waiting for it;
// the other writes and the reads wait for it. A process killed before the commit is on disk
// leaves a file whose log holds both the generation being committed and the one after it.
func TestClaimsGoOnBesideACheckpoint(t *testing.T) {
	j, path, inCommit, release := holdCommit(t, func(*File) {})
	mustClaim(t, j, logRecord("a1")).Settle(mcpclient.StateAnswered, true, 1)
	<-inCommit
	b1 := claimWithin(t, j, logRecord("b1"))
	claimWithin(t, j, logRecord("b2"))
	b1.Settle(mcpclient.StateAnswered, true, 1)
	// As a process killed now leaves them: the commit has not begun.
	killed := filepath.Join(t.TempDir(), "journal.db")
	if err := copyFile(path, killed); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(walPath(path), walPath(killed)); err != nil {
		t.Fatal(err)
	}
	release()
	ctx := context.Background()
	if rec, ok, err := j.Lookup(ctx, mcpclient.StringID("b1")); err != nil || !ok || rec.Open || rec.State != mcpclient.StateAnswered {
		t.Fatalf("b1 after the checkpoint: %+v, %v, %v; want it answered", rec, ok, err)
	}
	if rec, ok, err := j.Lookup(ctx, mcpclient.StringID("b2")); err != nil || !ok || !rec.Open {
		t.Fatalf("b2 after the checkpoint: %+v, %v, %v; want it open", rec, ok, err)
	}
	if got := found(t, killed, "a1", "b1", "b2"); !got["a1"] || !got["b1"] || !got["b2"] {
		t.Fatalf("found %v after a kill during the commit; want all", got)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if got := found(t, path, "a1", "b1", "b2"); !got["a1"] || !got["b1"] || !got["b2"] {
		t.Fatalf("found %v after Close; want all", got)
	}
}

// A checkpoint whose commit fails breaks the File, as a failed log write does: the writes and
// reads it held back fail, and so does every one after. The requests recorded beside it are in
// the log, and the next open finds them.
func TestFailedCheckpointBreaksTheFile(t *testing.T) {
	j, path, inCommit, release := holdCommit(t, func(j *File) { j.cpTx.Rollback() })
	mustClaim(t, j, logRecord("a1"))
	<-inCommit
	claimWithin(t, j, logRecord("b1"))
	ctx := context.Background()
	read := make(chan error, 1)
	go func() {
		_, _, err := j.Lookup(ctx, mcpclient.StringID("a1"))
		read <- err
	}()
	release()
	if err := <-read; !errors.Is(err, ErrBroken) {
		t.Fatalf("lookup held back by the failed checkpoint: %v; want ErrBroken", err)
	}
	if _, err := j.Claim(ctx, logRecord("c1")); !errors.Is(err, ErrBroken) {
		t.Fatalf("claim after the failed checkpoint: %v; want ErrBroken", err)
	}
	if err := j.Close(); err == nil {
		t.Fatal("Close of a broken File reported no error")
	}
	if got := found(t, path, "a1", "b1", "c1"); !got["a1"] || !got["b1"] || got["c1"] {
		t.Fatalf("found %v; want a1 and b1", got)
	}
}
