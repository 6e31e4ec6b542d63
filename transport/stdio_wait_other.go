//go:build !linux

package transport

import "os/exec"

// waitAndKillGroup waits for the process to exit and kills what is left of its process group.
// Without waitid's WNOWAIT the kill follows the reaping; the group id cannot be reused while
// members are left, and an empty group has nothing to kill.
func waitAndKillGroup(cmd *exec.Cmd) error {
	err := cmd.Wait()
	killGroup(cmd.Process.Pid)
	return err
}
