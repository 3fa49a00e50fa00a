package auth

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/principal"
)

const (
	opsKey = "ops-key-0123456789abcdef0123456789abcdef"
	ciKey  = "ci-key-fedcba9876543210fedcba9876543210"
)

func TestHashToken(t *testing.T) {
	// FIPS 180-2 test vector.
	if got, want := HashToken("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Fatalf("HashToken(abc) = %s, want %s", got, want)
	}
}

// TestAuthenticate runs every credential against one authenticator with both API keys
// (one by hash, one by token) and OAuth requiring scope mcp:tools.
func TestAuthenticate(t *testing.T) {
	keys(t)
	is := newIssuer(t, rsaKey, ecKey, edKey, psKey)
	jc := is.jwtConfig()
	jc.RequiredScopes = []string{"mcp:tools"}
	a, _ := newAuth(t, Config{
		Resource: testResource,
		APIKeys: []APIKey{
			{Name: "ops", Groups: []string{"admin"}, SHA256: strings.ToUpper(HashToken(opsKey))},
			{Name: "ci", Groups: []string{"ci", "readers"}, Token: ciKey},
		},
		JWT: jc,
	})
	now := time.Now()

	type want struct {
		name, via      string
		groups, scopes []string
		status         int    // for failures
		errCode        string // the challenge's error param ("" = none)
		desc           string // substring of the error_description
	}
	ok := func(name, via string, groups, scopes []string) want {
		return want{name: name, via: via, groups: groups, scopes: scopes}
	}
	fail := func(status int, code, desc string) want { return want{status: status, errCode: code, desc: desc} }

	cases := []struct {
		name string
		h    http.Header
		want want
	}{
		// API keys.
		{"api key by hash", bearer(opsKey), ok("ops", "api_key", []string{"admin"}, nil)},
		{"api key by token", bearer(ciKey), ok("ci", "api_key", []string{"ci", "readers"}, nil)},
		{"api key in X-API-Key", http.Header{"X-Api-Key": {ciKey}}, ok("ci", "api_key", []string{"ci", "readers"}, nil)},
		{"bearer scheme is case-insensitive", http.Header{"Authorization": {"bearer " + opsKey}}, ok("ops", "api_key", []string{"admin"}, nil)},
		{"wrong api key", bearer(opsKey + "x"), fail(401, "invalid_token", "invalid token")},
		{"wrong X-API-Key", http.Header{"X-Api-Key": {"nope-nope-nope-nope"}}, fail(401, "invalid_token", "unknown API key")},

		// Valid JWTs.
		{"RS256 token", bearer(sign(t, rsaKey, claims(nil))), ok("alice", "jwt", []string{"dev", "ops"}, []string{"mcp:tools", "mcp:read"})},
		{"ES256 token", bearer(sign(t, ecKey, claims(nil))), ok("alice", "jwt", []string{"dev", "ops"}, []string{"mcp:tools", "mcp:read"})},
		{"EdDSA token", bearer(sign(t, edKey, claims(nil))), ok("alice", "jwt", []string{"dev", "ops"}, []string{"mcp:tools", "mcp:read"})},
		{"PS256 token", bearer(sign(t, psKey, claims(nil))), ok("alice", "jwt", []string{"dev", "ops"}, []string{"mcp:tools", "mcp:read"})},
		{"token without kid", bearer(sign(t, testKey{"", ecKey.alg, ecKey.priv}, claims(nil))), ok("alice", "jwt", []string{"dev", "ops"}, []string{"mcp:tools", "mcp:read"})},
		{"aud array, groups string, scp array", bearer(sign(t, rsaKey, claims(map[string]any{
			"aud": []string{"https://other.example.com", testResource}, "groups": "a b", "scope": nil, "scp": []string{"mcp:tools"},
		}))), ok("alice", "jwt", []string{"a", "b"}, []string{"mcp:tools"})},
		{"within leeway of exp", bearer(sign(t, rsaKey, claims(map[string]any{"exp": now.Add(-30 * time.Second).Unix()}))), ok("alice", "jwt", []string{"dev", "ops"}, []string{"mcp:tools", "mcp:read"})},

		// Invalid JWTs.
		{"signed by a key not in the JWKS (same kid)", bearer(sign(t, rogue, claims(nil))), fail(401, "invalid_token", "invalid token signature")},
		{"signed by a key not in the JWKS (unknown kid)", bearer(sign(t, testKey{"rogue", rogue.alg, rogue.priv}, claims(nil))), fail(401, "invalid_token", "unknown key")},
		{"expired", bearer(sign(t, rsaKey, claims(map[string]any{"exp": now.Add(-2 * time.Minute).Unix()}))), fail(401, "invalid_token", "token expired")},
		{"no exp", bearer(sign(t, rsaKey, claims(map[string]any{"exp": nil}))), fail(401, "invalid_token", "no expiry")},
		{"not yet valid", bearer(sign(t, rsaKey, claims(map[string]any{"nbf": now.Add(5 * time.Minute).Unix()}))), fail(401, "invalid_token", "not yet valid")},
		{"issued in the future", bearer(sign(t, rsaKey, claims(map[string]any{"iat": now.Add(5 * time.Minute).Unix()}))), fail(401, "invalid_token", "issued in the future")},
		{"wrong audience", bearer(sign(t, rsaKey, claims(map[string]any{"aud": "https://other.example.com/mcp"}))), fail(401, "invalid_token", "audience")},
		{"no audience", bearer(sign(t, rsaKey, claims(map[string]any{"aud": nil}))), fail(401, "invalid_token", "audience")},
		{"wrong issuer", bearer(sign(t, rsaKey, claims(map[string]any{"iss": "https://evil.example.com"}))), fail(401, "invalid_token", "issuer")},
		{"no subject", bearer(sign(t, rsaKey, claims(map[string]any{"sub": nil}))), fail(401, "invalid_token", "no subject")},
		{"alg none", bearer(unsigned(claims(nil))), fail(401, "invalid_token", "algorithm not allowed")},
		{"HS256 keyed with the public key", bearer(signHS256WithPublicKey(t, rsaKey, claims(nil))), fail(401, "invalid_token", "algorithm not allowed")},
		{"tampered payload", bearer(tamper(sign(t, rsaKey, claims(nil)))), fail(401, "invalid_token", "invalid token signature")},
		{"garbage with two dots", bearer("a.b.c"), fail(401, "invalid_token", "malformed")},

		// Scope.
		{"valid token lacking required scope", bearer(sign(t, rsaKey, claims(map[string]any{"scope": "mcp:read"}))), fail(403, "insufficient_scope", "insufficient scope")},

		// Missing or malformed credentials.
		{"no credentials", nil, fail(401, "", "")},
		{"basic auth", http.Header{"Authorization": {"Basic YWxpY2U6c2VjcmV0"}}, fail(401, "", "")},
		{"empty bearer", http.Header{"Authorization": {"Bearer "}}, fail(401, "invalid_request", "empty")},
		{"two credentials", http.Header{"Authorization": {"Bearer " + opsKey}, "X-Api-Key": {ciKey}}, fail(401, "invalid_request", "more than one")},
		{"two Authorization headers", http.Header{"Authorization": {"Bearer " + opsKey, "Bearer " + ciKey}}, fail(401, "invalid_request", "more than one")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, f := a.Authenticate(request(c.h))
			if c.want.status == 0 {
				if f != nil {
					t.Fatalf("failure %d %q (%s), want principal %q", f.Status, f.Message, f.Reason, c.want.name)
				}
				if p.Name != c.want.name || p.Via != c.want.via || !slices.Equal(p.Groups, c.want.groups) || !slices.Equal(p.Scopes, c.want.scopes) {
					t.Fatalf("principal %+v, want name %q via %q groups %q scopes %q", p, c.want.name, c.want.via, c.want.groups, c.want.scopes)
				}
				// Its identity says how it was established (and by which issuer), and is
				// computed already: ID is free per call.
				wantID := c.want.via + ":" + c.want.name
				if c.want.via == "jwt" {
					wantID = "jwt:" + jc.Issuer + "#" + c.want.name
				}
				if p.ID() != wantID || testing.AllocsPerRun(10, func() { _ = p.ID() }) != 0 {
					t.Errorf("identity %q, want %q, computed once", p.ID(), wantID)
				}
				return
			}
			if f == nil {
				t.Fatalf("principal %+v, want failure %d", p, c.want.status)
			}
			if p != nil {
				t.Fatalf("failure came with a principal %+v", p)
			}
			t.Logf("%d %q; reason: %s", f.Status, f.Message, f.Reason)
			if f.Status != c.want.status {
				t.Fatalf("status %d (%s), want %d", f.Status, f.Reason, c.want.status)
			}
			params := challengeParams(t, f.WWWAuthenticate)
			if params["resource_metadata"] != testMetaURL {
				t.Errorf("resource_metadata %q, want %q (challenge %s)", params["resource_metadata"], testMetaURL, f.WWWAuthenticate)
			}
			if params["scope"] != "mcp:tools" {
				t.Errorf("scope %q, want mcp:tools", params["scope"])
			}
			if params["error"] != c.want.errCode {
				t.Errorf("error %q, want %q (reason %s)", params["error"], c.want.errCode, f.Reason)
			}
			if !strings.Contains(params["error_description"], c.want.desc) {
				t.Errorf("error_description %q, want it to contain %q (reason %s)", params["error_description"], c.want.desc, f.Reason)
			}
			if tok := strings.TrimPrefix(c.h.Get("Authorization"), "Bearer "); len(tok) > 8 && (strings.Contains(f.Reason, tok) || strings.Contains(f.WWWAuthenticate, tok)) {
				t.Errorf("failure leaks the token: %+v", f)
			}
		})
	}
}

