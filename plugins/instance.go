package plugins

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/hcl/v2"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/mcp-proxy/mcp-proxy/plugins/proto"
	"github.com/mcp-proxy/mcp-proxy/plugins/sdk"
	"github.com/mcp-proxy/mcp-proxy/policy"
)

// errDown is a hook call while the plugin is not running (crashed, restarting).
var errDown = errors.New("the plugin is not running (it is being restarted)")

// errChecksum is a program that does not have the configured sha256.
var errChecksum = errors.New("checksum mismatch")

// windowSize is the gRPC flow-control window of a plugin connection, both ways.
const windowSize = sdk.WindowSize

// hungAfter consecutive timeouts, a plugin is taken for hung and restarted.
const hungAfter = 3

// Restart backoff of a plugin that exited.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 10 * time.Second
	// watchEvery is how often a supervisor looks whether its plugin process exited
	// (go-plugin has no exit notification); a failed call looks at once.
	watchEvery = 250 * time.Millisecond
)

// hooks is the set of hooks a plugin implements.
type hooks uint8

const (
	hookBefore hooks = 1 << iota
	hookAfter
	hookCatalogue
	hookRank
)

// instance is one running plugin: its process, its client, and the supervisor that
// restarts it.
type instance struct {
	spec Spec
	log  zerolog.Logger
	sel  *policy.Selector

	// Set by the first start, fixed afterwards.
	name, version string
	described     hooks  // the hooks the plugin described
	hooks         hooks  // those its configuration uses: the ones called
	config        []byte // the decoded config block, for Configure after every restart

	conn atomic.Pointer[live] // nil while the plugin is down

	mu       sync.Mutex // guards proc and closed
	proc     *proc      // the running process; nil while down
	closed   bool
	kick     chan struct{} // wakes the supervisor: a call failed
	done     chan struct{} // closed by close
	stopped  chan struct{} // closed when the supervisor returns
	timeouts atomic.Int32  // consecutive hook timeouts
	restarts atomic.Int64

	onRestart func()    // after a restart succeeded (the catalogue is presented again)
	pool      *pool     // runs the crossings; the host's, shared by its plugins
	observer  Observer  // told about each hook call; nil: nobody
	calls     *inflight // the host's count of calls in hooks
}

func newInstance(spec Spec, log zerolog.Logger) (*instance, error) {
	if spec.Timeout <= 0 {
		spec.Timeout = DefaultTimeout
	}
	if spec.StartTimeout <= 0 {
		spec.StartTimeout = DefaultStartTimeout
	}
	sel, err := policy.NewSelector("plugin "+spec.Name, spec.Match)
	if err != nil {
		return nil, err
	}
	return &instance{spec: spec, log: log.With().Str("plugin", spec.Name).Logger(), sel: sel, pool: newPool(), calls: newInflight(),
		kick: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}, nil
}

// program resolves the plugin's program as exec would.
func (in *instance) program() (string, error) {
	if len(in.spec.Command) == 0 || in.spec.Command[0] == "" {
		return "", errors.New("the plugin has no command")
	}
	p := in.spec.Command[0]
	if !filepath.IsAbs(p) && filepath.Base(p) != p && in.spec.Dir != "" {
		p = filepath.Join(in.spec.Dir, p) // ./bin/plugin is relative to the config file
	}
	return exec.LookPath(p)
}

// checksum verifies the program against Spec.SHA256 with a message that says what to
// do; go-plugin checks it again when it starts the process.
func (in *instance) checksum(path string) ([]byte, error) {
	if in.spec.SHA256 == "" {
		return nil, nil
	}
	want, err := hex.DecodeString(in.spec.SHA256)
	if err != nil || len(want) != sha256.Size {
		return nil, fmt.Errorf("%w: sha256 %q is not 64 hex digits", errChecksum, in.spec.SHA256)
	}
	got, err := sumFile(path)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(got, want) {
		return nil, fmt.Errorf("%w: %s has sha256 %x, not the configured %s: refusing to start it (rebuilt or replaced? update sha256 only if you trust the new program)",
			errChecksum, path, got, in.spec.SHA256)
	}
	return want, nil
}

// proc is one plugin process: its go-plugin client, its pid, the directory of its
// socket, and where its output goes.
type proc struct {
	client *goplugin.Client
	pid    int
	dir    string
	out    []*pluginLines
}

// stop stops the process and what it started, and removes its socket's directory: after
// client.Kill the process has exited (go-plugin waited for it), whether it was still
// running, crashed or was killed.
func (p *proc) stop() {
	if p == nil {
		return
	}
	p.client.Kill()
	killGroup(p.pid)
	_ = os.RemoveAll(p.dir)
	for _, w := range p.out {
		w.Flush()
	}
}

