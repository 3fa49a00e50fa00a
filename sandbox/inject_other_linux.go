//go:build linux && !amd64

package sandbox

import (
	"fmt"
	"runtime"
)

// Elsewhere than on x86-64 the proxy does not inject system calls: a "loopback" child
// starts through the launcher. These satisfy injectLoopback's callers and are never
// reached past injectSupported.

type archRegs struct{}

var callCode []byte

const (
	trapPC  = 0
	redZone = 0
)

func injectSupported() error {
	return fmt.Errorf("bringing up lo from a restricted thread is implemented for amd64 only, not %s", runtime.GOARCH)
}

func getRegs(int, *archRegs) error                   { return injectSupported() }
func setRegs(int, *archRegs) error                   { return injectSupported() }
func regsPC(*archRegs) uint64                        { return 0 }
func regsSP(*archRegs) uint64                        { return 0 }
func nativeABI(*archRegs) error                      { return injectSupported() }
func setCall(*archRegs, uintptr, uintptr, []uintptr) {}
func callResult(*archRegs) uint64                    { return 0 }
