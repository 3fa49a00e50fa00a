package trust

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// PinMode is what a definition that differs from the lock file leads to.
type PinMode string

// Pin modes (proxy { pin = ... }).
const (
	PinOff     PinMode = "off"     // no lock file is read
	PinWarn    PinMode = "warn"    // a new or changed definition is served and reported
	PinEnforce PinMode = "enforce" // a new or changed definition is withheld until approved
)

// ScreenMode is what a screening finding leads to.
type ScreenMode string

// Screen modes (proxy { screen = ... }, upstream { screen = ... }).
const (
	ScreenOff      ScreenMode = "off"
	ScreenFlag     ScreenMode = "flag"     // findings are reported, the item is served
	ScreenWithhold ScreenMode = "withhold" // an item with a medium or high finding is withheld
)

// Options configure a Vetter.
type Options struct {
	Pin      PinMode
	LockPath string // the lock file; read by the caller (see ReadLock) and passed to SetLock
	// Screen is the screen mode per upstream; upstreams not in it use DefaultScreen.
	Screen        map[string]ScreenMode
	DefaultScreen ScreenMode
	// Allow are the checks whose findings are accepted (screen_allow).
	Allow Allowances
	Log   zerolog.Logger
	// Report, when set, is called (outside the Vetter's lock, in order) with each
	// difference or finding the first time it is seen: for the audit trail.
	Report func(Event)
}

// Event is a difference or findings reported for one item, the first time they are seen.
type Event struct {
	Upstream string
	Kind     Kind
	Name     string // the upstream's own name
	Withheld bool
	// Pin is "new" or "changed" for a pinning difference ("" for findings only), with the
	// changed fields for "changed".
	Pin      string
	Changes  []Change
	Findings []Finding
	// Error says why the definition could not be read (then it has no Pin or Findings).
	Error string
}

// Vetter is the router's Vetter for pinning and screening. Create it with New; it is safe
// for concurrent use.
type Vetter struct {
	opts Options

	mu       sync.Mutex
	lock     *Lock // nil: no lock file (every definition is new)
	lockErr  error // why the lock file could not be read, for status
	gen      uint64
	cache    [3]map[uint64]*verdict // by kind (Kinds' order) and the hash of the item's bytes (seed)
	seed     maphash.Seed
	diffs    map[[2]string][]Change // by approved and current hash
	last     map[string]*seen       // per upstream, the last vetted catalogue
	lastGen  uint64                 // the lock generation last vetted against
	logged   map[string]bool        // event keys already reported
	canon    canonicaliser          // its buffers, reused from one definition to the next
	screener screener
	refs     []ref   // a buffer for a definition's references, reused
	remap    []int32 // a buffer for keepRefs
	status   map[string]*UpstreamStatus
}

// verdict is what one definition is, independent of the rest of the catalogue.
type verdict struct {
	src      string // the definition's bytes
	kind     Kind
	name     string
	canon    []byte // the canonical form, see canonical
	hash     string // the SHA-256 of canon, worked out when first needed (see sha256)
	findings []Finding
	descLen  int
	refs     []ref  // the distinctive words of its texts, for the cross-reference check
	nodes    []node // where refs are; kept only when there are refs
	err      error
}

// sha256 is the hex SHA-256 of the verdict's canonical form. It is worked out when
// first needed: a definition that matches the lock file is compared by its bytes. The
// Vetter's mu is held.
func (vd *verdict) sha256() string {
	if vd.hash == "" {
		vd.hash = hashOf(vd.canonical())
	}
	return vd.hash
}

// canonical is the definition's canonical form. A verdict keeps it only when it pins:
// the bytes of the lock file's approved definition when it is that one (a start with a
// lock file allocates nothing for it), else a copy. Without pinning it is worked out
// again when needed (to approve it, say). The Vetter's mu is held.
func (vd *verdict) canonical() []byte {
	if vd.canon == nil && vd.err == nil {
		vd.canon, _ = canonical(vd.kind, []byte(vd.src)) // it was read once: no error
	}
	return vd.canon
}

