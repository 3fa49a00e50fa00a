package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcp-proxy/mcp-proxy/admin"
	"github.com/mcp-proxy/mcp-proxy/auth"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/plugins"
	"github.com/mcp-proxy/mcp-proxy/policy"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/server"
)

// Reloading the configuration while the proxy serves: on SIGHUP, on POST /reload of the
// admin listener (`mcp-proxy reload`), and when the file changes with proxy { watch =
// true }. The file is parsed and checked first; on any error the running configuration
// stays and the diagnostics are logged at file:line. Otherwise only the difference is
// applied:
//
//   - upstreams: added ones start; removed ones drain (calls in flight are answered, up
//     to the upstream's timeout) and stop; changed ones are replaced make-before-break
//     (the new one starts, then takes over, then the old one drains); a change of
//     filters only rebuilds the catalogue. Unchanged upstreams and every client session
//     stay as they are, and clients get one list_changed per kind whose list changed;
//   - the policy (rules, limits, audit) and the plugins switch between two calls: a call
//     keeps the chain it started with. Rate-limit buckets keep their tokens (a changed
//     limit takes the new rate and burst). A new plugin set starts before anything
//     switches: a plugin that cannot start rejects the reload;
//   - the auth block's keys and JWT settings apply from the next HTTP request.
//
// What cannot change live (the listen block, the admin and telemetry blocks, the proxy
// block's names and paging) is reported as needing a restart, and the rest applies.

// servePaths tells the engine how to move the HTTP front end's endpoint paths.
func (e *engine) servePaths(set func(map[string]string)) {
	e.mu.Lock()
	e.paths = set
	e.mu.Unlock()
}

// attach tells the engine what a reload needs to know of the proxy it runs in: the
// configuration file, the front end's authenticator and listen block, and the admin
// listener (nil for none).
func (e *engine) attach(source string, srv *server.Server, authn *auth.Switch, listen config.Listen, adm *admin.Server) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.srv, e.auth, e.listen, e.admin = srv, authn, listen, adm
	e.source = source
}

