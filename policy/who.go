package policy

import (
	"github.com/mcp-proxy/mcp-proxy/principal"
)

// who selects principals by name or identity pattern and by group; empty selects
// everyone (rules, limits and selectors alike).
type who struct {
	principals []principalPattern
	groups     []string
}

// principalPattern is one entry of a principals list: a bare name pattern ("alice",
// "svc-*"), which matches the principal's name however it was established, or an
// identity pattern ("api_key:alice", "jwt:alice", "jwt:https://idp.example.com#svc-*"),
// which matches only principals established that way (and, for a JWT with an issuer,
// by that issuer) whose name matches the pattern after the prefix. "jwt:NAME" without
// an issuer matches the subject NAME of any issuer: the configuration (config's
// checkPrincipals) writes the jwt block's issuer into it, so that in a file it means
// that issuer's subject.
type principalPattern struct {
	via    string // "" for a bare name
	issuer string // exact; "" for any
	name   Glob
}

func newWho(principals, groups []string) (who, error) {
	w := who{groups: groups}
	for _, s := range principals {
		pp := principalPattern{}
		pat := s
		if via, iss, name, ok := principal.ParseIdentity(s); ok {
			pp.via, pp.issuer, pat = via, iss, name
		}
		g, err := CompileGlob(pat)
		if err != nil {
			return who{}, err
		}
		pp.name = g
		w.principals = append(w.principals, pp)
	}
	return w, nil
}

// match reports whether p is selected by the pattern.
func (pp *principalPattern) match(p *principal.Principal) bool {
	if pp.via != "" && (p.Via != pp.via || (pp.issuer != "" && p.Issuer != pp.issuer)) {
		return false
	}
	return pp.name.Match(p.Name)
}

func (w *who) matches(p *principal.Principal) bool {
	if len(w.principals) > 0 {
		if p == nil {
			return false
		}
		found := false
		for i := range w.principals {
			if w.principals[i].match(p) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if len(w.groups) == 0 {
		return true
	}
	for _, g := range w.groups {
		if p.InGroup(g) {
			return true
		}
	}
	return false
}