// matches reports whether the definition is the one approved in e: the same canonical
// form (e's was checked against its hash when the lock file was read).
func (vd *verdict) matches(e Entry) bool {
	if len(e.Definition) == 0 { // a lock made in code, with hashes only
		return e.SHA256 == vd.sha256()
	}
	return bytes.Equal(e.Definition, vd.canonical())
}

// keepCanonical is what a verdict keeps of the canonical form canon of a definition of
// kind k named name (see verdict.canonical).
func (v *Vetter) keepCanonical(k Kind, name string, canon []byte) []byte {
	if v.opts.Pin == PinOff {
		return nil
	}
	if v.lock != nil {
		for _, u := range v.lock.Upstreams {
			if e, ok := u.Entries(k)[name]; ok && bytes.Equal(e.Definition, canon) {
				return e.Definition // never changed: a lock is replaced whole
			}
		}
	}
	return slices.Clone(canon)
}

// seen is one upstream's last vetted catalogue.
type seen struct {
	cat    *upstream.Catalogue
	ready  bool
	server Server
	items  [3][]*verdict // by kind, in list order
	serve  *upstream.Catalogue
}

// New returns a Vetter. Call SetLock with the lock file's content (or its read error)
// before the router starts when opts.Pin is not off.
func New(opts Options) *Vetter {
	if opts.Pin == "" {
		opts.Pin = PinOff
	}
	if opts.DefaultScreen == "" {
		opts.DefaultScreen = ScreenFlag
	}
	return &Vetter{
		opts:   opts,
		cache:  [3]map[uint64]*verdict{{}, {}, {}},
		seed:   maphash.MakeSeed(),
		diffs:  map[[2]string][]Change{},
		last:   map[string]*seen{},
		logged: map[string]bool{},
		status: map[string]*UpstreamStatus{},
		gen:    1,
	}
}

// SetLock installs the approved definitions (a reload of the lock file). err is why the
// file could not be read: then the previous lock stays in force (nil at start: every
// definition counts as new), and the error is shown in status. The caller rebuilds the
// catalogue afterwards (router.Revet).
func (v *Vetter) SetLock(l *Lock, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.lockErr = err
	if err == nil {
		v.lock = l
	}
	v.gen++
}

// Lock returns the lock in force (nil when none was read).
func (v *Vetter) Lock() *Lock {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.lock
}

func (v *Vetter) screenMode(up string) ScreenMode {
	if m, ok := v.opts.Screen[up]; ok && m != "" {
		return m
	}
	return v.opts.DefaultScreen
}

// Vet implements router.Vetter.
func (v *Vetter) Vet(fs []router.Fetched) {
	var events []Event
	v.mu.Lock()
	unchanged := v.lastGen == v.gen && len(fs) == len(v.last)
	for i := range fs {
		s := v.last[fs[i].Upstream]
		if !unchanged || s == nil || s.cat != fs[i].Catalogue || s.ready != fs[i].Ready {
			unchanged = false
			break
		}
	}
	if !unchanged {
		events = v.revet(fs)
	}
	for i := range fs {
		if s := v.last[fs[i].Upstream]; s != nil && s.serve != nil {
			fs[i].Serve = s.serve
		}
	}
	v.mu.Unlock()
	if v.opts.Report != nil {
		for _, e := range events {
			v.opts.Report(e)
		}
	}
}

// revet works out every upstream's verdicts anew; v.mu is held.
func (v *Vetter) revet(fs []router.Fetched) []Event {
	v.lastGen = v.gen
	last := make(map[string]*seen, len(fs))
	// First the verdicts of single definitions (cached by their bytes), then what
	// depends on the whole catalogue: references to other upstreams' tools.
	for _, f := range fs {
		s := &seen{cat: f.Catalogue, ready: f.Ready, server: serverOf(f.Info)}
		if f.Catalogue != nil {
			s.items[0] = v.verdicts(0, f.Catalogue.Tools)
			s.items[1] = v.verdicts(1, f.Catalogue.Prompts)
			s.items[2] = v.verdicts(2, f.Catalogue.Templates)
		}
		last[f.Upstream] = s
	}
	owners := toolOwners(last)
	var events []Event
	status := make(map[string]*UpstreamStatus, len(fs))
	for _, f := range fs {
		s := last[f.Upstream]
		st, ev := v.judge(f.Upstream, s, owners)
		status[f.Upstream] = st
		events = append(events, ev...)
	}
	v.last, v.status = last, status
	if len(v.cache[0])+len(v.cache[1])+len(v.cache[2]) > 4*cacheFloor(last) {
		v.pruneCache(last)
	}
	return events
}

