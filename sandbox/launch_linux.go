package sandbox

import (
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// plan computes what a start applies.
func plan(p *Policy, path string, args, env []string) (*launchSpec, error) {
	if err := Check(p); err != nil {
		return nil, err
	}
	s := Probe()
	spec := &launchSpec{Path: path, Args: args, HandledFS: fsRights(s.ABI)}
	for _, r := range p.Read {
		spec.Rules = append(spec.Rules, Rule{Path: r, Access: accessRead, Why: "read"})
	}
	for _, w := range p.Write {
		spec.Rules = append(spec.Rules, Rule{Path: w, Access: fsRights(s.ABI), Why: "write"})
	}
	spec.Rules = dedupe(append(spec.Rules, runtimeRules(path, args, env, p.mode())...))
	switch p.mode() {
	case NetworkNone:
		spec.HandledNet = netTCPV4
	case NetworkPorts:
		spec.HandledNet = netTCPV4
		spec.Ports = p.Ports
	case NetworkLoopback:
		spec.Loopback = true
	}
	if s.ABI >= 6 {
		spec.Scoped = scopeV6
	}
	return spec, nil
}

// offlineNpm reports whether npm (npx) runs without a network and without the user's
// say on npm_config_offline: it is then told to use its cache only, since it would
// otherwise retry the registry for minutes before it runs anything.
func offlineNpm(p *Policy, path string, args, env []string) bool {
	if m := p.mode(); m != NetworkNone && m != NetworkLoopback {
		return false
	}
	if lookupEnv(env, "npm_config_offline") != "" || lookupEnv(env, "NPM_CONFIG_OFFLINE") != "" {
		return false
	}
	return usesNpm(programChain(path, args, env))
}

// Launch is one sandboxed start: Prepare plans it, Start starts the command under it,
// Cleanup removes what it made once the child has exited.
type Launch struct {
	spec   *launchSpec
	thread bool // a thread start; else through the launcher
	ns     bool // user and network namespaces of its own
	tmp    *privateTmp

	life *lifeline // kills the child's group when the proxy ends

	status, child *os.File // launcher start: its status pipe (the proxy's end, the launcher's)

	cleanOnce sync.Once
}

// Prepare plans a start of cmd (made by exec.Command, with Env and SysProcAttr set; its
// Pdeathsig and ExtraFiles are the sandbox's to set) under p, and rewrites cmd for it:
// its environment gets a private TMPDIR (named after name, the upstream's) and, for npm
// without a network, npm_config_offline; a start through the launcher runs the launcher.
func Prepare(p *Policy, cmd *exec.Cmd, name string) (*Launch, error) {
	if cmd.Err != nil {
		return nil, cmd.Err
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	tmp, err := makePrivateTmp(name)
	if err != nil {
		return nil, err
	}
	l := &Launch{tmp: tmp}
	env = setEnv(env, "TMPDIR", tmp.path)
	if offlineNpm(p, cmd.Path, cmd.Args, env) {
		env = setEnv(env, "npm_config_offline", "true")
	}
	spec, err := plan(p, cmd.Path, cmd.Args, env)
	if err != nil {
		l.Cleanup()
		return nil, err
	}
	spec.Rules = append(spec.Rules, Rule{Path: tmp.path, Access: spec.HandledFS, Why: "TMPDIR"})
	l.spec, l.ns = spec, netNS(p)
	l.thread, _ = startsOnThread(p)
	cmd.Env = env
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if l.life, err = newLifeline(); err != nil {
		l.Cleanup()
		return nil, err
	}
	cmd.ExtraFiles = []*os.File{l.life.r} // the child's fd 3
	if l.thread {
		if l.ns {
			threadNamespaces(cmd.SysProcAttr, spec.Loopback)
		}
		return l, nil
	}
	if l.status, l.child, err = throughLauncher(cmd, spec, l.ns); err != nil {
		l.Cleanup()
		return nil, err
	}
	return l, nil
}

// Start starts cmd as Prepare planned. nil means the command runs (or, for a thread
// start, will run in a moment) under the sandbox. On an error nothing of the command has
// run; when cmd.Process is set a child was created, which is dead or dying: the caller
// kills its group and reaps it.
func (l *Launch) Start(cmd *exec.Cmd) error {
	if l.thread {
		return startOnThread(cmd, l.spec, l.life, l.ns)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	err := l.life.arm(cmd.Process.Pid)
	if verr := launcherVerdict(l.status, l.child); err == nil {
		err = verr
	}
	l.status, l.child = nil, nil
	return err
}

// Cleanup removes the private TMPDIR and closes what the start still holds; call it once
// the child has exited, or when the start failed. Safe on a nil Launch and twice.
func (l *Launch) Cleanup() {
	if l == nil {
		return
	}
	l.cleanOnce.Do(func() {
		if l.life != nil {
			l.life.Close()
		}
		if l.status != nil {
			l.status.Close()
			l.child.Close()
		}
		l.tmp.remove()
	})
}
