package router

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// A middleware that no other package knows of can refuse, rewrite the request and
// rewrite the result of every routed method.
func TestMiddlewareOnEveryRoutedMethod(t *testing.T) {
	f := newFake("u", "echo")
	f.cat.Prompts = []json.RawMessage{json.RawMessage(`{"name":"greet"}`)}
	f.cat.Resources = []json.RawMessage{json.RawMessage(`{"uri":"res://a","name":"a"}`)}
	r := newTestRouter(t, Options{}, nsUp{f, "ns"})
	r.tasks.record("task-1", r.all()[0], "")

	var seen []string
	refuse := errors.New("refused by the test middleware")
	r.Use(func(next Handler) Handler {
		return func(ctx context.Context, c *Call, reply Reply) {
			seen = append(seen, c.Method+" "+c.Target.Name)
			if strings.Contains(string(c.Params), "refuse-me") {
				reply(nil, refuse)
				return
			}
			p, err := jsonx.Set(c.Params, "injected", []byte("true"))
			if err != nil {
				reply(nil, err)
				return
			}
			next(ctx, c.WithParams(p), func(res json.RawMessage, err error) {
				if err == nil {
					res = json.RawMessage(`{"rewritten":` + string(res) + `}`)
				}
				reply(res, err)
			})
		}
	})

	for _, tc := range []struct{ method, params, target string }{
		{mcp.MethodToolsCall, `{"name":"ns__echo","arguments":{"x":1}}`, "ns__echo"},
		{mcp.MethodPromptsGet, `{"name":"ns__greet"}`, "ns__greet"},
		{mcp.MethodResourcesRead, `{"uri":"res://a"}`, "res://a"},
		{mcp.MethodResourcesSubscribe, `{"uri":"res://a"}`, "res://a"},
		{mcp.MethodResourcesUnsubscribe, `{"uri":"res://a"}`, "res://a"},
		{mcp.MethodCompletionComplete, `{"ref":{"type":"ref/prompt","name":"ns__greet"},"argument":{"name":"n","value":"v"}}`, "ns__greet"},
		{mcp.MethodTasksGet, `{"taskId":"task-1"}`, "task-1"},
		{mcp.MethodTasksResult, `{"taskId":"task-1"}`, "task-1"},
		{mcp.MethodTasksCancel, `{"taskId":"task-1"}`, "task-1"},
	} {
		seen = nil
		f.calls = nil
		res, err := call(t, r, tc.method, tc.params)
		if err != nil || !strings.HasPrefix(string(res), `{"rewritten":`) {
			t.Errorf("%s: result %s, %v; want the rewritten result", tc.method, res, err)
		}
		last := f.lastCall()
		if last == nil || !strings.Contains(string(last.Params), `"injected":true`) {
			t.Errorf("%s: the upstream did not get the rewritten request: %+v", tc.method, last)
		}
		if len(seen) != 1 || seen[0] != tc.method+" "+tc.target {
			t.Errorf("%s: the middleware saw %q", tc.method, seen)
		}

		f.calls = nil
		refused := strings.Replace(tc.params, "{", `{"note":"refuse-me",`, 1)
		if _, err := call(t, r, tc.method, refused); !errors.Is(err, refuse) {
			t.Errorf("%s: refusal: %v", tc.method, err)
		}
		if f.lastCall() != nil {
			t.Errorf("%s: a refused call reached the upstream", tc.method)
		}
	}

	// What the router serves itself does not pass through the chain.
	seen = nil
	if _, err := call(t, r, mcp.MethodToolsList, `{}`); err != nil || len(seen) != 0 {
		t.Errorf("tools/list: %v, middleware saw %q", err, seen)
	}

	// The chain is replaced as a whole; no middleware: calls go straight upstream.
	r.Use()
	if res, err := call(t, r, mcp.MethodToolsCall, `{"name":"ns__echo"}`); err != nil || strings.Contains(string(res), "rewritten") {
		t.Errorf("without middleware: %s %v", res, err)
	}
}

// The lists pass through the local chain (UseLocal), never through the routed one: the
// local chain sees a call without a target and the list as it is answered.
func TestLocalChain(t *testing.T) {
	f := newFake("u", "echo")
	f.cat.Prompts = []json.RawMessage{json.RawMessage(`{"name":"greet"}`)}
	r := newTestRouter(t, Options{}, nsUp{f, "ns"})
	r.Use(func(next Handler) Handler {
		return func(ctx context.Context, c *Call, reply Reply) {
			t.Errorf("%s went through the routed chain", c.Method)
			next(ctx, c, reply)
		}
	})
	var seen []string
	r.UseLocal(func(next Handler) Handler {
		return func(ctx context.Context, c *Call, reply Reply) {
			if c.Target != nil || c.Request == nil || c.Request.Method != c.Method {
				t.Errorf("local call %+v", c)
			}
			next(ctx, c, func(res json.RawMessage, err error) {
				seen = append(seen, c.Method+" "+string(res[:min(len(res), 10)]))
				reply(res, err)
			})
		}
	})
	for _, m := range []string{mcp.MethodToolsList, mcp.MethodPromptsList, mcp.MethodResourcesList, mcp.MethodResourcesTemplatesList} {
		if _, err := call(t, r, m, `{}`); err != nil {
			t.Errorf("%s: %v", m, err)
		}
	}
	want := []string{`tools/list {"tools":[`, `prompts/list {"prompts"`, `resources/list {"resource`, `resources/templates/list {"resource`}
	if strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Errorf("the local chain saw %q, want %q", seen, want)
	}
	// Without a local chain a list is answered directly.
	r2 := newTestRouter(t, Options{}, nsUp{newFake("v", "echo"), "v"})
	if res, err := call(t, r2, mcp.MethodToolsList, `{}`); err != nil || !strings.Contains(string(res), "v__echo") {
		t.Errorf("tools/list without a local chain: %s %v", res, err)
	}
}

// A middleware that delivers one call twice (a retry), or a copy of it with other params
// after the original, gets two sendings with upstream requests of their own: the room
// for the upstream request allocated with the call (sendSpare) serves the first only.
func TestMiddlewareDeliversTwice(t *testing.T) {
	f := newFake("u", "echo")
	r := newTestRouter(t, Options{}, nsUp{f, ""})
	var sent []*upstream.Request
	r.Use(func(next Handler) Handler {
		return func(ctx context.Context, c *Call, reply Reply) {
			next(ctx, c, func(json.RawMessage, error) {
				sent = append(sent, f.lastCall())
				again := c.WithParams(json.RawMessage(`{"name":"echo","arguments":{"n":2}}`))
				next(ctx, again, func(res json.RawMessage, err error) {
					sent = append(sent, f.lastCall())
					reply(res, err)
				})
			})
		}
	})
	if _, err := call(t, r, mcp.MethodToolsCall, `{"name":"echo","arguments":{"n":1}}`); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 2 || sent[0] == sent[1] {
		t.Fatalf("upstream requests %p: want two distinct ones", sent)
	}
	if !strings.Contains(string(sent[0].Params), `"n":1`) || !strings.Contains(string(sent[1].Params), `"n":2`) {
		t.Errorf("first sending %s, second %s: each must keep its own params", sent[0].Params, sent[1].Params)
	}
}
