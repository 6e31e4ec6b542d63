//go:build !unix

// Package cputime reads the CPU time the process has used; on this platform it cannot.
package cputime

import "time"

// Process reports that the platform does not tell the process's CPU time.
func Process() (time.Duration, bool) { return 0, false }
