//go:build !linux

package plugins

import "os/exec"

// isolate is best effort where there is no parent-death signal: the SDK's plugins also
// exit when their parent process is gone.
func isolate(*exec.Cmd) {}

func killGroup(int) {}
