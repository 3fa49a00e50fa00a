package redact

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// A detector is one compiled detector, built-in or custom.
type detector struct {
	name   string
	minLen int // the length of its shortest match: shorter text is not searched
	find   func(s []byte, det int, dst []span) []span
}

// A Redactor masks what its detectors find. It is immutable after New and safe for
// concurrent use.
type Redactor struct {
	dets   []detector // in priority order; a span's det indexes it
	masks  [][]byte   // masks[i] replaces what dets[i] finds
	guard  masks      // finds masks already in the text
	minLen int        // the shortest match of any detector
	pool   sync.Pool  // of *state: per-call scratch space
}

// state is the scratch space of one call. It is never shared between goroutines.
type state struct {
	cands   []span
	guarded []span // the spans of masks already in the text
	scratch []byte // a decoded JSON string
	counts  map[string]int
}

// Bounds of the scratch space kept between calls (a huge document's is dropped).
const (
	maxPooledScratch = 64 << 10
	maxPooledSpans   = 4 << 10
)

// New compiles a Redactor from cfg. An unknown built-in name, an invalid or colliding
// custom detector, or an invalid replacement is an error; every problem is reported.
func New(cfg Config) (*Redactor, error) {
	dets, tmpl, err := compile(cfg)
	if err != nil {
		return nil, fmt.Errorf("configuring redact: %w", err)
	}
	r := &Redactor{dets: dets, minLen: -1}
	names := make([]string, len(dets))
	for i, d := range dets {
		names[i] = d.name
		r.masks = append(r.masks, []byte(strings.ReplaceAll(tmpl, "{name}", d.name)))
		if r.minLen < 0 || d.minLen < r.minLen {
			r.minLen = d.minLen
		}
	}
	r.guard = newMasks(tmpl, names)
	r.pool.New = func() any { return new(state) }
	return r, nil
}

// Names returns the names of the Redactor's detectors in priority order: custom ones by
// name, then the built-ins.
func (r *Redactor) Names() []string {
	out := make([]string, len(r.dets))
	for i, d := range r.dets {
		out[i] = d.name
	}
	return out
}

// String masks s; counts says how many matches of each detector were masked (nil when
// none, and then out is s).
func (r *Redactor) String(s string) (out string, counts map[string]int) {
	if len(s) < r.minLen {
		return s, nil
	}
	st := r.get()
	defer r.put(st)
	masked, changed := r.redact(st, []byte(s))
	if !changed {
		return s, nil
	}
	return string(masked), st.takeCounts()
}

func (r *Redactor) get() *state { return r.pool.Get().(*state) }

func (r *Redactor) put(st *state) {
	st.counts = nil
	if cap(st.scratch) > maxPooledScratch {
		st.scratch = nil
	}
	if cap(st.cands) > maxPooledSpans || cap(st.guarded) > maxPooledSpans {
		st.cands, st.guarded = nil, nil
	}
	r.pool.Put(st)
}

// takeCounts returns the counts of the call and forgets them.
func (st *state) takeCounts() map[string]int {
	c := st.counts
	st.counts = nil
	return c
}

// redact masks text and adds what it masked to st.counts. It returns text itself if
// nothing is masked, or a new slice. It searches again after masking, until nothing is
// found, so that its output is a fixed point: masking it again changes nothing.
//
// It ends: every round masks at least one byte that is not part of a mask, and puts
// masks in its place, so the bytes outside masks strictly decrease.
func (r *Redactor) redact(st *state, text []byte) ([]byte, bool) {
	changed := false
	for {
		st.cands = st.cands[:0]
		for i := range r.dets {
			if d := &r.dets[i]; len(text) >= d.minLen {
				st.cands = d.find(text, i, st.cands)
			}
		}
		if len(st.cands) == 0 {
			return text, changed
		}
		st.guarded = r.guard.find(text, st.guarded[:0])
		st.cands = unguarded(st.cands, st.guarded)
		if len(st.cands) == 0 {
			return text, changed
		}
		text = r.apply(st, text)
		changed = true
	}
}

// unguarded drops the candidates that lie within a mask or cross a mask's edge: a mask
// is never masked again, but a match that wholly contains one (a private key block
// partly masked elsewhere) is masked whole. guarded is sorted and its spans do not
// touch, so the mask around a position is found by binary search.
func unguarded(cands, guarded []span) []span {
	if len(guarded) == 0 {
		return cands
	}
	// around returns the guarded span with start <= p (or < p if strict) nearest to p.
	around := func(p int, strict bool) (span, bool) {
		k := sort.Search(len(guarded), func(k int) bool {
			return guarded[k].start > p || (strict && guarded[k].start == p)
		})
		if k == 0 {
			return span{}, false
		}
		return guarded[k-1], true
	}
	out := cands[:0]
	for _, c := range cands {
		if g, ok := around(c.start, false); ok && c.start < g.end && (g.start < c.start || c.end <= g.end) {
			continue // starts inside a mask, or is one
		}
		if g, ok := around(c.end, true); ok && c.end < g.end {
			continue // ends inside a mask
		}
		out = append(out, c)
	}
	return out
}

// apply replaces the candidates in text by masks. Overlapping candidates are masked as
// one span (their union), named for the longest of them: the earliest, then the first
// detector in priority order, on a tie. It returns a new slice.
func (r *Redactor) apply(st *state, text []byte) []byte {
	slices.SortFunc(st.cands, func(a, b span) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(b.end, a.end), cmp.Compare(a.det, b.det))
	})
	if st.counts == nil {
		st.counts = make(map[string]int)
	}
	out := make([]byte, 0, len(text)+32)
	last := 0
	for i := 0; i < len(st.cands); {
		best := st.cands[i]
		start, end := best.start, best.end
		for i++; i < len(st.cands) && st.cands[i].start < end; i++ {
			c := st.cands[i]
			end = max(end, c.end)
			if c.end-c.start > best.end-best.start {
				best = c
			}
		}
		out = append(out, text[last:start]...)
		out = append(out, r.masks[best.det]...)
		st.counts[r.dets[best.det].name]++
		last = end
	}
	return append(out, text[last:]...)
}
