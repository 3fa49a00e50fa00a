package credential

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/authserver"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
)

// cachedProvider is a provider of mode "exchange" whose store holds a token for each
// of names (so that nothing is exchanged), each read once into the cache.
func cachedProvider(b testing.TB, names ...string) (*Provider, []*principal.Principal) {
	store := NewMemoryStore()
	now := time.Now()
	ps := make([]*principal.Principal, len(names))
	for i, n := range names {
		ps[i] = (&principal.Principal{Name: n, Via: principal.ViaJWT, Issuer: "https://idp.example", Token: principal.NewSecret("front-token-" + n)}).Identify()
		store.Put(context.Background(), &Grant{Upstream: "gh", Principal: ps[i].ID(), Mode: ModeExchange, Subject: n,
			AccessToken: principal.NewSecret(fmt.Sprintf("eyJhbGciOiJFUzI1NiJ9.upstream-token-of-%s.%0200d", n, i)), Expiry: now.Add(time.Hour), Updated: now})
	}
	p, err := NewProvider(Config{Upstream: "gh", Mode: ModeExchange, Exchange: &ExchangeConfig{TokenEndpoint: "http://127.0.0.1:1/token",
		Client: Client{ID: "proxy"}, Resource: "https://gh.example/mcp"}}, Deps{Store: store, Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	for _, who := range ps {
		if _, err := p.Admit(context.Background(), who, Call{Method: mcp.MethodToolsCall}); err != nil {
			b.Fatal(err)
		}
	}
	return p, ps
}

// BenchmarkAdmitCached is Admit for a principal whose token is cached: what the router
// asks before each call to a per-user upstream.
func BenchmarkAdmitCached(b *testing.B) {
	p, ps := cachedProvider(b, "alice")
	ctx, call := context.Background(), Call{Method: mcp.MethodToolsCall}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.Admit(ctx, ps[0], call); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAuthorizationCached is the Authorization of one HTTP request of a principal's
// session: the cached token's header.
func BenchmarkAuthorizationCached(b *testing.B) {
	p, ps := cachedProvider(b, "alice")
	a := p.Authorizer(ps[0])
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if t, err := a.Authorization(ctx); err != nil || t == nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExchangeFirstCall is the first call of a principal to an upstream in mode
// "exchange": the store is read (a miss), the principal's token exchanged at the test
// authorization server over loopback HTTP (its ES256 verification and signing are in this
// process too, so ns/op is the whole round trip), and the result stored.
func BenchmarkExchangeFirstCall(b *testing.B) {
	as, err := authserver.Start(authserver.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer as.Close()
	as.AddClient(authserver.Client{ID: "proxy", Secret: "s3"})
	p, err := NewProvider(Config{Upstream: "gh", Mode: ModeExchange, Exchange: &ExchangeConfig{TokenEndpoint: as.URL + "/token",
		Client: Client{ID: "proxy", Secret: "s3", Method: AuthBasic}, Resource: "https://gh.example/mcp"}}, Deps{Store: NewMemoryStore(), Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	ps := make([]*principal.Principal, b.N)
	for i := range ps {
		n := fmt.Sprintf("p%d", i)
		ps[i] = (&principal.Principal{Name: n, Via: principal.ViaJWT, Issuer: as.URL, Token: principal.NewSecret(as.IssueFront(n, "https://proxy.example/mcp", time.Hour))}).Identify()
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.Admit(ctx, ps[i], Call{Method: mcp.MethodToolsCall}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCachedCredentialMemory reports the heap a cached credential holds in a
// process (bytes/credential: its handle and token, the principal's grant in a memory
// store), for 10,000 principals of one upstream with tokens of about 250 bytes.
func BenchmarkCachedCredentialMemory(b *testing.B) {
	const n = 10000
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("principal-%05d@example.com", i)
	}
	var before, after runtime.MemStats
	for i := 0; i < b.N; i++ {
		runtime.GC()
		runtime.ReadMemStats(&before)
		p, ps := cachedProvider(b, names...)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/credential")
		runtime.KeepAlive(p)
		runtime.KeepAlive(ps)
	}
}
