package journal

import (
	bolt "go.etcd.io/bbolt"
)

// RenumberSome moves up to n requests an earlier version wrote in the file at path to numbers, in
// one transaction, as OpenFile does before a process dies in the middle of it.
func RenumberSome(path string, n int) error {
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		return err
	}
	if err = createBuckets(db); err == nil {
		_, err = renumberSome(db, n)
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}
