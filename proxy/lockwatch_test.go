package proxy

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/admin"
	"github.com/mcp-proxy/mcp-proxy/config"
)

// The lock file is read only when its stat changed, and reported only when its content
// did: a rename of the same content onto it is read and not reported.
func TestLockWatchReadsOnlyOnChange(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "proxy.lock")
	write := func(s string) { // as trust.WriteLock writes: a new file renamed onto it
		t.Helper()
		tmp := filepath.Join(dir, ".proxy.lock.tmp")
		if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	var w lockWatch
	w.reset(path) // missing
	if w.poll() != nil || w.read != 0 {
		t.Fatalf("a missing file: read %d", w.read)
	}
	write("v1")
	if b := w.poll(); string(b) != "v1" {
		t.Fatalf("new file: %q", b)
	}
	for range 5 {
		if w.poll() != nil {
			t.Fatal("an untouched file was reported")
		}
	}
	if w.read != 1 {
		t.Fatalf("an untouched file was read: %d reads", w.read)
	}
	write("v1")
	if w.poll() != nil || w.read != 2 {
		t.Fatalf("the same content renamed onto it: reported, or not read (%d)", w.read)
	}
	write("v2")
	if b := w.poll(); string(b) != "v2" {
		t.Fatalf("changed content: %q", b)
	}
	w.reset("")
	if w.poll() != nil {
		t.Fatal("nothing to watch, yet reported")
	}
}

// A reload that changes only pinning and screening settings (the proxy block's screen
// and screen_allow) applies them without a restart.
func TestReloadAppliesTrustSettingsLive(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "proxy.hcl")
	file := func(proxy string) string {
		return "proxy {\n" + proxy + "}\nupstream \"a\" {\n  command = [\"/bin/true\"]\n  disabled = true\n}\n"
	}
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(file("  screen = \"flag\"\n"))
	cfg, err := loadConfig(path, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e, err := buildEngine(ctx, cfg, build{log: zerolog.Nop(), version: "v-test", many: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.r.Close()
	e.attach(path, nil, nil, config.Listen{}, nil)
	before := e.trust.Load()
	write(file("  screen = \"withhold\"\n  screen_allow = [\"long-description\"]\n"))
	out := e.reload(ctx, "test", nil)
	if out.Outcome != admin.ReloadApplied || len(out.RestartRequired) != 0 ||
		!slices.ContainsFunc(out.Changes, func(c string) bool { return strings.HasPrefix(c, "pinning and screening") }) {
		t.Fatalf("reload: %s changes %q restart %q errors %q", out.Outcome, out.Changes, out.RestartRequired, out.Errors)
	}
	if e.trust.Load() == before || e.currentConfig().Proxy.Screen != config.ScreenWithhold {
		t.Fatal("the new settings are not in force")
	}
}
