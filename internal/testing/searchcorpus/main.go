// Command searchcorpus refreshes the search benchmark's corpus (`make search-corpus`):
// the tool lists of real MCP servers from npm, as the proxy lists them. It installs each
// server named in search/testdata/corpus/servers.json at its pinned version into a cache
// directory (npm, scripts not run), writes one proxy config with one upstream per
// server (dummy credentials, no network needed to list tools), runs `mcp-proxy run` on
// stdio, lists the tools through it (every page) and writes one JSON file per server
// next to servers.json. A server that fails to start or list is reported and its old
// file kept. Developers run it; CI does not (it needs the npm registry).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "searchcorpus:", err)
		os.Exit(1)
	}
}

// server is one entry of servers.json.
type server struct {
	Name    string            `json:"name"`    // the namespace, and the file's name
	Package string            `json:"package"` // npm package
	Version string            `json:"version"` // pinned
	Bin     string            `json:"bin,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"` // dummy credentials and settings
	Note    string            `json:"note,omitempty"`
}

func run(args []string) error {
	fs := flag.NewFlagSet("searchcorpus", flag.ContinueOnError)
	list := fs.String("servers", "search/testdata/corpus/servers.json", "the pinned server list")
	proxyBin := fs.String("proxy", "bin/mcp-proxy", "the mcp-proxy binary")
	cacheDir := fs.String("cache", "", "where the servers are installed (default: the user cache directory's mcp-proxy-search-corpus)")
	only := fs.String("only", "", "refresh only these servers (comma-separated names)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	raw, err := os.ReadFile(*list)
	if err != nil {
		return err
	}
	var servers []server
	if err := json.Unmarshal(raw, &servers); err != nil {
		return fmt.Errorf("reading %s: %w", *list, err)
	}
	if *only != "" {
		keep := map[string]bool{}
		for _, n := range strings.Split(*only, ",") {
			keep[n] = true
		}
		var sel []server
		for _, s := range servers {
			if keep[s.Name] {
				sel = append(sel, s)
			}
		}
		servers = sel
	}
	if *cacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return err
		}
		*cacheDir = filepath.Join(base, "mcp-proxy-search-corpus")
	}
	outDir := filepath.Dir(*list)
	work, err := os.MkdirTemp("", "searchcorpus")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	var hcl strings.Builder
	fmt.Fprintf(&hcl, "proxy {\n  page_size   = 10000\n  ready_grace = \"120s\"\n}\n")
	var ok []server
	for _, s := range servers {
		bin, err := install(*cacheDir, s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v (skipped)\n", s.Name, err)
			continue
		}
		ok = append(ok, s)
		cmd := []string{"node", bin}
		for _, a := range s.Args {
			cmd = append(cmd, strings.ReplaceAll(a, "${WORK}", work))
		}
		fmt.Fprintf(&hcl, "\nupstream %q {\n  command         = %s\n  namespace       = %q\n  cwd             = %q\n  startup_timeout = \"120s\"\n  timeout         = \"60s\"\n",
			s.Name, hclList(cmd), s.Name, work)
		env := map[string]string{"NODE_NO_WARNINGS": "1", "HOME": work}
		for k, v := range s.Env {
			env[k] = strings.ReplaceAll(v, "${WORK}", work)
		}
		fmt.Fprintf(&hcl, "  env = {\n")
		for _, k := range sortedKeys(env) {
			fmt.Fprintf(&hcl, "    %s = %q\n", k, env[k])
		}
		fmt.Fprintf(&hcl, "  }\n}\n")
	}
	cfg := filepath.Join(work, "corpus.hcl")
	if err := os.WriteFile(cfg, []byte(hcl.String()), 0o600); err != nil {
		return err
	}
	tools, err := listTools(*proxyBin, cfg)
	if err != nil {
		return err
	}
	byServer := map[string][]json.RawMessage{}
	for _, t := range tools {
		var head struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(t, &head); err != nil {
			return fmt.Errorf("a listed tool: %w", err)
		}
		ns, _, found := strings.Cut(head.Name, "__")
		if !found {
			return fmt.Errorf("tool %q has no namespace", head.Name)
		}
		byServer[ns] = append(byServer[ns], t)
	}
	var failed []string
	total := 0
	for _, s := range ok {
		ts := byServer[s.Name]
		if len(ts) == 0 {
			failed = append(failed, s.Name)
			fmt.Fprintf(os.Stderr, "%s: no tools listed (old file kept)\n", s.Name)
			continue
		}
		total += len(ts)
		if err := writeServer(filepath.Join(outDir, s.Name+".json"), s, ts); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "%s %s@%s: %d tools\n", s.Name, s.Package, s.Version, len(ts))
	}
	fmt.Fprintf(os.Stderr, "%d tools from %d servers\n", total, len(ok)-len(failed))
	if len(failed) > 0 {
		return fmt.Errorf("no tools from %s", strings.Join(failed, ", "))
	}
	return nil
}

