package benchwire

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Calls runs b.N calls of method over conc sessions opened at http://addr/path, each on
// its own connection and goroutine (conc 1: on the benchmark's goroutine), after 50
// warm-up calls per session. Besides ns/op, B/op and allocs/op it reports cpu-ns/op:
// this process's CPU time (user and system) per call.
func Calls(b *testing.B, addr, path string, conc int, method string, params []byte) {
	sessions := make([]*Session, conc)
	for i := range sessions {
		s, err := Open(addr, path)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		for range 50 { // warm: buffers grown, pools filled
			if _, err := s.Call(method, params); err != nil {
				b.Fatal(err)
			}
		}
		sessions[i] = s
	}
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	if conc == 1 {
		for b.Loop() {
			if _, err := sessions[0].Call(method, params); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		var wg sync.WaitGroup
		errc := make(chan error, conc)
		per, extra := b.N/conc, b.N%conc
		for i, s := range sessions {
			n := per
			if i < extra {
				n++
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range n {
					if _, err := s.Call(method, params); err != nil {
						errc <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errc)
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU time (user and system) the process has used, in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

var (
	testServerOnce sync.Once
	testServerBin  string
	testServerErr  error
)

// TestServer builds internal/testing/testserver once per process (go build's cache makes
// that quick) and returns the binary's path.
func TestServer(b testing.TB) string {
	testServerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "benchwire-")
		if err != nil {
			testServerErr = err
			return
		}
		testServerBin = filepath.Join(dir, "testserver")
		cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", testServerBin,
			"github.com/mcp-proxy/mcp-proxy/internal/testing/testserver")
		if out, err := cmd.CombinedOutput(); err != nil {
			testServerErr = fmt.Errorf("building the test server: %v\n%s", err, out)
		}
	})
	if testServerErr != nil {
		b.Fatal(testServerErr)
	}
	return testServerBin
}

// HTTPTestServer starts the test server (bin) with -fast serving Streamable HTTP on a
// free loopback port and returns its address; it is stopped when the test ends.
func HTTPTestServer(b testing.TB, bin string) string {
	addrFile := filepath.Join(b.TempDir(), "upstream.addr")
	cmd := exec.Command(bin, "-fast", "-http", "127.0.0.1:0", "-http-addr-file", addrFile)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		t := time.AfterFunc(5*time.Second, func() { cmd.Process.Kill() })
		cmd.Wait()
		t.Stop()
	})
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if a, err := os.ReadFile(addrFile); err == nil && len(bytes.TrimSpace(a)) > 0 {
			return string(bytes.TrimSpace(a))
		}
	}
	b.Fatal("the HTTP test server did not write its address in 30s")
	return ""
}
