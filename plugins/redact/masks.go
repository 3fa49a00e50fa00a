package redact

import (
	"bytes"
	"slices"
	"strings"
)

// masks finds the masks a Redactor writes (its template, for each detector's name) in
// text, so that they are not masked again. It searches for the longest literal part of
// the template once, then checks the masks around each hit.
type masks struct {
	anchor []byte         // the longest literal part of the template; empty if it has none
	list   []anchoredMask // the distinct masks
}

// An anchoredMask is one mask and the offset of the anchor in it.
type anchoredMask struct {
	mask []byte
	off  int
}

func newMasks(tmpl string, names []string) masks {
	parts := strings.Split(tmpl, "{name}")
	k := 0 // the index of the longest part
	for i, p := range parts {
		if len(p) > len(parts[k]) {
			k = i
		}
	}
	m := masks{anchor: []byte(parts[k])}
	seen := map[string]bool{}
	for _, name := range names {
		mask := strings.ReplaceAll(tmpl, "{name}", name)
		if seen[mask] || mask == "" {
			continue
		}
		seen[mask] = true
		off := len(strings.Join(parts[:k], "")) + k*len(name)
		m.list = append(m.list, anchoredMask{[]byte(mask), off})
	}
	return m
}

// find appends to dst the spans of the masks in text, sorted, with overlapping or
// touching spans merged.
func (m *masks) find(text []byte, dst []span) []span {
	start := len(dst)
	if len(m.anchor) == 0 {
		for _, am := range m.list {
			for from := 0; from < len(text); {
				i := bytes.Index(text[from:], am.mask)
				if i < 0 {
					break
				}
				dst = append(dst, span{start: from + i, end: from + i + len(am.mask)})
				from += i + 1
			}
		}
	} else {
		for from := 0; from < len(text); {
			i := bytes.Index(text[from:], m.anchor)
			if i < 0 {
				break
			}
			at := from + i
			for _, am := range m.list {
				if s := at - am.off; s >= 0 && bytes.HasPrefix(text[s:], am.mask) {
					dst = append(dst, span{start: s, end: s + len(am.mask)})
				}
			}
			from = at + 1
		}
	}
	found := dst[start:]
	if len(found) < 2 {
		return dst
	}
	slices.SortFunc(found, func(a, b span) int { return a.start - b.start })
	merged := found[:1]
	for _, s := range found[1:] {
		if last := &merged[len(merged)-1]; s.start <= last.end {
			last.end = max(last.end, s.end)
		} else {
			merged = append(merged, s)
		}
	}
	return dst[:start+len(merged)]
}
