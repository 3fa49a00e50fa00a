package deptest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/mcp-proxy/mcp-proxy/"

// allowed lists, for each package, the project packages it may import.
var allowed = map[string][]string{
	"jsonrpc":             {"internal/jsonx"},
	"internal/jsonx":      {},
	"internal/h1":         {"internal/httpsyntax"},
	"internal/httpsyntax": {},
	"internal/h1client":   {"internal/httpsyntax"},
	"internal/glob":       {},
	"internal/clock":      {},
	"internal/lazyre":     {},
	"internal/seal":       {}, // the one keyring that seals what leaves the process (session ids, the token store)
	"principal":           {},
	"auth":                {"principal"},
	"mcp":                 {"jsonrpc", "internal/jsonx"},
	"config":              {"internal/glob", "internal/lazyre", "principal"}, // principal: the syntax of identities (catalogue_principal)
	"sandbox":             {},
	"transport":           {"jsonrpc", "mcp", "internal/jsonx", "internal/h1client", "sandbox"},
	"upstream":            {"transport", "jsonrpc", "mcp", "internal/jsonx", "sandbox"},
	// Whom an upstream call acts as: below the router (which knows nothing of tokens),
	// beside the upstream whose requests it authorizes.
	"credential":           {"principal", "transport", "jsonrpc", "mcp", "internal/jsonx", "internal/seal"}, // internal/seal: the token store's grants and flows
	"router":               {"upstream", "search", "jsonrpc", "mcp", "principal", "internal/jsonx", "internal/glob", "internal/clock", "internal/lazyre"},
	"policy":               {"router", "upstream", "config", "jsonrpc", "mcp", "principal", "internal/jsonx", "internal/glob"},
	"server":               {"router", "transport", "jsonrpc", "mcp", "principal", "internal/jsonx"},
	"plugins/proto":        {},
	"plugins/sdk":          {"plugins/proto"},
	"plugins":              {"plugins/sdk", "plugins/proto", "policy", "router", "search", "jsonrpc", "mcp", "internal/jsonx", "internal/lazyre"},
	"metrics":              {"router", "upstream", "server", "policy", "plugins", "trust", "jsonrpc", "mcp", "internal/jsonx"},
	"admin":                {"metrics", "router", "upstream", "principal"},                           // principal: who asks (access.go)
	"cluster":              {"policy", "router", "config", "jsonrpc", "credential", "internal/seal"}, // internal/seal: sealed session ids
	"plugins/guard":        {},
	"plugins/redact":       {"jsonrpc", "internal/jsonx"},
	"cmd/mcp-proxy-guard":  {"plugins/guard", "plugins/sdk"},
	"cmd/mcp-proxy-redact": {"plugins/redact", "plugins/sdk"},
	"proxy":                {"server", "router", "upstream", "credential", "config", "policy", "plugins", "search", "auth", "principal", "transport", "internal/h1", "internal/importer", "telemetry", "metrics", "admin", "cluster", "trust", "sandbox"},
	"cmd/mcp-proxy":        {"proxy", "router", "config", "principal", "mcp", "auth", "admin", "cluster", "internal/importer", "trust", "sandbox"},
	"internal/importer":    {"internal/lazyre"},
	"telemetry":            {"router", "upstream", "jsonrpc", "mcp", "internal/jsonx"},
	"trust":                {"router", "upstream", "config", "jsonrpc", "internal/jsonx"},
	"search":               {},

	// The sandbox's small launcher, installed next to mcp-proxy (network "loopback", and
	// where a sandboxed child cannot be started from a restricted thread).
	"cmd/mcp-proxy-sandbox": {"sandbox"},

	// Test tooling: harnesses and programs only tests, benchmarks and developers run.
	// The product may not import them (TestProductImportsNoTestTooling).
	"internal/testing/leaktest":     {},
	"internal/testing/benchwire":    {},
	"internal/testing/topology":     {},
	"internal/testing/devcluster":   {"internal/testing/topology"},
	"internal/testing/testplugin":   {"plugins/sdk"},
	"cmd/mcp-bench":                 {"jsonrpc", "internal/jsonx", "internal/h1", "internal/h1client", "internal/testing/topology"},
	"internal/testing/testserver":   {},
	"internal/testing/authserver":   {},
	"internal/testing/otlptest":     {},
	"internal/testing/otlpsink":     {},
	"internal/testing/searchcorpus": {},
	"internal/testing/searcheval":   {"search"},
	"internal/testing/searchbench":  {"search", "internal/testing/searcheval"},
	"internal/testing/searchlex":    {"search"},
	"internal/testing/searchembed":  {"search", "internal/testing/searcheval"},
}

func TestImportGraph(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "../../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(p.ImportPath, module)
		if name == p.ImportPath || strings.HasPrefix(name, "e2e") || strings.HasPrefix(name, "internal/testing/deptest") {
			continue
		}
		ok, known := allowed[name]
		if !known {
			t.Errorf("package %s is not in the allowed import graph; add it to deps_test.go and DESIGN.md", name)
			continue
		}
		for _, imp := range p.Imports {
			dep := strings.TrimPrefix(imp, module)
			if dep == imp {
				continue // not ours
			}
			found := false
			for _, a := range ok {
				found = found || a == dep
			}
			if !found {
				t.Errorf("%s imports %s, which points the wrong way (allowed: %v)", name, dep, ok)
			}
		}
	}
}

// tooling reports whether a package is test tooling rather than product: the harnesses
// and programs under internal/testing/, the end-to-end tests, and the benchmark driver.
func tooling(name string) bool {
	return strings.HasPrefix(name, "internal/testing/") || name == "e2e" || name == "cmd/mcp-bench"
}

// TestProductImportsNoTestTooling: no product package depends, directly or through
// another package, on test tooling. Test files may (their imports are not in Deps).
func TestProductImportsNoTestTooling(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "../../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	products := 0
	for dec.More() {
		var p struct {
			ImportPath string
			Deps       []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(p.ImportPath, module)
		if name == p.ImportPath || tooling(name) {
			continue
		}
		products++
		for _, d := range p.Deps {
			if dep := strings.TrimPrefix(d, module); dep != d && tooling(dep) {
				t.Errorf("product package %s depends on test tooling %s", name, dep)
			}
		}
	}
	if products == 0 {
		t.Fatal("go list named no product package: the pattern no longer matches the module")
	}
}

// TestEngineImportedOnlyByTheCommand: the engine (proxy) sits above every other product
// package; only the command, the end-to-end tests and test files import it. (The
// allowed graph above says so too, package by package; this says it in one place.)
func TestEngineImportedOnlyByTheCommand(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "../../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(p.ImportPath, module)
		for _, imp := range p.Imports {
			if imp == module+"proxy" && name != "cmd/mcp-proxy" && name != "e2e" {
				t.Errorf("%s imports the engine (proxy); only cmd/mcp-proxy may", name)
			}
		}
	}
}
