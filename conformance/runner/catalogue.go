package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"
)

// The 0.1.16 suite passes tools-call-simple-text and tools-call-error even when the
// tool is missing, so the harness checks the merged catalogue itself: the fixture's
// names unprefixed, the second upstream's prefixed, and every tool with a description
// and an inputSchema (tools-list fails otherwise).
var (
	fixtureTools = []string{
		"test_simple_text", "test_image_content", "test_audio_content", "test_embedded_resource",
		"test_multiple_content_types", "test_tool_with_logging", "test_tool_with_progress",
		"test_error_handling", "test_sampling", "test_elicitation", "test_elicitation_sep1034_defaults",
		"test_elicitation_sep1330_enums", "json_schema_2020_12_tool", "test_reconnection",
	}
	fixturePrompts   = []string{"test_simple_prompt", "test_prompt_with_arguments", "test_prompt_with_embedded_resource", "test_prompt_with_image"}
	fixtureResources = []string{"test://static-text", "test://static-binary"}
	secondPrefix     = "npm__"

	// preflightCapabilities is what the catalogue check declares in initialize. The
	// proxy starts its upstreams on the first client's initialize and tells them that
	// client's capabilities (server.Server.startUpstreams), and the catalogue check is
	// the first client; so it declares everything a conformance client may use.
	preflightCapabilities = map[string]any{
		"roots":       map[string]any{"listChanged": true},
		"sampling":    map[string]any{},
		"elicitation": map[string]any{"form": map[string]any{}, "url": map[string]any{}},
	}
)

type catalogueResult struct {
	ok                         bool
	err                        string
	tools, prompts, resources  int
	secondTools, secondPrompts int
	attempts                   int
	waited                     time.Duration
	missingDesc, missingSchema []string
	toolNames                  []string
}

func (c *catalogueResult) String() string {
	status := "ok"
	if !c.ok {
		status = "FAIL: " + c.err
	}
	return fmt.Sprintf("catalogue %s\ntools %d (%d %s*), prompts %d (%d %s*), resources %d; %d attempts over %s\ntools: %s",
		status, c.tools, c.secondTools, secondPrefix, c.prompts, c.secondPrompts, secondPrefix, c.resources,
		c.attempts, c.waited.Round(time.Millisecond), strings.Join(c.toolNames, " "))
}

