package redact

import "strings"

// A span is one match: text[start:end] found by the detector with index det.
type span struct {
	start, end int
	det        int
}

// A prefixed describes a token that starts with a fixed prefix, followed by a body of
// one class of bytes: the shape of most vendors' API keys.
type prefixed struct {
	anchors  []*anchor // find the prefixes
	body     *class    // the bytes of the body
	word     *class    // bytes that may not touch the token on either side (a superset of body)
	min, max int       // the body's length bounds, after trimming; max 0 means none
	trim     string    // bytes dropped from the end of the body (punctuation that ends a sentence)
	check    func(body []byte) bool
}

// find appends the tokens in s to dst, as spans of detector det.
func (p *prefixed) find(s []byte, det int, dst []span) []span {
	for _, a := range p.anchors {
		for from := 0; from < len(s); {
			start, prefix := a.next(s, from)
			if start < 0 {
				break
			}
			from = start + 1
			if end, ok := p.matchAt(s, start, len(prefix)); ok {
				dst = append(dst, span{start, end, det})
				from = end
			}
		}
	}
	return dst
}

// matchAt reports whether a token whose prefix is n bytes long starts at s[start], and
// where it ends.
func (p *prefixed) matchAt(s []byte, start, n int) (int, bool) {
	if start > 0 && p.word[s[start-1]] {
		return 0, false
	}
	b := start + n
	run := runEnd(s, b, p.body)
	if run < len(s) && p.word[s[run]] {
		return 0, false // part of a longer word
	}
	end := run
	for end > b && strings.IndexByte(p.trim, s[end-1]) >= 0 {
		end--
	}
	if n := end - b; n < p.min || (p.max > 0 && n > p.max) {
		return 0, false
	}
	if p.check != nil && !p.check(s[b:end]) {
		return 0, false
	}
	return end, true
}

// hasPrefixAt reports whether s[i:] starts with prefix.
func hasPrefixAt(s []byte, i int, prefix string) bool {
	if i < 0 || len(s)-i < len(prefix) {
		return false
	}
	for j := 0; j < len(prefix); j++ { // prefixes are short: a loop beats a call to memequal
		if s[i+j] != prefix[j] {
			return false
		}
	}
	return true
}

// minLen is the length of the shortest token the rule accepts.
func (p *prefixed) minLen() int {
	n := -1
	for _, a := range p.anchors {
		for _, prefix := range a.prefixes {
			if n < 0 || len(prefix) < n {
				n = len(prefix)
			}
		}
	}
	return n + p.min
}

// mixedCase reports whether b holds an upper-case letter, a lower-case letter and a
// digit: true of nearly every random key of 30 characters or more, false of words,
// kebab-case names, hex digests and UUIDs.
func mixedCase(b []byte) bool {
	return has(b, clsUpper) && has(b, clsLower) && has(b, clsDigit)
}
