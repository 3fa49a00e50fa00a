//go:build windows

package transport

import (
	"os"
	"os/exec"
	"syscall"
)

// ownProcessGroup starts cmd's child in a new process group, so that a console interrupt
// meant for the proxy does not reach it.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}

// terminateGroup ends p: Windows has no SIGTERM for a process without a console, so the
// step after closing stdin is TerminateProcess. What the child started is not reached
// (that would take a job object).
func terminateGroup(p *os.Process) error { return p.Kill() }

// killGroup ends p, as terminateGroup does.
func killGroup(p *os.Process) error { return p.Kill() }
