package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The WordNet database files (wndb(5WN)): data.POS holds the synsets, index.POS each
// lemma's synsets in order of frequency, index.sense each sense's tag count (how often
// the sense was seen in the tagged corpora).

// pos is a part of speech as WordNet's files name it: n, v, a, r (a satellite
// adjective, s, is read as a).
type pos byte

var allPOS = []pos{'n', 'v', 'a', 'r'}

var posFile = map[pos]string{'n': "noun", 'v': "verb", 'a': "adj", 'r': "adv"}

// synsetID is a synset's offset in its data file with its part of speech.
type synsetID struct {
	pos    pos
	offset uint32
}

// pointer is one relation of a synset (or of one of its words).
type pointer struct {
	symbol string   // "@" hypernym, "+" derivation, "=" attribute, "&" similar…
	target synsetID //
	source int      // 1-based word of the synset it is from; 0: the whole synset (semantic)
	dest   int      // 1-based word of the target; 0: the whole target synset
}

type synset struct {
	id       synsetID
	lexFile  int      // the lexicographer file (noun.act, verb.cognition…)
	words    []string // lower-cased, "_" between the words of a collocation
	pointers []pointer
}

// sense is one of a lemma's meanings, in the order of its index entry (most frequent
// first).
type sense struct {
	synset *synset
	rank   int // 1-based, within the lemma's part of speech
	count  int // tag count
}

// wordnet is the database, read into memory.
type wordnet struct {
	synsets map[synsetID]*synset
	// lemmas → their senses per part of speech.
	senses map[string]map[pos][]sense
}

// readWordNet reads the database files in dir.
func readWordNet(dir string) (*wordnet, error) {
	wn := &wordnet{synsets: map[synsetID]*synset{}, senses: map[string]map[pos][]sense{}}
	for _, p := range allPOS {
		if err := eachLine(filepath.Join(dir, "data."+posFile[p]), func(line string) error {
			s, err := parseSynset(line)
			if err != nil {
				return err
			}
			wn.synsets[s.id] = s
			return nil
		}); err != nil {
			return nil, err
		}
	}
	// Tag counts by (lemma, synset).
	counts := map[string]int{}
	if err := eachLine(filepath.Join(dir, "index.sense"), func(line string) error {
		f := strings.Fields(line)
		if len(f) != 4 {
			return fmt.Errorf("index.sense: %q: want 4 fields", line)
		}
		key := f[0]
		pct := strings.IndexByte(key, '%')
		if pct <= 0 || pct+1 >= len(key) {
			return fmt.Errorf("index.sense: bad sense key %q", key)
		}
		p := map[byte]pos{'1': 'n', '2': 'v', '3': 'a', '4': 'r', '5': 'a'}[key[pct+1]]
		off, err := strconv.ParseUint(f[1], 10, 32)
		if err != nil {
			return fmt.Errorf("index.sense: %q: %w", line, err)
		}
		n, err := strconv.Atoi(f[3])
		if err != nil {
			return fmt.Errorf("index.sense: %q: %w", line, err)
		}
		counts[senseCountKey(key[:pct], synsetID{p, uint32(off)})] = n
		return nil
	}); err != nil {
		return nil, err
	}
	for _, p := range allPOS {
		if err := eachLine(filepath.Join(dir, "index."+posFile[p]), func(line string) error {
			f := strings.Fields(line)
			if len(f) < 6 {
				return fmt.Errorf("index.%s: %q: too short", posFile[p], line)
			}
			lemma := f[0]
			nSyn, err := strconv.Atoi(f[2])
			if err != nil {
				return fmt.Errorf("index.%s: %q: %w", posFile[p], line, err)
			}
			if len(f) < nSyn {
				return fmt.Errorf("index.%s: %q: too short", posFile[p], line)
			}
			offs := f[len(f)-nSyn:]
			m := wn.senses[lemma]
			if m == nil {
				m = map[pos][]sense{}
				wn.senses[lemma] = m
			}
			for i, o := range offs {
				off, err := strconv.ParseUint(o, 10, 32)
				if err != nil {
					return fmt.Errorf("index.%s: %q: %w", posFile[p], line, err)
				}
				id := synsetID{p, uint32(off)}
				s := wn.synsets[id]
				if s == nil {
					return fmt.Errorf("index.%s: %s names synset %d, not in data.%s", posFile[p], lemma, off, posFile[p])
				}
				m[p] = append(m[p], sense{synset: s, rank: i + 1, count: counts[senseCountKey(lemma, id)]})
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return wn, nil
}

func senseCountKey(lemma string, id synsetID) string {
	return fmt.Sprintf("%s %c %d", lemma, id.pos, id.offset)
}

// eachLine calls f with each line of the file that is not its licence header (lines
// beginning with two spaces).
func eachLine(path string, f func(string) error) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "  ") || strings.TrimSpace(line) == "" {
			continue
		}
		if err := f(line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return nil
}

// parseSynset reads one line of a data file:
//
//	offset lex_filenum ss_type w_cnt word lex_id [word lex_id…] p_cnt [ptr…] [frames] | gloss
func parseSynset(line string) (*synset, error) {
	if bar := strings.Index(line, " | "); bar >= 0 {
		line = line[:bar]
	}
	f := strings.Fields(line)
	bad := func(why string) error { return fmt.Errorf("synset %q: %s", truncate(line, 80), why) }
	if len(f) < 5 {
		return nil, bad("too short")
	}
	off, err := strconv.ParseUint(f[0], 10, 32)
	if err != nil {
		return nil, bad(err.Error())
	}
	lexFile, err := strconv.Atoi(f[1])
	if err != nil {
		return nil, bad(err.Error())
	}
	p := pos(f[2][0])
	if p == 's' {
		p = 'a'
	}
	nWords, err := strconv.ParseUint(f[3], 16, 8)
	if err != nil {
		return nil, bad(err.Error())
	}
	i := 4
	s := &synset{id: synsetID{p, uint32(off)}, lexFile: lexFile}
	for w := 0; w < int(nWords); w++ {
		if i+1 >= len(f) {
			return nil, bad("words cut short")
		}
		word := strings.ToLower(f[i])
		if k := strings.IndexByte(word, '('); k > 0 { // adjective markers: (a), (p), (ip)
			word = word[:k]
		}
		s.words = append(s.words, word)
		i += 2
	}
	if i >= len(f) {
		return nil, bad("no pointer count")
	}
	nPtr, err := strconv.Atoi(f[i])
	if err != nil {
		return nil, bad(err.Error())
	}
	i++
	for k := 0; k < nPtr; k++ {
		if i+3 >= len(f) {
			return nil, bad("pointers cut short")
		}
		toff, err := strconv.ParseUint(f[i+1], 10, 32)
		if err != nil {
			return nil, bad(err.Error())
		}
		tp := pos(f[i+2][0])
		if tp == 's' {
			tp = 'a'
		}
		st, err := strconv.ParseUint(f[i+3], 16, 16)
		if err != nil {
			return nil, bad(err.Error())
		}
		s.pointers = append(s.pointers, pointer{
			symbol: f[i],
			target: synsetID{tp, uint32(toff)},
			source: int(st >> 8),
			dest:   int(st & 0xff),
		})
		i += 4
	}
	return s, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
