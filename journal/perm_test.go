//go:build unix

package journal_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/northstar-mcp/mcpclient/journal"
)

// A journal holds request bytes a restarted process resends: a file another user could write
// would let them choose what is sent in this user's name.

func TestOpenFileCreatesAPrivateFile(t *testing.T) {
	defer syscall.Umask(syscall.Umask(0))
	path := filepath.Join(t.TempDir(), "journal.db")
	openJournal(t, path)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Fatalf("a new journal file has mode %v, want 0600", perm)
	}
}

func TestOpenFileRefusesAFileOthersCanWrite(t *testing.T) {
	for _, perm := range []fs.FileMode{0o620, 0o602, 0o666} {
		t.Run(perm.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.db")
			j, err := journal.OpenFile(path)
			if err != nil {
				t.Fatal(err)
			}
			j.Close()
			if err := os.Chmod(path, perm); err != nil {
				t.Fatal(err)
			}
			j, err = journal.OpenFile(path)
			if err == nil {
				j.Close()
				t.Fatalf("a journal file of mode %v was opened", perm)
			}
			if !errors.Is(err, journal.ErrInsecureFile) {
				t.Fatalf("err = %v, want one matching ErrInsecureFile", err)
			}
			var ie *journal.InsecureFileError
			if !errors.As(err, &ie) || ie.Path != path || ie.Mode.Perm() != perm {
				t.Fatalf("err = %#v, want an *InsecureFileError naming %s and mode %v", err, path, perm)
			}
		})
	}
}

func TestOpenFileKeepsAFileOthersCanOnlyRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := journal.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	openJournal(t, path)
}

func TestOpenFileRefusesASymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real.db")
	j, err := journal.OpenFile(target)
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	dangling := filepath.Join(dir, "planted.db")
	for name, to := range map[string]string{"to a journal": target, "dangling": dangling} {
		t.Run(name, func(t *testing.T) {
			link := filepath.Join(dir, "link-"+filepath.Base(to))
			if err := os.Symlink(to, link); err != nil {
				t.Fatal(err)
			}
			j, err := journal.OpenFile(link)
			if err == nil {
				j.Close()
				t.Fatal("a journal path that is a symlink was opened")
			}
			if !errors.Is(err, journal.ErrInsecureFile) {
				t.Fatalf("err = %v, want one matching ErrInsecureFile", err)
			}
		})
	}
	if _, err := os.Lstat(dangling); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the dangling symlink's target was created (%v)", err)
	}
}

func TestOpenFileRefusesWhatIsNoRegularFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skip(err)
	}
	j, err := journal.OpenFile(path)
	if err == nil {
		j.Close()
		t.Fatal("a fifo was opened as a journal")
	}
	if !errors.Is(err, journal.ErrInsecureFile) {
		t.Fatalf("err = %v, want one matching ErrInsecureFile", err)
	}
}
