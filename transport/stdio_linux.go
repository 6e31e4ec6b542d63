//go:build linux

package transport

import (
	"os/exec"
	"syscall"
	"unsafe"
)

// pPID is waitid's P_PID id type.
const pPID = 1

// waitAndKillGroup waits for the process to exit, kills what is left of its process group, and
// reaps the process. The kill comes between exit and reaping: until the process is reaped its pid
// cannot be reused, so the signal cannot reach a stranger's group.
func waitAndKillGroup(cmd *exec.Cmd) error {
	pid := cmd.Process.Pid
	var info [16]uint64 // a siginfo_t, 128 bytes; its content is not needed
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			if errno != 0 {
				// waitid is unavailable (old kernels, some emulations): reap first, then kill.
				err := cmd.Wait()
				killGroup(pid)
				return err
			}
			break
		}
	}
	killGroup(pid)
	return cmd.Wait()
}
