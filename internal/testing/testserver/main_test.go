package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMain lets the test binary act as the server, for the tests that need
// a real process (exit statuses).
func TestMain(m *testing.M) {
	if os.Getenv("MISBEHAVE_AS_SERVER") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const testTimeout = 10 * time.Second

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testClient drives run in-process over pipes.
type testClient struct {
	t      *testing.T
	stdin  *io.PipeWriter
	lines  chan string // stdout, one line each; closed when run has returned
	done   chan error  // run's result
	stderr *lockedBuffer
	nextID int

	finished bool
	err      error // run's result, once finished
}

func startServer(t *testing.T, args ...string) *testClient {
	t.Helper()
	return startServerContext(t, context.Background(), args...)
}

func startServerContext(t *testing.T, ctx context.Context, args ...string) *testClient {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &testClient{
		t:      t,
		stdin:  inW,
		lines:  make(chan string, 64),
		done:   make(chan error, 1),
		stderr: &lockedBuffer{},
	}
	go func() {
		err := run(ctx, append([]string{"misbehave"}, args...), inR, outW, c.stderr)
		outW.Close()
		c.done <- err
	}()
	go func() {
		defer close(c.lines)
		br := bufio.NewReader(outR)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				c.lines <- strings.TrimSuffix(line, "\n")
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { c.wait() })
	return c
}

// send writes one line to the server.
func (c *testClient) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		c.t.Fatalf("writing to server: %v", err)
	}
}

// recv returns the next line of stdout.
func (c *testClient) recv() string {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			c.t.Fatal("server closed stdout")
		}
		return line
	case <-time.After(testTimeout):
		c.t.Fatal("timed out waiting for a line from the server")
		return ""
	}
}

type wireError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

type message struct {
	raw     string
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *wireError      `json:"error"`
	JSONRPC string          `json:"jsonrpc"`
}

// recvMessage returns the next line, which must be a JSON-RPC message.
func (c *testClient) recvMessage() *message {
	c.t.Helper()
	line := c.recv()
	m := &message{raw: line}
	if err := json.Unmarshal([]byte(line), m); err != nil {
		c.t.Fatalf("server wrote a line that is not JSON: %q: %v", line, err)
	}
	if m.JSONRPC != "2.0" {
		c.t.Fatalf("jsonrpc = %q in %s", m.JSONRPC, line)
	}
	return m
}

// request sends a request with a fresh numeric id and returns its response,
// skipping notifications.
func (c *testClient) request(method string, params any) *message {
	c.t.Helper()
	c.nextID++
	id := fmt.Sprint(c.nextID)
	req := map[string]any{"jsonrpc": "2.0", "id": c.nextID, "method": method}
	if params != nil {
		req["params"] = params
	}
	b, err := json.Marshal(req)
	if err != nil {
		c.t.Fatal(err)
	}
	c.send(string(b))
	for {
		m := c.recvMessage()
		if m.Method != "" {
			continue
		}
		if string(m.ID) != id {
			c.t.Fatalf("response id = %s, want %s: %s", m.ID, id, m.raw)
		}
		return m
	}
}

// result sends a request and decodes its successful result into v.
func (c *testClient) result(method string, params, v any) {
	c.t.Helper()
	m := c.request(method, params)
	if m.Error != nil {
		c.t.Fatalf("%s: error %d %s", method, m.Error.Code, m.Error.Message)
	}
	if err := json.Unmarshal(m.Result, v); err != nil {
		c.t.Fatalf("%s: decoding result %s: %v", method, m.Result, err)
	}
}

// rpcErr sends a request that must fail and returns the error.
func (c *testClient) rpcErr(method string, params any) *wireError {
	c.t.Helper()
	m := c.request(method, params)
	if m.Error == nil {
		c.t.Fatalf("%s: got result %s, want an error", method, m.Result)
	}
	return m.Error
}

// wait closes stdin, waits for run to return and returns its error and the
// lines written meanwhile.
func (c *testClient) wait() (error, []string) {
	c.t.Helper()
	c.stdin.Close()
	return c.collect()
}

// collect waits for run to return on its own.
func (c *testClient) collect() (error, []string) {
	c.t.Helper()
	var rest []string
	deadline := time.After(testTimeout)
	for lines := c.lines; lines != nil || !c.finished; {
		select {
		case line, ok := <-lines:
			if !ok {
				lines = nil
				continue
			}
			rest = append(rest, line)
		case err := <-c.done:
			c.finished, c.err = true, err
		case <-deadline:
			c.t.Fatal("timed out waiting for the server to return")
		}
	}
	return c.err, rest
}

type toolResultWire struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
	Meta              json.RawMessage `json:"_meta"`
}

func (c *testClient) callTool(name string, args any) *toolResultWire {
	c.t.Helper()
	params := map[string]any{"name": name}
	if args != nil {
		params["arguments"] = args
	}
	var r toolResultWire
	c.result("tools/call", params, &r)
	return &r
}

