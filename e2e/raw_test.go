package e2e

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRawProtocol checks the proxy's front end byte by byte: the handshake, ids of every
// shape returned exactly, malformed input answered without ending the session, error
// codes, pagination with the proxy's own cursors, batches, cancellation and progress.
func TestRawProtocol(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, `proxy {
  name = "raw-proxy"
  page_size = 3
  instructions = "Proxy note."
}
`+testUpstream("t", "t", []string{"-name", "t", "-instructions", "Use t carefully."},
		`env = { E2E_VALUE = "from-config" }`))
	rc := startRaw(t, cfg)

	// Before initialize: ping is answered, anything else refused.
	rc.send(`{"jsonrpc":"2.0","id":"early","method":"tools/list"}`)
	if m := rc.response(`"early"`); errorCode(t, m) != -32600 {
		t.Errorf("request before initialize: %s", m["error"])
	}
	rc.send(`{"jsonrpc":"2.0","id":"p0","method":"ping"}`)
	if m := rc.response(`"p0"`); string(m["result"]) != "{}" {
		t.Errorf("ping before initialize: %v", m)
	}

	init := rc.initialize()
	var ir struct {
		ProtocolVersion string `json:"protocolVersion"`
		ServerInfo      struct{ Name string }
		Instructions    string
		Capabilities    map[string]json.RawMessage
	}
	if err := json.Unmarshal(init["result"], &ir); err != nil {
		t.Fatal(err)
	}
	if ir.ProtocolVersion != "2025-06-18" || ir.ServerInfo.Name != "raw-proxy" {
		t.Errorf("initialize result: %+v", ir)
	}
	if !strings.Contains(ir.Instructions, "Proxy note.") || !strings.Contains(ir.Instructions, "## t") ||
		!strings.Contains(ir.Instructions, "Use t carefully.") {
		t.Errorf("instructions not merged with upstream names: %q", ir.Instructions)
	}
	if _, ok := ir.Capabilities["tools"]; !ok {
		t.Errorf("capabilities: %v", ir.Capabilities)
	}
	rc.send(`{"jsonrpc":"2.0","id":"again","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := rc.response(`"again"`); errorCode(t, m) != -32600 {
		t.Errorf("second initialize must be refused: %v", m)
	}

	t.Run("ids returned byte for byte", func(t *testing.T) {
		for _, id := range []string{`"7"`, `7`, `9007199254740993`, `-0`, `"a\u0062c"`, `"<&>"`, `1.5e3`} {
			rc.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"t__echo","arguments":{"id":` + id + `}}}`)
			m := rc.response(id)
			if errorCode(t, m) != 0 {
				t.Errorf("id %s: %s", id, m["error"])
			}
		}
	})
	t.Run("malformed JSON", func(t *testing.T) {
		rc.send(`{"jsonrpc":"2.0","id":5,"method":`)
		m := rc.response("null")
		if errorCode(t, m) != -32700 {
			t.Errorf("malformed JSON: %v", m)
		}
		rc.send(`{"jsonrpc":"1.0","id":6,"method":"ping"}`)
		if m := rc.response("6"); errorCode(t, m) != -32600 {
			t.Errorf("wrong jsonrpc version: %v", m)
		}
		rc.send(`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
		if m := rc.response("8"); errorCode(t, m) != 0 {
			t.Errorf("the session did not survive malformed input: %v", m)
		}
	})
	t.Run("errors", func(t *testing.T) {
		cases := map[string]int64{
			`{"jsonrpc":"2.0","id":10,"method":"no/such/method"}`:                                       -32601,
			`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"t__nope"}}`:               -32602,
			`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"T__ECHO"}}`:               -32602,
			`{"jsonrpc":"2.0","id":13,"method":"tools/list","params":{"cursor":"forged"}}`:              -32602,
			`{"jsonrpc":"2.0","id":14,"method":"resources/read","params":{"uri":"nobody://owns/this"}}`: -32002,
			`{"jsonrpc":"2.0","id":15,"method":"prompts/get","params":{"name":"greet"}}`:                -32602,
		}
		for req, want := range cases {
			var probe struct{ ID json.RawMessage }
			json.Unmarshal([]byte(req), &probe)
			rc.send(req)
			if got := errorCode(t, rc.response(string(probe.ID))); got != want {
				t.Errorf("%s: code %d, want %d", req, got, want)
			}
		}
	})
	t.Run("pagination", func(t *testing.T) {
		var all []string
		cursor := ""
		for page := 0; page < 50; page++ {
			params := `{}`
			if cursor != "" {
				params = `{"cursor":` + cursor + `}`
			}
			rc.send(`{"jsonrpc":"2.0","id":"page","method":"tools/list","params":` + params + `}`)
			var res struct {
				Tools      []struct{ Name string }
				NextCursor *string
			}
			m := rc.response(`"page"`)
			if err := json.Unmarshal(m["result"], &res); err != nil {
				t.Fatal(err)
			}
			if len(res.Tools) > 3 {
				t.Fatalf("page of %d items, page_size is 3", len(res.Tools))
			}
			for _, tl := range res.Tools {
				all = append(all, tl.Name)
			}
			if res.NextCursor == nil {
				break
			}
			b, _ := json.Marshal(*res.NextCursor)
			cursor = string(b)
		}
		if len(all) < 10 || all[0] > all[1] {
			t.Errorf("paged tools: %v", all)
		}
		seen := map[string]bool{}
		for _, n := range all {
			if seen[n] {
				t.Errorf("tool %s served twice across pages", n)
			}
			seen[n] = true
		}
	})
	t.Run("batch", func(t *testing.T) {
		rc.send(`[{"jsonrpc":"2.0","id":"b1","method":"ping"},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","id":"b2","method":"tools/call","params":{"name":"t__echo","arguments":{}}}]`)
		line := rc.next(30 * time.Second)
		var arr []map[string]json.RawMessage
		if err := json.Unmarshal(line, &arr); err != nil || len(arr) != 2 {
			t.Fatalf("batch answer: %s", line)
		}
		ids := string(arr[0]["id"]) + string(arr[1]["id"])
		if !strings.Contains(ids, `"b1"`) || !strings.Contains(ids, `"b2"`) {
			t.Errorf("batch ids: %s", line)
		}
	})
	t.Run("progress with the client's token", func(t *testing.T) {
		rc.send(`{"jsonrpc":"2.0","id":"prog","method":"tools/call","params":{"name":"t__slow","arguments":{"ms":300},"_meta":{"progressToken":"tok-1"}}}`)
		var got int
		for {
			line := rc.next(30 * time.Second)
			var m struct {
				ID     json.RawMessage
				Method string
				Params struct {
					ProgressToken json.RawMessage `json:"progressToken"`
				}
			}
			json.Unmarshal(line, &m)
			if m.Method == "notifications/progress" {
				if string(m.Params.ProgressToken) != `"tok-1"` {
					t.Errorf("progress token %s, want \"tok-1\"", m.Params.ProgressToken)
				}
				got++
				continue
			}
			if string(m.ID) == `"prog"` {
				break
			}
		}
		if got == 0 {
			t.Errorf("no progress notifications")
		}
	})
	t.Run("cancellation reaches the upstream", func(t *testing.T) {
		rc.send(`{"jsonrpc":"2.0","id":"slow1","method":"tools/call","params":{"name":"t__slow","arguments":{"ms":20000}}}`)
		time.Sleep(300 * time.Millisecond)
		rc.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow1","reason":"user"}}`)
		rc.send(`{"jsonrpc":"2.0","id":"after","method":"ping"}`)
		// The next response must be the ping's: the cancelled request gets none.
		if m := rc.response(`"after"`); errorCode(t, m) != 0 {
			t.Errorf("ping after cancel: %v", m)
		}
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(rc.stderr.String(), `"stderr":"cancelled`) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if !strings.Contains(rc.stderr.String(), `"stderr":"cancelled`) {
			t.Errorf("upstream never saw the cancellation; proxy log:\n%s", rc.stderr)
		}
	})
	t.Run("env and cwd", func(t *testing.T) {
		rc.send(`{"jsonrpc":"2.0","id":"env","method":"tools/call","params":{"name":"t__env","arguments":{"name":"E2E_VALUE"}}}`)
		if m := rc.response(`"env"`); !strings.Contains(string(m["result"]), "from-config") {
			t.Errorf("env not passed: %s", m["result"])
		}
	})
	t.Run("resources and prompts", func(t *testing.T) {
		rc.send(`{"jsonrpc":"2.0","id":"r1","method":"resources/read","params":{"uri":"mis://item/42"}}`)
		if m := rc.response(`"r1"`); !strings.Contains(string(m["result"]), "item 42") {
			t.Errorf("templated read: %v", m)
		}
		rc.send(`{"jsonrpc":"2.0","id":"g1","method":"prompts/get","params":{"name":"t__greet","arguments":{"who":"Ada"}}}`)
		if m := rc.response(`"g1"`); !strings.Contains(string(m["result"]), "Hello, Ada") {
			t.Errorf("prompt: %v", m)
		}
	})
}

