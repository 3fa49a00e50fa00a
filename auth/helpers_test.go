package auth

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/rs/zerolog"
)

const (
	testIssuer   = "https://auth.example.com"
	testResource = "https://mcp.example.com/mcp"
	testMetaURL  = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
)

// testKey is a signing key the test issuer may publish.
type testKey struct {
	kid  string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

func (k testKey) public() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"}
}

var (
	keysOnce                           sync.Once
	rsaKey, ecKey, edKey, psKey, rogue testKey
)

// keys generates the test keys once per test binary (RSA generation is slow under -race).
func keys(t testing.TB) {
	t.Helper()
	keysOnce.Do(func() {
		r1, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		r2, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		_, ed, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			panic(err)
		}
		rsaKey = testKey{"rsa1", jose.RS256, r1}
		psKey = testKey{"ps1", jose.PS256, r1}
		ecKey = testKey{"ec1", jose.ES256, ec}
		edKey = testKey{"ed1", jose.EdDSA, ed}
		// rogue claims the kid of a published key but is not the issuer's.
		rogue = testKey{"rsa1", jose.RS256, r2}
	})
}

// issuer serves a JWKS that tests can change or take down.
type issuer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	set     jose.JSONWebKeySet
	down    bool
	fetches atomic.Int32
}

func newIssuer(t testing.TB, ks ...testKey) *issuer {
	is := &issuer{}
	for _, k := range ks {
		is.set.Keys = append(is.set.Keys, k.public())
	}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.fetches.Add(1)
		is.mu.Lock()
		defer is.mu.Unlock()
		if is.down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		json.NewEncoder(w).Encode(is.set)
	}))
	t.Cleanup(is.srv.Close)
	return is
}

func (is *issuer) add(k testKey) {
	is.mu.Lock()
	is.set.Keys = append(is.set.Keys, k.public())
	is.mu.Unlock()
}

func (is *issuer) setDown(down bool) {
	is.mu.Lock()
	is.down = down
	is.mu.Unlock()
}

func (is *issuer) jwtConfig() *JWTConfig {
	return &JWTConfig{Issuer: testIssuer, JWKSURL: is.srv.URL + "/jwks"}
}

// newAuth builds an authenticator logging into the returned buffer.
func newAuth(t testing.TB, cfg Config) (*Authenticator, *syncBuffer) {
	t.Helper()
	buf := &syncBuffer{}
	a, err := New(cfg, zerolog.New(buf))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(a.Close)
	return a, buf
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// claims are a valid token's claims; mods may change or delete (nil value) entries.
func claims(mods map[string]any) map[string]any {
	now := time.Now()
	c := map[string]any{
		"iss":    testIssuer,
		"aud":    testResource,
		"sub":    "alice",
		"exp":    now.Add(5 * time.Minute).Unix(),
		"iat":    now.Unix(),
		"groups": []string{"dev", "ops"},
		"scope":  "mcp:tools mcp:read",
	}
	for k, v := range mods {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

func sign(t testing.TB, k testKey, c map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("at+jwt")
	var key any = jose.JSONWebKey{Key: k.priv, KeyID: k.kid}
	if k.kid == "" {
		key = k.priv
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// signHS256WithPublicKey is the classic algorithm-confusion attack: an HMAC "signature"
// keyed with the issuer's public key, which the attacker knows.
func signHS256WithPublicKey(t testing.TB, k testKey, c map[string]any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k.priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: jose.JSONWebKey{Key: der, KeyID: k.kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(c)
	obj, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// unsigned is an alg "none" token.
func unsigned(c map[string]any) string {
	enc := base64.RawURLEncoding
	h := enc.EncodeToString([]byte(`{"alg":"none","kid":"rsa1","typ":"JWT"}`))
	p, _ := json.Marshal(c)
	return h + "." + enc.EncodeToString(p) + "."
}

func bearer(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }

func request(h http.Header) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	for k, v := range h {
		r.Header[k] = v
	}
	return r
}

// challengeParams parses a Bearer challenge's auth-params.
func challengeParams(t testing.TB, h string) map[string]string {
	t.Helper()
	rest, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		t.Fatalf("challenge %q is not Bearer", h)
	}
	out := map[string]string{}
	for rest != "" {
		name, after, ok := strings.Cut(rest, `="`)
		if !ok {
			t.Fatalf("bad challenge %q", h)
		}
		var val strings.Builder
		i := 0
		for ; i < len(after) && after[i] != '"'; i++ {
			if after[i] == '\\' {
				i++
			}
			val.WriteByte(after[i])
		}
		out[strings.TrimSpace(name)] = val.String()
		rest = strings.TrimPrefix(strings.TrimSpace(after[i+1:]), ",")
		rest = strings.TrimSpace(rest)
	}
	return out
}
