package proxy

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/admin"
	"github.com/mcp-proxy/mcp-proxy/config"
)

// TestReloadDiff reloads an engine that has not started its upstreams (a stdio proxy
// before its client initializes) through a series of files, and checks what each reload
// says it changed, what it says needs a restart, and that a broken file changes nothing.
func TestReloadDiff(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "proxy.hcl")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	up := func(name, extra string) string {
		return "upstream \"" + name + "\" {\n  command = [\"/bin/true\", \"" + name + "\"]\n" + extra + "}\n"
	}
	write(up("a", "") + up("b", "") + `
policy {
  default = "allow"
  rule "r" {
    effect = "deny"
    tools  = ["a__x"]
  }
}
`)
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

	for _, step := range []struct {
		file    string
		outcome string
		changes []string
		restart []string
	}{
		{ // nothing but positions
			file: "\n\n" + up("a", "") + up("b", "") + `
policy {
  default = "allow"
  rule "r" {
    effect = "deny"
    tools  = ["a__x"]
  }
}
`,
			outcome: admin.ReloadUnchanged,
		},
		{ // b removed, c added, a's filter only, the rule changed
			file: up("a", "  tools {\n    exclude = [\"y\"]\n  }\n") + up("c", "") + `
policy {
  default = "allow"
  rule "r" {
    effect = "deny"
    tools  = ["a__y"]
  }
}
`,
			outcome: admin.ReloadApplied,
			changes: []string{"policy", "upstream filters changed: a", "upstream added: c", "upstream removed: b"},
		},
		{ // a's command changed: replaced; a listen block: needs a restart; required
			file: "upstream \"a\" {\n  command = [\"/bin/true\", \"other\"]\n  tools {\n    exclude = [\"y\"]\n  }\n}\n" + up("c", "  required = false\n") +
				"listen \"http\" {\n  address = \"127.0.0.1:0\"\n}\n" + `
policy {
  default = "allow"
  rule "r" {
    effect = "deny"
    tools  = ["a__y"]
  }
}
`,
			outcome: admin.ReloadApplied,
			changes: []string{"upstream replaced: a", "upstream c: required = false"},
			restart: []string{"listen"},
		},
		{ // broken: nothing changes
			file:    up("a", "") + "upstream \"x\" {\n  command = \n}\n",
			outcome: admin.ReloadRejected,
		},
	} {
		write(step.file)
		out := e.reload(ctx, "test", nil)
		if out.Outcome != step.outcome || !slices.Equal(out.Changes, step.changes) || !slices.Equal(out.RestartRequired, step.restart) {
			t.Errorf("reload of\n%s\n= %s %q restart %q errors %q; want %s %q restart %q",
				step.file, out.Outcome, out.Changes, out.RestartRequired, out.Errors, step.outcome, step.changes, step.restart)
		}
		if step.outcome == admin.ReloadRejected && (len(out.Errors) == 0 || !strings.Contains(out.Errors[0], "proxy.hcl:")) {
			t.Errorf("a rejected reload's errors lack file:line: %q", out.Errors)
		}
	}
	var names []string
	for _, u := range e.r.Upstreams() {
		names = append(names, u.Name)
	}
	if !slices.Equal(names, []string{"a", "c"}) {
		t.Errorf("upstreams after the reloads: %v, want [a c]", names)
	}
}

