package topology

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeployHAProxyMatchesTopology: deploy/haproxy (the Compose example's HAProxy,
// docs/container.md) is the configuration the cluster tests run: the same global,
// defaults, frontend and backend lines as haproxyConfig, the same server options, the
// same error files byte for byte, and haproxy -c accepts it.
func TestDeployHAProxyMatchesTopology(t *testing.T) {
	dir := "../../../deploy/haproxy"
	b, err := os.ReadFile(filepath.Join(dir, "haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	deployed := map[string]bool{}
	var servers []string
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		deployed[line] = true
		if strings.HasPrefix(line, "server ") {
			servers = append(servers, line)
		}
	}
	tested := haproxyConfig("/dir", "127.0.0.1:1", []string{"a:1", "b:2", "c:3"})
	for line := range strings.Lines(tested) {
		line = strings.TrimSpace(line)
		switch {
		case line == "", strings.HasPrefix(line, "bind "), strings.HasPrefix(line, "errorfile "):
			// The address and the files' directory differ; the files are compared below.
		case strings.HasPrefix(line, "monitor-uri "):
			// The tests' own probe (startHAProxy): nothing a deployment needs.
		case strings.HasPrefix(line, "server "):
			f := strings.Fields(line)
			want := strings.Join(f[3:], " ")
			if len(servers) != 3 {
				t.Fatalf("deploy has %d server lines, want 3", len(servers))
			}
			for _, s := range servers {
				if got := strings.Join(strings.Fields(s)[3:], " "); got != want {
					t.Errorf("deploy server line %q: options %q, tested %q", s, got, want)
				}
			}
		default:
			if !deployed[line] {
				t.Errorf("deploy/haproxy/haproxy.cfg lacks the tested line %q", line)
			}
		}
	}
	for status, body := range errorFiles() {
		if !deployed[fmt.Sprintf("errorfile %d /usr/local/etc/haproxy/errors/%d.http", status, status)] {
			t.Errorf("deploy/haproxy/haproxy.cfg installs no errorfile %d", status)
		}
		got, err := os.ReadFile(filepath.Join(dir, "errors", fmt.Sprintf("%d.http", status)))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != body {
			t.Errorf("deploy/haproxy/errors/%d.http:\n%q\nthe tests install:\n%q", status, got, body)
		}
	}

	bin, err := exec.LookPath("haproxy")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("haproxy is not installed (CI is set: failing rather than skipping)")
		}
		t.Skip("haproxy is not installed")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(strings.ReplaceAll(string(b), "/usr/local/etc/haproxy", abs)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-c", "-f", cfg).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c refuses deploy/haproxy/haproxy.cfg: %v\n%s", err, out)
	}
}
