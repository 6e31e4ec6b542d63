package journal

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A File's writes reach the disk first in a log beside the database file (its path with "-wal"
// appended): each write appends one record, the changes it made to the database's keys, and
// syncs the log, one sync where a database commit takes two and writes every page it touched.
// The changes accumulate in one open database transaction, which a checkpoint commits: every
// checkpointInterval, when the log is half full, and at Close. A record too large for what is
// left of the log is written by a checkpoint instead.
//
// The records of a log are of one generation, the one after the generation the database names
// in walBucket as checkpointed: a checkpoint commits the next generation's name with its changes,
// and the records after it are written from the log's start, over the earlier ones. A record is
// its payload's length, a checksum (CRC-32C of the file's salt and the payload) and the payload:
// its generation and the changes. Opening replays the records of the generation after the
// checkpointed one, up to the first that is torn, corrupt or of another generation, and commits
// them; records of earlier generations are in the database already, and no later one can be in the
// log, since a generation is written only after the one before it was committed.
//
// The database also names the transaction of that commit: a file that another program (an
// earlier version of this one) committed to since no longer matches its log, which is then
// ignored. Each open names a new generation, so that the log's old records never match again.
const (
	walSize            = 4 << 20
	checkpointInterval = 250 * time.Millisecond
)

var (
	walBucket = []byte("wal")
	walKey    = []byte("checkpoint")
)

// Buckets as a log's change names them.
const (
	inFrozen byte = iota
	inStates
	inSettled
)

var changeBuckets = [...][]byte{inFrozen: frozenBucket, inStates: statesBucket, inSettled: settledBucket}

const (
	changePut byte = 'P'
	changeDel byte = 'D'
)

// Points of the writer's work on the log, where tests stop the process.
const (
	walAppend       = "append"       // a record is about to be written
	walSynced       = "synced"       // a record is synced; its writes are not yet reported done
	walCheckpoint   = "checkpoint"   // the checkpoint's transaction is about to be committed
	walCheckpointed = "checkpointed" // it is committed; the log still holds its records
)

// walHook, replaced by tests only, is called by the writer at each point.
var walHook = func(point string, j *File) {}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// walState is what the database holds of its log.
type walState struct {
	salt [8]byte
	gen  uint64 // the last generation checkpointed
	txid uint64 // the transaction that checkpointed it
}

func (s walState) encode() []byte {
	b := append([]byte(nil), s.salt[:]...)
	b = binary.BigEndian.AppendUint64(b, s.gen)
	return binary.BigEndian.AppendUint64(b, s.txid)
}

func readWALState(tx *bolt.Tx) (s walState, ok bool) {
	b := tx.Bucket(walBucket)
	if b == nil {
		return s, false
	}
	v := b.Get(walKey)
	if len(v) != 24 {
		return s, false
	}
	copy(s.salt[:], v)
	s.gen, s.txid = binary.BigEndian.Uint64(v[8:]), binary.BigEndian.Uint64(v[16:])
	return s, true
}

func writeWALState(tx *bolt.Tx, s walState) error {
	b, err := tx.CreateBucketIfNotExists(walBucket)
	if err != nil {
		return err
	}
	return b.Put(walKey, s.encode())
}

// walPath is the path of the log of the database at path.
func walPath(path string) string { return path + "-wal" }

// bucketOf returns tx's bucket that a change names, filled as the File fills it.
func bucketOf(tx *bolt.Tx, id byte) *bolt.Bucket {
	b := tx.Bucket(changeBuckets[id])
	switch id {
	case inFrozen:
		b.FillPercent = 1 // appended to, never rewritten: full pages stay full
	case inStates:
		b.FillPercent = 0.9 // written at the end, rewritten near it: pages mostly full, with room for a settle
	}
	return b
}

// put writes key in the bucket id names, in tx, and notes the change for the log.
func (j *File) put(tx *bolt.Tx, id byte, key, value []byte) error {
	if err := bucketOf(tx, id).Put(key, value); err != nil {
		return err
	}
	j.changes = appendChange(j.changes, changePut, id, key, value)
	return nil
}

// del deletes key from the bucket id names, in tx, and notes the change for the log.
func (j *File) del(tx *bolt.Tx, id byte, key []byte) error {
	if err := bucketOf(tx, id).Delete(key); err != nil {
		return err
	}
	j.changes = appendChange(j.changes, changeDel, id, key, nil)
	return nil
}

func appendChange(b []byte, kind, id byte, key, value []byte) []byte {
	b = append(b, kind, id)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	if kind == changePut {
		b = binary.AppendUvarint(b, uint64(len(value)))
		b = append(b, value...)
	}
	return b
}

