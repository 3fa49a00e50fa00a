package sandbox

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The Landlock system calls, called directly through x/sys/unix: the three calls and the
// constants are all there, and go-landlock's enforcement on every thread goes through
// libcap's psx, which in a cgo build wraps the whole binary's pthread_create. The
// launcher restricts only the one thread that then executes the command, so it needs
// none of that.

// Access rights by the ABI version that introduced them.
const (
	fsRightsV1 = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	fsReferV2    = unix.LANDLOCK_ACCESS_FS_REFER
	fsTruncateV3 = unix.LANDLOCK_ACCESS_FS_TRUNCATE
	fsIoctlDevV5 = unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	netTCPV4     = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	scopeV6      = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL

	// accessRead is what a read path grants: read files, list directories, execute.
	accessRead = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	// fileRights are the rights that apply to a file that is not a directory; a rule on
	// such a file may grant no others.
	fileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		fsTruncateV3 | fsIoctlDevV5
	// accessDevice is what /dev/null and friends grant: read, write, truncate (a shell's
	// "> /dev/null" opens with O_TRUNC).
	accessDevice = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | fsTruncateV3
)

// fsRights returns every filesystem right the given ABI version knows.
func fsRights(abi int) uint64 {
	r := uint64(fsRightsV1)
	if abi >= 2 {
		r |= fsReferV2
	}
	if abi >= 3 {
		r |= fsTruncateV3
	}
	if abi >= 5 {
		r |= fsIoctlDevV5
	}
	return r
}

// landlockABI returns the kernel's Landlock ABI version, or an error saying why there is
// none (the kernel lacks it, or it is not among the active security modules).
func landlockABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		switch errno {
		case unix.ENOSYS:
			return 0, fmt.Errorf("this kernel has no Landlock (built without CONFIG_SECURITY_LANDLOCK)")
		case unix.EOPNOTSUPP:
			return 0, fmt.Errorf("Landlock is disabled on this machine (add landlock to the lsm= boot parameter)")
		}
		return 0, fmt.Errorf("asking for the Landlock ABI version: %w", errno)
	}
	return int(v), nil
}

// rulesetAttr is struct landlock_ruleset_attr up to ABI 6 (scoped).
type rulesetAttr struct {
	handledFS  uint64
	handledNet uint64
	scoped     uint64
}

// pathBeneathAttr is struct landlock_path_beneath_attr, which the kernel declares packed
// (12 bytes); Go pads it to 16, and the kernel reads only the first 12.
type pathBeneathAttr struct {
	allowed  uint64
	parentFd int32
	_        int32
}

// netPortAttr is struct landlock_net_port_attr.
type netPortAttr struct {
	allowed uint64
	port    uint64
}

const (
	ruleNetPort = 2 // LANDLOCK_RULE_NET_PORT
)

func createRuleset(a *rulesetAttr, size uintptr) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(a)), size, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

func addPathRule(ruleset int, a *pathBeneathAttr) error {
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(a)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func addPortRule(ruleset int, a *netPortAttr) error {
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), ruleNetPort,
		uintptr(unsafe.Pointer(a)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// restrictSelf enforces the ruleset on the calling thread only (flags 0: no TSYNC).
func restrictSelf(ruleset int) error {
	_, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
