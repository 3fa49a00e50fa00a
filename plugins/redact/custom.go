package redact

import (
	"regexp"
	"regexp/syntax"
)

// regexpFinder returns the find function of a custom detector: every non-empty match of
// re (leftmost-first, not overlapping).
func regexpFinder(re *regexp.Regexp) func(s []byte, det int, dst []span) []span {
	return func(s []byte, det int, dst []span) []span {
		for _, m := range re.FindAllIndex(s, -1) {
			if m[1] > m[0] {
				dst = append(dst, span{m[0], m[1], det})
			}
		}
		return dst
	}
}

// minMatchLen returns a lower bound of the length in bytes of re's non-empty matches, so
// shorter strings need not be searched. It is at least 1.
func minMatchLen(re *regexp.Regexp) int {
	prog, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return 1
	}
	return max(1, minLenOf(prog.Simplify()))
}

// minLenOf returns a lower bound of the length in bytes of every match of re: a rune
// counts as one byte, whatever it encodes to.
func minLenOf(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		return len(re.Rune)
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1
	case syntax.OpCapture, syntax.OpPlus:
		return minLenOf(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min * minLenOf(re.Sub[0])
	case syntax.OpConcat:
		n := 0
		for _, s := range re.Sub {
			n += minLenOf(s)
		}
		return n
	case syntax.OpAlternate:
		n := -1
		for _, s := range re.Sub {
			if m := minLenOf(s); n < 0 || m < n {
				n = m
			}
		}
		return max(n, 0)
	}
	return 0 // empty match, anchors, word boundaries, star, quest, no match
}
