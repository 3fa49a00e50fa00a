package trust

import (
	"fmt"
	"math/bits"
	"strings"
)

// The one-pass reading of an ASCII text (most of what definitions hold): its words are
// looked up in a table of the phrases' trigger words, the bytes that every credential
// file name has ('.', '/', '~', '_') anchor a comparison with the names that have them,
// the first bytes of the phrases' marks are noted, and the runs that may name a tool are
// collected, all in the same loop. What it finds is what the checks of screenText's
// other path (strings.ToLower, then a search per pattern) find; FuzzMatchesReference
// compares the two.

// Classes of bytes.
const (
	cWord   = 1 << iota // a letter or an apostrophe: part of a word (eachWord)
	cName               // a letter, a digit, '_', '-' or '.': part of a name (eachName)
	cSep                // '_', '-' or '.': a name with one is distinctive
	cUpper              // a capital letter: a name with one after its start is distinctive
	cAnchor             // a byte of credential file names that anchors their search
	cMark               // the first byte of a phrase's mark
)

var charClass = func() (cl [256]uint8) {
	for c := 'a'; c <= 'z'; c++ {
		cl[c] |= cWord | cName
		cl[c-'a'+'A'] |= cWord | cName | cUpper
	}
	for c := '0'; c <= '9'; c++ {
		cl[c] |= cName
	}
	cl['\''] |= cWord
	for _, c := range "_-." {
		cl[c] |= cName | cSep
	}
	for _, a := range credentialAnchors {
		cl[a.c] |= cAnchor
	}
	for _, p := range phrases {
		if p.mark != "" {
			cl[p.mark[0]] |= cMark
		}
	}
	return cl
}()

// credentialAnchor is a credential file name to compare with the text around each
// occurrence of one of its bytes: the rarest in ordinary text of those it has.
type credentialAnchor struct {
	c      byte // the byte
	file   int  // the name's index in credentialFiles
	offset int  // where c is in the name
}

var credentialAnchors = func() []credentialAnchor {
	if len(credentialFiles) > 32 {
		panic("trust: too many credential file names for the found-files word")
	}
	var as []credentialAnchor
	for i, f := range credentialFiles {
		at := -1
		for _, c := range []byte("~/_.") { // rarest first
			if at = strings.IndexByte(f, c); at >= 0 {
				as = append(as, credentialAnchor{c, i, at})
				break
			}
		}
		if at < 0 {
			panic(fmt.Sprintf("trust: credential file name %q has none of ~/_.", f))
		}
	}
	return as
}()

// marksHaveLetters is whether a mark has a letter: then a text is lowered to look for it.
var marksHaveLetters = func() bool {
	for _, p := range phrases {
		if strings.IndexFunc(p.mark, func(r rune) bool { return r >= 'a' && r <= 'z' }) >= 0 {
			return true
		}
	}
	return false
}()

// anchorsOf lists, per byte, the credential file names it anchors.
var anchorsOf = func() (m [256][]credentialAnchor) {
	for _, a := range credentialAnchors {
		m[a.c] = append(m[a.c], a)
	}
	return m
}()

// triggerTable is an open-addressing hash table of the phrases' trigger words, by their
// bytes packed in two words (see wordKey): for each, the hits it sets (phraseBits bits
// per phrase: bit 0 for a trigger word, the next for each group of further words).
var triggerTable, maxTriggerLen = func() (t [triggerSlots]triggerSlot, maxLen int) {
	if len(phrases)*phraseBits > 64 {
		panic("trust: too many phrases for the hits word")
	}
	masks := map[string]uint64{}
	for i, p := range phrases {
		if len(p.also) >= phraseBits {
			panic("trust: a phrase has too many groups of words")
		}
		for _, w := range p.words {
			masks[w] |= 1 << (phraseBits * i)
		}
		for g, ws := range p.also {
			for _, w := range ws {
				masks[w] |= 2 << g << (phraseBits * i)
			}
		}
	}
	for w, m := range masks {
		if len(w) > 16 || strings.Trim(w, "abcdefghijklmnopqrstuvwxyz'") != "" {
			panic(fmt.Sprintf("trust: trigger word %q is not up to 16 lower-case letters and apostrophes", w))
		}
		k1, k2 := wordKey(w)
		for i := slotOf(k1, k2); ; i = (i + 1) & (triggerSlots - 1) {
			if t[i].k1 == 0 {
				t[i] = triggerSlot{k1: k1, k2: k2, mask: m}
				break
			}
		}
		maxLen = max(maxLen, len(w))
	}
	return t, maxLen
}()

// triggerSlots is the table's size: a power of two, several times the number of words.
const triggerSlots = 512

