package main

import (
	"math"
	"sort"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/search"
)

// options choose what of WordNet goes into the table and at what weight.
type options struct {
	// Weights of the kinds of relation, against the query word itself (1).
	Synonym    float64 // another word of the same synset
	Derivation float64 // a derivationally related form, a pertainym, a participle, an attribute
	Hypernym   float64 // a word of a direct hypernym synset (or a similar adjective, a verb group)
	// Second is the weight of a second step, times the first's: the other words of the
	// synset a derivation points into (remember → remembering → memory).
	Second float64
	// MaxRank: only a lemma's first senses per part of speech are read.
	MaxRank int
	// SenseExp: a sense's weight is its share of the lemma's tagged uses (Laplace
	// smoothed) raised to this power; 0 gives every sense read the same weight.
	SenseExp float64
	// MinCount: a lemma whose senses were tagged fewer times than this in all is not a
	// key (rare words are seldom typed; their relations add size, not recall).
	MinCount int
	// MaxRelated caps the related words kept per key (the heaviest).
	MaxRelated int
	// MinWeight drops lighter relations.
	MinWeight float64
}

var defaultOptions = options{
	Synonym:    0.9,
	Derivation: 0.8,
	Hypernym:   0.5,
	Second:     0.8,
	MaxRank:    100,
	SenseExp:   0.5,
	MinCount:   1,
	MaxRelated: 16,
	MinWeight:  0.05,
}

// rel is one related term with its weight (0, 1].
type rel struct {
	term string
	w    float64
}

// term returns the analyzer's single term for a WordNet word, or "" when the word is a
// collocation, a stop word or otherwise not one term.
func term(word string) string {
	if strings.ContainsAny(word, "_-") {
		return ""
	}
	ts := search.Terms(word)
	if len(ts) != 1 {
		return ""
	}
	return ts[0]
}

// senseShare is P(synset | lemma): the share of the lemma's tagged uses that are in
// that synset, Laplace smoothed (a lemma never tagged spreads evenly over its senses).
func senseShare(wn *wordnet, lemma string, id synsetID) float64 {
	total, n, c := 0, 0, 0
	for _, ss := range wn.senses[lemma] {
		for _, s := range ss {
			total += s.count
			n++
			if s.synset.id == id {
				c = s.count
			}
		}
	}
	if n == 0 {
		return 0
	}
	return (float64(c) + 1) / (float64(total) + float64(n))
}

// buildTable makes the table: for each key term, its related terms, heaviest first.
//
// A relation between word a (in synset A) and word b (in synset B; the same for
// synonyms) weighs its kind's weight times (P(A|a) · P(B|b))^SenseExp: the meaning
// that relates them must be a usual meaning of both words. Lemmas that the analyzer
// makes one term (create, creation) share that term's senses.
func buildTable(wn *wordnet, o options) map[string][]rel {
	best := map[string]map[string]float64{} // key → target → weight
	share := map[string]float64{}
	shareOf := func(lemma string, id synsetID) float64 {
		k := senseCountKey(lemma, id)
		v, ok := share[k]
		if !ok {
			v = senseShare(wn, lemma, id)
			share[k] = v
		}
		return v
	}
	add := func(key, word string, cls, pa float64, id synsetID) {
		t := term(word)
		if t == "" || t == key {
			return
		}
		w := cls
		if o.SenseExp > 0 {
			w *= math.Pow(pa*shareOf(word, id), o.SenseExp)
		}
		if w < o.MinWeight {
			return
		}
		m := best[key]
		if m == nil {
			m = map[string]float64{}
			best[key] = m
		}
		if w > m[t] {
			m[t] = w
		}
	}
	groups := map[string][]string{} // key → its lemmas
	for l := range wn.senses {
		if key := term(l); key != "" {
			groups[key] = append(groups[key], l)
		}
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		lemmas := groups[key]
		sort.Strings(lemmas)
		total, n := 0, 0
		for _, l := range lemmas {
			for _, ss := range wn.senses[l] {
				for _, s := range ss {
					total += s.count
					n++
				}
			}
		}
		if total < o.MinCount {
			continue
		}
		for _, lemma := range lemmas {
			for _, p := range allPOS {
				for _, s := range wn.senses[lemma][p] {
					if s.rank > o.MaxRank {
						break
					}
					pa := (float64(s.count) + 1) / (float64(total) + float64(n))
					syn := s.synset
					self := 0
					for i, w := range syn.words {
						if w == lemma {
							self = i + 1
							break
						}
					}
					for i, w := range syn.words {
						if i+1 != self {
							add(key, w, o.Synonym, pa, syn.id)
						}
					}
					for _, ptr := range syn.pointers {
						tgt := wn.synsets[ptr.target]
						if tgt == nil {
							continue
						}
						var cls float64
						switch ptr.symbol {
						case "+", "\\", "<", "=":
							cls = o.Derivation
						case "@", "@i", "&", "$":
							cls = o.Hypernym
						default:
							continue
						}
						if ptr.source != 0 && ptr.source != self {
							continue // a lexical pointer of another word of the synset
						}
						if ptr.dest != 0 {
							if ptr.dest <= len(tgt.words) {
								add(key, tgt.words[ptr.dest-1], cls, pa, tgt.id)
								if o.Second > 0 {
									for i, w := range tgt.words {
										if i+1 != ptr.dest {
											add(key, w, cls*o.Second, pa, tgt.id)
										}
									}
								}
							}
							continue
						}
						for _, w := range tgt.words {
							add(key, w, cls, pa, tgt.id)
						}
					}
				}
			}
		}
	}
	out := make(map[string][]rel, len(best))
	for key, m := range best {
		rs := make([]rel, 0, len(m))
		for t, w := range m {
			rs = append(rs, rel{t, w})
		}
		sort.Slice(rs, func(i, j int) bool {
			if rs[i].w != rs[j].w {
				return rs[i].w > rs[j].w
			}
			return rs[i].term < rs[j].term
		})
		if len(rs) > o.MaxRelated {
			rs = rs[:o.MaxRelated]
		}
		out[key] = rs
	}
	return out
}
