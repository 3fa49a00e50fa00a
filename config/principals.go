package config

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/mcp-proxy/mcp-proxy/internal/glob"
	"github.com/mcp-proxy/mcp-proxy/principal"
)

// A principal is who the front end authenticated and how: its identity
// (principal.ID) is "api_key:alice", "jwt:https://idp.example.com#alice", "stdio:me".
// The principals lists of rules, rate limits and plugins take identities as well as
// bare names; checkPrincipals puts the short form "jwt:NAME" into its full form and says
// where a bare name could be two people.

// JWTIssuer is the jwt block's issuer: the issuer of every principal authenticated
// with a token; "" without a jwt block.
func (c *Config) JWTIssuer() string {
	if c.Auth != nil && c.Auth.JWT != nil {
		return c.Auth.JWT.Issuer
	}
	return ""
}

// IdentitiesNamed lists the identities a principal named name may have in this
// configuration, one per way of authenticating that could establish it: the API key of
// that name, the subject of that name of the jwt block's issuer, the stdio front end's
// principal (proxy.principal) of that name. More than one: the name alone is ambiguous.
func (c *Config) IdentitiesNamed(name string) []string {
	var ids []string
	if c.Auth != nil {
		for _, k := range c.Auth.APIKeys {
			if k.Name == name {
				ids = append(ids, principal.Identity(principal.ViaAPIKey, "", name))
				break
			}
		}
	}
	if iss := c.JWTIssuer(); iss != "" {
		ids = append(ids, principal.Identity(principal.ViaJWT, iss, name))
	}
	if c.Proxy.Principal != "" && c.Proxy.Principal == name {
		ids = append(ids, principal.Identity(principal.ViaStdio, "", name))
	}
	return ids
}

// CanonicalIdentity is the identity s names when it is written as one: s itself, with
// the jwt block's issuer put into "jwt:NAME" (which means that issuer's subject NAME).
// ok is false for a bare name.
func (c *Config) CanonicalIdentity(s string) (string, bool) {
	via, iss, name, ok := principal.ParseIdentity(s)
	if !ok {
		return "", false
	}
	if via == principal.ViaJWT && iss == "" {
		iss = c.JWTIssuer()
	}
	return principal.Identity(via, iss, name), true
}

// checkPrincipals puts the jwt block's issuer into the "jwt:NAME" patterns of rules,
// rate limits and plugins, and warns about patterns that are not what they seem: a bare
// name that several ways of authenticating could establish (it matches all of them), an
// identity that no principal of this configuration can have.
func checkPrincipals(e *evaluator, cfg *Config) {
	type list struct {
		what, name string
		pats       []string
		at         hcl.Range
	}
	var lists []list
	at := func(ranges map[string]hcl.Range, decl hcl.Range) hcl.Range {
		if r, ok := ranges["principals"]; ok {
			return r
		}
		return decl
	}
	if p := cfg.Policy; p != nil {
		for _, r := range p.Rules {
			lists = append(lists, list{"rule", r.Name, r.Principals, at(r.Ranges, r.DeclRange)})
		}
		for _, l := range p.RateLimits {
			lists = append(lists, list{"rate_limit", l.Name, l.Principals, at(l.Ranges, l.DeclRange)})
		}
	}
	for _, p := range cfg.Plugins {
		lists = append(lists, list{"plugin", p.Name, p.Principals, at(p.Ranges, p.DeclRange)})
	}
	for _, l := range lists {
		for i, pat := range l.pats {
			if d := checkPrincipalPattern(cfg, l.what, l.name, pat); d != nil {
				d.Subject = l.at.Ptr()
				e.diags = append(e.diags, d)
			}
			if id, ok := cfg.CanonicalIdentity(pat); ok {
				l.pats[i] = id // in place: the list is the block's own
			}
		}
	}
}