// reload applies the difference between the running configuration and next, or, when
// next is nil, the configuration file read again; it never fails the proxy: the outcome
// says what happened, and is logged, counted and shown by the status.
func (e *engine) reload(ctx context.Context, trigger string, next *config.Config) *admin.Reload {
	e.mu.Lock()
	defer e.mu.Unlock()
	start := time.Now()
	out := &admin.Reload{Trigger: trigger, At: start}
	defer func() {
		out.TookMs = float64(time.Since(start).Microseconds()) / 1000
		e.report(out)
	}()
	if e.closed {
		out.Outcome, out.Errors = admin.ReloadRejected, []string{"the proxy is shutting down"}
		return out
	}
	var diags bytes.Buffer
	var err error
	switch {
	case next != nil:
		// A configuration made in memory gets the checks a file gets.
		d := checkConfig(next)
		fmt.Fprint(&diags, config.FormatDiagnostics(d))
		if d.HasErrors() {
			err = errors.New("invalid configuration")
		}
	case e.source == "":
		err = errors.New("no configuration file to read again: the proxy was built from a configuration in memory")
	default:
		next, err = loadConfig(e.source, &diags)
		if sum, ok := fileSum(e.source); ok {
			out.SHA256 = sum
		}
	}
	if err == nil {
		next, err = withOwn(next, e.own)
	}
	if err != nil {
		out.Outcome = admin.ReloadRejected
		for _, l := range strings.Split(strings.TrimSpace(diags.String()), "\n") {
			if l != "" && !strings.Contains(l, ": warning: ") {
				out.Errors = append(out.Errors, l)
			}
		}
		if len(out.Errors) == 0 {
			out.Errors = []string{err.Error()}
		}
		return out
	}
	for _, l := range strings.Split(strings.TrimSpace(diags.String()), "\n") {
		if l != "" {
			e.log.Warn().Str("config", e.source).Msg(l)
		}
	}
	cur := e.cfg
	out.RestartRequired = e.restartRequired(cur, next)

	// What can fail is made first, and nothing switches until all of it has.
	var (
		host     *plugins.Host
		newHost  bool
		chain    = e.chain
		newChain bool
		authn    *auth.Authenticator
		undo     []func()
		fail     = func(what string, err error) *admin.Reload {
			for _, f := range undo {
				f()
			}
			out.Outcome, out.Errors = admin.ReloadRejected, append(out.Errors, fmt.Sprintf("%s: %v", what, err))
			return out
		}
		running = *next // what runs after this reload: next, but for what needs a restart
	)
	if !pluginsEqual(cur, next) {
		h, err := startPlugins(ctx, next, e.r, e.log, e.obs)
		if err != nil {
			return fail("plugins", err)
		}
		host, newHost = h, true
		if h != nil {
			undo = append(undo, func() { h.Close() })
		}
		out.Changes = append(out.Changes, "plugins")
	}
	if !policyEqual(cur, next) {
		c, err := policy.BuildWith(next, e.log, policy.BuildOptions{Store: e.store, Previous: e.chain})
		if err != nil {
			return fail("policy", err)
		}
		chain, newChain = c, true
		if c != nil {
			undo = append(undo, func() { c.Close() })
		}
		out.Changes = append(out.Changes, "policy")
	}
	if !config.Equal(cur.Auth, next.Auth, cur, next) {
		switch {
		case e.auth == nil || next.Auth == nil:
			// The front end was built with or without authentication: that is its shape.
			out.RestartRequired = append(out.RestartRequired, "auth (added or removed)")
			running.Auth = cur.Auth
		default:
			a, err := newAuthenticator(next, e.listen, e.log)
			if err != nil {
				return fail("auth", err)
			}
			authn = a
			undo = append(undo, a.Close)
			out.Changes = append(out.Changes, "auth")
		}
	}
	endpointsChanged := !endpointsEqual(cur, next)
	if endpointsChanged {
		if err := e.checkServedEndpoint(next); err != nil {
			return fail("endpoints", err)
		}
		if err := router.CheckEndpoints(endpointsOf(next, nil)); err != nil {
			return fail("endpoints", err)
		}
	}
	applyTrust, trustChanges, err := e.nextTrust(cur, next)
	if err != nil {
		return fail("pinning", err)
	}
	change, described, gates, err := e.upstreamChange(cur, next)
	if err != nil {
		return fail("upstreams", err)
	}
	if len(change.Add) > 0 || len(change.Remove) > 0 || len(change.Filters) > 0 || !slices.Equal(change.Order, enabledNames(cur)) {
		retired, err := e.r.Reconfigure(ctx, change)
		if err != nil {
			for _, m := range change.Add {
				m.Up.Close()
			}
			return fail("upstreams", err)
		}
		out.Changes = append(out.Changes, described...)
		e.retireUpstreams(cur, retired)
		for name, g := range gates {
			e.gates[name] = g
		}
		if m := e.obs.metricsOrNil(); m != nil {
			for _, name := range change.Remove {
				m.ForgetUpstream(name)
				delete(e.gates, name)
			}
			for _, mem := range change.Add {
				m.Upstreams(mem.Up.Name())
			}
		}
	}

	// Switch, between two calls.
	if endpointsChanged || (newHost && len(next.Endpoints) > 0) {
		h := e.host
		if newHost {
			h = host
		}
		if err := e.r.SetEndpoints(endpointsOf(next, h)); err != nil { // checked above: not expected
			e.log.Error().Err(err).Msg("applying the endpoints of a reload; the previous ones stay")
		}
		if e.paths != nil {
			e.paths(endpointPaths(next))
		}
		out.Changes = append(out.Changes, endpointChanges(cur, next)...)
	}
	if newChain || newHost {
		oldChain, oldHost := e.chain, e.host
		e.chain = chain
		if newHost {
			e.host = host
		}
		e.install()
		if newChain {
			var g router.Guard
			if chain != nil {
				g = chain
			}
			e.r.Reguard(g, changedKinds(cur, next)...)
		}
		if newHost {
			var p router.Presenter
			if host != nil {
				p = host.Presenter()
			}
			e.r.SetPresenter(p)
		}
		// Calls that started with the old chain finish with it: it is closed once
		// they cannot be running any more (the longest timeout of a call).
		grace := longestCall(cur)
		if newHost && oldHost != nil {
			oldHost.Retire(grace) // stops once the calls in its hooks are answered
		}
		e.retire(grace, func() {
			if newHost && oldHost != nil {
				if err := oldHost.Close(); err != nil {
					e.log.Warn().Err(err).Msg("stopping the plugins a reload replaced")
				}
			}
			if newChain && oldChain != nil {
				if err := oldChain.Close(); err != nil {
					e.log.Warn().Err(err).Msg("closing the audit trail a reload replaced")
				}
			}
		})
	}
	if authn != nil {
		old := e.auth.Store(authn)
		e.retire(10*time.Second, old.Close) // requests being authenticated by it finish
	}
	running.Listen, running.Admin, running.Telemetry, running.Proxy, running.Cluster = cur.Listen, cur.Admin, cur.Telemetry, cur.Proxy, cur.Cluster
	if applyTrust != nil {
		applyTrust()
		out.Changes = append(out.Changes, trustChanges...)
	}
	copyTrustProxy(&running.Proxy, next.Proxy)
	if running.Proxy.Watch != next.Proxy.Watch {
		running.Proxy.Watch = next.Proxy.Watch
		out.Changes = append(out.Changes, fmt.Sprintf("proxy.watch = %v", next.Proxy.Watch))
		signalWatch(e.watchSet)
	}
	// The front end's live settings (server.Live) apply to what starts from now on.
	copyLiveProxy(&running.Proxy, next.Proxy)
	if was, now := e.liveSettings(cur), e.liveSettings(&running); was != now {
		if e.srv != nil {
			e.srv.Reconfigure(now)
		}
		out.Changes = append(out.Changes, liveChanges(was, now)...)
	}
	required := map[string]bool{}
	for _, uc := range cur.Upstreams {
		required[uc.Name] = uc.Required
	}
	for _, uc := range next.Upstreams {
		if was, ok := required[uc.Name]; ok && was != uc.Required {
			out.Changes = append(out.Changes, fmt.Sprintf("upstream %s: required = %v", uc.Name, uc.Required))
		}
	}
	e.cfg = &running
	if e.creds != nil {
		e.creds.ids.Store(identitiesOf(&running)) // the auth block's keys and issuer apply live
	}
	if len(out.Changes) == 0 {
		out.Outcome = admin.ReloadUnchanged
	} else {
		out.Outcome = admin.ReloadApplied
	}
	return out
}

