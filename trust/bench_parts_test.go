package trust

import (
	"slices"
	"testing"
)

// BenchmarkVetParts splits the first vet of 300 tools into its parts: the canonical
// forms (with the texts and paths they yield), the checks of each text with the words
// that may name tools, the hash of each canonical form, and the cache's lookup of a
// definition's bytes.
func BenchmarkVetParts(b *testing.B) {
	fs := catalogueOf(300, 1)
	tools := fs[0].Catalogue.Tools
	srcs := make([]string, len(tools))
	for i, t := range tools {
		srcs[i] = string(t)
	}
	var c canonicaliser
	b.Run("canonical", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i, t := range tools {
				if err := c.run(KindTool, t, srcs[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	type vetted struct {
		canon []byte
		texts []text
		nodes []node
	}
	var defs []vetted
	for i, t := range tools {
		if err := c.run(KindTool, t, srcs[i]); err != nil {
			b.Fatal(err)
		}
		defs = append(defs, vetted{slices.Clone(c.out), slices.Clone(c.texts), slices.Clone(c.nodes)})
	}
	var sc screener
	b.Run("screen", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, d := range defs {
				var fs []Finding
				var refs []ref
				for i := range d.texts {
					fs = sc.screen(fs, &d.texts[i], fieldOf{d.nodes, &d.texts[i]}, &refs)
				}
			}
		}
	})
	b.Run("hash", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, d := range defs {
				hashOf(d.canon)
			}
		}
	})
	cache := map[string]bool{}
	for _, s := range srcs {
		cache[s] = true
	}
	b.Run("cache-key", func(b *testing.B) {
		for b.Loop() {
			for _, t := range tools {
				if !cache[string(t)] {
					b.Fatal("not cached")
				}
			}
		}
	})
}
