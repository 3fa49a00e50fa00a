package trust

import (
	"fmt"
	"slices"
)

// Status is what the Vetter decided last, for /status, metrics and `mcp-proxy screen`.
type Status struct {
	Pin       PinMode           `json:"pin"`
	LockFile  string            `json:"lock_file,omitempty"`
	LockError string            `json:"lock_error,omitempty"` // why the lock file in force is not the file's content
	Upstreams []*UpstreamStatus `json:"upstreams"`
}

// UpstreamStatus is one upstream's verdicts.
type UpstreamStatus struct {
	Upstream       string     `json:"upstream"`
	Ready          bool       `json:"ready"`
	Screen         ScreenMode `json:"screen"`
	Server         Server     `json:"server"`
	ApprovedServer *Server    `json:"approved_server,omitempty"` // nil: the upstream is not in the lock file
	ServerChanged  bool       `json:"server_changed,omitempty"`  // its serverInfo differs from the approved one
	Withheld       int        `json:"withheld"`
	Accepted       int        `json:"accepted,omitempty"` // findings the configuration accepts (screen_allow)
	// Items are the definitions with something to report: new, changed, removed, or with
	// findings. The rest match the lock file and screened clean.
	Items   []ItemStatus `json:"items,omitempty"`
	Invalid []string     `json:"invalid,omitempty"` // definitions that could not be read
}

// ItemStatus is one reported definition.
type ItemStatus struct {
	Kind     Kind      `json:"kind"`
	Name     string    `json:"name"`
	Withheld bool      `json:"withheld"`
	Pin      string    `json:"pin,omitempty"` // "new", "changed" or "removed"
	Changes  []Change  `json:"changes,omitempty"`
	Findings []Finding `json:"findings,omitempty"`
	Error    string    `json:"error,omitempty"` // why the definition could not be read
}

// Status returns the last verdicts, upstreams in name order.
func (v *Vetter) Status() Status {
	v.mu.Lock()
	defer v.mu.Unlock()
	st := Status{Pin: v.opts.Pin, LockFile: v.opts.LockPath}
	if v.lockErr != nil {
		st.LockError = v.lockErr.Error()
	}
	for _, n := range sortedKeys(v.status) {
		st.Upstreams = append(st.Upstreams, v.status[n])
	}
	return st
}

// Approved returns the lock that approves what the upstreams list now: the lock in force
// with the entries of the given upstreams (all when none are given) replaced by their
// current definitions. An upstream that is not up keeps its approved entries; naming one
// that is not up is an error (there is nothing to approve).
func (v *Vetter) Approved(upstreams ...string) (*Lock, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := NewLock()
	if v.lock != nil {
		for n, u := range v.lock.Upstreams {
			out.Upstreams[n] = u
		}
	}
	names := upstreams
	if len(names) == 0 {
		names = sortedKeys(v.last)
	}
	for _, n := range names {
		s, ok := v.last[n]
		if !ok {
			return nil, fmt.Errorf("no upstream %q", n)
		}
		if !s.ready {
			if len(upstreams) > 0 {
				return nil, fmt.Errorf("upstream %q is not up: its definitions cannot be approved", n)
			}
			continue
		}
		u := &LockUpstream{Server: s.server}
		for ki, k := range Kinds {
			for _, vd := range s.items[ki] {
				if vd.err != nil {
					continue
				}
				u.entries(k, true)[vd.name] = Entry{SHA256: vd.sha256(), Definition: slices.Clone(vd.canonical())}
			}
		}
		out.Upstreams[n] = u
	}
	return out, nil
}
