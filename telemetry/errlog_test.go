package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestErrorLogThrottles(t *testing.T) {
	var buf bytes.Buffer
	e := &ErrorLog{Log: zerolog.New(&buf), Every: 50 * time.Millisecond}
	for range 3 {
		e.Handle(errors.New("connection refused"))
	}
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Fatalf("%d lines for 3 errors at once, want 1:\n%s", n, buf.String())
	}
	time.Sleep(60 * time.Millisecond)
	e.Handle(errors.New("connection refused"))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `"more_errors":2`) {
		t.Errorf("after the interval: %q, want a second line counting the 2 left out", lines)
	}
}

// TestCollectorDown: a collector that cannot be reached costs calls nothing, and
// Shutdown gives up at its deadline with an error instead of holding the exit up.
func TestCollectorDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now
	for _, proto := range []string{ProtocolHTTP, ProtocolGRPC} {
		t.Run(proto, func(t *testing.T) {
			tr, err := Start(context.Background(), Settings{Endpoint: "http://" + addr + "/v1/traces", Protocol: proto, Sampling: 1})
			if err != nil {
				t.Fatal(err)
			}
			h := chain((&upstreamEnd{result: json.RawMessage(`{"content":[]}`)}).handle, tr.Wrap(nil)...)
			for range 10 {
				if _, err := call(t, h, context.Background(), toolCall(`{"name":"search"}`)); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			start := time.Now()
			_ = tr.Shutdown(ctx) // an error or not, as the exporter decides: it must not hang
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("Shutdown took %v", took)
			}
		})
	}
}
