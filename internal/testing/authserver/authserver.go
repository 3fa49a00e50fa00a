// Package authserver is an OAuth 2.1 authorization server and identity provider for
// tests, on a free loopback port: it issues the front end's JWTs (the principals' access
// tokens, which the proxy validates against its JWKS), exchanges them (RFC 8693, also
// for an identity assertion grant, ID-JAG), takes ID-JAGs with the JWT bearer grant
// (RFC 7523), runs the authorization code grant with PKCE for a logged-in browser user
// (it approves at once), refreshes, revokes (RFC 7009), registers clients dynamically
// (RFC 7591), and serves its metadata (RFC 8414) and JWKS. Clients authenticate with a
// secret (basic or post) or a private_key_jwt assertion.
//
// It counts what it does, per grant and per subject, so that tests can tell how many
// exchanges or refreshes a run made, and can be told to refuse a subject's exchange.
//
// It is for tests only: keys are made at start, everything is in memory, and it checks
// what a test needs, not all that a real server must.
package authserver

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Grant types and token types.
const (
	GrantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	GrantJWTBearer     = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	GrantCode          = "authorization_code"
	GrantRefresh       = "refresh_token"
	GrantClient        = "client_credentials"

	TypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	TypeIDJAG       = "urn:ietf:params:oauth:token-type:id-jag"

	assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
)

// Client is a registered client.
type Client struct {
	ID     string
	Secret string           // "" for a public or private_key_jwt client
	Key    crypto.PublicKey // its private_key_jwt key (ES256 or RS256), or nil
}

// Options configure a Server.
type Options struct {
	// AccessTTL is the lifetime the token responses give (expires_in); default 1h.
	AccessTTL time.Duration
	// AccessJWTTTL, when set, makes the access tokens' exp claim this much after issue
	// instead: an upstream refuses them sooner than the client expects (an expired
	// token the client did not see expire).
	AccessJWTTTL time.Duration
}

// Server is a running authorization server.
type Server struct {
	URL  string // its issuer: http://127.0.0.1:PORT
	opts Options
	key  *ecdsa.PrivateKey
	kid  string
	srv  *http.Server
	ln   net.Listener

	mu       sync.Mutex // guards everything below
	clients  map[string]*Client
	codes    map[string]*codeGrant
	refresh  map[string]*refreshGrant // by refresh token
	revoked  map[string]bool          // access or refresh tokens
	refused  map[string]bool          // subjects whose exchanges are refused
	counts   map[string]int           // by grant type, and grant type + " " + subject
	issued   []string                 // every token issued (tests grep logs for them)
	seenJTI  map[string]bool          // client assertions' jti (replay)
	jagFor   map[string]string        // IdP client → its client at the resource's AS (ID-JAG client_id)
	nextCode int
}

type codeGrant struct {
	user, client, redirect, challenge, resource, scope string
	expires                                            time.Time
}

type refreshGrant struct {
	user, client, resource, scope string
}

