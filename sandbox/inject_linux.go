package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Bringing up lo for a thread start with network "loopback". The child's new network
// namespace's lo can only be brought up by a process inside that namespace (a socket
// belongs to its creator's namespace, and the proxy, multithreaded, cannot join the
// child's user namespace). The child itself is inside, and it is stopped at its first
// instruction after the exec, traced by the restricted thread: so that thread, its
// tracer, makes it run the few system calls the launcher would have run, one at a time,
// before it runs one instruction of the command:
//
//	socket(AF_INET, SOCK_DGRAM|SOCK_CLOEXEC, 0)
//	ioctl(fd, SIOCGIFFLAGS, &ifreq{"lo"}); ifreq.flags |= IFF_UP
//	ioctl(fd, SIOCSIFFLAGS, &ifreq)
//	close(fd)
//	capset(v3, {0, 0, 0})
//
// SIOCSIFFLAGS needs CAP_NET_ADMIN in the namespace's user namespace: the child is
// cloned with it as an ambient capability (raised after the clone, before the exec, as
// for the launcher; the clone gave it every capability of its new user namespace, and
// no_new_privs does not take an ambient one away at the exec). The capset then empties
// its permitted, effective and inheritable sets, and with them the ambient one (the
// kernel keeps ambient within permitted and inheritable): the command runs with no
// capabilities, as it does after the launcher.
//
// Each call is made by pointing the child's registers at a system-call instruction
// followed by a breakpoint, written over the aligned word at its instruction pointer
// (text of the program's entry, in the same page: mapped and executable), and letting it
// run to the breakpoint. Memory arguments are written on its stack below the red zone.
// The word of text, the stack bytes and every register are restored afterwards, and
// read back to check, so the command starts exactly where the exec left it. Any failure
// is returned; the caller kills the child.

// scratchSize is the stack memory used for the calls' arguments: a struct ifreq (40
// bytes on 64-bit Linux), and later a capability header and data (8 + 24 bytes).
const scratchSize = 64

// tracee is a child stopped in a signal-delivery stop, traced by the calling thread.
type tracee struct {
	pid     int
	orig    archRegs // its registers at the stop
	code    uintptr  // the aligned word the calls' instructions are written over
	text    [8]byte  // that word's original bytes
	scratch uintptr  // the stack memory for arguments
	stack   [scratchSize]byte
}

// injectLoopback brings up lo in the network namespace of the stopped, traced child pid
// and empties its capability sets, restoring its text, stack and registers exactly.
func injectLoopback(pid int) error {
	if err := injectSupported(); err != nil {
		return err
	}
	t := &tracee{pid: pid}
	if err := t.save(); err != nil {
		return err
	}
	if err := t.loopbackUp(); err != nil {
		return err
	}
	if err := t.dropCaps(); err != nil {
		return err
	}
	return t.restore()
}

// injectDropCaps empties the capability sets of the stopped, traced child pid, restoring
// its text, stack and registers exactly. A child in a user namespace of its own held
// every capability of that namespace up to its exec, so the exec kept the file
// capabilities of a command that has some (no_new_privs refuses only what the process
// did not hold before): emptied here, before the command's first instruction, they
// cannot come back (no_new_privs again).
func injectDropCaps(pid int) error {
	if err := injectSupported(); err != nil {
		return err
	}
	t := &tracee{pid: pid}
	if err := t.save(); err != nil {
		return err
	}
	if err := t.dropCaps(); err != nil {
		return err
	}
	return t.restore()
}

// save records the registers, the text word and the stack bytes, and writes the calls'
// instructions.
func (t *tracee) save() error {
	if err := getRegs(t.pid, &t.orig); err != nil {
		return fmt.Errorf("reading the child's registers: %w", err)
	}
	if err := nativeABI(&t.orig); err != nil {
		return err
	}
	t.code = uintptr(regsPC(&t.orig)) &^ 7
	t.scratch = (uintptr(regsSP(&t.orig)) - redZone - scratchSize) &^ 15
	if err := t.peek(t.code, t.text[:]); err != nil {
		return fmt.Errorf("reading the child's text: %w", err)
	}
	if err := t.peek(t.scratch, t.stack[:]); err != nil {
		return fmt.Errorf("reading the child's stack: %w", err)
	}
	var w [8]byte
	copy(w[:], t.text[:])
	copy(w[:], callCode)
	if err := t.poke(t.code, w[:]); err != nil {
		return fmt.Errorf("writing the system-call instruction in the child: %w", err)
	}
	return nil
}

// restore puts back the text word, the stack bytes and the registers, and reads them
// back to check.
func (t *tracee) restore() error {
	if err := t.poke(t.code, t.text[:]); err != nil {
		return fmt.Errorf("restoring the child's text: %w", err)
	}
	if err := t.poke(t.scratch, t.stack[:]); err != nil {
		return fmt.Errorf("restoring the child's stack: %w", err)
	}
	if err := setRegs(t.pid, &t.orig); err != nil {
		return fmt.Errorf("restoring the child's registers: %w", err)
	}
	var r archRegs
	var text [8]byte
	var stack [scratchSize]byte
	if err := getRegs(t.pid, &r); err != nil {
		return fmt.Errorf("reading the child's registers back: %w", err)
	}
	if err := t.peek(t.code, text[:]); err != nil {
		return fmt.Errorf("reading the child's text back: %w", err)
	}
	if err := t.peek(t.scratch, stack[:]); err != nil {
		return fmt.Errorf("reading the child's stack back: %w", err)
	}
	if r != t.orig || text != t.text || stack != t.stack {
		return errors.New("the child's registers, text or stack differ from what they were after its restore")
	}
	return nil
}