var errBadChange = errors.New("journal: malformed change in the log")

// replay makes the changes in tx. Keys and values are copied: the transaction keeps what it is
// given until it ends, and changes may be in a buffer that is written again meanwhile. A request
// put into the frozen bucket moves the bucket's sequence past its number, as NextSequence did.
func replay(tx *bolt.Tx, changes []byte) error {
	for len(changes) > 0 {
		if len(changes) < 2 || changes[1] > inSettled || changes[0] != changePut && changes[0] != changeDel {
			return errBadChange
		}
		kind, id := changes[0], changes[1]
		changes = changes[2:]
		key, rest, ok := cutBytes(changes)
		if !ok {
			return errBadChange
		}
		changes = rest
		b := bucketOf(tx, id)
		if kind == changeDel {
			if err := b.Delete(slices.Clone(key)); err != nil {
				return err
			}
			continue
		}
		value, rest, ok := cutBytes(changes)
		if !ok {
			return errBadChange
		}
		changes = rest
		if err := b.Put(slices.Clone(key), slices.Clone(value)); err != nil {
			return err
		}
		if id == inFrozen && len(key) == 8 {
			if n := binary.BigEndian.Uint64(key); b.Sequence() < n {
				if err := b.SetSequence(n); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func cutBytes(b []byte) (field, rest []byte, ok bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return nil, nil, false
	}
	return b[w : w+int(n)], b[w+int(n):], true
}

const recordHeader = 8 // payload length, checksum

func checksum(salt [8]byte, payload []byte) uint32 {
	return crc32.Update(crc32.Checksum(salt[:], castagnoli), castagnoli, payload)
}

// appendRecord appends to b the record of changes in generation gen.
func appendRecord(b []byte, salt [8]byte, gen uint64, changes []byte) []byte {
	start := len(b)
	b = binary.BigEndian.AppendUint32(b, uint32(8+len(changes)))
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, gen)
	b = append(b, changes...)
	binary.BigEndian.PutUint32(b[start+4:], checksum(salt, b[start+recordHeader:]))
	return b
}

// records returns the changes of the whole records of generation gen at the start of log, up to
// the first that is not one.
func records(log []byte, salt [8]byte, gen uint64) (changes [][]byte) {
	for len(log) >= recordHeader+8 {
		n := uint64(binary.BigEndian.Uint32(log))
		if n < 8 || n > uint64(len(log)-recordHeader) {
			break
		}
		payload := log[recordHeader : recordHeader+n]
		if binary.BigEndian.Uint32(log[4:]) != checksum(salt, payload) || binary.BigEndian.Uint64(payload) != gen {
			break
		}
		changes = append(changes, payload[8:])
		log = log[recordHeader+n:]
	}
	return changes
}

// recoverLog commits to db what the log at path holds beyond db's last checkpoint, then names a
// new generation, so that no record now in the log is read again, and returns the log's state.
// It runs before anything else commits to db, so that a log db still matches is found matching.
func recoverLog(db *bolt.DB, path string) (walState, error) {
	var st walState
	var known, matches bool
	err := db.View(func(tx *bolt.Tx) error {
		st, known = readWALState(tx)
		matches = known && st.txid == uint64(tx.ID())
		return nil
	})
	if err != nil {
		return st, err
	}
	if matches {
		log, err := readLog(path)
		if err != nil {
			return st, err
		}
		if changes := records(log, st.salt, st.gen+1); len(changes) > 0 {
			err = db.Update(func(tx *bolt.Tx) error {
				for _, c := range changes {
					if err := replay(tx, c); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return st, fmt.Errorf("replaying the log %s: %w", path, err)
			}
		}
	}
	if !known {
		if _, err := rand.Read(st.salt[:]); err != nil {
			return st, err
		}
	}
	// The generation just read, or one an unmatched log may hold, is retired: the next is
	// written over it.
	st.gen++
	return st, nil
}

// readLog reads the log at path; one that does not exist is empty.
func readLog(path string) ([]byte, error) {
	f, err := openPrivate(path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, walSize+(1<<30)))
}

// openLog opens the log at path for writing, creating it, walSize bytes of zeros, if it is
// missing or shorter: a sync of a write within the file's size has no size to write.
func openLog(path string, mode os.FileMode) (*os.File, error) {
	_, statErr := os.Lstat(path)
	f, err := openPrivate(path, os.O_RDWR|os.O_CREATE, mode)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() < walSize {
		if _, err = f.WriteAt(make([]byte, walSize-fi.Size()), fi.Size()); err == nil {
			err = f.Sync()
		}
	}
	if err == nil && statErr != nil {
		// The new file's name must survive a crash as its records do.
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
