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
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
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

// TestExchangeCappedBySubject: an exchanged token (an ID-JAG's too) is not served past
// the expiry of the principal's own token that was exchanged, however long the
// upstream's token lives: neither from this process's cache, nor from the store by
// another replica. A principal with a fresh token of its own gets a new exchange.
func TestExchangeCappedBySubject(t *testing.T) {
	as := startAS(t) // the upstream's tokens live an hour
	as.AddClient(authserver.Client{ID: "proxy", Secret: "s3"})
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	as.AddClient(authserver.Client{ID: "proxy-at-as", Key: &k.PublicKey})
	as.MapIDJAGClient("proxy", "proxy-at-as")
	client := Client{ID: "proxy", Secret: "s3", Method: AuthBasic}
	for name, x := range map[string]*ExchangeConfig{
		"exchange": {TokenEndpoint: as.URL + "/token", Client: client, Resource: "https://gh.example/mcp"},
		"id-jag": {TokenEndpoint: as.URL + "/token", Client: client, Resource: "https://gh.example/mcp",
			IDJAG: &IDJAGConfig{Issuer: as.URL, Client: Client{ID: "proxy-at-as", Method: AuthJWT, Key: k}}},
	} {
		t.Run(name, func(t *testing.T) {
			now := time.Now()
			clock := func() time.Time { return now }
			store := NewMemoryStore()
			p, err := NewProvider(Config{Upstream: "gh", Mode: ModeExchange, Exchange: x}, Deps{Store: store, Log: zerolog.Nop(), Now: clock})
			if err != nil {
				t.Fatal(err)
			}
			ctx, call := context.Background(), Call{Method: mcp.MethodToolsCall}
			base := as.Count(authserver.GrantTokenExchange, "alice") // the other subtests'
			exchanges := func() int { return as.Count(authserver.GrantTokenExchange, "alice") - base }
			alice := frontPrincipal(as, "alice")
			alice.TokenExpiry = now.Add(10 * time.Minute) // the front token ends long before the upstream's
			if _, err := p.Admit(ctx, alice, call); err != nil {
				t.Fatal(err)
			}
			g, _ := store.Get(ctx, "gh", alice.ID())
			if g == nil || !g.Until.Equal(alice.TokenExpiry) || !g.Expiry.After(alice.TokenExpiry) || !g.Info().Expiry.Equal(alice.TokenExpiry) {
				t.Fatalf("stored grant: %+v", g)
			}
			now = now.Add(9 * time.Minute) // within: served from the cache, no exchange
			if _, err := p.Admit(ctx, alice, call); err != nil || exchanges() != 1 {
				t.Fatalf("before the front token's expiry: %v, %d exchanges", err, exchanges())
			}
			// Another replica (a provider of its own over the same store) does not serve
			// the stored token past the front token's expiry either.
			other, _ := NewProvider(Config{Upstream: "gh", Mode: ModeExchange, Exchange: x}, Deps{Store: store, Log: zerolog.Nop(), Now: clock})
			now = now.Add(2 * time.Minute)
			var je *jsonrpc.Error
			if _, err := p.Authorizer(alice).Authorization(ctx); !errors.As(err, &je) || je.Code != mcp.CodeCredentialUnavailable ||
				!strings.Contains(je.Message, "access token has expired") || exchanges() != 1 {
				t.Errorf("past the front token's expiry: %v, %d exchanges; want -31012 and none (the token it would present has expired)", err, exchanges())
			}
			if _, err := p.Admit(ctx, alice, call); err == nil || exchanges() != 1 {
				t.Errorf("a call past the front token's expiry: %v, %d exchanges", err, exchanges())
			}
			// The principal comes back with a fresh front token: a new exchange, capped at it.
			alice2 := frontPrincipal(as, "alice")
			alice2.TokenExpiry = now.Add(5 * time.Minute)
			before := exchanges()
			if _, err := other.Admit(ctx, alice2, call); err != nil || exchanges() != before+1 || before != 1 {
				t.Fatalf("with a fresh front token on the other replica: %v, %d exchanges (had %d)", err, exchanges(), before)
			}
			if g, _ := store.Get(ctx, "gh", alice.ID()); g == nil || !g.Until.Equal(alice2.TokenExpiry) {
				t.Errorf("the new grant: %+v", g)
			}
		})
	}
}
