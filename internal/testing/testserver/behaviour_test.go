package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestSlowProgress(t *testing.T) {
	c := startServer(t)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"ms":30},"_meta":{"progressToken":"tok"}}}`)
	for i := 1; i <= 3; i++ {
		m := c.recvMessage()
		want := fmt.Sprintf(`{"progressToken":"tok","progress":%d,"total":3}`, i)
		if m.Method != "notifications/progress" || string(m.Params) != want {
			t.Fatalf("got %s, want progress %s", m.raw, want)
		}
	}
	m := c.recvMessage()
	var r toolResultWire
	if err := json.Unmarshal(m.Result, &r); err != nil || r.text(t) != "slept 30ms" {
		t.Errorf("slow result: %s", m.raw)
	}
	if r := c.callTool("slow", map[string]any{"ms": -1}); !r.IsError {
		t.Errorf("slow with ms=-1: %+v, want a tool error", r)
	}
}

func TestSlowCancelled(t *testing.T) {
	c := startServer(t)
	c.send(`{"jsonrpc":"2.0","id":"s1","method":"tools/call","params":{"name":"slow","arguments":{"ms":60000}}}`)
	// The slow call does not hold up others.
	c.request("ping", nil)
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s1","reason":"test"}}`)
	deadline := time.Now().Add(testTimeout)
	for !strings.Contains(c.stderr.String(), `cancelled "s1"`) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr = %q, want a cancellation line", c.stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	err, rest := c.wait()
	if err != nil || len(rest) != 0 {
		t.Errorf("after cancellation: run = %v, further output %q", err, rest)
	}
}

func TestContextCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := startServerContext(t, ctx)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"ms":60000}}}`)
	c.request("ping", nil)
	cancel()
	err, rest := c.collect()
	if !errors.Is(err, context.Canceled) || len(rest) != 0 {
		t.Errorf("run = %v, further output %q; want context.Canceled and nothing", err, rest)
	}
	if strings.Contains(c.stderr.String(), "cancelled") {
		t.Errorf("shutdown logged as a client cancellation: %q", c.stderr.String())
	}
}

func TestEOFFinishesRequests(t *testing.T) {
	c := startServer(t)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"ms":50}}}`)
	err, rest := c.wait()
	if err != nil || len(rest) != 1 || !strings.Contains(rest[0], "slept 50ms") {
		t.Errorf("run = %v, output %q; want the slow result", err, rest)
	}
}

func wantExit(t *testing.T, err error, code int) {
	t.Helper()
	var exit *exitError
	if !errors.As(err, &exit) || exit.code != code {
		t.Fatalf("run = %v, want exit status %d", err, code)
	}
}