// verdicts returns the verdict of each definition of a list of kind Kinds[ki], from the
// cache when its bytes were seen before. The cache is keyed by a hash of the bytes with
// a seed of this process (maphash) and checked against the bytes: a collision, which no
// one can aim at without the seed, costs a recomputation, never a wrong verdict.
func (v *Vetter) verdicts(ki int, items []json.RawMessage) []*verdict {
	out := make([]*verdict, len(items))
	for i, raw := range items {
		h := maphash.Bytes(v.seed, raw)
		if vd := v.cache[ki][h]; vd != nil && vd.src == string(raw) { // the conversion does not allocate
			out[i] = vd
			continue
		}
		vd := v.verdict(Kinds[ki], raw, string(raw))
		v.cache[ki][h] = vd
		out[i] = vd
	}
	return out
}

// verdict works out what one definition is. src is raw as a string: what the verdict
// keeps of its texts (its name, references) are substrings of it.
func (v *Vetter) verdict(k Kind, raw []byte, src string) *verdict {
	vd := &verdict{src: src, kind: k}
	c := &v.canon
	if vd.err = c.run(k, raw, src); vd.err != nil {
		vd.name, _, _ = jsonx.GetString(raw, "name")
		if k == KindTemplate && vd.name == "" {
			vd.name, _, _ = jsonx.GetString(raw, "uriTemplate")
		}
		return vd
	}
	vd.name = c.name
	if k == KindTemplate && vd.name == "" {
		vd.name = c.uriTemplate
	}
	vd.canon = v.keepCanonical(k, vd.name, c.out)
	refs := v.refs[:0]
	for i := range c.texts {
		t := c.text(i)
		vd.findings = v.screener.screen(vd.findings, &t, fieldOf{c, t.node, t.key}, &refs)
		if !t.key && t.node >= 0 && c.nodes[t.node].parent < 0 && c.str(c.nodes[t.node].key) == "description" {
			vd.descLen = len(t.value)
		}
	}
	if len(vd.findings) > 1 {
		vd.findings = dedupe(vd.findings)
	}
	if len(refs) > 0 {
		vd.refs, vd.nodes = v.keepRefs(refs, c)
	}
	v.refs = refs
	return vd
}

