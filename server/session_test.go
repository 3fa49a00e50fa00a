package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

var testserverBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "server-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testserverBin = filepath.Join(dir, "testserver")
	cmd := exec.Command("go", "build", "-o", testserverBin, "../internal/testing/testserver")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the test server:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestSessionLeavesNothingBehind runs a whole session in-process against a real upstream
// process (calls, a cancelled call, a timed-out call, a crash and restart, a client that
// leaves mid-call) and checks that every goroutine ends once the session and the router
// are closed.
func TestSessionLeavesNothingBehind(t *testing.T) {
	base := runtime.NumGoroutine()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	r := router.New(router.Options{}, log)
	r.Add(upstream.New(upstream.Spec{
		Name: "t", Command: []string{testserverBin}, Timeout: 500 * time.Millisecond,
		BackoffMin: 10 * time.Millisecond, StopGrace: 500 * time.Millisecond,
	}, log, r.Events()), "t")
	ctx := context.Background()
	r.Start(ctx)
	srv := New(r, Options{Name: "test"}, log)

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- srv.ServeStream(ctx, inR, outW) }()
	lines := make(chan map[string]json.RawMessage, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]json.RawMessage
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
	}()
	send := func(s string) {
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]map[string]json.RawMessage{}
	await := func(id string) map[string]json.RawMessage {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			if m, ok := seen[id]; ok {
				return m
			}
			select {
			case m := <-lines:
				seen[string(m["id"])] = m
			case <-timeout:
				t.Fatalf("no response %s", id)
			}
		}
	}

	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	await("0")
	for i := 1; i <= 20; i++ {
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"t__echo","arguments":{"i":%d}}}`, i, i))
	}
	for i := 1; i <= 20; i++ {
		await(fmt.Sprint(i))
	}
	send(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"t__slow","arguments":{"ms":5000}}}`)
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c"}}`)
	send(`{"jsonrpc":"2.0","id":"to","method":"tools/call","params":{"name":"t__slow","arguments":{"ms":5000}}}`)
	if m := await(`"to"`); !strings.Contains(string(m["error"]), "-31001") {
		t.Errorf("timeout: %s", m["error"])
	}
	send(`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"t__crash"}}`)
	if m := await(`"x"`); !strings.Contains(string(m["error"]), "-31002") {
		t.Errorf("crash: %s", m["error"])
	}
	// Wait for the restart, then leave with a call in flight.
	deadline := time.Now().Add(10 * time.Second)
	for n := 0; ; n++ {
		id := fmt.Sprintf(`"r%d"`, n)
		send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"t__echo"}}`)
		if m := await(id); m["error"] == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("upstream did not restart")
		}
		time.Sleep(20 * time.Millisecond)
	}
	send(`{"jsonrpc":"2.0","id":"gone","method":"tools/call","params":{"name":"t__slow","arguments":{"ms":5000}}}`)
	time.Sleep(50 * time.Millisecond)
	inW.Close()
	if err := <-served; err != nil {
		t.Errorf("ServeStream: %v", err)
	}
	outW.Close()
	if err := r.Close(); err != nil {
		t.Errorf("router close: %v", err)
	}
	for range lines {
	}

	deadline = time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("%d goroutines left behind (started with %d):\n%s", runtime.NumGoroutine(), base, buf[:n])
		}
		time.Sleep(50 * time.Millisecond)
	}
}