// report logs, counts and shows a reload's outcome.
func (e *engine) report(out *admin.Reload) {
	ev := e.log.Info()
	if out.Outcome == admin.ReloadRejected {
		ev = e.log.Error()
		for _, l := range out.Errors {
			e.log.Error().Str("config", e.source).Msg(l)
		}
	}
	ev = ev.Str("config", e.source).Str("trigger", out.Trigger).Str("outcome", out.Outcome).
		Float64("took_ms", out.TookMs).Strs("changes", out.Changes)
	if len(out.RestartRequired) > 0 {
		ev = ev.Strs("restart_required", out.RestartRequired)
	}
	switch out.Outcome {
	case admin.ReloadRejected:
		ev.Msg("configuration reload rejected; the running configuration stays")
	case admin.ReloadUnchanged:
		ev.Msg("configuration reloaded: nothing to change")
	default:
		ev.Msg("configuration reloaded")
	}
	if len(out.RestartRequired) > 0 {
		e.log.Warn().Strs("settings", out.RestartRequired).Msg("these settings changed but apply only after a restart")
	}
	if m := e.obs.metricsOrNil(); m != nil {
		m.Reloaded(out.Outcome, out.At)
	}
	if e.admin != nil {
		if out.Outcome == admin.ReloadApplied {
			e.admin.SetUpstreams(upstreamConfigs(e.cfg))
			e.admin.SetConfig(configInfo(e.source, out.At), out)
		} else {
			e.admin.SetLastReload(out)
		}
	}
}

// retire runs f after d, or when the engine closes if that comes first; e.mu is held.
func (e *engine) retire(d time.Duration, f func()) {
	once := new(sync.Once)
	if e.retired == nil {
		e.retired = map[*sync.Once]func(){}
	}
	e.retired[once] = f
	time.AfterFunc(d, func() {
		e.mu.Lock()
		delete(e.retired, once)
		e.mu.Unlock()
		once.Do(f)
	})
}

