package transport

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// testAS is a small but real OAuth 2.1 authorization server: metadata, dynamic client
// registration, an authorization endpoint that approves at once (redirecting to the
// redirect URI) unless manual is set, and a token endpoint that checks PKCE, the client
// and the resource parameter, and issues access and refresh tokens.
type testAS struct {
	t      *testing.T
	srv    *httptest.Server
	prefix string // issuer path ("" or "/tenant1")

	metadataPath string // where the metadata lives; default RFC 8414 path insertion
	issuerLie    string // a different issuer in the metadata
	noDCR        bool
	authMethods  []string // token_endpoint_auth_methods_supported; default ["none"]
	scopes       []string // scopes_supported
	badState     bool     // redirect with a wrong state
	manual       bool     // answer the authorization request with a login page
	expiresIn    int      // default 3600
	cimd         bool
	iss          string // the iss in the redirect: "" the issuer, "-" none

	mu         sync.Mutex
	challenges map[string]string // code → code_challenge
	authReqs   []url.Values
	tokenReqs  []url.Values
	tokenAuth  []string // Authorization header of token requests
	regs       []map[string]any
	issued     map[string][]string // access token → scopes
	n          int
}

func newTestAS(t *testing.T, prefix string) *testAS {
	a := &testAS{t: t, prefix: prefix, challenges: map[string]string{}, issued: map[string][]string{}, expiresIn: 3600}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *testAS) issuer() string { return a.srv.URL + a.prefix }

func (a *testAS) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	mdPath := a.metadataPath
	if mdPath == "" {
		mdPath = "/.well-known/oauth-authorization-server" + a.prefix
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == mdPath:
		iss := a.issuer()
		if a.issuerLie != "" {
			iss = a.issuerLie
		}
		methods := a.authMethods
		if methods == nil {
			methods = []string{"none"}
		}
		md := map[string]any{
			"issuer": iss, "authorization_endpoint": a.issuer() + "/authorize", "token_endpoint": a.issuer() + "/token",
			"response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"},
			"token_endpoint_auth_methods_supported":          methods,
			"authorization_response_iss_parameter_supported": true,
		}
		if !a.noDCR {
			md["registration_endpoint"] = a.issuer() + "/register"
		}
		if a.scopes != nil {
			md["scopes_supported"] = a.scopes
		}
		if a.cimd {
			md["client_id_metadata_document_supported"] = true
		}
		json.NewEncoder(w).Encode(md)
	case r.Method == http.MethodPost && r.URL.Path == a.prefix+"/register":
		var m map[string]any
		json.NewDecoder(r.Body).Decode(&m)
		a.regs = append(a.regs, m)
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"client_id": fmt.Sprintf("dyn-%d", len(a.regs)), "client_secret": "dyn-secret",
			"token_endpoint_auth_method": "client_secret_post"})
	case r.Method == http.MethodGet && r.URL.Path == a.prefix+"/authorize":
		q := r.URL.Query()
		a.authReqs = append(a.authReqs, q)
		a.n++
		code := fmt.Sprintf("code-%d", a.n)
		a.challenges[code] = q.Get("code_challenge") + " " + q.Get("scope")
		if a.manual {
			io.WriteString(w, "<html>log in</html>")
			return
		}
		ru, _ := url.Parse(q.Get("redirect_uri"))
		v := ru.Query()
		v.Set("code", code)
		v.Set("state", q.Get("state"))
		if a.badState {
			v.Set("state", "forged")
		}
		switch a.iss {
		case "":
			v.Set("iss", a.issuer())
		case "-":
		default:
			v.Set("iss", a.iss)
		}
		ru.RawQuery = v.Encode()
		http.Redirect(w, r, ru.String(), http.StatusFound)
	case r.Method == http.MethodPost && r.URL.Path == a.prefix+"/token":
		r.ParseForm()
		a.tokenReqs = append(a.tokenReqs, r.PostForm)
		a.tokenAuth = append(a.tokenAuth, r.Header.Get("Authorization"))
		var scopes []string
		switch r.PostForm.Get("grant_type") {
		case "authorization_code":
			ch, ok := a.challenges[r.PostForm.Get("code")]
			delete(a.challenges, r.PostForm.Get("code"))
			challenge, scope, _ := strings.Cut(ch, " ")
			sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
			if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != challenge {
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, `{"error":"invalid_grant","error_description":"PKCE verification failed"}`)
				return
			}
			for _, sc := range strings.Fields(scope) {
				if sc != "admin" { // never granted
					scopes = append(scopes, sc)
				}
			}
		case "refresh_token":
			if !strings.HasPrefix(r.PostForm.Get("refresh_token"), "rt-") {
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, `{"error":"invalid_grant"}`)
				return
			}
		case "client_credentials":
			if u, p, ok := r.BasicAuth(); !ok || u != "m2m" || p != "m2m-secret" {
				w.WriteHeader(http.StatusUnauthorized)
				io.WriteString(w, `{"error":"invalid_client"}`)
				return
			}
			scopes = strings.Fields(r.PostForm.Get("scope"))
		}
		a.n++
		tok := fmt.Sprintf("at-%d", a.n)
		a.issued[tok] = scopes
		json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": a.expiresIn,
			"refresh_token": fmt.Sprintf("rt-%d", a.n), "scope": strings.Join(scopes, " ")})
	default:
		http.NotFound(w, r)
	}
}

