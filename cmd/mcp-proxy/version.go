package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is stamped by `make dist` with -ldflags "-X main.version=..."; otherwise the
// build info says what was built (see versionOf).
var version = ""

// buildVersion is this binary's version, one word: serverInfo.version, the clientInfo
// the proxy sends upstream, and the first word `mcp-proxy version` prints.
func buildVersion() string {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(version, bi)
}

// versionOf is the version of a binary stamped with stamped and built as bi (nil when
// there is no build info):
//   - the stamped value, if any (a release from `make dist`);
//   - else the main module's version, unless it is "(devel)" (`go install
//     module@version`);
//   - else the VCS revision, shortened, with "+dirty" when the work tree had changes
//     (a build in a checkout with VCS stamping on);
//   - else "dev" (VCS stamping off, as with GOFLAGS=-buildvcs=false, or no checkout).
func versionOf(stamped string, bi *debug.BuildInfo) string {
	if stamped != "" {
		return stamped
	}
	if bi == nil {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	s := settings(bi)
	rev := s["vcs.revision"]
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if s["vcs.modified"] == "true" {
		rev += "+dirty"
	}
	return rev
}

// versionLine is what `mcp-proxy version` prints: the version, and what else the build
// says of itself (the revision's time, the Go version).
func versionLine(stamped string, bi *debug.BuildInfo) string {
	v := versionOf(stamped, bi)
	goVersion := runtime.Version()
	if bi != nil && bi.GoVersion != "" {
		goVersion = bi.GoVersion
	}
	if fromVCS := bi != nil && stamped == "" && v != "dev" && v != bi.Main.Version; fromVCS {
		if t := settings(bi)["vcs.time"]; t != "" {
			return fmt.Sprintf("mcp-proxy %s (%s, %s)", v, t, goVersion)
		}
	}
	return fmt.Sprintf("mcp-proxy %s (%s)", v, goVersion)
}

func settings(bi *debug.BuildInfo) map[string]string {
	m := make(map[string]string, len(bi.Settings))
	for _, s := range bi.Settings {
		m[s.Key] = s.Value
	}
	return m
}

// cmdVersion prints the version.
func cmdVersion(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", stderr, nil)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("version", "takes no arguments (got %q)", pos)
	}
	bi, _ := debug.ReadBuildInfo()
	fmt.Fprintln(stdout, versionLine(version, bi))
	return nil
}