// tamper changes the token's subject, keeping its signature.
func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	payload = bytes.Replace(payload, []byte(`"alice"`), []byte(`"admin"`), 1)
	parts[1] = base64.RawURLEncoding.EncodeToString(payload)
	return strings.Join(parts, ".")
}

func TestAPIKeysOnly(t *testing.T) {
	keys(t)
	a, _ := newAuth(t, Config{APIKeys: []APIKey{{Name: "ci", Token: ciKey}}})
	if p, f := a.Authenticate(request(bearer(ciKey))); f != nil || p.Name != "ci" {
		t.Fatalf("got %+v, %+v", p, f)
	}
	_, f := a.Authenticate(request(bearer(sign(t, rsaKey, claims(nil)))))
	if f == nil || f.Status != 401 || !strings.Contains(f.WWWAuthenticate, `realm="mcp-proxy"`) || strings.Contains(f.WWWAuthenticate, "resource_metadata") {
		t.Fatalf("JWT without OAuth configured: %+v", f)
	}
	if a.IsMetadataPath(WellKnownPath) || a.MetadataURL() != "" {
		t.Fatal("metadata served without OAuth")
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	jwt := func(mod func(*JWTConfig)) *JWTConfig {
		c := &JWTConfig{Issuer: testIssuer, JWKSURL: "https://auth.example.com/jwks"}
		if mod != nil {
			mod(c)
		}
		return c
	}
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"nothing configured", Config{}, "nothing to authenticate"},
		{"bad hex", Config{APIKeys: []APIKey{{Name: "a", SHA256: strings.Repeat("zz", 32)}}}, "hex digits"},
		{"short hash", Config{APIKeys: []APIKey{{Name: "a", SHA256: "abcd"}}}, "hex digits"},
		{"no name", Config{APIKeys: []APIKey{{Token: ciKey}}}, "no name"},
		{"duplicate name", Config{APIKeys: []APIKey{{Name: "a", Token: ciKey}, {Name: "a", Token: opsKey}}}, "twice"},
		{"same key twice", Config{APIKeys: []APIKey{{Name: "a", Token: ciKey}, {Name: "b", SHA256: HashToken(ciKey)}}}, "same key"},
		{"both hash and token", Config{APIKeys: []APIKey{{Name: "a", Token: ciKey, SHA256: HashToken(ciKey)}}}, "not both"},
		{"empty token", Config{APIKeys: []APIKey{{Name: "a"}}}, "empty token"},
		{"jwt without resource", Config{JWT: jwt(nil)}, "resource"},
		{"relative resource", Config{Resource: "/mcp", JWT: jwt(nil)}, "absolute"},
		{"jwt without issuer", Config{Resource: testResource, JWT: jwt(func(c *JWTConfig) { c.Issuer = "" })}, "issuer"},
		{"jwt without jwks", Config{Resource: testResource, JWT: jwt(func(c *JWTConfig) { c.JWKSURL = "" })}, "jwks_url"},
		{"jwks over http", Config{Resource: testResource, JWT: jwt(func(c *JWTConfig) { c.JWKSURL = "http://auth.example.com/jwks" })}, "https"},
		{"alg none", Config{Resource: testResource, JWT: jwt(func(c *JWTConfig) { c.Algorithms = []string{"none"} })}, "not allowed"},
		{"alg HS256", Config{Resource: testResource, JWT: jwt(func(c *JWTConfig) { c.Algorithms = []string{"RS256", "HS256"} })}, "not allowed"},
		{"bad scope", Config{Resource: testResource, JWT: jwt(func(c *JWTConfig) { c.RequiredScopes = []string{`a"b`} })}, "scope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := New(c.cfg, zerolog.Nop())
			if err == nil {
				a.Close()
				t.Fatalf("New accepted %+v", c.cfg)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want it to mention %q", err, c.want)
			}
		})
	}
}

