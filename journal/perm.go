package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ErrInsecureFile is matched (errors.Is) by an [*InsecureFileError].
var ErrInsecureFile = errors.New("journal: the file is not private to its owner")

// InsecureFileError is returned by OpenFile for a path that is a symbolic link, that is no
// regular file, or whose file other users may write. A journal holds the bytes a restarted
// process resends in its user's name: whoever can write or redirect the file chooses them. The
// file is neither used nor changed; the user removes it, or makes it a regular file that only
// its owner may write (chmod go-w).
type InsecureFileError struct {
	Path string
	Mode fs.FileMode // of the link or the file found at Path
}

func (e *InsecureFileError) Error() string {
	switch {
	case e.Mode&fs.ModeSymlink != 0:
		return fmt.Sprintf("journal: %s is a symbolic link; a journal must be the file itself", e.Path)
	case !e.Mode.IsRegular():
		return fmt.Sprintf("journal: %s is no regular file (mode %v)", e.Path, e.Mode)
	}
	return fmt.Sprintf("journal: file %s has mode %v, which other users can write; want no write permission for group and others (0600)", e.Path, e.Mode.Perm())
}

// Is reports whether target is [ErrInsecureFile].
func (e *InsecureFileError) Is(target error) bool { return target == ErrInsecureFile }

// checkOpened refuses f, opened at path, unless it is a regular file that only its owner may
// write. The mode is read from the open file, not the path, so it is the mode of what bbolt will
// use.
func checkOpened(f *os.File, path string, checkPerm bool) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || checkPerm && fi.Mode().Perm()&0o022 != 0 {
		return &InsecureFileError{Path: path, Mode: fi.Mode()}
	}
	return nil
}

// refuseSymlink returns an *InsecureFileError if path names a symbolic link, and err otherwise.
func refuseSymlink(path string, err error) error {
	if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return &InsecureFileError{Path: path, Mode: fi.Mode()}
	}
	return err
}
