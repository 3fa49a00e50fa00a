package credential

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/transport"
)

// A per-user authorization (mode "oauth") runs in the principal's browser, through two
// paths of the proxy's HTTP listener, outside its authentication (a browser has no
// bearer token):
//
//  1. ConnectPath + ID: the link the principal's client was given. It may be opened
//     once, within its lifetime (10 minutes): the first browser to open it is bound to
//     the flow by a cookie (random, HttpOnly, SameSite=Lax, its hash kept with the
//     flow), and sent to the upstream's authorization server with the flow's PKCE
//     challenge and state.
//  2. CallbackPath: where the authorization server sends the browser back. The state
//     names the flow and carries a secret of its own; the flow is taken (single use),
//     and its code redeemed, only when the state's secret matches and the browser shows
//     the cookie of step 1. The grant goes to the principal the flow was made for: the
//     one whose call got the link, never whoever happens to complete it.
//
// So a forged callback (login CSRF: an attacker's code sent to a victim's browser) has
// no flow whose cookie that browser holds, and a link copied after its owner opened it
// is refused. What stays possible: whoever has an unopened link within its lifetime can
// complete it with their own account at the upstream, which then serves the link's
// principal (session fixation). The link only ever goes to the principal's own
// authenticated session, is never logged (a hash prefix is), and is short-lived and
// single-use; `mcp-proxy credentials list` shows each grant's upstream subject, so a
// grant of the wrong account is visible and revocable.

// Flow is one per-user authorization in progress, as the store keeps it until it
// completes or expires.
type Flow struct {
	ID        string // the link's handle: 32 random bytes, base64url
	Upstream  string
	Principal string
	Verifier  principal.Secret // the PKCE code verifier
	State     principal.Secret // the state's secret part (the state is ID + "." + State)
	// Binding is the hex SHA-256 of the cookie of the browser that opened the link; ""
	// until one did.
	Binding string
	Expires time.Time
	// The client the authorization is asked for: the callback, on whichever replica,
	// redeems the code as that client.
	ClientID     string
	ClientSecret principal.Secret
	ClientAuth   string
}

// flowTTL is how long a link may be used.
const flowTTL = 10 * time.Minute

// flowLeaseUpstream names the store leases that make a link open once (no upstream can
// be named with a NUL byte).
const flowLeaseUpstream = "\x00flow"

// Flows runs the per-user authorizations of every upstream in mode "oauth": it makes
// the links, and serves ConnectPath and CallbackPath (Handler). Its flows are in the
// store, so that a link made by one replica may be followed through another.
type Flows struct {
	store Store
	log   zerolog.Logger
	now   func() time.Time

	mu        sync.Mutex // guards upstreams, links and waiting
	upstreams map[string]*userOAuth
	links     map[grantKey]string // (upstream, principal) → the unopened link's ID, reused while it lives
	// waiting are, by FlowKey, the client sessions given a link as a url-mode
	// elicitation (-32042), to be told when its authorization completes
	// (notifications/elicitation/complete), here or on another replica.
	waiting map[string]*waiters
}

// waiters are the client sessions waiting for one flow, until it expires.
type waiters struct {
	id      string // the flow's ID: the elicitationId they were given
	clients map[Notifier]struct{}
	expires time.Time
}

// maxWaiters bounds the client sessions waiting for one flow.
const maxWaiters = 64

// NewFlows returns the flows of a proxy over store.
func NewFlows(store Store, log zerolog.Logger) *Flows {
	return &Flows{store: store, log: log, now: time.Now, upstreams: map[string]*userOAuth{}, links: map[grantKey]string{},
		waiting: map[string]*waiters{}}
}

// FlowKey is what names flow id outside the store (a Change, the waiting clients): a
// hash, so that the id, the link's handle, is not spread around.
func FlowKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// wait remembers that c was given flow id's link as a url-mode elicitation: c is told
// when it completes (Complete), until the flow expires.
func (fl *Flows) wait(id string, c Notifier) {
	key, now := FlowKey(id), fl.now()
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for k, w := range fl.waiting { // forget the expired ones
		if !now.Before(w.expires) {
			delete(fl.waiting, k)
		}
	}
	w := fl.waiting[key]
	if w == nil {
		w = &waiters{id: id, clients: map[Notifier]struct{}{}, expires: now.Add(flowTTL)}
		fl.waiting[key] = w
	}
	if len(w.clients) < maxWaiters {
		w.clients[c] = struct{}{}
	}
}

// Complete tells the client sessions of this process that wait for the flow whose
// FlowKey is key that its authorization completed: notifications/elicitation/complete
// with the elicitationId they were given (2025-11-25), to each once. The flow may have
// completed on another replica (a Change).
func (fl *Flows) Complete(key string) {
	fl.mu.Lock()
	w := fl.waiting[key]
	delete(fl.waiting, key)
	fl.mu.Unlock()
	if w == nil {
		return
	}
	params, _ := json.Marshal(map[string]string{"elicitationId": w.id})
	for c := range w.clients {
		c.Notify(mcp.NotificationElicitationComplete, params)
	}
	fl.log.Debug().Str("link", logID(w.id)).Int("clients", len(w.clients)).Msg("clients told that the authorization of their link completed")
}