// Start starts a server on a free loopback port; Close stops it.
func Start(opts Options) (*Server, error) {
	if opts.AccessTTL <= 0 {
		opts.AccessTTL = time.Hour
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{URL: "http://" + ln.Addr().String(), opts: opts, key: key, kid: "as-key-1", ln: ln,
		clients: map[string]*Client{}, codes: map[string]*codeGrant{}, refresh: map[string]*refreshGrant{},
		revoked: map[string]bool{}, refused: map[string]bool{}, counts: map[string]int{}, seenJTI: map[string]bool{}, jagFor: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", s.metadata)
	mux.HandleFunc("GET /.well-known/openid-configuration", s.metadata)
	mux.HandleFunc("GET /jwks", s.jwks)
	mux.HandleFunc("POST /token", s.token)
	mux.HandleFunc("GET /authorize", s.authorize)
	mux.HandleFunc("GET /login", s.login)
	mux.HandleFunc("POST /register", s.register)
	mux.HandleFunc("POST /revoke", s.revoke)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// AddClient registers c.
func (s *Server) AddClient(c Client) {
	s.mu.Lock()
	s.clients[c.ID] = &c
	s.mu.Unlock()
}

// MapIDJAGClient says that the client idp, which asks for ID-JAGs, is client as at the
// resource's authorization server: the ID-JAGs issued to idp name as (the mapping the
// enterprise-managed authorization extension leaves to configuration).
func (s *Server) MapIDJAGClient(idp, as string) {
	s.mu.Lock()
	s.jagFor[idp] = as
	s.mu.Unlock()
}

// RefuseExchange makes every token exchange for subject fail (invalid_grant), as an
// identity provider's policy would.
func (s *Server) RefuseExchange(subject string) {
	s.mu.Lock()
	s.refused[subject] = true
	s.mu.Unlock()
}

// Count is how many tokens the grant issued, in all (subject "") or for subject.
func (s *Server) Count(grant, subject string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if subject == "" {
		return s.counts[grant]
	}
	return s.counts[grant+" "+subject]
}

// Issued returns every token the server issued so far (access, refresh, ID-JAG and
// the front end's), for tests that look for them where they must not be.
func (s *Server) Issued() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.issued)
}

// Key is the server's public signing key.
func (s *Server) Key() *ecdsa.PublicKey { return &s.key.PublicKey }

// IssueFront issues a principal's access token for the proxy's front end: sub, aud,
// scope, expiring after ttl.
func (s *Server) IssueFront(sub, aud string, ttl time.Duration, scopes ...string) string {
	now := time.Now()
	c := Claims{"iss": s.URL, "sub": sub, "aud": aud, "iat": now.Unix(), "exp": now.Add(ttl).Unix(), "jti": randHex(8)}
	if len(scopes) > 0 {
		c["scope"] = strings.Join(scopes, " ")
	}
	return s.sign("at+jwt", c)
}

// IssueFrontGroups is IssueFront with a groups claim.
func (s *Server) IssueFrontGroups(sub, aud string, ttl time.Duration, groups ...string) string {
	now := time.Now()
	c := Claims{"iss": s.URL, "sub": sub, "aud": aud, "iat": now.Unix(), "exp": now.Add(ttl).Unix(), "jti": randHex(8), "groups": groups}
	return s.sign("at+jwt", c)
}

// Verify checks a token this server signed and returns its claims (an upstream's check,
// for tests that verify in process).
func (s *Server) Verify(tok string) (Claims, error) {
	_, c, err := verify(tok, &s.key.PublicKey)
	return c, err
}

func (s *Server) sign(typ string, c Claims) string {
	tok := signES256(s.key, s.kid, typ, c)
	s.mu.Lock()
	s.issued = append(s.issued, tok)
	s.mu.Unlock()
	return tok
}

func (s *Server) metadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                         s.URL,
		"authorization_endpoint":                         s.URL + "/authorize",
		"token_endpoint":                                 s.URL + "/token",
		"registration_endpoint":                          s.URL + "/register",
		"revocation_endpoint":                            s.URL + "/revoke",
		"jwks_uri":                                       s.URL + "/jwks",
		"response_types_supported":                       []string{"code"},
		"grant_types_supported":                          []string{GrantCode, GrantRefresh, GrantClient, GrantTokenExchange, GrantJWTBearer},
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          []string{"client_secret_basic", "client_secret_post", "private_key_jwt", "none"},
		"authorization_response_iss_parameter_supported": true,
		"scopes_supported":                               []string{"mcp", "offline_access"},
	})
}

func (s *Server) jwks(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"keys": []any{jwk(&s.key.PublicKey, s.kid)}})
}

// oauthError writes an OAuth error response.
func oauthError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// authenticate finds the client of a token request: client_secret_basic,
// client_secret_post, private_key_jwt, or a public client (none). "" when it fails.
func (s *Server) authenticate(r *http.Request) (string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, secret, ok := r.BasicAuth(); ok {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
		if c := s.clients[id]; c != nil && c.Secret != "" && c.Secret == secret {
			return id, ""
		}
		return "", "bad client_secret_basic"
	}
	if a := r.PostForm.Get("client_assertion"); a != "" {
		if r.PostForm.Get("client_assertion_type") != assertionType {
			return "", "bad client_assertion_type"
		}
		_, c, _, _, err := parse(a)
		if err != nil {
			return "", "bad client assertion"
		}
		id := c.Str("iss")
		cl := s.clients[id]
		if cl == nil || cl.Key == nil {
			return "", "unknown private_key_jwt client"
		}
		if _, c, err = verify(a, cl.Key); err != nil {
			return "", "client assertion: " + err.Error()
		}
		now := time.Now().Unix()
		switch {
		case c.Str("sub") != id:
			return "", "client assertion: sub is not the client"
		case !c.HasAud(s.URL+"/token") && !c.HasAud(s.URL):
			return "", "client assertion: aud is not this server"
		case c.Num("exp") < now:
			return "", "client assertion expired"
		case c.Str("jti") == "" || s.seenJTI[c.Str("jti")]:
			return "", "client assertion replayed"
		}
		s.seenJTI[c.Str("jti")] = true
		return id, ""
	}
	id := r.PostForm.Get("client_id")
	c := s.clients[id]
	switch {
	case c == nil:
		return "", "unknown client"
	case c.Secret != "":
		if r.PostForm.Get("client_secret") != c.Secret {
			return "", "bad client_secret_post"
		}
	case c.Key != nil:
		return "", "this client authenticates with private_key_jwt"
	}
	return id, ""
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "bad form")
		return
	}
	client, why := s.authenticate(r)
	if client == "" {
		oauthError(w, http.StatusUnauthorized, "invalid_client", why)
		return
	}
	f := r.PostForm
	switch grant := f.Get("grant_type"); grant {
	case GrantTokenExchange:
		s.exchange(w, client, f)
	case GrantJWTBearer:
		s.jwtBearer(w, client, f)
	case GrantCode:
		s.code(w, client, f)
	case GrantRefresh:
		s.refreshToken(w, client, f)
	case GrantClient:
		s.respond(w, GrantClient, client, client, f.Get("resource"), f.Get("scope"), false)
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", grant)
	}
}

