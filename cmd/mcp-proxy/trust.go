package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/hashicorp/hcl/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/policy"
	"github.com/mcp-proxy/mcp-proxy/trust"
)

// vetterBox holds the engine's vetter; nil when nothing is pinned or screened.
type vetterBox struct{ p atomic.Pointer[trust.Vetter] }

func (b *vetterBox) Load() *trust.Vetter { return b.p.Load() }

// trustSettings is what of the configuration shapes the vetter.
func trustSettings(cfg *config.Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%s", cfg.Proxy.Pin, cfg.Proxy.LockFile, cfg.Proxy.Screen)
	for _, u := range cfg.Upstreams {
		if u.Screen != "" {
			fmt.Fprintf(&b, "|%s=%s", u.Name, u.Screen)
		}
	}
	return b.String()
}

// wantsVetter reports whether the configuration pins or screens anything.
func wantsVetter(cfg *config.Config) bool {
	if cfg.Proxy.Pin != config.PinOff || cfg.Proxy.Screen != config.ScreenOff {
		return true
	}
	for _, u := range cfg.Upstreams {
		if u.Screen != "" && u.Screen != config.ScreenOff {
			return true
		}
	}
	return false
}

// newVetter makes the vetter the configuration asks for, with its lock file read; nil
// when nothing is pinned or screened. A lock file that exists but cannot be read is an
// error (never a silent "nothing approved"); a missing one approves nothing.
func newVetter(cfg *config.Config, log zerolog.Logger, report func(trust.Event)) (*trust.Vetter, error) {
	if !wantsVetter(cfg) {
		return nil, nil
	}
	opts := trust.Options{
		Pin:           trust.PinMode(cfg.Proxy.Pin),
		LockPath:      cfg.Proxy.LockFile,
		DefaultScreen: trust.ScreenMode(cfg.Proxy.Screen),
		Screen:        map[string]trust.ScreenMode{},
		Log:           log,
		Report:        report,
	}
	for _, u := range cfg.Upstreams {
		if u.Screen != "" {
			opts.Screen[u.Name] = trust.ScreenMode(u.Screen)
		}
	}
	v := trust.New(opts)
	if opts.Pin == trust.PinOff {
		return v, nil
	}
	l, err := trust.ReadLock(cfg.Proxy.LockFile)
	switch {
	case trust.IsNotExist(err):
		ev := log.Warn()
		if opts.Pin == trust.PinEnforce {
			ev = log.Error()
		}
		ev.Str("lock_file", cfg.Proxy.LockFile).Str("pin", cfg.Proxy.Pin).
			Msg("the lock file does not exist: no definition is approved (pin = \"enforce\" withholds them all); write it with mcp-proxy lock")
		v.SetLock(nil, nil)
	case err != nil:
		return nil, fmt.Errorf("reading the lock file: %w", err)
	default:
		v.SetLock(l, nil)
	}
	return v, nil
}

// setupTrust installs the configuration's vetter on a new engine's router, and its
// metrics and admin endpoints.
func (e *engine) setupTrust(cfg *config.Config) error {
	v, err := newVetter(cfg, e.log, e.auditDefinition)
	if err != nil {
		return err
	}
	e.trust.p.Store(v)
	if v != nil {
		e.r.SetVetter(v)
	}
	if m := e.obs.metricsOrNil(); m != nil {
		m.WatchTrust(func() trust.Status {
			if v := e.trust.Load(); v != nil {
				return v.Status()
			}
			return trust.Status{Pin: trust.PinOff}
		})
	}
	return nil
}

// nextTrust works out what a reload changes of pinning and screening, switching nothing:
// a new vetter when their settings changed, else the lock file read again. apply is nil
// when nothing changes. An unreadable lock file fails the reload (the old one stays).
func (e *engine) nextTrust(cur, next *config.Config) (apply func(), changes []string, err error) {
	v := e.trust.Load()
	if trustSettings(cur) != trustSettings(next) {
		nv, err := newVetter(next, e.log, e.auditDefinition)
		if err != nil {
			return nil, nil, err
		}
		return func() {
			e.trust.p.Store(nv)
			e.r.SetVetter(nv)
		}, []string{fmt.Sprintf("pinning and screening (pin = %q, screen = %q)", next.Proxy.Pin, next.Proxy.Screen)}, nil
	}
	if v == nil || next.Proxy.Pin == config.PinOff {
		return nil, nil, nil
	}
	l, err := trust.ReadLock(next.Proxy.LockFile)
	if err != nil && !trust.IsNotExist(err) {
		return nil, nil, fmt.Errorf("reading the lock file: %w", err)
	}
	if sameLock(v.Lock(), l) {
		return nil, nil, nil
	}
	return func() {
		v.SetLock(l, nil)
		e.r.Revet()
	}, []string{"lock file " + next.Proxy.LockFile}, nil
}