type triggerSlot struct {
	k1, k2 uint64 // the word (see wordKey); k1 == 0 for an empty slot
	mask   uint64
}

// wordKey packs a lower-case word of up to 16 bytes in two words, little-endian, the
// bytes past its end zero.
func wordKey(w string) (k1, k2 uint64) {
	for i := min(len(w), 16) - 1; i >= 0; i-- {
		if i < 8 {
			k1 |= uint64(w[i]) << (8 * i)
		} else {
			k2 |= uint64(w[i]) << (8 * (i - 8))
		}
	}
	return k1, k2
}

func slotOf(k1, k2 uint64) uint64 {
	return (k1*0x9E3779B97F4A7C15 ^ k2*0xC2B2AE3D27D4EB4F) >> (64 - 9) & (triggerSlots - 1)
}

// triggerMask is the hits a lower-case word sets.
func triggerMask(w string) uint64 {
	if len(w) > maxTriggerLen {
		return 0
	}
	return lookupTrigger(wordKey(w))
}

// lookupTrigger is the hits of the word packed as k1, k2 (lower case).
func lookupTrigger(k1, k2 uint64) uint64 {
	for i := slotOf(k1, k2); ; i = (i + 1) & (triggerSlots - 1) {
		e := &triggerTable[i]
		if e.k1 == k1 && e.k2 == k2 {
			return e.mask
		}
		if e.k1 == 0 {
			return 0
		}
	}
}

