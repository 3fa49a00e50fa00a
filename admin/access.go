package admin

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/principal"
)

// Who may do what on the admin listener (docs/operations.md, "Who may administer"):
//
//   - Without Auth (no auth block: a loopback listener, or insecure_no_auth), nobody is
//     authenticated: whoever reaches the listener is the local operator, who may do
//     everything.
//   - With Auth and Groups, the principals in one of the groups are the administrators:
//     they may do everything. Every other principal may only list, revoke and set its
//     own credentials; the status, the metrics, reload and lock are refused (403).
//   - With Auth and no Groups, any authenticated principal may read the status and the
//     metrics, reload and lock, as before admin groups existed; each still lists,
//     revokes and sets only its own credentials: nobody may touch another principal's.
//
// A refusal is a 403 whose body says why, and a warning in the log.

// caller is who asks the admin listener.
type caller struct {
	p     *principal.Principal // nil without Auth (the local operator)
	admin bool                 // may do everything
}

// callerOf is who asks r.
func (s *Server) callerOf(r *http.Request) caller {
	if s.opts.Auth == nil {
		return caller{admin: true}
	}
	p := principal.From(r.Context())
	return caller{p: p, admin: p != nil && slices.ContainsFunc(s.opts.Groups, p.InGroup)}
}

// ownKey is the identity p's credentials are kept under.
func ownKey(p *principal.Principal) string { return p.ID() }

// name is how refusals name the caller.
func (c caller) name() string {
	if c.p == nil {
		return "nobody"
	}
	return fmt.Sprintf("principal %q", ownKey(c.p))
}

// operator wraps what operates the proxy (status, metrics, reload, lock): with admin
// groups, only their members get through.
func (s *Server) operator(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Auth != nil && len(s.opts.Groups) > 0 {
			if c := s.callerOf(r); !c.admin {
				s.forbid(w, r, c, fmt.Sprintf("%s is not in the admin groups (%s): only their members may use %s %s; "+
					"every principal may list, revoke and set its own credentials (/credentials)",
					c.name(), strings.Join(s.opts.Groups, ", "), r.Method, r.URL.Path))
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// forbid answers 403 with why, and logs it.
func (s *Server) forbid(w http.ResponseWriter, r *http.Request, c caller, why string) {
	ev := s.opts.Log.Warn().Str("method", r.Method).Str("path", r.URL.Path)
	if c.p != nil {
		ev = ev.Str("principal", ownKey(c.p))
	}
	ev.Msg("admin: request refused: not an administrator")
	http.Error(w, why, http.StatusForbidden)
}

// whose decides whose credentials a request of c may concern, given the principal it
// names (asked, "" for none; resolved to an identity first: a bare name the
// configuration makes ambiguous is a 400): an administrator's, anyone's (asked as it is; "" when it
// named none); anyone else's, its own only (its own when it named none). ok is false
// when the request was refused (answered already).
func (s *Server) whose(w http.ResponseWriter, r *http.Request, c caller, asked, verb string) (string, bool) {
	if asked != "" {
		id, err := s.opts.Credentials.Resolve(asked)
		if err != nil {
			var ie *InputError
			if errors.As(err, &ie) {
				http.Error(w, ie.Msg, http.StatusBadRequest)
			} else {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
			return "", false
		}
		asked = id
	}
	if c.admin {
		if asked == "" && c.p != nil && verb != "list" {
			return ownKey(c.p), true
		}
		return asked, true
	}
	if c.p == nil { // cannot happen: Auth establishes a principal; never let it mean "allowed"
		s.forbid(w, r, c, "no principal: refused")
		return "", false
	}
	own := ownKey(c.p)
	if asked != "" && asked != own {
		groups := "set admin groups (the admin block's groups) to let some principals manage everyone's"
		if len(s.opts.Groups) > 0 {
			groups = "members of the admin groups (" + strings.Join(s.opts.Groups, ", ") + ") may " + verb + " anyone's"
		}
		s.forbid(w, r, c, fmt.Sprintf("%s may %s only its own credentials, not %q's; %s", c.name(), verb, asked, groups))
		return "", false
	}
	return own, true
}