func TestCrash(t *testing.T) {
	c := startServer(t)
	c.request("ping", nil)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"crash"}}`)
	err, rest := c.collect()
	wantExit(t, err, 3)
	if len(rest) != 0 {
		t.Errorf("crash answered: %q", rest)
	}
	if !strings.Contains(c.stderr.String(), "crashing now") {
		t.Errorf("stderr = %q", c.stderr.String())
	}
}

func TestExitAfter(t *testing.T) {
	for _, fast := range []string{"-fast=false", "-fast"} {
		c := startServer(t, fast, "-exit-after", "2")
		c.request("ping", nil)
		c.request("ping", nil)
		err, rest := c.collect()
		wantExit(t, err, 4)
		if len(rest) != 0 {
			t.Errorf("%s: output after exit: %q", fast, rest)
		}
	}
}

func TestBig(t *testing.T) {
	c := startServer(t)
	for _, tc := range []struct {
		args any
		want int
	}{{map[string]any{"bytes": 1000}, 1000}, {map[string]any{"bytes": 0}, 0}, {nil, 5 << 20}} {
		text := c.callTool("big", tc.args).text(t)
		if len(text) != tc.want || strings.Trim(text, "x") != "" {
			t.Errorf("big %v: %d bytes, want %d x", tc.args, len(text), tc.want)
		}
	}
	if r := c.callTool("big", map[string]any{"bytes": -1}); !r.IsError {
		t.Errorf("big -1: %+v, want a tool error", r)
	}
}

func TestLongRequestLine(t *testing.T) {
	c := startServer(t)
	long := strings.Repeat("y", 3*readBufferSize+17)
	if got := c.callTool("echo", map[string]any{"s": long}); string(got.StructuredContent) != `{"s":"`+long+`"}` {
		t.Errorf("long argument not echoed intact (%d bytes)", len(got.StructuredContent))
	}
	c.request("ping", nil)
}

func TestFailEnvCwd(t *testing.T) {
	t.Setenv("MISBEHAVE_TEST_VAR", "hello world")
	c := startServer(t)
	if r := c.callTool("fail", nil); !r.IsError || r.text(t) != "tool failed on purpose" {
		t.Errorf("fail: %+v", r)
	}
	if r := c.callTool("env", map[string]any{"name": "MISBEHAVE_TEST_VAR"}); r.IsError || r.text(t) != "hello world" {
		t.Errorf("env: %+v", r)
	}
	if r := c.callTool("env", map[string]any{"name": "MISBEHAVE_SURELY_UNSET"}); !r.IsError {
		t.Errorf("env of an unset variable: %+v, want a tool error", r)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if r := c.callTool("cwd", nil); r.text(t) != wd {
		t.Errorf("cwd = %q, want %q", r.text(t), wd)
	}
}

func TestPromptsAndResources(t *testing.T) {
	c := startServer(t, "-name", "beta")
	var prompts struct {
		Prompts []struct {
			Name      string `json:"name"`
			Arguments []struct {
				Name string `json:"name"`
			} `json:"arguments"`
		} `json:"prompts"`
	}
	c.result("prompts/list", nil, &prompts)
	if len(prompts.Prompts) != 1 || prompts.Prompts[0].Name != "greet" || prompts.Prompts[0].Arguments[0].Name != "who" {
		t.Errorf("prompts/list: %+v", prompts)
	}
	var prompt struct {
		Messages []struct {
			Role    string `json:"role"`
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"messages"`
	}
	c.result("prompts/get", map[string]any{"name": "greet", "arguments": map[string]string{"who": "Ann"}}, &prompt)
	if len(prompt.Messages) != 1 || prompt.Messages[0].Content.Text != "Hello, Ann" {
		t.Errorf("prompts/get: %+v", prompt)
	}
	if e := c.rpcErr("prompts/get", map[string]any{"name": "nope"}); e.Code != codeInvalidParams {
		t.Errorf("unknown prompt: %+v", e)
	}

	var resources struct {
		Resources []struct {
			URI string `json:"uri"`
		} `json:"resources"`
	}
	c.result("resources/list", nil, &resources)
	if len(resources.Resources) != 1 || resources.Resources[0].URI != "mis://static/beta" {
		t.Errorf("resources/list: %+v", resources)
	}
	var templates struct {
		ResourceTemplates []struct {
			URITemplate string `json:"uriTemplate"`
		} `json:"resourceTemplates"`
	}
	c.result("resources/templates/list", nil, &templates)
	if len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate != "mis://item/{id}" {
		t.Errorf("resources/templates/list: %+v", templates)
	}
	for uri, want := range map[string]string{"mis://static/beta": "static resource of beta", "mis://item/42": "item 42"} {
		var read struct {
			Contents []struct {
				URI  string `json:"uri"`
				Text string `json:"text"`
			} `json:"contents"`
		}
		c.result("resources/read", map[string]any{"uri": uri}, &read)
		if len(read.Contents) != 1 || read.Contents[0].URI != uri || read.Contents[0].Text != want {
			t.Errorf("read %s: %+v", uri, read)
		}
	}
	for _, uri := range []string{"mis://nope", "mis://item/", "mis://static/other"} {
		e := c.rpcErr("resources/read", map[string]any{"uri": uri})
		if e.Code != codeResourceNotFound || e.Message != "Resource not found" || string(e.Data) != `{"uri":"`+uri+`"}` {
			t.Errorf("read %s: %+v (data %s)", uri, e, e.Data)
		}
	}
}

func TestProtocolErrors(t *testing.T) {
	c := startServer(t, "-stderr-chatter")
	if e := c.rpcErr("nope/nope", nil); e.Code != codeMethodNotFound {
		t.Errorf("unknown method: %+v", e)
	}
	for line, want := range map[string]string{
		`{"jsonrpc":"2.0","id":1,`:                   `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`: `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Batch requests are not supported"}}`,
		`{"jsonrpc":"2.0","id":9}`:                   `{"jsonrpc":"2.0","id":9,"error":{"code":-32600,"message":"Invalid Request: no method"}}`,
	} {
		c.send(line)
		if got := c.recv(); got != want {
			t.Errorf("%s: got %s, want %s", line, got, want)
		}
	}
	// A response from the client, and blank lines, are not answered.
	c.send(`{"jsonrpc":"2.0","id":5,"result":{}}`)
	c.send("   ")
	c.request("ping", nil)
	if !strings.Contains(c.stderr.String(), `received method="ping" id=`) {
		t.Errorf("stderr chatter missing: %q", c.stderr.String())
	}
}

