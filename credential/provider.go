package credential

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/transport"
)

// Modes (config.Credentials*).
const (
	ModeExchange = "exchange"
	ModeOAuth    = "oauth"
	ModeSecret   = "secret"
)

// Events a provider reports to its Observer.
const (
	EventExchange    = "exchange"     // a token exchange succeeded
	EventRefresh     = "refresh"      // a refresh (or a re-exchange after a 401) succeeded
	EventFailure     = "failure"      // obtaining a credential failed
	EventPending     = "pending"      // a principal was sent to authorize in a browser
	EventAuthorized  = "authorized"   // a principal's authorization completed
	EventUnavailable = "unavailable"  // a call was refused: no usable credential
	EventCacheMiss   = "store_lookup" // a call read the store (a miss of this process's cache)
)

// Observer is told of what a provider does (metrics). It must not block.
type Observer interface {
	CredentialEvent(upstream, event string)
}

// Config is one upstream's credentials, as a Provider uses them.
type Config struct {
	Upstream string
	Mode     string // ModeExchange, ModeOAuth or ModeSecret
	// Secrets are the names the upstream's env and headers refer to (ModeSecret): a
	// principal without every one of them is not served.
	Secrets []string
	// Source holds the principals' secrets (ModeSecret); nil: the Store does.
	Source SecretSource
	// Exchange configures ModeExchange.
	Exchange *ExchangeConfig
	// OAuth configures ModeOAuth.
	OAuth *OAuthConfig
}

// Deps are what every provider of one proxy shares.
type Deps struct {
	Store    Store
	Log      zerolog.Logger
	Observer Observer // nil: nobody
	// Flows runs the per-user authorizations of ModeOAuth (links, callback); required
	// for that mode.
	Flows *Flows
	// Now is the clock; nil is time.Now (tests pass a fake one).
	Now func() time.Time
}

// Provider resolves the credential of each principal for one upstream. The router's
// per-principal pool asks Admit before each call; the principal's session asks its
// Authorizer for the Authorization of each request (HTTP), or, in mode "secret", was
// started with the principal's secrets. A principal's credential is cached in this
// process (a cache hit touches no store); the Store is read on a miss, written when a
// credential is obtained, and shared by the replicas of a cluster. Safe for concurrent
// use.
type Provider struct {
	cfg   Config
	deps  Deps
	log   zerolog.Logger
	strat strategy // nil for ModeSecret

	handles sync.Map     // principal name → *handle
	made    atomic.Int64 // handles made (see prune)
}

// strategy is what a token mode does to obtain and renew a principal's token.
type strategy interface {
	// obtain returns a usable token for h's principal (from the store, an exchange, a
	// refresh), or a *Refusal. call is the call that wants it (nil for a request of the
	// principal's session that is not a call).
	obtain(ctx context.Context, h *handle, call *Call) (*token, error)
	// renew replaces sent, which the upstream refused.
	renew(ctx context.Context, h *handle, sent *token) (*token, error)
}

// recheck is how long a cached grant of mode "oauth" is served before the store is read
// again: a grant revoked through another replica stops being used within it.
const recheck = 30 * time.Second

// skew is how long before its expiry a token is no longer sent: it is renewed first.
const skew = 30 * time.Second

