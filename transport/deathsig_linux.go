package transport

import "syscall"

// dieWithParent asks the kernel to SIGKILL the child when the proxy dies, however it dies
// (SIGKILL included, when no shutdown code runs). The signal follows the thread that
// started the child, and Go never ends a thread while the process lives but one locked to
// a goroutine that returns: package sandbox's thread start does that, on a thread it
// checks has started no child. A sandboxed child started that way gets a lifeline in its
// place (package sandbox sets its own). The grandchildren a wrapper (npx, sh) starts are
// not covered: they see their stdin close with the proxy, which ends a well-behaved
// server.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