func (a *testAS) valid(header string) ([]string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.issued[strings.TrimPrefix(header, "Bearer ")]
	return s, ok && strings.HasPrefix(header, "Bearer ")
}

func (a *testAS) counts() (auths, tokens, regs int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.authReqs), len(a.tokenReqs), len(a.regs)
}

// testResource is an MCP server at /mcp that wants a token from as.
type testResource struct {
	as          atomic.Pointer[testAS] // the authorization server it trusts (switchable)
	srv         *httptest.Server
	prmPath     string // "" for the path-aware default; "-" for none
	inHeader    bool   // resource_metadata in WWW-Authenticate
	scope       string // scope in WWW-Authenticate
	need        func(method string) []string
	prmResource string // a lie
	scopesSupp  []string
}

func newTestResource(t *testing.T, as *testAS) *testResource {
	rs := &testResource{inHeader: true}
	rs.as.Store(as)
	rs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		prm := rs.prmPath
		if prm == "" {
			prm = "/.well-known/oauth-protected-resource/mcp"
		}
		if r.Method == http.MethodGet && r.URL.Path == prm {
			res := rs.srv.URL + "/mcp"
			if rs.prmResource != "" {
				res = rs.prmResource
			}
			m := map[string]any{"resource": res, "authorization_servers": []string{rs.as.Load().issuer()}}
			if rs.scopesSupp != nil {
				m["scopes_supported"] = rs.scopesSupp
			}
			json.NewEncoder(w).Encode(m)
			return
		}
		if r.URL.Path != "/mcp" {
			http.NotFound(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		msg, _ := jsonrpc.Decode(body)
		params := []string{}
		if rs.inHeader && prm != "-" {
			params = append(params, fmt.Sprintf(`resource_metadata="%s%s"`, rs.srv.URL, prm))
		}
		if rs.scope != "" {
			params = append(params, fmt.Sprintf(`scope="%s"`, rs.scope))
		}
		scopes, ok := rs.as.Load().valid(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", "Bearer "+strings.Join(append(params, `error="invalid_token"`), ", "))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if rs.need != nil {
			if want := rs.need(msg.Method); !subset(want, scopes) {
				w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope="%s"`, strings.Join(want, " ")))
				w.WriteHeader(http.StatusForbidden)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"ok":true}}`, msg.ID.Raw())
	}))
	t.Cleanup(rs.srv.Close)
	return rs
}

