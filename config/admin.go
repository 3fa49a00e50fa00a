package config

import (
	"net"
	"slices"

	"github.com/hashicorp/hcl/v2"
)

// DefaultAdminAddress is where the admin listener binds when its block gives no address.
const DefaultAdminAddress = "127.0.0.1:9090"

// Admin is the admin block: the operations listener (metrics, health, readiness, the
// status page), separate from the MCP listener and served in stdio and HTTP mode alike.
// Without the block there is no admin listener.
type Admin struct {
	Address string // host:port; default DefaultAdminAddress (loopback)
	// InsecureNoAuth lets the listener run on a non-loopback address without an auth
	// block. With an auth block, the admin endpoints take the same credentials as the MCP
	// endpoint (an API key or a JWT) whatever the address.
	InsecureNoAuth bool
	// Groups are the admin groups (docs/operations.md, "Who may administer"): with an
	// auth block, the principals in one of them may do everything on the listener
	// (status, metrics, reload, lock, every principal's credentials), and every other
	// principal only list, revoke and set its own credentials. Nil: any authenticated
	// principal may read the status and metrics, reload and lock, as before groups
	// existed, and still only its own credentials. Without an auth block there are no
	// principals: whoever reaches the listener is the operator, who may do everything.
	Groups    []string
	DeclRange hcl.Range
}

type rawAdmin struct {
	Address        *hcl.Attribute `hcl:"address,optional"`
	InsecureNoAuth *hcl.Attribute `hcl:"insecure_no_auth,optional"`
	Groups         *hcl.Attribute `hcl:"groups,optional"`

	DefRange hcl.Range `hcl:",def_range"`
}

// decodeAdmin decodes the admin blocks (at most one); auth is the decoded auth block,
// which decides whether a non-loopback address needs insecure_no_auth.
func decodeAdmin(e *evaluator, raws []rawAdmin, auth *Auth) *Admin {
	return single(e, raws, "admin", func(r *rawAdmin) hcl.Range { return r.DefRange },
		func(raw *rawAdmin) *Admin { return decodeAdminBlock(e, raw, auth) })
}

func decodeAdminBlock(e *evaluator, raw *rawAdmin, auth *Auth) *Admin {
	a := &Admin{Address: DefaultAdminAddress, DeclRange: raw.DefRange}
	addrOK := true
	if s, ok := e.string(raw.Address); ok {
		if _, _, err := net.SplitHostPort(s); err != nil {
			e.errorf(raw.Address, "Invalid address", "\"address\" must be host:port, such as %q: %v.", DefaultAdminAddress, err)
			addrOK = false
		}
		a.Address = s
	}
	if b, ok := e.bool(raw.InsecureNoAuth); ok {
		a.InsecureNoAuth = b
	}
	if addrOK && raw.Address != nil && auth == nil && !a.InsecureNoAuth && !IsLoopback(a.Address) {
		e.errorf(raw.Address, "Admin listener without authentication",
			"The admin listener at %q would serve metrics and status beyond this machine without authentication: "+
				"bind it to 127.0.0.1, add an auth block (its API keys and JWTs then guard the admin endpoints too), "+
				"or set insecure_no_auth = true if something in front authenticates.", a.Address)
	}
	if raw.Groups != nil {
		a.Groups = adminGroups(e, raw.Groups, auth)
	}
	return a
}

// adminGroups reads and checks the admin block's groups: they name groups of the
// principals the auth block authenticates, so they need one, and with API keys only, at
// least one key must be in one of them (else nobody could administer).
func adminGroups(e *evaluator, attr *hcl.Attribute, auth *Auth) []string {
	groups, ok := e.stringList(attr)
	if !ok {
		return nil
	}
	if len(groups) == 0 || slices.Contains(groups, "") {
		e.errorf(attr, "Invalid admin groups", "\"groups\" must name at least one group, and no empty one: "+
			"remove it to let every authenticated principal operate the proxy (each still manages only its own credentials).")
		return nil
	}
	if auth == nil {
		e.errorf(attr, "Admin groups without authentication",
			"\"groups\" names groups of the principals the auth block authenticates, and there is no auth block: "+
				"without one, whoever reaches the admin listener is its operator. Add an auth block or remove groups.")
		return nil
	}
	if auth.JWT == nil && !slices.ContainsFunc(auth.APIKeys, func(k APIKey) bool {
		return slices.ContainsFunc(k.Groups, func(g string) bool { return slices.Contains(groups, g) })
	}) {
		e.errorf(attr, "Nobody may administer",
			"No api_key is in one of the admin groups %q, and no jwt block may bring a principal in: nobody could reload, lock or "+
				"manage another principal's credentials. Give an api_key groups = [%q].", groups, groups[0])
	}
	return groups
}

// IsLoopback reports whether the host of a host:port address is a loopback address or
// "localhost". An empty host (":9090", every interface) is not loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}