// retireUpstreams drains the upstreams a reload took out of service, in the
// background: each gets its configured timeout for the calls in flight there.
func (e *engine) retireUpstreams(cur *config.Config, retired *router.Retired) {
	names := retired.Names()
	if len(names) == 0 {
		return
	}
	var wait time.Duration
	for _, n := range names {
		if g := e.gates[n]; g != nil {
			g.shut.Store(true) // its stopping is not its successor's state
		}
		for _, uc := range cur.Upstreams {
			if uc.Name == n {
				wait = max(wait, uc.Timeout)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait+time.Second)
	go func() {
		defer cancel()
		start := time.Now()
		abandoned, err := retired.Drain(ctx)
		ev := e.log.Info()
		if abandoned > 0 || err != nil {
			ev = e.log.Warn().Err(err)
		}
		ev.Strs("upstreams", names).Int64("abandoned_calls", abandoned).Dur("took", time.Since(start)).
			Msg("upstreams removed or replaced by a reload drained and stopped")
	}()
}

// upstreamChange is what the router must do to go from cur's upstreams to next's, and
// those changes in words.
func (e *engine) upstreamChange(cur, next *config.Config) (router.Change, []string, map[string]*gatedObserver, error) {
	ch := router.Change{Order: enabledNames(next), Filters: map[string]*router.Filter{}}
	gates := map[string]*gatedObserver{}
	var said []string
	old := map[string]config.Upstream{}
	for _, uc := range cur.Upstreams {
		if !uc.Disabled {
			old[uc.Name] = uc
		}
	}
	var errs []error
	for _, uc := range next.Upstreams {
		if uc.Disabled {
			continue
		}
		was, ok := old[uc.Name]
		delete(old, uc.Name)
		if ok && sameUpstream(was, uc, cur, next) {
			if !config.Equal(was.Tools, uc.Tools, cur, next) || !config.Equal(was.Prompts, uc.Prompts, cur, next) {
				var f *router.Filter
				if !isZeroFilter(&uc.Tools) || !isZeroFilter(&uc.Prompts) {
					f = &router.Filter{Tools: selectionOf(&uc.Tools), Prompts: selectionOf(&uc.Prompts)}
				}
				ch.Filters[uc.Name] = f
				said = append(said, "upstream filters changed: "+uc.Name)
			}
			continue
		}
		m, gate, err := e.member(next, uc, e.r.Events())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		gates[uc.Name] = gate
		ch.Add = append(ch.Add, m)
		if ok {
			said = append(said, "upstream replaced: "+uc.Name)
		} else {
			said = append(said, "upstream added: "+uc.Name)
		}
	}
	for _, uc := range cur.Upstreams {
		if _, gone := old[uc.Name]; gone {
			ch.Remove = append(ch.Remove, uc.Name)
			said = append(said, "upstream removed: "+uc.Name)
		}
	}
	if len(errs) > 0 {
		for _, m := range ch.Add {
			m.Up.Close()
		}
		return router.Change{}, nil, nil, errors.Join(errs...)
	}
	if len(said) == 0 && !slices.Equal(ch.Order, enabledNames(cur)) {
		said = append(said, "upstream order")
	}
	return ch, said, gates, nil
}

// sameUpstream reports whether an upstream block still configures the same running
// upstream: everything but its filters (which apply without a restart) is equal.
func sameUpstream(a, b config.Upstream, ca, cb *config.Config) bool {
	a.Tools, a.Prompts, b.Tools, b.Prompts = config.Filter{}, config.Filter{}, config.Filter{}, config.Filter{}
	a.Required, b.Required = false, false // readiness only
	a.MaxInFlight, b.MaxInFlight = 0, 0   // the policy's limiter applies it
	a.Screen, b.Screen = "", ""           // the vetter applies it (trust.go)
	a.ScreenAllow, b.ScreenAllow = nil, nil
	return config.Equal(a, b, ca, cb)
}

func enabledNames(cfg *config.Config) []string {
	var out []string
	for _, uc := range cfg.Upstreams {
		if !uc.Disabled {
			out = append(out, uc.Name)
		}
	}
	return out
}

// pluginsEqual reports whether two files configure the same plugins.
func pluginsEqual(a, b *config.Config) bool {
	return config.Equal(a.Plugins, b.Plugins, a, b)
}

// policyEqual reports whether two files configure the same policy chain: rules,
// limits, audit, and the per-upstream caps on calls in flight.
func policyEqual(a, b *config.Config) bool {
	caps := func(c *config.Config) map[string]int {
		m := map[string]int{}
		for _, u := range c.Upstreams {
			if u.MaxInFlight > 0 {
				m[u.Name] = u.MaxInFlight
			}
		}
		return m
	}
	return config.Equal(a.Policy, b.Policy, a, b) && config.Equal(a.Audit, b.Audit, a, b) &&
		config.Equal(caps(a), caps(b), a, b)
}

// changedKinds are the kinds of items whose visibility a policy change may have changed:
// those its changed rules name, or all of them when a rule names none (it applies to
// every kind) or the default changed.
func changedKinds(a, b *config.Config) []router.TargetKind {
	all := []router.TargetKind{router.TargetTool, router.TargetPrompt, router.TargetResource}
	if a.Policy == nil && b.Policy == nil {
		return nil // the audit changed, or a cap on calls in flight: nobody sees more or less
	}
	if a.Policy == nil || b.Policy == nil || a.Policy.DefaultAllow != b.Policy.DefaultAllow {
		return all
	}
	rules := func(c *config.Config, other *config.Config, others []config.Rule) []config.Rule {
		var out []config.Rule
		for _, r := range c.Policy.Rules {
			if !slices.ContainsFunc(others, func(o config.Rule) bool { return config.Equal(r, o, c, other) }) {
				out = append(out, r)
			}
		}
		return out
	}
	changed := append(rules(a, b, b.Policy.Rules), rules(b, a, a.Policy.Rules)...)
	var kinds []router.TargetKind
	add := func(k router.TargetKind) {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	for _, r := range changed {
		if r.Tools == nil && r.Prompts == nil && r.Resources == nil {
			return all
		}
		if r.Tools != nil {
			add(router.TargetTool)
		}
		if r.Prompts != nil {
			add(router.TargetPrompt)
		}
		if r.Resources != nil {
			add(router.TargetResource)
		}
	}
	return kinds
}

// restartRequired names the settings that changed but cannot change while the proxy
// runs.
func (e *engine) restartRequired(a, b *config.Config) []string {
	var out []string
	if !config.Equal(a.Listen, b.Listen, a, b) {
		out = append(out, "listen")
	}
	if !config.Equal(a.Admin, b.Admin, a, b) {
		out = append(out, "admin")
	}
	if !config.Equal(a.Telemetry, b.Telemetry, a, b) {
		out = append(out, "telemetry")
	}
	if !config.Equal(a.Cluster, b.Cluster, a, b) {
		out = append(out, "cluster")
	}
	if !config.Equal(a.TokenStore, b.TokenStore, a, b) {
		out = append(out, "token_store")
	}
	pa, pb := a.Proxy, b.Proxy
	pa.Watch, pb.Watch = false, false
	copyLiveProxy(&pa, pb)
	copyTrustProxy(&pa, pb) // the vetter applies them (trust.go)
	if !config.Equal(pa, pb, a, b) {
		out = append(out, "proxy")
	}
	return out
}

// copyTrustProxy sets the proxy block's pinning and screening settings in dst from src.
func copyTrustProxy(dst *config.Proxy, src config.Proxy) {
	dst.Pin, dst.LockFile, dst.Screen, dst.ScreenAllow = src.Pin, src.LockFile, src.Screen, src.ScreenAllow
}

// copyLiveProxy sets the proxy block's settings that a reload applies (the front end's
// live settings) in dst from src.
func copyLiveProxy(dst *config.Proxy, src config.Proxy) {
	dst.Name, dst.Version, dst.Instructions = src.Name, src.Version, src.Instructions
	dst.ReadyGrace, dst.MaxClientBuffer, dst.MaxClientInFlight = src.ReadyGrace, src.MaxClientBuffer, src.MaxClientInFlight
}

// liveChanges describes what differs between two live settings, for the reload's outcome.
func liveChanges(a, b server.Live) []string {
	var out []string
	if a.Name != b.Name || a.Version != b.Version {
		out = append(out, fmt.Sprintf("proxy: serverInfo %s %s", b.Name, b.Version))
	}
	if a.Instructions != b.Instructions {
		out = append(out, "proxy.instructions")
	}
	if a.ReadyTimeout != b.ReadyTimeout {
		out = append(out, fmt.Sprintf("ready grace %s", max(b.ReadyTimeout, 0)))
	}
	if a.MaxClientBuffer != b.MaxClientBuffer {
		out = append(out, fmt.Sprintf("proxy.max_client_buffer = %d (new sessions)", b.MaxClientBuffer))
	}
	if a.MaxClientInFlight != b.MaxClientInFlight {
		out = append(out, fmt.Sprintf("proxy.max_client_in_flight = %d (new sessions)", b.MaxClientInFlight))
	}
	return out
}

// longestCall is the longest a call can take under cfg: its longest upstream timeout.
func longestCall(cfg *config.Config) time.Duration {
	d := 60 * time.Second
	for _, uc := range cfg.Upstreams {
		d = max(d, uc.Timeout)
	}
	return min(d+5*time.Second, time.Hour)
}

// fileSum is the hex sha256 of a file's bytes.
func fileSum(path string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), true
}

// configInfo is what the status says of the configuration loaded from path at at.
func configInfo(path string, at time.Time) admin.ConfigInfo {
	info := admin.ConfigInfo{Path: path, LoadedAt: at}
	if path == "" { // a configuration made in memory
		return info
	}
	if abs, err := filepath.Abs(path); err == nil {
		info.Path = abs
	}
	info.SHA256, _ = fileSum(path)
	return info
}

// upstreamConfigs are the upstream blocks as the status shows them.
func upstreamConfigs(cfg *config.Config) []admin.UpstreamConfig {
	var ups []admin.UpstreamConfig
	for _, u := range cfg.Upstreams {
		t := admin.TransportStdio
		switch {
		case u.URL == "":
		case u.Transport == config.TransportStreamableHTTP:
			t = admin.TransportStreamableHTTP
		case u.Transport == config.TransportSSE:
			t = admin.TransportSSE
		default:
			t = admin.TransportHTTP
		}
		ups = append(ups, admin.UpstreamConfig{Name: u.Name, Transport: t, Required: u.Required, Disabled: u.Disabled})
	}
	return ups
}

// watchReloads reloads the configuration on SIGHUP when onSignal says so and, with
// proxy { watch = true }, when the file or the lock file of a pinning configuration
// changes (lockwatch.go), until ctx ends or stop is called (stop
// returns once the watcher has). The file is polled only while watch is on: a proxy
// without it has no timer, so an idle one is not woken every second (a reload that turns
// watch on or off tells the goroutine through e.watchSet).
func (e *engine) watchReloads(ctx context.Context, onSignal bool) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var hup chan os.Signal // nil without the signal: never ready
	if onSignal {
		hup = make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if hup != nil {
			defer signal.Stop(hup)
		}
		var tick *time.Ticker
		var tickC <-chan time.Time // nil while watch is off
		defer func() {
			if tick != nil {
				tick.Stop()
			}
		}()
		// follow starts or stops the polling as the running configuration says.
		follow := func() {
			e.mu.Lock()
			watch := e.cfg.Proxy.Watch && e.source != ""
			e.mu.Unlock()
			switch {
			case watch && tick == nil:
				tick = time.NewTicker(watchInterval)
				tickC = tick.C
			case !watch && tick != nil:
				tick.Stop()
				tick, tickC = nil, nil
			}
		}
		var lock lockWatch // the lock file, followed with the configuration (lockwatch.go)
		follow()
		seen, _ := fileSum(e.source)
		lock.reset(e.lockFileToWatch())
		reloaded := func() { // what a reload read is what is seen now
			seen, _ = fileSum(e.source)
			lock.reset(e.lockFileToWatch())
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-e.watchSet:
				follow()
				reloaded()
			case <-hup:
				e.reload(ctx, "signal", nil)
				reloaded()
			case <-tickC:
				if now, ok := fileSum(e.source); ok && now != seen {
					// Editors write in steps: wait until the file has stayed the same a moment.
					time.Sleep(watchSettle)
					if again, ok := fileSum(e.source); !ok || again != now {
						continue
					}
					e.reload(ctx, "watch", nil)
					reloaded()
					continue
				}
				if b := lock.poll(); b != nil {
					time.Sleep(watchSettle)
					if lock.poll() != nil { // still being written: looked at again next tick
						lock.forget()
						continue
					}
					if e.lockInForce(b) {
						continue
					}
					e.log.Info().Str("lock_file", lock.path).Msg("the lock file changed: reloading")
					e.reload(ctx, "watch", nil)
					reloaded()
				}
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// signalWatch tells the watcher that proxy.watch changed, without blocking (ch is
// buffered, capacity 1; nil when nothing watches).
func signalWatch(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// How often the watched file is looked at, and how long it must stay unchanged before it
// is read. Polling the file's hash once a second works on every file system, through the
// renames editors save with and symlinks swapped by Kubernetes ConfigMaps, and sees a
// rewrite a stat's time and size would miss (same second, same length).
var (
	watchInterval = time.Second
	watchSettle   = 200 * time.Millisecond
)