// authorized tells whoever waits for flow f, here and (a Broadcaster store) on the
// other replicas, that it completed.
func (fl *Flows) authorized(ctx context.Context, f *Flow) {
	key := FlowKey(f.ID)
	fl.Complete(key)
	if b, ok := fl.store.(Broadcaster); ok {
		if err := b.Publish(ctx, Change{Kind: ChangeAuthorized, Upstream: f.Upstream, Principal: f.Principal, Flow: key}); err != nil {
			fl.log.Warn().Err(err).Msg("the other replicas could not be told that an authorization completed")
		}
	}
}

func (fl *Flows) add(o *userOAuth) {
	fl.mu.Lock()
	fl.upstreams[o.upstream] = o
	fl.mu.Unlock()
}

func (fl *Flows) upstream(name string) *userOAuth {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.upstreams[name]
}

func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// begin makes (or reuses, while it is unopened and lives) the link that lets principal
// authorize upstream o; it returns the link and its ID (the elicitation's id).
func (fl *Flows) begin(ctx context.Context, o *userOAuth, principalName string) (link, id string, err error) {
	base, err := linkBase(o.cfg.RedirectURL)
	if err != nil {
		return "", "", err
	}
	key := grantKey{o.upstream, principalName}
	fl.mu.Lock()
	id = fl.links[key]
	fl.mu.Unlock()
	if id != "" {
		if f, err := fl.store.GetFlow(ctx, id); err == nil && f != nil && f.Binding == "" && fl.now().Add(time.Minute).Before(f.Expires) {
			return base + ConnectPath + id, id, nil
		}
	}
	// The authorization server must be reachable before a link is handed out.
	_, client, err := o.server(ctx)
	if err != nil {
		return "", "", err
	}
	f := &Flow{ID: randomString(32), Upstream: o.upstream, Principal: principalName, Verifier: principal.NewSecret(randomString(32)),
		State: principal.NewSecret(randomString(16)), Expires: fl.now().Add(flowTTL),
		ClientID: client.ID, ClientSecret: principal.NewSecret(client.Secret), ClientAuth: client.Method}
	if err := fl.store.PutFlow(ctx, f); err != nil {
		return "", "", fmt.Errorf("storing the authorization flow: %w", err)
	}
	fl.mu.Lock()
	fl.links[key] = f.ID
	fl.mu.Unlock()
	o.log.Info().Str("principal", principalName).Str("link", logID(f.ID)).Msg("principal sent to authorize the upstream in a browser")
	return base + ConnectPath + f.ID, f.ID, nil
}

// logID is what logs show of a link's handle: a hash prefix, enough to follow one flow
// through the log, useless to open it.
func logID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:6])
}

// linkBase is the origin of the callback URL: the links are served there too.
func linkBase(redirect string) (string, error) {
	u, err := url.Parse(redirect)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("invalid callback URL %q", redirect)
	}
	return u.Scheme + "://" + u.Host, nil
}

// Handler serves ConnectPath and CallbackPath itself, unauthenticated (a browser
// carries no bearer token), and passes every other request to next.
func (fl *Flows) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == CallbackPath:
			fl.callback(w, r)
		case strings.HasPrefix(r.URL.Path, ConnectPath):
			fl.connect(w, r, strings.TrimPrefix(r.URL.Path, ConnectPath))
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// cookieName is the binding cookie of flow id: one per flow, so that two flows in one
// browser do not overwrite each other's.
func cookieName(id string) string { return "mcp_proxy_oauth_" + logID(id) }

// page answers the browser with a short HTML page.
func page(w http.ResponseWriter, status int, title, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("X-Frame-Options", "DENY")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!doctype html><title>mcp-proxy: %s</title><h1>%s</h1><p>%s</p>\n", html.EscapeString(title), html.EscapeString(title), html.EscapeString(text))
}

