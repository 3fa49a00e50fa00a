package policy

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/rs/zerolog"
	"github.com/zclconf/go-cty/cty"
	"golang.org/x/time/rate"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/principal"
)

// Check reports what is wrong with the configuration's policy beyond its syntax: rules
// and limits naming upstreams that do not exist, malformed patterns, conditions using
// unknown variables or functions. Each diagnostic points at the offending attribute.
func Check(cfg *config.Config) hcl.Diagnostics {
	upstreams := map[string]bool{}
	for _, u := range cfg.Upstreams {
		upstreams[u.Name] = true
	}
	var diags hcl.Diagnostics
	at := func(ranges map[string]hcl.Range, attr string, decl hcl.Range) *hcl.Range {
		if r, ok := ranges[attr]; ok {
			return &r
		}
		return &decl
	}
	checkPatterns := func(what, name string, ranges map[string]hcl.Range, decl hcl.Range, attr string, pats []string) {
		for _, p := range pats {
			if _, err := CompileGlob(p); err != nil {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid pattern",
					Detail: fmt.Sprintf("%s %q: %s: %v.", what, name, attr, err), Subject: at(ranges, attr, decl)})
			}
		}
	}
	checkUpstreams := func(what, name string, ranges map[string]hcl.Range, decl hcl.Range, pats []string) {
		for _, p := range pats {
			if strings.ContainsAny(p, "*?\\") || upstreams[p] {
				continue
			}
			known := make([]string, 0, len(cfg.Upstreams))
			for _, u := range cfg.Upstreams {
				known = append(known, u.Name)
			}
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown upstream",
				Detail:  fmt.Sprintf("%s %q names upstream %q, which is not configured (upstreams: %s).", what, name, p, strings.Join(known, ", ")),
				Subject: at(ranges, "upstreams", decl)})
		}
	}
	for _, p := range cfg.Plugins {
		for attr, pats := range map[string][]string{"tools": p.Tools, "prompts": p.Prompts, "resources": p.Resources,
			"upstreams": p.Upstreams, "principals": p.Principals} {
			checkPatterns("plugin", p.Name, p.Ranges, p.DeclRange, attr, pats)
		}
		checkUpstreams("plugin", p.Name, p.Ranges, p.DeclRange, p.Upstreams)
	}
	if cfg.Policy == nil {
		return diags
	}
	endpoints := map[string]bool{DefaultEndpoint: true}
	known := []string{DefaultEndpoint}
	for _, ep := range cfg.Endpoints {
		endpoints[ep.Name] = true
		known = append(known, ep.Name)
	}
	checkEndpoints := func(what, name string, ranges map[string]hcl.Range, decl hcl.Range, pats []string) {
		for _, p := range pats {
			if !strings.ContainsAny(p, "*?\\") && !endpoints[p] {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown endpoint",
					Detail: fmt.Sprintf("%s %q names endpoint %q, which is not configured (endpoints: %s; %q is the listen path and stdio without --endpoint).",
						what, name, p, strings.Join(known, ", "), DefaultEndpoint),
					Subject: at(ranges, "endpoints", decl)})
			}
		}
	}
	for _, r := range cfg.Policy.Rules {
		for attr, pats := range map[string][]string{"tools": r.Tools, "prompts": r.Prompts, "resources": r.Resources,
			"upstreams": r.Upstreams, "principals": r.Principals, "endpoints": r.Endpoints} {
			checkPatterns("rule", r.Name, r.Ranges, r.DeclRange, attr, pats)
		}
		checkUpstreams("rule", r.Name, r.Ranges, r.DeclRange, r.Upstreams)
		checkEndpoints("rule", r.Name, r.Ranges, r.DeclRange, r.Endpoints)
		if r.Condition != nil {
			diags = append(diags, CheckCondition(r.Condition)...)
			diags = append(diags, checkConditionPrincipals(cfg, r.Name, r.Condition)...)
		}
	}
	for _, l := range cfg.Policy.RateLimits {
		for attr, pats := range map[string][]string{"tools": l.Tools, "upstreams": l.Upstreams, "principals": l.Principals,
			"endpoints": l.Endpoints} {
			checkPatterns("rate_limit", l.Name, l.Ranges, l.DeclRange, attr, pats)
		}
		checkUpstreams("rate_limit", l.Name, l.Ranges, l.DeclRange, l.Upstreams)
		checkEndpoints("rate_limit", l.Name, l.Ranges, l.DeclRange, l.Endpoints)
	}
	return diags
}

