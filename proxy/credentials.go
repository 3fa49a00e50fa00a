package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/admin"
	"github.com/mcp-proxy/mcp-proxy/cluster"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/credential"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// credentials is what the proxy's per-user upstreams share across reloads: the token
// store and the providers, by upstream (docs/credentials.md).
type credentials struct {
	log   zerolog.Logger
	store credential.Store
	obs   credential.Observer // nil without metrics

	ids atomic.Pointer[identities] // whose a name is, by the running configuration

	mu        sync.Mutex                      // guards providers and flows
	providers map[string]*credential.Provider // by upstream name
	flows     *credential.Flows               // the per-user authorizations; nil until an upstream is in mode "oauth"

	// What applies the other replicas' changes (listen): closeSessions closes a
	// principal's upstream sessions; stop ends the subscription and done says it ended.
	closeSessions func(upstream, id string) int
	stop          context.CancelFunc
	done          chan struct{}
}

// newCredentials makes the credentials of cfg's proxy over its token store: in Redis,
// sealed with the store's key, with a cluster block (when the file names one: a
// cluster's per-user upstreams need it, as config checks); in an encrypted file with a
// token_store file; in memory otherwise. It connects to nothing yet.
func newCredentials(cfg *config.Config, log zerolog.Logger, obs credential.Observer) (*credentials, error) {
	c := &credentials{log: log, obs: obs, providers: map[string]*credential.Provider{}}
	c.ids.Store(identitiesOf(cfg))
	key, previous := cfg.StoreKey()
	switch {
	case cfg.Cluster != nil && key != "":
		sealer, err := credential.NewSealer(key, previous...)
		if err != nil {
			return nil, err
		}
		client, err := cluster.NewClient(cfg.Cluster)
		if err != nil {
			return nil, err
		}
		c.store = cluster.NewRedisCredentials(client, cfg.Cluster.KeyPrefix, sealer)
		log.Debug().Msg("credentials: the token store is in redis, sealed")
	case cfg.TokenStore != nil && cfg.TokenStore.File != "":
		sealer, err := credential.NewSealer(key, previous...)
		if err != nil {
			return nil, err
		}
		fs, err := credential.OpenFileStore(cfg.TokenStore.File, sealer)
		if err != nil {
			return nil, err
		}
		c.store = fs
		log.Debug().Str("file", cfg.TokenStore.File).Msg("credentials: the token store is an encrypted file")
	default:
		c.store = credential.NewMemoryStore()
	}
	return c, nil
}

// close stops hearing the other replicas' changes and releases the store.
func (c *credentials) close() error {
	if c == nil {
		return nil
	}
	if c.stop != nil {
		c.stop()
		<-c.done
	}
	return c.store.Close()
}

// listen makes this process apply the changes the other processes sharing the store
// publish (a store that is a credential.Broadcaster: Redis), until close: a revocation
// drops what is cached of the principal's grants and closes its sessions
// (closeSessions: the router's ClosePrincipal) at once, on every replica. Without such a
// store there is nobody else to hear.
func (c *credentials) listen(closeSessions func(upstream, id string) int) {
	if c == nil || c.stop != nil {
		return
	}
	b, ok := c.store.(credential.Broadcaster)
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.closeSessions, c.stop, c.done = closeSessions, cancel, make(chan struct{})
	go func() {
		defer close(c.done)
		b.Subscribe(ctx, c.apply, c.resync)
	}()
}

// someProviders are the providers of upstream ("" for every one).
func (c *credentials) someProviders(upstream string) []*credential.Provider {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*credential.Provider
	for name, p := range c.providers {
		if upstream == "" || name == upstream {
			out = append(out, p)
		}
	}
	return out
}

// apply applies a change another replica made.
func (c *credentials) apply(ch credential.Change) {
	switch ch.Kind {
	case credential.ChangeRevoked:
		for _, p := range c.someProviders(ch.Upstream) {
			p.Forget(ch.Principal)
		}
		n := c.closeSessions(ch.Upstream, ch.Principal)
		c.log.Info().Str("principal", ch.Principal).Str("upstream", ch.Upstream).Int("sessions_closed", n).
			Msg("credentials: a principal's grants were revoked through another replica")
	case credential.ChangeSecret:
		for _, p := range c.someProviders(ch.Upstream) {
			p.Forget(ch.Principal)
		}
	case credential.ChangeAuthorized:
		c.mu.Lock()
		fl := c.flows
		c.mu.Unlock()
		if fl != nil {
			fl.Complete(ch.Flow)
		}
	}
}