// checkPrincipalPattern is the warning about one pattern of a principals list, or nil.
func checkPrincipalPattern(cfg *Config, what, name, pat string) *hcl.Diagnostic {
	warn := func(summary, format string, args ...any) *hcl.Diagnostic {
		return &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: summary,
			Detail: fmt.Sprintf("%s %q: ", what, name) + fmt.Sprintf(format, args...)}
	}
	iss := cfg.JWTIssuer()
	via, patIss, who, ok := principal.ParseIdentity(pat)
	if !ok {
		ways := cfg.waysNaming(pat)
		if len(ways) < 2 || strings.Trim(pat, "*") == "" {
			return nil
		}
		literal := !strings.ContainsAny(pat, `*?\`)
		var forms, whom []string
		for _, w := range ways {
			forms = append(forms, fmt.Sprintf("%q", w+":"+pat))
			whom = append(whom, describeWay(w, pat, literal, iss))
		}
		return warn("Ambiguous principal",
			"principals %q matches %s: different people, whatever their names. Write %s to say which (list each that is meant).",
			pat, strings.Join(whom, " and "), strings.Join(forms, " or "))
	}
	literal := !strings.ContainsAny(who, `*?\`)
	switch via {
	case principal.ViaAPIKey:
		switch {
		case cfg.Auth == nil || len(cfg.Auth.APIKeys) == 0:
			return warn("Principal matches nothing", "principals %q names an API key, but there is no api_key block.", pat)
		case literal && !cfg.hasAPIKey(who):
			return warn("Principal matches nothing", "principals %q names an API key, but there is no api_key %q.", pat, who)
		}
	case principal.ViaJWT:
		switch {
		case iss == "":
			return warn("Principal matches nothing", "principals %q names a token's subject, but auth has no jwt block.", pat)
		case patIss != "" && patIss != iss:
			return warn("Principal matches nothing", "principals %q names a token of issuer %q, but the jwt block's issuer is %q (write %q).",
				pat, patIss, iss, "jwt:"+who)
		}
	case principal.ViaStdio:
		if literal && cfg.Proxy.Principal != "" && cfg.Proxy.Principal != who {
			return warn("Principal matches nothing", "principals %q names the stdio principal %q, but proxy.principal is %q.", pat, who, cfg.Proxy.Principal)
		}
	case principal.ViaAnonymous:
		if literal && who != principal.Anonymous.Name {
			return warn("Principal matches nothing", "principals %q: the principal of requests without authentication is %q.", pat, principal.Anonymous.ID())
		}
	}
	return nil
}

// waysNaming lists the ways of authenticating (principal.ViaAPIKey, ...) that can
// establish a principal whose name pattern pat matches: the API keys it matches, any
// subject of the jwt block's issuer, the stdio principal it matches.
func (c *Config) waysNaming(pat string) []string {
	g, err := glob.Compile(pat)
	if err != nil {
		return nil // reported with the policy's patterns
	}
	var ways []string
	if c.Auth != nil {
		for _, k := range c.Auth.APIKeys {
			if g.Match(k.Name) {
				ways = append(ways, principal.ViaAPIKey)
				break
			}
		}
	}
	if c.JWTIssuer() != "" {
		ways = append(ways, principal.ViaJWT)
	}
	if c.Proxy.Principal != "" && g.Match(c.Proxy.Principal) {
		ways = append(ways, principal.ViaStdio)
	}
	return ways
}

// describeWay says whom a name pattern matches of the principals established via way.
func describeWay(way, pat string, literal bool, issuer string) string {
	switch way {
	case principal.ViaAPIKey:
		if literal {
			return fmt.Sprintf("the API key %q", pat)
		}
		return fmt.Sprintf("API keys (named %q)", pat)
	case principal.ViaJWT:
		if literal {
			return fmt.Sprintf("the subject %q of tokens from %s", pat, issuer)
		}
		return fmt.Sprintf("subjects (%q) of tokens from %s", pat, issuer)
	}
	return "the stdio principal (proxy.principal)"
}

func (c *Config) hasAPIKey(name string) bool {
	if c.Auth == nil {
		return false
	}
	for _, k := range c.Auth.APIKeys {
		if k.Name == name {
			return true
		}
	}
	return false
}