// connect binds the first browser that opens a link to its flow, and sends it on to
// the authorization server.
func (fl *Flows) connect(w http.ResponseWriter, r *http.Request, id string) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	ctx := r.Context()
	f, err := fl.store.GetFlow(ctx, id)
	if err != nil {
		fl.log.Warn().Err(err).Msg("reading an authorization flow")
		page(w, http.StatusServiceUnavailable, "Try again", "The proxy cannot read its authorization flows right now.")
		return
	}
	if f == nil || !fl.now().Before(f.Expires) {
		page(w, http.StatusGone, "Link expired", "This link has expired or was used. Call the tool again for a new one.")
		return
	}
	if _, ok, err := fl.store.Lease(ctx, flowLeaseUpstream, id, time.Until(f.Expires)); err != nil || !ok || f.Binding != "" {
		page(w, http.StatusConflict, "Link already opened", "This link was already opened in a browser; each link works once. Call the tool again for a new one.")
		return
	}
	o := fl.upstream(f.Upstream)
	if o == nil {
		page(w, http.StatusGone, "Link expired", "The upstream of this link is no longer configured.")
		return
	}
	cookie := randomString(32)
	sum := sha256.Sum256([]byte(cookie))
	f.Binding = hex.EncodeToString(sum[:])
	if err := fl.store.PutFlow(ctx, f); err != nil {
		fl.log.Warn().Err(err).Msg("storing an authorization flow")
		page(w, http.StatusServiceUnavailable, "Try again", "The proxy cannot store its authorization flows right now.")
		return
	}
	target, err := o.authorizationURL(ctx, f)
	if err != nil {
		o.log.Warn().Err(err).Msg("preparing the authorization")
		page(w, http.StatusBadGateway, "Authorization unavailable", "The upstream's authorization server cannot be reached.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName(id), Value: cookie, Path: CallbackPath, Expires: f.Expires,
		HttpOnly: true, Secure: r.TLS != nil || strings.HasPrefix(o.cfg.RedirectURL, "https:"), SameSite: http.SameSiteLaxMode})
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, target, http.StatusFound)
}

// callback redeems the authorization response of a flow opened by this browser.
func (fl *Flows) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id, secret, ok := strings.Cut(q.Get("state"), ".")
	if !ok || id == "" {
		page(w, http.StatusBadRequest, "Unknown authorization", "This response names no authorization of this proxy.")
		return
	}
	ctx := r.Context()
	ck, cerr := r.Cookie(cookieName(id))
	if cerr != nil {
		page(w, http.StatusBadRequest, "Unknown authorization", "This browser did not open the link of this authorization.")
		return
	}
	// Checked before it is taken: a response that is not the flow's own does not use
	// the flow up.
	f, err := fl.store.GetFlow(ctx, id)
	if err != nil {
		fl.log.Warn().Err(err).Msg("reading an authorization flow")
		page(w, http.StatusServiceUnavailable, "Try again", "The proxy cannot read its authorization flows right now.")
		return
	}
	sum := sha256.Sum256([]byte(ck.Value))
	switch {
	case f == nil || !fl.now().Before(f.Expires):
		page(w, http.StatusGone, "Authorization expired", "This authorization expired or was completed already. Call the tool again for a new link.")
		return
	case subtle.ConstantTimeCompare([]byte(secret), []byte(f.State.Reveal())) != 1 ||
		subtle.ConstantTimeCompare([]byte(hex.EncodeToString(sum[:])), []byte(f.Binding)) != 1:
		fl.log.Warn().Str("link", logID(id)).Msg("an authorization response did not come from the browser that opened its link: refused")
		page(w, http.StatusBadRequest, "Unknown authorization", "This browser did not open the link of this authorization.")
		return
	}
	if f, err = fl.store.TakeFlow(ctx, id); err != nil || f == nil { // single use
		page(w, http.StatusGone, "Authorization expired", "This authorization was completed already.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName(id), Value: "", Path: CallbackPath, MaxAge: -1, HttpOnly: true})
	fl.mu.Lock()
	if fl.links[grantKey{f.Upstream, f.Principal}] == id {
		delete(fl.links, grantKey{f.Upstream, f.Principal})
	}
	fl.mu.Unlock()
	o := fl.upstream(f.Upstream)
	if o == nil {
		page(w, http.StatusGone, "Authorization expired", "The upstream of this authorization is no longer configured.")
		return
	}
	if e := q.Get("error"); e != "" {
		o.log.Info().Str("principal", f.Principal).Str("error", transport.OneLine(e, 64)).Msg("the authorization server refused the authorization")
		page(w, http.StatusForbidden, "Not authorized", "The authorization server refused: "+transport.OneLine(e, 64)+". Call the tool again to retry.")
		return
	}
	code := q.Get("code")
	if code == "" {
		page(w, http.StatusBadRequest, "Not authorized", "The authorization response has no code.")
		return
	}
	g, err := o.redeem(ctx, f, code, q["iss"])
	if err != nil {
		o.log.Warn().Err(err).Str("principal", f.Principal).Msg("redeeming the authorization code failed")
		o.p.event(EventFailure)
		page(w, http.StatusBadGateway, "Not authorized", "The proxy could not complete the authorization. Call the tool again to retry.")
		return
	}
	o.log.Info().Str("principal", f.Principal).Str("subject", g.Subject).Msg("principal authorized the upstream")
	fl.authorized(context.WithoutCancel(ctx), f)
	page(w, http.StatusOK, "Authorized", fmt.Sprintf("mcp-proxy may now use %s as you. You can close this window and go back to your client.", f.Upstream))
}