type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// setup returns an AS, a resource server trusting it, and a link to the resource with
// an OAuth client configured by cfg.
func setup(t *testing.T, prefix string, cfg OAuthConfig) (*testAS, *testResource, *HTTPLink, *logBuf) {
	as := newTestAS(t, prefix)
	rs := newTestResource(t, as)
	log := &logBuf{}
	if cfg.AuthorizationTimeout == 0 {
		cfg.AuthorizationTimeout = 5 * time.Second
	}
	o, err := NewOAuth(rs.srv.URL+"/mcp", cfg, zerolog.New(log))
	if err != nil {
		t.Fatal(err)
	}
	l := DialHTTP(HTTPSpec{URL: rs.srv.URL + "/mcp", OAuth: o})
	t.Cleanup(func() { l.Stop(time.Second) })
	return as, rs, l, log
}

// call sends one request on l and returns its answer.
// call sends one request and returns the server's answer, or "request failed: …" when
// the link reports that the request failed (see RequestFailer).
func call(t *testing.T, l *HTTPLink, id int64, method string) string {
	t.Helper()
	failed := make(chan error, 1)
	l.OnRequestFailure(func(fid jsonrpc.ID, err error) {
		if n, _ := fid.Int64(); n == id {
			failed <- err
		}
	})
	if err := l.Write(jsonrpc.NewRequest(jsonrpc.IntID(id), method, []byte(`{}`))); err != nil {
		t.Fatal(err)
	}
	type res struct {
		b   []byte
		err error
	}
	answered := make(chan res, 1)
	go func() {
		b, err := readLineTimeout(l, 10*time.Second)
		answered <- res{b, err}
	}()
	select {
	case err := <-failed:
		return "request failed: " + err.Error()
	case r := <-answered:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return string(r.b)
	}
}

func TestOAuthDiscoveryRegistrationPKCE(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix string
		md     string // AS metadata path
		prm    string // PRM path
		header bool
	}{
		{"path-aware PRM from header, RFC 8414", "", "", "", true},
		{"path-aware PRM by well-known, OIDC", "", "/.well-known/openid-configuration", "", false},
		{"root PRM, issuer with path, path insertion", "/tenant1", "", "/.well-known/oauth-protected-resource", false},
		{"custom PRM, issuer with path, OIDC appended", "/tenant1", "/tenant1/.well-known/openid-configuration", "/custom/prm.json", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as, rs, l, log := setup(t, tc.prefix, OAuthConfig{})
			as.metadataPath, rs.prmPath, rs.inHeader = tc.md, tc.prm, tc.header
			if got := call(t, l, 1, "tools/list"); !strings.Contains(got, `"ok":true`) {
				t.Fatalf("answer %s", got)
			}
			if got := call(t, l, 2, "tools/list"); !strings.Contains(got, `"ok":true`) {
				t.Fatalf("second answer %s", got)
			}
			auths, tokens, regs := as.counts()
			if auths != 1 || tokens != 1 || regs != 1 {
				t.Errorf("authorizations %d, token requests %d, registrations %d; want 1 each", auths, tokens, regs)
			}
			as.mu.Lock()
			defer as.mu.Unlock()
			q, f := as.authReqs[0], as.tokenReqs[0]
			want := rs.srv.URL + "/mcp" // what the metadata says, whichever document
			if q.Get("resource") != want || f.Get("resource") != want {
				t.Errorf("resource %q / %q, want %q", q.Get("resource"), f.Get("resource"), want)
			}
			if q.Get("code_challenge_method") != "S256" || q.Get("state") == "" || q.Has("scope") {
				t.Errorf("authorization request %v", q)
			}
			if f.Get("client_id") != "dyn-1" || f.Get("client_secret") != "dyn-secret" {
				t.Errorf("token request client %v (registered as client_secret_post)", f)
			}
			if as.regs[0]["application_type"] != "native" {
				t.Errorf("registration %v", as.regs[0])
			}
			for _, secret := range []string{"dyn-secret", "at-", "rt-", f.Get("code_verifier")} {
				if strings.Contains(log.String(), secret) {
					t.Errorf("the log shows a secret (%q): %s", secret, log.String())
				}
			}
		})
	}
}