// resync drops everything cached: changes of the other replicas may have been missed.
func (c *credentials) resync() {
	for _, p := range c.someProviders("") {
		p.ForgetAll()
	}
	c.log.Info().Msg("credentials: subscribed to the other replicas' changes again; cached credentials dropped")
}

// publish tells the other replicas of ch (nothing to do without a shared store). A
// failure is returned as a warning for whoever made the change: it applies here and in
// the store already, and the other replicas catch up as their caches expire.
func (c *credentials) publish(ctx context.Context, ch credential.Change) string {
	b, ok := c.store.(credential.Broadcaster)
	if !ok {
		return ""
	}
	if err := b.Publish(ctx, ch); err != nil {
		c.log.Warn().Err(err).Str("principal", ch.Principal).Msg("credentials: the other replicas could not be told of a change")
		return "the other replicas could not be told at once (" + err.Error() + "): they stop using what they cache as it expires"
	}
	return ""
}

// provider makes the provider of uc's credentials (nil for mode "shared"), replacing
// the one a configuration before had for an upstream of the same name.
func (c *credentials) provider(uc config.Upstream, name string) (*credential.Provider, error) {
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
			src, err := credential.NewFileSource(cc.SecretsFile, func(k string) (string, error) { return c.ids.Load().secretsKey(k) })
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
	case config.CredentialsOAuth:
		client, err := clientOf(cc.ClientID, cc.ClientSecret, cc.ClientAuth, cc.PrivateKeyFile, cc.KeyID)
		if err != nil {
			return nil, err
		}
		pc.OAuth = &credential.OAuthConfig{URL: uc.URL, Client: client, ClientMetadataURL: cc.ClientMetadataURL, ClientName: name,
			Scopes: cc.Scopes, Resource: cc.Resource, TokenEndpoint: cc.TokenEndpoint, RedirectURL: cc.RedirectURL}
	}
	deps := credential.Deps{Store: c.store, Log: c.log, Observer: c.obs}
	if cc.Mode == config.CredentialsOAuth {
		deps.Flows = c.theFlows()
	}
	p, err := credential.NewProvider(pc, deps)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.providers[uc.Name] = p
	c.mu.Unlock()
	return p, nil
}

// theFlows returns the per-user authorizations, made on first use.
func (c *credentials) theFlows() *credential.Flows {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flows == nil {
		c.flows = credential.NewFlows(c.store, c.log)
	}
	return c.flows
}

// handler serves the per-user authorizations' paths (the links and the callback, which
// browsers reach without the front end's credentials) in front of next, once an upstream
// is in mode "oauth"; next alone otherwise.
func (c *credentials) handler(next http.Handler) http.Handler {
	if c == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		fl := c.flows
		c.mu.Unlock()
		if fl != nil && (r.URL.Path == credential.CallbackPath || strings.HasPrefix(r.URL.Path, credential.ConnectPath)) {
			fl.Handler(next).ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
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
		return upstream.New(s, log.With().Str("principal", p.ID()).Logger(), events)
	}
	if prov != nil {
		pc.Admit = func(ctx context.Context, req *router.Request, params json.RawMessage) (router.Admission, error) {
			call := credential.Call{Method: req.Method, Params: params, Modern: req.Modern}
			if req.Session != nil {
				call.Client = req.Session // told when an authorization it was sent to completes
			}
			if req.Meta != nil {
				call.Capabilities = req.Meta.Capabilities
			}
			a, err := prov.Admit(ctx, req.Principal, call)
			if err != nil {
				refused := router.Admission{Mode: prov.Mode()}
				var ref *credential.Refusal
				if errors.As(err, &ref) {
					if ref.Result != nil {
						return refused, &router.ResultError{Result: ref.Result, Err: ref}
					}
					return refused, ref.Err
				}
				return refused, err
			}
			return router.Admission{Params: a.Params, Mode: prov.Mode(), Subject: a.Subject}, nil
		}
	}
	return pc
}

