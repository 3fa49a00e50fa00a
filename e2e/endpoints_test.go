package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The endpoints' end-to-end tests: one HTTP proxy in front of four real servers (the
// Go SDK everything-server, npm's server-everything, server-filesystem and
// server-memory), with two endpoints over them ("ide" in search mode, "ops" a filtered
// view with a rule of its own), API keys for two principals and a policy that hides a
// tool from one of them.

// bearerRT adds an API key to every request of an SDK client.
type bearerRT struct{ key string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// endpointUpstreams are the four real servers; root is server-filesystem's directory.
func endpointUpstreams(t *testing.T, root string) string {
	nm := filepath.Join(repoRoot, "node_modules", "@modelcontextprotocol")
	return everythingUpstream("ev", "ev") + npmUpstream("npm", "npm") +
		fmt.Sprintf("upstream \"fs\" {\n  command = [\"node\", %s, %s]\n  startup_timeout = \"60s\"\n}\n",
			q(filepath.Join(nm, "server-filesystem", "dist", "index.js")), q(root)) +
		fmt.Sprintf("upstream \"mem\" {\n  command = [\"node\", %s]\n  env = { MEMORY_FILE_PATH = %s }\n  startup_timeout = \"60s\"\n}\n",
			q(filepath.Join(nm, "server-memory", "dist", "index.js")), q(filepath.Join(t.TempDir(), "memory.jsonl")))
}

// endpointBlocks are the two endpoints and the policy (ide: search mode; ops: fs and
// npm, npm's trigger* tools left out, fs's writes denied there by a rule of its own).
const endpointBlocks = `
endpoint "ide" {
  mode         = "search"
  always       = ["fs__read_text_file"]
  instructions = "Find the tools you need with search_tools."
  search {
    limit      = 3
    max_active = 4
  }
}
endpoint "ops" {
  upstreams = ["fs", "npm"]
  tools {
    exclude = ["npm__trigger*"]
  }
}
policy {
  default = "allow"
  rule "contractors-never-delete" {
    effect = "deny"
    groups = ["contractors"]
    tools  = ["mem__delete_*"]
  }
  rule "contractors-not-npm-in-ide" {
    effect    = "deny"
    groups    = ["contractors"]
    endpoints = ["ide"]
    upstreams = ["npm"]
  }
  rule "no-salary-searches" {
    effect    = "deny"
    tools     = ["search_tools"]
    condition = contains(lower(args.query), "salary")
  }
  rule "ops-reads-only" {
    effect    = "deny"
    endpoints = ["ops"]
    tools     = ["fs__write_file", "fs__edit_file"]
  }
}
`

// startEndpointProxy starts the HTTP proxy of the endpoint tests; it returns the base
// URL (http://addr), the audit file, server-filesystem's directory and the log.
func startEndpointProxy(t *testing.T) (base, audit, root string, stderr *syncBuffer) {
	t.Helper()
	dir := t.TempDir()
	root = filepath.Join(dir, "files")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "notes.txt"), []byte("endpoints are views\n"), 0o644)
	audit = filepath.Join(dir, "audit.jsonl")
	addr := freeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf(`
listen "http" {
  address = %q
  path    = "/mcp"
}
auth {
  resource = "http://%s/mcp"
  api_key "alice" {
    token  = %q
    groups = ["dev"]
  }
  api_key "bob" {
    token  = %q
    groups = ["contractors"]
  }
}
audit {
  file = %q
}
`, addr, addr, aliceKey, bobKey, audit)+endpointBlocks+endpointUpstreams(t, root))
	stderr, _ = startProxyAt(t, cfg, addr)
	return "http://" + addr, audit, root, stderr
}

// connectEndpoint connects the Go SDK client to url with an API key; changed counts the
// tools/list_changed notifications it gets.
func connectEndpoint(t *testing.T, url, key, version string, changed *atomic.Int32, logs fmt.Stringer) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if changed != nil {
		opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { changed.Add(1) }
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-endpoints", Version: "1"}, opts)
	cs, err := client.Connect(ctxT(t, 90*time.Second), &mcp.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: bearerRT{key}}}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting to %s: %v\n%s", url, err, logs)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// searchNames calls search_tools and returns the names of the tools it found.
func searchNames(t *testing.T, ctx context.Context, cs *mcp.ClientSession, query string, limit int) []string {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": query, "limit": limit}})
	if err != nil || res.IsError {
		t.Fatalf("search_tools %q: %v %s", query, err, resultText(res))
	}
	b, _ := json.Marshal(res.StructuredContent)
	var sc struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(b, &sc); err != nil {
		t.Fatalf("search_tools' structured content %s: %v", b, err)
	}
	var names []string
	for _, tl := range sc.Tools {
		if len(tl.InputSchema) == 0 {
			t.Errorf("search_tools returned %s without its input schema", tl.Name)
		}
		names = append(names, tl.Name)
	}
	if !strings.Contains(resultText(res), `"tools":[`) {
		t.Errorf("search_tools' text lacks the definitions: %q", resultText(res))
	}
	return names
}

