package sandbox

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// restrictThread applies spec's restriction to the calling OS thread, and so to every
// process it starts from now on: no capabilities, no_new_privs, and the Landlock ruleset
// of spec's rules and ports. It is one-way; the caller must never let the thread run
// anything but the start it was restricted for (the launcher execs next; the thread
// start's goroutine keeps the thread locked and lets it end).
func restrictThread(s *launchSpec) error {
	if err := dropCapabilities(); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	attr := rulesetAttr{handledFS: s.HandledFS, handledNet: s.HandledNet, scoped: s.Scoped}
	fd, err := createRuleset(&attr, unsafeSizeofRuleset)
	if err != nil {
		return fmt.Errorf("creating the Landlock ruleset: %w", err)
	}
	defer unix.Close(fd)
	for _, r := range s.Rules {
		if err := addRule(fd, r, s.HandledFS); err != nil {
			return err
		}
	}
	for _, p := range s.Ports {
		if err := addPortRule(fd, &netPortAttr{allowed: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(p)}); err != nil {
			return fmt.Errorf("allowing TCP port %d: %w", p, err)
		}
	}
	if err := restrictSelf(fd); err != nil {
		return fmt.Errorf("enforcing the Landlock ruleset: %w", err)
	}
	return nil
}

// unsafeSizeofRuleset is the size of the ruleset attribute passed to the kernel: the
// three fields up to ABI 6 (older kernels accept it while scoped is zero).
const unsafeSizeofRuleset uintptr = 24

// addRule adds one path rule; a missing optional path is skipped.
func addRule(ruleset int, r Rule, handled uint64) error {
	fd, err := unix.Open(r.Path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if r.Optional && (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EACCES)) {
			return nil
		}
		return fmt.Errorf("opening sandbox path %s (%s): %w", r.Path, r.Why, err)
	}
	defer unix.Close(fd)
	access := r.Access & handled
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("sandbox path %s: %w", r.Path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= fileRights
	}
	if access == 0 {
		return nil
	}
	if err := addPathRule(ruleset, &pathBeneathAttr{allowed: access, parentFd: int32(fd)}); err != nil {
		return fmt.Errorf("adding the Landlock rule for %s: %w", r.Path, err)
	}
	return nil
}

// dropCapabilities empties the thread's capability sets before the exec: the bounding
// set (so that an exec as root gains none), the ambient and inheritable sets, and the
// permitted and effective ones. A proxy run as root would otherwise hand its children
// every capability (loading a kernel module from memory needs no file Landlock could
// deny); in a user namespace of its own, the child would keep that namespace's.
func dropCapabilities() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	for c := 0; c <= 63; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if errors.Is(err, unix.EINVAL) {
			break // past the last capability this kernel knows
		}
		if errors.Is(err, unix.EPERM) {
			// Without CAP_SETPCAP the set cannot shrink; such a process has no
			// capabilities to pass on but by file capabilities, which no_new_privs voids.
			break
		}
		if err != nil {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clearing capabilities: %w", err)
	}
	return nil
}
