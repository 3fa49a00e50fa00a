package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/benchwire"
)

// BenchmarkFloorCall is BenchmarkHTTPFrontCall (proxy) through the floor
// forwarder instead of the proxy, run in-process: the same client, the same upstream
// processes, the same call. What the proxy allocates and spends per call beyond these
// figures is its logic.
func BenchmarkFloorCall(b *testing.B) {
	bin := benchwire.TestServer(b)
	params := []byte(`{"name":"echo","arguments":{"text":"hello"}}`)
	for _, up := range []string{"child", "http-upstream"} {
		for _, c := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/c%d", up, c), func(b *testing.B) {
				args := []string{"-listen", "127.0.0.1:0", "-addr-file", filepath.Join(b.TempDir(), "floor.addr")}
				if up == "http-upstream" {
					args = append(args, "-upstream-url", "http://"+benchwire.HTTPTestServer(b, bin)+"/mcp")
				} else {
					args = append(args, bin, "-fast")
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- runFloor(ctx, args, nil, os.Stdout, os.Stderr) }()
				b.Cleanup(func() {
					cancel()
					if err := <-done; err != nil {
						b.Errorf("the floor: %v", err)
					}
				})
				addr := ""
				for deadline := time.Now().Add(30 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
					if a, err := os.ReadFile(args[3]); err == nil && len(a) > 1 {
						addr = string(a[:len(a)-1])
					}
				}
				if addr == "" {
					b.Fatal("the floor did not write its address in 30s")
				}
				benchwire.Calls(b, addr, "/mcp", c, "tools/call", params)
			})
		}
	}
}