// NewProvider returns the provider of cfg.
func NewProvider(cfg Config, deps Deps) (*Provider, error) {
	if deps.Store == nil {
		return nil, errors.New("credential: no store")
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	p := &Provider{cfg: cfg, deps: deps, log: deps.Log.With().Str("upstream", cfg.Upstream).Str("credentials", cfg.Mode).Logger()}
	switch cfg.Mode {
	case ModeSecret:
	case ModeExchange:
		if cfg.Exchange == nil {
			return nil, errors.New("credential: mode exchange without its configuration")
		}
		x, err := newExchanger(cfg.Upstream, cfg.Exchange)
		if err != nil {
			return nil, err
		}
		p.strat = x
	case ModeOAuth:
		if cfg.OAuth == nil || deps.Flows == nil {
			return nil, errors.New("credential: mode oauth without its configuration or authorization flows")
		}
		o, err := newUserOAuth(cfg.Upstream, cfg.OAuth, deps.Flows, p.log)
		if err != nil {
			return nil, err
		}
		o.p = p
		p.strat = o
	default:
		return nil, fmt.Errorf("credential: unknown mode %q", cfg.Mode)
	}
	return p, nil
}

// Mode is the provider's credential mode.
func (p *Provider) Mode() string { return p.cfg.Mode }

// Upstream is the name of the provider's upstream.
func (p *Provider) Upstream() string { return p.cfg.Upstream }

// handle is one principal's credential for the provider's upstream, as this process
// caches it.
type handle struct {
	p    *Provider
	name string

	who     atomic.Pointer[principal.Principal] // the principal of the last call: its token is what an exchange presents
	tok     atomic.Pointer[token]               // the cached token; nil: none
	secrets atomic.Pointer[map[string]string]   // mode "secret": the principal's secrets as last looked up
	checked atomic.Int64                        // when the store was last read (unix nanoseconds)

	mu     sync.Mutex // guards flight
	flight *flight    // the obtain or renew in progress
}

// stored reads the principal's grant of upstream from the store (a cache miss): the
// grant when it was made in mode, and its token when that is usable now.
func (h *handle) stored(ctx context.Context, upstream, mode string) (*Grant, *token, error) {
	p := h.p
	p.event(EventCacheMiss)
	g, err := p.deps.Store.Get(ctx, upstream, h.name)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the token store: %w", err)
	}
	if g == nil || g.Mode != mode {
		return nil, nil, nil
	}
	if t := tokenOf(g); t.usable(p.deps.Now()) {
		return g, t, nil
	}
	return g, nil, nil
}

// token is one access token of a principal.
type token struct {
	bearer  *transport.Bearer
	expiry  time.Time // zero: unknown
	until   time.Time // Grant.Until: not sent from then on, whatever its expiry; zero: none
	margin  time.Duration
	subject string // whom the upstream sees, when known
	grant   *Grant // what the store holds (its refresh token)
}

// usable reports whether t may be sent at now: it does not expire within its margin
// (skew, or a quarter of its lifetime for a short-lived token), and the principal's own
// token it was exchanged for has not expired (until; no margin: the upstream's token
// itself lives on, the limit is the proxy's).
func (t *token) usable(now time.Time) bool {
	return t != nil && (t.expiry.IsZero() || now.Add(t.margin).Before(t.expiry)) && (t.until.IsZero() || now.Before(t.until))
}

type flight struct {
	done chan struct{}
	tok  *token
	err  error
}

// handle returns the principal's handle, making it on first use.
func (p *Provider) handle(name string) *handle {
	if h, ok := p.handles.Load(name); ok {
		return h.(*handle)
	}
	h, loaded := p.handles.LoadOrStore(name, &handle{p: p, name: name})
	if !loaded && p.made.Add(1)%pruneEvery == 0 {
		p.prune()
	}
	return h.(*handle)
}

// pruneEvery is how many new handles are made between two prunes, and pruneAfter how
// long a handle is kept unused: the cache of a proxy that has seen many principals over
// time does not grow without bound.
const (
	pruneEvery = 1024
	pruneAfter = time.Hour
)

// prune drops the handles not used for pruneAfter whose token has expired (or that have
// none). A principal's session that still holds one goes on with it; the principal's next
// call makes a new one, read from the store.
func (p *Provider) prune() {
	now := p.deps.Now()
	p.handles.Range(func(k, v any) bool {
		h := v.(*handle)
		if t := h.tok.Load(); (t == nil || !t.usable(now)) && now.UnixNano()-h.checked.Load() > int64(pruneAfter) {
			p.handles.Delete(k)
		}
		return true
	})
}

// Admitted is what Admit lets through.
type Admitted struct {
	Params  []byte // the params to send, when Admit changed them (nil: unchanged)
	Subject string // whom the upstream sees, when known
}

