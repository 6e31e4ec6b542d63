package journal

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
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

// A settle made while a checkpoint's commit is under way reaches the disk no later than a claim
// queued after it: a process killed once that claim returned finds the request settled.
func TestSettleBesideACheckpointBeforeTheClaimAfterIt(t *testing.T) {
	j, path, inCommit, release := holdCommit(t, func(*File) {})
	mustClaim(t, j, logRecord("a1")).Settle(mcpclient.StateAnswered, true, 1)
	<-inCommit
	b1 := claimWithin(t, j, logRecord("b1"))
	b1.Settle(mcpclient.StateAnswered, true, 1)
	claimWithin(t, j, logRecord("b2"))
	killed := filepath.Join(t.TempDir(), "journal.db")
	if err := copyFile(path, killed); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(walPath(path), walPath(killed)); err != nil {
		t.Fatal(err)
	}
	release()
	k, err := OpenFile(killed)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx := context.Background()
	if rec, ok, err := k.Lookup(ctx, mcpclient.StringID("b1")); err != nil || !ok || rec.Open || rec.State != mcpclient.StateAnswered || rec.Attempts != 1 {
		t.Fatalf("b1 after a kill once b2's claim returned: %+v, %v, %v; want it answered", rec, ok, err)
	}
	if rec, ok, err := k.Lookup(ctx, mcpclient.StringID("b2")); err != nil || !ok || !rec.Open {
		t.Fatalf("b2 after the kill: %+v, %v, %v; want it open", rec, ok, err)
	}
}

// armedCommit holds the first checkpoint begun once arm is called, as holdCommit does, so that
// the requests written before stand in the transaction it commits. Checkpoints wait for the
// test until then.
func armedCommit(t *testing.T) (j *File, path string, arm func(), inCommit chan struct{}, release func()) {
	t.Helper()
	inCommit, released := make(chan struct{}), make(chan struct{})
	var armed atomic.Bool
	var once, releaseOnce sync.Once
	release = func() { releaseOnce.Do(func() { close(released) }) }
	walHook = func(p string, j *File) {
		if p == walCheckpoint && armed.Load() {
			once.Do(func() {
				close(inCommit)
				<-released
			})
		}
	}
	path = filepath.Join(t.TempDir(), "journal.db")
	j, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		release()
		j.Close()
		walHook = func(string, *File) {}
	})
	j.read(func(*bolt.Tx) { j.interval = time.Hour })
	arm = func() {
		armed.Store(true)
		j.read(func(*bolt.Tx) { j.interval = 0 }) // the read's batch ends with a checkpoint
		mustClaim(t, j, logRecord("trigger"))
		<-inCommit
	}
	return j, path, arm, inCommit, release
}

// A settle written beside a checkpoint keeps what was written of its request before: the
// receipts it was rebound to and the request that superseded it.
func TestSettleBesideACheckpointKeepsHowTheRequestStood(t *testing.T) {
	j, path, arm, _, release := armedCommit(t)
	ctx := context.Background()
	a := mustClaim(t, j, logRecord("a"))
	binding := mcpclient.ReceiptBinding{Scope: mcpclient.ReceiptScopeProcess, Epoch: "rebound"}
	if err := a.Rebind(ctx, binding); err != nil {
		t.Fatal(err)
	}
	again := logRecord("a2")
	again.Supersedes, again.Reissue = mcpclient.StringID("a"), true
	mustClaim(t, j, again)
	arm()
	a.Settle(mcpclient.StateFailed, true, 2)
	claimWithin(t, j, logRecord("after"))
	killed := filepath.Join(t.TempDir(), "journal.db")
	if err := copyFile(path, killed); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(walPath(path), walPath(killed)); err != nil {
		t.Fatal(err)
	}
	release()
	check := func(j *File, when string) {
		t.Helper()
		rec, ok, err := j.Lookup(ctx, mcpclient.StringID("a"))
		if err != nil || !ok {
			t.Fatalf("a %s: %v, %v", when, ok, err)
		}
		if rec.Open || rec.State != mcpclient.StateFailed || !rec.Reached || rec.Attempts != 2 {
			t.Errorf("a %s: %+v; want it failed, reached, after 2 attempts", when, rec)
		}
		if rec.Receipts != binding {
			t.Errorf("a %s: receipts %+v, want %+v", when, rec.Receipts, binding)
		}
		if rec.SupersededBy != mcpclient.StringID("a2") {
			t.Errorf("a %s: superseded by %v, want a2", when, rec.SupersededBy)
		}
	}
	check(j, "after the checkpoint")
	k, err := OpenFile(killed)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	check(k, "after a kill during the checkpoint")
}

// An op the writer cannot record beside a checkpoint holds back every op queued after it, a
// new request's claim too: what reaches the disk keeps the queue's order.
func TestDeferredOpHoldsBackTheClaimsAfterIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j, path, arm, _, release := armedCommit(t)
		ctx := context.Background()
		mustClaim(t, j, logRecord("old")).Settle(mcpclient.StateAnswered, true, 1)
		arm()
		forgotten := make(chan error, 1)
		go func() { forgotten <- j.Forget(ctx, mcpclient.StringID("old")) }()
		synctest.Wait() // the forget is deferred
		claimed := make(chan error, 1)
		go func() {
			_, err := j.Claim(ctx, logRecord("new"))
			claimed <- err
		}()
		synctest.Wait()
		select {
		case err := <-claimed:
			t.Fatalf("the claim queued after a deferred forget returned (%v) while the checkpoint was held", err)
		default:
		}
		release()
		if err := <-forgotten; err != nil {
			t.Fatal(err)
		}
		if err := <-claimed; err != nil {
			t.Fatal(err)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		if got := found(t, path, "old", "new"); got["old"] || !got["new"] {
			t.Fatalf("found %v; want new only", got)
		}
	})
}
