package journal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/northstar-mcp/mcpclient"
)

// The records of a log are read up to the first that is torn, corrupt, or of another generation
// or file; what follows it is not read, whatever it is.
func TestLogRecordsEndAtTheFirstBadOne(t *testing.T) {
	salt := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	changes := [][]byte{
		appendChange(nil, changePut, inStates, []byte("k1"), []byte("v1")),
		appendChange(nil, changeDel, inSettled, []byte("k2"), nil),
		appendChange(nil, changePut, inFrozen, []byte("12345678"), bytes.Repeat([]byte("f"), 300)),
	}
	var log []byte
	var ends []int
	for _, c := range changes {
		log = appendRecord(log, salt, 7, c)
		ends = append(ends, len(log))
	}
	check := func(name string, log []byte, gen uint64, want int) {
		t.Helper()
		got := records(log, salt, gen)
		if len(got) != want {
			t.Fatalf("%s: %d records, want %d", name, len(got), want)
		}
		for i := range got {
			if !bytes.Equal(got[i], changes[i]) {
				t.Fatalf("%s: record %d is %q, want %q", name, i, got[i], changes[i])
			}
		}
	}
	check("whole", log, 7, 3)
	check("zeros after", append(slicesClone(log), make([]byte, 4096)...), 7, 3)
	check("another generation", log, 8, 0)
	for cut := ends[1]; cut < ends[2]; cut++ {
		check(fmt.Sprintf("torn at %d", cut), log[:cut], 7, 2)
	}
	for i := ends[0]; i < ends[1]; i++ {
		bad := slicesClone(log)
		bad[i] ^= 0x40
		check(fmt.Sprintf("byte %d flipped", i), bad, 7, 1)
	}
	check("another file's salt", appendRecord(nil, [8]byte{9}, 7, changes[0]), 7, 0)
	stale := appendRecord(slicesClone(log[:ends[1]]), salt, 6, changes[2])
	check("an earlier generation after", stale, 7, 2)
}

func slicesClone(b []byte) []byte { return append([]byte(nil), b...) }

// Replaying a malformed change fails rather than write something else.
func TestReplayRefusesMalformedChanges(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := createBuckets(db); err != nil {
		t.Fatal(err)
	}
	good := appendChange(nil, changePut, inStates, []byte("key"), []byte("value"))
	for _, bad := range [][]byte{{'X', inStates, 0}, {changePut, 9, 0, 0}, good[:len(good)-1], {changeDel}} {
		err := db.Update(func(tx *bolt.Tx) error { return replay(tx, bad) })
		if err == nil {
			t.Fatalf("change %q replayed", bad)
		}
	}
}

// logRecord is a new request for the log's tests, of a fixed size for a fixed id length.
func logRecord(id string) mcpclient.JournalRecord {
	now := time.Now()
	return mcpclient.JournalRecord{ID: mcpclient.StringID(id), Method: "tools/call", Frame: []byte(`{"id":"` + id + `"}`),
		Server: "s", State: mcpclient.StatePending, Open: true, Created: now, Updated: now, Fingerprint: sha256.Sum256([]byte(id))}
}

