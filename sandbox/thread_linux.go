package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The thread start: the proxy restricts one of its own OS threads and starts the child
// from it, so that no second program runs before the command. Landlock domains,
// no_new_privs and capability sets belong to a thread, and a child inherits those of the
// thread that forked it.
//
// The restricted thread is in the child's Landlock domain, so the child could signal it
// (which would stop or kill the proxy) or, where ptrace is not otherwise forbidden, read
// and write the proxy's memory through it. So the child must not run one instruction of
// the command while that thread lives. It is started traced (PTRACE_TRACEME), which
// stops it at its first instruction after the exec. The thread, its tracer, detaches it
// with SIGSTOP (it stays stopped) and ends. Its parent-death signal is SIGCONT: the
// kernel sends it when the thread that forked it ends, once that thread has let go of its
// memory and files and can take no signal. Only then does the command run.
//
// While the child is stopped the proxy, from an ordinary thread, writes its user
// namespace's uid and gid maps (a Landlock-restricted thread may not open
// /proc/PID/uid_map) and arms its lifeline, which takes the place of the parent-death
// signal as "killed with the proxy". Meanwhile, for network "loopback", the restricted
// thread makes the child bring up its namespace's lo and drop the capability it needed
// for that (injectLoopback).
//
// The thread that forks must have started no other child: each child the proxy starts
// (an unsandboxed upstream, a plugin) has the parent-death signal SIGKILL, which the
// kernel would send when that thread ends (Landlock's scoping, ABI 6, refuses a signal
// from the restricted thread to a process outside its domain, but older kernels have
// none). And it must not be the main thread, which the Go runtime never ends.
// spareThread finds one.

// startOnThread starts cmd restricted by spec, in a process group of its own (the
// lifeline's target), with life's read end among its ExtraFiles. On success the child
// is stopped, to run once the thread has ended. On failure nothing of the command has
// run; cmd.Process is set when a child was created (it is then dead or being killed: the
// caller reaps it). mapIDs writes the child's uid and gid maps (for a user namespace of
// its own). spec.Loopback brings up lo in the child's network namespace: cmd must then
// give it new user and network namespaces and CAP_NET_ADMIN as an ambient capability
// (threadNamespaces).
func startOnThread(cmd *exec.Cmd, spec *launchSpec, life *lifeline, mapIDs bool) error {
	a := cmd.SysProcAttr
	a.Setpgid, a.Pgid = true, 0
	a.Ptrace = true
	a.Pdeathsig = syscall.SIGCONT

	stopped := make(chan error, 1)  // the thread: the child is stopped at its exec, or why not
	proceed := make(chan error, 1)  // the caller: nil to let it run, else why it must not
	detached := make(chan error, 1) // the thread: the child was let go, or why not
	var tid int                     // the thread's, read once detached is received
	if err := spareThread(func() {
		tid = unix.Gettid()
		if err := restrictThread(spec); err != nil {
			stopped <- err
			return
		}
		if err := cmd.Start(); err != nil {
			stopped <- err
			return
		}
		pid := cmd.Process.Pid
		if err := waitExecStop(pid); err != nil {
			_ = unix.Kill(pid, unix.SIGKILL)
			stopped <- err
			return
		}
		stopped <- nil
		var lo error // while the caller writes the maps
		switch {
		case spec.Loopback:
			if lo = injectLoopback(pid); lo != nil {
				lo = fmt.Errorf("sandbox: bringing up the loopback interface of the child's network namespace: %w", lo)
			}
		case mapIDs && injectSupported() == nil:
			if lo = injectDropCaps(pid); lo != nil {
				lo = fmt.Errorf("sandbox: emptying the capability sets of the child: %w", lo)
			}
		}
		if err := <-proceed; err != nil || lo != nil {
			_ = unix.Kill(pid, unix.SIGKILL)
			if err == nil {
				err = lo
			}
			detached <- err
			return
		}
		if _, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(pid), 0, uintptr(unix.SIGSTOP), 0, 0); e != 0 {
			_ = unix.Kill(pid, unix.SIGKILL)
			detached <- fmt.Errorf("sandbox: letting the child go: %w", e)
			return
		}
		detached <- nil
		// Returning with the thread locked ends it; the child then gets SIGCONT.
	}); err != nil {
		return err
	}
	if err := <-stopped; err != nil {
		return err
	}
	pid := cmd.Process.Pid
	var err error
	if mapIDs {
		err = writeIDMaps(pid)
	}
	if err == nil {
		err = life.arm(pid)
	}
	proceed <- err
	if err2 := <-detached; err == nil {
		err = err2
	}
	if err == nil {
		go continueAfter(cmd.Process, tid)
	}
	return err
}