// principalSpec gives s, the spec of p's own session, p's credential: its secrets in
// the env and headers, read at each start (mode "secret"), or its Authorizer in place of
// the upstream's shared OAuth client (modes "exchange" and "oauth").
func principalSpec(s *upstream.Spec, uc config.Upstream, prov *credential.Provider, p *principal.Principal) {
	s.OAuth = nil // never the upstream's shared grant
	if prov.Mode() != credential.ModeSecret {
		s.Authorizer = prov.Authorizer(p)
		return
	}
	s.Prepare = secretsPreparer(uc, prov, p.ID())
}

// secretsPreparer is the Prepare of a session that runs with who's secrets: uc's env
// and headers with who's values for their secret() references, looked up at each start;
// a start without all of them fails.
func secretsPreparer(uc config.Upstream, prov *credential.Provider, who string) func(context.Context) (map[string]string, map[string]string, error) {
	return func(ctx context.Context) (map[string]string, map[string]string, error) {
		lookup, err := prov.SecretsOf(ctx, who)
		if err != nil {
			return nil, nil, err
		}
		expand := func(m map[string]string) (map[string]string, error) {
			if m == nil {
				return nil, nil
			}
			out := make(map[string]string, len(m))
			for k, v := range m {
				x, err := config.ExpandSecrets(v, lookup)
				if err != nil {
					return nil, fmt.Errorf("upstream %q, principal %q: %w", uc.Name, who, err)
				}
				out[k] = x
			}
			return out, nil
		}
		env, err := expand(uc.Env)
		if err != nil {
			return nil, nil, err
		}
		headers, err := expand(uc.Headers)
		return env, headers, err
	}
}

// catalogueSpec is spec made for the upstream's own session of a per-user upstream,
// which lists the catalogue and acts as no principal: without the env and headers that
// name a principal's secret (or, with catalogue_principal, with that service
// principal's), and with the shared OAuth client only when an oauth block asks for it
// (a client_credentials grant, say), never the interactive flow.
func catalogueSpec(spec upstream.Spec, uc config.Upstream, prov *credential.Provider, c *credentials) upstream.Spec {
	if !uc.Credentials.PerUser() {
		return spec
	}
	spec.Env, spec.Headers = config.WithoutSecrets(uc.Env), config.WithoutSecrets(uc.Headers)
	if cp := uc.Credentials.CataloguePrincipal; cp != "" && prov != nil && prov.Mode() == credential.ModeSecret && c != nil {
		if id, ok := c.ids.Load().canonical(cp); ok { // config has checked it is an identity
			spec.Prepare = secretsPreparer(uc, prov, id)
		}
	}
	if uc.OAuth == nil {
		spec.OAuth = nil
	}
	return spec
}

// The metrics' credential series are the providers' Observer (metrics does not import
// credential: this is where the two meet).
var _ credential.Observer = (*metrics.Credentials)(nil)

// credentials is the observer of the per-user credentials: the metrics' series, for the
// per-user upstreams of cfg; nil (never a typed nil) without metrics.
func (o *observers) credentials(cfg *config.Config) credential.Observer {
	if o == nil || o.metrics == nil {
		return nil
	}
	var names []string
	for _, u := range cfg.Upstreams {
		if u.Credentials.PerUser() && !u.Disabled {
			names = append(names, u.Name)
		}
	}
	return o.metrics.Credentials(names...)
}

// credentialAdmin lists and revokes the principals' grants for the admin listener.
type credentialAdmin struct {
	c *credentials
	r *router.Router
}

var _ admin.Credentials = (*credentialAdmin)(nil)

// List implements admin.Credentials: what the store holds (grants of upstreams no
// longer configured too, so that they can be revoked).
func (a *credentialAdmin) List(ctx context.Context, upstream, principal string) ([]admin.Grant, error) {
	l, err := a.c.store.List(ctx, upstream, principal)
	if err != nil {
		return nil, err
	}
	out := make([]admin.Grant, len(l))
	for i, g := range l {
		out[i] = admin.Grant{Upstream: g.Upstream, Principal: g.Principal, Mode: g.Mode, Subject: g.Subject, Scopes: g.Scopes,
			Issuer: g.Issuer, Expiry: g.Expiry, Refresh: g.Refresh, Secrets: g.SecretKeys, Created: g.Created, Updated: g.Updated}
	}
	return out, nil
}