// exchange is RFC 8693: the subject token must be one of this server's (a front end
// token); it yields an access token for resource, or an ID-JAG for audience.
func (s *Server) exchange(w http.ResponseWriter, client string, f url.Values) {
	subj, err := s.Verify(f.Get("subject_token"))
	if err != nil || subj.Num("exp") < time.Now().Unix() {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the subject token is not valid")
		return
	}
	if t := f.Get("subject_token_type"); t != TypeAccessToken && t != "urn:ietf:params:oauth:token-type:jwt" {
		oauthError(w, http.StatusBadRequest, "invalid_request", "unsupported subject_token_type")
		return
	}
	sub := subj.Str("sub")
	s.mu.Lock()
	refused := s.refused[sub]
	s.mu.Unlock()
	if refused {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "policy does not let this subject reach that resource")
		return
	}
	resource := f.Get("resource")
	if f.Get("requested_token_type") == TypeIDJAG {
		aud := f.Get("audience")
		if aud == "" || resource == "" {
			oauthError(w, http.StatusBadRequest, "invalid_request", "an ID-JAG needs audience and resource")
			return
		}
		now := time.Now()
		s.mu.Lock()
		jagClient := s.jagFor[client]
		s.mu.Unlock()
		if jagClient == "" {
			jagClient = client
		}
		jag := s.sign("oauth-id-jag+jwt", Claims{"iss": s.URL, "sub": sub, "aud": aud, "resource": resource, "client_id": jagClient,
			"jti": randHex(8), "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "scope": f.Get("scope")})
		s.count(GrantTokenExchange, sub)
		writeJSON(w, http.StatusOK, map[string]any{"access_token": jag, "issued_token_type": TypeIDJAG, "token_type": "N_A",
			"expires_in": 300, "scope": f.Get("scope")})
		return
	}
	if resource == "" {
		oauthError(w, http.StatusBadRequest, "invalid_target", "a resource is required")
		return
	}
	s.respond(w, GrantTokenExchange, client, sub, resource, f.Get("scope"), false)
}

// jwtBearer is RFC 7523 with an ID-JAG (the enterprise-managed authorization
// extension): its typ, audience (this server) and client must match.
func (s *Server) jwtBearer(w http.ResponseWriter, client string, f url.Values) {
	h, c, err := verify(f.Get("assertion"), &s.key.PublicKey)
	switch {
	case err != nil:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the assertion is not valid")
	case h.Typ != "oauth-id-jag+jwt":
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the assertion is not an ID-JAG")
	case !c.HasAud(s.URL):
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the ID-JAG is for another authorization server")
	case c.Str("client_id") != client:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the ID-JAG was issued to another client")
	case c.Num("exp") < time.Now().Unix():
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the ID-JAG expired")
	default:
		s.respond(w, GrantJWTBearer, client, c.Str("sub"), c.Str("resource"), c.Str("scope"), false)
	}
}

// respond issues an access token (with a refresh token when withRefresh) and counts it.
func (s *Server) respond(w http.ResponseWriter, grant, client, sub, resource, scope string, withRefresh bool) {
	now := time.Now()
	exp := now.Add(s.opts.AccessTTL)
	if s.opts.AccessJWTTTL > 0 {
		exp = now.Add(s.opts.AccessJWTTTL)
	}
	c := Claims{"iss": s.URL, "sub": sub, "client_id": client, "iat": now.Unix(), "exp": exp.Unix(), "jti": randHex(8)}
	if resource != "" {
		c["aud"] = resource
	}
	if scope != "" {
		c["scope"] = scope
	}
	resp := map[string]any{"access_token": s.sign("at+jwt", c), "token_type": "Bearer",
		"expires_in": int(s.opts.AccessTTL / time.Second), "issued_token_type": TypeAccessToken}
	if scope != "" {
		resp["scope"] = scope
	}
	if withRefresh {
		rt := "rt-" + randHex(24)
		s.mu.Lock()
		s.refresh[rt] = &refreshGrant{user: sub, client: client, resource: resource, scope: scope}
		s.issued = append(s.issued, rt)
		s.mu.Unlock()
		resp["refresh_token"] = rt
	}
	s.count(grant, sub)
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) count(grant, sub string) {
	s.mu.Lock()
	s.counts[grant]++
	s.counts[grant+" "+sub]++
	s.mu.Unlock()
}

// login logs a browser in as user (a cookie), then sends it to next: the test's
// stand-in for a login page.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	user := r.URL.Query().Get("user")
	if user == "" {
		http.Error(w, "user is required", http.StatusBadRequest)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: "as_user", Value: user, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	if next := r.URL.Query().Get("next"); next != "" {
		http.Redirect(w, r, next, http.StatusFound)
		return
	}
	fmt.Fprintf(w, "logged in as %s\n", user)
}

// authorize approves at once for the logged-in user: the authorization response goes
// to the client's registered redirect URI with a code bound to the PKCE challenge.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ck, err := r.Cookie("as_user")
	if err != nil || ck.Value == "" {
		http.Error(w, "log in first (GET /login?user=NAME)", http.StatusUnauthorized)
		return
	}
	s.mu.Lock()
	c := s.clients[q.Get("client_id")]
	s.mu.Unlock()
	redirect := q.Get("redirect_uri")
	switch {
	case c == nil:
		http.Error(w, "unknown client", http.StatusBadRequest)
		return
	case q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		http.Error(w, "PKCE with S256 is required", http.StatusBadRequest)
		return
	case redirect == "":
		http.Error(w, "redirect_uri is required", http.StatusBadRequest)
		return
	}
	code := "code-" + randHex(16)
	s.mu.Lock()
	s.codes[code] = &codeGrant{user: ck.Value, client: c.ID, redirect: redirect, challenge: q.Get("code_challenge"),
		resource: q.Get("resource"), scope: q.Get("scope"), expires: time.Now().Add(time.Minute)}
	s.mu.Unlock()
	ru, err := url.Parse(redirect)
	if err != nil {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	rq := ru.Query()
	rq.Set("code", code)
	rq.Set("state", q.Get("state"))
	rq.Set("iss", s.URL)
	ru.RawQuery = rq.Encode()
	http.Redirect(w, r, ru.String(), http.StatusFound)
}

func (s *Server) code(w http.ResponseWriter, client string, f url.Values) {
	s.mu.Lock()
	g := s.codes[f.Get("code")]
	delete(s.codes, f.Get("code")) // single use
	s.mu.Unlock()
	sum := sha256.Sum256([]byte(f.Get("code_verifier")))
	switch {
	case g == nil || time.Now().After(g.expires):
		oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown or expired code")
	case g.client != client || g.redirect != f.Get("redirect_uri"):
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the code was issued to another client or redirect_uri")
	case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "PKCE verification failed")
	default:
		s.respond(w, GrantCode, client, g.user, g.resource, g.scope, true)
	}
}

