//go:build unix

package transport

import (
	"os"
	"os/exec"
	"syscall"
)

// ownProcessGroup makes cmd's child the leader of a new process group, so that signals
// to the group reach whatever it starts too, and (on Linux) has it killed with the proxy.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(cmd.SysProcAttr)
}

// terminateGroup sends SIGTERM to p's process group.
func terminateGroup(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGTERM) }

// killGroup sends SIGKILL to p's process group.
func killGroup(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGKILL) }
