//go:build !unix

package transport

import (
	"os"
	"syscall"
)

// Without process groups, both shutdown signals kill the process itself.
type procSignal int

const (
	sigTerm procSignal = iota
	sigKill
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

func signalGroup(p *os.Process, _ procSignal) { p.Kill() }

func killGroup(int) {}
