//go:build unix

package transport

import (
	"os"
	"syscall"
)

const (
	sigTerm = syscall.SIGTERM
	sigKill = syscall.SIGKILL
)

// sysProcAttr puts the server in a process group of its own, whose id is its pid, so that
// signals sent to the group reach whatever it starts.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to the process group of p. Call it only while p is not yet waited for,
// so that its pid, and the group id, cannot have been reused.
func signalGroup(p *os.Process, sig syscall.Signal) {
	if err := syscall.Kill(-p.Pid, sig); err != nil {
		p.Signal(sig)
	}
}

// killGroup kills what is left in the process group led by pid.
func killGroup(pid int) {
	syscall.Kill(-pid, syscall.SIGKILL)
}
