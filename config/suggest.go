package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// HCL already suggests a close name for an unknown argument (among the
// arguments) and for an unknown block type (among the block types). It does
// not look across kinds: `envs { ... }` inside an upstream, or `upstreams = {}`
// at the top level, get no hint. addCrossKindSuggestions fills that gap by
// extending HCL's own diagnostics, so each mistake is still reported once.

// maxSuggestDistance matches HCL's threshold: names within this many edits
// are suggested.
const maxSuggestDistance = 2

// addCrossKindSuggestions walks the syntax tree of body, which was decoded
// into rawFile, and appends a suggestion to each "Unsupported argument" or
// "Unsupported block type" diagnostic in diags that has none yet and whose
// name is close to a name of the other kind.
func addCrossKindSuggestions(body hcl.Body, diags hcl.Diagnostics) {
	syn, ok := body.(*hclsyntax.Body)
	if !ok {
		return
	}
	hints := make(map[hcl.Range]string)
	collectHints(syn, schemaFor(rawFile{}), hints)
	if len(hints) == 0 {
		return
	}
	for _, d := range diags {
		if d.Subject == nil || strings.Contains(d.Detail, "Did you mean") {
			continue
		}
		if d.Summary != "Unsupported argument" && d.Summary != "Unsupported block type" {
			continue
		}
		if hint, ok := hints[*d.Subject]; ok {
			d.Detail += " " + hint
		}
	}
}

// schemaFor returns the schema gohcl derives from a raw* struct.
func schemaFor(v any) *hcl.BodySchema {
	s, _ := gohcl.ImpliedBodySchema(v)
	return s
}

// nestedSchema returns the schema of the body of a block of type blockType,
// or nil when such blocks have no nested schema to check.
func nestedSchema(blockType string) *hcl.BodySchema {
	switch blockType {
	case "proxy":
		return schemaFor(rawProxy{})
	case "upstream":
		return schemaFor(rawUpstream{})
	default:
		return nil
	}
}

// collectHints records, keyed by the range HCL reports the problem at, a hint
// for every unknown argument that is close to a block type of schema and
// every unknown block type that is close to an argument of schema.
func collectHints(body *hclsyntax.Body, schema *hcl.BodySchema, hints map[hcl.Range]string) {
	attrNames := make([]string, 0, len(schema.Attributes))
	for _, a := range schema.Attributes {
		attrNames = append(attrNames, a.Name)
	}
	blockNames := make([]string, 0, len(schema.Blocks))
	for _, b := range schema.Blocks {
		blockNames = append(blockNames, b.Type)
	}

	for name, attr := range body.Attributes {
		if slices.Contains(attrNames, name) {
			continue
		}
		if s := closest(name, blockNames); s != "" {
			hints[attr.NameRange] = fmt.Sprintf("Did you mean a block of type %q, written as %s { ... } without \"=\"?", s, s)
		}
	}
	for _, block := range body.Blocks {
		if !slices.Contains(blockNames, block.Type) {
			if s := closest(block.Type, attrNames); s != "" {
				hints[block.TypeRange] = fmt.Sprintf("Did you mean the argument %q? Arguments are set with \"=\", as in %s = ...", s, s)
			}
			continue
		}
		if nested := nestedSchema(block.Type); nested != nil {
			collectHints(block.Body, nested, hints)
		}
	}
}

// closest returns the name in candidates nearest to given, or "" when none is
// within maxSuggestDistance edits.
func closest(given string, candidates []string) string {
	best, bestDist := "", maxSuggestDistance+1
	for _, c := range candidates {
		if d := editDistance(given, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, counted in bytes
// (configuration names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
