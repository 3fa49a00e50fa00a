package trust

import (
	"encoding/binary"
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
	probe  int  // a neighbour of c in the name (+1 or -1), compared first
	want   byte // the neighbour
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
				probe := 1
				if at+1 == len(f) {
					probe = -1
				}
				as = append(as, credentialAnchor{c, i, at, probe, f[at+probe]})
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

// triggerFirst has, per length of word and first letter (its low five bits), a bit for
// the second letter (its low five bits) of each trigger word of that length: most words
// are passed over without a look-up.
var triggerFirst = func() (t [17][32]uint32) {
	for i := range triggerTable {
		if e := triggerTable[i]; e.k1 != 0 {
			l := 8 + (64-bits.LeadingZeros64(e.k2)+7)/8
			if e.k2 == 0 {
				l = (64 - bits.LeadingZeros64(e.k1) + 7) / 8
			}
			t[l][e.k1&31] |= 1 << (e.k1 >> 8 & 31)
		}
	}
	return t
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

// lowerByte lowers an ASCII letter.
func lowerByte(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
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

// screener runs the checks of single texts; its buffer is reused from one text to the
// next. The zero value is ready.
type screener struct {
	buf []byte // the text being read, with blockPad zero bytes after it
}

// blockPad is how many zero bytes follow a text in screener.buf: a block of 64 bytes can
// be read from any index up to the text's length.
const blockPad = 64 + 8

// scanASCII runs the checks of an ASCII text of at least minScreened bytes. It reads the
// text 64 bytes at a time: eight bytes at once (wordHi, specialHi) give a bit per byte
// of where words are and of the bytes that may matter between them (the anchors of
// credential file names, the first bytes of marks, the separators of names), and only
// where a word starts or ends, or such a byte is, is there more to do: a word is looked
// up in the trigger table by its eight (or sixteen) bytes lowered, and a name that may be
// a tool's (a separator or an inner capital in it, see distinctive) is read around where
// one was met.
func (sc *screener) scanASCII(out []Finding, t *text, field fieldOf, refs *[]ref) []Finding {
	s := t.value
	value := !t.key // a key is checked for credential files only
	if !value {
		refs = nil
	}
	n := len(s)
	sc.buf = append(append(sc.buf[:0], s...), make([]byte, blockPad)...)
	buf := sc.buf
	var (
		hits     uint64 // phrase triggers met
		files    uint32 // credential files found, by index
		marks    bool   // a mark's first byte was met
		nameDone int    // the names before this index are collected
		inWord   uint64 // 1 when the byte before the block is part of a word
		start    int    // where the last word met started
	)
	for base := 0; base < n+1; base += 64 { // n+1: a word that ends the text ends at n
		w, sp := blockMasks(buf[base:base+64:base+64], (n-base)/8+1)
		before := w<<1 | inWord
		starts, ends := w&^before, before&^w
		inWord = w >> 63
		ev := sp
		if value {
			ev |= ends // a key is not read for words
		}
		for ; ev != 0; ev &= ev - 1 {
			b := bits.TrailingZeros64(ev)
			q := base + b
			if ends>>b&1 != 0 { // a word ends at q: it started at the last start before
				if sb := starts & (1<<b - 1); sb != 0 {
					start = base + 63 - bits.LeadingZeros64(sb)
				}
				l := q - start
				x := binary.LittleEndian.Uint64(buf[start:])
				if l <= maxTriggerLen && triggerFirst[l][x&31]>>(x>>8&31)&1 != 0 {
					hits |= lookupWord(buf, start, l, x)
				}
				if refs != nil && (l > 8 || ^x&bytesBelow(l)&(lo*0x20) != 0) { // a capital, maybe
					nameDone = capitalNames(s, start, q, nameDone, t.node, refs)
				}
			}
			if sp>>b&1 != 0 {
				files, marks, nameDone = special(s, q, files, marks, nameDone, t.node, refs)
			}
		}
		if starts != 0 { // the last word of the block may go on in the next
			start = base + 63 - bits.LeadingZeros64(starts)
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

// special handles the byte s[q] that specialHi marked: an anchor of credential file
// names, the first byte of a mark, a separator of names. It returns the new files, marks
// and nameDone.
func special(s string, q int, files uint32, marks bool, nameDone int, node int32, refs *[]ref) (uint32, bool, int) {
	c := s[q]
	cl := charClass[c]
	if cl&cAnchor != 0 {
		files |= credentialFilesAt(s, q, c)
	}
	if cl&cSep != 0 && refs != nil && q >= nameDone {
		nameDone = collectNames(s, q, node, refs)
	}
	return files, marks || cl&cMark != 0, nameDone
}

// blockMasks reads the first chunks×8 of 64 bytes (ASCII or zero) and returns a bit per
// byte: whether it is part of a word (wordHi), and whether it may matter between words
// (specialHi); the bits of the bytes not read are zero.
func blockMasks(b []byte, chunks int) (w, sp uint64) {
	b = b[:64]
	for j := 0; j < 8*min(chunks, 8); j += 8 {
		// wordHi and specialHi, written out (the compiler does not inline specialHi).
		x := binary.LittleEndian.Uint64(b[j : j+8])
		l := x | lo*0x20
		wh := ((l+lo*(0x80-'a'))&^(l+lo*(0x80-'z'-1)) | ^(x ^ lo*'\'' + lo*0x7F)) & hi
		eq := (x ^ lo*'<' + lo*0x7F) & ((x | lo*0x04) ^ lo*'_' + lo*0x7F) & (x ^ lo*'~' + lo*0x7F) // top bit clear where one is equal
		sh := ((x+lo*(0x80-'-'))&^(x+lo*(0x80-'0')) | ^eq) & hi
		w |= gather(wh) << j
		sp |= gather(sh) << j
	}
	return w, sp
}

// lookupWord is the hits of the word of l bytes at buf[start:] whose first eight bytes
// are x.
func lookupWord(buf []byte, start, l int, x uint64) uint64 {
	k1, k2 := lowered(x, min(l, 8)), uint64(0)
	if l > 8 {
		k2 = lowered(binary.LittleEndian.Uint64(buf[start+8:]), l-8)
	}
	return lookupTrigger(k1, k2)
}

// capitalNames collects the names around the inner capitals of the word s[start:end]
// (see collectNames) and returns the new nameDone. An apostrophe is part of a word, not
// of a name: a word can hold several names.
func capitalNames(s string, start, end, nameDone int, node int32, refs *[]ref) int {
	for q := innerCapital(s, max(start, nameDone), end); q >= 0; q = innerCapital(s, nameDone, end) {
		nameDone = collectNames(s, q, node, refs)
	}
	return nameDone
}

// gather packs the top bits of the eight bytes of x (the others zero) into a byte.
func gather(x uint64) uint64 { return x * 0x0002040810204081 >> 56 }

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
	// '[' (0x5B) and '_' (0x5F) are the bytes that are 0x5F with bit 0x04 set.
	return geHi(x, '-')&^geHi(x, '0') | eqHi(x, '<') | eqHi(x|lo*0x04, '_') | eqHi(x, '~')
}

// specialsCovered checks that specialHi marks every byte of class cSep, cAnchor or cMark,
// that wordHi marks the bytes of class cWord, and that blockMasks agrees with both.
var specialsCovered = func() bool {
	for c := 0; c < 0x80; c++ {
		if charClass[c]&(cSep|cAnchor|cMark) != 0 && specialHi(uint64(c)) == 0 {
			panic(fmt.Sprintf("trust: specialHi does not mark %q", rune(c)))
		}
		if charClass[c]&cWord != 0 != (wordHi(uint64(c)) != 0) {
			panic(fmt.Sprintf("trust: wordHi and charClass disagree on %q", rune(c)))
		}
		var b [64]byte
		b[9] = byte(c)
		if w, sp := blockMasks(b[:], 8); w != gather(wordHi(uint64(c)))<<9 || sp != gather(specialHi(uint64(c)))<<9 {
			panic(fmt.Sprintf("trust: blockMasks disagrees with wordHi or specialHi on %q", rune(c)))
		}
	}
	return true
}()

// lowered is the n low bytes of x (letters and apostrophes) in lower case, the others
// zero.
func lowered(x uint64, n int) uint64 { return (x | lo*0x20) & bytesBelow(n) }

// bytesBelow has all the bits of the n low bytes of a word (n ≤ 8).
func bytesBelow(n int) uint64 { return 1<<(8*uint(n)) - 1 }

// hasAnchor reports whether s has a byte that anchors credential file names: every
// credential file name has one.
func hasAnchor(s string) bool {
	for i := 0; i < len(s); i++ {
		if charClass[s[i]]&cAnchor != 0 {
			return true
		}
	}
	return false
}

// credentialFilesAt is the credential file names (bits by index) that s has around its
// byte c at i.
func credentialFilesAt(s string, i int, c byte) uint32 {
	var files uint32
	for _, a := range anchorsOf[c] {
		f := credentialFiles[a.file]
		if at := i - a.offset; at >= 0 && at+len(f) <= len(s) && lowerByte(s[i+a.probe]) == a.want && equalFold(s[at:at+len(f)], f) {
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
	// The run is one of eachName's: trimmed of dots and dashes, a name if long enough.
	if w := trimDotsDashes(s[start:end]); len(w) >= minRef {
		addRef(refs, w, node)
	}
	return end
}