// TestKeyRotation: a key that appears in the JWKS after startup is fetched when a token
// names it.
func TestKeyRotation(t *testing.T) {
	keys(t)
	is := newIssuer(t, rsaKey)
	jc := is.jwtConfig()
	jc.MinRefreshInterval = 20 * time.Millisecond
	a, _ := newAuth(t, Config{Resource: testResource, JWT: jc})

	if _, f := a.Authenticate(request(bearer(sign(t, rsaKey, claims(nil))))); f != nil {
		t.Fatalf("initial key: %+v", f)
	}
	fetches := is.fetches.Load()
	is.add(ecKey)
	time.Sleep(30 * time.Millisecond) // past the refresh rate limit
	p, f := a.Authenticate(request(bearer(sign(t, ecKey, claims(nil)))))
	if f != nil {
		t.Fatalf("rotated-in key: %+v", f)
	}
	if p.Name != "alice" {
		t.Fatalf("principal %+v", p)
	}
	if got := is.fetches.Load(); got != fetches+1 {
		t.Fatalf("%d JWKS fetches after rotation, want 1", got-fetches)
	}
}

// TestUnknownKidRateLimited: a flood of tokens with made-up key ids costs the issuer at
// most one fetch per minimum interval.
func TestUnknownKidRateLimited(t *testing.T) {
	keys(t)
	is := newIssuer(t, rsaKey)
	a, _ := newAuth(t, Config{Resource: testResource, JWT: is.jwtConfig()}) // default 30s
	if _, f := a.Authenticate(request(bearer(sign(t, rsaKey, claims(nil))))); f != nil {
		t.Fatalf("valid token: %+v", f)
	}
	before := is.fetches.Load()
	var wg sync.WaitGroup
	for i := range 50 {
		tok := sign(t, testKey{"bogus" + string(rune('a'+i%26)), rsaKey.alg, rsaKey.priv}, claims(nil))
		wg.Go(func() {
			if _, f := a.Authenticate(request(bearer(tok))); f == nil || f.Status != 401 {
				t.Errorf("unknown kid: %+v", f)
			}
		})
	}
	wg.Wait()
	if got := is.fetches.Load() - before; got != 0 {
		t.Fatalf("%d JWKS fetches within the rate limit, want 0", got)
	}
}

