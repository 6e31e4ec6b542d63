//go:build unix

// Package cputime reads the CPU time the process has used, for benchmarks that report it beside
// wall time: on a machine shared with other work a benchmark's wall time includes the time it
// waited for a CPU; its CPU time does not.
package cputime

import (
	"syscall"
	"time"
)

// Process returns the CPU time the process has used, in user and system mode, and whether the
// platform tells.
func Process() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
