package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"syscall"
)

// startCPUProfile writes a CPU profile of `run` to path until stop is called; set
// MCP_PROXY_CPUPROFILE=path to use it (for example under the load tool).
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting CPU profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// blockingFile returns f switched to blocking I/O when it is a pipe-like *os.File; other
// readers and writers are returned as they are.
func blockingFile[T any](f T) T {
	of, ok := any(f).(*os.File)
	if !ok {
		return f
	}
	// Fd puts the descriptor in blocking mode; a duplicate gives a File of our own whose
	// reads and writes then block on their thread instead of going through the poller.
	fd, err := syscall.Dup(int(of.Fd()))
	if err != nil {
		return f
	}
	syscall.CloseOnExec(fd)
	nf := os.NewFile(uintptr(fd), of.Name())
	if v, ok := any(nf).(T); ok {
		return v
	}
	return f
}
