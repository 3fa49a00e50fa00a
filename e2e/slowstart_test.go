package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSlowStartingUpstream runs the tools command on an upstream that reads its stdin only
// after longer than the server/discover probe's timeout, but within startup_timeout (as
// `go run` compiling, npx downloading or a JVM starting do), under each protocol setting.
// The upstream is the Go SDK everything-server (dual-era) behind `sh -c 'sleep; tee'`:
// tee records every byte that reached the server. It must become ready, and see exactly
// one handshake message, first, and nothing sent twice (issue 11: the probe's timeout
// was taken as an answer, and initialize was queued behind the unread server/discover,
// which the server then answered with "duplicate initialize").
func TestSlowStartingUpstream(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		protocol  string
		handshake string // the one handshake message the server must see
	}{
		{"auto", "server/discover"},
		{"legacy", "initialize"},
		{"modern", "server/discover"},
	} {
		t.Run(tt.protocol, func(t *testing.T) {
			t.Parallel()
			rec := filepath.Join(t.TempDir(), "input.jsonl")
			// With startup_timeout 14s, the auto probe's timeout is 7s: an 8s sleep
			// outlasts it, and leaves 6s for the rest of the start.
			script := fmt.Sprintf("sleep 8; exec tee %s | %s", shellQuote(rec), shellQuote(everythingBin))
			cfg := writeConfig(t, fmt.Sprintf(`upstream "slow" {
  command         = ["sh", "-c", %s]
  namespace       = "slow"
  protocol        = %q
  startup_timeout = "14s"
}
`, q(script), tt.protocol))
			cmd := exec.Command(proxyBin, "tools", "--config", cfg, "--log-level", "debug")
			stderr := &syncBuffer{}
			cmd.Stderr = stderr
			out, err := cmd.Output()
			checkStderr(t, stderr)
			if err != nil || !strings.Contains(string(out), "slow__test_simple_text") {
				t.Errorf("tools: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
			}

			// The proxy has stopped the upstream before exiting, so the record is whole.
			msgs := readRecord(t, rec)
			if len(msgs) == 0 {
				t.Fatalf("the upstream received nothing\nproxy stderr:\n%s", stderr)
			}
			var methods []string
			ids := map[string]string{}
			for i, m := range msgs {
				methods = append(methods, m.Method)
				switch m.Method {
				case "initialize", "server/discover":
					if i != 0 || m.Method != tt.handshake {
						t.Errorf("message %d is %s; want only %s, first", i, m.Method, tt.handshake)
					}
				case "notifications/cancelled":
					var p struct {
						RequestID json.RawMessage `json:"requestId"`
					}
					if json.Unmarshal(m.Params, &p) == nil && string(p.RequestID) == string(msgs[0].ID) {
						t.Errorf("message %d cancels the handshake: %s", i, m.Params)
					}
				}
				if len(m.ID) > 0 && m.Method != "" {
					if prev, dup := ids[string(m.ID)]; dup {
						t.Errorf("request id %s sent twice (%s, then %s)", m.ID, prev, m.Method)
					}
					ids[string(m.ID)] = m.Method
				}
			}
			if t.Failed() {
				t.Logf("the upstream received: %v\nproxy stderr:\n%s", methods, stderr)
			}
		})
	}
}

// recorded is one message an upstream received.
type recorded struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// readRecord parses the newline-delimited JSON messages in path.
func readRecord(t *testing.T, path string) []recorded {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the upstream's input record: %v", err)
	}
	defer f.Close()
	var msgs []recorded
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var m recorded
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("the upstream received a line that is not JSON: %q", line)
		}
		msgs = append(msgs, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return msgs
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
