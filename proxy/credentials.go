package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/credential"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/transport"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// credentials is what the proxy's per-user upstreams share across reloads: the token
// store and the providers, by upstream (docs/credentials.md).
type credentials struct {
	log   zerolog.Logger
	store credential.Store
	obs   credential.Observer // nil without metrics

	mu        sync.Mutex                      // guards providers and sources
	providers map[string]*credential.Provider // by upstream name
	sources   map[string]*credential.FileSource
}

// newCredentials makes the credentials of cfg's proxy: the store in memory.
func newCredentials(cfg *config.Config, log zerolog.Logger, obs credential.Observer) (*credentials, error) {
	return &credentials{log: log, store: credential.NewMemoryStore(), obs: obs,
		providers: map[string]*credential.Provider{}, sources: map[string]*credential.FileSource{}}, nil
}

// close releases the store.
func (c *credentials) close() error {
	if c == nil {
		return nil
	}
	return c.store.Close()
}

// provider makes the provider of uc's credentials (nil for mode "shared"), replacing
// the one a configuration before had for an upstream of the same name.
func (c *credentials) provider(uc config.Upstream) (*credential.Provider, error) {
	cc := uc.Credentials
	if !cc.PerUser() {
		return nil, nil
	}
	if c == nil {
		return nil, errors.New("per-user credentials need the proxy's credential store")
	}
	pc := credential.Config{Upstream: uc.Name, Mode: cc.Mode, Secrets: uc.Secrets}
	switch cc.Mode {
	case config.CredentialsSecret:
		if cc.SecretsFile != "" {
			src, err := credential.NewFileSource(cc.SecretsFile)
			if err != nil {
				return nil, err
			}
			pc.Source = src
		}
	case config.CredentialsExchange:
		client, err := clientOf(cc.ClientID, cc.ClientSecret, cc.ClientAuth, cc.PrivateKeyFile, cc.KeyID)
		if err != nil {
			return nil, err
		}
		x := &credential.ExchangeConfig{TokenEndpoint: cc.TokenEndpoint, Client: client, Resource: cc.Resource,
			Audience: cc.Audience, Scopes: cc.Scopes, SubjectTokenType: cc.SubjectTokenType}
		if j := cc.IDJAG; j != nil {
			jc, err := clientOf(j.ClientID, j.ClientSecret, j.ClientAuth, j.PrivateKeyFile, j.KeyID)
			if err != nil {
				return nil, err
			}
			x.IDJAG = &credential.IDJAGConfig{Issuer: j.Issuer, TokenEndpoint: j.TokenEndpoint, Client: jc}
		}
		pc.Exchange = x
	}
	p, err := credential.NewProvider(pc, credential.Deps{Store: c.store, Log: c.log, Observer: c.obs})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.providers[uc.Name] = p
	c.mu.Unlock()
	return p, nil
}

// clientOf is the proxy as a client of a token endpoint, as a credentials block says.
func clientOf(id, secret, method, keyFile, kid string) (credential.Client, error) {
	c := credential.Client{ID: id, Secret: secret, Method: method, KeyID: kid}
	if method == config.ClientAuthJWT {
		k, err := credential.LoadPrivateKey(keyFile)
		if err != nil {
			return c, err
		}
		c.Key = k
	}
	return c, nil
}

// perPrincipal makes the router's per-principal pool of uc: each principal's session
// is started as spec is, with the principal's credential (prov; nil for mode "shared"),
// and each call is admitted by prov first.
func (e *engine) perPrincipal(uc config.Upstream, spec upstream.Spec, prov *credential.Provider, log zerolog.Logger) *router.PerClient {
	pc := &router.PerClient{ByPrincipal: true, MaxSessions: uc.MaxSessions, IdleTimeout: uc.IdleTimeout}
	pc.NewFor = func(p *principal.Principal, caps json.RawMessage, events upstream.Events) router.Upstream {
		s := spec
		s.ClientCapabilities = caps
		s.Observer = nil // a principal's own session starts and stops with its use: not the upstream's state
		if prov != nil {
			principalSpec(&s, uc, prov, p)
		}
		return upstream.New(s, log.With().Str("principal", p.Name).Logger(), events)
	}
	if prov != nil {
		pc.Admit = func(ctx context.Context, req *router.Request, params json.RawMessage) (router.Admission, error) {
			call := credential.Call{Method: req.Method, Params: params, Modern: req.Modern}
			if req.Meta != nil {
				call.Capabilities = req.Meta.Capabilities
			}
			a, err := prov.Admit(ctx, req.Principal, call)
			if err != nil {
				var ref *credential.Refusal
				if errors.As(err, &ref) {
					if ref.Result != nil {
						return router.Admission{}, &router.ResultError{Result: ref.Result, Err: ref}
					}
					return router.Admission{}, ref.Err
				}
				return router.Admission{}, err
			}
			return router.Admission{Params: a.Params, Mode: prov.Mode(), Subject: a.Subject}, nil
		}
	}
	return pc
}

// principalSpec gives s, the spec of p's own session, p's credential: its secrets in
// the env and headers (mode "secret"), or its Authorizer in place of the upstream's
// shared OAuth client (modes "exchange" and "oauth").
func principalSpec(s *upstream.Spec, uc config.Upstream, prov *credential.Provider, p *principal.Principal) {
	s.OAuth = nil // never the upstream's shared grant
	if prov.Mode() != credential.ModeSecret {
		s.Authorizer = prov.Authorizer(p)
		return
	}
	lookup, ok := prov.Secrets(p.Name)
	var err error
	if !ok {
		err = fmt.Errorf("principal %q has no secrets for upstream %q", p.Name, uc.Name)
	}
	expand := func(m map[string]string) map[string]string {
		if m == nil || err != nil {
			return nil
		}
		out := make(map[string]string, len(m))
		for k, v := range m {
			var x error
			if out[k], x = config.ExpandSecrets(v, lookup); x != nil {
				err = fmt.Errorf("upstream %q, principal %q: %w", uc.Name, p.Name, x)
			}
		}
		return out
	}
	s.Env, s.Headers = expand(uc.Env), expand(uc.Headers)
	if err != nil {
		// Never started without the principal's secrets: every start attempt fails.
		failure := err
		s.Dial = func(context.Context) (transport.Link, error) { return nil, failure }
	}
}

// catalogueSpec is spec made for the upstream's own session of a per-user upstream,
// which lists the catalogue and acts as no principal: without the env and headers that
// name a principal's secret, and with the shared OAuth client only when an oauth block
// asks for it (a client_credentials grant, say), never the interactive flow.
func catalogueSpec(spec upstream.Spec, uc config.Upstream) upstream.Spec {
	if !uc.Credentials.PerUser() {
		return spec
	}
	spec.Env, spec.Headers = config.WithoutSecrets(uc.Env), config.WithoutSecrets(uc.Headers)
	if uc.OAuth == nil {
		spec.OAuth = nil
	}
	return spec
}
