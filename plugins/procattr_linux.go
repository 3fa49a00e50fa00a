package plugins

import (
	"os/exec"
	"syscall"
)

// isolate puts a plugin in its own process group (so that everything it starts is
// stopped with it) and asks the kernel to kill it when the proxy dies, however it dies
// (SIGKILL included): go-plugin does neither by itself.
func isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup kills what is left of a plugin's process group.
func killGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL) // the group may be gone already
	}
}
