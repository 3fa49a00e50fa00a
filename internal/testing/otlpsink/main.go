// Command otlpsink is an OTLP/HTTP endpoint that accepts trace exports and discards
// them: the collector of `make load-ops-traced`, which measures what tracing every call
// costs the proxy, its exports included, without a real collector's CPU in the figures
// (it runs as its own process). It counts what it received and prints the counts to
// stderr when it stops. Not for anything else.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "otlpsink:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("otlpsink", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:4318", "address to listen on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	var exports, bytes atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		n, _ := io.Copy(io.Discard, r.Body)
		exports.Add(1)
		bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
	})}
	fmt.Fprintf(os.Stderr, "otlpsink: listening on http://%s/v1/traces\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	fmt.Fprintf(os.Stderr, "otlpsink: %d exports, %d bytes\n", exports.Load(), bytes.Load())
	return nil
}
