package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// fakeHTTPServer is a minimal Streamable HTTP MCP endpoint: initialize mints a session,
// notifications get 202, tools/call of "echo" is answered as JSON or (sse) as an event
// stream with a notification, a comment and a long event before the response; "hang"
// never answers and "fail" answers an error with HTTP 400.
type fakeHTTPServer struct {
	sse      bool
	sessions sync.Map // id -> true
	deleted  atomic.Int64
	posts    atomic.Int64
}

func (f *fakeHTTPServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodDelete {
		if _, ok := f.sessions.LoadAndDelete(r.Header.Get("Mcp-Session-Id")); !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		f.deleted.Add(1)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	f.posts.Add(1)
	body, _ := io.ReadAll(r.Body)
	m, err := jsonrpc.Decode(body)
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	if m.Method == "initialize" {
		id := fmt.Sprintf("s%d", f.posts.Load())
		f.sessions.Store(id, true)
		w.Header().Set("Mcp-Session-Id", id)
		w.Header().Set("Content-Type", "application/json")
		b, _ := jsonrpc.NewResult(m.ID, []byte(`{"protocolVersion":"2025-11-25","capabilities":{}}`)).Encode()
		w.Write(b)
		return
	}
	if _, ok := f.sessions.Load(r.Header.Get("Mcp-Session-Id")); !ok || r.Header.Get("Mcp-Protocol-Version") == "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		b, _ := jsonrpc.NewErrorResponse(m.ID, jsonrpc.Errorf(-32600, "Session not found")).Encode()
		w.Write(b)
		return
	}
	if m.IsNotification() {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	switch {
	case bytes.Contains(m.Params, []byte(`"hang"`)):
		<-r.Context().Done()
		return
	case bytes.Contains(m.Params, []byte(`"fail"`)):
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		b, _ := jsonrpc.NewErrorResponse(m.ID, jsonrpc.Errorf(-32602, "Unknown tool")).Encode()
		w.Write(b)
		return
	}
	resp, _ := jsonrpc.NewResult(m.ID, []byte(`{"content":[{"type":"text","text":"ok"}]}`)).Encode()
	if !f.sse {
		w.Header().Set("Content-Type", "application/json")
		w.Write(resp)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	long := `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + strings.Repeat("x", 10000) + `"}}`
	fmt.Fprintf(w, ": keep-alive\n\nevent: message\ndata: %s\n\n", long)
	fmt.Fprintf(w, "id: 1\r\nevent: message\r\ndata: %s\r\n\r\n", resp)
}

func TestHTTPSession(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprintf("sse=%v", sse), func(t *testing.T) {
			f := &fakeHTTPServer{sse: sse}
			srv := httptest.NewServer(f)
			defer srv.Close()
			c := newHTTPClient(srv.URL, 8)
			defer c.close()
			ctx := context.Background()
			s, err := c.openSession(ctx, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			for range 50 {
				if err := callTool(ctx, s, []byte(`{"name":"echo"}`)); err != nil {
					t.Fatalf("call: %v", err)
				}
			}
			if n := c.dials.Load(); n != 1 {
				t.Errorf("dials after 52 messages on one session: %d, want 1 (keep-alive)", n)
			}
			err = callTool(ctx, s, []byte(`{"name":"fail"}`))
			var rpcErr *jsonrpc.Error
			if !errors.As(err, &rpcErr) || isFatal(err) {
				t.Errorf("error response with HTTP 400: got %v, want a non-fatal *jsonrpc.Error", err)
			}
			s.timeout = 50 * time.Millisecond
			if err := callTool(ctx, s, []byte(`{"name":"hang"}`)); !errors.Is(err, errTimeout) {
				t.Errorf("unanswered call: %v, want errTimeout", err)
			}
			s.timeout = 5 * time.Second
			if err := s.close(ctx); err != nil || f.deleted.Load() != 1 {
				t.Errorf("DELETE: %v (%d deleted)", err, f.deleted.Load())
			}
			if err := callTool(ctx, s, []byte(`{"name":"echo"}`)); err == nil {
				t.Error("call after DELETE succeeded")
			}
			if err := s.close(ctx); err == nil {
				t.Error("second DELETE succeeded")
			}
		})
	}

	// Concurrent sessions reuse the pool.
	srv := httptest.NewServer(&fakeHTTPServer{})
	defer srv.Close()
	c := newHTTPClient(srv.URL, 8)
	defer c.close()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			s, err := c.openSession(context.Background(), 5*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			for range 100 {
				if err := callTool(context.Background(), s, []byte(`{"name":"echo"}`)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	// Go's transport may finish a dial it started for a request that then got an idle
	// connection: allow for that, not for a dial per call.
	if n := c.dials.Load(); n > 8 {
		t.Errorf("4 concurrent sessions making 404 calls dialled %d connections, want at most 8", n)
	}
}

func TestHTTPSessionErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("X-Case") {
		case "html":
			http.Error(w, "<html>nope</html>", http.StatusBadGateway)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)) // no Mcp-Session-Id
		}
	}))
	defer srv.Close()
	c := newHTTPClient(srv.URL, 2)
	if _, err := c.openSession(context.Background(), time.Second); err == nil || !strings.Contains(err.Error(), "Mcp-Session-Id") {
		t.Errorf("initialize without a session id: %v", err)
	}
	s := &httpSession{c: c, id: "x", timeout: time.Second}
	c.hc.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r.Header.Set("X-Case", "html")
		return c.tr.RoundTrip(r)
	})
	if _, err := s.call(context.Background(), "ping", nil); err == nil || !isFatal(err) || !strings.Contains(err.Error(), "HTTP 502") {
		t.Errorf("HTML error answer: %v, want a fatal HTTP 502 error", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestProxyConfigListen(t *testing.T) {
	src := proxyConfigListen(&listenBlock{Address: "127.0.0.1:4567", Path: "/mcp", MaxSessions: 2100}, []upstreamBlock{
		{Label: "bench", Command: []string{"/bin/ts", "-fast"}, Cwd: "/w"},
		{Label: "remote", URL: "http://127.0.0.1:9999/mcp", Namespace: "r"},
	})
	cfg, diags := config.Parse([]byte(src), "bench.hcl", "/tmp")
	if diags.HasErrors() {
		t.Fatalf("generated config does not load: %s\n%s", config.FormatDiagnostics(diags), src)
	}
	if len(cfg.Listen) != 1 || cfg.Listen[0].Address != "127.0.0.1:4567" || cfg.Listen[0].Path != "/mcp" || cfg.Listen[0].MaxSessions != 2100 {
		t.Errorf("listen = %+v", cfg.Listen)
	}
	if len(cfg.Upstreams) != 2 || cfg.Upstreams[1].URL != "http://127.0.0.1:9999/mcp" || cfg.Upstreams[1].Namespace != "r" ||
		!slices.Equal(cfg.Upstreams[0].Command, []string{"/bin/ts", "-fast"}) {
		t.Errorf("upstreams = %+v", cfg.Upstreams)
	}
	if got := proxyConfigListen(&listenBlock{Address: "a:1", Path: "/p"}, nil); strings.Contains(got, "max_sessions") {
		t.Errorf("max_sessions written when 0:\n%s", got)
	}
}

func TestProcHelpers(t *testing.T) {
	st, err := parseStatus(sampleStatus)
	if err != nil || st.Threads != 7 {
		t.Errorf("parseStatus threads = %d, %v; want 7", st.Threads, err)
	}
	limits := "Limit                     Soft Limit           Hard Limit           Units     \n" +
		"Max cpu time              unlimited            unlimited            seconds   \n" +
		"Max open files            1024                 524288               files     \n"
	if soft, hard, err := parseNofile(limits); err != nil || soft != 1024 || hard != 524288 {
		t.Errorf("parseNofile = %d %d %v", soft, hard, err)
	}
	if soft, hard, err := parseNofile("Max open files unlimited unlimited files\n"); err != nil || soft != -1 || hard != -1 {
		t.Errorf("parseNofile unlimited = %d %d %v", soft, hard, err)
	}
	if _, _, err := parseNofile("Max cpu time 1 2\n"); err == nil {
		t.Error("parseNofile without the line succeeded")
	}
	if n, ok := parseGoroutineTotal("goroutine profile: total 1234\n"); !ok || n != 1234 {
		t.Errorf("parseGoroutineTotal = %d %v", n, ok)
	}
	if _, ok := parseGoroutineTotal("404 page not found"); ok {
		t.Error("parseGoroutineTotal accepted a 404 page")
	}
	heap, stack := parseGoMemory("heap profile: 1: 2 [3: 4] @ heap/1048576\n# runtime.MemStats\n# HeapAlloc = 4194304\n# Stack = 655360 / 655360\n")
	if heap != 4096 || stack != 640 {
		t.Errorf("parseGoMemory = %d, %d; want 4096, 640", heap, stack)
	}
	if heap, stack := parseGoMemory("404 page not found"); heap != -1 || stack != -1 {
		t.Errorf("parseGoMemory of a 404 page = %d, %d", heap, stack)
	}
	if n, err := countFDs(os.Getpid()); err != nil || n < 3 {
		t.Errorf("countFDs(self) = %d, %v", n, err)
	}
	if soft, err := raiseNofile(64); err != nil || soft < 64 {
		t.Errorf("raiseNofile(64) = %d, %v", soft, err)
	}
}

func TestRotate(t *testing.T) {
	ts := []string{"a", "b", "c"}
	for k, want := range [][]string{{"a", "b", "c"}, {"b", "c", "a"}, {"c", "a", "b"}, {"a", "b", "c"}} {
		if got := rotate(ts, k); !slices.Equal(got, want) {
			t.Errorf("rotate(%d) = %v, want %v", k, got, want)
		}
	}
	if !slices.Equal(ts, []string{"a", "b", "c"}) {
		t.Errorf("rotate modified its input: %v", ts)
	}
}

func TestParseOptionsHTTP(t *testing.T) {
	o, err := parseOptions([]string{"-mode", "http", "-sessions", "1000", "-http-upstream=false"}, io.Discard)
	if err != nil || o.mode != modeHTTP || o.sessions != 1000 || o.httpUpstream || o.sessionCalls != 3 {
		t.Errorf("options = %+v, %v", o, err)
	}
	for _, args := range [][]string{
		{"-mode", "grpc"}, {"-sessions", "10"}, {"-mode", "http", "-sessions", "-1"},
		{"-mode", "http", "-sessions", "100000"}, {"-mode", "http", "-session-calls", "-1"},
		{"-idle-sessions", "5"}, {"-mode", "http", "-idle-sessions", "-5"},
	} {
		var ue usageError
		if _, err := parseOptions(args, io.Discard); !errors.As(err, &ue) {
			t.Errorf("parseOptions(%q) = %v, want a usageError", args, err)
		}
	}
}

// TestReportHTTP checks the summary and the text of an -mode http report.
func TestReportHTTP(t *testing.T) {
	o, err := parseOptions([]string{"-mode", "http", "-sessions", "10"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rep := newReport(o)
	zero, pct := int64(0), 0.5
	one := int64(5)
	for r := 1; r <= 2; r++ {
		rr := roundResult{Round: r, ProxyPeakRSSMiB: 10, ProxyHTTPUpPeakRSSkB: 12 << 10}
		for _, tg := range []string{targetDirect, targetProxy, targetProxyHTTPUp} {
			p := phaseResult{Kind: kindLatency, Concurrency: 1, Target: tg, Calls: 1000, CallsPerSec: 1000, P50US: 100, CPUPerCallUS: 40,
				HTTP: &httpPhaseStats{NewConns: 0}}
			if tg == targetProxy {
				p.P50US, p.CallsPerSec = 120, 800
			}
			if tg == targetProxyHTTPUp {
				p.P50US, p.CallsPerSec = 150, 600
				p.HTTP.UpstreamNewConns, p.HTTP.UpstreamToolCalls, p.HTTP.UpstreamNewConnPct = &one, &zero, &pct
			}
			rr.Phases = append(rr.Phases, p)
		}
		rr.Sessions = &sessionsResult{Sessions: 10, Opened: 10, StreamsEnded: 10, PerSessionKB: float64(20 * r),
			Baseline: procSnapshot{RSSkB: 10 << 10, FDs: 10, Threads: 8, Goroutines: -1, HeapKB: -1, StackKB: -1},
			Open:     procSnapshot{RSSkB: 11 << 10, FDs: 30, Threads: 9, Goroutines: -1, HeapKB: -1, StackKB: -1},
			After:    procSnapshot{RSSkB: 11 << 10, FDs: 11, Threads: 9, Goroutines: -1, HeapKB: -1, StackKB: -1}}
		rep.Rounds = append(rep.Rounds, rr)
	}
	rep.summarize()
	p := rep.Summary.Phases[0]
	if p.P50Ratio != 1.2 || p.ProxyHTTPUp == nil || p.HTTPUpP50Ratio != 1.5 || p.HTTPUpThroughputRatio != 0.6 {
		t.Errorf("phase summary = %+v", p)
	}
	if p.ProxyHTTPUp.UpstreamNewConnPct == nil || *p.ProxyHTTPUp.UpstreamNewConnPct != 0.5 || p.Proxy.NewConnsPerCall == nil {
		t.Errorf("connection figures: %+v %+v", p.Proxy, p.ProxyHTTPUp)
	}
	ss := rep.Summary.Sessions
	if ss == nil || ss.PerSessionKB != 30 || ss.PerSessionKBMax != 40 || ss.FDResidue != 1 || ss.ThreadResidue != 1 || ss.GoroutineResidue != nil {
		t.Errorf("sessions summary = %+v", ss)
	}
	if rep.Summary.ProxyHTTPUpPeakRSSMiB != 12 {
		t.Errorf("proxy-httpup peak = %v", rep.Summary.ProxyHTTPUpPeakRSSMiB)
	}
	var b strings.Builder
	if err := rep.writeText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"over http", "proxy-httpup/direct", "0.500% of calls", "n/a (stdio upstream)",
		"proxy RSS per idle session", "30.0 KB", "n/a (the proxy serves no net/http/pprof"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatal(err)
	}
}

// TestRunHTTP builds the proxy and the test server and runs a short -mode http benchmark
// with every phase, end to end.
func TestRunHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the proxy")
	}
	dir := t.TempDir()
	for pkg, out := range map[string]string{"../mcp-proxy": "mcp-proxy", "../../internal/testing/testserver": "testserver"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, out), pkg)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", pkg, err, b)
		}
	}
	jsonPath := filepath.Join(dir, "out.json")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{
		"-proxy", filepath.Join(dir, "mcp-proxy"), "-upstream", filepath.Join(dir, "testserver") + " -fast",
		"-mode", "http", "-duration", "200ms", "-latency-calls", "50", "-warmup", "10", "-concurrency", "4",
		"-idle-upstreams", "0", "-sessions", "20", "-idle-sessions", "5", "-json", jsonPath,
	}, nil, &stdout, &lockedWriter{w: &stderr})
	if err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var rep report
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Summary.Phases) != 2 || rep.Summary.Errors != 0 {
		t.Fatalf("summary = %+v\n%s", rep.Summary, stdout.String())
	}
	for _, p := range rep.Summary.Phases {
		for _, f := range []*figures{&p.Direct, &p.Proxy, p.ProxyHTTPUp} {
			if f == nil || f.Calls == 0 || f.NewConnsPerCall == nil {
				t.Errorf("%s c=%d: figures %+v", p.Kind, p.Concurrency, f)
			}
		}
		if p.ProxyHTTPUp != nil && p.ProxyHTTPUp.UpstreamNewConnPct == nil {
			t.Errorf("%s c=%d: no upstream connection figure", p.Kind, p.Concurrency)
		}
	}
	ss := rep.Summary.Sessions
	if ss == nil || ss.OpenedMin != 20 || ss.StreamsEndedMin != 20 || ss.Errors != 0 || ss.Open.FDs < ss.Baseline.FDs+20 {
		t.Errorf("sessions = %+v", ss)
	}
	if !strings.Contains(stdout.String(), "proxy-httpup/direct") || !strings.Contains(stdout.String(), "holds 5 extra idle sessions") {
		t.Errorf("report:\n%s", stdout.String())
	}
}
