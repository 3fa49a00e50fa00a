package sandbox

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Thread starts end only threads that started no child: another child's parent-death
// signal (SIGKILL for the proxy's unsandboxed children) follows the thread that started
// it. The restriction here handles no signals (Landlock's scoping, ABI 6, would refuse
// the signal from the restricted thread anyway, and older kernels have none).
func TestThreadStartSparesOtherChildren(t *testing.T) {
	if s := Probe(); !s.Thread {
		t.Skipf("no thread start here: %v", s.ThreadErr)
	}
	const n = 12
	var others []*exec.Cmd
	defer func() {
		for _, c := range others {
			c.Process.Kill()
			c.Wait()
		}
	}()
	// Started from this goroutine and from as many others, so from the threads the
	// thread starts below would otherwise run on.
	started := make(chan *exec.Cmd, n)
	for i := range n {
		start := func() {
			c := exec.Command("/bin/sleep", "60")
			c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			if err := c.Start(); err != nil {
				t.Error(err)
				c = nil
			}
			started <- c
		}
		if i%2 == 0 {
			start()
		} else {
			go start()
		}
	}
	for range n {
		if c := <-started; c != nil {
			others = append(others, c)
		}
	}
	for i := range 2 * n {
		cmd := exec.Command("/bin/true") // not this test binary: with -race it takes a second to start
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		life, err := newLifeline()
		if err != nil {
			t.Fatal(err)
		}
		cmd.ExtraFiles = []*os.File{life.r}
		err = startOnThread(cmd, &launchSpec{HandledFS: 1 << 12 /* make block devices */}, life, false)
		if err == nil {
			err = cmd.Wait()
		}
		life.Close()
		if err != nil {
			t.Fatalf("thread start %d: %v", i, err)
		}
	}
	// A parent-death signal is sent as the thread ends, after the start returned: wait
	// for the restricted threads (no_new_privs) to be gone.
	for deadline := time.Now().Add(10 * time.Second); restrictedThreads(t) > 0; {
		if time.Now().After(deadline) {
			t.Fatal("the restricted threads did not end")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i, c := range others {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(c.Process.Pid) + "/stat")
		if err != nil || !strings.Contains(string(b), ") S ") {
			t.Errorf("child %d (pid %d) was killed by a thread start's end: %q %v", i, c.Process.Pid, b, err)
		}
	}
}

// restrictedThreads counts this process's threads with no_new_privs set.
func restrictedThreads(t *testing.T) int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err == nil && strings.Contains(string(b), "\nNoNewPrivs:\t1\n") {
			n++
		}
	}
	return n
}
