package trust

import "testing"

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
	defs := make([]canonicaliser, len(tools))
	for i, t := range tools {
		if err := defs[i].run(KindTool, t, srcs[i]); err != nil {
			b.Fatal(err)
		}
	}
	var sc screener
	b.Run("screen", func(b *testing.B) {
		b.ReportAllocs()
		refs := make([]ref, 0, 16)
		for b.Loop() {
			for i := range defs {
				c := &defs[i]
				var fs []Finding
				refs = refs[:0]
				for j := range c.texts {
					t := c.text(j)
					fs = sc.screen(fs, &t, fieldOf{c, t.node, t.key}, &refs)
				}
			}
		}
	})
	b.Run("hash", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i := range defs {
				hashOf(defs[i].out)
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
