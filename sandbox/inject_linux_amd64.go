package sandbox

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// The x86-64 side of injectLoopback.

type archRegs = unix.PtraceRegs

// callCode is "syscall; int3": after the breakpoint the instruction pointer is past it.
var callCode = []byte{0x0f, 0x05, 0xcc}

const (
	trapPC  = 3   // the instruction pointer after the breakpoint, from the code word
	redZone = 128 // the System V ABI's red zone below the stack pointer
	userCS  = 0x33
)

func injectSupported() error { return nil }

func getRegs(pid int, r *archRegs) error { return unix.PtraceGetRegs(pid, r) }
func setRegs(pid int, r *archRegs) error { return unix.PtraceSetRegs(pid, r) }

func regsPC(r *archRegs) uint64 { return r.Rip }
func regsSP(r *archRegs) uint64 { return r.Rsp }

// nativeABI refuses a 32-bit program, whose code segment differs: the instructions
// written are the 64-bit ones.
func nativeABI(r *archRegs) error {
	if r.Cs != userCS {
		return fmt.Errorf("the command is not a 64-bit x86 program (code segment %#x): network \"loopback\" cannot be set up for it", r.Cs)
	}
	return nil
}

// setCall points r at the code word to make system call nr. orig_rax -1 keeps the
// kernel from treating the stop as an interrupted system call to restart.
func setCall(r *archRegs, code, nr uintptr, args []uintptr) {
	var a [6]uint64
	for i, v := range args {
		a[i] = uint64(v)
	}
	r.Rip, r.Rax, r.Orig_rax = uint64(code), uint64(nr), ^uint64(0)
	r.Rdi, r.Rsi, r.Rdx, r.R10, r.R8, r.R9 = a[0], a[1], a[2], a[3], a[4], a[5]
}

func callResult(r *archRegs) uint64 { return r.Rax }
