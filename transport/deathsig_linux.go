package transport

import "syscall"

// dieWithParent asks the kernel to SIGKILL the child when the proxy dies, however it dies
// (SIGKILL included, when no shutdown code runs). The signal follows the thread that
// started the child; the proxy locks no goroutine to a thread, so Go never ends that
// thread while the process lives. The grandchildren a wrapper (npx, sh) starts are not
// covered: they see their stdin close with the proxy, which ends a well-behaved server.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