// launch starts the process and returns it; nothing of the instance changes.
func (in *instance) launch(ctx context.Context) (*proc, pb.PluginClient, error) {
	path, err := in.program()
	if err != nil {
		return nil, nil, fmt.Errorf("finding the plugin program: %w", err)
	}
	sum, err := in.checksum(path)
	if err != nil {
		return nil, nil, err
	}
	dir, err := socketDir()
	if err != nil {
		return nil, nil, fmt.Errorf("starting the plugin: %w", err)
	}
	cmd := exec.Command(path, in.spec.Command[1:]...)
	cmd.Dir = in.spec.Dir
	cmd.Env = os.Environ()
	// One P unless the block says otherwise: a Go plugin waits on the proxy between
	// hooks, and a second P only spins looking for work (a third less CPU per crossing
	// on one P, measured with make load-plugin). A CPU-heavy plugin under concurrent
	// calls can be given more with env = { GOMAXPROCS = "2" }.
	cmd.Env = append(cmd.Env, "GOMAXPROCS=1")
	for k, v := range in.spec.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	// The plugin's socket in a directory of its own, removed when the process is gone
	// (go-plugin's plugin side would make it in TMPDIR and leave it there when it does
	// not exit by itself: crashed, killed, hung). Last, so that nothing overrides it.
	cmd.Env = append(cmd.Env, goplugin.EnvUnixSocketDir+"="+dir)
	isolate(cmd)
	out := []*pluginLines{newPluginLines(in.log), newPluginLines(in.log), newPluginLines(in.log.With().Str("stream", "stdout").Logger())}
	cfg := &goplugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		Plugins:          goplugin.PluginSet{sdk.PluginKey: &sdk.GRPC{}},
		Cmd:              cmd,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		// Not Managed: go-plugin's managed list is global and never forgets a client, so
		// a plugin restarted for days would grow it without end; Host.Close stops every
		// plugin, as CleanupClients would.
		Managed:      false,
		StartTimeout: in.spec.StartTimeout,
		// The environment is cmd.Env as made above: go-plugin would otherwise append
		// the proxy's environment again after it, and exec takes the last value of a
		// variable, so the block's env could not override the proxy's.
		SkipHostEnv: true,
		// go-plugin's own messages; the plugin's output goes to out, parsed there (the
		// logger go-plugin would parse stderr with is off: see hclogger.stderr).
		Logger:     newHCLogger(in.log, path),
		Stderr:     out[0],
		SyncStderr: out[1],
		SyncStdout: out[2],
		// Fixed flow-control windows: gRPC's bandwidth estimator would otherwise ping
		// on received data, a write and a read more on each side per crossing.
		GRPCDialOptions: []grpc.DialOption{grpc.WithInitialWindowSize(windowSize), grpc.WithInitialConnWindowSize(windowSize)},
	}
	if sum != nil {
		cfg.SecureConfig = &goplugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
	}
	client := goplugin.NewClient(cfg)
	p := &proc{client: client, dir: dir, out: out}
	fail := func(err error) (*proc, pb.PluginClient, error) {
		if rc := client.ReattachConfig(); rc != nil {
			p.pid = rc.Pid
		}
		p.stop()
		return nil, nil, err
	}
	rpc, err := client.Client()
	if err != nil {
		return fail(fmt.Errorf("starting the plugin: %w", err))
	}
	raw, err := rpc.Dispense(sdk.PluginKey)
	if err != nil {
		return fail(fmt.Errorf("connecting to the plugin: %w", err))
	}
	pc, ok := raw.(pb.PluginClient)
	if !ok {
		return fail(fmt.Errorf("connecting to the plugin: unexpected client %T", raw))
	}
	if rc := client.ReattachConfig(); rc != nil {
		p.pid = rc.Pid
	}
	return p, pc, nil
}

