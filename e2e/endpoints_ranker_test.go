package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPluginRanker: an endpoint whose search block names a plugin with the rank hook
// ranks with it (the test plugin ranks every tool in reverse order of name, whatever the
// query: plainly not the built-in ranker's answer), once the plugin has indexed the
// endpoint's tools; a plugin that fails in its rank hook leaves the built-in ranker to
// answer (fail-open), whatever the block's failure mode.
func TestPluginRanker(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"ranks", "crashes"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			calls := filepath.Join(t.TempDir(), "calls")
			conf := fmt.Sprintf("calls_file = %q", calls)
			if mode == "crashes" {
				conf += "\n    crash = \"rank\""
			}
			cfg := writeConfig(t, testUpstream("t", "t", nil, "")+`
endpoint "find" {
  mode = "search"
  search {
    ranker = "embed"
  }
}
`+testPlugin("embed", []string{"-hooks", "rank"}, `failure = "closed"`, conf))
			cmd := exec.Command(proxyBin, "run", "--config", cfg, "--endpoint", "find", "--log-level", "debug")
			stderr := &syncBuffer{}
			cmd.Stderr = stderr
			cs := plainClient(t, "ranker", &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, "2025-11-25", nil, stderr)
			ctx := ctxT(t, 60*time.Second)
			var found []string
			for deadline := time.Now().Add(10 * time.Second); ; {
				found = searchNames(t, ctx, cs, "echo", 3)
				b, _ := os.ReadFile(calls)
				if strings.Contains(string(b), "rank ") || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			b, _ := os.ReadFile(calls)
			if !strings.Contains(string(b), "index embed-") {
				t.Fatalf("the plugin indexed nothing: %s\n%s", b, stderr)
			}
			switch mode {
			case "ranks":
				found = searchNames(t, ctx, cs, "echo", 3)
				if len(found) != 3 || !slices.IsSortedFunc(found, func(a, b string) int { return strings.Compare(b, a) }) || found[0] == "t__echo" {
					t.Errorf("the plugin's ranking (reverse order of name) was not used: %v\n%s", found, b)
				}
			case "crashes":
				if len(found) == 0 || found[0] != "t__echo" {
					t.Errorf("with the plugin failing, the built-in ranker's answer: %v\n%s", found, stderr)
				}
			}
		})
	}
}
