package config

import (
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Auth is the auth block: how the HTTP front end authenticates requests.
type Auth struct {
	Resource  string   // this proxy's resource URI (the audience of tokens)
	APIKeys   []APIKey // static keys
	JWT       *JWT     // OAuth 2.1 access tokens; nil when not configured
	DeclRange hcl.Range
}

// APIKey is one api_key "name" block: its principal, groups, and the key's SHA-256 (hex)
// or the key itself (read from env()).
type APIKey struct {
	Name   string
	Groups []string
	SHA256 string
	Token  string
}

// JWT is the jwt block inside auth.
type JWT struct {
	Issuer               string
	JWKSURL              string
	Audience             string // default: Auth.Resource
	PrincipalClaim       string // default "sub"
	GroupsClaim          string // default "groups"
	RequiredScopes       []string
	Algorithms           []string
	Leeway               time.Duration
	AuthorizationServers []string
}

// Policy is the policy block: rules and rate limits.
type Policy struct {
	DefaultAllow bool // default = "allow"; the default is "deny" once a policy block exists
	Rules        []Rule
	RateLimits   []RateLimit
	DeclRange    hcl.Range
}

// Rule is one rule "name" block.
type Rule struct {
	Name        string
	Deny        bool
	Tools       []string // nil when not set
	Prompts     []string
	Resources   []string
	Upstreams   []string
	Principals  []string
	Groups      []string
	Endpoints   []string // endpoint names (patterns); "default" is the proxy's own face
	Annotations map[string]bool
	Condition   hcl.Expression // nil when not set
	// Ranges of the attributes, for diagnostics found later (unknown upstreams, bad
	// patterns, bad expressions).
	Ranges    map[string]hcl.Range
	DeclRange hcl.Range
}

// RateLimit is one rate_limit "name" block.
type RateLimit struct {
	Name       string
	PerSecond  float64
	Burst      int
	Per        []string
	Tools      []string
	Upstreams  []string
	Principals []string
	Groups     []string
	Endpoints  []string // endpoint names (patterns); "default" is the proxy's own face; nil: any
	Ranges     map[string]hcl.Range
	DeclRange  hcl.Range
}

// Audit is the audit block.
type Audit struct {
	File      string // absolute; "" for none
	Log       bool
	Arguments string // hash (default), full, none
	Redact    []string
}

type rawAuth struct {
	Resource *hcl.Attribute `hcl:"resource,optional"`
	APIKeys  []rawAPIKey    `hcl:"api_key,block"`
	JWTs     []rawJWT       `hcl:"jwt,block"`
	DefRange hcl.Range      `hcl:",def_range"`
}

type rawAPIKey struct {
	Name     string         `hcl:"name,label"`
	SHA256   *hcl.Attribute `hcl:"sha256,optional"`
	Token    *hcl.Attribute `hcl:"token,optional"`
	Groups   *hcl.Attribute `hcl:"groups,optional"`
	DefRange hcl.Range      `hcl:",def_range"`
}

type rawJWT struct {
	Issuer               *hcl.Attribute `hcl:"issuer,optional"`
	JWKSURL              *hcl.Attribute `hcl:"jwks_url,optional"`
	Audience             *hcl.Attribute `hcl:"audience,optional"`
	PrincipalClaim       *hcl.Attribute `hcl:"principal_claim,optional"`
	GroupsClaim          *hcl.Attribute `hcl:"groups_claim,optional"`
	RequiredScopes       *hcl.Attribute `hcl:"required_scopes,optional"`
	Algorithms           *hcl.Attribute `hcl:"algorithms,optional"`
	Leeway               *hcl.Attribute `hcl:"leeway,optional"`
	AuthorizationServers *hcl.Attribute `hcl:"authorization_servers,optional"`
	DefRange             hcl.Range      `hcl:",def_range"`
}

type rawPolicy struct {
	Default    *hcl.Attribute `hcl:"default,optional"`
	Rules      []rawRule      `hcl:"rule,block"`
	RateLimits []rawRateLimit `hcl:"rate_limit,block"`
	DefRange   hcl.Range      `hcl:",def_range"`
}

type rawRule struct {
	Name        string         `hcl:"name,label"`
	Effect      *hcl.Attribute `hcl:"effect,optional"`
	Tools       *hcl.Attribute `hcl:"tools,optional"`
	Prompts     *hcl.Attribute `hcl:"prompts,optional"`
	Resources   *hcl.Attribute `hcl:"resources,optional"`
	Upstreams   *hcl.Attribute `hcl:"upstreams,optional"`
	Principals  *hcl.Attribute `hcl:"principals,optional"`
	Groups      *hcl.Attribute `hcl:"groups,optional"`
	Endpoints   *hcl.Attribute `hcl:"endpoints,optional"`
	Annotations *hcl.Attribute `hcl:"annotations,optional"`
	Condition   *hcl.Attribute `hcl:"condition,optional"`
	DefRange    hcl.Range      `hcl:",def_range"`
}

type rawRateLimit struct {
	Name       string         `hcl:"name,label"`
	Rate       *hcl.Attribute `hcl:"rate,optional"`
	Burst      *hcl.Attribute `hcl:"burst,optional"`
	Per        *hcl.Attribute `hcl:"per,optional"`
	Tools      *hcl.Attribute `hcl:"tools,optional"`
	Upstreams  *hcl.Attribute `hcl:"upstreams,optional"`
	Principals *hcl.Attribute `hcl:"principals,optional"`
	Groups     *hcl.Attribute `hcl:"groups,optional"`
	Endpoints  *hcl.Attribute `hcl:"endpoints,optional"`
	DefRange   hcl.Range      `hcl:",def_range"`
}

type rawAudit struct {
	File      *hcl.Attribute `hcl:"file,optional"`
	Log       *hcl.Attribute `hcl:"log,optional"`
	Arguments *hcl.Attribute `hcl:"arguments,optional"`
	Redact    *hcl.Attribute `hcl:"redact,optional"`
	DefRange  hcl.Range      `hcl:",def_range"`
}

// single decodes every block of a kind that may appear once, so that the problems
// inside a duplicate are reported along with the duplicate itself, and returns what the
// first one decoded to (the zero value when there is none).
func single[R, T any](e *evaluator, blocks []R, kind string, rng func(*R) hcl.Range, decode func(*R) T) T {
	var first T
	for i := range blocks {
		if i > 0 {
			e.blockErrorf(rng(&blocks[i]), "Duplicate "+kind+" block", "Only one %s block is allowed; the first one is at %s.",
				kind, position(rng(&blocks[0])))
		}
		if v := decode(&blocks[i]); i == 0 {
			first = v
		}
	}
	return first
}

func decodeAuth(e *evaluator, raws []rawAuth) *Auth {
	return single(e, raws, "auth", func(r *rawAuth) hcl.Range { return r.DefRange },
		func(raw *rawAuth) *Auth { return decodeAuthBlock(e, raw) })
}

func decodeAuthBlock(e *evaluator, raw *rawAuth) *Auth {
	a := &Auth{DeclRange: raw.DefRange}
	n := len(e.diags)
	s, hasResource := e.string(raw.Resource)
	resourceFailed := len(e.diags) > n // set but unreadable: already reported
	if hasResource {
		if !strings.HasPrefix(s, "https://") && !strings.HasPrefix(s, "http://") {
			e.errorf(raw.Resource, "Invalid resource", "\"resource\" must be the absolute URL of this proxy's MCP endpoint, such as \"https://mcp.example.com/mcp\", got %q.", s)
		}
		a.Resource = s
	}
	seen := map[string]bool{}
	for _, rk := range raw.APIKeys {
		k := APIKey{Name: rk.Name}
		e.unique(seen, rk.Name, "api_key", "an api_key", rk.DefRange)
		if list, ok := e.stringList(rk.Groups); ok {
			k.Groups = list
		}
		// Each secret is checked on its own, so that a conflict does not hide a bad one.
		n := len(e.diags)
		hash, hasHash := e.string(rk.SHA256)
		token, hasToken := e.string(rk.Token)
		unreadable := len(e.diags) > n // already reported
		if hasHash {
			if b, err := hex.DecodeString(hash); err != nil || len(b) != 32 {
				e.errorf(rk.SHA256, "Invalid sha256", "\"sha256\" must be 64 hex digits (`mcp-proxy hash-key` prints them).")
			}
			k.SHA256 = strings.ToLower(hash)
		}
		if hasToken {
			if len(token) < 16 {
				e.errorf(rk.Token, "Weak api_key token", "An API key must be at least 16 characters long.")
			}
			k.Token = token
		}
		switch {
		case hasHash && hasToken:
			e.errorf(rk.Token, "Conflicting api_key settings", "Set sha256 or token, not both.")
		case !hasHash && !hasToken && !unreadable:
			e.blockErrorf(rk.DefRange, "Missing api_key secret", "api_key %q needs sha256 = \"…\" (from `mcp-proxy hash-key`) or token = env(\"…\").", rk.Name)
		}
		a.APIKeys = append(a.APIKeys, k)
	}
	a.JWT = single(e, raw.JWTs, "jwt", func(r *rawJWT) hcl.Range { return r.DefRange },
		func(rj *rawJWT) *JWT { return decodeJWT(e, rj) })
	if a.JWT != nil && !hasResource && !resourceFailed {
		e.blockErrorf(raw.DefRange, "Missing resource", "With a jwt block, auth needs resource = \"https://…/mcp\": tokens must be issued for it (their audience).")
	}
	if len(raw.APIKeys) == 0 && len(raw.JWTs) == 0 {
		e.blockErrorf(raw.DefRange, "Empty auth block", "An auth block needs at least one api_key block or a jwt block.")
	}
	return a
}

func decodeJWT(e *evaluator, rj *rawJWT) *JWT {
	j := &JWT{PrincipalClaim: "sub", GroupsClaim: "groups", Leeway: time.Minute}
	n := len(e.diags)
	j.Issuer, _ = e.string(rj.Issuer)
	issuerFailed := len(e.diags) > n // set but unreadable: already reported
	n = len(e.diags)
	j.JWKSURL, _ = e.string(rj.JWKSURL)
	jwksFailed := len(e.diags) > n
	if (j.Issuer == "" && !issuerFailed) || (j.JWKSURL == "" && !jwksFailed) {
		e.blockErrorf(rj.DefRange, "Incomplete jwt block", "A jwt block needs issuer and jwks_url.")
	}
	// The issuer is part of its principals' identity (jwt:ISSUER#NAME), which a '#'
	// would make ambiguous; an issuer is a URL without a fragment (RFC 8414 §2).
	if pu, err := url.Parse(j.Issuer); j.Issuer != "" && (err != nil || pu.Scheme == "" || pu.Opaque != "" || strings.Contains(j.Issuer, "#")) {
		e.errorf(rj.Issuer, "Invalid issuer", "\"issuer\" must be the issuer's URL, such as \"https://idp.example.com\", without a fragment, got %q.", j.Issuer)
	}
	if s, ok := e.string(rj.Audience); ok {
		j.Audience = s
	}
	if s, ok := e.string(rj.PrincipalClaim); ok {
		j.PrincipalClaim = s
	}
	if s, ok := e.string(rj.GroupsClaim); ok {
		j.GroupsClaim = s
	}
	j.RequiredScopes, _ = e.stringList(rj.RequiredScopes)
	j.Algorithms, _ = e.stringList(rj.Algorithms)
	j.AuthorizationServers, _ = e.stringList(rj.AuthorizationServers)
	if d, ok := e.duration(rj.Leeway); ok {
		j.Leeway = d
	}
	return j
}

// patterns reads a list of name patterns; it records the attribute's range.
func patterns(e *evaluator, attr *hcl.Attribute, ranges map[string]hcl.Range) []string {
	if attr == nil {
		return nil
	}
	ranges[attr.Name] = attr.Expr.Range()
	list, ok := e.stringList(attr)
	if !ok {
		return nil
	}
	if len(list) == 0 {
		// Absent means "any"; an empty list reads as "none" to some and "any" to others,
		// so it is refused rather than guessed.
		e.errorf(attr, "Empty pattern list", "%s = [] is ambiguous: remove %q to match every one, or list the patterns to match.", attr.Name, attr.Name)
		return nil
	}
	valid := list[:0]
	for _, p := range list {
		if p == "" {
			e.errorf(attr, "Invalid pattern", "%q must not hold an empty pattern.", attr.Name)
			continue
		}
		valid = append(valid, p)
	}
	if len(valid) == 0 {
		return nil
	}
	return valid // without the empty patterns, already reported
}

func decodePolicy(e *evaluator, raws []rawPolicy) *Policy {
	return single(e, raws, "policy", func(r *rawPolicy) hcl.Range { return r.DefRange },
		func(raw *rawPolicy) *Policy { return decodePolicyBlock(e, raw) })
}

func decodePolicyBlock(e *evaluator, raw *rawPolicy) *Policy {
	p := &Policy{DeclRange: raw.DefRange}
	if s, ok := e.string(raw.Default); ok {
		switch s {
		case "allow":
			p.DefaultAllow = true
		case "deny":
		default:
			e.errorf(raw.Default, "Invalid default", "\"default\" must be \"allow\" or \"deny\", got %q.", s)
		}
	}
	names := map[string]bool{}
	for _, rr := range raw.Rules {
		e.unique(names, rr.Name, "rule", "a rule", rr.DefRange)
		r := Rule{Name: rr.Name, Ranges: map[string]hcl.Range{}, DeclRange: rr.DefRange}
		if s, ok := e.string(rr.Effect); ok {
			switch s {
			case "allow":
			case "deny":
				r.Deny = true
			default:
				e.errorf(rr.Effect, "Invalid effect", "\"effect\" must be \"allow\" or \"deny\", got %q.", s)
			}
		} else if rr.Effect == nil {
			e.blockErrorf(rr.DefRange, "Missing effect", "rule %q needs effect = \"allow\" or \"deny\".", rr.Name)
		}
		r.Tools = patterns(e, rr.Tools, r.Ranges)
		r.Prompts = patterns(e, rr.Prompts, r.Ranges)
		r.Resources = patterns(e, rr.Resources, r.Ranges)
		r.Upstreams = patterns(e, rr.Upstreams, r.Ranges)
		r.Principals = patterns(e, rr.Principals, r.Ranges)
		r.Endpoints = patterns(e, rr.Endpoints, r.Ranges)
		if list, ok := e.stringList(rr.Groups); ok {
			r.Groups = list
		}
		if rr.Annotations != nil {
			r.Ranges["annotations"] = rr.Annotations.Expr.Range()
			if v, ok := e.value(rr.Annotations, cty.Map(cty.Bool), "a map of true/false, such as { readOnlyHint = true }"); ok {
				r.Annotations = map[string]bool{}
				m := v.AsValueMap()
				for _, k := range sortedKeys(m) { // in order: the diagnostics do not depend on map iteration
					b := m[k]
					switch k {
					case "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint":
					default:
						e.errorf(rr.Annotations, "Unknown annotation",
							"%q is not a tool annotation; use readOnlyHint, destructiveHint, idempotentHint or openWorldHint.", k)
					}
					if b.IsNull() { // null is neither: it must not quietly read as false
						e.errorf(rr.Annotations, "Invalid annotation", "%s = null: an annotation to match must be true or false.", k)
						continue
					}
					r.Annotations[k] = b.True()
				}
			}
		}
		if rr.Condition != nil {
			r.Condition = rr.Condition.Expr
			r.Ranges["condition"] = rr.Condition.Expr.Range()
		}
		p.Rules = append(p.Rules, r)
	}
	names = map[string]bool{}
	for _, rl := range raw.RateLimits {
		e.unique(names, rl.Name, "rate_limit", "a rate_limit", rl.DefRange)
		l := RateLimit{Name: rl.Name, Ranges: map[string]hcl.Range{}, DeclRange: rl.DefRange}
		if s, ok := e.string(rl.Rate); ok {
			if r, err := parseRate(s); err != nil {
				e.errorf(rl.Rate, "Invalid rate", "%v", err)
			} else {
				l.PerSecond = r
			}
		} else if rl.Rate == nil {
			e.blockErrorf(rl.DefRange, "Missing rate", "rate_limit %q needs rate = \"10/s\" (or /m, /h).", rl.Name)
		}
		l.Burst = max(1, int(l.PerSecond))
		if n, ok := e.int(rl.Burst); ok {
			if n < 1 {
				e.errorf(rl.Burst, "Invalid burst", "\"burst\" must be at least 1, got %d.", n)
			} else {
				l.Burst = n
			}
		}
		if list, ok := e.stringList(rl.Per); ok {
			for _, k := range list {
				if k != "principal" && k != "upstream" && k != "tool" && k != "endpoint" {
					e.errorf(rl.Per, "Invalid per", "\"per\" may list \"principal\", \"upstream\", \"tool\" and \"endpoint\", got %q.", k)
				}
			}
			l.Per = list
		}
		l.Tools = patterns(e, rl.Tools, l.Ranges)
		l.Upstreams = patterns(e, rl.Upstreams, l.Ranges)
		l.Principals = patterns(e, rl.Principals, l.Ranges)
		l.Endpoints = patterns(e, rl.Endpoints, l.Ranges)
		if list, ok := e.stringList(rl.Groups); ok {
			l.Groups = list
		}
		p.RateLimits = append(p.RateLimits, l)
	}
	return p
}

// parseRate reads "N/s", "N/m" or "N/h" as calls per second.
func parseRate(s string) (float64, error) {
	n, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, fmt.Errorf("\"rate\" must look like \"10/s\", \"600/m\" or \"1000/h\", got %q", s)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("\"rate\" must start with a positive number, got %q", s)
	}
	switch strings.TrimSpace(unit) {
	case "s":
		return v, nil
	case "m":
		return v / 60, nil
	case "h":
		return v / 3600, nil
	}
	return 0, fmt.Errorf("\"rate\" must be per s, m or h, got %q", s)
}

