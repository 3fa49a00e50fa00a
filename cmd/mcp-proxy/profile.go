package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	runtimepprof "runtime/pprof"

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
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	log.Info().Str("address", ln.Addr().String()).Msg("debug endpoints (pprof) listening")
	return func() { srv.Close() }, nil
}
