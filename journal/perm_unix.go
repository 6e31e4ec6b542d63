//go:build unix

package journal

import (
	"os"
	"syscall"
)

// openPrivate opens the journal file for bbolt. O_NOFOLLOW makes the refusal of a symbolic link
// part of the open itself, so that no link swapped in after a check is followed; the file's mode
// is then read from the open descriptor. The directories above the file are trusted as the user
// chose them.
func openPrivate(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW, perm)
	if err != nil {
		// The error O_NOFOLLOW gives for a link differs between systems (ELOOP, EMLINK,
		// EFTYPE): the path says what it was.
		return nil, refuseSymlink(path, err)
	}
	if err := checkOpened(f, path, true); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
