//go:build !linux

package transport

import "errors"

// signalThreads is the sandbox tests' "signal:PID", which runs on Linux only.
func signalThreads(string) error { return errors.New("not on this system") }

// sandboxParent is TestSandboxedChildDiesWithProxy's, which runs on Linux only.
func sandboxParent() {}
