package config

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"

	"github.com/mcp-proxy/mcp-proxy/internal/glob"
)

// Filter is what an upstream's tools (or prompts) block and its tool "NAME" (or prompt
// "NAME") blocks say: which of the upstream's items are served and how they are shown,
// by the upstream's own names, before namespacing. The zero value serves every item
// unchanged.
type Filter struct {
	Include   []string   // patterns (the policy's glob syntax); nil: every item
	Exclude   []string   // patterns applied after Include; nil: none
	Overrides []Override // in file order; labels are unique
}

// Override is one tool "NAME" or prompt "NAME" block.
type Override struct {
	Original    string  // the label: the upstream's own name
	Name        string  // exposed (before namespacing) instead of Original; "" keeps Original
	Title       *string // replaces the item's title; nil keeps it
	Description *string // replaces the item's description; nil keeps it
	// ScreenAllow lists the screening checks whose findings in this item's definition are
	// accepted (reported as accepted, never withholding), besides the upstream's.
	ScreenAllow []string
	// NameRange is where the new name is set (the label when it is not), for diagnostics.
	NameRange hcl.Range
	DeclRange hcl.Range
}

// Exposed is the name the item has before namespacing: Name, or Original.
func (o *Override) Exposed() string {
	if o.Name != "" {
		return o.Name
	}
	return o.Original
}

// Selects reports whether the filter serves the item the upstream calls name. It
// compiles the patterns on each call: it is meant for checks, not for requests.
func (f *Filter) Selects(name string) bool {
	match := func(pats []string) bool {
		for _, p := range pats {
			if g, err := glob.Compile(p); err == nil && g.Match(name) {
				return true
			}
		}
		return false
	}
	return (f.Include == nil || match(f.Include)) && !match(f.Exclude)
}

// rawSelection is a tools or prompts block inside an upstream.
type rawSelection struct {
	Include  *hcl.Attribute `hcl:"include,optional"`
	Exclude  *hcl.Attribute `hcl:"exclude,optional"`
	DefRange hcl.Range      `hcl:",def_range"`
}

// rawOverride is a tool "NAME" or prompt "NAME" block inside an upstream.
type rawOverride struct {
	Original    string         `hcl:"name,label"`
	Name        *hcl.Attribute `hcl:"name,optional"`
	Title       *hcl.Attribute `hcl:"title,optional"`
	Description *hcl.Attribute `hcl:"description,optional"`
	ScreenAllow *hcl.Attribute `hcl:"screen_allow,optional"`
	LabelRange  hcl.Range      `hcl:"name,label_range"`
	DefRange    hcl.Range      `hcl:",def_range"`
}

// decodeFilter evaluates and checks an upstream's selection blocks (at most one) and
// override blocks of one kind ("tool" or "prompt"). Statically known collisions between
// the names the overrides leave (two blocks ending with the same name) are errors.
func decodeFilter(e *evaluator, sels []rawSelection, blocks []rawOverride, kind string) Filter {
	var f Filter
	clean := true // every pattern is valid: what the filter selects is known
	type selection struct{ include, exclude []string }
	sel := single(e, sels, kind+"s", func(r *rawSelection) hcl.Range { return r.DefRange },
		func(r *rawSelection) selection {
			n := len(e.diags)
			s := selection{globPatterns(e, r.Include), globPatterns(e, r.Exclude)}
			clean = clean && len(e.diags) == n
			return s
		})
	f.Include, f.Exclude = sel.include, sel.exclude

	first := map[string]int{} // label → index into f.Overrides
	for i := range blocks {
		rb := &blocks[i]
		o := Override{Original: rb.Original, NameRange: rb.LabelRange, DeclRange: rb.DefRange}
		if rb.Original == "" {
			e.blockErrorf(rb.LabelRange, "Invalid "+kind+" block",
				"The label of a %s block is the upstream's own name of the %s; it must not be empty.", kind, kind)
		} else if j, dup := first[rb.Original]; dup {
			e.blockErrorf(rb.LabelRange, "Duplicate "+kind+" block",
				"There is already a %s %q block in this upstream, at %s.", kind, rb.Original, position(f.Overrides[j].DeclRange))
		}
		if s, ok := e.string(rb.Name); ok {
			switch {
			case !validItemName(s):
				e.errorf(rb.Name, "Invalid name",
					"\"name\" must be 1 to 128 characters, each a letter, a digit, '_', '.' or '-', got %q.", s)
			case s == rb.Original:
				e.warnf(rb.Name, "Setting has no effect", "%s %q is renamed to its own name.", kind, s)
			default:
				o.Name, o.NameRange = s, rb.Name.Expr.Range()
			}
		}
		if s, ok := e.string(rb.Title); ok {
			o.Title = &s
		}
		if s, ok := e.string(rb.Description); ok {
			o.Description = &s
		}
		o.ScreenAllow = decodeScreenAllow(e, rb.ScreenAllow)
		if rb.Name == nil && rb.Title == nil && rb.Description == nil && rb.ScreenAllow == nil {
			e.diags = append(e.diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Empty " + kind + " block",
				Detail:  fmt.Sprintf("The %s %q block sets none of name, title, description and screen_allow; it changes nothing.", kind, rb.Original),
				Subject: rb.DefRange.Ptr()})
		}
		if clean && rb.Original != "" && !f.Selects(rb.Original) {
			e.diags = append(e.diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Block has no effect",
				Detail: fmt.Sprintf("The %ss block's include and exclude leave %s %q out, so this block changes nothing.",
					kind, kind, rb.Original),
				Subject: rb.LabelRange.Ptr()})
		}
		if _, dup := first[rb.Original]; !dup {
			first[rb.Original] = len(f.Overrides)
			f.Overrides = append(f.Overrides, o)
		}
	}
	checkOverrideCollisions(e, &f, kind)
	return f
}