func (r *toolResultWire) text(t *testing.T) string {
	t.Helper()
	if len(r.Content) != 1 || r.Content[0].Type != "text" {
		t.Fatalf("content = %+v, want one text", r.Content)
	}
	return r.Content[0].Text
}

func TestInitializeVersion(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		requested any
		want      string
	}{
		{"2024-11-05", nil, "2024-11-05", "2024-11-05"},
		{"2025-03-26", nil, "2025-03-26", "2025-03-26"},
		{"2025-06-18", nil, "2025-06-18", "2025-06-18"},
		{"2025-11-25", nil, "2025-11-25", "2025-11-25"},
		{"unknown falls back", nil, "1999-01-01", "2025-11-25"},
		{"missing falls back", nil, nil, "2025-11-25"},
		{"forced", []string{"-version", "1999-01-01"}, "2025-06-18", "1999-01-01"},
	}
	for _, fast := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("fast=%v/%s", fast, tt.name), func(t *testing.T) {
				args := tt.args
				if fast {
					args = append(args, "-fast")
				}
				c := startServer(t, args...)
				params := map[string]any{"capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}
				if tt.requested != nil {
					params["protocolVersion"] = tt.requested
				}
				var res struct {
					ProtocolVersion string `json:"protocolVersion"`
				}
				c.result("initialize", params, &res)
				if res.ProtocolVersion != tt.want {
					t.Errorf("protocolVersion = %q, want %q", res.ProtocolVersion, tt.want)
				}
			})
		}
	}
}

func TestInitializeResult(t *testing.T) {
	c := startServer(t, "-name", "alpha")
	m := c.request("initialize", map[string]any{"protocolVersion": "2025-06-18"})
	want := `{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":true},"prompts":{},"resources":{"subscribe":false},"logging":{}},"serverInfo":{"name":"alpha","version":"1.0.0"}}`
	if string(m.Result) != want {
		t.Errorf("result =\n%s\nwant\n%s", m.Result, want)
	}

	c = startServer(t, "-instructions", "Use <echo> & friends.")
	var res struct {
		Instructions string `json:"instructions"`
	}
	c.result("initialize", map[string]any{"protocolVersion": "2025-06-18"}, &res)
	if res.Instructions != "Use <echo> & friends." {
		t.Errorf("instructions = %q", res.Instructions)
	}
}

