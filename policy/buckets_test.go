package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// TestMemoryBucketsContract checks the in-memory store against BucketStore's contract:
// a bucket starts full, a batch takes from all or none, the refusal names the first
// empty bucket and when it has a token again, a reload keeps the tokens.
func TestMemoryBucketsContract(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	a := Bucket{Key: "a", Limit: 1, Burst: 2}
	b := Bucket{Key: "b", Limit: 2, Burst: 1}
	type take struct {
		buckets []Bucket
		at      time.Duration // after t0
		refused int
		retry   time.Duration
	}
	for _, tc := range []struct {
		name  string
		takes []take
	}{
		{"starts full, then refuses until it refills", []take{
			{[]Bucket{a}, 0, -1, 0},
			{[]Bucket{a}, 0, -1, 0},
			{[]Bucket{a}, 0, 0, time.Second},
			{[]Bucket{a}, 500 * time.Millisecond, 0, 500 * time.Millisecond},
			{[]Bucket{a}, time.Second, -1, 0},
		}},
		{"a refused batch takes nothing", []take{
			{[]Bucket{b}, 0, -1, 0},                        // b is empty now
			{[]Bucket{a, b}, 0, 1, 500 * time.Millisecond}, // refused by b: a keeps both tokens
			{[]Bucket{a}, 0, -1, 0},
			{[]Bucket{a}, 0, -1, 0},
			{[]Bucket{a}, 0, 0, time.Second},
		}},
		{"the first empty bucket is named", []take{
			{[]Bucket{a, b}, 0, -1, 0},
			{[]Bucket{a, b}, 0, 1, 500 * time.Millisecond}, // a has 1, b none
			{[]Bucket{b, a}, 0, 0, 500 * time.Millisecond},
		}},
		{"a key that repeats needs a token each time", []take{
			{[]Bucket{a, a}, 0, -1, 0},
			{[]Bucket{a}, 0, 0, time.Second},
			{[]Bucket{a, a}, time.Second, 1, time.Second}, // one token back, two needed
			{[]Bucket{a}, time.Second, -1, 0},             // and the refused pair took none
		}},
		{"a reload keeps the tokens and takes the new limit", []take{
			{[]Bucket{a}, 0, -1, 0},
			{[]Bucket{a}, 0, -1, 0},
			{[]Bucket{{Key: "a", Limit: 4, Burst: 10}}, 0, 0, 250 * time.Millisecond}, // still empty
			{[]Bucket{{Key: "a", Limit: 4, Burst: 10}}, time.Second, -1, 0},           // 4 tokens a second now
			{[]Bucket{{Key: "a", Limit: 4, Burst: 10}}, time.Second, -1, 0},
		}},
		{"an empty batch is admitted", []take{{nil, 0, -1, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMemoryBuckets(0, 0)
			defer m.Close()
			for i, tk := range tc.takes {
				refused, retry, err := m.Take(context.Background(), tk.buckets, t0.Add(tk.at))
				if err != nil || refused != tk.refused || retry != tk.retry {
					t.Fatalf("take %d: refused %d, retry %v, %v; want %d, %v", i, refused, retry, err, tk.refused, tk.retry)
				}
			}
		})
	}
}

// TestMemoryBucketsEviction checks the bounds: idle buckets go, and at the key cap the
// least recently used make room.
func TestMemoryBucketsEviction(t *testing.T) {
	m := NewMemoryBuckets(time.Minute, 100)
	defer m.Close()
	t0 := time.Unix(1_000_000, 0)
	for i := range 1000 {
		key := "k" + strings.Repeat("x", i%50) + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if r, _, _ := m.Take(context.Background(), []Bucket{{Key: key, Limit: 1, Burst: 1}}, t0.Add(time.Duration(i)*time.Millisecond)); r != -1 {
			t.Fatalf("a new key was refused")
		}
	}
	if n := m.Len(); n > 100 || n == 0 {
		t.Errorf("%d buckets, cap 100", n)
	}
	m.mu.Lock()
	m.evictLocked(t0.Add(time.Hour), false)
	m.mu.Unlock()
	if n := m.Len(); n != 0 {
		t.Errorf("%d buckets left after they all went idle", n)
	}
	m.Close()
	m.Close() // twice is fine, and Take goes on working without the sweeper
	if r, _, err := m.Take(context.Background(), []Bucket{{Key: "z", Limit: 1, Burst: 1}}, t0); r != -1 || err != nil {
		t.Errorf("take after Close: %d %v", r, err)
	}
}

// recordingStore is a BucketStore that records what the limiter asks and answers as
// told.
type recordingStore struct {
	mu      sync.Mutex
	batches [][]Bucket
	refused int
	retry   time.Duration
	err     error
}

var _ BucketStore = (*recordingStore)(nil)

func (s *recordingStore) Take(_ context.Context, buckets []Bucket, _ time.Time) (int, time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, append([]Bucket(nil), buckets...))
	return s.refused, s.retry, s.err
}

func (s *recordingStore) calls() [][]Bucket {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.batches
}