// TestJWKSDown: once fetched, keys keep working while the issuer is unreachable, through
// both periodic and on-demand refresh failures.
func TestJWKSDown(t *testing.T) {
	keys(t)
	is := newIssuer(t, rsaKey)
	jc := is.jwtConfig()
	jc.RefreshInterval = 10 * time.Millisecond
	jc.MinRefreshInterval = 5 * time.Millisecond
	a, logs := newAuth(t, Config{Resource: testResource, JWT: jc})
	tok := sign(t, rsaKey, claims(nil))
	if _, f := a.Authenticate(request(bearer(tok))); f != nil {
		t.Fatalf("before: %+v", f)
	}
	is.setDown(true)
	before := is.fetches.Load()
	time.Sleep(60 * time.Millisecond)
	// An unknown kid forces an on-demand fetch, which fails too.
	if _, f := a.Authenticate(request(bearer(sign(t, testKey{"new", ecKey.alg, ecKey.priv}, claims(nil))))); f == nil {
		t.Fatal("unknown key accepted while the issuer is down")
	}
	if is.fetches.Load() == before {
		t.Fatal("no refresh attempted while the issuer was down")
	}
	if _, f := a.Authenticate(request(bearer(tok))); f != nil {
		t.Fatalf("cached key rejected while the issuer is down: %+v", f)
	}
	if !strings.Contains(logs.String(), "keeping the cached keys") {
		t.Fatalf("failed fetch not logged: %s", logs)
	}
}

