package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// The test binary doubles as an upstream server, selected by UPSTREAM_TEST_SERVER.
func TestMain(m *testing.M) {
	if mode := os.Getenv("UPSTREAM_TEST_SERVER"); mode != "" {
		os.Exit(fakeServer(mode))
	}
	os.Exit(m.Run())
}

// fakeServer is a minimal MCP server on stdin/stdout. It starts reading its stdin only
// after UPSTREAM_TEST_DELAY, and appends a start line and then every line it reads to
// UPSTREAM_TEST_RECORD. Modes:
//   - "dual" speaks both eras and, like the Go SDK's servers, refuses initialize after
//     server/discover (a duplicate handshake);
//   - "silent" is legacy and leaves every request before initialize unanswered, as some
//     legacy servers do.
func fakeServer(mode string) int {
	rec, err := os.OpenFile(os.Getenv("UPSTREAM_TEST_RECORD"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer rec.Close()
	fmt.Fprintf(rec, "{\"start\":%d}\n", os.Getpid())
	if d, err := time.ParseDuration(os.Getenv("UPSTREAM_TEST_DELAY")); err == nil {
		time.Sleep(d) // starting slowly, as npx, go run or a JVM do
	}
	out := bufio.NewWriter(os.Stdout)
	reply := func(id json.RawMessage, result string) {
		fmt.Fprintf(out, "{\"jsonrpc\":\"2.0\",\"id\":%s,%s}\n", id, result)
		out.Flush()
	}
	handshaken := false
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		rec.Write(append(bytes.Clone(line), '\n'))
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 {
			continue // notifications need no answer
		}
		switch {
		case m.Method == "server/discover" && mode == "dual":
			handshaken = true
			reply(m.ID, `"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}}}`)
		case m.Method == "initialize" && handshaken:
			reply(m.ID, `"error":{"code":0,"message":"duplicate \"initialize\" received"}`)
		case m.Method == "initialize":
			handshaken = true
			reply(m.ID, `"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`)
		case !handshaken && mode == "silent":
			// Not answered: "received request before initialization was complete".
		case m.Method == "tools/list":
			reply(m.ID, `"result":{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)
		case m.Method == "subscriptions/listen":
			// Open for the connection's life.
		default:
			reply(m.ID, `"error":{"code":-32601,"message":"Method not found"}`)
		}
	}
	return 0
}

// nopEvents ignores what an upstream reports.
type nopEvents struct{}

func (nopEvents) Changed(*Upstream, Kinds)                 {}
func (nopEvents) Notification(*Upstream, *jsonrpc.Message) {}
func (nopEvents) Hold() func()                             { return func() {} }
func (nopEvents) Request(context.Context, *Upstream, *jsonrpc.Message) (json.RawMessage, *jsonrpc.Error) {
	return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "no client")
}

var _ Events = nopEvents{}

// lockedBuffer is a log destination shared by the upstream's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
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

// startFake starts an upstream with protocol "auto" on the fake server and waits for
// its first start attempt; it returns the upstream (closed when the test ends), the
// attempt's error, and the record of what each process received, one slice of methods
// per process ("" for a response).
func startFake(t *testing.T, mode string, delay, probe time.Duration) (*Upstream, error, func() [][]string) {
	t.Helper()
	rec := filepath.Join(t.TempDir(), "input.jsonl")
	logs := &lockedBuffer{}
	u := New(Spec{
		Name:    "fake",
		Command: []string{os.Args[0]},
		Env: map[string]string{"UPSTREAM_TEST_SERVER": mode, "UPSTREAM_TEST_RECORD": rec, "UPSTREAM_TEST_DELAY": delay.String(),
			"GORACE": "atexit_sleep_ms=0"}, // a -race binary otherwise lingers 1s at exit
		StartupTimeout: 60 * time.Second,
		StopGrace:      time.Second,
		Protocol:       ProtocolAuto,
		ClientName:     "test",
		ClientVersion:  "1",
	}, zerolog.New(logs), nopEvents{})
	u.probeTimeout = probe
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	u.Start(context.Background())
	t.Cleanup(func() {
		u.Close()
		if t.Failed() {
			t.Logf("upstream log:\n%s", logs)
		}
	})
	err := u.WaitFirstAttempt(ctx)
	record := func() [][]string {
		t.Helper()
		u.Close() // the processes are gone, their records whole
		b, err := os.ReadFile(rec)
		if err != nil {
			t.Fatal(err)
		}
		var procs [][]string
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var m struct {
				Start  int    `json:"start"`
				Method string `json:"method"`
			}
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("recorded line %q: %v", line, err)
			}
			if m.Start != 0 {
				procs = append(procs, nil)
				continue
			}
			procs[len(procs)-1] = append(procs[len(procs)-1], m.Method)
		}
		return procs
	}
	return u, err, record
}

// TestProbeWaitsForSlowChild: a child that reads its stdin only after the probe's timeout
// has not left the probe unanswered; its answer, however late, is used, and it receives
// no other handshake (issue 11).
func TestProbeWaitsForSlowChild(t *testing.T) {
	t.Parallel()
	// The probe's timeout is shorter than the delay, and long enough for any answer.
	u, err, record := startFake(t, "dual", 3*time.Second, 2*time.Second)
	if err != nil {
		t.Fatalf("first start: %v", err)
	}
	if info := u.Info(); !info.Modern || len(u.Catalogue().Tools) != 1 {
		t.Errorf("ready as modern=%v with %d tools; want modern with 1", info.Modern, len(u.Catalogue().Tools))
	}
	procs := record()
	if len(procs) != 1 {
		t.Fatalf("%d processes started; want 1: %q", len(procs), procs)
	}
	if got := procs[0]; len(got) < 2 || got[0] != "server/discover" || got[1] != "tools/list" {
		t.Errorf("the child received %q; want server/discover, then tools/list", got)
	}
	for _, m := range procs[0][1:] {
		if m == "server/discover" || m == "initialize" {
			t.Errorf("the child received a second handshake: %q", procs[0])
		}
	}
}

// TestUnansweredProbeRestartsChild: a child that read the probe and left it unanswered is
// replaced by a fresh process, which is offered initialize first; nothing more is sent
// to the first one.
func TestUnansweredProbeRestartsChild(t *testing.T) {
	t.Parallel()
	u, err, record := startFake(t, "silent", 0, 50*time.Millisecond)
	if err != nil {
		t.Fatalf("first start: %v", err)
	}
	if info := u.Info(); info.Modern || info.ProtocolVersion != "2025-11-25" || len(u.Catalogue().Tools) != 1 {
		t.Errorf("ready as modern=%v %q with %d tools; want legacy 2025-11-25 with 1", info.Modern, info.ProtocolVersion, len(u.Catalogue().Tools))
	}
	if !u.probeUnanswered.Load() {
		t.Errorf("the unanswered probe is not remembered for later starts")
	}
	procs := record()
	if len(procs) != 2 {
		t.Fatalf("%d processes started; want 2: %q", len(procs), procs)
	}
	if got := procs[0]; len(got) != 1 || got[0] != "server/discover" {
		t.Errorf("the first child received %q; want server/discover alone", got)
	}
	if got := procs[1]; len(got) < 2 || got[0] != "initialize" || got[1] != "notifications/initialized" {
		t.Errorf("the second child received %q; want initialize, notifications/initialized, ...", got)
	}
	for _, m := range procs[1] {
		if m == "server/discover" {
			t.Errorf("the second child was probed too: %q", procs[1])
		}
	}
}
