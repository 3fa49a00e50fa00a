package e2e

import (
	"bufio"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden conversations in testdata/golden with what the proxy says now")

// TestGoldenConversations replays recorded JSON-RPC conversations (testdata/golden/*.txt:
// "> " lines are sent by the client, "< " lines are what the proxy must answer, in order)
// against the proxy in front of the test server. They pin the rewriting rules byte for
// byte: exposed names, exact ids, restored progress tokens, error shapes, batches, the
// modern era's additions. Regenerate with: go test ./e2e -run Golden -update
func TestGoldenConversations(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden conversations: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			t.Parallel()
			replay(t, file)
		})
	}
}

// volatile parts of a line: values the proxy derives from per-process random keys.
var volatile = regexp.MustCompile(`"(nextCursor|requestState)":"[^"]*"`)

func normalize(line string) string { return volatile.ReplaceAllString(line, `"$1":"<opaque>"`) }

func replay(t *testing.T, file string) {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	f.Close()

	cfg := writeConfig(t, `proxy { name = "golden" }
`+testUpstream("t", "t", []string{"-name", "t"}, "")+
		testUpstream("dup", "", []string{"-name", "dup", "-dup", "t__echo"}, ""))
	rc := startRaw(t, cfg)

	var out []string // the conversation as replayed (for -update)
	var expected []string
	flush := func() {}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if !strings.HasPrefix(line, "> ") {
			if !strings.HasPrefix(line, "< ") {
				out = append(out, line) // comments and blank lines are kept
			}
			continue
		}
		flush()
		msg := strings.TrimPrefix(line, "> ")
		out = append(out, line)
		expected = expected[:0]
		for j := i + 1; j < len(lines) && strings.HasPrefix(lines[j], "< "); j++ {
			expected = append(expected, strings.TrimPrefix(lines[j], "< "))
		}
		rc.send(msg)
		got := collect(t, rc, msg)
		for _, g := range got {
			out = append(out, "< "+g)
		}
		if !*update {
			if len(got) != len(expected) {
				t.Errorf("after %s\n got %d lines:\n%s\nwant %d lines:\n%s", msg, len(got), strings.Join(got, "\n"), len(expected), strings.Join(expected, "\n"))
				continue
			}
			for k := range got {
				if normalize(got[k]) != normalize(expected[k]) {
					t.Errorf("after %s\n got %s\nwant %s", msg, got[k], expected[k])
				}
			}
		}
	}
	if *update {
		if err := os.WriteFile(file, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// collect reads what the proxy says in answer to msg: for a request (or batch), every
// line up to and including its response; for a notification, whatever comes within a
// short quiet period.
func collect(t *testing.T, rc *rawClient, msg string) []string {
	var probe struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	isBatch := strings.HasPrefix(msg, "[")
	expectID := ""
	if !isBatch && json.Unmarshal([]byte(msg), &probe) == nil && len(probe.ID) > 0 && string(probe.ID) != "null" {
		expectID = string(probe.ID)
	}
	var got []string
	if expectID == "" && !isBatch && json.Valid([]byte(msg)) {
		// A notification: nothing, or what it triggers, within a quiet period.
		for {
			select {
			case l := <-rc.lines:
				got = append(got, string(l))
			case <-time.After(300 * time.Millisecond):
				return got
			}
		}
	}
	for {
		l := rc.next(30 * time.Second)
		got = append(got, string(l))
		if isBatch || !json.Valid([]byte(msg)) {
			return got // the batch's array, or the parse error
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(l, &m) == nil && m.Method == "" && (string(m.ID) == expectID || string(m.ID) == "null") {
			return got
		}
	}
}
