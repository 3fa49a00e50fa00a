package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// The test binary doubles as a child server for the supervisor's tests, selected by
// UPSTREAM_COVER_SERVER (checked before TestMain runs).
func init() {
	if mode := os.Getenv("UPSTREAM_COVER_SERVER"); mode != "" {
		os.Exit(coverServer(mode))
	}
}

// coverServer is a legacy MCP server on stdin/stdout. Modes: "exit" ends at once with
// status 5 (it never starts); "crash" serves one tool, crash, which ends the process
// with status 3 without answering (a call to any other name, echo, is answered); both
// say hello on stderr.
func coverServer(mode string) int {
	fmt.Fprintln(os.Stderr, "hello from the child")
	if mode == "exit" {
		return 5
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct{ Name string }
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || len(m.ID) == 0 {
			continue
		}
		var result string
		switch m.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"child","version":"1"}}`
		case "tools/list":
			result = `{"tools":[{"name":"crash","inputSchema":{}}]}`
		case "tools/call":
			if m.Params.Name == "echo" {
				result = `{"content":[{"type":"text","text":"echo"}]}`
				break
			}
			return 3
		default:
			fmt.Printf("{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":-32601,\"message\":\"Method not found\"}}\n", m.ID)
			continue
		}
		fmt.Printf("{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n", m.ID, result)
	}
	return 0
}

// childSpec runs the test binary as a child server in mode.
func childSpec(mode string) Spec {
	return Spec{
		Name:     "child",
		Command:  []string{os.Args[0]},
		Env:      map[string]string{"UPSTREAM_COVER_SERVER": mode, "GORACE": "atexit_sleep_ms=0"},
		Protocol: ProtocolLegacy, StartupTimeout: 30 * time.Second, StopGrace: time.Second,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 40 * time.Millisecond,
	}
}

// TestSuperviseRestartsAfterCrash: a child that exits is reported down and restarted; a
// call in flight fails with a proxy error; the child's stderr reaches the log.
func TestSuperviseRestartsAfterCrash(t *testing.T) {
	noLeaks(t)
	ev := newRecEvents()
	logs := &lockedBuffer{}
	u := New(childSpec("crash"), zerolog.New(logs), ev)
	t.Cleanup(func() {
		u.Close()
		if t.Failed() {
			t.Logf("log:\n%s", logs)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	u.Start(ctx)
	u.Start(ctx) // a second Start does nothing
	if err := u.WaitFirstAttempt(ctx); err != nil {
		t.Fatal(err)
	}
	if k := recvT(t, ev.changed); k != AllKinds {
		t.Errorf("ready: changed %v", k)
	}
	_, err := u.Call(ctx, &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"crash"}`)})
	if code := proxyCode(err); err == nil || (code != -31002 && !strings.Contains(err.Error(), "exited")) {
		t.Errorf("the call in flight when the child crashed: %v", err)
	}
	recvT(t, ev.changed) // ready again (the catalogue was kept while it restarted)
	if st, _ := u.State(); st != StateReady {
		t.Errorf("after the restart: %v", st)
	}
	// The supervisor counts a start once connect has reported it.
	for deadline := time.Now().Add(waitFor); ; time.Sleep(time.Millisecond) {
		u.mu.Lock()
		restarts := u.restarts
		u.mu.Unlock()
		if restarts == 2 {
			break
		}
		if restarts > 2 || time.Now().After(deadline) {
			t.Fatalf("%d starts, want 2", restarts)
		}
	}
	if !strings.Contains(logs.String(), "hello from the child") || !strings.Contains(logs.String(), "exit status 3") {
		t.Errorf("log lacks the child's stderr or exit status:\n%s", logs)
	}
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	if st, _ := u.State(); st != StateStopped {
		t.Errorf("after Close: %v", st)
	}
}

// TestSuperviseStartFailures: a child that never starts is retried with backoff until
// Close, and its first attempt reports why; an unreachable URL is tried as Streamable
// HTTP and then as HTTP+SSE; a closed upstream cannot be started.
func TestSuperviseStartFailures(t *testing.T) {
	noLeaks(t)
	logs := &lockedBuffer{}
	u := New(childSpec("exit"), zerolog.New(logs), newRecEvents())
	defer u.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	u.Start(ctx)
	if err := u.WaitFirstAttempt(ctx); err == nil {
		t.Fatal("a child that exits at once started")
	}
	for deadline := time.Now().Add(waitFor); strings.Count(logs.String(), "upstream failed to start") < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("not retried:\n%s", logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := u.Call(ctx, &Request{Method: "tools/list"}); err == nil || !strings.Contains(err.Error(), `upstream "child" is down`) {
		t.Errorf("a call while down: %v", err)
	}
	u.Close()
	if st, _ := u.State(); st != StateStopped {
		t.Errorf("after Close: %v", st)
	}

	web := New(Spec{Name: "web", URL: "http://127.0.0.1:1/mcp", Transport: TransportAuto, StartupTimeout: 5 * time.Second, BackoffMin: time.Hour},
		zerolog.Nop(), newRecEvents())
	defer web.Close()
	web.Start(ctx)
	if err := web.WaitFirstAttempt(ctx); err == nil || !strings.Contains(err.Error(), "neither Streamable HTTP") {
		t.Errorf("an unreachable URL: %v", err)
	}

	closed := New(childSpec("crash"), zerolog.Nop(), nil)
	closed.Close()
	closed.Start(ctx)
	if err := closed.WaitFirstAttempt(ctx); err != nil {
		t.Errorf("WaitFirstAttempt of an upstream closed before it started: %v", err)
	}
	if st, _ := closed.State(); st != StateStopped {
		t.Errorf("started after Close: %v", st)
	}
}

// TestTransportDefaultsToAuto: Spec.Transport documents auto as its default, so an
// unset Transport tries HTTP+SSE after Streamable HTTP too.
func TestTransportDefaultsToAuto(t *testing.T) {
	noLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	web := New(Spec{Name: "web", URL: "http://127.0.0.1:1/mcp", StartupTimeout: 5 * time.Second, BackoffMin: time.Hour},
		zerolog.Nop(), newRecEvents())
	defer web.Close()
	web.Start(ctx)
	if err := web.WaitFirstAttempt(ctx); err == nil || !strings.Contains(err.Error(), "neither Streamable HTTP") {
		t.Errorf("an unreachable URL with the default transport: %v", err)
	}
}
