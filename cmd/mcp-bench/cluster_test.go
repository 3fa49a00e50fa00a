package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
)

// TestRedisTrips: the cluster probe counts the commands the replicas send to Redis (its
// round trips), not those a script runs inside: a script like the limit's (TIME, GET,
// SET inside) and a plain SET are two trips, one script, five commands.
func TestRedisTrips(t *testing.T) {
	r, err := topology.StartRedis(t.TempDir(), nil)
	if errors.Is(err, topology.ErrMissing) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	before, err := readRedisCounters(r.Addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", r.Addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for _, cmd := range []string{
		`EVAL "redis.call('TIME'); redis.call('GET', KEYS[1]); redis.call('SET', KEYS[1], '1'); return 1" 1 k`,
		"SET other 1",
	} {
		fmt.Fprintf(c, "%s\r\n", cmd)
		if line, err := br.ReadString('\n'); err != nil || line[0] == '-' {
			t.Fatalf("%s: %q %v", cmd, line, err)
		}
	}
	p := &clusterProbe{addr: r.Addr, cpu: startCPU(nil), before: before}
	st, err := p.stop(1)
	if err != nil {
		t.Fatal(err)
	}
	if st.RedisTripsPerCall != 2 || st.ScriptsPerCall != 1 || st.RedisCommandsPerCall != 5 {
		t.Errorf("trips %v, scripts %v, commands %v; want 2, 1, 5", st.RedisTripsPerCall, st.ScriptsPerCall, st.RedisCommandsPerCall)
	}
}
