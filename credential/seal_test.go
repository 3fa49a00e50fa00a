package credential

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// sealedV1 are values sealed by the token store's code before it sealed through
// internal/seal (testdata/sealed-v1.json, tokens-v1.sealed): what a running proxy has
// in its token file or in Redis must still open after an upgrade.
type sealedV1 struct {
	Key, Previous         string
	Grant, Flow           []byte
	SecretGrantByPrevious []byte `json:"secret_grant_by_previous"`
}

func loadSealedV1(t *testing.T) sealedV1 {
	t.Helper()
	b, err := os.ReadFile("testdata/sealed-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var v sealedV1
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSealedByEarlierVersions: a grant, a flow and a grant sealed with a previous key by
// the earlier code open, whole, with the same keys; bound to another principal or
// upstream they do not.
func TestSealedByEarlierVersions(t *testing.T) {
	v := loadSealedV1(t)
	s, err := NewSealer(v.Key, v.Previous)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	g, err := s.OpenGrant(v.Grant, "github", "jwt:https://idp.example.com#alice")
	if err != nil {
		t.Fatal(err)
	}
	if g.Mode != ModeOAuth || g.AccessToken.Reveal() != "fixture-access-token" || g.RefreshToken.Reveal() != "fixture-refresh-token" ||
		!g.Expiry.Equal(at.Add(time.Hour)) || !g.Until.Equal(at.Add(2*time.Hour)) || !slices.Equal(g.Scopes, []string{"repo", "read:org"}) ||
		g.Issuer != "https://github.example.com" || g.Subject != "alice@example.com" || !g.Created.Equal(at) ||
		!g.Updated.Equal(at.Add(time.Minute)) || g.ClientID != "mcp-proxy-client" || g.ClientSecret.Reveal() != "fixture-client-secret" ||
		g.ClientAuth != "client_secret_basic" {
		t.Errorf("the grant opened as %+v", g)
	}
	sec, err := s.OpenGrant(v.SecretGrantByPrevious, "db", "api_key:bob")
	if err != nil || sec.Mode != ModeSecret || sec.Secrets["db_password"].Reveal() != "fixture-db-password" {
		t.Errorf("the grant sealed with the previous key: %+v %v", sec, err)
	}
	f, err := s.OpenFlow(v.Flow, "fixture-flow-id")
	if err != nil || f.Upstream != "github" || f.Principal != "api_key:alice" || f.Verifier.Reveal() != "fixture-verifier" ||
		f.State.Reveal() != "fixture-state" || f.Binding != "abcdef" || !f.Expires.Equal(at.Add(10*time.Minute)) ||
		f.ClientID != "c" || f.ClientSecret.Reveal() != "cs" || f.ClientAuth != "client_secret_post" {
		t.Errorf("the flow: %+v %v", f, err)
	}
	for _, c := range []struct{ up, p string }{{"github", "api_key:alice"}, {"gitlab", "jwt:https://idp.example.com#alice"}} {
		if _, err := s.OpenGrant(v.Grant, c.up, c.p); !errors.Is(err, ErrNotSealed) {
			t.Errorf("the grant opened as (%s, %s): %v", c.up, c.p, err)
		}
	}
	if _, err := s.OpenFlow(v.Flow, "another-flow"); !errors.Is(err, ErrNotSealed) {
		t.Errorf("the flow opened under another id: %v", err)
	}
	only, _ := NewSealer(v.Key)
	if _, err := only.OpenGrant(v.SecretGrantByPrevious, "db", "api_key:bob"); !errors.Is(err, ErrNotSealed) {
		t.Errorf("a grant of a key no longer given opened: %v", err)
	}
	// What the new code seals, the keys it had before open (the earlier code did the same).
	again, err := s.SealGrant(g)
	if err != nil {
		t.Fatal(err)
	}
	if again[0] != v.Grant[0] {
		t.Errorf("sealed with key id %#x, the earlier code with %#x", again[0], v.Grant[0])
	}
}

// TestTokenFileOfEarlierVersions: a token file written by the earlier code opens.
func TestTokenFileOfEarlierVersions(t *testing.T) {
	v := loadSealedV1(t)
	b, err := os.ReadFile("testdata/tokens-v1.sealed")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokens.sealed")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, _ := NewSealer(v.Key)
	fs, err := OpenFileStore(path, s)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	g, err := fs.Get(ctx, "github", "jwt:https://idp.example.com#alice")
	if err != nil || g == nil || g.AccessToken.Reveal() != "fixture-access-token" {
		t.Errorf("the oauth grant: %+v %v", g, err)
	}
	sec, err := fs.Get(ctx, "db", "api_key:bob")
	if err != nil || sec == nil || sec.Secrets["db_password"].Reveal() != "fixture-db-password" {
		t.Errorf("the secrets: %+v %v", sec, err)
	}
}
