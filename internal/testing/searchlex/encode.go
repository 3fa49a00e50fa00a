package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"sort"
)

// The table file search/wordnet.lex: a text header (provenance, WordNet's licence, the
// options), a NUL, then the table as search reads it in place. search/lexicon.go reads
// it; its comment describes the table's layout.

const magic = "MCPLEX1\n"

// encode lays the table out after header. probes are lemmas with the
// term the analyzer made of each when the table was made (for the stale-table test).
func encode(t map[string][]rel, probes [][2]string, header string) ([]byte, error) {
	// Every key and every related term is a term of the table, sorted.
	set := map[string]bool{}
	for k, rs := range t {
		set[k] = true
		for _, r := range rs {
			set[r.term] = true
		}
	}
	terms := make([]string, 0, len(set))
	for s := range set {
		terms = append(terms, s)
	}
	sort.Strings(terms)
	num := make(map[string]uint32, len(terms))
	for i, s := range terms {
		num[s] = uint32(i)
	}
	if len(terms) >= 1<<24 {
		return nil, fmt.Errorf("%d terms: more than a relation can number", len(terms))
	}
	var raw bytes.Buffer
	u32 := func(v uint32) { _ = binary.Write(&raw, binary.LittleEndian, v) }
	nRel := 0
	for _, rs := range t {
		nRel += len(rs)
	}
	var pb bytes.Buffer
	for _, p := range probes {
		pb.WriteString(p[0])
		pb.WriteByte('\t')
		pb.WriteString(p[1])
		pb.WriteByte('\n')
	}
	raw.WriteString(magic)
	u32(uint32(len(terms)))
	u32(uint32(nRel))
	u32(uint32(pb.Len()))
	off := uint32(0)
	for _, s := range terms {
		u32(off)
		off += uint32(len(s))
	}
	u32(off)
	off = 0
	for _, s := range terms {
		u32(off)
		off += uint32(len(t[s]))
	}
	u32(off)
	for _, s := range terms {
		for _, r := range t[s] {
			w := uint32(math.Round(r.w * 255))
			w = max(1, min(w, 255))
			u32(num[r.term]<<8 | w)
		}
	}
	raw.Write(pb.Bytes())
	for _, s := range terms {
		raw.WriteString(s)
	}
	var out bytes.Buffer
	out.WriteString(header)
	out.WriteByte(0)
	out.Write(raw.Bytes())
	return out.Bytes(), nil
}