// TestLimiterThroughStore checks what the limiter asks of a store it is given: one
// batch per call with a bucket per limit that applies, and what it makes of the answer.
func TestLimiterThroughStore(t *testing.T) {
	limits := []Limit{
		{Name: "global", Rate: 5, Burst: 10},
		{Name: "per-principal-tool", Rate: 1, Burst: 2, Per: []string{"principal", "tool"}, Upstreams: []string{"fs"}},
	}
	fs := &Item{Kind: KindTool, Name: "fs__read", Upstream: "fs"}
	gh := &Item{Kind: KindTool, Name: "gh__issue", Upstream: "gh"}

	st := &recordingStore{refused: -1}
	l, err := NewLimiterWith(limits, map[string]int{"fs": 1}, LimiterOptions{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	release, ref := l.Admit(alice, fs)
	if ref != nil {
		t.Fatalf("admitted by the store, refused: %+v", ref)
	}
	if _, ref := l.Admit(bob, fs); ref == nil || ref.Limit != "max_in_flight" {
		t.Fatalf("in-flight cap: %+v", ref)
	}
	release()
	if _, ref := l.Admit(alice, gh); ref != nil {
		t.Fatalf("gh: %+v", ref)
	}
	want := [][]Bucket{
		{{Key: "global", Limit: 5, Burst: 10}, {Key: "per-principal-tool\x00p:alice\x00t:fs__read", Limit: 1, Burst: 2}},
		{{Key: "global", Limit: 5, Burst: 10}}, // only global applies to gh; bob's refusal asked nothing
	}
	if got := st.calls(); !equalBatches(got, want) {
		t.Errorf("batches %+v, want %+v", got, want)
	}
	if l.Buckets() != 0 {
		t.Errorf("a limiter with a store of its caller's counts %d buckets of its own", l.Buckets())
	}

	// The store refuses the second bucket: the refusal names its limit, and the
	// in-flight slot taken for the call is given back.
	st.refused, st.retry = 1, 1500*time.Millisecond
	ref = func() *Refusal { _, r := l.Admit(alice, fs); return r }()
	if ref == nil || ref.Limit != "per-principal-tool" || ref.RetryAfter != 1500*time.Millisecond || ref.Err != nil {
		t.Fatalf("refused by the store: %+v", ref)
	}
	st.refused = -1
	if release, ref := l.Admit(alice, fs); ref != nil {
		t.Fatalf("the slot of a refused call was not given back: %+v", ref)
	} else {
		release()
	}

	// The store fails: the call is refused (fail closed) with the error, and the slot
	// is given back.
	st.err = errors.New("connection refused")
	ref = func() *Refusal { _, r := l.Admit(alice, fs); return r }()
	if ref == nil || !errors.Is(ref.Err, st.err) || ref.Limit != "global" || strings.Contains(ref.Message, "connection refused") {
		t.Fatalf("store failure: %+v (the client's message must not carry the store's error)", ref)
	}
	// A store answering nonsense is a failure too.
	st.err, st.refused = nil, 7
	if _, ref := l.Admit(alice, fs); ref == nil || ref.Err == nil {
		t.Fatalf("out-of-range refusal: %+v", ref)
	}
	st.refused = -1
	if release, ref := l.Admit(alice, fs); ref != nil {
		t.Fatalf("the slot of a failed call was not given back: %+v", ref)
	} else {
		release()
	}

	// No limit applies: the store is not asked.
	n := len(st.calls())
	nl, err := NewLimiterWith(nil, map[string]int{"fs": 1}, LimiterOptions{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if release, ref := nl.Admit(alice, fs); ref != nil {
		t.Fatal(ref)
	} else {
		release()
	}
	if len(st.calls()) != n {
		t.Error("the store was asked about a call no limit applies to")
	}
}

func equalBatches(a, b [][]Bucket) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				return false
			}
		}
	}
	return true
}