// TestOversizedMessage gives an upstream a 1 MiB limit and asks it for 5 MB: the call fails
// with the proxy's message-too-large error and the upstream keeps serving.
func TestOversizedMessage(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, testUpstream("t", "t", nil, `max_message_size = 1048576`))
	rc := startRaw(t, cfg)
	rc.initialize()
	rc.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t__big"}}`)
	if m := rc.response("1"); errorCode(t, m) != -31003 {
		t.Errorf("oversized result: %v", m)
	}
	rc.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t__big","arguments":{"bytes":1000}}}`)
	if m := rc.response("2"); errorCode(t, m) != 0 {
		t.Errorf("upstream did not survive: %v", m)
	}
}

// TestBrokenUpstreamDoesNotBlock starts the proxy with one upstream whose command does not
// exist: the client is served by the other and the failure is logged.
func TestBrokenUpstreamDoesNotBlock(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, `upstream "ghost" {
  command = ["/nonexistent/mcp-server"]
}
`+testUpstream("t", "t", nil, ""))
	rc := startRaw(t, cfg)
	rc.initialize()
	rc.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t__echo","arguments":{}}}`)
	if m := rc.response("1"); errorCode(t, m) != 0 {
		t.Errorf("healthy upstream: %v", m)
	}
	if !strings.Contains(rc.stderr.String(), "upstream failed to start") {
		t.Errorf("failure not logged:\n%s", rc.stderr)
	}
}

