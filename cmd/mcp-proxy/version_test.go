package main

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionOf(t *testing.T) {
	vcs := func(mainVersion string, kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/mcp-proxy/mcp-proxy", Version: mainVersion}}
		for i := 0; i < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	const rev = "70d1168abcdef0123456789abcdef0123456789a"
	tests := []struct {
		name    string
		stamped string
		bi      *debug.BuildInfo
		version string
		line    string
	}{
		{"stamped by make dist", "v1.2.0-3-g70d1168-dirty", vcs("(devel)", "vcs.revision", rev), "v1.2.0-3-g70d1168-dirty",
			"mcp-proxy v1.2.0-3-g70d1168-dirty (go1.26.8)"},
		{"go install module@version", "", vcs("v1.2.0", "vcs.revision", rev), "v1.2.0", "mcp-proxy v1.2.0 (go1.26.8)"},
		{"checkout with VCS stamping", "", vcs("(devel)", "vcs.revision", rev, "vcs.time", "2026-01-02T03:04:05Z", "vcs.modified", "false"),
			"70d1168abcde", "mcp-proxy 70d1168abcde (2026-01-02T03:04:05Z, go1.26.8)"},
		{"modified checkout", "", vcs("(devel)", "vcs.revision", rev, "vcs.time", "2026-01-02T03:04:05Z", "vcs.modified", "true"),
			"70d1168abcde+dirty", "mcp-proxy 70d1168abcde+dirty (2026-01-02T03:04:05Z, go1.26.8)"},
		{"no VCS information (-buildvcs=false)", "", vcs("(devel)"), "dev", "mcp-proxy dev (go1.26.8)"},
		{"no build information", "", nil, "dev", "mcp-proxy dev (" + runtime.Version() + ")"},
	}
	for _, tt := range tests {
		if got := versionOf(tt.stamped, tt.bi); got != tt.version {
			t.Errorf("%s: versionOf = %q, want %q", tt.name, got, tt.version)
		}
		if got := versionLine(tt.stamped, tt.bi); got != tt.line {
			t.Errorf("%s: versionLine = %q, want %q", tt.name, got, tt.line)
		}
	}
}

// TestVersionCommand: version, --version, -version and -v print the same line on stdout.
func TestVersionCommand(t *testing.T) {
	want := "mcp-proxy " + buildVersion() + " ("
	for _, arg := range []string{"version", "--version", "-version", "-v"} {
		code, stdout, stderr := runArgs(t, arg)
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, want) || !strings.HasSuffix(stdout, ")\n") || strings.Count(stdout, "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q, stdout %q (want %q...)", arg, code, stderr, stdout, want)
		}
	}
}
