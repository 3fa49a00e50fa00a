package credential

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/authserver"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
)

func startAS(t *testing.T) *authserver.Server {
	t.Helper()
	as, err := authserver.Start(authserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { as.Close() })
	return as
}

func frontPrincipal(as *authserver.Server, name string) *principal.Principal {
	return (&principal.Principal{Name: name, Via: principal.ViaJWT, Issuer: as.URL,
		Token: principal.NewSecret(as.IssueFront(name, "https://proxy.example/mcp", time.Hour))}).Identify()
}

// TestExchangeProvider: the provider exchanges a principal's token once however many
// calls want it at once, serves the cached token without asking again, stores it, and
// gives the upstream's request its Authorization; a refused exchange is -31013 naming
// the upstream; a principal without a token (an API key's) is -31012.
func TestExchangeProvider(t *testing.T) {
	as := startAS(t)
	as.AddClient(authserver.Client{ID: "proxy", Secret: "s3"})
	store := NewMemoryStore()
	p, err := NewProvider(Config{Upstream: "gh", Mode: ModeExchange, Exchange: &ExchangeConfig{
		TokenEndpoint: as.URL + "/token", Client: Client{ID: "proxy", Secret: "s3", Method: AuthBasic},
		Resource: "https://gh.example/mcp", Scopes: []string{"mcp"}}}, Deps{Store: store, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	alice := frontPrincipal(as, "alice")
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if a, err := p.Admit(ctx, alice, Call{Method: mcp.MethodToolsCall}); err != nil || a.Subject != "alice" {
				t.Errorf("admit: %+v %v", a, err)
			}
		}()
	}
	wg.Wait()
	if n := as.Count(authserver.GrantTokenExchange, "alice"); n != 1 {
		t.Errorf("%d exchanges for 8 concurrent calls, want 1", n)
	}
	b, err := p.Authorizer(alice).Authorization(ctx)
	if err != nil || len(b.Header) != 1 {
		t.Fatalf("authorization: %v %v", b, err)
	}
	c, err := as.Verify(strings.TrimPrefix(b.Header[0], "Bearer "))
	if err != nil || c.Str("sub") != "alice" || !c.HasAud("https://gh.example/mcp") {
		t.Errorf("the upstream's token: %v %v", c, err)
	}
	if g, _ := store.Get(ctx, "gh", alice.ID()); g == nil || g.Mode != ModeExchange || g.Subject != "alice" {
		t.Errorf("stored %+v", g)
	}
	// A 401: one re-exchange, whatever the number of requests refused.
	for i := 0; i < 3; i++ {
		if err := p.Authorizer(alice).Renew(ctx, http.StatusUnauthorized, nil, b); err != nil {
			t.Fatal(err)
		}
	}
	if n := as.Count(authserver.GrantTokenExchange, "alice"); n != 2 {
		t.Errorf("%d exchanges after three refusals of one token, want 2", n)
	}

	as.RefuseExchange("carol")
	_, err = p.Admit(ctx, frontPrincipal(as, "carol"), Call{Method: mcp.MethodToolsCall})
	var ref *Refusal
	if !errors.As(err, &ref) || ref.Err.Code != mcp.CodeCredentialFailed || !strings.Contains(ref.Err.Message, `upstream "gh"`) {
		t.Errorf("carol: %v", err)
	}
	_, err = p.Admit(ctx, &principal.Principal{Name: "bob", Via: "api_key"}, Call{Method: mcp.MethodToolsCall})
	if !errors.As(err, &ref) || ref.Err.Code != mcp.CodeCredentialUnavailable || !strings.Contains(ref.Err.Message, "api_key") {
		t.Errorf("bob (API key): %v", err)
	}
}

// TestExchangeIDJAG: the ID-JAG is asked for with the upstream's authorization server
// as audience, then presented there with the JWT bearer grant as a private_key_jwt
// client, whose token endpoint is found in its metadata.
func TestExchangeIDJAG(t *testing.T) {
	as := startAS(t)
	as.AddClient(authserver.Client{ID: "proxy", Secret: "s3"})
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	as.AddClient(authserver.Client{ID: "proxy-at-as", Key: &k.PublicKey})
	as.MapIDJAGClient("proxy", "proxy-at-as")
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	keyFile := filepath.Join(t.TempDir(), "k.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPrivateKey(keyFile); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a key others may read: %v", err)
	}
	os.Chmod(keyFile, 0o600)
	signer, err := LoadPrivateKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProvider(Config{Upstream: "jira", Mode: ModeExchange, Exchange: &ExchangeConfig{
		TokenEndpoint: as.URL + "/token", Client: Client{ID: "proxy", Secret: "s3", Method: AuthPost},
		Resource: "https://jira.example/mcp", IDJAG: &IDJAGConfig{Issuer: as.URL, Client: Client{ID: "proxy-at-as", Method: AuthJWT, Key: signer, KeyID: "k1"}}}},
		Deps{Store: NewMemoryStore(), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	alice := frontPrincipal(as, "alice")
	if _, err := p.Admit(context.Background(), alice, Call{Method: mcp.MethodToolsCall}); err != nil {
		t.Fatal(err)
	}
	b, _ := p.Authorizer(alice).Authorization(context.Background())
	c, err := as.Verify(strings.TrimPrefix(b.Header[0], "Bearer "))
	if err != nil || c.Str("sub") != "alice" || !c.HasAud("https://jira.example/mcp") || c.Str("client_id") != "proxy-at-as" {
		t.Errorf("the upstream's token: %v %v", c, err)
	}
	if as.Count(authserver.GrantJWTBearer, "alice") != 1 || as.Count(authserver.GrantTokenExchange, "alice") != 1 {
		t.Errorf("grants: jwt-bearer %d, exchange %d", as.Count(authserver.GrantJWTBearer, "alice"), as.Count(authserver.GrantTokenExchange, "alice"))
	}
}
