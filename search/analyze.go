package search

import (
	"unicode"
	"unicode/utf8"
)

// The analyzer turns text into terms, the same way for documents and queries:
//
//   - words are runs of letters and digits (Unicode); anything else separates them, so
//     `_`, `-`, `.`, `/`, `__` and punctuation split a name into its parts;
//   - camelCase and PascalCase split too ("listPullRequests", "HTTPServer" → "http",
//     "server"), but letters and digits stay together ("s3", "oauth2");
//   - words are lower-cased; words of one letter and the stop words below are dropped;
//   - a word longer than maxWordBytes is cut there (no token grows without bound);
//   - ASCII words are stemmed by stem, a small suffix stripper; other words are kept as
//     they are.
//
// The analysis is deliberately small and predictable: no dictionary, no synonyms (a
// query's related words are looked for after it: query.go).

// maxWordBytes caps one word's length in bytes; longer ones are truncated.
const maxWordBytes = 48

// words calls emit with each term of s, in order. buf is scratch space for the term
// (lower-cased and stemmed); the slice passed to emit is only valid during the call.
// emit returns false to stop early.
func words(s string, buf []byte, emit func(term []byte) bool) []byte {
	buf, _ = wordForms(s, buf, nil, func(term, _ []byte) bool { return emit(term) })
	return buf
}

// formMark begins a word's form term: the word as written (lower-cased, not stemmed),
// indexed for tools' own names so that the form a query says ("channels") counts more
// than another form of the same word ("channel").
const formMark = '='

// wordForms is words, also passing each term's form: formMark and the word lower-cased
// but not stemmed, in form (scratch space like buf). With a nil form it passes nil.
func wordForms(s string, buf, form []byte, emit func(term, form []byte) bool) ([]byte, []byte) {
	i := 0
	for i < len(s) {
		// Skip separators.
		r, size := decodeRune(s, i)
		if !isWordRune(r) {
			i += size
			continue
		}
		// One word: up to a separator or a case boundary.
		buf = buf[:0]
		prev := rune(-1)
		j := i
		for j < len(s) {
			r, size = decodeRune(s, j)
			if !isWordRune(r) {
				break
			}
			if prev >= 0 && caseBoundary(prev, r, s, j+size) {
				break
			}
			if len(buf)+utf8.UTFMax <= maxWordBytes {
				buf = utf8.AppendRune(buf, unicode.ToLower(r))
			}
			prev = r
			j += size
		}
		i = j
		if form != nil {
			form = append(append(form[:0], formMark), buf...)
		}
		if term := normalize(buf); term != nil {
			var f []byte
			if form != nil {
				f = form
			}
			if !emit(term, f) {
				return buf, form
			}
		}
	}
	return buf, form
}

// joinedWords calls emit with the term of each run of letters and digits in s that
// case splits into several words, taken whole: "JavaScript" (java, script) also gives
// javascript, "GitHub" github, "PostgreSQL" postgresql, as people type them in lower
// case. Documents are read this way too, queries are not (a query's "JavaScript" finds
// the parts).
func joinedWords(s string, buf []byte, emit func(term []byte)) []byte {
	i := 0
	for i < len(s) {
		r, size := decodeRune(s, i)
		if !isWordRune(r) {
			i += size
			continue
		}
		buf = buf[:0]
		split := false
		prev := rune(-1)
		j := i
		for j < len(s) {
			r, size = decodeRune(s, j)
			if !isWordRune(r) {
				break
			}
			if prev >= 0 && caseBoundary(prev, r, s, j+size) {
				split = true
			}
			buf = utf8.AppendRune(buf, unicode.ToLower(r))
			prev = r
			j += size
		}
		i = j
		if split && len(buf) <= maxWordBytes {
			if term := normalize(buf); term != nil {
				emit(term)
			}
		}
	}
	return buf
}