func (s *Server) refreshToken(w http.ResponseWriter, client string, f url.Values) {
	rt := f.Get("refresh_token")
	s.mu.Lock()
	g := s.refresh[rt]
	revoked := s.revoked[rt]
	s.mu.Unlock()
	switch {
	case g == nil || revoked:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown or revoked refresh token")
	case g.client != client:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the refresh token was issued to another client")
	default:
		s.respond(w, GrantRefresh, client, g.user, g.resource, g.scope, false)
	}
}

// RevokeRefresh revokes every refresh token of subject (the person withdrew the grant
// at the authorization server).
func (s *Server) RevokeRefresh(subject string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for rt, g := range s.refresh {
		if g.user == subject {
			s.revoked[rt] = true
		}
	}
}

func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "bad form")
		return
	}
	if client, why := s.authenticate(r); client == "" {
		oauthError(w, http.StatusUnauthorized, "invalid_client", why)
		return
	}
	s.mu.Lock()
	s.revoked[r.PostForm.Get("token")] = true
	s.counts["revoke"]++
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// register is dynamic client registration: a public client, or one with a secret when
// it asks for client_secret_basic or client_secret_post.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	var m struct {
		RedirectURIs []string `json:"redirect_uris"`
		AuthMethod   string   `json:"token_endpoint_auth_method"`
		ClientName   string   `json:"client_name"`
	}
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata", "bad JSON")
		return
	}
	c := Client{ID: "dyn-" + randHex(8)}
	resp := map[string]any{"client_id": c.ID, "redirect_uris": m.RedirectURIs, "client_name": m.ClientName}
	switch m.AuthMethod {
	case "client_secret_basic", "client_secret_post":
		c.Secret = "sec-" + randHex(16)
		resp["client_secret"] = c.Secret
		resp["token_endpoint_auth_method"] = m.AuthMethod
	default:
		resp["token_endpoint_auth_method"] = "none"
	}
	s.AddClient(c)
	s.mu.Lock()
	s.counts["register"]++
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, resp)
}