func TestFastMode(t *testing.T) {
	c := startServer(t, "-fast")
	var tools struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	c.result("tools/list", nil, &tools)
	if len(tools.Tools) != 1 || tools.Tools[0].Name != "echo" {
		t.Errorf("tools/list: %+v", tools)
	}
	if m := c.request("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"a": 1}}); string(m.Result) != `{"content":[{"type":"text","text":"ok"}]}` {
		t.Errorf("echo: %s", m.raw)
	}
	if e := c.rpcErr("prompts/list", nil); e.Code != codeMethodNotFound {
		t.Errorf("prompts/list: %+v", e)
	}
	c.send(`not json`)
	if m := c.recvMessage(); m.Error == nil || m.Error.Code != codeParseError {
		t.Errorf("parse error: %s", m.raw)
	}
}

func TestCPUProfile(t *testing.T) {
	path := t.TempDir() + "/cpu.pprof"
	err := run(context.Background(), []string{"misbehave", "-fast", "-cpuprofile", path},
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Errorf("CPU profile: %v, %v", fi, err)
	}
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"-h"}, 0},
		{[]string{"-no-such-flag"}, 2},
		{[]string{"-page", "-1"}, 2},
		{[]string{"positional"}, 2},
		{[]string{"-http-addr-file", "x"}, 2},
		{[]string{"-http", "127.0.0.1:0", "-http-keepalive", "0s"}, 2},
	} {
		var stderr lockedBuffer
		err := run(context.Background(), append([]string{"misbehave"}, tc.args...), strings.NewReader(""), io.Discard, &stderr)
		var exit *exitError
		if !errors.As(err, &exit) || exit.code != tc.code {
			t.Errorf("%v: run = %v, want exit status %d", tc.args, err, tc.code)
		}
	}
}

// TestProcess runs the test binary as the server, to check what only a
// real process shows: exit statuses and a real stdin.
func TestProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, tc := range []struct {
		name   string
		args   []string
		input  string
		status int
		stdout string
		stderr string
	}{
		{"eof", nil, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 0, `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n", ""},
		{"crash", nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"crash"}}`, 3, "", "crashing now"},
		{"exit-after", []string{"-exit-after", "1"}, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 4, `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n", "exiting after 1"},
		{"bad flag", []string{"-bogus"}, "", 2, "", "bogus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], tc.args...)
			cmd.Env = append(os.Environ(), "MISBEHAVE_AS_SERVER=1")
			// Keep stdin open after the input, as a client would, so that
			// only the server's own decision ends it; Wait closes it.
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// The server may exit before reading: ignore write errors.
			_, _ = io.WriteString(stdin, tc.input+"\n")
			if tc.status == 0 {
				stdin.Close()
			}
			err = cmd.Wait()
			status := 0
			var exitErr *exec.ExitError
			if errors.As(err, &exitErr) {
				status = exitErr.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if status != tc.status || stdout.String() != tc.stdout || !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("status %d, stdout %q, stderr %q; want %d, %q, containing %q",
					status, stdout.String(), stderr.String(), tc.status, tc.stdout, tc.stderr)
			}
		})
	}
}

func BenchmarkFastEcho(b *testing.B) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), []string{"misbehave", "-fast"}, inR, outW, io.Discard)
		outW.Close()
	}()
	br := bufio.NewReader(outR)
	req := []byte(`{"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}` + "\n")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := inW.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := br.ReadSlice('\n'); err != nil {
			b.Fatal(err)
		}
	}
	inW.Close()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

func TestEchoMeta(t *testing.T) {
	c := startServer(t, "-echo-meta")
	meta := `{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","progressToken":1}`
	var r toolResultWire
	c.result("tools/call", map[string]any{"name": "echo_meta", "_meta": json.RawMessage(meta)}, &r)
	if string(r.StructuredContent) != meta {
		t.Errorf("echo_meta: %s, want %s", r.StructuredContent, meta)
	}
	c.result("tools/call", map[string]any{"name": "echo_meta"}, &r)
	if string(r.StructuredContent) != `{}` {
		t.Errorf("echo_meta without _meta: %s", r.StructuredContent)
	}
	plain := startServer(t)
	if e := plain.rpcErr("tools/call", map[string]any{"name": "echo_meta"}); e.Code != codeInvalidParams {
		t.Errorf("echo_meta without -echo-meta: %+v", e)
	}
}
