package e2e

import (
	"context"
	"errors"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestRealUpstreams drives the proxy with the Go SDK client against the Go SDK
// everything-server and npm's server-everything: list, call, read, get, complete and
// progress, in both the probing (2026-07-28 first, then initialize) and the plain legacy
// client modes.
func TestRealUpstreams(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, `proxy { name = "e2e-proxy" }
`+everythingUpstream("everything", "ev")+npmUpstream("npm", "npm"))
	for _, version := range []string{"", "2025-11-25", "2025-03-26"} {
		name := version
		if name == "" {
			name = "probing-client"
		}
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var progress []*mcp.ProgressNotificationParams
			cs, _ := connectSDK(t, cfg, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					progress = append(progress, r.Params)
					mu.Unlock()
				},
			}, version)
			ctx := ctxT(t, 60*time.Second)
			init := cs.InitializeResult()
			if init.ServerInfo.Name != "e2e-proxy" {
				t.Errorf("serverInfo.name = %q, want e2e-proxy", init.ServerInfo.Name)
			}
			if init.Capabilities.Tools == nil || init.Capabilities.Prompts == nil || init.Capabilities.Resources == nil {
				t.Errorf("capabilities are not the union of the upstreams': %+v", init.Capabilities)
			}

			names := toolNames(t, cs)
			for _, want := range []string{"ev__test_simple_text", "ev__test_tool_with_progress", "npm__echo", "npm__get-sum"} {
				if !slices.Contains(names, want) {
					t.Errorf("merged tools lack %q (got %d tools)", want, len(names))
				}
			}
			for _, n := range names {
				if !strings.HasPrefix(n, "ev__") && !strings.HasPrefix(n, "npm__") {
					t.Errorf("tool %q is not namespaced", n)
				}
			}
			if !slices.IsSorted(names[:slices.IndexFunc(names, func(s string) bool { return strings.HasPrefix(s, "npm__") })]) {
				t.Errorf("tools of the first upstream are not in name order: %v", names)
			}

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_simple_text"})
			if err != nil || res.IsError || !strings.Contains(textOf(res), "simple text") {
				t.Errorf("ev__test_simple_text: %v %+v", err, res)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "npm__echo", Arguments: map[string]any{"message": "héllo <&>"}})
			if err != nil || textOf(res) != "Echo: héllo <&>" {
				t.Errorf("npm__echo: %v %q", err, textOf(res))
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "npm__get-sum", Arguments: map[string]any{"a": 2, "b": 40}})
			if err != nil || !strings.Contains(textOf(res), "42") {
				t.Errorf("npm__get-sum: %v %q", err, textOf(res))
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "npm__get-structured-content", Arguments: map[string]any{"location": "New York"}})
			if err != nil || res.StructuredContent == nil {
				t.Errorf("npm__get-structured-content lost structuredContent: %v %+v", err, res)
			}

			// Unknown tool: a protocol error, -32602.
			_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "nope__nothing"})
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || werr.Code != -32602 {
				t.Errorf("unknown tool: got %v, want -32602", err)
			}

			// Progress arrives with the client's own token.
			p := &mcp.CallToolParams{Name: "ev__test_tool_with_progress"}
			p.SetProgressToken("my-token-1")
			if _, err := cs.CallTool(ctx, p); err != nil {
				t.Errorf("progress tool: %v", err)
			}
			mu.Lock()
			if len(progress) == 0 {
				t.Errorf("no progress notification reached the client")
			}
			for _, pr := range progress {
				if pr.ProgressToken != "my-token-1" {
					t.Errorf("progress token %v, want my-token-1", pr.ProgressToken)
				}
			}
			mu.Unlock()

			// Resources from both upstreams, URIs untouched.
			rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://static-text"})
			if err != nil || len(rr.Contents) == 0 || rr.Contents[0].URI != "test://static-text" {
				t.Errorf("read test://static-text: %v %+v", err, rr)
			}
			rr, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://template/42/data"})
			if err != nil || len(rr.Contents) == 0 {
				t.Errorf("read templated resource: %v", err)
			}
			var npmURI string
			for r, err := range cs.Resources(ctx, nil) {
				if err != nil {
					t.Fatalf("listing resources: %v", err)
				}
				if strings.HasPrefix(r.URI, "demo://") && npmURI == "" {
					npmURI = r.URI
				}
			}
			if npmURI == "" {
				t.Errorf("no npm resources in the merged list")
			} else if rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: npmURI}); err != nil || len(rr.Contents) == 0 {
				t.Errorf("read %s: %v", npmURI, err)
			}

			// Prompts, namespaced and routed with the original name restored.
			gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "ev__test_prompt_with_arguments", Arguments: map[string]string{"arg1": "A", "arg2": "B"}})
			if err != nil || len(gp.Messages) == 0 {
				t.Errorf("get prompt: %v", err)
			}
			var promptNames []string
			for pr, err := range cs.Prompts(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				promptNames = append(promptNames, pr.Name)
			}
			if !slices.Contains(promptNames, "ev__test_simple_prompt") || !slices.ContainsFunc(promptNames, func(s string) bool { return strings.HasPrefix(s, "npm__") }) {
				t.Errorf("merged prompts: %v", promptNames)
			}

			// Completion routed by the namespaced prompt name.
			cr, err := cs.Complete(ctx, &mcp.CompleteParams{
				Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "npm__args-prompt"},
				Argument: mcp.CompleteParamsArgument{Name: "city", Value: ""},
			})
			if err != nil {
				t.Errorf("completion: %v", err)
			} else if len(cr.Completion.Values) == 0 {
				t.Logf("completion returned no values (upstream choice): %+v", cr)
			}
		})
	}
}