// start starts the plugin for the first time: launch, Describe, decode the config block
// against the described schema, Configure. Problems are diagnostics at the block's
// attributes; on any error nothing is left running.
func (in *instance) start(ctx context.Context) hcl.Diagnostics {
	ctx, cancel := context.WithTimeout(ctx, in.spec.StartTimeout)
	defer cancel()
	diag := func(attr, summary string, err error) hcl.Diagnostics {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: summary,
			Detail: fmt.Sprintf("plugin %q: %v", in.spec.Name, err), Subject: in.spec.rangeOf(attr)}}
	}
	p, pc, err := in.launch(ctx)
	if err != nil {
		attr := "command"
		if errors.Is(err, errChecksum) || errors.Is(err, goplugin.ErrChecksumsDoNotMatch) {
			attr = "sha256"
		}
		return diag(attr, "Plugin did not start", err)
	}
	stop := p.stop
	desc, err := pc.Describe(ctx, &pb.DescribeRequest{ProtocolVersion: sdk.ProtocolVersion})
	if err != nil {
		stop()
		return diag("command", "Plugin did not describe itself", err)
	}
	sch, hs, err := checkDescription(desc)
	if err != nil {
		stop()
		return diag("command", "Plugin described itself wrongly", err)
	}
	js, ranges, diags := sch.decode(in.spec.Config, in.spec.EvalContext)
	if diags.HasErrors() {
		stop()
		return diags
	}
	cresp, err := pc.Configure(ctx, &pb.ConfigureRequest{Instance: in.spec.Name, Config: js})
	if err != nil {
		stop()
		return append(diags, diag("config", "Plugin could not be configured", err)...)
	}
	for _, d := range cresp.Diagnostics {
		sev := hcl.DiagError
		if d.Warning {
			sev = hcl.DiagWarning
		}
		subject := in.spec.rangeOf("config")
		if r, ok := ranges[d.Attribute]; ok {
			subject = &r
		}
		diags = append(diags, &hcl.Diagnostic{Severity: sev, Summary: d.Summary,
			Detail: fmt.Sprintf("plugin %q: %s", in.spec.Name, d.Detail), Subject: subject})
	}
	if diags.HasErrors() {
		stop()
		return diags
	}
	if len(cresp.Hooks) > 0 {
		used, err := hookSet(cresp.Hooks)
		if err != nil || used&^hs != 0 {
			stop()
			return append(diags, diag("config", "Plugin configured itself wrongly", fmt.Errorf("the hooks its configuration uses (%v) are not among those it described", cresp.Hooks))...)
		}
		hs = used
	}
	if in.spec.SHA256 == "" {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Plugin not verified",
			Detail:  fmt.Sprintf("plugin %q has no sha256: its program runs unverified. Set sha256 = %q to refuse a replaced program.", in.spec.Name, fileSum(in)),
			Subject: in.spec.rangeOf("command")})
	}
	l, err := openHooks(pc)
	if err != nil {
		stop()
		return append(diags, diag("command", "Plugin did not open its hook stream", err)...)
	}
	in.name, in.version, in.hooks, in.config = desc.Name, desc.Version, hs, js
	in.described, _ = hookSet(desc.Hooks)
	in.mu.Lock()
	in.proc = p
	in.mu.Unlock()
	in.conn.Store(l)
	in.log.Info().Str("plugin_name", desc.Name).Str("plugin_version", desc.Version).Int("pid", p.pid).
		Strs("hooks", hookNames(hs)).Msg("plugin started")
	return diags
}

// checkDescription refuses a description the proxy cannot use.
func checkDescription(d *pb.DescribeResponse) (*schema, hooks, error) {
	if d.Name == "" {
		return nil, 0, errors.New("its description has no name")
	}
	hs, err := hookSet(d.Hooks)
	if err != nil {
		return nil, 0, err
	}
	if hs == 0 {
		return nil, 0, errors.New("it implements no hook")
	}
	s, err := compileSchema(d.ConfigSchema)
	if err != nil {
		return nil, 0, err
	}
	return s, hs, nil
}

func hookSet(list []pb.Hook) (hooks, error) {
	var hs hooks
	for _, h := range list {
		switch h {
		case pb.Hook_HOOK_BEFORE:
			hs |= hookBefore
		case pb.Hook_HOOK_AFTER:
			hs |= hookAfter
		case pb.Hook_HOOK_CATALOGUE:
			hs |= hookCatalogue
		case pb.Hook_HOOK_RANK:
			hs |= hookRank
		default:
			return 0, fmt.Errorf("it names hook %v, which this proxy does not know (a newer plugin?)", h)
		}
	}
	return hs, nil
}

func hookNames(hs hooks) []string {
	var out []string
	for _, h := range []struct {
		h    hooks
		name string
	}{{hookBefore, "before"}, {hookAfter, "after"}, {hookCatalogue, "catalogue"}, {hookRank, "rank"}} {
		if hs&h.h != 0 {
			out = append(out, h.name)
		}
	}
	return out
}

