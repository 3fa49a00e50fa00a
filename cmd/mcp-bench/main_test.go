package main

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = ms(i + 1)
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"single p50", []time.Duration{ms(7)}, 50, ms(7)},
		{"single p99", []time.Duration{ms(7)}, 99, ms(7)},
		{"three p50", []time.Duration{ms(1), ms(2), ms(3)}, 50, ms(2)},
		{"three p99", []time.Duration{ms(1), ms(2), ms(3)}, 99, ms(3)},
		{"four p50", []time.Duration{ms(1), ms(2), ms(3), ms(4)}, 50, ms(2)},
		{"hundred p50", hundred, 50, ms(50)},
		{"hundred p90", hundred, 90, ms(90)},
		{"hundred p99", hundred, 99, ms(99)},
		{"hundred p100", hundred, 100, ms(100)},
		{"hundred p0.1", hundred, 0.1, ms(1)},
	}
	for _, tt := range tests {
		if got := percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("%s: percentile(p=%v) = %v, want %v", tt.name, tt.p, got, tt.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	d := []time.Duration{ms(5), ms(1), ms(4), ms(2), ms(3)}
	s := summarize(d)
	want := latencySummary{N: 5, P50: ms(3), P90: ms(5), P99: ms(5), Max: ms(5), Mean: ms(3)}
	if s != want {
		t.Errorf("summarize = %+v, want %+v", s, want)
	}
	if !slices.IsSorted(d) {
		t.Errorf("summarize left its input unsorted: %v", d)
	}
	if got := summarize(nil); got != (latencySummary{}) {
		t.Errorf("summarize(nil) = %+v, want zero", got)
	}
}

func TestMedianAndRatio(t *testing.T) {
	in := []float64{3, 1, 2, 10}
	if got := median(in); got != 2.5 {
		t.Errorf("median(%v) = %v, want 2.5", in, got)
	}
	if !slices.Equal(in, []float64{3, 1, 2, 10}) {
		t.Errorf("median modified its input: %v", in)
	}
	if got := median([]float64{4, 9, 1}); got != 4 {
		t.Errorf("median odd = %v, want 4", got)
	}
	if got := median(nil); got != 0 {
		t.Errorf("median(nil) = %v, want 0", got)
	}
	if got := ratio(3, 2); got != 1.5 {
		t.Errorf("ratio(3,2) = %v", got)
	}
	if got := ratio(3, 0); got != 0 {
		t.Errorf("ratio(3,0) = %v, want 0", got)
	}
}

const sampleStatus = `Name:	mcp-proxy
Umask:	0022
State:	S (sleeping)
Tgid:	4242
Pid:	4242
VmPeak:	 1240000 kB
VmSize:	 1239000 kB
VmLck:	       0 kB
VmHWM:	   13604 kB
VmRSS:	   12288 kB
RssAnon:	    5000 kB
Threads:	7
`

func TestParseStatus(t *testing.T) {
	st, err := parseStatus(sampleStatus)
	if err != nil {
		t.Fatal(err)
	}
	if st.RSSkB != 12288 || st.HWMkB != 13604 {
		t.Errorf("parseStatus = %+v, want RSS 12288 HWM 13604", st)
	}
	if got := kBToMiB(st.RSSkB); got != 12 {
		t.Errorf("kBToMiB(12288) = %v, want 12", got)
	}
	for name, s := range map[string]string{
		"zombie (no Vm lines)": "Name:\tx\nState:\tZ (zombie)\n",
		"no HWM":               "VmRSS:\t 10 kB\n",
		"bad number":           "VmHWM:\t 1x kB\nVmRSS:\t 10 kB\n",
		"bad unit":             "VmHWM:\t 10 MB\nVmRSS:\t 10 kB\n",
	} {
		if _, err := parseStatus(s); err == nil {
			t.Errorf("%s: parseStatus succeeded, want an error", name)
		}
	}
}

func TestParseStatCPU(t *testing.T) {
	// The command name may hold spaces and parentheses; utime=1234, stime=56.
	stat := "4242 (my) (proc 1) S 1 4242 4242 0 -1 4194560 900 0 0 0 1234 56 0 0 20 0 7 0 100 1239000 3072 18446744073709551615\n"
	got, err := parseStatCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if got != 1290 {
		t.Errorf("parseStatCPU = %d, want 1290", got)
	}
	if d := ticksToDuration(got); d != 12900*time.Millisecond {
		t.Errorf("ticksToDuration(1290) = %v, want 12.9s", d)
	}
	for _, bad := range []string{"", "4242 (x S 1 2", "4242 (x) S 1 2 3", "4242 (x) S 1 4242 4242 0 -1 0 0 0 0 0 u 56 0"} {
		if _, err := parseStatCPU(bad); err == nil {
			t.Errorf("parseStatCPU(%q) succeeded, want an error", bad)
		}
	}
}

func TestHCLString(t *testing.T) {
	tests := map[string]string{
		`plain`:        `"plain"`,
		`a "q" \ b`:    `"a \"q\" \\ b"`,
		"tab\tnl\n":    `"tab\tnl\n"`,
		"${HOME}":      `"$${HOME}"`,
		"%{if x}":      `"%%{if x}"`,
		"$5 and 50%":   `"$5 and 50%"`,
		"bell\x07":     `"bell\u0007"`,
		"ünïcødé ☃":    `"ünïcødé ☃"`,
		"trailing $":   `"trailing $"`,
		"$${already}":  `"$$${already}"`,
		"":             `""`,
		"/abs/path/ts": `"/abs/path/ts"`,
	}
	for in, want := range tests {
		if got := hclString(in); got != want {
			t.Errorf("hclString(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestProxyConfig checks that generated configs load with the proxy's own config package
// and mean what was asked, tricky strings included.
func TestProxyConfig(t *testing.T) {
	cmd := []string{"/opt/bench dir/testserver", "-fast", "${NOT_EXPANDED}", `quote " and \ slash`, "%{x}", "$${y}", "a\nb"}
	src := proxyConfig([]upstreamBlock{{Label: "bench", Command: cmd, Cwd: "/work/dir", Namespace: ""}})
	cfg, diags := config.Parse([]byte(src), "bench.hcl", "/tmp")
	if diags.HasErrors() {
		t.Fatalf("generated config does not load: %s\n%s", config.FormatDiagnostics(diags), src)
	}
	if len(cfg.Upstreams) != 1 {
		t.Fatalf("got %d upstreams, want 1", len(cfg.Upstreams))
	}
	u := cfg.Upstreams[0]
	if u.Name != "bench" || u.Namespace != "" || u.Cwd != "/work/dir" || !slices.Equal(u.Command, cmd) {
		t.Errorf("upstream = name %q namespace %q cwd %q command %q; want bench, \"\", /work/dir, %q",
			u.Name, u.Namespace, u.Cwd, u.Command, cmd)
	}

	ups := idleUpstreams(10, []string{"/bin/ts", "-fast"}, "/w")
	src = proxyConfig(ups)
	cfg, diags = config.Parse([]byte(src), "idle.hcl", "/tmp")
	if diags.HasErrors() {
		t.Fatalf("generated idle config does not load: %s\n%s", config.FormatDiagnostics(diags), src)
	}
	var names, namespaces []string
	for _, u := range cfg.Upstreams {
		names = append(names, u.Name)
		namespaces = append(namespaces, u.Namespace)
	}
	want := []string{"u01", "u02", "u03", "u04", "u05", "u06", "u07", "u08", "u09", "u10"}
	if !slices.Equal(names, want) || !slices.Equal(namespaces, want) {
		t.Errorf("idle upstreams: names %v namespaces %v, want %v", names, namespaces, want)
	}
	if got := idleUpstreams(100, []string{"x"}, "")[99].Label; got != "u100" {
		t.Errorf("label of the 100th upstream = %q, want u100", got)
	}
	if got := idleUpstreams(100, []string{"x"}, "")[0].Label; got != "u001" {
		t.Errorf("label of the first of 100 upstreams = %q, want u001", got)
	}
}

func TestParseOptions(t *testing.T) {
	o, err := parseOptions([]string{"-concurrency", " 1, 8 ,,256", "-upstream", "srv  -a   -b", "-rounds", "3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.concurrency, []int{1, 8, 256}) || !slices.Equal(o.upstream, []string{"srv", "-a", "-b"}) || o.rounds != 3 {
		t.Errorf("options = %+v", o)
	}
	if len(o.plugin) != 0 || o.pluginHops != 2 {
		t.Errorf("without -plugin: plugin %q, hops %d; want none, 2", o.plugin, o.pluginHops)
	}
	o, err = parseOptions([]string{"-plugin", " bin/testplugin  -hooks before ", "-plugin-hops", "1"}, io.Discard)
	if err != nil || !slices.Equal(o.plugin, []string{"bin/testplugin", "-hooks", "before"}) || o.pluginHops != 1 {
		t.Errorf("-plugin: %+v, %v", o, err)
	}
	o, err = parseOptions([]string{"-concurrency", ""}, io.Discard)
	if err != nil || len(o.concurrency) != 0 {
		t.Errorf("empty -concurrency: %v, %v", o, err)
	}
	for _, args := range [][]string{
		{"-concurrency", "0"}, {"-concurrency", "x"}, {"-concurrency", "100000"},
		{"-duration", "0s"}, {"-latency-calls", "0"}, {"-rounds", "0"}, {"-upstream", "  "},
		{"-idle-upstreams", "-1"}, {"stray"},
		{"-mode", "http", "-plugin", "tp -hooks before"}, {"-plugin", "tp", "-plugin-hops", "0"},
		{"-plugin", "tp", "-plugin-hops", "65"},
	} {
		_, err := parseOptions(args, io.Discard)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("parseOptions(%q) = %v, want a usageError", args, err)
		}
	}
}

func TestToolParams(t *testing.T) {
	got, err := toolParams("echo", []byte("{ \"text\" :\n \"hello\" }"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"name":"echo","arguments":{"text":"hello"}}`; string(got) != want {
		t.Errorf("toolParams = %s, want %s", got, want)
	}
	for _, bad := range []string{"", "[]", `"x"`, "{", "null"} {
		if _, err := toolParams("echo", []byte(bad)); err == nil {
			t.Errorf("toolParams(%q) succeeded, want an error", bad)
		}
	}
}

// fakeServer answers requests read from r on w: tools/call with "ok" after a random
// delay each (so responses overtake one another, exercising dispatch by id), "fail" with
// an error response, and "hang" never. Each answer is preceded by a notification, which
// the client must ignore.
func fakeServer(r io.Reader, w io.Writer) {
	lr, lw := jsonrpc.NewLineReader(r, 0), jsonrpc.NewLineWriter(w)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		m, err := lr.Read()
		if err != nil {
			return
		}
		if !m.IsRequest() {
			continue
		}
		switch {
		case strings.Contains(string(m.Params), `"hang"`):
			continue
		case strings.Contains(string(m.Params), `"fail"`):
			_ = lw.Write(jsonrpc.NewErrorResponse(m.ID, jsonrpc.Errorf(-32000, "failed")))
			continue
		}
		wg.Go(func() {
			time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
			_ = lw.Write(jsonrpc.NewNotification("notifications/progress", nil))
			_ = lw.Write(jsonrpc.NewResult(m.ID, []byte(`{"content":[{"type":"text","text":"ok"}]}`)))
		})
	}
}

func TestConn(t *testing.T) {
	cr, sw := io.Pipe() // server -> client
	sr, cw := io.Pipe() // client -> server
	var wg sync.WaitGroup
	wg.Go(func() { fakeServer(sr, sw) })
	c := newConn(cw, cr)
	ctx := context.Background()

	var callers sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		callers.Go(func() {
			k := newCaller(c, 5*time.Second)
			for range 50 {
				if err := callTool(ctx, k, []byte(`{"name":"echo","arguments":{}}`)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	callers.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("call: %v", err)
	}

	k := newCaller(c, 5*time.Second)
	err := callTool(ctx, k, []byte(`{"name":"fail"}`))
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || isFatal(err) {
		t.Errorf("error response: got %v, want a non-fatal *jsonrpc.Error", err)
	}

	k = newCaller(c, 50*time.Millisecond)
	if err := callTool(ctx, k, []byte(`{"name":"hang"}`)); !errors.Is(err, errTimeout) || isFatal(err) {
		t.Errorf("unanswered call: got %v, want errTimeout", err)
	}

	// The server goes away: waiting and later calls fail fatally, the reader exits.
	k = newCaller(c, 5*time.Second)
	done := make(chan error, 1)
	go func() { done <- callTool(ctx, k, []byte(`{"name":"hang"}`)) }()
	time.Sleep(20 * time.Millisecond)
	sw.Close()
	if err := <-done; err == nil || !isFatal(err) {
		t.Errorf("call on a closed connection: got %v, want a fatal error", err)
	}
	if err := callTool(ctx, k, []byte(`{}`)); err == nil || !isFatal(err) {
		t.Errorf("call after close: got %v, want a fatal error", err)
	}
	c.wait()
	cw.Close()
	wg.Wait()
}
