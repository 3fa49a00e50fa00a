package redact

import "strings"

// closest returns the candidate nearest to name by edit distance (ignoring case, and
// "-" or " " for "_"), if it is near enough to be a plausible typo: at most a third of
// the longer name's length, and at least 1. Ties go to the earlier candidate. Failing
// that, it returns the first candidate that starts with name, if name has at least three
// characters ("openai" for "openai_key").
func closest(name string, candidates []string) string {
	norm := func(s string) string {
		return strings.NewReplacer("-", "_", " ", "_").Replace(strings.ToLower(s))
	}
	n := norm(name)
	best, bestDist := "", -1
	for _, c := range candidates {
		d := editDistance(n, c)
		if bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	if best != "" && bestDist <= max(1, max(len(n), len(best))/3) {
		return best
	}
	if len(n) >= 3 {
		for _, c := range candidates {
			if strings.HasPrefix(c, n) {
				return c
			}
		}
	}
	return ""
}

// editDistance returns the Levenshtein distance between a and b, in runes, counting
// the swap of two adjacent runes as one edit (the optimal string alignment distance):
// the fewest insertions, deletions, substitutions and transpositions that turn one
// into the other.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1) // row i-2 of the table
	prev := make([]int, len(rb)+1)  // row i-1
	cur := make([]int, len(rb)+1)   // row i
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
