package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/authserver"
)

// startAuthServer starts the test authorization server and stops it with the test.
func startAuthServer(t *testing.T, opts authserver.Options) *authserver.Server {
	t.Helper()
	as, err := authserver.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { as.Close() })
	return as
}

// writeECKey writes a new P-256 private key as PEM (mode 0600) and returns its path and
// public key.
func writeECKey(t *testing.T) (string, *ecdsa.PublicKey) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "client.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, &k.PublicKey
}

// noTokens fails the test when a token the authorization server issued appears in one
// of the logs.
func noTokens(t *testing.T, as *authserver.Server, logs ...fmt.Stringer) {
	t.Helper()
	for _, l := range logs {
		s := l.String()
		for _, tok := range as.Issued() {
			if strings.Contains(s, tok) {
				t.Errorf("an issued token (%s…) appears in a log", tok[:12])
			}
			// A JWT's signature alone is enough to find it again.
			if i := strings.LastIndexByte(tok, '.'); i > 0 && len(tok)-i > 20 && strings.Contains(s, tok[i+1:]) {
				t.Errorf("an issued token's signature appears in a log")
			}
		}
	}
}

// TestCredentialsExchange: an upstream in credentials mode "exchange" is called, for
// each principal, with a token the identity provider issued for it in exchange for the
// principal's own (RFC 8693): two principals reach the upstream as two identities, and
// the upstream (which accepts only tokens whose audience is itself) never sees the
// client's token. The identity assertion grant (an ID-JAG presented with the JWT bearer
// grant, the proxy authenticated by private_key_jwt) serves the same way. A refused
// exchange is a proxy error naming the upstream; concurrent first calls make one
// exchange; a token the upstream refuses (expired early) is exchanged again, once; an
// exchanged token is not served past the principal's own token's expiry. No token
// reaches a log.
func TestCredentialsExchange(t *testing.T) {
	t.Parallel()
	as := startAuthServer(t, authserver.Options{AccessJWTTTL: 4 * time.Second})
	as.AddClient(authserver.Client{ID: "mcp-proxy", Secret: "proxy-secret-0123"})
	keyFile, pub := writeECKey(t)
	as.AddClient(authserver.Client{ID: "proxy-at-upstream", Key: pub})
	as.MapIDJAGClient("mcp-proxy", "proxy-at-upstream")
	up, upLog := startTestserverHTTP(t, "-whoami", "-auth-jwks", as.URL+"/jwks", "-auth-issuer", as.URL, "-auth-anonymous-catalogue")

	addr := freeAddr(t)
	resource := "http://" + addr + "/mcp"
	cfg := writeConfig(t, fmt.Sprintf(`listen "http" {
  address = %q
}
auth {
  resource = %q
  jwt {
    issuer   = %q
    jwks_url = %q
  }
}
upstream "x" {
  url = %q
  credentials {
    mode           = "exchange"
    token_endpoint = %q
    client_id      = "mcp-proxy"
    client_secret  = "proxy-secret-0123"
    scopes         = ["mcp"]
  }
}
upstream "j" {
  url = %q
  credentials {
    mode           = "exchange"
    token_endpoint = %q
    client_id      = "mcp-proxy"
    client_secret  = "proxy-secret-0123"
    client_auth    = "client_secret_post"
    id_jag {
      issuer           = %q
      client_id        = "proxy-at-upstream"
      private_key_file = %q
    }
  }
}
`, addr, resource, as.URL, as.URL+"/jwks", up, as.URL+"/token", up, as.URL+"/token", as.URL, keyFile))
	stderr, _ := startProxyAt(t, cfg, addr)
	url := "http://" + addr + "/mcp"
	front := func(sub string) string { return as.IssueFront(sub, resource, 10*time.Minute) }

	who := func(name, tool string) (map[string]string, error) {
		cs := connectAs(t, url, front(name), nil, stderr)
		return whoamiOf(t, cs, tool)
	}
	for _, name := range []string{"alice", "bob"} {
		for _, tool := range []string{"x__whoami", "j__whoami"} {
			w, err := who(name, tool)
			if err != nil {
				t.Fatalf("%s %s: %v\n%s", name, tool, err, stderr)
			}
			if w["sub"] != name {
				t.Errorf("%s's %s reached the upstream as %q", name, tool, w["sub"])
			}
		}
	}
	if n := as.Count(authserver.GrantJWTBearer, "alice"); n != 1 {
		t.Errorf("alice's ID-JAG was presented %d times, want 1", n)
	}
	if n := as.Count(authserver.GrantTokenExchange, "alice"); n != 2 {
		t.Errorf("alice's token was exchanged %d times, want 2 (one per upstream)", n)
	}

	// A refused exchange: a proxy error naming the upstream and the provider's reason.
	as.RefuseExchange("carol")
	_, err := who("carol", "x__whoami")
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != -31013 || !strings.Contains(werr.Message, `upstream "x"`) || !strings.Contains(werr.Message, "invalid_grant") {
		t.Errorf("carol's call: %v", err)
	}

	// Concurrent first calls of one principal (one session each): one exchange.
	var wg sync.WaitGroup
	dave := front("dave")
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs := connectAs(t, url, dave, nil, stderr)
			if w, err := whoamiOf(t, cs, "x__whoami"); err != nil || w["sub"] != "dave" {
				t.Errorf("dave: %v %v", w, err)
			}
		}()
	}
	wg.Wait()
	if n := as.Count(authserver.GrantTokenExchange, "dave"); n != 1 {
		t.Errorf("dave's concurrent first calls made %d exchanges, want 1", n)
	}

	// Erin's own token ends (3 s) long before the token exchanged for it would (its
	// expires_in says an hour): past her token's expiry, within the front end's leeway,
	// the cached exchange no longer serves her (-31012, not the upstream's answer nor a
	// refused re-exchange's -31013), and a token the proxy knows expired is not
	// presented for another exchange.
	erin := connectAs(t, url, as.IssueFront("erin", resource, 3*time.Second), nil, stderr)
	if w, err := whoamiOf(t, erin, "x__whoami"); err != nil || w["sub"] != "erin" {
		t.Fatalf("erin: %v %v\n%s", w, err, stderr)
	}
	time.Sleep(3500 * time.Millisecond) // past her token's exp (whole seconds)
	if _, err := whoamiOf(t, erin, "x__whoami"); !errors.As(err, &werr) || werr.Code != -31012 || !strings.Contains(werr.Message, "access token has expired") {
		t.Errorf("erin after her own token expired: %v", err)
	}
	if n := as.Count(authserver.GrantTokenExchange, "erin"); n != 1 {
		t.Errorf("erin's token was exchanged %d times, want 1", n)
	}

	// The upstream refuses alice's token once it expires (before the proxy expected):
	// the proxy exchanges again, once, and the call succeeds.
	alice := connectAs(t, url, front("alice"), nil, stderr)
	time.Sleep(5200 * time.Millisecond) // past the JWT's exp, whole seconds after issue
	if w, err := whoamiOf(t, alice, "x__whoami"); err != nil || w["sub"] != "alice" {
		t.Fatalf("alice after her token expired: %v %v\n%s", w, err, stderr)
	}
	if n := as.Count(authserver.GrantTokenExchange, "alice"); n != 3 {
		t.Errorf("alice's token was exchanged %d times in all, want 3 (one more after the 401)", n)
	}
	noTokens(t, as, stderr, upLog)
}