// snapshot copies the file and its log as a process killed now would leave them, the writer
// held meanwhile, and returns the copy's path.
func snapshot(t *testing.T, j *File) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "journal.db")
	var err error
	j.read(func(*bolt.Tx) {
		if err = copyFile(j.db.Path(), dst); err == nil {
			err = copyFile(walPath(j.db.Path()), walPath(dst))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// logEnd returns where the writer appends its next record.
func logEnd(j *File) (end int64) {
	j.read(func(*bolt.Tx) { end = j.logEnd })
	return end
}

// checkpointNow makes the writer checkpoint, and checkpoint only when told from then on.
func checkpointNow(t *testing.T, j *File) {
	t.Helper()
	var err error
	j.read(func(*bolt.Tx) {
		j.interval = time.Hour
		err = j.checkpoint()
	})
	if err != nil {
		t.Fatal(err)
	}
}

func mustClaim(t *testing.T, j *File, rec mcpclient.JournalRecord) mcpclient.JournalClaim {
	t.Helper()
	c, err := j.Claim(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func found(t *testing.T, path string, ids ...string) map[string]bool {
	t.Helper()
	j, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	in := map[string]bool{}
	for _, id := range ids {
		rec, ok, err := j.Lookup(context.Background(), mcpclient.StringID(id))
		if err != nil {
			t.Fatal(err)
		}
		if ok && !bytes.Equal(rec.Frame, logRecord(id).Frame) {
			t.Fatalf("request %s came back with %q", id, rec.Frame)
		}
		in[id] = ok
	}
	return in
}

// A checkpoint starts a generation: the records it committed, which the next generation's write
// over at the log's start, are not read again, even where one of them begins exactly where the
// new ones end. Here a request settled, then checkpointed, would be found open again.
func TestCheckpointedRecordsNotReplayed(t *testing.T) {
	j := openInTemp(t)
	checkpointNow(t, j)
	mustClaim(t, j, logRecord("a1"))
	first := logEnd(j)
	mustClaim(t, j, logRecord("b1")).Settle(mcpclient.StateAnswered, true, 1)
	checkpointNow(t, j) // the settle with it, never logged
	// The new generation's first record, ending where the old one's first did: a change of
	// nothing (a settled key that is not there), its length chosen to fit.
	n := int(first) - recordHeader - 8 - 3
	if n < 0 || n >= 128 {
		t.Fatalf("the first record is %d bytes, too short or long to match", first)
	}
	var err2 error
	j.read(func(*bolt.Tx) {
		j.changes = appendChange(j.changes[:0], changeDel, inSettled, bytes.Repeat([]byte("x"), n), nil)
		j.unloggedSince = time.Now()
		err2 = j.flush()
	})
	if err2 != nil {
		t.Fatal(err2)
	}
	if end := logEnd(j); end != first {
		t.Fatalf("the new generation's first record ends at %d, the old one's at %d", end, first)
	}
	path := snapshot(t, j)
	if got := found(t, path, "a1", "b1"); !got["a1"] || !got["b1"] {
		t.Fatalf("found %v; want all", got)
	}
	k, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if b1, _, _ := k.Lookup(context.Background(), mcpclient.StringID("b1")); b1.Open || b1.State != mcpclient.StateAnswered {
		t.Fatalf("the settled request came back open, %v", b1.State)
	}
}

// A log whose last record is torn or corrupt gives back the records before it; the file opens
// and is written on.
func TestLogWithABadTail(t *testing.T) {
	j := openInTemp(t)
	checkpointNow(t, j)
	mustClaim(t, j, logRecord("a1"))
	mustClaim(t, j, logRecord("b1"))
	second := logEnd(j)
	mustClaim(t, j, logRecord("c1"))
	end := logEnd(j)
	for _, damage := range []struct {
		name string
		do   func(log *os.File) error
	}{
		{"torn", func(log *os.File) error {
			_, err := log.WriteAt(make([]byte, (end-second)/2), second+(end-second)/2)
			return err
		}},
		{"flipped", func(log *os.File) error { _, err := log.WriteAt([]byte{0xff}, end-3); return err }},
		{"length", func(log *os.File) error { _, err := log.WriteAt([]byte{0x7f}, second); return err }},
	} {
		t.Run(damage.name, func(t *testing.T) {
			path := snapshot(t, j)
			log, err := os.OpenFile(walPath(path), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			err = damage.do(log)
			log.Close()
			if err != nil {
				t.Fatal(err)
			}
			if got := found(t, path, "a1", "b1", "c1"); !got["a1"] || !got["b1"] || got["c1"] {
				t.Fatalf("found %v; want a1 and b1 only", got)
			}
			// Opened again, after the writes of the last open: what it replayed stays.
			k, err := OpenFile(path)
			if err != nil {
				t.Fatal(err)
			}
			mustClaim(t, k, logRecord("d1"))
			k.Close()
			if got := found(t, path, "a1", "b1", "c1", "d1"); !got["a1"] || !got["b1"] || got["c1"] || !got["d1"] {
				t.Fatalf("found %v; want a1, b1 and d1", got)
			}
		})
	}
}

// A file another program committed to after the log's checkpoint (an earlier version, which
// knows no log) no longer matches the log, which is then not replayed over what that program
// wrote.
func TestLogIgnoredAfterAnotherProgramWrote(t *testing.T) {
	j := openInTemp(t)
	checkpointNow(t, j)
	mustClaim(t, j, logRecord("a1"))
	path := snapshot(t, j)
	if got := found(t, snapshot(t, j), "a1"); !got["a1"] {
		t.Fatal("the log was not replayed")
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists([]byte("another program's"))
		return err
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := found(t, path, "a1"); got["a1"] {
		t.Fatal("the log was replayed over another program's writes")
	}
}

// Each open writes a new generation: none of the records the log holds when the file is opened,
// replayed or not, can be read as the new generation's, wherever the new records end.
func TestOpenStartsANewGeneration(t *testing.T) {
	j := openInTemp(t)
	checkpointNow(t, j)
	mustClaim(t, j, logRecord("a1"))
	mustClaim(t, j, logRecord("b1"))
	path := snapshot(t, j)
	before, err := os.ReadFile(walPath(path))
	if err != nil {
		t.Fatal(err)
	}
	k, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	var st walState
	k.read(func(*bolt.Tx) { st = k.wal })
	if n := len(records(before, st.salt, st.gen)); n != 2 {
		t.Fatalf("%d records of the generation replayed, want 2", n)
	}
	if n := len(records(before, st.salt, st.gen+1)); n != 0 {
		t.Fatalf("%d records of the log read as the new generation's", n)
	}
}

// A write of the log that fails breaks the File: it and every write after it fail, as whether it
// reached the disk is unknown, and the next open finds what was logged before.
func TestFailedLogWriteBreaksTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	checkpointNow(t, j)
	mustClaim(t, j, logRecord("a1"))
	j.read(func(*bolt.Tx) { j.log.Close() })
	if _, err := j.Claim(context.Background(), logRecord("b1")); !errors.Is(err, ErrBroken) {
		t.Fatalf("claim with the log failing: %v", err)
	}
	if _, err := j.Claim(context.Background(), logRecord("c1")); !errors.Is(err, ErrBroken) {
		t.Fatalf("claim after the log failed: %v", err)
	}
	if _, _, err := j.Lookup(context.Background(), mcpclient.StringID("a1")); !errors.Is(err, ErrBroken) {
		t.Fatalf("lookup after the log failed: %v", err)
	}
	if err := j.Close(); err == nil {
		t.Fatal("Close of a broken File reported no error")
	}
	if got := found(t, path, "a1", "b1", "c1"); !got["a1"] || got["c1"] {
		t.Fatalf("found %v; want a1 and not c1", got)
	}
}

// openInTemp opens a new File in a directory of the test's own, closed when the test ends.
func openInTemp(t *testing.T) *File {
	t.Helper()
	j, err := OpenFile(filepath.Join(t.TempDir(), "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}
