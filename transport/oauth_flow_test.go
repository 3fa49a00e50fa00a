package transport

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestOAuthErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(as *testAS, rs *testResource)
		want  string
	}{
		{"metadata issuer mismatch", func(as *testAS, _ *testResource) { as.issuerLie = "https://attacker.example" }, "names issuer"},
		{"state mismatch", func(as *testAS, _ *testResource) { as.badState = true }, "state does not match"},
		{"resource mismatch", func(_ *testAS, rs *testResource) { rs.prmResource = "https://evil.example/mcp" }, "refusing to authorize"},
		{"authorization server down", func(as *testAS, _ *testResource) { as.srv.Close() }, "authorization server metadata"},
		{"iss of another issuer", func(as *testAS, _ *testResource) { as.iss = "https://evil.example" }, "comes from issuer"},
		{"iss normalized", func(as *testAS, _ *testResource) { as.iss = as.issuer() + "/" }, "refusing it"},
		{"iss missing though advertised", func(as *testAS, _ *testResource) { as.iss = "-" }, "has no iss"},
		{"no metadata at all", func(as *testAS, _ *testResource) { as.metadataPath = "/nowhere" }, "no authorization server metadata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as, rs, l, _ := setup(t, "", OAuthConfig{})
			tc.setup(as, rs)
			got := call(t, l, 1, "tools/list")
			if !strings.HasPrefix(got, "request failed: ") || !strings.Contains(got, tc.want) {
				t.Errorf("answer %s, want an error saying %q", got, tc.want)
			}
		})
	}
}

func TestParseChallenge(t *testing.T) {
	h := http.Header{}
	h.Add("WWW-Authenticate", `Basic realm="x"`)
	h.Add("WWW-Authenticate", `Bearer error="insufficient_scope", scope="a b", resource_metadata="https://r.example/.well-known/oauth-protected-resource/mcp", error_description="a \"quoted\" text"`)
	c := parseChallenge(h)
	if c.err != "insufficient_scope" || c.scope != "a b" || c.resourceMetadata != "https://r.example/.well-known/oauth-protected-resource/mcp" {
		t.Errorf("%+v", c)
	}
	h = http.Header{"Www-Authenticate": {`bearer scope=read,error=invalid_token`}}
	if c := parseChallenge(h); c.scope != "read" || c.err != "invalid_token" {
		t.Errorf("%+v", c)
	}
}

func FuzzParseChallenge(f *testing.F) {
	f.Add(`Bearer error="x", scope="a b"`)
	f.Add(`Bearer resource_metadata="`)
	f.Fuzz(func(t *testing.T, s string) {
		parseChallenge(http.Header{"Www-Authenticate": {s}})
	})
}

func TestCheckSecure(t *testing.T) {
	for u, ok := range map[string]bool{
		"https://as.example/token":    true,
		"http://localhost:8080/token": true,
		"http://127.0.0.1:1/token":    true,
		"http://[::1]:1/token":        true,
		"http://as.example/token":     false,
		"http://localhost.evil/token": false,
		"ftp://as.example/token":      false,
		"":                            true,
	} {
		if err := checkSecure(u); (err == nil) != ok {
			t.Errorf("checkSecure(%q) = %v", u, err)
		}
	}
}

// TestOAuthPlain401: a 401 without a Bearer challenge from a server without any OAuth
// metadata gets a clear error, not a guess at endpoints.
func TestOAuthPlain401(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	o, err := NewOAuth(srv.URL+"/mcp", OAuthConfig{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	l := DialHTTP(HTTPSpec{URL: srv.URL + "/mcp", OAuth: o})
	defer l.Stop(time.Second)
	if got := call(t, l, 1, "tools/list"); !strings.Contains(got, "without a Bearer challenge") {
		t.Errorf("answer %s", got)
	}
}

// TestOAuthHotPathAllocs: with a token, a request costs a load of the current token and
// a header assignment, no allocation.
func TestOAuthHotPathAllocs(t *testing.T) {
	o, err := NewOAuth("http://127.0.0.1:1/mcp", OAuthConfig{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	tok := newOAuthToken("x")
	tok.refresh, tok.expiry = "r", time.Now().Add(time.Hour)
	o.tok.Store(tok)
	h := http.Header{}
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		if sent, _ := o.Authorization(ctx); sent != nil {
			h["Authorization"] = sent.Header
		}
	}); n != 0 {
		t.Errorf("%v allocations per request", n)
	}
}

// TestOAuthCallbackRefusesForeignState: a callback whose state is not the pending
// request's is refused, and the real one still completes the flow.
func TestOAuthCallbackRefusesForeignState(t *testing.T) {
	as, _, l, log := setup(t, "", OAuthConfig{})
	as.manual = true
	q := awaitApproval(t, as, l, log)
	forged := q.Get("redirect_uri") + "?" + url.Values{"code": {"evil"}, "state": {"forged"}}.Encode()
	resp, err := http.Get(forged)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("forged callback: HTTP %d", resp.StatusCode)
	}
	real := q.Get("redirect_uri") + "?" + url.Values{"code": {"code-1"}, "state": {q.Get("state")}, "iss": {as.issuer()}}.Encode()
	if resp, err = http.Get(real); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	line, err := readLineTimeout(l, 10*time.Second)
	if err != nil || !strings.Contains(string(line), `"ok":true`) {
		t.Fatalf("%s %v", line, err)
	}
}

// TestOAuthAuthorizationServerMigration: when the resource's metadata names a new
// authorization server, the proxy registers there anew and shows it nothing of the old
// one (SEP-2352).
func TestOAuthAuthorizationServerMigration(t *testing.T) {
	as1, rs, l, _ := setup(t, "", OAuthConfig{})
	call(t, l, 1, "tools/list")
	as2 := newTestAS(t, "")
	rs.as.Store(as2)
	if got := call(t, l, 2, "tools/list"); !strings.Contains(got, `"ok":true`) {
		t.Fatal(got)
	}
	if _, _, regs := as1.counts(); regs != 1 {
		t.Errorf("%d registrations at the first server", regs)
	}
	auths, _, regs := as2.counts()
	if auths != 1 || regs != 1 {
		t.Errorf("at the new server: %d authorizations, %d registrations; want 1 and 1", auths, regs)
	}
	as2.mu.Lock()
	defer as2.mu.Unlock()
	for _, f := range as2.tokenReqs {
		if f.Get("grant_type") != "authorization_code" {
			t.Errorf("the new server got %v", f)
		}
	}
}