// Admit decides whether who may call the upstream now: it has a usable credential (one
// cached, else one read from the store, exchanged, refreshed), and a call of mode
// "oauth" without one is answered with the link that lets the principal authorize
// (see authorizationRequired). Its error is a *Refusal, the call's answer; a call is
// never given another principal's credential, nor the upstream's shared one. On a cache
// hit it reads no store and allocates nothing.
func (p *Provider) Admit(ctx context.Context, who *principal.Principal, call Call) (Admitted, error) {
	if who == nil {
		return Admitted{}, unavailable(p.cfg.Upstream, "it acts as the calling principal, and this call is made for nobody")
	}
	h := p.handle(who.ID())
	if p.cfg.Mode == ModeSecret {
		if err := h.admitSecrets(ctx); err != nil {
			p.event(EventUnavailable)
			return Admitted{}, err
		}
		return Admitted{Subject: who.ID()}, nil
	}
	if h.who.Load() != who {
		h.who.Store(who)
	}
	now := p.deps.Now()
	t := h.tok.Load()
	if t.usable(now) && (p.cfg.Mode != ModeOAuth || now.UnixNano()-h.checked.Load() < int64(recheck)) {
		return p.admitted(t, call), nil
	}
	t, err := p.obtain(ctx, h, call)
	if err != nil {
		var ref *Refusal
		if !errors.As(err, &ref) {
			ref = failed(p.cfg.Upstream, err)
		}
		if ref.Err != nil && ref.Err.Code == mcp.CodeCredentialFailed {
			p.event(EventFailure)
		} else if !errors.Is(ref, errAuthorizationRequired) {
			p.event(EventUnavailable)
		}
		return Admitted{}, ref
	}
	return p.admitted(t, call), nil
}

// obtain is Admit's slow path: the principal's token obtained (one flight at a time).
// It is a function of its own so that the fast path does not move call to the heap.
func (p *Provider) obtain(ctx context.Context, h *handle, call Call) (*token, error) {
	return h.get(ctx, func(ctx context.Context) (*token, error) { return p.strat.obtain(ctx, h, &call) })
}

// admitted is what Admit returns for a call that t serves: the call's params without
// the proxy's own input response (mode "oauth": the retry after an input_required).
func (p *Provider) admitted(t *token, call Call) Admitted {
	a := Admitted{Subject: t.subject}
	if p.cfg.Mode == ModeOAuth && call.Modern && len(call.Params) > 0 {
		if out := stripOwnInput(call.Params); len(out) != len(call.Params) {
			a.Params = out
		}
	}
	return a
}