func TestOAuthScopes(t *testing.T) {
	t.Run("from WWW-Authenticate", func(t *testing.T) {
		as, rs, l, _ := setup(t, "", OAuthConfig{})
		rs.scope, rs.scopesSupp = "mcp:basic", []string{"other"}
		call(t, l, 1, "tools/list")
		if got := as.authReqs[0].Get("scope"); got != "mcp:basic" {
			t.Errorf("scope %q", got)
		}
	})
	t.Run("from scopes_supported, offline_access when the AS offers it", func(t *testing.T) {
		as, rs, l, _ := setup(t, "", OAuthConfig{})
		rs.scopesSupp, as.scopes = []string{"a", "b"}, []string{"a", "b", "offline_access"}
		call(t, l, 1, "tools/list")
		if got := as.authReqs[0].Get("scope"); got != "a b offline_access" {
			t.Errorf("scope %q", got)
		}
	})
	t.Run("configured", func(t *testing.T) {
		as, rs, l, _ := setup(t, "", OAuthConfig{Scopes: []string{"mine"}})
		rs.scope = "theirs"
		call(t, l, 1, "tools/list")
		if got := as.authReqs[0].Get("scope"); got != "mine theirs" {
			t.Errorf("scope %q", got)
		}
	})
}

func TestOAuthStepUp(t *testing.T) {
	as, rs, l, _ := setup(t, "", OAuthConfig{})
	rs.scope = "read"
	rs.need = func(m string) []string {
		if m == "tools/call" {
			return []string{"write"}
		}
		return []string{"read"}
	}
	call(t, l, 1, "tools/list")
	if got := call(t, l, 2, "tools/call"); !strings.Contains(got, `"ok":true`) {
		t.Fatalf("after step-up: %s", got)
	}
	if auths, _, regs := as.counts(); auths != 2 || regs != 1 {
		t.Fatalf("authorizations %d, registrations %d; want 2 and 1", auths, regs)
	}
	if got := as.authReqs[1].Get("scope"); got != "read write" {
		t.Errorf("step-up scope %q, want the union", got)
	}

	// A scope that is never enough: no endless loop of authorizations.
	rs.need = func(string) []string { return []string{"admin"} }
	got := call(t, l, 3, "tools/call")
	if !strings.Contains(got, "insufficient_scope") {
		t.Errorf("answer %s", got)
	}
	call(t, l, 4, "tools/call")
	call(t, l, 5, "tools/call")
	if auths, _, _ := as.counts(); auths != 3 {
		t.Errorf("%d authorizations for a scope that is never granted, want 3 (one attempt at it)", auths)
	}
}

func TestOAuthRefresh(t *testing.T) {
	t.Run("expiring token", func(t *testing.T) {
		as, _, l, _ := setup(t, "", OAuthConfig{})
		as.expiresIn = 1 // always within the refresh margin
		call(t, l, 1, "tools/list")
		if got := call(t, l, 2, "tools/list"); !strings.Contains(got, `"ok":true`) {
			t.Fatal(got)
		}
		if auths, _, _ := as.counts(); auths != 1 {
			t.Errorf("%d authorizations, want 1", auths)
		}
		if g := as.tokenReqs[len(as.tokenReqs)-1]; g.Get("grant_type") != "refresh_token" || g.Get("resource") == "" {
			t.Errorf("last token request %v", g)
		}
	})
	t.Run("on 401", func(t *testing.T) {
		as, _, l, _ := setup(t, "", OAuthConfig{})
		call(t, l, 1, "tools/list")
		as.mu.Lock()
		as.issued = map[string][]string{} // every token revoked
		as.mu.Unlock()
		if got := call(t, l, 2, "tools/list"); !strings.Contains(got, `"ok":true`) {
			t.Fatal(got)
		}
		if auths, _, _ := as.counts(); auths != 1 {
			t.Errorf("%d authorizations, want 1 (refreshed instead)", auths)
		}
	})
}

func TestOAuthOneFlowAtATime(t *testing.T) {
	as, _, l, _ := setup(t, "", OAuthConfig{})
	for i := range 10 {
		if err := l.Write(jsonrpc.NewRequest(jsonrpc.IntID(int64(i)), "tools/list", []byte(`{}`))); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		line, err := readLineTimeout(l, 10*time.Second)
		if err != nil || !strings.Contains(string(line), `"ok":true`) {
			t.Fatalf("%s %v", line, err)
		}
	}
	if auths, tokens, regs := as.counts(); auths != 1 || tokens != 1 || regs != 1 {
		t.Errorf("authorizations %d, tokens %d, registrations %d; want 1 each", auths, tokens, regs)
	}
}