// TestLimitsStageFailsClosed: when the bucket store fails, the limits stage refuses the
// call with a proxy error, logs why, and the audit record says so; nothing goes upstream.
func TestLimitsStageFailsClosed(t *testing.T) {
	st := &recordingStore{refused: -1, err: errors.New("redis: connection refused")}
	l, err := NewLimiterWith([]Limit{{Name: "global", Rate: 1, Burst: 1}}, nil, LimiterOptions{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	var logs, audit bytes.Buffer
	a, err := NewAuditor(AuditOptions{Log: true}, zerolog.New(&audit))
	if err != nil {
		t.Fatal(err)
	}
	c := &Chain{Limits: l, Audit: a, Log: zerolog.New(&logs)}
	upstream := false
	h := compose(c, func(context.Context, *router.Call, router.Reply) { upstream = true })
	tgt := &router.Target{Kind: router.TargetTool, Name: "fs__read", Original: "read", Upstream: "fs"}
	req := &router.Request{Method: "tools/call", Principal: alice, Params: json.RawMessage(`{"name":"fs__read"}`)}
	var got error
	h(context.Background(), &router.Call{Method: req.Method, Params: req.Params, Target: tgt, Request: req},
		func(_ json.RawMessage, err error) { got = err })
	var je *jsonrpc.Error
	if !errors.As(got, &je) || je.Code != jsonrpc.CodeInternalError || !strings.Contains(string(je.Data), `"origin":"mcp-proxy"`) ||
		strings.Contains(je.Message, "redis") {
		t.Fatalf("reply %v; want a proxy error (-32603) that does not show the store's error", got)
	}
	if upstream {
		t.Error("the call went upstream although the limits could not be checked")
	}
	if !strings.Contains(logs.String(), "redis: connection refused") || !strings.Contains(logs.String(), `"level":"error"`) {
		t.Errorf("log: %s", logs.String())
	}

	// A second failure right after is refused the same way, but not logged again: while
	// the store is down every limited call fails, and the log says so once per interval.
	lines := strings.Count(logs.String(), "\n")
	got = nil
	h(context.Background(), &router.Call{Method: req.Method, Params: req.Params, Target: tgt, Request: req},
		func(_ json.RawMessage, err error) { got = err })
	if !errors.As(got, &je) || je.Code != jsonrpc.CodeInternalError {
		t.Fatalf("second reply %v; want the same proxy error", got)
	}
	if n := strings.Count(logs.String(), "\n"); n != lines {
		t.Errorf("the second refusal was logged too: %s", logs.String())
	}

	// The client went away while the store was asked: cancelled, not a store failure.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	st.err = ctx.Err()
	logged := logs.String()
	h(ctx, &router.Call{Method: req.Method, Params: req.Params, Target: tgt, Request: req},
		func(_ json.RawMessage, err error) { got = err })
	if !errors.Is(got, router.ErrCancelled) || logs.String() != logged {
		t.Errorf("cancelled: %v, log %s", got, strings.TrimPrefix(logs.String(), logged))
	}
	a.Close() // writes what is queued
	if s := audit.String(); !strings.Contains(s, `"rate_limited"`) || !strings.Contains(s, OutcomeProtocolError) {
		t.Errorf("audit: %s", s)
	}
}

// TestLogThrottle: one line per interval; the next line let through says how many were
// held back since the last.
func TestLogThrottle(t *testing.T) {
	var th logThrottle
	t0 := time.Unix(1_000_000, 0)
	if ok, held := th.allow(t0, 10*time.Second); !ok || held != 0 {
		t.Fatalf("first: %v %d", ok, held)
	}
	for i := range 3 {
		if ok, _ := th.allow(t0.Add(time.Duration(i+1)*time.Second), 10*time.Second); ok {
			t.Fatalf("line %d let through within the interval", i+2)
		}
	}
	if ok, held := th.allow(t0.Add(10*time.Second), 10*time.Second); !ok || held != 3 {
		t.Fatalf("after the interval: %v, held back %d; want true, 3", ok, held)
	}
}

// TestMemoryBucketsConcurrent: calls racing for the last tokens of two buckets take
// from both or from neither, so the shared bucket loses exactly what the admitted calls
// took.
func TestMemoryBucketsConcurrent(t *testing.T) {
	m := NewMemoryBuckets(0, 0)
	defer m.Close()
	now := time.Unix(1_000_000, 0) // frozen: nothing refills
	shared := Bucket{Key: "global", Limit: 1, Burst: 50}
	own := Bucket{Key: "alice", Limit: 1, Burst: 30}
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r, _, _ := m.Take(context.Background(), []Bucket{shared, own}, now); r == -1 {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if admitted != 30 {
		t.Fatalf("%d calls admitted, want 30 (alice's burst)", admitted)
	}
	left := 0
	for {
		if r, _, _ := m.Take(context.Background(), []Bucket{shared}, now); r != -1 {
			break
		}
		left++
	}
	if left != 20 {
		t.Errorf("%d tokens left in the shared bucket, want 20: refused calls took some", left)
	}
}

// BenchmarkLimiterAdmit is the limiter alone: two rate limits that apply (one bucket
// per principal, one per principal and tool) and an in-flight slot, with the buckets in
// memory; Parallel runs it from every core, with a principal each.
func BenchmarkLimiterAdmit(b *testing.B) {
	l, err := NewLimiter([]Limit{
		{Name: "per-principal", Rate: 1e9, Burst: 1 << 30, Per: []string{"principal"}},
		{Name: "per-tool", Rate: 1e9, Burst: 1 << 30, Per: []string{"principal", "tool"}, Upstreams: []string{"fs"}},
	}, map[string]int{"fs": 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(l.Close)
	it := &Item{Kind: KindTool, Name: "fs__read_file", Upstream: "fs"}
	b.Run("Serial", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			release, ref := l.Admit(alice, it)
			if ref != nil {
				b.Fatal(ref.Message)
			}
			release()
		}
	})
	b.Run("Parallel", func(b *testing.B) {
		b.ReportAllocs()
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			p := &principal.Principal{Name: "p" + strconv.FormatInt(n.Add(1), 10)}
			for pb.Next() {
				release, ref := l.Admit(p, it)
				if ref != nil {
					b.Fatal(ref.Message)
				}
				release()
			}
		})
	})
}