func decodeAudit(e *evaluator, raws []rawAudit, base string) *Audit {
	return single(e, raws, "audit", func(r *rawAudit) hcl.Range { return r.DefRange },
		func(raw *rawAudit) *Audit { return decodeAuditBlock(e, raw, base) })
}

func decodeAuditBlock(e *evaluator, raw *rawAudit, base string) *Audit {
	a := &Audit{Arguments: "hash"}
	n := len(e.diags)
	if s, ok := e.string(raw.File); ok {
		a.File = resolvePath(base, s)
	}
	if b, ok := e.bool(raw.Log); ok {
		a.Log = b
	}
	unreadable := len(e.diags) > n // file or log set but unreadable: already reported
	if s, ok := e.string(raw.Arguments); ok {
		switch s {
		case "hash", "full", "none":
			a.Arguments = s
		default:
			e.errorf(raw.Arguments, "Invalid arguments", "\"arguments\" must be \"hash\", \"full\" or \"none\", got %q.", s)
		}
	}
	if list, ok := e.stringList(raw.Redact); ok {
		a.Redact = list
	}
	if a.File == "" && !a.Log && !unreadable {
		e.diags = append(e.diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Audit goes nowhere",
			Detail: "The audit block has no file and log = false; set file = \"audit.jsonl\" or log = true.", Subject: raw.DefRange.Ptr()})
	}
	return a
}
