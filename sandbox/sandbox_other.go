//go:build !linux

package sandbox

import (
	"errors"
	"os/exec"
)

// errUnsupported is every answer off Linux: there is no Landlock to enforce a policy with.
var errUnsupported = errors.New("sandbox cannot be enforced: sandboxed upstreams need Linux (Landlock)")

// Support is what this machine offers for sandboxing: nothing.
type Support struct {
	ABI         int
	ABIErr      error
	NetNS       bool
	NetNSErr    error
	Thread      bool
	ThreadErr   error
	ThreadNetNS bool
}

// Probe reports that nothing is supported.
func Probe() Support {
	return Support{ABIErr: errUnsupported, NetNSErr: errUnsupported, ThreadErr: errUnsupported}
}

// Check refuses every policy.
func Check(p *Policy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	return errUnsupported
}

// Explain refuses every policy.
func Explain(p *Policy, command []string, env []string) ([]string, error) { return nil, Check(p) }

// Launch is never made off Linux.
type Launch struct{}

// Prepare refuses every policy.
func Prepare(p *Policy, cmd *exec.Cmd, name string) (*Launch, error) { return nil, Check(p) }

// Start is never called.
func (l *Launch) Start(*exec.Cmd) error { return errUnsupported }

// Cleanup does nothing (on a nil Launch too).
func (l *Launch) Cleanup() {}
