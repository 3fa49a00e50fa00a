package proxy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/importer"
)

// loadConfig reads the config file, printing every diagnostic to stderr (each on its
// own line) on failure. The policy's checks (unknown upstreams, patterns, conditions)
// run in the same pass as the file's own, so one run reports every problem.
func loadConfig(path string, stderr io.Writer) (*config.Config, error) {
	if cfg, ok, err := loadClientConfig(path, stderr); ok { // a client's JSON file (import.go)
		return cfg, err
	}
	cfg, diags := config.LoadWithOptions(path, config.Options{Check: checkConfig})
	fmt.Fprint(stderr, config.FormatDiagnostics(diags))
	if diags.HasErrors() {
		return nil, fmt.Errorf("%s: invalid configuration", path)
	}
	return cfg, nil
}

// loadClientConfig loads a client's JSON file given as --config (Claude Desktop,
// Cursor, Claude Code, VS Code) as if imported: the configuration `mcp-proxy import`
// writes goes through the same loader and checks as an HCL file. It stays in memory,
// so the file's credentials are used as they are. ok is false when path is not such a
// file (or cannot be read: the HCL loader reports that).
func loadClientConfig(path string, stderr io.Writer) (cfg *config.Config, ok bool, err error) {
	data, rerr := os.ReadFile(path)
	if rerr != nil || !importer.IsClientFile(path, data) {
		return nil, false, nil
	}
	res, err := importer.Convert([]importer.Source{{Path: path, Data: data}}, importer.Options{KeepSecrets: true})
	if err != nil {
		var ie *importer.Error
		if errors.As(err, &ie) {
			for _, p := range ie.Problems {
				fmt.Fprintln(stderr, p)
			}
		}
		return nil, true, fmt.Errorf("%s: invalid configuration", path)
	}
	for _, p := range res.Warnings {
		fmt.Fprintln(stderr, p)
	}
	cfg, diags := config.ParseWithOptions(res.HCL, path, filepath.Dir(path), config.Options{Check: checkConfig})
	fmt.Fprint(stderr, config.FormatDiagnostics(diags))
	if diags.HasErrors() {
		return nil, true, fmt.Errorf("%s: invalid configuration (positions are in the HCL it converts to; see it with: mcp-proxy import %s)",
			path, path)
	}
	return cfg, true, nil
}