// Revoke implements admin.Credentials: the principal's grants end (at the authorization
// server too, where it offers revocation), what this process caches of them is dropped,
// and the principal's sessions with those upstreams close.
func (a *credentialAdmin) Revoke(ctx context.Context, upstream, principal string) (*admin.Revoked, error) {
	out := &admin.Revoked{Principal: principal, Upstreams: []string{}}
	a.c.mu.Lock()
	provs := make(map[string]*credential.Provider, len(a.c.providers))
	for name, p := range a.c.providers {
		provs[name] = p
	}
	a.c.mu.Unlock()
	l, err := a.c.store.List(ctx, upstream, principal)
	if err != nil {
		return nil, err
	}
	done := map[string]bool{}
	for _, g := range l {
		if p := provs[g.Upstream]; p != nil {
			if _, err := p.Revoke(ctx, principal); err != nil {
				return out, err
			}
		} else if err := a.c.store.Delete(ctx, g.Upstream, principal); err != nil {
			return out, err
		}
		done[g.Upstream] = true
		out.Upstreams = append(out.Upstreams, g.Upstream)
	}
	for name, p := range provs { // what the process caches without a stored grant (mode "secret" from a file)
		if (upstream == "" || upstream == name) && !done[name] {
			p.Forget(principal)
		}
	}
	out.Sessions = a.r.ClosePrincipal(upstream, principal)
	out.Warning = a.c.publish(ctx, credential.Change{Kind: credential.ChangeRevoked, Upstream: upstream, Principal: principal})
	return out, nil
}

// Summary implements admin.Credentials: each per-user upstream's mode, and how many
// principals have a grant for it in the store (or, when the store cannot be read, in
// this process's cache).
func (a *credentialAdmin) Summary(ctx context.Context) map[string]admin.CredentialSummary {
	a.c.mu.Lock()
	provs := make(map[string]*credential.Provider, len(a.c.providers))
	for name, p := range a.c.providers {
		provs[name] = p
	}
	a.c.mu.Unlock()
	if len(provs) == 0 {
		return nil
	}
	counts := map[string]int{}
	l, err := a.c.store.List(ctx, "", "")
	for _, g := range l {
		counts[g.Upstream]++
	}
	out := make(map[string]admin.CredentialSummary, len(provs))
	for name, p := range provs {
		n := counts[name]
		if err != nil || (p.Mode() == credential.ModeSecret && n == 0) {
			n = p.Cached() // a secrets file: the principals whose secrets were looked up
		}
		out[name] = admin.CredentialSummary{Mode: p.Mode(), Principals: n}
	}
	return out
}

// Resolve implements admin.Credentials: the identity an operator means by name.
func (a *credentialAdmin) Resolve(name string) (string, error) { return a.c.ids.Load().resolve(name) }

// SetSecret implements admin.Credentials: the principal's secret goes into the store's
// grant of (upstream, principal), for an upstream in mode "secret" that has no secrets
// file. It applies to the principal's next session (a running one keeps its
// environment: revoke closes it).
func (a *credentialAdmin) SetSecret(ctx context.Context, upstream, principalName, name, value string) error {
	a.c.mu.Lock()
	p := a.c.providers[upstream]
	a.c.mu.Unlock()
	switch {
	case p == nil || p.Mode() != credential.ModeSecret:
		return &admin.InputError{Msg: fmt.Sprintf("upstream %q is not in credentials mode %q", upstream, credential.ModeSecret)}
	case p.HasSource():
		return &admin.InputError{Msg: fmt.Sprintf("upstream %q reads its secrets from its secrets_file", upstream)}
	case principalName == "":
		return &admin.InputError{Msg: "principal is required"}
	case !config.ValidSecretName(name):
		return &admin.InputError{Msg: "name must be letters, digits, '_', '.' and '-' (1 to 128)"}
	case strings.ContainsAny(value, "\x00\r\n"):
		return &admin.InputError{Msg: "a secret may not hold a NUL byte or a line break"}
	}
	if err := p.SetSecret(ctx, principalName, name, value); err != nil {
		return err
	}
	a.c.publish(ctx, credential.Change{Kind: credential.ChangeSecret, Upstream: upstream, Principal: principalName})
	return nil
}
