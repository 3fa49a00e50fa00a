package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat. It is 100 on every
// Linux architecture Go supports (sysconf(_SC_CLK_TCK)).
const clockTicks = 100

// memStatus is the memory part of /proc/PID/status, in kB, and the thread count.
type memStatus struct {
	RSSkB   int64 // VmRSS: resident set size now
	HWMkB   int64 // VmHWM: peak resident set size
	Threads int64 // Threads: OS threads (0 if the line is missing)
	// RssAnon and RssFile split VmRSS into private memory (heap, stacks) and pages of
	// mapped files (the binary's code and data); 0 if the kernel does not say.
	AnonkB, FilekB int64
}

// parseStatus reads VmRSS and VmHWM (and RssAnon, RssFile and Threads when present)
// from the text of /proc/PID/status.
func parseStatus(s string) (memStatus, error) {
	var st memStatus
	var haveRSS, haveHWM bool
	for line := range strings.Lines(s) {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *int64
		switch key {
		case "VmRSS":
			dst, haveRSS = &st.RSSkB, true
		case "VmHWM":
			dst, haveHWM = &st.HWMkB, true
		case "RssAnon":
			dst = &st.AnonkB
		case "RssFile":
			dst = &st.FilekB
		case "Threads":
			n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
			if err != nil {
				return st, fmt.Errorf("parsing Threads: %w", err)
			}
			st.Threads = n
			continue
		default:
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return st, fmt.Errorf("parsing %s: unexpected value %q", key, strings.TrimSpace(val))
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return st, fmt.Errorf("parsing %s: %w", key, err)
		}
		*dst = n
	}
	if !haveRSS || !haveHWM {
		return st, errors.New("VmRSS or VmHWM missing (kernel thread or zombie?)")
	}
	return st, nil
}

// parseStatCPU returns utime+stime, in clock ticks, from the text of /proc/PID/stat.
// The command name (field 2) is in parentheses and may itself hold spaces and
// parentheses, so fields are counted from the last ')'.
func parseStatCPU(s string) (int64, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("parsing stat: no ')' after the command name")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("parsing stat: %d fields after the command name, want at least 13", len(f))
	}
	utime, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing stat utime: %w", err)
	}
	stime, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing stat stime: %w", err)
	}
	return utime + stime, nil
}

func readStatus(pid int) (memStatus, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memStatus{}, err
	}
	st, err := parseStatus(string(b))
	if err != nil {
		return st, fmt.Errorf("pid %d: %w", pid, err)
	}
	return st, nil
}

// readCPUTicks returns the CPU time (user+system, all threads, not children) of pid.
func readCPUTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	n, err := parseStatCPU(string(b))
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	return n, nil
}

// readSwitches returns the context switches (voluntary and not) of pid's threads, as far
// as /proc/PID/task lists them (a thread that ended takes its count with it).
func readSwitches(pid int) int64 {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range ents {
		b, err := os.ReadFile(dir + "/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		n += parseSwitches(string(b))
	}
	return n
}

// parseSwitches sums the voluntary_ctxt_switches and nonvoluntary_ctxt_switches lines of
// a /proc status file.
func parseSwitches(s string) int64 {
	var n int64
	for line := range strings.SplitSeq(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "voluntary_ctxt_switches" && k != "nonvoluntary_ctxt_switches") {
			continue
		}
		if x, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			n += x
		}
	}
	return n
}

// ticksToDuration converts clock ticks to a duration.
func ticksToDuration(t int64) time.Duration {
	return time.Duration(t) * time.Second / clockTicks
}

// kBToMiB converts kB (KiB, as /proc reports) to MiB.
func kBToMiB(kB int64) float64 { return float64(kB) / 1024 }

// rssSampler polls /proc/PID/status of one process and keeps the largest VmRSS and VmHWM
// seen. It is started by startSampler and stopped by stop.
type rssSampler struct {
	pid    int
	maxRSS atomic.Int64 // kB
	maxHWM atomic.Int64 // kB
	quit   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
}