// TestReloadLiveSettings: the proxy block's front-end settings (serverInfo, instructions,
// ready_grace, the client session caps) apply on reload; its naming settings still need
// a restart and keep their running values.
func TestReloadLiveSettings(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "proxy.hcl")
	const ups = "upstream \"a\" {\n  command = [\"/bin/true\"]\n}\n"
	if err := os.WriteFile(path, []byte(ups), 0o600); err != nil {
		t.Fatal(err)
	}
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
	srv := e.newServer(cfg)
	e.attach(path, srv, nil, config.Listen{}, nil)
	if g := srv.Settings().ReadyTimeout; g != time.Second {
		t.Fatalf("ready grace before the reload: %s, want the default 1s", g)
	}

	next := ups + "proxy {\n  name = \"team-proxy\"\n  ready_grace = \"3s\"\n  instructions = \"Ask first.\"\n" +
		"  max_client_in_flight = 7\n  separator = \".\"\n}\n"
	if err := os.WriteFile(path, []byte(next), 0o600); err != nil {
		t.Fatal(err)
	}
	out := e.reload(ctx, "test", nil)
	wantChanges := []string{"proxy: serverInfo team-proxy v-test", "proxy.instructions", "ready grace 3s", "proxy.max_client_in_flight = 7 (new sessions)"}
	if out.Outcome != admin.ReloadApplied || !slices.Equal(out.Changes, wantChanges) || !slices.Equal(out.RestartRequired, []string{"proxy"}) {
		t.Fatalf("reload: %s %q restart %q errors %q; want applied %q restart [proxy]", out.Outcome, out.Changes, out.RestartRequired, out.Errors, wantChanges)
	}
	l := srv.Settings()
	if l.Name != "team-proxy" || l.ReadyTimeout != 3*time.Second || l.Instructions != "Ask first." || l.MaxClientInFlight != 7 {
		t.Errorf("the server's settings after the reload: %+v", l)
	}
	if e.cfg.Proxy.Separator != "__" || e.cfg.Proxy.ReadyGrace != 3*time.Second {
		t.Errorf("running proxy block: separator %q (a restart setting: the old one runs), ready_grace %s", e.cfg.Proxy.Separator, e.cfg.Proxy.ReadyGrace)
	}
	// The same file again: nothing changes (the restart setting is still reported).
	if out := e.reload(ctx, "test", nil); out.Outcome != admin.ReloadUnchanged || len(out.Changes) != 0 {
		t.Errorf("reload of the same file: %s %q", out.Outcome, out.Changes)
	}
}

// TestReloadKeepsStdioEndpoint: a stdio proxy serving one endpoint (run --endpoint)
// refuses a reload that removes that endpoint, whole, with an error that says why and
// what to do; a reload that changes the endpoint, or removes another, applies.
func TestReloadKeepsStdioEndpoint(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "proxy.hcl")
	const ups = "upstream \"a\" {\n  command = [\"/bin/true\"]\n}\nupstream \"b\" {\n  command = [\"/bin/true\"]\n}\n"
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(ups+s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("endpoint \"ide\" {\n  mode = \"search\"\n}\nendpoint \"other\" {\n  upstreams = [\"b\"]\n}\n")
	cfg, err := loadConfig(path, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e, err := buildEngine(ctx, cfg, build{log: zerolog.Nop(), version: "v-test", endpoint: "ide"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.r.Close()
	e.attach(path, nil, nil, config.Listen{}, nil)

	write("endpoint \"other\" {\n  upstreams = [\"a\"]\n}\n") // ide removed, other changed
	out := e.reload(ctx, "test", nil)
	if out.Outcome != admin.ReloadRejected || len(out.Errors) != 1 ||
		!strings.Contains(out.Errors[0], `endpoint "ide" is served on stdio by this process (run --endpoint ide)`) {
		t.Fatalf("removing the served endpoint: %s %q", out.Outcome, out.Errors)
	}
	if info, ok := e.r.Endpoint("other"); !ok || !slices.Equal(info.Upstreams, []string{"b"}) {
		t.Errorf("the rejected reload changed another endpoint: %+v", info)
	}
	if _, ok := e.r.Endpoint("ide"); !ok {
		t.Error("the rejected reload removed the served endpoint")
	}
	write("endpoint \"ide\" {\n  upstreams = [\"a\"]\n}\n") // ide changed, other removed
	if out := e.reload(ctx, "test", nil); out.Outcome != admin.ReloadApplied ||
		!slices.Equal(out.Changes, []string{"endpoint ide changed", "endpoint other removed"}) {
		t.Errorf("changing the served endpoint: %s %q %q", out.Outcome, out.Changes, out.Errors)
	}
}