func listed(t *testing.T, ctx context.Context, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func waitChanged(t *testing.T, changed *atomic.Int32, want int32) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); changed.Load() < want; {
		if time.Now().After(deadline) {
			t.Fatalf("%d tools/list_changed, want %d", changed.Load(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEndpointSearchGoSDK: the Go SDK client on the search-mode endpoint over four real
// servers lists search_tools, call_tool and its always tool; a search returns the
// matches' definitions, activates them (one list_changed) and they join its list; it
// calls one by its name, another through call_tool; another principal never finds the
// tool the policy hides from it; the second endpoint lists its own catalogue under its
// own rule; a modern client's tools/list with a query (SEP-1821) is answered from the
// index; the audit names the endpoint and the real tool.
func TestEndpointSearchGoSDK(t *testing.T) {
	t.Parallel()
	base, audit, root, stderr := startEndpointProxy(t)
	ctx := ctxT(t, 120*time.Second)
	var changed atomic.Int32
	alice := connectEndpoint(t, base+"/mcp/ide", aliceKey, "2025-11-25", &changed, stderr)
	init := alice.InitializeResult()
	if !strings.HasPrefix(init.Instructions, "Find the tools you need with search_tools.") || init.Capabilities.Tools == nil || !init.Capabilities.Tools.ListChanged {
		t.Errorf("initialize: instructions %q, tools %+v", init.Instructions, init.Capabilities.Tools)
	}
	if got := listed(t, ctx, alice); !slices.Equal(got, []string{"search_tools", "call_tool", "fs__read_text_file"}) {
		t.Fatalf("the search endpoint lists %v\n%s", got, stderr)
	}
	found := searchNames(t, ctx, alice, "create entities in the knowledge graph", 2)
	if len(found) == 0 || found[0] != "mem__create_entities" {
		t.Fatalf("search found %v", found)
	}
	waitChanged(t, &changed, 1)
	after := listed(t, ctx, alice)
	for _, n := range found {
		if !slices.Contains(after, n) {
			t.Errorf("activated %s is not listed: %v", n, after)
		}
	}
	res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "mem__create_entities",
		Arguments: map[string]any{"entities": []any{map[string]any{"name": "Ada", "entityType": "person", "observations": []string{"wrote the first program"}}}}})
	if err != nil || res.IsError {
		t.Fatalf("calling the activated tool: %v %s", err, resultText(res))
	}
	res, err = alice.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool",
		Arguments: map[string]any{"name": "mem__search_nodes", "arguments": map[string]any{"query": "Ada"}}})
	if err != nil || res.IsError || !strings.Contains(resultText(res), "first program") {
		t.Fatalf("call_tool: %v %s", err, resultText(res))
	}
	// The set is bounded (max_active 4): more searches push the oldest out.
	searchNames(t, ctx, alice, "echo a message back", 3)
	searchNames(t, ctx, alice, "directory tree listing", 3)
	waitChanged(t, &changed, 3)
	if n := len(listed(t, ctx, alice)); n != 3+4 {
		t.Errorf("%d tools listed after three searches, want the 3 fixed and max_active 4", n)
	}
	// A write through ide (no rule against it there) works through call_tool.
	res, err = alice.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": "fs__write_file",
		"arguments": map[string]any{"path": filepath.Join(root, "ide.txt"), "content": "written through ide"}}})
	if err != nil || res.IsError {
		t.Errorf("writing through ide: %v %s", err, resultText(res))
	}

	// Bob may not see mem__delete_*: never found, not even by its own words, and
	// unknown when called.
	bob := connectEndpoint(t, base+"/mcp/ide", bobKey, "2025-11-25", nil, stderr)

	// search_tools' description names the services each sees, from their serverInfo,
	// with the number of tools each sees there; bob never learns of npm, all of whose
	// tools are hidden from him in ide.
	aliceSvcs, bobSvcs := serviceCounts(t, ctx, alice), serviceCounts(t, ctx, bob)
	if aliceSvcs["mem"] != "memory-server" || aliceSvcs["fs"] != "secure-filesystem-server" || aliceSvcs["npm"] == "" || aliceSvcs["ev"] == "" {
		t.Errorf("alice's search_tools names %v", aliceSvcs)
	}
	if _, ok := bobSvcs["npm"]; ok || bobSvcs["mem"] != "memory-server" {
		t.Errorf("bob's search_tools names %v", bobSvcs)
	}
	if a, b := aliceSvcs["mem#"], bobSvcs["mem#"]; a == "" || b == "" || atoi(a)-atoi(b) != 3 {
		t.Errorf("mem's tools: alice sees %s, bob %s (3 delete tools hidden from him)", a, b)
	}
	for _, q := range []string{"delete entities", "mem delete entities observations relations"} {
		for _, n := range searchNames(t, ctx, bob, q, 20) {
			if strings.HasPrefix(n, "mem__delete_") {
				t.Errorf("bob found hidden %s searching %q", n, q)
			}
		}
	}
	if _, err := bob.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": "mem__delete_entities",
		"arguments": map[string]any{"entityNames": []string{"Ada"}}}}); err == nil || !strings.Contains(err.Error(), "Unknown tool: mem__delete_entities") {
		t.Errorf("bob's call_tool of a hidden tool: %v", err)
	}
	if got := searchNames(t, ctx, alice, "delete entities", 3); !slices.Contains(got, "mem__delete_entities") {
		t.Errorf("alice does not find mem__delete_entities: %v", got)
	}

	// ops: fs and npm only, npm's trigger* left out, and its own rule hides fs's writes.
	ops := connectEndpoint(t, base+"/mcp/ops", aliceKey, "2025-11-25", nil, stderr)
	opsTools := listed(t, ctx, ops)
	for _, n := range opsTools {
		if !strings.HasPrefix(n, "fs__") && !strings.HasPrefix(n, "npm__") || strings.HasPrefix(n, "npm__trigger") ||
			n == "fs__write_file" || n == "fs__edit_file" {
			t.Errorf("ops lists %s", n)
		}
	}
	if !slices.Contains(opsTools, "fs__read_text_file") || !slices.Contains(opsTools, "npm__echo") || slices.Contains(opsTools, "search_tools") {
		t.Errorf("ops lists %v", opsTools)
	}
	if _, err := ops.CallTool(ctx, &mcp.CallToolParams{Name: "fs__write_file", Arguments: map[string]any{"path": filepath.Join(root, "x"), "content": "x"}}); err == nil ||
		!strings.Contains(err.Error(), "Unknown tool") {
		t.Errorf("a write through ops: %v", err)
	}
	if _, err := ops.CallTool(ctx, &mcp.CallToolParams{Name: "mem__read_graph"}); err == nil || !strings.Contains(err.Error(), "Unknown tool") {
		t.Errorf("another upstream's tool through ops: %v", err)
	}
	// The listen path is the whole catalogue, as without endpoints.
	whole := connectEndpoint(t, base+"/mcp", aliceKey, "2025-11-25", nil, stderr)
	if n := len(listed(t, ctx, whole)); n <= len(opsTools)+7 {
		t.Errorf("the listen path lists %d tools", n)
	}

	// The endpoint declares tools.filtering (SEP-1821), and a modern request's tools/list
	// with a query is answered from the index (raw: the SDKs send no query).
	wire := &httpWire{t: t, url: base + "/mcp/ide"}
	r := wire.post(ctx, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wire","version":"1"}}}`,
		map[string]string{"Authorization": "Bearer " + aliceKey})
	if !strings.Contains(string(r.body), `"tools":{"listChanged":true,"filtering":true}`) {
		t.Errorf("initialize's capabilities: %s", r.body)
	}
	r = wire.post(ctx, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"query":"read a text file","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		map[string]string{"Authorization": "Bearer " + aliceKey, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"})
	if r.status != 200 || !strings.Contains(string(r.body), `"name":"fs__read_text_file"`) || strings.Contains(string(r.body), `"name":"search_tools"`) {
		t.Errorf("a tools/list query: %d %s", r.status, r.body)
	}

	// A rule that names search_tools refuses a search by its query.
	if _, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "the Salary spreadsheet"}}); err == nil ||
		!strings.Contains(err.Error(), `denied by rule "no-salary-searches"`) {
		t.Errorf("a search the policy refuses: %v", err)
	}

	// The audit: the endpoint, the real tool a call_tool called, and each search, its
	// query hashed (arguments = "hash", the default).
	b, _ := os.ReadFile(audit)
	var sawCreate, sawSearchNodes, sawSearch, sawRefused bool
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec struct {
			Endpoint, Name, Principal, Decision, Rule string
			ArgsSHA256                                string `json:"args_sha256"`
		}
		json.Unmarshal([]byte(line), &rec)
		sawCreate = sawCreate || rec.Name == "mem__create_entities" && rec.Endpoint == "ide" && rec.Decision == "allow"
		sawSearchNodes = sawSearchNodes || rec.Name == "mem__search_nodes" && rec.Endpoint == "ide"
		sawSearch = sawSearch || rec.Name == "search_tools" && rec.Endpoint == "ide" && rec.Principal == "bob" && rec.Decision == "allow" && len(rec.ArgsSHA256) == 64
		sawRefused = sawRefused || rec.Name == "search_tools" && rec.Principal == "alice" && rec.Decision == "deny" && rec.Rule == "no-salary-searches"
		if rec.Name == "call_tool" {
			t.Errorf("the audit records call_tool rather than the tool it reached: %s", line)
		}
		if strings.Contains(line, "delete entities") || strings.Contains(line, "Salary") {
			t.Errorf("the audit records a query in clear with arguments = \"hash\": %s", line)
		}
	}
	if !sawCreate || !sawSearchNodes || !sawSearch || !sawRefused {
		t.Errorf("audit records (create %v, call_tool's search_nodes %v, a search %v, a refused search %v):\n%s",
			sawCreate, sawSearchNodes, sawSearch, sawRefused, b)
	}
}

