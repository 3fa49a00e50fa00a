package redact

import "bytes"

// byteRank orders bytes from the most to the least frequent in what tools return
// (English, code, JSON, logs), roughly. A byte not listed is rarer than every listed one.
const byteRank = " e\tt\naoinsrlhd\"c:u.m,p-/f=g0w1y2b_v{}k3ASTE4IRCON5L6789DPMHUB()FGxjKWqYVJXQZz"

// rarity returns how rare c is: higher is rarer.
func rarity(c byte) int {
	if i := bytes.IndexByte([]byte(byteRank), c); i >= 0 {
		return i
	}
	return len(byteRank)
}

// An anchor finds where any of a set of literal prefixes may start: it searches for
// the rarest byte that all of them have at the same offset (with bytes.IndexByte, which
// is fast exactly when hits are rare), tests the second rarest such byte (of another
// value), if any, and then checks the prefixes around each hit.
type anchor struct {
	prefixes []string
	off      int  // the offset of b in every prefix; -1 if they share no byte
	b        byte // the byte searched for
	off2     int  // the offset of b2 in every prefix; -1 if they share no other byte
	b2       byte
}

// newAnchor returns the anchor of prefixes, which must share at least one byte at one
// offset; if they do not, the anchor finds nothing (TestAnchors checks every anchor).
func newAnchor(prefixes ...string) *anchor {
	a := &anchor{prefixes: prefixes, off: -1, off2: -1}
	shortest := len(prefixes[0])
	for _, p := range prefixes {
		shortest = min(shortest, len(p))
	}
	for off := 0; off < shortest; off++ {
		c := prefixes[0][off]
		shared := true
		for _, p := range prefixes {
			shared = shared && p[off] == c
		}
		switch {
		case !shared:
		case a.off < 0 || rarity(c) > rarity(a.b):
			if a.off >= 0 && a.b != c {
				a.off2, a.b2 = a.off, a.b
			}
			a.off, a.b = off, c
		case c != a.b && (a.off2 < 0 || rarity(c) > rarity(a.b2)):
			a.off2, a.b2 = off, c
		}
	}
	return a
}

// next returns the first index at or after from where one of the prefixes starts, and
// that prefix; or -1.
func (a *anchor) next(s []byte, from int) (int, string) {
	if a.off < 0 {
		return -1, ""
	}
	for i := from + a.off; i < len(s); {
		// Look at the next few bytes before calling IndexByte: text dense in the
		// byte (a run of "_") would otherwise pay a call per byte.
		if end := min(i+8, len(s)); i < end && s[i] != a.b {
			for i++; i < end && s[i] != a.b; i++ {
			}
			if i == end {
				k := bytes.IndexByte(s[i:], a.b)
				if k < 0 {
					return -1, ""
				}
				i += k
			}
		}
		start := i - a.off
		if a.off2 >= 0 && (start+a.off2 < 0 || start+a.off2 >= len(s) || s[start+a.off2] != a.b2) {
			i++
			continue
		}
		for _, p := range a.prefixes {
			if hasPrefixAt(s, start, p) {
				return start, p
			}
		}
		i++
	}
	return -1, ""
}
