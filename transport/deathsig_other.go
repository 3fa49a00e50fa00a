//go:build unix && !linux

package transport

import "syscall"

// dieWithParent does nothing where there is no parent-death signal: a child sees its
// stdin close when the proxy dies, which ends a well-behaved server.
func dieWithParent(*syscall.SysProcAttr) {}