// TestEndpointSearchTypeScript: the official TypeScript SDK client does the same over
// HTTP and over stdio (`mcp-proxy run --endpoint ide`).
func TestEndpointSearchTypeScript(t *testing.T) {
	t.Parallel()
	t.Run("streamable-http", func(t *testing.T) {
		t.Parallel()
		base, _, _, stderr := startEndpointProxy(t)
		runTSSearch(t, stderr, "--http", base+"/mcp/ide", aliceKey)
	})
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		cfg := writeConfig(t, endpointBlocks+endpointUpstreams(t, root))
		runTSSearch(t, nil, proxyBin, cfg, "ide")
	})
}

func runTSSearch(t *testing.T, logs fmt.Stringer, args ...string) {
	t.Helper()
	cmd := exec.Command("node", append([]string{filepath.Join("testdata", "ts-search.mjs")}, args...)...)
	cmd.Dir = "." // node resolves the SDK from the repository's node_modules
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("TS client: %v\n%s\n%s\n%v", err, out, stderr.String(), logs)
	}
	var got struct {
		Instructions string
		Capabilities struct{ Tools map[string]any }
		Initial      []string
		Found        []string
		FoundSchema  bool
		FoundText    bool
		ListChanged  int
		After        []string
		Created      bool
		Searched     string
		Unknown      any
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("TS client output %q: %v", out, err)
	}
	if !strings.HasPrefix(got.Instructions, "Find the tools") || got.Capabilities.Tools["listChanged"] != true {
		t.Errorf("initialize: %q %v", got.Instructions, got.Capabilities.Tools)
	}
	if !slices.Equal(got.Initial, []string{"search_tools", "call_tool", "fs__read_text_file"}) {
		t.Errorf("initial list %v", got.Initial)
	}
	if len(got.Found) == 0 || got.Found[0] != "mem__create_entities" || !got.FoundSchema || !got.FoundText {
		t.Errorf("search: %v (schema %v, text %v)", got.Found, got.FoundSchema, got.FoundText)
	}
	if got.ListChanged < 1 || !slices.Contains(got.After, "mem__create_entities") {
		t.Errorf("after the search: %d list_changed, list %v", got.ListChanged, got.After)
	}
	if !got.Created || !strings.Contains(got.Searched, "compiler") {
		t.Errorf("calls: created %v, call_tool %q", got.Created, got.Searched)
	}
	if code, _ := got.Unknown.(float64); code != -32602 {
		t.Errorf("call_tool of an unknown tool: %v", got.Unknown)
	}
}

// serviceCounts reads the services search_tools' description names, as the session's
// principal sees it: service → its server's title, and service+"#" → its tools.
func serviceCounts(t *testing.T, ctx context.Context, cs *mcp.ClientSession) map[string]string {
	t.Helper()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	for _, tl := range res.Tools {
		if tl.Name != "search_tools" {
			continue
		}
		_, list, ok := strings.Cut(tl.Description, "Its services: ")
		if !ok {
			t.Fatalf("search_tools' description names no service: %q", tl.Description)
		}
		out := map[string]string{}
		for _, m := range serviceRE.FindAllStringSubmatch(list, -1) {
			out[m[1]], out[m[1]+"#"] = m[2], m[3]
		}
		return out
	}
	t.Fatalf("no search_tools listed")
	return nil
}

// serviceRE is one service in search_tools' description: "name (Title, N tools)".
var serviceRE = regexp.MustCompile(`(\S+) \((?:([^,()]+), )?(\d+) tools?\)`)

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