// checkCatalogue lists the server's tools, prompts and resources over a legacy
// Streamable HTTP session until the catalogue is complete or timeout passes (the
// upstreams start in the background).
//
// The proxy drives a dual-era upstream in the era of the first client that starts the
// upstreams; modernFirst makes the check's first request a modern one (for the
// 2026-07-28 runs, whose clients are modern), before the legacy session that lists.
func checkCatalogue(ctx context.Context, url string, withSecond, modernFirst bool, timeout time.Duration) *catalogueResult {
	start := time.Now()
	if modernFirst {
		if err := modernHello(ctx, url); err != nil {
			return &catalogueResult{err: "modern server/discover: " + err.Error()}
		}
	}
	var res *catalogueResult
	for attempt := 1; ; attempt++ {
		res = catalogueOnce(ctx, url, withSecond)
		res.attempts, res.waited = attempt, time.Since(start)
		if res.ok || time.Since(start) > timeout || ctx.Err() != nil {
			return res
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func catalogueOnce(ctx context.Context, url string, withSecond bool) *catalogueResult {
	res := &catalogueResult{}
	c := &rpcClient{url: url, http: &http.Client{Timeout: 20 * time.Second}}
	defer c.close(ctx)
	if _, err := c.call(ctx, "initialize", map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    preflightCapabilities,
		"clientInfo":      map[string]any{"name": "mcp-proxy-conformance-harness", "version": "1"},
	}); err != nil {
		res.err = "initialize: " + err.Error()
		return res
	}
	_ = c.notify(ctx, "notifications/initialized")

	type item struct {
		Name        string          `json:"name"`
		URI         string          `json:"uri"`
		Description *string         `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	list := func(method, field string) ([]item, error) {
		var all []item
		cursor := ""
		for page := 0; page < 100; page++ {
			params := map[string]any{}
			if cursor != "" {
				params["cursor"] = cursor
			}
			raw, err := c.call(ctx, method, params)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", method, err)
			}
			var r map[string]json.RawMessage
			if err := json.Unmarshal(raw, &r); err != nil {
				return nil, fmt.Errorf("%s: %v", method, err)
			}
			var items []item
			if err := json.Unmarshal(r[field], &items); err != nil {
				return nil, fmt.Errorf("%s: %s: %v", method, field, err)
			}
			all = append(all, items...)
			cursor = ""
			_ = json.Unmarshal(r["nextCursor"], &cursor)
			if cursor == "" {
				return all, nil
			}
		}
		return nil, fmt.Errorf("%s: more than 100 pages", method)
	}

	tools, err := list("tools/list", "tools")
	if err != nil {
		res.err = err.Error()
		return res
	}
	prompts, err := list("prompts/list", "prompts")
	if err != nil {
		res.err = err.Error()
		return res
	}
	resources, err := list("resources/list", "resources")
	if err != nil {
		res.err = err.Error()
		return res
	}
	res.tools, res.prompts, res.resources = len(tools), len(prompts), len(resources)

	var problems []string
	names := map[string]bool{}
	for _, t := range tools {
		names[t.Name] = true
		res.toolNames = append(res.toolNames, t.Name)
		if strings.HasPrefix(t.Name, secondPrefix) {
			res.secondTools++
		}
		if t.Description == nil || *t.Description == "" {
			res.missingDesc = append(res.missingDesc, t.Name)
		}
		if len(t.InputSchema) == 0 || t.InputSchema[0] != '{' {
			res.missingSchema = append(res.missingSchema, t.Name)
		}
	}
	sort.Strings(res.toolNames)
	var missing []string
	for _, n := range fixtureTools {
		if !names[n] {
			missing = append(missing, n)
		}
	}
	promptNames := map[string]bool{}
	for _, p := range prompts {
		promptNames[p.Name] = true
		if strings.HasPrefix(p.Name, secondPrefix) {
			res.secondPrompts++
		}
	}
	for _, n := range fixturePrompts {
		if !promptNames[n] {
			missing = append(missing, "prompt "+n)
		}
	}
	uris := map[string]bool{}
	for _, r := range resources {
		uris[r.URI] = true
	}
	for _, u := range fixtureResources {
		if !uris[u] {
			missing = append(missing, "resource "+u)
		}
	}
	if len(missing) > 0 {
		problems = append(problems, "fixture items missing or renamed: "+strings.Join(missing, ", "))
	}
	if withSecond && res.secondTools == 0 {
		problems = append(problems, "no "+secondPrefix+"* tools from the second upstream")
	}
	if len(res.missingDesc) > 0 {
		problems = append(problems, "tools without description: "+strings.Join(res.missingDesc, ", "))
	}
	if len(res.missingSchema) > 0 {
		problems = append(problems, "tools without inputSchema: "+strings.Join(res.missingSchema, ", "))
	}
	if len(problems) > 0 {
		res.err = strings.Join(problems, "; ")
		return res
	}
	res.ok = true
	return res
}

// rpcClient is a minimal Streamable HTTP client (legacy session) for the catalogue check.
type rpcClient struct {
	url     string
	http    *http.Client
	session string
	version string
	nextID  int
}

func (c *rpcClient) post(ctx context.Context, msg map[string]any) (*http.Response, error) {
	body, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	if c.version != "" {
		req.Header.Set("Mcp-Protocol-Version", c.version)
	}
	return c.http.Do(req)
}

func (c *rpcClient) notify(ctx context.Context, method string) error {
	resp, err := c.post(ctx, map[string]any{"jsonrpc": "2.0", "method": method})
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// call sends one request and returns its result, from a JSON body or from the event
// stream that answers it.
func (c *rpcClient) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	c.nextID++
	id := c.nextID
	resp, err := c.post(ctx, map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
		c.session = s
	}
	type reply struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	handle := func(data []byte) (json.RawMessage, bool, error) {
		var r reply
		if json.Unmarshal(data, &r) != nil || string(r.ID) != fmt.Sprint(id) {
			return nil, false, nil // a notification or a request of the server's
		}
		if r.Error != nil {
			return nil, true, fmt.Errorf("error %d: %s", r.Error.Code, r.Error.Message)
		}
		if method == "initialize" {
			var ir struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			_ = json.Unmarshal(r.Result, &ir)
			c.version = ir.ProtocolVersion
		}
		return r.Result, true, nil
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		if r, ok, err := handle(b); ok || err != nil {
			return r, err
		}
		return nil, fmt.Errorf("no response with id %d in %q", id, oneLine(string(b), 200))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	var data []byte
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(data) > 0 {
				if r, ok, err := handle(data); ok || err != nil {
					return r, err
				}
			}
			data = data[:0]
		case strings.HasPrefix(line, "data:"):
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("event stream ended without the response to %s", method)
}

// close ends the session (DELETE), best effort.
func (c *rpcClient) close(ctx context.Context) {
	if c.session == "" {
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.url, nil)
	if err != nil {
		return
	}
	req.Header.Set("Mcp-Session-Id", c.session)
	if c.version != "" {
		req.Header.Set("Mcp-Protocol-Version", c.version)
	}
	if resp, err := c.http.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// modernHello sends one 2026-07-28 server/discover declaring the preflight capabilities.
func modernHello(ctx context.Context, url string) error {
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "server/discover",
		"params": map[string]any{"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": preflightCapabilities,
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "mcp-proxy-conformance-harness", "version": "1"},
		}},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "server/discover")
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	return nil
}