// supervise restarts the plugin when its process exits or hangs, with backoff, until
// close. It is started once the first start succeeded.
func (in *instance) supervise() {
	defer close(in.stopped)
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	for {
		select {
		case <-in.done:
			return
		case <-t.C:
		case <-in.kick:
		}
		in.mu.Lock()
		p := in.proc
		in.mu.Unlock()
		hung := in.timeouts.Load() >= hungAfter
		if p != nil && !p.client.Exited() && !hung {
			continue
		}
		if l := in.conn.Swap(nil); l != nil {
			l.close()
		}
		if hung {
			in.log.Warn().Dur("timeout", in.spec.Timeout).Int("consecutive_timeouts", hungAfter).
				Msg("plugin does not answer; killing and restarting it")
		} else {
			in.log.Warn().Msg("plugin process exited; restarting it")
		}
		in.stopProcess()
		if !in.restart() {
			return
		}
	}
}

// restart starts the plugin again with backoff until it runs or the instance closes.
func (in *instance) restart() bool {
	backoff := minBackoff
	for {
		select {
		case <-in.done:
			return false
		case <-time.After(backoff):
		}
		err := in.relaunch()
		if err == nil {
			in.timeouts.Store(0)
			in.restarts.Add(1)
			in.log.Info().Int64("restarts", in.restarts.Load()).Msg("plugin restarted")
			if in.onRestart != nil {
				in.onRestart()
			}
			return true
		}
		in.log.Error().Err(err).Dur("retry_in", min(backoff*2, maxBackoff)).Msg("plugin restart failed")
		backoff = min(backoff*2, maxBackoff)
	}
}

// relaunch starts the process again and configures it as the first start did.
func (in *instance) relaunch() error {
	ctx, cancel := context.WithTimeout(context.Background(), in.spec.StartTimeout)
	defer cancel()
	p, pc, err := in.launch(ctx)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		p.stop()
		return err
	}
	desc, err := pc.Describe(ctx, &pb.DescribeRequest{ProtocolVersion: sdk.ProtocolVersion})
	if err != nil {
		return fail(fmt.Errorf("describing: %w", err))
	}
	if _, hs, err := checkDescription(desc); err != nil || hs != in.described || desc.Name != in.name {
		return fail(fmt.Errorf("the plugin describes itself differently than when the proxy started (%s %v)", desc.Name, err))
	}
	cresp, err := pc.Configure(ctx, &pb.ConfigureRequest{Instance: in.spec.Name, Config: in.config})
	if err != nil {
		return fail(fmt.Errorf("configuring: %w", err))
	}
	for _, d := range cresp.Diagnostics {
		if !d.Warning {
			return fail(fmt.Errorf("configuring: %s: %s", d.Summary, d.Detail))
		}
	}
	l, err := openHooks(pc)
	if err != nil {
		return fail(fmt.Errorf("opening the hook stream: %w", err))
	}
	in.mu.Lock()
	if in.closed {
		in.mu.Unlock()
		l.close()
		return fail(errors.New("closed"))
	}
	in.proc = p
	in.mu.Unlock()
	in.conn.Store(l)
	return nil
}

// stopProcess stops the current process, if any, and what it started.
func (in *instance) stopProcess() {
	if l := in.conn.Swap(nil); l != nil {
		l.close()
	}
	in.mu.Lock()
	p := in.proc
	in.proc = nil
	in.mu.Unlock()
	p.stop()
}

// close stops the supervisor and the plugin; safe twice and after a failed start.
func (in *instance) close() {
	in.mu.Lock()
	if in.closed {
		in.mu.Unlock()
		return
	}
	in.closed = true
	in.mu.Unlock()
	close(in.done)
	in.stopProcess()
}

// invoke calls a hook with the plugin's timeout, and notes what its failure says about
// the plugin (exited: look now; timed out again and again: hung).
func invoke[R any](ctx context.Context, in *instance, call func(context.Context, *live) (R, error)) (R, error) {
	var zero R
	l := in.conn.Load()
	if l == nil {
		return zero, errDown
	}
	cctx, cancel := context.WithTimeout(ctx, in.spec.Timeout)
	defer cancel()
	r, err := call(cctx, l)
	if err == nil {
		in.timeouts.Store(0)
		return r, nil
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded:
		if ctx.Err() == nil {
			in.timeouts.Add(1)
			err = fmt.Errorf("the plugin did not answer within %v", in.spec.Timeout)
			in.wake()
		}
	case codes.Unavailable, codes.Canceled:
		in.wake()
	}
	return zero, err
}

func (in *instance) wake() {
	select {
	case in.kick <- struct{}{}:
	default:
	}
}

// fileSum is the program's sha256 in hex, for the warning that suggests setting it.
func fileSum(in *instance) string {
	path, err := in.program()
	if err != nil {
		return "…"
	}
	sum, err := sumFile(path)
	if err != nil {
		return "…"
	}
	return hex.EncodeToString(sum)
}

// sumFile is the SHA-256 of a file's contents.
func sumFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the plugin program: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("reading the plugin program: %w", err)
	}
	return h.Sum(nil), nil
}