// TestJWKSUnreachableAtStart: without keys every token is rejected; keys arriving later
// are used.
func TestJWKSUnreachableAtStart(t *testing.T) {
	keys(t)
	is := newIssuer(t, rsaKey)
	is.setDown(true)
	jc := is.jwtConfig()
	jc.MinRefreshInterval = 20 * time.Millisecond
	a, _ := newAuth(t, Config{Resource: testResource, JWT: jc})
	tok := sign(t, rsaKey, claims(nil))
	if _, f := a.Authenticate(request(bearer(tok))); f == nil || f.Status != 401 {
		t.Fatalf("token accepted without keys: %+v", f)
	}
	is.setDown(false)
	time.Sleep(30 * time.Millisecond)
	if _, f := a.Authenticate(request(bearer(tok))); f != nil {
		t.Fatalf("after the issuer came up: %+v", f)
	}
}

func TestMetadata(t *testing.T) {
	keys(t)
	is := newIssuer(t, rsaKey)
	jc := is.jwtConfig()
	jc.RequiredScopes = []string{"mcp:tools"}
	jc.ScopesSupported = []string{"mcp:tools", "mcp:admin"}
	a, _ := newAuth(t, Config{Resource: testResource, JWT: jc})
	if a.MetadataURL() != testMetaURL {
		t.Fatalf("MetadataURL %q, want %q", a.MetadataURL(), testMetaURL)
	}
	h := a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("%s reached the protected handler", r.URL.Path)
	}))
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %s", path, w.Code, w.Header())
		}
		var doc map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			"resource":                 testResource,
			"authorization_servers":    []any{testIssuer},
			"bearer_methods_supported": []any{"header"},
			"scopes_supported":         []any{"mcp:tools", "mcp:admin"},
		}
		gotJSON, _ := json.Marshal(doc)
		wantJSON, _ := json.Marshal(want)
		if string(gotJSON) != string(wantJSON) {
			t.Fatalf("%s: %s, want %s", path, gotJSON, wantJSON)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, WellKnownPath, nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST metadata: %d", w.Code)
	}
	w = httptest.NewRecorder()
	a.MetadataHandler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, WellKnownPath+"/other", nil))
	if w.Code != 404 {
		t.Fatalf("other metadata path: %d", w.Code)
	}
	// A resource at the root has only the root form.
	b, _ := newAuth(t, Config{Resource: "http://localhost:8080/", JWT: is.jwtConfig()})
	if got := b.MetadataURL(); got != "http://localhost:8080"+WellKnownPath {
		t.Fatalf("root resource MetadataURL %q", got)
	}
}

