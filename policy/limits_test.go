package policy

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/mcp-proxy/mcp-proxy/principal"
)

func TestLimiterCombinesAndRefusesAtomically(t *testing.T) {
	l, err := NewLimiter([]Limit{
		{Name: "global", Rate: rate.Limit(1), Burst: 3},
		{Name: "per-principal", Rate: rate.Limit(1), Burst: 1, Per: []string{"principal"}, Upstreams: []string{"fs"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fs := &Item{Kind: KindTool, Name: "fs__read", Upstream: "fs"}
	gh := &Item{Kind: KindTool, Name: "gh__issue", Upstream: "gh"}
	if _, ref := l.Admit(alice, fs); ref != nil {
		t.Fatalf("first call refused: %+v", ref)
	}
	// alice's per-principal bucket is empty: refused, and the global token is given back.
	ref := func() *Refusal { _, r := l.Admit(alice, fs); return r }()
	if ref == nil || ref.Limit != "per-principal" || ref.RetryAfter <= 0 || ref.RetryAfter > time.Second {
		t.Fatalf("second call: %+v", ref)
	}
	// bob has his own bucket; gh is not under the per-principal limit. Global has 2 left.
	if _, r := l.Admit(bob, fs); r != nil {
		t.Fatalf("bob refused: %+v", r)
	}
	if _, r := l.Admit(alice, gh); r != nil {
		t.Fatalf("gh refused: %+v (the refused call must not have taken a global token)", r)
	}
	if _, r := l.Admit(bob, gh); r == nil || r.Limit != "global" {
		t.Fatalf("global bucket should be empty now: %+v", r)
	}
}

func TestLimiterInFlightCap(t *testing.T) {
	l, err := NewLimiter(nil, map[string]int{"fs": 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fs := &Item{Kind: KindTool, Name: "fs__read", Upstream: "fs"}
	r1, ref1 := l.Admit(alice, fs)
	r2, ref2 := l.Admit(bob, fs)
	if ref1 != nil || ref2 != nil {
		t.Fatal("under the cap refused")
	}
	if _, ref := l.Admit(alice, fs); ref == nil || ref.Limit != "max_in_flight" {
		t.Fatalf("third in flight: %+v", ref)
	}
	r1()
	r1() // releasing twice gives back one slot only
	if _, ref := l.Admit(alice, fs); ref != nil {
		t.Fatalf("after a release: %+v", ref)
	}
	if _, ref := l.Admit(alice, fs); ref == nil {
		t.Fatal("a double release made room for two")
	}
	r2()
}

func TestLimiterEvictsIdleKeys(t *testing.T) {
	l, err := NewLimiter([]Limit{{Name: "pp", Rate: rate.Limit(100), Burst: 10, Per: []string{"principal"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.maxKeys = 1000
	it := &Item{Kind: KindTool, Name: "x", Upstream: "u"}
	for i := 0; i < 5000; i++ {
		release, _ := l.Admit(&principal.Principal{Name: "p" + string(rune('a'+i%26)) + strings.Repeat("x", i%200)}, it)
		if release != nil {
			release()
		}
	}
	if n := l.Buckets(); n > l.maxKeys {
		t.Errorf("%d buckets, cap %d", n, l.maxKeys)
	}
	l.mu.Lock()
	l.evictLocked(time.Now().Add(time.Hour), false) // an hour later everything is idle
	l.mu.Unlock()
	if n := l.Buckets(); n != 0 {
		t.Errorf("%d buckets left after they all went idle", n)
	}
}

func TestAuditRecords(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	a, err := NewAuditor(AuditOptions{File: path, Arguments: "full", Redact: []string{"password", "Token"}}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	rec := &Record{Time: time.Unix(0, 0).UTC(), Principal: "alice", Method: "tools/call", Decision: "allow", Rule: "r", Outcome: OutcomeOK}
	a.arguments(rec, json.RawMessage(`{"user":"a","password":"p","nested":{"token":"t","keep":1},"list":[{"PASSWORD":"x"}]}`))
	a.Write(rec)
	h, _ := NewAuditor(AuditOptions{File: path}, zerolog.Nop())
	rec2 := &Record{Principal: "bob", Decision: "deny", Outcome: OutcomeDenied}
	h.arguments(rec2, json.RawMessage(`{"password":"p"}`))
	h.Write(rec2)
	a.Close()
	h.Close()

	f, _ := os.Open(path)
	defer f.Close()
	var lines []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines: %v", len(lines), lines)
	}
	if strings.Contains(lines[0], `"principal":"bob"`) { // two auditors, two writers: any order
		lines[0], lines[1] = lines[1], lines[0]
	}
	if strings.Contains(lines[0], `"p"`) || strings.Contains(lines[0], `"t"`) || strings.Contains(lines[0], `"x"`) ||
		!strings.Contains(lines[0], `"keep":1`) || !strings.Contains(lines[0], `[redacted]`) {
		t.Errorf("redaction: %s", lines[0])
	}
	if !strings.Contains(lines[1], `"args_sha256":"`) || strings.Contains(lines[1], "password") {
		t.Errorf("hash mode: %s", lines[1])
	}
	if _, err := NewAuditor(AuditOptions{Arguments: "all"}, zerolog.Nop()); err == nil {
		t.Error("bad arguments mode accepted")
	}
}

// TestLimiterByEndpoint: a limit that names endpoints applies to the calls through them
// only ("default": through none), and per = ["endpoint", ...] keeps a bucket per
// endpoint: calls through one do not spend another's.
func TestLimiterByEndpoint(t *testing.T) {
	l, err := NewLimiter([]Limit{
		{Name: "ide", Rate: rate.Limit(0.001), Burst: 1, Endpoints: []string{"ide"}, Per: []string{"principal"}},
		{Name: "each-endpoint", Rate: rate.Limit(0.001), Burst: 2, Endpoints: []string{"ops*", DefaultEndpoint}, Per: []string{"endpoint"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	call := func(p *principal.Principal, endpoint string) string {
		_, ref := l.Admit(p, &Item{Kind: KindTool, Name: "fs__read", Upstream: "fs", Endpoint: endpoint})
		if ref == nil {
			return "ok"
		}
		return ref.Limit
	}
	for i, c := range []struct {
		p        *principal.Principal
		endpoint string
		want     string
	}{
		{alice, "ide", "ok"},
		{alice, "ide", "ide"}, // alice's bucket of ide is empty
		{bob, "ide", "ok"},    // bob has his own
		{alice, "ops", "ok"},  // ops: its own bucket of two, shared by everyone
		{bob, "ops", "ok"},
		{alice, "ops", "each-endpoint"},
		{alice, "ops-eu", "ok"}, // another endpoint the pattern names: another bucket
		{alice, "", "ok"},       // the default face: its own bucket too
		{bob, "", "ok"},
		{alice, "", "each-endpoint"},
		{alice, "review", "ok"}, // an endpoint no limit names: no limit
		{alice, "review", "ok"},
	} {
		if got := call(c.p, c.endpoint); got != c.want {
			t.Errorf("call %d, %s through %q: %s, want %s", i, c.p.Name, c.endpoint, got, c.want)
		}
	}
	if _, err := NewLimiter([]Limit{{Name: "x", Rate: 1, Burst: 1, Per: []string{"session"}}}, nil); err == nil ||
		!strings.Contains(err.Error(), "principal, upstream, tool or endpoint") {
		t.Errorf("an unknown per key: %v", err)
	}
	if _, err := NewLimiter([]Limit{{Name: "x", Rate: 1, Burst: 1, Endpoints: []string{"a\\"}}}, nil); err == nil {
		t.Error("a bad endpoint pattern was accepted")
	}
}
