//go:build !unix

package journal

import (
	"os"
	"runtime"
)

// openPrivate opens the journal file for bbolt. Without O_NOFOLLOW the path is checked for a
// symbolic link before it is opened, which leaves a moment in which a link could be swapped in;
// the directories above the file are trusted as the user chose them. Windows has no mode bits
// to check: its files are guarded by ACLs, which are the user's to set.
func openPrivate(path string, flag int, perm os.FileMode) (*os.File, error) {
	if err := refuseSymlink(path, nil); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	if err := checkOpened(f, path, runtime.GOOS != "windows"); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