func (t *tracee) loopbackUp() error {
	fd, err := t.call(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	var ifr [40]byte // struct ifreq: the name, then the flags (a short) at 16
	copy(ifr[:], "lo")
	if err := t.poke(t.scratch, ifr[:]); err != nil {
		return fmt.Errorf("writing the ifreq in the child: %w", err)
	}
	if _, err := t.call(unix.SYS_IOCTL, fd, unix.SIOCGIFFLAGS, t.scratch); err != nil {
		return fmt.Errorf("SIOCGIFFLAGS: %w", err)
	}
	flags := ifr[16:24]
	if err := t.peek(t.scratch+16, flags); err != nil {
		return fmt.Errorf("reading lo's flags in the child: %w", err)
	}
	binary.NativeEndian.PutUint16(flags, binary.NativeEndian.Uint16(flags)|unix.IFF_UP)
	if err := t.poke(t.scratch+16, flags); err != nil {
		return fmt.Errorf("writing lo's flags in the child: %w", err)
	}
	if _, err := t.call(unix.SYS_IOCTL, fd, unix.SIOCSIFFLAGS, t.scratch); err != nil {
		return fmt.Errorf("SIOCSIFFLAGS: %w", err)
	}
	if _, err := t.call(unix.SYS_CLOSE, fd); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

// dropCaps empties the child's permitted, effective and inheritable capability sets,
// and so its ambient set.
func (t *tracee) dropCaps() error {
	var b [32]byte // struct __user_cap_header_struct, then two __user_cap_data_struct of zeros
	binary.NativeEndian.PutUint32(b[:], unix.LINUX_CAPABILITY_VERSION_3)
	if err := t.poke(t.scratch, b[:]); err != nil {
		return fmt.Errorf("writing the capability sets in the child: %w", err)
	}
	if _, err := t.call(unix.SYS_CAPSET, t.scratch, t.scratch+8); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// call makes the child run system call nr with args and stop at the breakpoint after
// it, and returns its result, or its error number as an error.
func (t *tracee) call(nr uintptr, args ...uintptr) (uintptr, error) {
	r := t.orig
	setCall(&r, t.code, nr, args)
	if err := setRegs(t.pid, &r); err != nil {
		return 0, fmt.Errorf("setting the child's registers: %w", err)
	}
	if err := unix.PtraceCont(t.pid, 0); err != nil {
		return 0, fmt.Errorf("resuming the child: %w", err)
	}
	if err := waitTrap(t.pid); err != nil {
		return 0, err
	}
	if err := getRegs(t.pid, &r); err != nil {
		return 0, fmt.Errorf("reading the child's registers: %w", err)
	}
	if pc := uintptr(regsPC(&r)); pc != t.code+trapPC {
		return 0, fmt.Errorf("the child stopped at %#x, not at the breakpoint at %#x", pc, t.code+trapPC)
	}
	ret := callResult(&r)
	if e := -int64(ret); e > 0 && e < 4096 {
		return 0, unix.Errno(e)
	}
	return uintptr(ret), nil
}

// waitTrap waits until the child stops with SIGTRAP (its breakpoint), without reaping
// it: anything else (another signal, its death) is an error.
func waitTrap(pid int) error {
	// The siginfo of a child's state change, as waitid fills it on 64-bit Linux.
	var info struct {
		Signo, Errno, Code, _ int32
		Pid                   int32
		Uid                   uint32
		Status                int32
		_                     [100]byte
	}
	for {
		err := unix.Waitid(unix.P_PID, pid, (*unix.Siginfo)(unsafe.Pointer(&info)), unix.WSTOPPED|unix.WEXITED|unix.WNOWAIT|unix.WALL, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("waiting for the child: %w", err)
		}
		break
	}
	const cldTrapped = 4
	if info.Code != cldTrapped || info.Status != int32(unix.SIGTRAP) {
		return fmt.Errorf("the child stopped or ended otherwise than at the breakpoint (CLD code %d, status %d)", info.Code, info.Status)
	}
	return nil
}

func (t *tracee) peek(addr uintptr, b []byte) error {
	n, err := unix.PtracePeekData(t.pid, addr, b)
	if err == nil && n != len(b) {
		err = fmt.Errorf("%d of %d bytes", n, len(b))
	}
	return err
}

// poke writes b, a whole number of words, at addr, a word boundary.
func (t *tracee) poke(addr uintptr, b []byte) error {
	for i := 0; i < len(b); i += 8 {
		w := binary.NativeEndian.Uint64(b[i:])
		if _, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_POKEDATA, uintptr(t.pid), addr+uintptr(i), uintptr(w), 0, 0); e != 0 {
			return e
		}
	}
	return nil
}

// threadNamespaces asks for the new user and network namespaces of a thread start (its
// uid and gid maps are written while it is stopped), with CAP_NET_ADMIN in them as an
// ambient capability when its lo is to be brought up.
func threadNamespaces(a *syscall.SysProcAttr, loopback bool) {
	a.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET
	if loopback {
		a.AmbientCaps = append(a.AmbientCaps, unix.CAP_NET_ADMIN)
	}
}
