package cluster

import (
	"context"
	"strconv"
	"testing"

	"golang.org/x/time/rate"

	"github.com/mcp-proxy/mcp-proxy/policy"
	"github.com/mcp-proxy/mcp-proxy/principal"
)

// BenchmarkAdmit is the limits stage's work for one call with one per-principal limit:
// buckets in memory (one replica) against buckets in Redis (shared; one round trip to a
// redis-server on loopback), sequential and from parallel callers. The difference is
// what sharing the limits adds to a call.
func BenchmarkAdmit(b *testing.B) {
	r := startRedis(b)
	limits := []policy.Limit{{Name: "calls", Rate: rate.Limit(1e9), Burst: 1 << 30, Per: []string{"principal"}}}
	c, err := NewClient(clusterOf(r))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	stores := map[string]func() (policy.BucketStore, func()){
		"memory": func() (policy.BucketStore, func()) {
			m := policy.NewMemoryBuckets(0, 0)
			return m, m.Close
		},
		"redis": func() (policy.BucketStore, func()) { return NewRedisBuckets(c, "bench:"), func() {} },
	}
	for _, name := range []string{"memory", "redis"} {
		for _, parallel := range []bool{false, true} {
			b.Run(name+"/parallel="+strconv.FormatBool(parallel), func(b *testing.B) {
				store, done := stores[name]()
				defer done()
				l, err := policy.NewLimiterWith(limits, nil, policy.LimiterOptions{Store: store})
				if err != nil {
					b.Fatal(err)
				}
				p := &principal.Principal{Name: "alice"}
				it := &policy.Item{Name: "t__echo", Upstream: "t"}
				admit := func() {
					release, refusal := l.AdmitContext(context.Background(), p, it)
					if refusal != nil {
						b.Fatalf("refused: %+v", refusal)
					}
					release()
				}
				admit() // loads the script
				b.ResetTimer()
				if !parallel {
					for b.Loop() {
						admit()
					}
					return
				}
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						admit()
					}
				})
			})
		}
	}
}