// get runs fn, or joins the run in progress: one obtain or renew at a time per
// principal, whatever the number of calls that want it. The run is not cancelled by
// the caller that started it: the others wait for it too.
func (h *handle) get(ctx context.Context, fn func(context.Context) (*token, error)) (*token, error) {
	h.mu.Lock()
	f := h.flight
	if f == nil {
		f = &flight{done: make(chan struct{})}
		h.flight = f
		h.mu.Unlock()
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		f.tok, f.err = fn(fctx)
		cancel()
		if f.err == nil {
			h.tok.Store(f.tok)
			h.checked.Store(h.p.deps.Now().UnixNano())
		}
		h.mu.Lock()
		h.flight = nil
		h.mu.Unlock()
		close(f.done)
		return f.tok, f.err
	}
	h.mu.Unlock()
	select {
	case <-f.done:
		return f.tok, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Authorizer returns what gives the requests of who's session with the upstream their
// Authorization (modes "exchange" and "oauth"); nil for mode "secret".
func (p *Provider) Authorizer(who *principal.Principal) transport.Authorizer {
	if p.strat == nil {
		return nil
	}
	return p.handle(who.ID())
}

var _ transport.Authorizer = (*handle)(nil)

// Authorization implements transport.Authorizer: the principal's cached token, else one
// obtained now; an error (a *jsonrpc.Error for the client) when there is none.
func (h *handle) Authorization(ctx context.Context) (*transport.Bearer, error) {
	t := h.tok.Load()
	if t.usable(h.p.deps.Now()) {
		return t.bearer, nil
	}
	t, err := h.get(ctx, func(ctx context.Context) (*token, error) {
		if cur := h.tok.Load(); cur != nil && cur.grant != nil && !cur.grant.RefreshToken.IsZero() {
			return h.p.strat.renew(ctx, h, cur) // expired: refresh it
		}
		return h.p.strat.obtain(ctx, h, nil)
	})
	if err != nil {
		return nil, h.p.requestError(err)
	}
	return t.bearer, nil
}

// Renew implements transport.Authorizer: the upstream refused sent (401): it is
// replaced once (a re-exchange, a refresh), whatever the number of requests refused.
// A 403 is not renewed: the principal lacks a permission a new token would not give.
func (h *handle) Renew(ctx context.Context, status int, _ http.Header, sent *transport.Bearer) error {
	if status != http.StatusUnauthorized {
		return fmt.Errorf("upstream %q refused the principal's token with HTTP %d", h.p.cfg.Upstream, status)
	}
	cur := h.tok.Load()
	if cur != nil && cur.bearer != sent {
		return nil // already replaced: send again with the new one
	}
	_, err := h.get(ctx, func(ctx context.Context) (*token, error) {
		if now := h.tok.Load(); now != nil && now.bearer != sent {
			return now, nil // replaced while this waited
		}
		return h.p.strat.renew(ctx, h, cur)
	})
	if err != nil {
		return h.p.requestError(err)
	}
	return nil
}

// Accepted implements transport.Authorizer.
func (h *handle) Accepted() {}

// requestError is the error a request of a principal's session fails with when no token
// can be had: a *jsonrpc.Error for the client.
func (p *Provider) requestError(err error) error {
	var ref *Refusal
	if errors.As(err, &ref) {
		if ref.Err != nil {
			return ref.Err
		}
		return mcp.ProxyError(mcp.CodeCredentialUnavailable, p.cfg.Upstream, ref.Cause.Error())
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je
	}
	p.event(EventFailure)
	return failed(p.cfg.Upstream, err).Err
}

// Secrets returns who's secrets as Admit last found them (mode "secret"): what the
// principal's session is started with. ok is false when Admit has not found them all.
func (p *Provider) Secrets(who string) (lookup func(name string) (string, bool), ok bool) {
	h, found := p.handles.Load(who)
	if !found {
		return nil, false
	}
	m := h.(*handle).secrets.Load()
	if m == nil {
		return nil, false
	}
	return func(name string) (string, bool) { v, ok := (*m)[name]; return v, ok }, true
}

// Forget drops what this process caches of who's credential (after a revocation): the
// next call, and the next request of the principal's session, read the store again.
func (p *Provider) Forget(who string) {
	if v, ok := p.handles.Load(who); ok {
		h := v.(*handle)
		h.tok.Store(nil)
		h.secrets.Store(nil)
		h.checked.Store(0)
	}
}

// ForgetAll drops what this process caches of every principal's credential (changes
// of another replica's may have been missed): every next call reads the store again.
func (p *Provider) ForgetAll() {
	p.handles.Range(func(k, _ any) bool {
		p.Forget(k.(string))
		return true
	})
}

// Revoke ends who's grant for the upstream: it asks the authorization server to revoke
// it (mode "oauth", where the server offers revocation; best effort), deletes it from
// the store and drops what this process caches. The principal's next call starts
// afresh (mode "oauth": with a new link). It reports whether there was a grant.
func (p *Provider) Revoke(ctx context.Context, who string) (bool, error) {
	g, err := p.deps.Store.Get(ctx, p.cfg.Upstream, who)
	if err != nil {
		return false, err
	}
	if o, ok := p.strat.(*userOAuth); ok && g != nil {
		if err := o.revoke(ctx, g); err != nil {
			p.log.Info().Err(err).Str("principal", who).Msg("the authorization server did not revoke the grant; deleting it here all the same")
		}
	}
	if err := p.deps.Store.Delete(ctx, p.cfg.Upstream, who); err != nil {
		return false, err
	}
	p.Forget(who)
	return g != nil, nil
}

// List returns what may be shown of the upstream's grants ("" principal: every one).
func (p *Provider) List(ctx context.Context, who string) ([]Info, error) {
	return p.deps.Store.List(ctx, p.cfg.Upstream, who)
}

// Cached counts the principals whose credential this process holds now.
func (p *Provider) Cached() int {
	n := 0
	p.handles.Range(func(_, v any) bool {
		h := v.(*handle)
		if h.tok.Load() != nil || h.secrets.Load() != nil {
			n++
		}
		return true
	})
	return n
}

func (p *Provider) event(e string) {
	if o := p.deps.Observer; o != nil {
		o.CredentialEvent(p.cfg.Upstream, e)
	}
}

// Close releases what the provider holds.
func (p *Provider) Close() {}
