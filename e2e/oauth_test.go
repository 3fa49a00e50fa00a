package e2e

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// oauthGuard puts the everything-server behind OAuth: a resource server that answers
// 401 with a WWW-Authenticate challenge (RFC 9728) until a request carries a token its
// authorization server issued, and that authorization server (metadata, dynamic client
// registration, an authorization endpoint that approves at once, a token endpoint that
// checks PKCE).
type oauthGuard struct {
	as, rs *httptest.Server

	mu         sync.Mutex
	challenges map[string]string // code → code_challenge
	tokens     map[string]bool
	grants     []string // grant_type of each token request
	n          int
}

func newOAuthGuard(t *testing.T, upstream string) *oauthGuard {
	g := &oauthGuard{challenges: map[string]string{}, tokens: map[string]bool{}}
	g.as = httptest.NewServer(http.HandlerFunc(g.serveAS))
	t.Cleanup(g.as.Close)
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	g.rs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/oauth-protected-resource/mcp" {
			json.NewEncoder(w).Encode(map[string]any{"resource": g.rs.URL + "/mcp",
				"authorization_servers": []string{g.as.URL}, "scopes_supported": []string{"mcp"}})
			return
		}
		g.mu.Lock()
		ok := g.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		g.mu.Unlock()
		if !ok {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="invalid_token", resource_metadata="%s/.well-known/oauth-protected-resource/mcp"`, g.rs.URL))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		r.Header.Del("Authorization") // the everything-server has no use for it
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(g.rs.Close)
	return g
}

func (g *oauthGuard) serveAS(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch r.URL.Path {
	case "/.well-known/oauth-authorization-server":
		json.NewEncoder(w).Encode(map[string]any{"issuer": g.as.URL,
			"authorization_endpoint": g.as.URL + "/authorize", "token_endpoint": g.as.URL + "/token",
			"registration_endpoint": g.as.URL + "/register", "code_challenge_methods_supported": []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_basic"}, "response_types_supported": []string{"code"}})
	case "/register":
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"client_id": "e2e-client", "client_secret": "e2e-client-secret"})
	case "/authorize":
		q := r.URL.Query()
		g.n++
		code := fmt.Sprintf("code-%d", g.n)
		g.challenges[code] = q.Get("code_challenge")
		ru, _ := url.Parse(q.Get("redirect_uri"))
		ru.RawQuery = url.Values{"code": {code}, "state": {q.Get("state")}, "iss": {g.as.URL}}.Encode()
		http.Redirect(w, r, ru.String(), http.StatusFound)
	case "/token":
		r.ParseForm()
		g.grants = append(g.grants, r.PostForm.Get("grant_type"))
		if id, secret, ok := r.BasicAuth(); !ok || id != "e2e-client" || secret != "e2e-client-secret" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client"}`)
			return
		}
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if g.challenges[r.PostForm.Get("code")] != base64.RawURLEncoding.EncodeToString(sum[:]) {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
			return
		}
		g.n++
		tok := fmt.Sprintf("e2e-access-token-%d", g.n)
		g.tokens[tok] = true
		json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
	default:
		http.NotFound(w, r)
	}
}

// TestOAuthUpstream: an HTTP upstream behind OAuth works with no oauth configuration at
// all: the proxy discovers the authorization server, registers, runs the authorization
// code grant with PKCE, and calls the upstream with the token, which it never logs.
func TestOAuthUpstream(t *testing.T) {
	t.Parallel()
	g := newOAuthGuard(t, startHTTPEverything(t, true))
	cfg := writeConfig(t, fmt.Sprintf("upstream \"remote\" {\n  url = %q\n  namespace = \"ev\"\n}\n", g.rs.URL+"/mcp"))
	cs, stderr := connectSDK(t, cfg, nil, "")
	ctx := ctxT(t, 60*time.Second)
	if names := toolNames(t, cs); !slices.Contains(names, "ev__test_simple_text") {
		t.Fatalf("tools behind OAuth: %v\n%s", names, stderr)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_simple_text"})
	if err != nil || !strings.Contains(textOf(res), "simple text") {
		t.Errorf("call behind OAuth: %v %q", err, textOf(res))
	}
	g.mu.Lock()
	grants := slices.Clone(g.grants)
	g.mu.Unlock()
	if !slices.Equal(grants, []string{"authorization_code"}) {
		t.Errorf("token requests %v, want one authorization_code grant", grants)
	}
	for _, secret := range []string{"e2e-access-token", "e2e-client-secret"} {
		if strings.Contains(stderr.String(), secret) {
			t.Errorf("the proxy's log shows a secret (%s)", secret)
		}
	}
}

// TestOAuthBridgeURL: `mcp-proxy bridge --url` in front of a server behind OAuth (the
// mcp-remote use: a stdio-only client reaching a remote server that wants a login) gets
// authorized with no configuration, and its stdout carries only protocol messages.
func TestOAuthBridgeURL(t *testing.T) {
	t.Parallel()
	g := newOAuthGuard(t, startHTTPEverything(t, false))
	cs, stderr := connectBridge(t, g.rs.URL+"/mcp")
	res, err := cs.CallTool(ctxT(t, 30*time.Second), &mcp.CallToolParams{Name: "test_simple_text"})
	if err != nil || !strings.Contains(textOf(res), "simple text") {
		t.Fatalf("call through bridge behind OAuth: %v %q\n%s", err, textOf(res), stderr)
	}
	g.mu.Lock()
	grants := slices.Clone(g.grants)
	g.mu.Unlock()
	if len(grants) != 1 || grants[0] != "authorization_code" {
		t.Errorf("token requests %v, want one authorization_code grant", grants)
	}
	if strings.Contains(stderr.String(), "e2e-access-token") {
		t.Error("the bridge's log shows the access token")
	}
}
