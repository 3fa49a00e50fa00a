package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Long-lived runs: the shape a team endpoint has. One proxy (per fixture variant)
// serves warm-up clients of both eras and of several capability sets first, then the
// three server suites one after another, then two of them at once. A fresh proxy per
// run hides state that the first client fixed for everyone; these runs expect exactly
// the fresh runs' baseline, so any difference fails.

// warmUpCapabilities are the capability sets of the warm-up clients, in order: the
// first (none) is the client that starts the upstreams.
var warmUpCapabilities = []struct {
	name string
	caps map[string]any
}{
	{"none", map[string]any{}},
	{"sampling", map[string]any{"sampling": map[string]any{}}},
	{"elicitation", map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}},
	{"roots", map[string]any{"roots": map[string]any{"listChanged": true}}},
}

// runGroup executes the runs of one long-lived group on one proxy, step by step.
func (e *environment) runGroup(ctx context.Context, runs []*run) {
	first := runs[0]
	dir := filepath.Join(e.out, first.group)
	t0 := time.Now()
	fail := func(note string) {
		for _, r := range runs {
			r.res = &result{status: "ERROR", note: note, elapsed: time.Since(t0)}
			fmt.Printf("  done  %-34s %-5s %5.1fs  %s\n", r.id, r.res.status, r.res.elapsed.Seconds(), r.res.note)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fail(err.Error())
		return
	}
	fmt.Printf("  start %s (%d runs on one proxy)\n", first.group, len(runs))
	url, stop, err := e.startServerTarget(ctx, first, dir)
	if err != nil {
		fail(err.Error())
		return
	}
	defer stop()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	log, err := warmUp(wctx, url)
	cancel()
	_ = os.WriteFile(filepath.Join(dir, "warmup.txt"), []byte(log), 0o644)
	if err != nil {
		fail("warm-up: " + err.Error())
		return
	}
	steps := map[int][]*run{}
	var order []int
	for _, r := range runs {
		if _, ok := steps[r.step]; !ok {
			order = append(order, r.step)
		}
		steps[r.step] = append(steps[r.step], r)
	}
	slices.Sort(order)
	for _, s := range order {
		var wg sync.WaitGroup
		for _, r := range steps[s] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.sharedURL = url
				t := time.Now()
				fmt.Printf("  start %s\n", r.id)
				r.res = e.execute(ctx, r)
				r.res.elapsed = time.Since(t)
				fmt.Printf("  done  %-34s %-5s %5.1fs  %s\n", r.id, r.res.status, r.res.elapsed.Seconds(), r.res.note)
			}()
		}
		wg.Wait()
	}
}

// warmUp uses the proxy as the clients before the suites would: a legacy client that
// declares nothing starts the upstreams (and waits until the fixture's tools are
// listed), then legacy and modern clients of each capability set list the tools and
// call one. The legacy sessions stay open. It returns what it did, line by line.
func warmUp(ctx context.Context, url string) (string, error) {
	var log strings.Builder
	deadline := time.Now().Add(90 * time.Second)
	for i, w := range warmUpCapabilities {
		c := &rpcClient{url: url, http: &http.Client{Timeout: 60 * time.Second}}
		if _, err := c.call(ctx, "initialize", map[string]any{
			"protocolVersion": "2025-11-25",
			"capabilities":    w.caps,
			"clientInfo":      map[string]any{"name": "warm-up-legacy-" + w.name, "version": "1"},
		}); err != nil {
			return log.String(), fmt.Errorf("legacy %s: initialize: %v", w.name, err)
		}
		_ = c.notify(ctx, "notifications/initialized")
		for {
			raw, err := c.call(ctx, "tools/list", map[string]any{})
			if err == nil && bytes.Contains(raw, []byte(`"test_simple_text"`)) {
				break
			}
			if i > 0 || time.Now().After(deadline) || ctx.Err() != nil {
				return log.String(), fmt.Errorf("legacy %s: tools/list without the fixture's tools: %v", w.name, err)
			}
			time.Sleep(500 * time.Millisecond) // the first client waits for the upstreams
		}
		if _, err := c.call(ctx, "tools/call", map[string]any{"name": "test_simple_text", "arguments": map[string]any{}}); err != nil {
			return log.String(), fmt.Errorf("legacy %s: tools/call: %v", w.name, err)
		}
		fmt.Fprintf(&log, "legacy client declaring %s: initialize, tools/list, tools/call test_simple_text: ok (session left open)\n", w.name)
	}
	for _, w := range warmUpCapabilities {
		for _, step := range []struct {
			method string
			params map[string]any
		}{
			{"server/discover", map[string]any{}},
			{"tools/list", map[string]any{}},
			{"tools/call", map[string]any{"name": "test_simple_text", "arguments": map[string]any{}}},
		} {
			if err := modernRequest(ctx, url, step.method, step.params, w.caps, "warm-up-modern-"+w.name); err != nil {
				return log.String(), fmt.Errorf("modern %s: %s: %v", w.name, step.method, err)
			}
		}
		fmt.Fprintf(&log, "modern client declaring %s: server/discover, tools/list, tools/call test_simple_text: ok\n", w.name)
	}
	return log.String(), nil
}

// modernRequest sends one 2026-07-28 request with the client's capabilities in _meta
// and checks that it is answered with a result.
func modernRequest(ctx context.Context, url, method string, params, caps map[string]any, name string) error {
	p := map[string]any{}
	for k, v := range params {
		p[k] = v
	}
	p["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": caps,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": name, "version": "1"},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": p})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if n, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", n)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, oneLine(string(b), 200))
	}
	if !bytes.Contains(b, []byte(`"result"`)) || bytes.Contains(b, []byte(`"isError":true`)) {
		return fmt.Errorf("not a result: %s", oneLine(string(b), 200))
	}
	return nil
}