// judge decides one upstream's items: pinning, screening, and what is served.
func (v *Vetter) judge(up string, s *seen, owners map[string]owners) (*UpstreamStatus, []Event) {
	st := &UpstreamStatus{Upstream: up, Server: s.server, Ready: s.ready, Screen: v.screenMode(up)}
	var approved *LockUpstream
	if v.lock != nil {
		approved = v.lock.Upstreams[up]
	}
	if approved != nil {
		st.ApprovedServer = &approved.Server
	}
	var events []Event
	var withheld [3]map[int]bool
	mode := v.screenMode(up)
	own := make(map[string]bool, len(s.items[0]))
	for _, vd := range s.items[0] {
		own[vd.name] = true
	}
	for ki, k := range Kinds {
		items := s.items[ki]
		median := medianDescription(items)
		var entries map[string]Entry
		if approved != nil {
			entries = approved.Entries(k)
		}
		listed := make(map[string]bool, len(entries)) // the approved entries listed
		for i, vd := range items {
			if vd.err != nil {
				// A definition that cannot be read (a duplicate key in an object, say,
				// which clients read one way and the checks could not) can be neither
				// approved nor screened: pin = "enforce" and screen = "withhold" withhold
				// it, fail closed; the other modes serve it and report it.
				st.Invalid = append(st.Invalid, fmt.Sprintf("%s %q: %v", k, vd.name, vd.err))
				if _, ok := entries[vd.name]; ok {
					listed[vd.name] = true
				}
				ev := Event{Upstream: up, Kind: k, Name: vd.name, Error: vd.err.Error(),
					Withheld: v.opts.Pin == PinEnforce || mode == ScreenWithhold}
				if ev.Withheld {
					if withheld[ki] == nil {
						withheld[ki] = map[int]bool{}
					}
					withheld[ki][i] = true
					st.Withheld++
				}
				st.Items = append(st.Items, ItemStatus{Kind: k, Name: vd.name, Withheld: ev.Withheld, Error: ev.Error})
				if key := fmt.Sprintf("%s\x00%s\x00%s\x00%p\x00%d\x00invalid\x00%v", up, k, vd.name, vd, v.gen, ev.Withheld); !v.logged[key] {
					v.logged[key] = true
					v.log(ev)
					events = append(events, ev)
				}
				continue
			}
			ev := Event{Upstream: up, Kind: k, Name: vd.name}
			if v.opts.Pin != PinOff {
				e, ok := entries[vd.name]
				if ok {
					listed[vd.name] = true
				}
				switch {
				case !ok:
					ev.Pin = "new"
				case !vd.matches(e):
					ev.Pin = "changed"
					ev.Changes = v.diff(e, vd)
				}
			}
			if mode != ScreenOff {
				ev.Findings = append(ev.Findings, vd.findings...)
				ev.Findings = append(ev.Findings, crossReferences(vd, up, own, owners)...)
				if k == KindTool || k == KindPrompt {
					if vd.descLen > minLongDescription && median > 0 && vd.descLen > longDescriptionFactor*median {
						ev.Findings = append(ev.Findings, Finding{Check: CheckLongDescription, Severity: Low, Field: "description",
							Detail: fmt.Sprintf("%d bytes, %d× the median of this upstream's other %ss (%d)", vd.descLen, vd.descLen/median, k, median)})
					}
				}
			}
			if ev.Pin == "" && len(ev.Findings) == 0 {
				continue
			}
			unaccepted := len(ev.Findings)
			for j := range ev.Findings { // ev.Findings is the event's own copy
				if f := &ev.Findings[j]; v.opts.Allow.accepts(up, k, vd.name, f.Check) {
					f.Accepted = true
					unaccepted--
					st.Accepted++
				}
			}
			ev.Withheld = ev.Pin != "" && v.opts.Pin == PinEnforce
			if mode == ScreenWithhold && slices.ContainsFunc(ev.Findings, Finding.Withholds) {
				ev.Withheld = true
			}
			if ev.Withheld {
				if withheld[ki] == nil {
					withheld[ki] = map[int]bool{}
				}
				withheld[ki][i] = true
				st.Withheld++
			}
			st.Items = append(st.Items, ItemStatus{Kind: k, Name: vd.name, Withheld: ev.Withheld, Pin: ev.Pin, Changes: ev.Changes, Findings: ev.Findings})
			if ev.Pin == "" && unaccepted == 0 { // shown in the status, not reported
				continue
			}
			key := fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%d\x00%s\x00%v", up, k, vd.name, vd.sha256(), v.gen, ev.Pin, ev.Withheld)
			if !v.logged[key] {
				v.logged[key] = true
				v.log(ev)
				events = append(events, ev)
			}
		}
		if s.ready && len(listed) != len(entries) && v.opts.Pin != PinOff {
			st.Items = append(st.Items, removed(k, listed, entries)...)
		}
	}
	if s.ready && v.opts.Pin != PinOff && approved != nil && approved.Server != s.server {
		st.ServerChanged = true
	}
	if st.Withheld > 0 && s.cat != nil {
		s.serve = withhold(s.cat, withheld)
	}
	return st, events
}

// removed reports the approved entries of kind k that are not listed.
func removed(k Kind, listed map[string]bool, entries map[string]Entry) []ItemStatus {
	var out []ItemStatus
	for _, n := range sortedKeys(entries) {
		if !listed[n] {
			out = append(out, ItemStatus{Kind: k, Name: n, Pin: "removed"})
		}
	}
	return out
}

// diff returns the changes from an approved entry to a verdict, cached by the pair.
func (v *Vetter) diff(e Entry, vd *verdict) []Change {
	key := [2]string{e.SHA256, vd.sha256()}
	if c, ok := v.diffs[key]; ok {
		return c
	}
	c := diff(e.Definition, vd.canonical())
	v.diffs[key] = c
	return c
}

