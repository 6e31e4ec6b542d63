package journal

import (
	"os"
	"syscall"
)

// fdatasync syncs f's data, and of its metadata only what reading the data needs.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
