package trust

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Change is one difference between an approved definition and the one listed now.
type Change struct {
	Field string `json:"field"`         // dotted path, e.g. inputSchema.properties.path.description
	Old   string `json:"old,omitempty"` // JSON text as approved; "" when the field is new
	New   string `json:"new,omitempty"` // JSON text as listed now; "" when the field is gone
}

// String reads as "field: old → new", with long strings cut around what changed.
func (c Change) String() string {
	switch {
	case c.Old == "":
		return fmt.Sprintf("%s: added %s", c.Field, c.New)
	case c.New == "":
		return fmt.Sprintf("%s: removed (was %s)", c.Field, c.Old)
	}
	o, n := excerpt(c.Old, c.New)
	return fmt.Sprintf("%s: %s → %s", c.Field, o, n)
}

// maxChanges bounds the changes reported for one definition; a rewrite of a whole schema
// is reported as its first fields and a count.
const maxChanges = 16

// diff returns the field-by-field differences from approved to current (both canonical
// forms). The lists are short and this runs only for a definition that changed.
func diff(approved, current []byte) []Change {
	var a, b any
	da, db := json.NewDecoder(bytes.NewReader(approved)), json.NewDecoder(bytes.NewReader(current))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&a) != nil || db.Decode(&b) != nil {
		return []Change{{Field: "(definition)", Old: string(approved), New: string(current)}}
	}
	var out []Change
	diffValue("", a, b, &out)
	if len(out) > maxChanges {
		rest := len(out) - maxChanges
		out = append(out[:maxChanges], Change{Field: fmt.Sprintf("(and %d more fields)", rest), Old: "…", New: "…"})
	}
	return out
}

func diffValue(path string, a, b any, out *[]Change) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		for _, k := range sortedKeys(am) {
			p := join(path, k)
			if bv, ok := bm[k]; ok {
				diffValue(p, am[k], bv, out)
			} else {
				*out = append(*out, Change{Field: p, Old: encode(am[k])})
			}
		}
		for _, k := range sortedKeys(bm) {
			if _, ok := am[k]; !ok {
				*out = append(*out, Change{Field: join(path, k), New: encode(bm[k])})
			}
		}
		return
	}
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok && bok && len(as) == len(bs) {
		for i := range as {
			diffValue(fmt.Sprintf("%s[%d]", path, i), as[i], bs[i], out)
		}
		return
	}
	if ea, eb := encode(a), encode(b); ea != eb {
		if path == "" {
			path = "(definition)"
		}
		*out = append(*out, Change{Field: path, Old: ea, New: eb})
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func encode(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSuffix(buf.String(), "\n")
}

// excerptContext is how much of the unchanged text is kept on each side of a change.
const excerptContext = 24

// excerpt cuts two long JSON texts to what differs between them, with some context,
// marking cuts with "…". Short texts are returned whole.
func excerpt(a, b string) (string, string) {
	const short = 2*excerptContext + 40
	if len(a) <= short && len(b) <= short {
		return a, b
	}
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	from := max(p-excerptContext, 0)
	for from > 0 && !utf8.RuneStart(a[from]) {
		from--
	}
	cut := func(x string) string {
		to := min(len(x)-s+excerptContext, len(x))
		for to < len(x) && !utf8.RuneStart(x[to]) {
			to++
		}
		out := x[from:to]
		if from > 0 {
			out = "…" + out
		}
		if to < len(x) {
			out += "…"
		}
		return out
	}
	return cut(a), cut(b)
}