// globPatterns reads include or exclude: a non-empty list of valid patterns. Invalid
// patterns are reported and left out.
func globPatterns(e *evaluator, attr *hcl.Attribute) []string {
	list := patterns(e, attr, map[string]hcl.Range{})
	valid := list[:0:0]
	for _, p := range list {
		if _, err := glob.Compile(p); err != nil {
			e.errorf(attr, "Invalid pattern", "%q: %v.", attr.Name, err)
			continue
		}
		valid = append(valid, p)
	}
	if len(valid) == 0 {
		return nil
	}
	return valid
}

// checkOverrideCollisions reports two override blocks of one upstream that leave the
// same name (a rename onto another block's rename, or onto the name of a tool another
// block keeps). Blocks the filter leaves out do not count.
func checkOverrideCollisions(e *evaluator, f *Filter, kind string) {
	claimed := map[string]*Override{}
	for i := range f.Overrides {
		o := &f.Overrides[i]
		if !f.Selects(o.Original) {
			continue
		}
		prev, taken := claimed[o.Exposed()]
		if !taken {
			claimed[o.Exposed()] = o
			continue
		}
		// Report at the rename: this block's, or else the earlier block's.
		at, other := o, prev
		if o.Name == "" {
			at, other = prev, o
		}
		e.blockErrorf(at.NameRange, "Name collision",
			"%s %q is renamed to %q, which %s; two %ss of one upstream cannot share a name.",
			kind, at.Original, at.Name, describeClaim(other, kind), kind)
	}
}

// describeClaim says how o ends up with its name, for collision messages.
func describeClaim(o *Override, kind string) string {
	if o.Name == "" {
		return fmt.Sprintf("is the name of %s %q, configured at %s", kind, o.Original, position(o.DeclRange))
	}
	return fmt.Sprintf("%s %q is also renamed to, at %s", kind, o.Original, position(o.NameRange))
}

// validItemName reports whether s obeys the spec's name rules: 1-128 characters of
// A-Za-z0-9_.-.
func validItemName(s string) bool {
	if len(s) == 0 || len(s) > maxMaxNameLength {
		return false
	}
	for _, r := range s {
		if !isNameChar(r) && r != '.' {
			return false
		}
	}
	return true
}

// checkExposedOverrides runs once every upstream is decoded: a rename whose exposed
// name (namespace, separator, new name) equals a name another enabled upstream's
// override block leaves is an error, and one longer than max_name_length, which the
// router would shorten with a hash, is a warning.
func checkExposedOverrides(e *evaluator, cfg *Config) {
	type claim struct {
		up *Upstream
		o  *Override
	}
	for _, kind := range []string{"tool", "prompt"} {
		claimed := map[string]claim{}
		for i := range cfg.Upstreams {
			u := &cfg.Upstreams[i]
			if u.Disabled {
				continue
			}
			f := &u.Tools
			if kind == "prompt" {
				f = &u.Prompts
			}
			for j := range f.Overrides {
				o := &f.Overrides[j]
				if !f.Selects(o.Original) {
					continue
				}
				full := o.Exposed()
				if u.Namespace != "" {
					full = u.Namespace + cfg.Proxy.Separator + full
				}
				if len(full) > cfg.Proxy.MaxNameLength {
					if o.Name != "" {
						e.diags = append(e.diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Name too long",
							Detail: fmt.Sprintf("%s %q would be exposed as %q, longer than max_name_length (%d); it is shortened with a hash instead.",
								kind, o.Original, full, cfg.Proxy.MaxNameLength),
							Subject: o.NameRange.Ptr()})
					}
					continue // shortened with a hash of its upstream and name: no collision
				}
				prev, taken := claimed[full]
				if !taken {
					claimed[full] = claim{u, o}
					continue
				}
				if prev.up == u || (o.Name == "" && prev.o.Name == "") {
					continue // reported with the upstream's own blocks; or no rename involved
				}
				at, atUp, other, otherUp := o, u, prev.o, prev.up
				if o.Name == "" {
					at, atUp, other, otherUp = prev.o, prev.up, o, u
				}
				e.blockErrorf(at.NameRange, "Name collision",
					"%s %q of upstream %q is renamed to %q, exposed as %q, as is %s %q of upstream %q (%s); names exposed by different upstreams must differ.",
					kind, at.Original, atUp.Name, at.Name, full, kind, other.Original, otherUp.Name, position(other.NameRange))
			}
		}
	}
}