func startSampler(pid int, every time.Duration) *rssSampler {
	s := &rssSampler{pid: pid, quit: make(chan struct{})}
	s.sample()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.quit:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

// sample reads the status once; a failed read (the process is gone) is not recorded.
func (s *rssSampler) sample() {
	st, err := readStatus(s.pid)
	if err != nil {
		return
	}
	storeMax(&s.maxRSS, st.RSSkB)
	storeMax(&s.maxHWM, st.HWMkB)
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// stop takes a last sample and ends the polling goroutine; safe to call twice.
func (s *rssSampler) stop() {
	s.once.Do(func() {
		close(s.quit)
		s.wg.Wait()
		s.sample()
	})
}

// peakkB returns the peak resident set size seen: the kernel's VmHWM, or the largest
// sampled VmRSS if that is larger (it never should be).
func (s *rssSampler) peakkB() int64 {
	return max(s.maxHWM.Load(), s.maxRSS.Load())
}

// countFDs returns the number of open file descriptors of pid.
func countFDs(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, err
	}
	return len(ents), nil
}

// parseNofile returns the soft and hard "Max open files" of the text of
// /proc/PID/limits; -1 stands for unlimited.
func parseNofile(s string) (soft, hard int64, err error) {
	for line := range strings.Lines(s) {
		rest, ok := strings.CutPrefix(line, "Max open files")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			break
		}
		parse := func(v string) (int64, error) {
			if v == "unlimited" {
				return -1, nil
			}
			return strconv.ParseInt(v, 10, 64)
		}
		if soft, err = parse(f[0]); err == nil {
			hard, err = parse(f[1])
		}
		return soft, hard, err
	}
	return 0, 0, errors.New("no \"Max open files\" line in limits")
}

// readNofile returns the RLIMIT_NOFILE of pid.
func readNofile(pid int) (soft, hard int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return 0, 0, err
	}
	return parseNofile(string(b))
}

// parseStatPPID returns the parent pid (field 4) from the text of /proc/PID/stat.
func parseStatPPID(s string) (int, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("parsing stat: no ')' after the command name")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, fmt.Errorf("parsing stat: %d fields after the command name, want at least 2", len(f))
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return 0, fmt.Errorf("parsing stat ppid: %w", err)
	}
	return ppid, nil
}

// readParents maps the pid of every process in /proc to its parent's. Processes that
// exit during the scan are left out.
func readParents() (map[int]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	parents := make(map[int]int, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone since the listing
		}
		ppid, err := parseStatPPID(string(b))
		if err != nil {
			return nil, fmt.Errorf("pid %d: %w", pid, err)
		}
		parents[pid] = ppid
	}
	return parents, nil
}

// descendants returns the pids below root in the process tree given by parents (pid to
// parent pid), sorted.
func descendants(parents map[int]int, root int) []int {
	children := map[int][]int{}
	for pid, ppid := range parents {
		if pid != ppid {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []int
	seen := map[int]bool{root: true}
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	slices.Sort(out)
	return out
}

// readExe returns the program pid runs: the target of /proc/PID/exe (without the
// " (deleted)" the kernel appends when the file was replaced), or else the first
// argument of /proc/PID/cmdline.
func readExe(pid int) (string, error) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err == nil {
		return strings.TrimSuffix(exe, " (deleted)"), nil
	}
	b, err2 := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err2 != nil || len(b) == 0 {
		return "", errors.Join(err, err2)
	}
	arg0, _, _ := strings.Cut(string(b), "\x00")
	return arg0, nil
}

// evictPageCache drops the page cache's copy of the file at path (posix_fadvise
// DONTNEED), so that the next process to run it reads its pages back in through page
// faults and readahead. A binary that was just linked is cached as the linker wrote it,
// and the same binary then maps more of itself than once read back in (here: up to
// 1.6 MiB more of .gopclntab, varying from one build to the next); evicting it before an
// idle reading puts every binary measured, just built or not, in the same state. Pages
// that a running process maps stay cached.
func evictPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("posix_fadvise %s: %w", path, err)
	}
	return nil
}
