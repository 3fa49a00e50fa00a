package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/admin"
)

// TestStatusCommand: the table or JSON of a served status; exit 1 when the proxy is not
// ready or cannot be reached; the key from MCP_PROXY_API_KEY.
func TestStatusCommand(t *testing.T) {
	st := admin.Status{Version: "v1", Ready: true, Now: time.Now(), Started: time.Now().Add(-time.Minute),
		Config:    admin.ConfigInfo{Path: "/etc/p.hcl", SHA256: strings.Repeat("0f", 32)},
		Upstreams: []admin.UpstreamStatus{{Name: "gh", State: "up", Ready: true, Required: true, Transport: "stdio", Era: "legacy", Tools: 3}}}
	var gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		if r.URL.Path != "/status" || r.URL.Query().Get("format") != "json" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(st)
	}))
	defer srv.Close()
	t.Setenv(adminKeyEnv, "ops-key-0123456789abcdef")

	code, stdout, stderr := runArgs(t, "status", "--admin", srv.URL)
	if code != 0 || stderr != "" || !strings.Contains(stdout, "mcp-proxy v1: ready") || !strings.Contains(stdout, "gh        up     yes") {
		t.Errorf("ready: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	if gotAuth != "Bearer ops-key-0123456789abcdef" {
		t.Errorf("Authorization %q", gotAuth)
	}
	st.Ready, st.NotReady = false, []string{"gh"}
	st.Upstreams[0].State, st.Upstreams[0].Ready = "restarting", false
	code, stdout, _ = runArgs(t, "status", "--admin", srv.URL+"/", "--json")
	var back admin.Status
	if err := json.Unmarshal([]byte(stdout), &back); err != nil || code != 1 || back.Ready || back.Upstreams[0].State != "restarting" {
		t.Errorf("not ready: exit %d, %v, stdout:\n%s", code, err, stdout)
	}
	srv.Close()
	if code, _, stderr := runArgs(t, "status", "--admin", srv.URL); code != 1 || !strings.Contains(stderr, "asking "+srv.URL+" for its status") {
		t.Errorf("unreachable: exit %d, stderr %q", code, stderr)
	}
}

func TestStatusURLFromConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src+"upstream \"a\" {\n  command = [\"true\"]\n}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		src, want string
	}{
		{"admin {\n  address = \"127.0.0.1:9191\"\n}\n", "http://127.0.0.1:9191"},
		{"admin {\n  address = \"0.0.0.0:9192\"\n  insecure_no_auth = true\n}\n", "http://127.0.0.1:9192"},
		{"admin {\n  address = \"[::]:9193\"\n  insecure_no_auth = true\n}\n", "http://[::1]:9193"},
		{"admin {\n  address = \":9194\"\n  insecure_no_auth = true\n}\n", "http://127.0.0.1:9194"},
		{"admin {}\n", "http://127.0.0.1:9090"},
		{"", defaultAdminURL},
	} {
		path := write("p.hcl", c.src)
		fs := newFlagSet("status", nil, &common{})
		if err := fs.Parse([]string{"--config", path}); err != nil {
			t.Fatal(err)
		}
		got, err := adminURLOf(fs, path, &strings.Builder{})
		if err != nil || got != c.want {
			t.Errorf("%q: %q %v, want %q", c.src, got, err, c.want)
		}
	}
	// No --config and no ./proxy.hcl: the default. A --config that does not exist: an error.
	t.Chdir(dir)
	os.Remove(filepath.Join(dir, "p.hcl"))
	if got, err := adminURLOf(newFlagSet("status", nil, &common{}), "proxy.hcl", &strings.Builder{}); err != nil || got != defaultAdminURL {
		t.Errorf("no config: %q %v", got, err)
	}
	if code, _, stderr := runArgs(t, "status", "--config", filepath.Join(dir, "missing.hcl")); code != 1 || !strings.Contains(stderr, "missing.hcl") {
		t.Errorf("missing --config: exit %d, %q", code, stderr)
	}
}
