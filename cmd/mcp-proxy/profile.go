package main

import (
	"bufio"
	"bytes"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	runtimepprof "runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// startCPUProfile writes a CPU profile of `run` to path until stop is called; set
// MCP_PROXY_CPUPROFILE=path to use it (for example under the load tool).
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating CPU profile: %w", err)
	}
	if err := runtimepprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting CPU profile: %w", err)
	}
	return func() {
		runtimepprof.StopCPUProfile()
		f.Close()
	}, nil
}

// debugAddrEnv names the environment variable that turns the debug listener on.
const debugAddrEnv = "MCP_PROXY_DEBUG_ADDR"

// startDebugServer serves Go's profiling endpoints (/debug/pprof/: goroutines, heap, CPU)
// on addr, which must be a loopback address; set MCP_PROXY_DEBUG_ADDR=127.0.0.1:6060 to
// use it. It is never part of the MCP listener.
func startDebugServer(addr string, log zerolog.Logger) (stop func(), err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("MCP_PROXY_DEBUG_ADDR: %w", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("MCP_PROXY_DEBUG_ADDR must be a loopback address, got %q", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("MCP_PROXY_DEBUG_ADDR: %w", err)
	}
	srv := &http.Server{Handler: pprofMux(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Info().Str("address", ln.Addr().String()).Msg("debug endpoints (pprof) listening")
	return func() { srv.Close() }, nil
}

// pprofMux serves the endpoints of net/http/pprof, in the same places and formats, from
// runtime/pprof and runtime/trace directly. Importing net/http/pprof would register them
// on http.DefaultServeMux in an init and link internal/profile, work (and pages of the
// binary) that every start-up paid for while the listener is off by default (issue 17).
// What is left out is net/http/pprof's ?seconds= on the named profiles (a delta of two
// snapshots): take two profiles and compare them with go tool pprof -diff_base.
func pprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprofNamed)
	mux.HandleFunc("/debug/pprof/cmdline", pprofCmdline)
	mux.HandleFunc("/debug/pprof/profile", pprofCPU)
	mux.HandleFunc("/debug/pprof/symbol", pprofSymbol)
	mux.HandleFunc("/debug/pprof/trace", pprofTrace)
	return mux
}

// pprofError answers a failed profile request in plain text, never as a profile.
func pprofError(w http.ResponseWriter, status int, msg string) {
	w.Header().Del("Content-Disposition")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	fmt.Fprintln(w, msg)
}

// pprofSeconds reads the seconds parameter (def when absent).
func pprofSeconds(r *http.Request, def int) (time.Duration, error) {
	s := r.FormValue("seconds")
	if s == "" {
		return time.Duration(def) * time.Second, nil
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n <= 0 || n > 3600 {
		return 0, fmt.Errorf("bad seconds %q: want a number of seconds up to 3600", s)
	}
	return time.Duration(n * float64(time.Second)), nil
}

// pprofNamed serves /debug/pprof/NAME (a runtime/pprof profile: goroutine, heap, allocs,
// threadcreate, block, mutex; ?debug=N for text, ?gc=1 to collect before a heap
// profile) and, at /debug/pprof/ itself, the list of them.
func pprofNamed(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/debug/pprof/")
	if name == "" {
		pprofIndex(w)
		return
	}
	p := runtimepprof.Lookup(name)
	if p == nil {
		pprofError(w, http.StatusNotFound, "Unknown profile: "+name)
		return
	}
	if r.FormValue("seconds") != "" {
		pprofError(w, http.StatusBadRequest, "?seconds= (a delta profile) is not served here: take two profiles and compare them with go tool pprof -diff_base")
		return
	}
	debug, _ := strconv.Atoi(r.FormValue("debug"))
	if name == "heap" && r.FormValue("gc") != "" {
		runtime.GC()
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if debug != 0 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	}
	_ = p.WriteTo(w, debug)
}

// pprofIndex lists the profiles with links to them.
func pprofIndex(w http.ResponseWriter) {
	var b bytes.Buffer
	b.WriteString("<html><head><title>/debug/pprof/</title></head><body>\n<p>Profiles:</p>\n<table>\n")
	for _, p := range runtimepprof.Profiles() {
		n := html.EscapeString(p.Name())
		fmt.Fprintf(&b, "<tr><td>%d</td><td><a href=\"%s?debug=1\">%s</a></td></tr>\n", p.Count(), n, n)
	}
	b.WriteString("<tr><td></td><td><a href=\"profile\">profile</a> (CPU, ?seconds=30)</td></tr>\n")
	b.WriteString("<tr><td></td><td><a href=\"trace?seconds=1\">trace</a></td></tr>\n")
	b.WriteString("</table>\n<p><a href=\"goroutine?debug=2\">full goroutine stack dump</a></p>\n</body></html>\n")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

// pprofCmdline answers the command line, its arguments separated by NUL bytes.
func pprofCmdline(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, strings.Join(os.Args, "\x00"))
}

// pprofCPU answers a CPU profile of the next ?seconds= (30 by default).
func pprofCPU(w http.ResponseWriter, r *http.Request) {
	d, err := pprofSeconds(r, 30)
	if err != nil {
		pprofError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="profile"`)
	if err := runtimepprof.StartCPUProfile(w); err != nil {
		pprofError(w, http.StatusInternalServerError, "Could not enable CPU profiling: "+err.Error())
		return
	}
	pprofWait(r, d)
	runtimepprof.StopCPUProfile()
}

// pprofTrace answers an execution trace of the next ?seconds= (1 by default).
func pprofTrace(w http.ResponseWriter, r *http.Request) {
	d, err := pprofSeconds(r, 1)
	if err != nil {
		pprofError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="trace"`)
	if err := trace.Start(w); err != nil {
		pprofError(w, http.StatusInternalServerError, "Could not enable tracing: "+err.Error())
		return
	}
	pprofWait(r, d)
	trace.Stop()
}

// pprofWait waits d or until the client goes away.
func pprofWait(r *http.Request, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}

// pprofSymbol maps program counters to function names, as go tool pprof asks them: a
// GET says symbols are served, a POST (or a GET with a query) lists addresses joined
// by '+' and gets "0xADDR name" lines back.
func pprofSymbol(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	var in *bufio.Reader
	if r.Method == http.MethodPost {
		in = bufio.NewReader(io.LimitReader(r.Body, 1<<20))
	} else {
		in = bufio.NewReader(strings.NewReader(r.URL.RawQuery))
	}
	var b bytes.Buffer
	b.WriteString("num_symbols: 1\n")
	for {
		word, err := in.ReadSlice('+')
		word = bytes.TrimSuffix(word, []byte("+"))
		if pc, perr := strconv.ParseUint(string(word), 0, 64); perr == nil && pc != 0 {
			if f := runtime.FuncForPC(uintptr(pc)); f != nil {
				fmt.Fprintf(&b, "%#x %s\n", pc, f.Name())
			}
		}
		if err != nil {
			break
		}
	}
	_, _ = w.Write(b.Bytes())
}