// TestMisbehavingUpstream checks that a server that prints a banner on stdout, answers a
// notification with an error, pages its tools two at a time, writes garbage, crashes,
// stalls and sends 5 MB results gets a clear error for each case while the other upstream
// keeps working.
func TestMisbehavingUpstream(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, everythingUpstream("everything", "ev")+
		testUpstream("bad", "bad", []string{"-banner", "-initialized-error", "-page", "2", "-name", "bad"},
			`timeout = "2s"`))
	cs, stderr := connectSDK(t, cfg, nil, "2025-11-25")
	ctx := ctxT(t, 120*time.Second)

	evWorks := func(when string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_simple_text"})
		if err != nil || res.IsError {
			t.Errorf("%s: the healthy upstream stopped working: %v", when, err)
		}
	}

	names := toolNames(t, cs)
	for _, want := range []string{"bad__echo", "bad__slow", "bad__crash", "bad__big", "bad__garbage", "bad__fail"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tools of the paginating, banner-printing upstream missing %q: %v", want, names)
		}
	}
	valid := regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
	var long []string
	for _, n := range names {
		if !valid.MatchString(n) {
			t.Errorf("exposed name %q breaks the spec's name rules", n)
		}
		if strings.HasPrefix(n, "bad__long_name_") || strings.HasPrefix(n, "bad__very_long_name_") {
			long = append(long, n)
		}
	}
	if len(long) != 2 {
		t.Fatalf("expected the 70- and 140-character tools, got %v", long)
	}
	for _, n := range long {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: n, Arguments: map[string]any{"k": "v"}})
		if err != nil || res.IsError {
			t.Errorf("calling long-named tool %s: %v", n, err)
		}
	}
	if !strings.Contains(stderr.String(), "not a JSON-RPC message") {
		t.Errorf("the banner line was not logged as skipped")
	}

	t.Run("pass-through", func(t *testing.T) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bad__echo", Arguments: map[string]any{"x": 1, "html": "<b>&</b>"}})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"x": float64(1), "html": "<b>&</b>"}
		if got, ok := res.StructuredContent.(map[string]any); !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("structuredContent changed: %#v", res.StructuredContent)
		}
		if res.Meta["dev.test/echo"] != true {
			t.Errorf("_meta lost: %v", res.Meta)
		}
	})
	t.Run("garbage lines skipped", func(t *testing.T) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bad__garbage"})
		if err != nil || textOf(res) != "after garbage" {
			t.Errorf("garbage: %v %q", err, textOf(res))
		}
	})
	t.Run("tool error is a result", func(t *testing.T) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bad__fail"})
		if err != nil || !res.IsError {
			t.Errorf("fail: %v %+v", err, res)
		}
	})
	t.Run("5 MB result", func(t *testing.T) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bad__big"})
		if err != nil || len(textOf(res)) != 5*1024*1024 {
			t.Errorf("big: %v, %d bytes", err, len(textOf(res)))
		}
	})
	t.Run("slow reply times out", func(t *testing.T) {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bad__slow", Arguments: map[string]any{"ms": 10000}})
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != -31001 || !strings.Contains(werr.Message, "did not answer") {
			t.Errorf("slow: got %v, want proxy timeout -31001", err)
		}
		evWorks("after a timeout")
	})
	t.Run("crash mid-call", func(t *testing.T) {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bad__crash"})
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != -31002 || !strings.Contains(werr.Message, "exited") {
			t.Errorf("crash: got %v, want proxy error -31002 naming the exit", err)
		}
		evWorks("after a crash")
		// The crashed upstream is restarted with backoff and serves again.
		deadline := time.Now().Add(20 * time.Second)
		for {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bad__echo", Arguments: map[string]any{"again": true}})
			if err == nil && !res.IsError {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("crashed upstream did not come back: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
}

// TestDuplicateNames puts two upstreams with an empty namespace side by side: every name
// collides, the earlier upstream keeps the plain names and the later one's tools stay
// reachable under disambiguated names, each call reaching the right server.
func TestDuplicateNames(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t,
		testUpstream("twin1", "", []string{"-name", "twin1", "-dup", "shared"}, "")+
			testUpstream("twin2", "", []string{"-name", "twin2", "-dup", "shared"}, ""))
	cs, stderr := connectSDK(t, cfg, nil, "2025-11-25")
	ctx := ctxT(t, 60*time.Second)
	names := toolNames(t, cs)
	var alt string
	for _, n := range names {
		if strings.HasPrefix(n, "shared_") {
			alt = n
		}
	}
	if !slices.Contains(names, "shared") || alt == "" {
		t.Fatalf("want shared and a disambiguated shared_<hash>, got %v", names)
	}
	if len(names) != len(slices.Compact(slices.Sorted(slices.Values(names)))) {
		t.Errorf("duplicate exposed names: %v", names)
	}
	for name, want := range map[string]string{"shared": "from twin1: ", alt: "from twin2: "} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		if err != nil || !strings.HasPrefix(textOf(res), want) {
			t.Errorf("%s reached the wrong server: %v %q", name, err, textOf(res))
		}
	}
	if !strings.Contains(stderr.String(), "collides") {
		t.Errorf("collision was not logged")
	}
}

// TestSDKCancel cancels a call from the Go SDK client (which sends
// notifications/cancelled): the upstream sees the cancellation with its own request id,
// and the session goes on.
func TestSDKCancel(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, testUpstream("t", "t", nil, ""))
	for _, version := range []string{"2025-11-25", ""} {
		cs, stderr := connectSDK(t, cfg, nil, version)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__slow", Arguments: map[string]any{"ms": 30000}})
			done <- err
		}()
		time.Sleep(300 * time.Millisecond)
		cancel()
		if err := <-done; err == nil {
			t.Errorf("%q: cancelled call returned no error", version)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(stderr.String(), `"stderr":"cancelled`) {
			if time.Now().After(deadline) {
				t.Fatalf("%q: the upstream never saw the cancellation\n%s", version, stderr)
			}
			time.Sleep(50 * time.Millisecond)
		}
		res, err := cs.CallTool(ctxT(t, 30*time.Second), &mcp.CallToolParams{Name: "t__echo", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Errorf("%q: session did not go on after a cancel: %v", version, err)
		}
	}
}