func TestIDsCopiedVerbatim(t *testing.T) {
	ids := []string{`7`, `0`, `-3`, `1e3`, `12345678901234567890123`, `"abc"`, `""`, `"<\u00e9>"`, `null`}
	for _, fast := range []bool{false, true} {
		c := startServer(t, map[bool]string{false: "-name=full", true: "-fast"}[fast])
		for _, id := range ids {
			c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`)
			line := c.recv()
			want := `{"jsonrpc":"2.0","id":` + id + `,"result":{}}`
			if line != want {
				t.Errorf("fast=%v: got %s, want %s", fast, line, want)
			}
		}
	}
}

// listAllTools follows nextCursor to the end and returns the names and the
// number of pages.
func listAllTools(t *testing.T, c *testClient, pageSize int) ([]string, int) {
	t.Helper()
	var names []string
	var params any
	for pages := 1; ; pages++ {
		var res struct {
			Tools []struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
			NextCursor *string `json:"nextCursor"`
		}
		c.result("tools/list", params, &res)
		if pageSize > 0 && len(res.Tools) > pageSize {
			t.Fatalf("page %d has %d tools, want at most %d", pages, len(res.Tools), pageSize)
		}
		for _, tool := range res.Tools {
			var schema struct {
				Type string `json:"type"`
			}
			if err := json.Unmarshal(tool.InputSchema, &schema); err != nil || schema.Type != "object" || tool.Description == "" {
				t.Errorf("tool %q: description %q, inputSchema %s", tool.Name, tool.Description, tool.InputSchema)
			}
			names = append(names, tool.Name)
		}
		if res.NextCursor == nil {
			return names, pages
		}
		if pages > 1000 {
			t.Fatal("too many pages")
		}
		params = map[string]any{"cursor": *res.NextCursor}
	}
}

func TestToolsPagination(t *testing.T) {
	const builtins = 11
	c := startServer(t, "-extra-tools", "25", "-page", "7", "-dup", "shared")
	names, pages := listAllTools(t, c, 7)
	total := builtins + 1 + 25
	if len(names) != total {
		t.Fatalf("got %d tools, want %d: %v", len(names), total, names)
	}
	if want := (total + 6) / 7; pages != want {
		t.Errorf("got %d pages, want %d", pages, want)
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("tool %q listed twice", n)
		}
		seen[n] = true
	}
	for _, n := range []string{"echo", "slow", "crash", "big", "fail", "garbage", "env", "cwd", "shared", "t0001", "t0025", longToolName, veryLongToolName} {
		if !seen[n] {
			t.Errorf("tool %q not listed", n)
		}
	}
	if len(longToolName) != 70 || len(veryLongToolName) != 140 {
		t.Errorf("long names have lengths %d and %d", len(longToolName), len(veryLongToolName))
	}

	for _, cursor := range []string{
		"not base64!",
		base64.RawURLEncoding.EncodeToString([]byte("offset=999")),
		base64.RawURLEncoding.EncodeToString([]byte("offset=-1")),
		base64.RawURLEncoding.EncodeToString([]byte("page=1")),
	} {
		if e := c.rpcErr("tools/list", map[string]any{"cursor": cursor}); e.Code != codeInvalidParams {
			t.Errorf("cursor %q: code %d, want %d", cursor, e.Code, codeInvalidParams)
		}
	}

	c = startServer(t, "-extra-tools", "25")
	names, pages = listAllTools(t, c, 0)
	if len(names) != builtins+25 || pages != 1 {
		t.Errorf("without -page: %d tools in %d pages, want %d in 1", len(names), pages, builtins+25)
	}
}

func TestEchoPassThrough(t *testing.T) {
	const args = `{"s":"<tag> & \u00e9 \"q\"","big":12345678901234567890,"f":1.50,"nested":{"a":[true,null,{}]}}`
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(args)); err != nil {
		t.Fatal(err)
	}
	c := startServer(t, "-name", "srv", "-dup", "twin")
	for _, tc := range []struct{ tool, prefix string }{
		{"echo", ""},
		{longToolName, ""},
		{veryLongToolName, ""},
		{"twin", "from srv: "},
	} {
		c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tc.tool + `","arguments":` + args + `}}`)
		line := c.recv()
		if strings.Contains(line, `\u003c`) || strings.Contains(line, `\u0026`) {
			t.Errorf("%s: HTML-escaped output: %s", tc.tool, line)
		}
		var m struct {
			Result toolResultWire `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s: %v: %s", tc.tool, err, line)
		}
		r := &m.Result
		if got := r.text(t); got != tc.prefix+compact.String() {
			t.Errorf("%s: text = %s, want %s", tc.tool, got, tc.prefix+compact.String())
		}
		if string(r.StructuredContent) != compact.String() {
			t.Errorf("%s: structuredContent = %s, want %s", tc.tool, r.StructuredContent, compact.String())
		}
		if string(r.Meta) != `{"dev.test/echo":true}` {
			t.Errorf("%s: _meta = %s", tc.tool, r.Meta)
		}
	}

	if r := c.callTool("echo", nil); r.text(t) != "{}" || string(r.StructuredContent) != "{}" {
		t.Errorf("echo without arguments: %+v", r)
	}
	if r := c.callTool("echo", []int{1}); !r.IsError {
		t.Errorf("echo with array arguments: %+v, want a tool error", r)
	}
}

func TestUnknownTool(t *testing.T) {
	for _, args := range [][]string{nil, {"-fast"}} {
		c := startServer(t, args...)
		e := c.rpcErr("tools/call", map[string]any{"name": "nope", "arguments": map[string]any{}})
		if e.Code != codeInvalidParams || e.Message != "Unknown tool: nope" {
			t.Errorf("%v: error = %d %q", args, e.Code, e.Message)
		}
	}
}

func TestInitializedNotification(t *testing.T) {
	const initialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	for _, fast := range []string{"-fast=false", "-fast"} {
		c := startServer(t, fast, "-initialized-error")
		c.send(initialized)
		want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"notifications are not requests"}}`
		if got := c.recv(); got != want {
			t.Errorf("%s: got %s, want %s", fast, got, want)
		}

		c = startServer(t, fast)
		c.send(initialized)
		c.send(`{"jsonrpc":"2.0","method":"notifications/whatever"}`)
		if m := c.request("ping", nil); string(m.Result) != "{}" {
			t.Errorf("%s: ping after notifications: %s", fast, m.raw)
		}
	}
}

func TestGarbage(t *testing.T) {
	c := startServer(t)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"garbage"}}`)
	for _, want := range []string{`this is not json`, `{"jsonrpc":"2.0","id":`} {
		if got := c.recv(); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	m := c.recvMessage()
	var r toolResultWire
	if err := json.Unmarshal(m.Result, &r); err != nil || r.text(t) != "after garbage" {
		t.Errorf("response after garbage: %s", m.raw)
	}
}

func TestBanner(t *testing.T) {
	c := startServer(t, "-banner")
	if got := c.recv(); got != bannerLine {
		t.Errorf("first line = %q, want the banner", got)
	}
	c.request("ping", nil)
	if !strings.Contains(c.stderr.String(), "starting") {
		t.Errorf("stderr = %q, want a start line", c.stderr.String())
	}
}
