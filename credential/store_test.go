package credential

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/principal"
)

const (
	testKey  = "0123456789abcdef0123456789abcdef-key-one"
	testKey2 = "0123456789abcdef0123456789abcdef-key-two"
)

func testGrant(up, p string) *Grant {
	now := time.Now().Round(0)
	return &Grant{Upstream: up, Principal: p, Mode: ModeOAuth, AccessToken: principal.NewSecret("at-" + p + "-SECRET"),
		RefreshToken: principal.NewSecret("rt-" + p + "-SECRET"), Expiry: now.Add(time.Hour), Scopes: []string{"a"},
		Issuer: "https://as", Subject: p + "@as", Secrets: map[string]principal.Secret{"k": principal.NewSecret("v-SECRET")},
		Created: now, Updated: now}
}

// TestSealer: a sealed grant opens under its own names only, with the key or a previous
// one, never with another key; a flow likewise under its id.
func TestSealer(t *testing.T) {
	s, err := NewSealer(testKey)
	if err != nil {
		t.Fatal(err)
	}
	g := testGrant("jira", "alice")
	b, err := s.SealGrant(g)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "SECRET") {
		t.Fatal("a sealed grant shows its token")
	}
	back, err := s.OpenGrant(b, "jira", "alice")
	if err != nil || back.AccessToken.Reveal() != "at-alice-SECRET" || back.RefreshToken.Reveal() != "rt-alice-SECRET" ||
		back.Secrets["k"].Reveal() != "v-SECRET" || !back.Expiry.Equal(g.Expiry) || back.Subject != "alice@as" {
		t.Fatalf("opened %+v %v", back, err)
	}
	if _, err := s.OpenGrant(b, "jira", "mallory"); !errors.Is(err, ErrNotSealed) {
		t.Errorf("alice's grant opened as mallory's: %v", err)
	}
	b[len(b)-1] ^= 1
	if _, err := s.OpenGrant(b, "jira", "alice"); !errors.Is(err, ErrNotSealed) {
		t.Errorf("a tampered grant opened: %v", err)
	}
	b[len(b)-1] ^= 1
	rotated, _ := NewSealer(testKey2, testKey)
	if _, err := rotated.OpenGrant(b, "jira", "alice"); err != nil {
		t.Errorf("a grant sealed with the previous key: %v", err)
	}
	other, _ := NewSealer(testKey2)
	if _, err := other.OpenGrant(b, "jira", "alice"); !errors.Is(err, ErrNotSealed) {
		t.Errorf("opened with another key: %v", err)
	}
	if _, err := NewSealer("short"); err == nil {
		t.Error("a short key accepted")
	}
	f := &Flow{ID: "id1", Upstream: "jira", Principal: "alice", Verifier: principal.NewSecret("ver"), State: principal.NewSecret("st"), Expires: time.Now().Add(time.Minute)}
	fb, _ := s.SealFlow(f)
	if _, err := s.OpenFlow(fb, "id2"); err == nil {
		t.Error("a flow opened under another id")
	}
	if back, err := s.OpenFlow(fb, "id1"); err != nil || back.Verifier.Reveal() != "ver" {
		t.Errorf("flow %+v %v", back, err)
	}
}

// TestFileStore: grants survive reopening the file, which shows no token, is 0600, and
// is refused with another key or when others may read it.
func TestFileStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tokens.sealed")
	s, _ := NewSealer(testKey)
	fs, err := OpenFileStore(path, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"alice", "bob"} {
		if err := fs.Put(ctx, testGrant("jira", p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := fs.Delete(ctx, "jira", "bob"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	st, _ := os.Stat(path)
	if strings.Contains(string(b), "SECRET") || st.Mode().Perm() != 0o600 {
		t.Fatalf("the file shows a token, or is mode %o", st.Mode().Perm())
	}
	again, err := OpenFileStore(path, s)
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := again.Get(ctx, "jira", "alice"); g == nil || g.AccessToken.Reveal() != "at-alice-SECRET" {
		t.Errorf("alice's grant after reopening: %+v", g)
	}
	if g, _ := again.Get(ctx, "jira", "bob"); g != nil {
		t.Error("bob's deleted grant came back")
	}
	other, _ := NewSealer(testKey2)
	if _, err := OpenFileStore(path, other); err == nil || !strings.Contains(err.Error(), "another key") {
		t.Errorf("opened with another key: %v", err)
	}
	os.Chmod(path, 0o640)
	if _, err := OpenFileStore(path, s); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a file others may read: %v", err)
	}
}