// checkConditionPrincipals warns about a condition that compares the principal with a
// string that is not what it seems: principal.name with a name two ways of
// authenticating could establish (an API key and a token's subject of that name are two
// people), principal.identity with what is not an identity of this configuration (a bare
// name, "jwt:NAME" where identities spell the issuer out).
func checkConditionPrincipals(cfg *config.Config, rule string, expr hcl.Expression) hcl.Diagnostics {
	se, ok := expr.(hclsyntax.Expression)
	if !ok {
		return nil
	}
	var diags hcl.Diagnostics
	warn := func(rng hcl.Range, summary, format string, args ...any) {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: summary,
			Detail: fmt.Sprintf("rule %q: ", rule) + fmt.Sprintf(format, args...), Subject: rng.Ptr()})
	}
	hclsyntax.VisitAll(se, func(n hclsyntax.Node) hcl.Diagnostics {
		op, ok := n.(*hclsyntax.BinaryOpExpr)
		if !ok || (op.Op != hclsyntax.OpEqual && op.Op != hclsyntax.OpNotEqual) {
			return nil
		}
		attr, s, rng, ok := principalComparison(op.LHS, op.RHS)
		if !ok {
			attr, s, rng, ok = principalComparison(op.RHS, op.LHS)
		}
		if !ok {
			return nil
		}
		switch attr {
		case "name":
			if ids := cfg.IdentitiesNamed(s); len(ids) > 1 {
				warn(rng, "Ambiguous principal", "principal.name %q is the name of %d different principals (%s): compare principal.identity with one of them to say which.",
					s, len(ids), strings.Join(ids, ", "))
			}
		case "identity":
			via, iss, name, isID := principal.ParseIdentity(s)
			switch {
			case !isID:
				forms := strings.Join(cfg.IdentitiesNamed(s), " or ")
				if forms == "" {
					forms = fmt.Sprintf("such as %q", "api_key:"+s)
				}
				warn(rng, "Comparison never true", "principal.identity is never a bare name like %q: an identity says how the principal was established (%s); or compare principal.name.",
					s, forms)
			case via == principal.ViaJWT && iss == "" && cfg.JWTIssuer() != "":
				full := principal.Identity(via, cfg.JWTIssuer(), name)
				warn(rng, "Comparison never true", "principal.identity of a token spells its issuer out: write %q, not %q.", full, s)
			}
		}
		return nil
	})
	return diags
}

// principalComparison reads `principal.ATTR` on one side and a string literal on the
// other: the attribute, the string and the literal's range.
func principalComparison(side, other hclsyntax.Expression) (attr, s string, rng hcl.Range, ok bool) {
	st, isTr := side.(*hclsyntax.ScopeTraversalExpr)
	if !isTr || len(st.Traversal) != 2 || st.Traversal.RootName() != "principal" {
		return "", "", hcl.Range{}, false
	}
	step, isAttr := st.Traversal[1].(hcl.TraverseAttr)
	if !isAttr {
		return "", "", hcl.Range{}, false
	}
	lit := other
	if t, isTpl := other.(*hclsyntax.TemplateExpr); isTpl && len(t.Parts) == 1 {
		lit = t.Parts[0]
	}
	lv, isLit := lit.(*hclsyntax.LiteralValueExpr)
	if !isLit || lv.Val.Type() != cty.String || lv.Val.IsNull() {
		return "", "", hcl.Range{}, false
	}
	return step.Name, lv.Val.AsString(), other.Range(), true
}

// Build makes the policy chain the configuration asks for; nil when it asks for none
// (no policy, no limits, no audit).
func Build(cfg *config.Config, log zerolog.Logger) (*Chain, error) {
	return BuildWith(cfg, log, BuildOptions{})
}

// BuildOptions are what BuildWith takes beyond the configuration.
type BuildOptions struct {
	// Store keeps the rate limits' buckets; nil: a store in memory of the limiter's own,
	// closed with the chain. A store given here belongs to the caller: a reload passes the
	// one the running chain uses, so that every bucket keeps its tokens (a bucket whose
	// limit changed takes the new rate and burst, see BucketStore), and replicas pass a
	// shared one.
	Store BucketStore
	// Previous is the chain this one replaces (a reload), whose calls in flight count
	// toward the new per-upstream caps (max_in_flight).
	Previous *Chain
}

// BuildWith is Build with options.
func BuildWith(cfg *config.Config, log zerolog.Logger, opts BuildOptions) (*Chain, error) {
	inflight := map[string]int{}
	for _, u := range cfg.Upstreams {
		if u.MaxInFlight > 0 {
			inflight[u.Name] = u.MaxInFlight
		}
	}
	if cfg.Policy == nil && cfg.Audit == nil && len(inflight) == 0 {
		return nil, nil
	}
	c := &Chain{Log: log}
	var limits []Limit
	if p := cfg.Policy; p != nil {
		rules := make([]Rule, len(p.Rules))
		for i, r := range p.Rules {
			rules[i] = Rule{Name: r.Name, Deny: r.Deny, Tools: r.Tools, Prompts: r.Prompts, Resources: r.Resources,
				Upstreams: r.Upstreams, Principals: r.Principals, Groups: r.Groups, Endpoints: r.Endpoints,
				Annotations: r.Annotations, Condition: r.Condition}
		}
		e, err := NewEngine(rules, p.DefaultAllow)
		if err != nil {
			return nil, err
		}
		c.Rules = e
		for _, l := range p.RateLimits {
			limits = append(limits, Limit{Name: l.Name, Rate: rate.Limit(l.PerSecond), Burst: l.Burst, Per: l.Per,
				Tools: l.Tools, Upstreams: l.Upstreams, Principals: l.Principals, Groups: l.Groups, Endpoints: l.Endpoints})
		}
	}
	if len(limits) > 0 || len(inflight) > 0 {
		lo := LimiterOptions{Store: opts.Store}
		if opts.Previous != nil {
			lo.Previous = opts.Previous.Limits
		}
		l, err := NewLimiterWith(limits, inflight, lo)
		if err != nil {
			return nil, err
		}
		c.Limits = l
	}
	if a := cfg.Audit; a != nil {
		au, err := NewAuditor(AuditOptions{File: a.File, Log: a.Log, Arguments: a.Arguments, Redact: a.Redact}, log)
		if err != nil {
			return nil, err
		}
		c.Audit = au
	}
	return c, nil
}

// Close releases the chain's resources (the limiter's sweeper, the audit file).
func (c *Chain) Close() error {
	if c == nil {
		return nil
	}
	if c.Limits != nil {
		c.Limits.Close()
	}
	return c.Audit.Close()
}
