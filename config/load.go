package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Options adjusts how a file is parsed. The zero value is the normal
// behaviour.
type Options struct {
	// LookupEnv is what env() calls to read a variable; it reports whether
	// the variable is set. Nil means os.LookupEnv.
	LookupEnv func(name string) (value string, ok bool)

	// Check, when set, adds the checks of a package that owns part of the
	// file's meaning (the policy's patterns and conditions) to the same pass:
	// it runs on the decoded configuration even when the file's own checks
	// found errors, and its diagnostics are reported, sorted, with theirs, so
	// that one run shows every problem. Where the file has errors, the
	// *Config it gets holds the default or zero value instead (an invalid
	// pattern list is nil, an invalid rate 0); Check must take those as
	// "nothing to check", not report them again.
	Check func(*Config) hcl.Diagnostics
}

// Load reads and decodes the file at path, resolving relative cwd paths
// against the file's directory. On any problem it returns a nil *Config and
// hcl.Diagnostics holding every problem found in the file, sorted by
// position.
func Load(path string) (*Config, hcl.Diagnostics) {
	return LoadWithOptions(path, Options{})
}

// LoadWithOptions is Load with Options.
func LoadWithOptions(path string, opts Options) (*Config, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Failed to read configuration file",
			Detail:   fmt.Sprintf("reading config: %v", err),
		}}
	}
	return ParseWithOptions(src, path, filepath.Dir(path), opts)
}

// Parse is Load on in-memory bytes; filename is used in diagnostics and as
// Config.Filename. Relative cwd paths are resolved against baseDir, which is
// itself made absolute against the process's working directory.
func Parse(src []byte, filename, baseDir string) (*Config, hcl.Diagnostics) {
	return ParseWithOptions(src, filename, baseDir, Options{})
}

// ParseWithOptions is Parse with Options.
func ParseWithOptions(src []byte, filename, baseDir string, opts Options) (*Config, hcl.Diagnostics) {
	cfg, diags := parse(src, filename, baseDir, opts)
	sortDiagnostics(diags)
	if diags.HasErrors() {
		return nil, diags
	}
	return cfg, diags
}

// parse runs the stages: syntax, schema, then evaluation, defaults and
// validation of every block, then opts.Check. It stops early only after syntax
// errors, since decoding a body the parser had to recover from reports
// confusing follow-on problems (such as a "missing" block that is merely
// malformed); every later stage runs whatever the earlier ones found.
func parse(src []byte, filename, baseDir string, opts Options) (*Config, hcl.Diagnostics) {
	absBase, err := filepath.Abs(baseDir)
	if err != nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid base directory",
			Detail:   fmt.Sprintf("resolving base directory %q: %v", baseDir, err),
		}}
	}

	// A fresh parser each time: hclparse caches files by name, so a shared
	// one would return stale contents on reload.
	file, diags := hclparse.NewParser().ParseHCL(src, filename)
	if diags.HasErrors() {
		return nil, diags
	}

	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	e := &evaluator{ctx: newEvalContext(lookup), diags: diags}

	var raw rawFile
	schemaDiags := gohcl.DecodeBody(file.Body, e.ctx, &raw)
	addCrossKindSuggestions(file.Body, schemaDiags)
	e.diags = append(e.diags, schemaDiags...)

	cfg := &Config{
		Filename:  filename,
		Source:    src,
		Proxy:     decodeProxies(e, raw.Proxies),
		Upstreams: decodeUpstreams(e, raw.Upstreams, absBase),
		Listen:    decodeListens(e, raw.Listens),
		Auth:      decodeAuth(e, raw.Auths),
		Policy:    decodePolicy(e, raw.Policies),
		Audit:     decodeAudit(e, raw.Audits, absBase),
		Plugins:   decodePlugins(e, raw.Plugins, absBase),
		Telemetry: decodeTelemetry(e, raw.Telemetry),
		Cluster:   decodeCluster(e, raw.Clusters),
		Endpoints: decodeEndpoints(e, raw.Endpoints),
	}
	cfg.TokenStore = decodeTokenStore(e, raw.Stores, absBase)
	cfg.Admin = decodeAdmin(e, raw.Admins, cfg.Auth)
	if cfg.Proxy.LockFile == "" {
		cfg.Proxy.LockFile = filepath.Join(absBase, DefaultLockFile)
	} else {
		cfg.Proxy.LockFile = resolvePath(absBase, cfg.Proxy.LockFile)
	}
	checkExposedOverrides(e, cfg)
	checkListen(e, cfg)
	checkEndpoints(e, cfg)
	checkCredentials(e, cfg)
	checkTokenStore(e, cfg)
	checkPrincipals(e, cfg)
	if len(raw.Upstreams) == 0 && !hasBlock(file.Body, "upstream") {
		e.diags = append(e.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "No upstream blocks",
			Detail: "The file has no upstream blocks; at least one is required, such as " +
				`upstream "github" { command = ["npx", "-y", "@modelcontextprotocol/server-github"] }.`,
			Subject: file.Body.MissingItemRange().Ptr(),
		})
	}
	if opts.Check != nil {
		// An upstream block with extra labels is reported and left out by gohcl;
		// its first label still names an upstream, so that a rule naming it is
		// not reported too.
		check := *cfg
		check.Upstreams = append(slices.Clip(cfg.Upstreams), mislabelledUpstreams(file.Body)...)
		e.diags = append(e.diags, opts.Check(&check)...)
	}
	return cfg, e.diags
}

// mislabelledUpstreams returns, named by their first label, the upstream
// blocks with more than one label, which gohcl reports and does not decode.
func mislabelledUpstreams(body hcl.Body) []Upstream {
	syn, ok := body.(*hclsyntax.Body)
	if !ok {
		return nil
	}
	var out []Upstream
	for _, b := range syn.Blocks {
		if b.Type == "upstream" && len(b.Labels) > 1 {
			out = append(out, Upstream{Name: b.Labels[0], DeclRange: b.DefRange()})
		}
	}
	return out
}

// hasBlock reports whether body contains a block of type blockType, even one
// that failed to decode. A malformed upstream block is already reported, so
// it should not also cause "No upstream blocks".
func hasBlock(body hcl.Body, blockType string) bool {
	syn, ok := body.(*hclsyntax.Body)
	if !ok {
		return false
	}
	for _, b := range syn.Blocks {
		if b.Type == blockType {
			return true
		}
	}
	return false
}