func (v *Vetter) log(ev Event) {
	var e *zerolog.Event
	var msg string
	switch {
	case ev.Error != "":
		e, msg = v.opts.Log.Error(), fmt.Sprintf("the %s's definition cannot be read, so it can be neither pinned nor screened", ev.Kind)
		e = e.Str("error", ev.Error)
	case ev.Pin == "changed":
		e, msg = v.opts.Log.Warn(), fmt.Sprintf("the %s's definition differs from the one approved in the lock file", ev.Kind)
	case ev.Pin == "new":
		e, msg = v.opts.Log.Warn(), fmt.Sprintf("the %s is not in the lock file (not approved yet)", ev.Kind)
	default:
		e, msg = v.opts.Log.Warn(), fmt.Sprintf("screening found text in the %s's definition aimed at the model", ev.Kind)
	}
	e = e.Str("upstream", ev.Upstream).Str(string(ev.Kind), ev.Name).Bool("withheld", ev.Withheld)
	if len(ev.Changes) > 0 {
		cs := make([]string, len(ev.Changes))
		for i, c := range ev.Changes {
			cs[i] = c.String()
		}
		e = e.Strs("changes", cs)
	}
	if len(ev.Findings) > 0 {
		fs := make([]string, len(ev.Findings))
		for i, f := range ev.Findings {
			fs[i] = f.String()
		}
		e = e.Strs("findings", fs)
	}
	if ev.Withheld && ev.Error != "" {
		msg += "; withheld (pin = \"enforce\" or screen = \"withhold\")"
	} else if ev.Withheld {
		msg += "; withheld until approved (mcp-proxy lock --update)"
		if ev.Pin == "" {
			msg = strings.TrimSuffix(msg, "; withheld until approved (mcp-proxy lock --update)") + "; withheld (screen = \"withhold\")"
		}
	}
	e.Msg(msg)
}

func medianDescription(items []*verdict) int {
	if len(items) < minItemsForMedian {
		return 0
	}
	ls := make([]int, 0, len(items))
	for _, vd := range items {
		ls = append(ls, vd.descLen)
	}
	sort.Ints(ls)
	return ls[len(ls)/2]
}

// withhold returns a copy of cat without the withheld items of each kind.
func withhold(cat *upstream.Catalogue, w [3]map[int]bool) *upstream.Catalogue {
	out := *cat
	keep := func(items []json.RawMessage, drop map[int]bool) []json.RawMessage {
		if len(drop) == 0 {
			return items
		}
		kept := make([]json.RawMessage, 0, len(items)-len(drop))
		for i, it := range items {
			if !drop[i] {
				kept = append(kept, it)
			}
		}
		return kept
	}
	out.Tools = keep(cat.Tools, w[0])
	out.Prompts = keep(cat.Prompts, w[1])
	out.Templates = keep(cat.Templates, w[2])
	return &out // ParamHeaders of a withheld tool stay: they are only read for listed tools
}

func serverOf(info upstream.Info) Server {
	var s Server
	if len(info.ServerInfo) > 0 {
		s.Name, _, _ = jsonx.GetString(info.ServerInfo, "name")
		s.Version, _, _ = jsonx.GetString(info.ServerInfo, "version")
	}
	return s
}

func cacheFloor(last map[string]*seen) int {
	n := 64
	for _, s := range last {
		n += len(s.items[0]) + len(s.items[1]) + len(s.items[2])
	}
	return n
}

// pruneCache drops the verdicts of definitions no upstream lists any more.
func (v *Vetter) pruneCache(last map[string]*seen) {
	live := map[*verdict]bool{}
	for _, s := range last {
		for _, items := range s.items {
			for _, vd := range items {
				live[vd] = true
			}
		}
	}
	for _, cache := range v.cache {
		for k, vd := range cache {
			if !live[vd] {
				delete(cache, k)
			}
		}
	}
	clear(v.diffs)
	if len(v.logged) > 4*len(live)+64 {
		clear(v.logged)
	}
}
