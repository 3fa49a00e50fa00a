package policy

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// TestRefusedRecords: a request refused before routing gets an "invalid" record when it
// names a method the audit covers, with its arguments as a hash in hash and full mode
// and not at all in none mode, never as they are; without an audit trail the router is
// given no hook at all.
func TestRefusedRecords(t *testing.T) {
	if (&Chain{}).RefusalHook() != nil {
		t.Errorf("a refusal hook without an audit trail")
	}
	for _, mode := range []string{"hash", "full", "none"} {
		t.Run(mode, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			a, err := NewAuditor(AuditOptions{File: path, Arguments: mode, Redact: []string{"password"}}, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			c := &Chain{Audit: a}
			hook := c.RefusalHook()
			alice := &principal.Principal{Name: "alice"}
			args := json.RawMessage(`{"password":"s3cret","password":"other"}`)
			hook(context.Background(), &router.Refusal{Methods: []string{"ping", "tools/call"}, Principal: alice, Reason: "duplicate member", Arguments: args})
			hook(context.Background(), &router.Refusal{Methods: []string{"prompts/get"}, Reason: "prompt name is required"})
			hook(context.Background(), &router.Refusal{Methods: []string{"tools/list"}, Principal: alice, Reason: "not covered"})
			hook(context.Background(), &router.Refusal{Methods: []string{"initialize"}, Reason: "not covered"})
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(lines) != 2 || strings.Contains(string(b), "s3cret") || strings.Contains(string(b), "not covered") {
				t.Fatalf("records:\n%s", b)
			}
			var first, second Record
			if json.Unmarshal([]byte(lines[0]), &first) != nil || json.Unmarshal([]byte(lines[1]), &second) != nil {
				t.Fatalf("records:\n%s", b)
			}
			if first.Method != "tools/call" || first.Kind != "tool" || first.Principal != "alice" || first.Decision != DecisionInvalid ||
				first.Outcome != OutcomeInvalid || first.Error != "duplicate member" || first.Args != nil {
				t.Errorf("first record %+v", first)
			}
			if hashed := first.ArgsSHA256 != ""; hashed != (mode != "none") {
				t.Errorf("arguments hashed %v in mode %s", hashed, mode)
			}
			if second.Method != "prompts/get" || second.Kind != "prompt" || second.Principal != "" || second.ArgsSHA256 != "" {
				t.Errorf("second record %+v", second)
			}
		})
	}
}
