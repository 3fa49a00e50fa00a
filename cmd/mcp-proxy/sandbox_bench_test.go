//go:build linux

package main

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/sandbox"
	"github.com/mcp-proxy/mcp-proxy/transport"
)

// BenchmarkSandboxedStart is what a sandbox adds to a child's start: each iteration
// starts /bin/cat, writes one message and reads it back (the child is up and serving),
// then stops it outside the timer. "plain" is the baseline. The others add the launcher,
// no_new_privs, no capabilities and the Landlock ruleset of the runtime's files: through
// mcp-proxy-sandbox (built here, as installed next to mcp-proxy) with network "any" (no
// namespaces) and "none" (a user and a network namespace as well), and through this test
// binary itself ("self-any": it links every package the proxy does, so its
// initialization costs what the proxy's own would, the fallback without
// mcp-proxy-sandbox). The figure is the difference between a sandboxed sub-benchmark's
// ns/op and plain's in the same run.
func BenchmarkSandboxedStart(b *testing.B) {
	launcher := filepath.Join(b.TempDir(), "mcp-proxy-sandbox")
	if out, err := exec.Command("go", "build", "-o", launcher, "../mcp-proxy-sandbox").CombinedOutput(); err != nil {
		b.Fatalf("building the launcher: %v\n%s", err, out)
	}
	for _, bc := range []struct {
		name     string
		policy   *sandbox.Policy
		launcher string
	}{
		{"plain", nil, ""},
		{"launcher-any", &sandbox.Policy{Network: sandbox.NetworkAny}, launcher},
		{"launcher-none", &sandbox.Policy{Network: sandbox.NetworkNone}, launcher},
		{"self-any", &sandbox.Policy{Network: sandbox.NetworkAny}, "/proc/self/exe"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if bc.policy != nil {
				if err := sandbox.Check(bc.policy); err != nil {
					b.Skipf("this machine cannot sandbox: %v", err)
				}
				b.Setenv(sandbox.LauncherEnv, bc.launcher)
			}
			msg := jsonrpc.NewNotification("ping", nil)
			for b.Loop() {
				p, err := transport.StartProcess(transport.ProcessSpec{Command: []string{"/bin/cat"}, Sandbox: bc.policy, Name: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := p.ReadLine(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := p.Stop(5 * time.Second); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