// install makes sure s is installed in its own directory under cache and returns the
// path of its program.
func install(cache string, s server) (string, error) {
	dir := filepath.Join(cache, s.Name+"@"+s.Version)
	pkgDir := filepath.Join(dir, "node_modules", filepath.FromSlash(s.Package))
	if !installed(pkgDir, s.Version) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error",
			"--prefix", dir, s.Package+"@"+s.Version)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("npm install %s@%s: %w", s.Package, s.Version, err)
		}
		if !installed(pkgDir, s.Version) {
			return "", fmt.Errorf("npm install %s@%s: not installed", s.Package, s.Version)
		}
	}
	var pj struct {
		Bin json.RawMessage `json:"bin"`
	}
	raw, err := os.ReadFile(filepath.Join(pkgDir, "package.json"))
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(raw, &pj); err != nil {
		return "", fmt.Errorf("%s's package.json: %w", s.Package, err)
	}
	var one string
	var many map[string]string
	switch {
	case json.Unmarshal(pj.Bin, &one) == nil && one != "":
	case json.Unmarshal(pj.Bin, &many) == nil && len(many) > 0:
		if s.Bin != "" {
			one = many[s.Bin]
		} else if len(many) == 1 {
			for _, v := range many {
				one = v
			}
		}
	}
	if one == "" {
		return "", fmt.Errorf("%s: which program? (set bin)", s.Package)
	}
	return filepath.Join(pkgDir, filepath.FromSlash(one)), nil
}

func installed(pkgDir, version string) bool {
	raw, err := os.ReadFile(filepath.Join(pkgDir, "package.json"))
	if err != nil {
		return false
	}
	var pj struct {
		Version string `json:"version"`
	}
	return json.Unmarshal(raw, &pj) == nil && pj.Version == version
}

// listTools runs the proxy on stdio with cfg and lists every tool through it.
func listTools(proxyBin, cfg string) ([]json.RawMessage, error) {
	cmd := exec.Command(proxyBin, "run", "--config", cfg, "--log-level", "warn")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	r := bufio.NewReaderSize(stdout, 1<<20)
	id := 0
	call := func(method string, params any) (json.RawMessage, error) {
		id++
		msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if _, err := stdin.Write(append(msg, '\n')); err != nil {
			return nil, err
		}
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return nil, fmt.Errorf("%s: reading the proxy's answer: %w", method, err)
			}
			var resp struct {
				ID     *int            `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if json.Unmarshal(line, &resp) != nil || resp.ID == nil || *resp.ID != id {
				continue // a notification or a request to the client
			}
			if resp.Error != nil {
				return nil, fmt.Errorf("%s: %s", method, resp.Error)
			}
			return resp.Result, nil
		}
	}
	if _, err := call("initialize", map[string]any{
		"protocolVersion": "2025-06-18",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "searchcorpus", "version": "1"},
	}); err != nil {
		return nil, err
	}
	if _, err := stdin.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")); err != nil {
		return nil, err
	}
	var tools []json.RawMessage
	cursor := ""
	for {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		res, err := call("tools/list", params)
		if err != nil {
			return nil, err
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &page); err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		tools = append(tools, page.Tools...)
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if len(tools) == 0 {
		return nil, errors.New("the proxy listed no tools")
	}
	return tools, nil
}

// writeServer writes one server's file: its package, version and tools, one compact
// definition per line (as the proxy listed it) so that a refresh diffs per tool.
func writeServer(path string, s server, tools []json.RawMessage) error {
	var b bytes.Buffer
	head, _ := json.Marshal(map[string]string{"server": s.Name, "package": s.Package, "version": s.Version})
	b.Write(head[:len(head)-1])
	b.WriteString(`,"tools":[` + "\n")
	for i, t := range tools {
		var c bytes.Buffer
		if err := json.Compact(&c, t); err != nil {
			return err
		}
		b.Write(c.Bytes())
		if i < len(tools)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]}\n")
	return os.WriteFile(path, b.Bytes(), 0o644)
}

func hclList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func sortedKeys(m map[string]string) []string {
	k := make([]string, 0, len(m))
	for x := range m {
		k = append(k, x)
	}
	sort.Strings(k)
	return k
}