func decodeRune(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// caseBoundary says whether a new word starts at r, which follows prev; next is the
// offset of the rune after r in s (for "HTTPServer": the boundary is before the "S"
// because an upper-case letter followed by a lower-case one starts a word).
func caseBoundary(prev, r rune, s string, next int) bool {
	if !unicode.IsUpper(r) {
		return false
	}
	if unicode.IsLower(prev) {
		return true
	}
	if (unicode.IsUpper(prev) || unicode.IsDigit(prev)) && next < len(s) {
		n, _ := decodeRune(s, next)
		return unicode.IsLower(n)
	}
	return false
}

// normalize drops stop words and one-letter words and stems the rest; it returns nil
// for a dropped word.
func normalize(w []byte) []byte {
	if len(w) < 2 || utf8.RuneCount(w) < 2 {
		return nil
	}
	if isStopWord(w) {
		return nil
	}
	return stem(w)
}

// stopWords are English function words and the filler of requests to a model ("please",
// "can you", "my"). They carry no meaning about which tool to use. Kept small and
// generic: words that name things (file, page, user) are never stop words.
var stopWords = func() map[string]struct{} {
	stop := map[string]struct{}{}
	for _, w := range []string{
		"a", "about", "above", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at",
		"be", "been", "before", "being", "below", "between", "both", "but", "by",
		"can", "could", "did", "do", "does", "doing", "don", "down", "during",
		"each", "either", "else", "etc", "ever", "every", "few", "for", "from", "further",
		"had", "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how",
		"i", "if", "in", "into", "is", "it", "its", "itself", "just",
		"let", "lets", "me", "might", "more", "most", "must", "my", "myself",
		"no", "nor", "not", "now", "of", "off", "on", "once", "one", "only", "or", "other", "our", "ours", "out", "over", "own",
		"please", "pls", "same", "shall", "she", "should", "so", "some", "such",
		"than", "that", "the", "their", "theirs", "them", "then", "there", "these", "they", "this", "those", "through", "to", "too",
		"under", "until", "up", "us", "very", "via", "want", "was", "we", "were", "what", "when", "where", "whether", "which", "while", "who", "whom", "why", "will", "with", "would",
		"you", "your", "yours", "yourself",
		"ll", "re", "ve", "im",
	} {
		stop[w] = struct{}{}
	}
	return stop
}()

func isStopWord(w []byte) bool {
	_, ok := stopWords[string(w)] // no allocation: the compiler's map-index form
	return ok
}

// stem strips common English suffixes from an ASCII word in place and returns the
// result (a prefix of w, sometimes with one letter changed). The rules, in order:
//
//  1. plurals: "ies" → "y" (queries → query), "sses" → "ss", "xes"/"ches"/"shes" → drop
//     "es", a final "s" after anything but "s", "u" or "i" → drop (files → file);
//  2. one verb or noun ending: "ied" → "y" (modified → modify); "ation" → "ate"
//     (navigation → navigate); "tion" → "te" (deletion → delete); "ing" or "ed" → drop
//     when three letters remain (listing → list, created → creat), then a doubled final
//     consonant other than l, s, z is undoubled (running → run, committed → commit);
//  3. a final "e" is dropped when three letters remain (create, creat → creat; file → fil).
//
// Words of three letters or fewer, and words with non-ASCII letters, are left alone. It
// is neither Porter nor complete: it only has to map a word's usual forms to one term,
// the same way for the catalogue and the query.
func stem(w []byte) []byte {
	if len(w) <= 3 {
		return w
	}
	for _, c := range w {
		if c >= utf8.RuneSelf {
			return w
		}
	}
	n := len(w)
	// 1. Plurals.
	switch {
	case hasSuffix(w, "ies") && n > 4:
		w = append(w[:n-3], 'y')
	case hasSuffix(w, "sses"):
		w = w[:n-2]
	case hasSuffix(w, "xes"), hasSuffix(w, "ches"), hasSuffix(w, "shes"):
		w = w[:n-2]
	case w[n-1] == 's' && w[n-2] != 's' && w[n-2] != 'u' && w[n-2] != 'i':
		w = w[:n-1]
	}
	n = len(w)
	// 2. One ending.
	switch {
	case hasSuffix(w, "ied") && n > 4:
		w = append(w[:n-3], 'y')
	case hasSuffix(w, "ation") && n-5 >= 3:
		w = append(w[:n-5], 'a', 't', 'e')
	case hasSuffix(w, "tion") && n-4 >= 4:
		w = append(w[:n-4], 't', 'e')
	case hasSuffix(w, "ing") && n-3 >= 3:
		w = undouble(w[:n-3])
	case hasSuffix(w, "ed") && n-2 >= 3:
		w = undouble(w[:n-2])
	}
	// 3. A final e.
	if n = len(w); n >= 4 && w[n-1] == 'e' {
		w = w[:n-1]
	}
	return w
}

func hasSuffix(w []byte, suffix string) bool {
	return len(w) >= len(suffix) && string(w[len(w)-len(suffix):]) == suffix
}

// undouble drops the last letter of a doubled final consonant (runn → run) unless it
// is l, s or z (pull, pass, buzz) or fewer than three letters would remain.
func undouble(w []byte) []byte {
	n := len(w)
	if n >= 4 && w[n-1] == w[n-2] {
		switch w[n-1] {
		case 'a', 'e', 'i', 'o', 'u', 'l', 's', 'z':
		default:
			return w[:n-1]
		}
	}
	return w
}

// Terms returns the terms the analyzer makes of s, in order, repeats included: what a
// query or a document's text is matched by. For tests, tools and explanations; the
// index does not call it per query.
func Terms(s string) []string {
	var out []string
	words(s, make([]byte, 0, maxWordBytes), func(t []byte) bool {
		out = append(out, string(t))
		return true
	})
	return out
}
