package proxy

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/policy"
	"github.com/mcp-proxy/mcp-proxy/trust"
)

// vetterBox holds the engine's vetter; nil when nothing is pinned or screened.
type vetterBox struct{ p atomic.Pointer[trust.Vetter] }

func (b *vetterBox) Load() *trust.Vetter { return b.p.Load() }

// setupTrust installs the configuration's vetter (package trust) on a new engine's
// router, and its metrics.
func (e *engine) setupTrust(cfg *config.Config) error {
	v, err := trust.FromConfig(cfg, e.log, e.auditDefinition)
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
	if !trust.SameSettings(cur, next) {
		nv, err := trust.FromConfig(next, e.log, e.auditDefinition)
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
	l, changed, err := v.Reread(next)
	if err != nil || !changed {
		return nil, nil, err
	}
	return func() {
		v.SetLock(l, nil)
		e.r.Revet()
	}, []string{"lock file " + next.Proxy.LockFile}, nil
}

// approve writes the lock file with what the named upstreams (all when none) list now,
// and serves it: the admin listener's POST /lock.
func (e *engine) approve(upstreams []string) (any, error) {
	v := e.trust.Load()
	cfg := e.currentConfig()
	if v == nil || cfg.Proxy.Pin == config.PinOff {
		return nil, fmt.Errorf("this proxy does not pin definitions (proxy { pin = \"warn\" | \"enforce\" })")
	}
	l, err := v.Approved(upstreams...)
	if err != nil {
		return nil, err
	}
	if err := trust.WriteLock(cfg.Proxy.LockFile, l); err != nil {
		return nil, fmt.Errorf("writing the lock file: %w", err)
	}
	v.SetLock(l, nil)
	e.r.Revet()
	e.log.Info().Str("lock_file", cfg.Proxy.LockFile).Strs("upstreams", upstreams).Msg("definitions approved through the admin listener; lock file written")
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
	rule, outcome := "screen", "findings"
	switch {
	case ev.Error != "": // neither pinned nor screened
		rule, outcome = "pin+screen", "invalid"
	case ev.Pin != "":
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
	if ev.Error != "" {
		summary = append(summary, "the definition cannot be read: "+ev.Error)
	}
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