// TestCLI covers validate, tools and call.
func TestCLI(t *testing.T) {
	t.Parallel()
	bad := writeConfig(t, `upstream "a b" {
  comand = ["x"]
}
upstream "ok" {
  command = ["x"]
  timeout = 5
}
`)
	out, err := exec.Command(proxyBin, "validate", "--config", bad).CombinedOutput()
	if err == nil {
		t.Fatalf("validate accepted a bad file")
	}
	for _, want := range []string{bad + ":1:", bad + ":2:", bad + ":6:", `Did you mean "command"?`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}

	cfg := writeConfig(t, testUpstream("t", "t", nil, ""))
	if out, err := exec.Command(proxyBin, "validate", "--config", cfg).CombinedOutput(); err != nil {
		t.Errorf("validate on a good file: %v\n%s", err, out)
	}
	cmd := exec.Command(proxyBin, "tools", "--config", cfg, "--json", "--log-level", "error")
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("tools: %v", err)
	}
	var rows []struct{ Name, Upstream, OriginalName string }
	if err := json.Unmarshal(out, &rows); err != nil || len(rows) < 5 {
		t.Fatalf("tools --json: %v %s", err, out)
	}
	if rows[0].Upstream != "t" || !strings.HasPrefix(rows[0].Name, "t__") {
		t.Errorf("tools row: %+v", rows[0])
	}
	out, err = exec.Command(proxyBin, "call", "--config", cfg, "--log-level", "error", "t__echo", `{"a":1}`).Output()
	if err != nil || !strings.Contains(string(out), `"structuredContent"`) {
		t.Errorf("call: %v %s", err, out)
	}
	err = exec.Command(proxyBin, "call", "--config", cfg, "--log-level", "error", "t__fail").Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Errorf("call of a failing tool must exit 1, got %v", err)
	}
}

// TestClientGoneMidCall closes the proxy's stdin while a call is in flight: the upstream
// is told to cancel, the proxy exits cleanly and leaves no child process behind (checked
// by startRaw's cleanup).
func TestClientGoneMidCall(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, testUpstream("t", "t", nil, ""))
	rc := startRaw(t, cfg)
	rc.initialize()
	rc.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t__slow","arguments":{"ms":30000}}}`)
	time.Sleep(200 * time.Millisecond)
	children := childPIDs(rc.cmd.Process.Pid)
	if len(children) != 1 {
		t.Errorf("expected one upstream child, found %v", children)
	}
	rc.stdin.Close()
	defer assertGone(t, children)
	if err, exited := rc.wait(15 * time.Second); !exited {
		t.Fatalf("proxy did not exit after its client went away\n%s", rc.stderr)
	} else if err != nil {
		t.Errorf("proxy exit: %v", err)
	}
	if !strings.Contains(rc.stderr.String(), `"stderr":"cancelled`) {
		t.Errorf("the in-flight call was not cancelled upstream:\n%s", rc.stderr)
	}
}

// TestUpstreamVersions checks the upstream handshake: an upstream that answers with an
// older published version is accepted, one that answers with a version the proxy does
// not speak is refused with a clear log line while the other keeps serving.
func TestUpstreamVersions(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, testUpstream("old", "old", []string{"-version", "2024-11-05"}, "")+
		testUpstream("future", "future", []string{"-version", "2099-01-01"}, `startup_timeout = "5s"`))
	rc := startRaw(t, cfg)
	rc.initialize()
	rc.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"old__echo","arguments":{}}}`)
	if m := rc.response("1"); errorCode(t, m) != 0 {
		t.Errorf("2024-11-05 upstream: %v", m)
	}
	rc.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"future__echo","arguments":{}}}`)
	if m := rc.response("2"); errorCode(t, m) != -32602 {
		t.Errorf("tools of an upstream that failed its handshake must not be listed: %v", m)
	}
	if !strings.Contains(rc.stderr.String(), `chose protocol version \"2099-01-01\"`) {
		t.Errorf("unsupported version not explained in the log:\n%s", rc.stderr)
	}
}

// TestUpstreamPing has the upstream ping its client: the proxy answers by itself.
func TestUpstreamPing(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, testUpstream("t", "t", nil, ""))
	rc := startRaw(t, cfg)
	rc.initialize()
	rc.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t__ping_client"}}`)
	if m := rc.response("1"); !strings.Contains(string(m["result"]), "client answered ping: {}") {
		t.Errorf("upstream ping: %s %s", m["result"], m["error"])
	}
}
