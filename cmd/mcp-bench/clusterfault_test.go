package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
)

// TestClusterFault: 8 sessions call through three replicas behind HAProxy while every
// replica is restarted in turn on its address (SIGTERM: it drains), then while
// redis-server restarts empty. No session is lost (answered 404) and every call gets an
// answer; in the redis run every replica shares the limits again.
func TestClusterFault(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the cluster topology under faults for 2 × 8 s")
	}
	proxy, server := buildChaosBinaries(t)
	for _, fault := range clusterFaultKinds {
		t.Run(fault, func(t *testing.T) {
			jsonPath := filepath.Join(t.TempDir(), "out.json")
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), []string{"-mode", "http", "-cluster", "3", "-cluster-fault", fault, "-proxy", proxy,
				"-upstream", server + " -fast", "-duration", "8s", "-concurrency", "8", "-json", jsonPath},
				nil, &stdout, &lockedWriter{w: &stderr})
			if errors.Is(err, topology.ErrMissing) && os.Getenv("CI") == "" {
				t.Skip(err)
			}
			if err != nil {
				t.Fatalf("run: %v\n%s\n%s", err, stdout.String(), stderr.String())
			}
			t.Logf("report:\n%s", stdout.String())
			var rep clusterFaultReport
			b, err := os.ReadFile(jsonPath)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Calls == 0 || rep.SessionsLost != 0 || rep.NoAnswer != 0 || rep.Results == 0 {
				t.Errorf("calls %d, results %d, no answer %d, sessions lost %d", rep.Calls, rep.Results, rep.NoAnswer, rep.SessionsLost)
			}
			want := map[string]int{"rolling": 6, "redis": 2}[fault]
			if len(rep.Events) != want {
				t.Errorf("%d fault steps, want %d: %+v", len(rep.Events), want, rep.Events)
			}
			for name, ms := range rep.SharedAgainMs {
				if ms < -1 {
					t.Errorf("%s did not share the rate limits again after redis came back", name)
				}
			}
			if fault == "redis" && len(rep.SharedAgainMs) != 3 {
				t.Errorf("shared again: %v, want the three replicas'", rep.SharedAgainMs)
			}
			if bytes.Contains(stderr.Bytes(), []byte("WARNING: DATA RACE")) || bytes.Contains(stderr.Bytes(), []byte("panic:")) {
				t.Errorf("a replica raced or panicked:\n%s", stderr.String())
			}
		})
	}
}