// continueAfter sends the child p SIGCONT once the thread tid has ended. Its
// parent-death signal does that, except where the exec cleared it: the kernel clears a
// child's parent-death signal when the program it executes gains privileges, as a
// command with file capabilities does in a user namespace of its own (its sets are
// emptied before it runs, but that comes after). Then the child would stay stopped.
// The thread is gone from /proc/self/task once it has let go of its memory and files,
// which is when the parent-death signal is sent; a second SIGCONT changes nothing. If
// the thread is still there after a minute (it never is), the child is left stopped:
// it must not run beside it.
func continueAfter(p *os.Process, tid int) {
	path := "/proc/self/task/" + strconv.Itoa(tid)
	wait := 100 * time.Microsecond
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			_ = p.Signal(syscall.SIGCONT) // through a pidfd: never another process
			return
		}
		time.Sleep(wait)
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// waitExecStop waits until the traced child stops at its exec, without reaping it.
func waitExecStop(pid int) error {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WEXITED|unix.WNOWAIT|unix.WALL, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("sandbox: waiting for the child's exec: %w", err)
		}
		break
	}
	const cldTrapped = 4 // CLD_TRAPPED: stopped by its tracer's signal, SIGTRAP after the exec
	if info.Code != cldTrapped {
		return fmt.Errorf("sandbox: the child ended before it ran (CLD code %d)", info.Code)
	}
	return nil
}

// writeIDMaps maps the child's user namespace's uid and gid to the proxy's (the one
// mapping an unprivileged process may write), after denying setgroups as the kernel
// requires for that gid map.
func writeIDMaps(pid int) error {
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	uid, gid := strconv.Itoa(os.Getuid()), strconv.Itoa(os.Getgid())
	for _, w := range []struct{ file, data string }{
		{"uid_map", uid + " " + uid + " 1\n"},
		{"setgroups", "deny"},
		{"gid_map", gid + " " + gid + " 1\n"},
	} {
		f, err := os.OpenFile(dir+w.file, os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString(w.data)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return fmt.Errorf("sandbox: writing the %s of the child's user namespace: %w", w.file, err)
		}
	}
	return nil
}

// spareThread runs fn on a goroutine locked to an OS thread that fn may ruin, and that
// the Go runtime ends when fn returns: not the main thread (never ended), and one that
// started no child process still alive (its parent-death signal would fire). A thread
// found unfit stays locked, so that the next try cannot land on it, and is handed back
// unharmed once fn is done. It returns once fn runs; fn reports on its own.
func spareThread(fn func()) error {
	found := make(chan error, 1)
	var try func(depth int)
	try = func(depth int) {
		runtime.LockOSThread()
		if fit, err := threadFit(); err != nil || !fit {
			defer runtime.UnlockOSThread()
			if err != nil || depth == maxThreadTries {
				if err == nil {
					err = fmt.Errorf("every one of %d threads tried has started a child", maxThreadTries)
				}
				found <- fmt.Errorf("sandbox: finding a thread to start the child from: %w", err)
				return
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				try(depth + 1)
			}()
			<-done
			return
		}
		found <- nil
		fn() // returns with the thread still locked: the runtime ends it
	}
	go try(0)
	return <-found
}

// maxThreadTries bounds spareThread's search; the runtime makes a new thread once the
// idle ones are all held, so the bound is never reached unless something is wrong.
const maxThreadTries = 64

// threadFit reports whether the calling thread is neither the main thread nor the
// parent of a live child (/proc/thread-self/children: the kernel lists a thread's own
// children there; a child of a thread that ended is handed to the main thread).
func threadFit() (bool, error) {
	if unix.Gettid() == unix.Getpid() {
		return false, nil
	}
	b, err := os.ReadFile("/proc/thread-self/children")
	if err != nil {
		return false, err
	}
	return len(bytes.TrimSpace(b)) == 0, nil
}