func sameLock(a, b *trust.Lock) bool {
	if a == nil || b == nil {
		return a == b
	}
	ea, err1 := a.Encode()
	eb, err2 := b.Encode()
	return err1 == nil && err2 == nil && bytes.Equal(ea, eb)
}

// approve writes the lock file with what the named upstreams (all when none) list now,
// and serves it: the admin listener's POST /lock.
func (e *engine) approve(upstreams []string) (any, error) {
	v := e.trust.Load()
	if v == nil || e.currentConfig().Proxy.Pin == config.PinOff {
		return nil, fmt.Errorf("this proxy does not pin definitions (proxy { pin = \"warn\" | \"enforce\" })")
	}
	l, err := v.Approved(upstreams...)
	if err != nil {
		return nil, err
	}
	path := e.currentConfig().Proxy.LockFile
	if err := trust.WriteLock(path, l); err != nil {
		return nil, fmt.Errorf("writing the lock file: %w", err)
	}
	v.SetLock(l, nil)
	e.r.Revet()
	e.log.Info().Str("lock_file", path).Strs("upstreams", upstreams).Msg("definitions approved through the admin listener; lock file written")
	st := v.Status()
	return &st, nil
}

// currentConfig is the running configuration.
func (e *engine) currentConfig() *config.Config {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cfg
}

// trustStatus is what /status shows of pinning and screening; nil without a vetter.
func (e *engine) trustStatus() any {
	if v := e.trust.Load(); v != nil {
		st := v.Status()
		return &st
	}
	return nil
}

// auditDefinition writes the audit record of a definition that pinning or screening
// reported, when the configuration keeps an audit trail.
func (e *engine) auditDefinition(ev trust.Event) {
	a := e.audit.Load()
	if a == nil {
		return
	}
	rule := "screen"
	outcome := "findings"
	if ev.Pin != "" {
		rule, outcome = "pin", ev.Pin
		if len(ev.Findings) > 0 {
			rule = "pin+screen"
		}
	}
	decision := policy.DecisionFlagged
	if ev.Withheld {
		decision = policy.DecisionWithheld
	}
	detail, _ := json.Marshal(struct {
		Changes  []trust.Change  `json:"changes,omitempty"`
		Findings []trust.Finding `json:"findings,omitempty"`
	}{ev.Changes, ev.Findings})
	var summary []string
	for _, c := range ev.Changes {
		summary = append(summary, c.String())
	}
	for _, f := range ev.Findings {
		summary = append(summary, f.String())
	}
	a.Write(&policy.Record{Time: time.Now(), Principal: "mcp-proxy", Method: policy.DefinitionMethod, Kind: string(ev.Kind),
		Upstream: ev.Upstream, Exposed: ev.Name, Original: ev.Name, Decision: decision, Rule: rule, Outcome: outcome,
		Error: strings.Join(summary, "; "), Definition: detail})
}

// checkLockFile is what validate says of the lock file a pinning configuration reads: an
// error when it cannot be read as one, a warning when it is missing.
func checkLockFile(cfg *config.Config) hcl.Diagnostics {
	if cfg.Proxy.Pin == config.PinOff {
		return nil
	}
	at := &hcl.Range{Filename: cfg.Filename, Start: hcl.Pos{Line: 1, Column: 1}}
	_, err := trust.ReadLock(cfg.Proxy.LockFile)
	switch {
	case trust.IsNotExist(err):
		what := "every definition is reported as not approved"
		if cfg.Proxy.Pin == config.PinEnforce {
			what = "every tool, prompt and resource template is withheld"
		}
		return hcl.Diagnostics{{Severity: hcl.DiagWarning, Subject: at, Summary: "No lock file",
			Detail: fmt.Sprintf("pin = %q and %s does not exist: %s until it is written with mcp-proxy lock.", cfg.Proxy.Pin, cfg.Proxy.LockFile, what)}}
	case err != nil:
		return hcl.Diagnostics{{Severity: hcl.DiagError, Subject: at, Summary: "Unreadable lock file", Detail: err.Error()}}
	}
	return nil
}