// equalFold compares ASCII text with a lower-case name.
func equalFold(s, lower string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// scanASCII runs the checks of an ASCII text of at least minScreened bytes. It reads
// eight bytes at a time (see wordHi and specialHi): the bytes before the next word are
// looked at only when one of them matters (an anchor of credential file names, the first
// byte of a mark, a separator of names), and a word is looked up in the trigger table
// from the same eight bytes, lowered and masked. A name that may be a tool's (a
// separator or an inner capital in it, see distinctive) is read around where one was
// met.
func scanASCII(out []Finding, t *text, field fieldOf, refs *[]ref) []Finding {
	s := t.value
	value := !t.key // a key is checked for credential files only
	if !value {
		refs = nil
	}
	var (
		hits     uint64 // phrase triggers met
		files    uint32 // credential files found, by index
		marks    bool   // a mark's first byte was met
		nameDone int    // the names before this index are collected
	)
	// special handles the bytes of s from p that sp (a specialHi) marks.
	special := func(p int, sp uint64) {
		for ; sp != 0; sp &= sp - 1 {
			q := p + bits.TrailingZeros64(sp)>>3
			c := s[q]
			cl := charClass[c]
			if cl&cAnchor != 0 {
				files |= credentialFilesAt(s, q, c)
			}
			marks = marks || cl&cMark != 0
			if cl&cSep != 0 && refs != nil && q >= nameDone {
				nameDone = collectNames(s, q, t.node, refs)
			}
		}
	}
	for p := 0; p < len(s); {
		x := load8(s, p)
		w := wordHi(x)
		if w == 0 { // no word starts in these eight bytes
			if sp := specialHi(x); sp != 0 {
				special(p, sp)
			}
			p += 8
			continue
		}
		g := bits.TrailingZeros64(w) >> 3     // the bytes before the word
		if g > 1 || g == 1 && x&0xFF != ' ' { // not a single space (nor the text's start)
			if sp := specialHi(x) & bytesBelow(g); sp != 0 {
				special(p, sp)
			}
		}
		start := p + g
		x >>= 8 * g
		n := bits.TrailingZeros64(^(w>>(8*g))&hi) >> 3 // the word's bytes in x
		long := g+n == 8 && start+n < len(s) && wordHi(load8(s, start+n))&0x80 != 0
		if long {
			n = wordEnd(s, start+n) - start
		}
		p = start + n
		if value && n <= maxTriggerLen {
			var k1, k2 uint64
			if long {
				x = load8(s, start)
			}
			k1 = lowered(x, min(n, 8))
			if n > 8 {
				k2 = lowered(load8(s, start+8), n-8)
			}
			hits |= lookupTrigger(k1, k2)
		}
		if refs != nil && (long || ^x&bytesBelow(n)&(lo*0x20) != 0) { // a capital, maybe
			// An apostrophe is part of a word, not of a name: a word can hold several.
			for q := innerCapital(s, max(start, nameDone), p); q >= 0; q = innerCapital(s, nameDone, p) {
				nameDone = collectNames(s, q, t.node, refs)
			}
		}
	}
	if value {
		if marks {
			m := s
			if marksHaveLetters {
				m = strings.ToLower(s)
			}
			hits |= markHits(m, func(c byte) bool { return strings.IndexByte(s, c) >= 0 })
		}
		out = screenPhrases(out, hits, s, "", field)
	}
	if files != 0 {
		out = append(out, credentialFinding(bits.TrailingZeros32(files), field))
	}
	return out
}

// Tests of eight ASCII bytes at once (every byte below 0x80: no carry crosses a byte),
// each giving the top bit of each byte for which it holds.

// geHi: the byte is at least c.
func geHi(x uint64, c byte) uint64 { return (x + lo*uint64(0x80-c)) & hi }

// eqHi: the byte is c.
func eqHi(x uint64, c byte) uint64 { return ^(x ^ lo*uint64(c) + lo*0x7F) & hi }

// wordHi: the byte is part of a word (eachWord): a letter or an apostrophe.
func wordHi(x uint64) uint64 {
	l := x | lo*0x20
	return geHi(l, 'a')&^geHi(l, 'z'+1) | eqHi(x, '\'')
}

// specialHi: the byte may matter between words: '-', '.', '/', '<', '[', '_', '~' (the
// separators of names, the anchors of credential file names, the first bytes of marks;
// checked against charClass when the package starts).
func specialHi(x uint64) uint64 {
	return geHi(x, '-')&^geHi(x, '0') | eqHi(x, '<') | eqHi(x, '[') | eqHi(x, '_') | eqHi(x, '~')
}

// specialsCovered checks that specialHi marks every byte of class cSep, cAnchor or cMark.
var specialsCovered = func() bool {
	for c := 0; c < 0x80; c++ {
		if charClass[c]&(cSep|cAnchor|cMark) != 0 && specialHi(uint64(c)) == 0 {
			panic(fmt.Sprintf("trust: specialHi does not mark %q", rune(c)))
		}
		if charClass[c]&cWord != 0 != (wordHi(uint64(c)) != 0) {
			panic(fmt.Sprintf("trust: wordHi and charClass disagree on %q", rune(c)))
		}
	}
	return true
}()

// lowered is the n low bytes of x (letters and apostrophes) in lower case, the others
// zero.
func lowered(x uint64, n int) uint64 { return (x | lo*0x20) & bytesBelow(n) }

// bytesBelow has all the bits of the n low bytes of a word (n ≤ 8).
func bytesBelow(n int) uint64 { return 1<<(8*uint(n)) - 1 }

// load8 reads eight bytes of s from p, little-endian, zero past its end.
func load8(s string, p int) uint64 {
	if p+8 <= len(s) {
		_ = s[p+7]
		return uint64(s[p]) | uint64(s[p+1])<<8 | uint64(s[p+2])<<16 | uint64(s[p+3])<<24 |
			uint64(s[p+4])<<32 | uint64(s[p+5])<<40 | uint64(s[p+6])<<48 | uint64(s[p+7])<<56
	}
	var x uint64
	for i := len(s) - 1; i >= p; i-- {
		x = x<<8 | uint64(s[i])
	}
	return x
}

// wordEnd returns the index of the first byte from p that is not part of a word.
func wordEnd(s string, p int) int {
	for p < len(s) {
		w := wordHi(load8(s, p))
		if n := bits.TrailingZeros64(^w&hi) >> 3; n < 8 {
			return min(p+n, len(s))
		}
		p += 8
	}
	return len(s)
}

// credentialFilesAt is the credential file names (bits by index) that s has around its
// byte c at i.
func credentialFilesAt(s string, i int, c byte) uint32 {
	var files uint32
	for _, a := range anchorsOf[c] {
		f := credentialFiles[a.file]
		if at := i - a.offset; at >= 0 && at+len(f) <= len(s) && equalFold(s[at:at+len(f)], f) {
			files |= 1 << a.file
		}
	}
	return files
}

// innerCapital returns the index of the first capital of the word s[start:end] that
// follows a byte of a name (so that the name has an inner capital), or -1.
func innerCapital(s string, start, end int) int {
	for p := start; p < end; p++ {
		if c := s[p]; c >= 'A' && c <= 'Z' && p > 0 && charClass[s[p-1]]&cName != 0 {
			return p
		}
	}
	return -1
}

// collectNames adds the name-like words of the run of name bytes around s[i] to refs
// (see eachName and addRef) and returns the index past the run.
func collectNames(s string, i int, node int32, refs *[]ref) int {
	start, end := i, i
	for start > 0 && charClass[s[start-1]]&cName != 0 {
		start--
	}
	for end < len(s) && charClass[s[end]]&cName != 0 {
		end++
	}
	if end-start >= minRef {
		eachName(s[start:end], func(w string) { addRef(refs, w, node) })
	}
	return end
}