func TestMiddleware(t *testing.T) {
	keys(t)
	is := newIssuer(t, rsaKey)
	jc := is.jwtConfig()
	jc.RequiredScopes = []string{"mcp:tools"}
	a, logs := newAuth(t, Config{Resource: testResource, JWT: jc, APIKeys: []APIKey{{Name: "ci", Groups: []string{"ci"}, Token: ciKey}}})
	var got *principal.Principal
	var gotHeader, gotCreds http.Header
	h := a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, gotHeader, gotCreds = principal.From(r.Context()), r.Header, Credentials(r.Context())
		w.WriteHeader(204)
	}))

	// Success: the principal is in the context and the credential is gone from the
	// headers, kept aside for a forward to another replica only (Credentials).
	w := httptest.NewRecorder()
	h.ServeHTTP(w, request(bearer(ciKey)))
	if w.Code != 204 || got == nil || got.Name != "ci" || got.Via != "api_key" {
		t.Fatalf("api key: %d %+v", w.Code, got)
	}
	if gotHeader.Get("Authorization") != "" {
		t.Fatal("Authorization header passed on")
	}
	if gotCreds.Get("Authorization") != "Bearer "+ciKey || len(gotCreds) != 1 {
		t.Errorf("Credentials = %v, want the Authorization header as sent", gotCreds)
	}

	rpcErr := func(w *httptest.ResponseRecorder) (code int, msg string, data map[string]any) {
		t.Helper()
		var body struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   struct {
				Code    int            `json:"code"`
				Message string         `json:"message"`
				Data    map[string]any `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("body %q: %v", w.Body, err)
		}
		if body.JSONRPC != "2.0" || string(body.ID) != "null" {
			t.Fatalf("body %s", w.Body)
		}
		return body.Error.Code, body.Error.Message, body.Error.Data
	}

	// 401.
	bad := sign(t, rsaKey, claims(map[string]any{"exp": time.Now().Add(-time.Hour).Unix()}))
	got = nil
	w = httptest.NewRecorder()
	h.ServeHTTP(w, request(bearer(bad)))
	if got != nil || w.Code != 401 || !strings.Contains(w.Header().Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Fatalf("expired: %d %s %+v", w.Code, w.Header(), got)
	}
	code, msg, data := rpcErr(w)
	if code != CodeUnauthorized || msg != "Unauthorized: token expired" || data["origin"] != "mcp-proxy" || data["status"] != float64(401) {
		t.Fatalf("401 body %s", w.Body)
	}

	// 403.
	w = httptest.NewRecorder()
	h.ServeHTTP(w, request(bearer(sign(t, rsaKey, claims(map[string]any{"scope": "other"})))))
	if got != nil || w.Code != 403 {
		t.Fatalf("insufficient scope: %d %+v", w.Code, got)
	}
	params := challengeParams(t, w.Header().Get("WWW-Authenticate"))
	if params["error"] != "insufficient_scope" || params["scope"] != "mcp:tools" || params["resource_metadata"] != testMetaURL {
		t.Fatalf("403 challenge %q", w.Header().Get("WWW-Authenticate"))
	}
	if code, _, _ := rpcErr(w); code != CodeForbidden {
		t.Fatalf("403 code %d", code)
	}

	// One warning per failure, with the remote address, and never the token.
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	var warns []map[string]any
	for _, l := range lines {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["level"] == "warn" {
			warns = append(warns, m)
		}
	}
	if len(warns) != 2 || warns[0]["remote"] != "192.0.2.1:1234" || warns[0]["reason"] == "" {
		t.Fatalf("warnings %v", warns)
	}
	for _, secret := range []string{bad, ciKey, HashToken(ciKey)} {
		if strings.Contains(logs.String(), secret) {
			t.Fatal("a credential was logged")
		}
	}
}

// TestClaimNames: the principal and groups come from configured claims, a dotted groups
// claim is a path into nested objects (Keycloak's realm_access.roles).
func TestClaimNames(t *testing.T) {
	keys(t)
	is := newIssuer(t, ecKey)
	jc := is.jwtConfig()
	jc.PrincipalClaim = "email"
	jc.GroupsClaim = "realm_access.roles"
	jc.Audience = "mcp-proxy"
	a, _ := newAuth(t, Config{Resource: testResource, JWT: jc})
	tok := sign(t, ecKey, claims(map[string]any{
		"aud":          "mcp-proxy",
		"email":        "alice@example.com",
		"realm_access": map[string]any{"roles": []string{"admin"}},
		"scope":        nil,
	}))
	p, f := a.Authenticate(request(bearer(tok)))
	if f != nil {
		t.Fatalf("%+v", f)
	}
	if p.Name != "alice@example.com" || !slices.Equal(p.Groups, []string{"admin"}) || len(p.Scopes) != 0 {
		t.Fatalf("principal %+v", p)
	}
}

// TestVerifiedTokenCache: a token is verified once and then served from the cache until
// it expires; the cache holds no token past its expiry, and a tampered token never hits.
func TestVerifiedTokenCache(t *testing.T) {
	keys(t)
	is := newIssuer(t, rsaKey)
	a, _ := newAuth(t, Config{Resource: testResource, JWT: is.jwtConfig()})
	tok := sign(t, rsaKey, claims(nil))
	for i := 0; i < 5; i++ {
		if p, f := a.Authenticate(request(bearer(tok))); f != nil || p.Name != "alice" {
			t.Fatalf("call %d: %+v %+v", i, p, f)
		}
	}
	if n := a.jwt.verifications.Load(); n != 1 {
		t.Errorf("%d signature checks for five requests with one token, want 1", n)
	}
	if _, f := a.Authenticate(request(bearer(tamper(tok)))); f == nil {
		t.Error("a tampered token was accepted")
	}
	// A token about to expire is cached only until it expires.
	short := sign(t, rsaKey, claims(map[string]any{"exp": time.Now().Add(1100 * time.Millisecond).Unix()}))
	before := a.jwt.verifications.Load()
	a.Authenticate(request(bearer(short)))
	a.Authenticate(request(bearer(short)))
	if got := a.jwt.verifications.Load() - before; got != 1 {
		t.Errorf("%d checks before expiry, want 1", got)
	}
	time.Sleep(1200 * time.Millisecond)
	a.Authenticate(request(bearer(short))) // past exp: checked again (the leeway still admits it)
	if got := a.jwt.verifications.Load() - before; got != 2 {
		t.Errorf("an expired cache entry was used (%d checks)", got)
	}
}
