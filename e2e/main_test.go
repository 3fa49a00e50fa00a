// Package e2e runs the real mcp-proxy binary against real upstream processes (the Go SDK's
// conformance everything-server, npm's server-everything and the project's misbehaving
// test server) and drives it with real clients (the Go SDK's mcp.Client and a raw
// newline-JSON client for byte-level checks).
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Paths of the binaries built once for the whole package.
var (
	repoRoot      string
	proxyBin      string
	everythingBin string
	testserverBin string
	testpluginBin string
	redactBin     string
	guardBin      string
	npmEverything string // path of server-everything's dist/index.js
)

func TestMain(m *testing.M) {
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	wd, err := os.Getwd()
	if err != nil {
		return 0, err
	}
	repoRoot = filepath.Dir(wd)
	dir, err := os.MkdirTemp("", "mcp-proxy-e2e-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	proxyBin = filepath.Join(dir, "mcp-proxy")
	everythingBin = filepath.Join(dir, "everything-server")
	testserverBin = filepath.Join(dir, "testserver")
	testpluginBin = filepath.Join(dir, "testplugin")
	redactBin = filepath.Join(dir, "mcp-proxy-redact")
	guardBin = filepath.Join(dir, "mcp-proxy-guard")
	for _, b := range []struct{ out, pkg string }{
		{proxyBin, "./cmd/mcp-proxy"},
		{testserverBin, "./internal/testing/testserver"},
		{testpluginBin, "./internal/testing/testplugin"},
		{redactBin, "./cmd/mcp-proxy-redact"},
		{guardBin, "./cmd/mcp-proxy-guard"},
		{filepath.Join(dir, "mcp-proxy-sandbox"), "./cmd/mcp-proxy-sandbox"}, // found next to the proxy, as installed
		{everythingBin, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"},
	} {
		cmd := exec.Command("go", "build", "-race", "-o", b.out, b.pkg)
		if b.pkg[0] != '.' {
			cmd = exec.Command("go", "build", "-o", b.out, b.pkg) // a fixture: no need to race it
		}
		cmd.Dir = repoRoot
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			return 0, fmt.Errorf("building %s: %w", b.pkg, err)
		}
	}
	npmEverything = filepath.Join(repoRoot, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	_, errEverything := os.Stat(npmEverything)
	_, errInspector := os.Stat(filepath.Join(repoRoot, "node_modules", ".bin", "mcp-inspector-cli"))
	_, errFilesystem := os.Stat(filepath.Join(repoRoot, "node_modules", ".bin", "mcp-server-filesystem"))
	if errEverything != nil || errInspector != nil || errFilesystem != nil {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = repoRoot
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return 0, fmt.Errorf("npm ci (installing the npm peers from package-lock.json): %w", err)
		}
	}
	return m.Run(), nil
}
