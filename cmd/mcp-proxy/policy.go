package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/auth"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// cmdHashKey reads an API key on stdin and prints the sha256 that auth's api_key
// blocks take, so that the configuration never holds the key itself.
func cmdHashKey(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	pos, err := parseFlags(newFlagSet("hash-key", stderr, nil), args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("hash-key", "reads the key on stdin and takes no arguments (got %q)", pos)
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && err != io.EOF {
		return err
	}
	key := strings.TrimRight(line, "\r\n")
	if len(key) < 16 {
		return exitError{code: 2, msg: "hash-key: give the key (at least 16 characters) on stdin, e.g. `openssl rand -hex 32 | tee key | mcp-proxy hash-key`"}
	}
	fmt.Fprintln(stdout, auth.HashToken(key))
	return nil
}

// newAuthenticator builds the HTTP front end's authentication from the auth block; nil
// when there is none. A listener bound beyond loopback without authentication is
// refused unless insecure_no_auth says otherwise.
func newAuthenticator(cfg *config.Config, l config.Listen, log zerolog.Logger) (*auth.Authenticator, error) {
	if cfg.Auth == nil {
		if problem := config.Unauthenticated(l); problem != "" { // a file's is reported by config at file:line; the bridge's flags reach this
			return nil, exitError{code: 1, msg: problem}
		}
		return nil, nil
	}
	ac := auth.Config{Resource: cfg.Auth.Resource}
	for _, k := range cfg.Auth.APIKeys {
		ac.APIKeys = append(ac.APIKeys, auth.APIKey{Name: k.Name, Groups: k.Groups, SHA256: k.SHA256, Token: k.Token})
	}
	if j := cfg.Auth.JWT; j != nil {
		ac.JWT = &auth.JWTConfig{Issuer: j.Issuer, JWKSURL: j.JWKSURL, Audience: j.Audience, PrincipalClaim: j.PrincipalClaim,
			GroupsClaim: j.GroupsClaim, RequiredScopes: j.RequiredScopes, Algorithms: j.Algorithms, Leeway: j.Leeway,
			AuthorizationServers: j.AuthorizationServers}
	}
	a, err := auth.New(ac, log)
	if err != nil {
		return nil, exitError{code: 1, msg: fmt.Sprintf("%s: auth: %v", cfg.Filename, err)}
	}
	return a, nil
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// principalFor is the principal `tools --as NAME` shows the catalogue for: an API key's
// groups when NAME is one, plus the groups given.
func principalFor(cfg *config.Config, name string, groups []string) *principal.Principal {
	p := &principal.Principal{Name: name, Groups: groups}
	if cfg.Auth != nil {
		for _, k := range cfg.Auth.APIKeys {
			if k.Name == name {
				p.Groups = append(p.Groups, k.Groups...)
			}
		}
	}
	if name == cfg.Proxy.Principal {
		p.Groups = append(p.Groups, cfg.Proxy.PrincipalGroups...)
	}
	return p
}

// visibleTools filters the catalogue to what p may see under r's policy.
func visibleTools(r *router.Router, p *principal.Principal, tools []router.Tool) []router.Tool {
	g := r.Guard()
	if g == nil {
		return tools
	}
	req := &router.Request{Principal: p}
	out := tools[:0:0]
	for _, t := range tools {
		if g.Visible(req, &router.Target{Kind: router.TargetTool, Name: t.Name, Original: t.OriginalName, Upstream: t.Upstream, Raw: t.Raw}) {
			out = append(out, t)
		}
	}
	return out
}