func TestOAuthClientIdentity(t *testing.T) {
	t.Run("pre-registered, client_secret_basic", func(t *testing.T) {
		as, _, l, log := setup(t, "", OAuthConfig{ClientID: "pre", ClientSecret: "pre-secret"})
		as.noDCR, as.authMethods = true, []string{"client_secret_basic"}
		call(t, l, 1, "tools/list")
		if _, _, regs := as.counts(); regs != 0 {
			t.Errorf("registered %d times", regs)
		}
		if got := as.tokenAuth[0]; !strings.HasPrefix(got, "Basic ") || as.tokenReqs[0].Has("client_secret") {
			t.Errorf("token request authentication %q %v", got, as.tokenReqs[0])
		}
		if strings.Contains(log.String(), "pre-secret") {
			t.Error("the log shows the client secret")
		}
	})
	t.Run("client ID metadata document", func(t *testing.T) {
		as, _, l, _ := setup(t, "", OAuthConfig{ClientMetadataURL: "https://proxy.example/client.json"})
		as.cimd = true
		call(t, l, 1, "tools/list")
		if got := as.authReqs[0].Get("client_id"); got != "https://proxy.example/client.json" {
			t.Errorf("client_id %q", got)
		}
		if _, _, regs := as.counts(); regs != 0 {
			t.Errorf("registered %d times", regs)
		}
	})
	t.Run("client credentials", func(t *testing.T) {
		as, _, l, _ := setup(t, "", OAuthConfig{ClientID: "m2m", ClientSecret: "m2m-secret", Grant: GrantClientCredentials})
		as.authMethods = []string{"client_secret_basic"}
		if got := call(t, l, 1, "tools/list"); !strings.Contains(got, `"ok":true`) {
			t.Fatal(got)
		}
		if auths, _, _ := as.counts(); auths != 0 {
			t.Errorf("%d authorization requests for client_credentials", auths)
		}
	})
	t.Run("no DCR, no client_id", func(t *testing.T) {
		as, _, l, _ := setup(t, "", OAuthConfig{})
		as.noDCR = true
		if got := call(t, l, 1, "tools/list"); !strings.Contains(got, "configure a client_id") {
			t.Errorf("answer %s", got)
		}
	})
}

// awaitApproval sends a request on l to an authorization server that wants a person,
// waits until the proxy logs the URL, and returns the authorization request's query.
func awaitApproval(t *testing.T, as *testAS, l *HTTPLink, log *logBuf) url.Values {
	t.Helper()
	if err := l.Write(jsonrpc.NewRequest(jsonrpc.IntID(1), "tools/list", []byte(`{}`))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(log.String(), "open this URL") {
		if time.Now().After(deadline) {
			t.Fatalf("no URL logged: %s", log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.authReqs[0]
}

// TestOAuthManualApproval: an authorization server that shows a login page; the URL is
// logged and the browser's redirect to the loopback callback completes the flow.
func TestOAuthManualApproval(t *testing.T) {
	as, _, l, log := setup(t, "", OAuthConfig{})
	as.manual = true
	q := awaitApproval(t, as, l, log)
	// The person approves: the browser follows the AS's redirect to our callback.
	cb := q.Get("redirect_uri") + "?" + url.Values{"code": {"code-1"}, "state": {q.Get("state")}, "iss": {as.issuer()}}.Encode()
	if !strings.HasPrefix(cb, "http://127.0.0.1:") {
		t.Fatalf("redirect_uri %q", q.Get("redirect_uri"))
	}
	resp, err := http.Get(cb)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	line, err := readLineTimeout(l, 10*time.Second)
	if err != nil || !strings.Contains(string(line), `"ok":true`) {
		t.Fatalf("%s %v", line, err)
	}
}
