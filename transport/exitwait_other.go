//go:build !linux

package transport

import "os/exec"

// exitWatch is Linux's pidfd wait (exitwait_linux.go); elsewhere Wait blocks as usual.
type exitWatch struct{}

func watchExit(*exec.Cmd) *exitWatch { return &exitWatch{} }

func (*exitWatch) wait() {}
