package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseCluster(t *testing.T) {
	const up = "upstream \"a\" {\n  command = [\"a\"]\n}\n"
	tests := []struct {
		name string
		src  string
		env  map[string]string
		want *Cluster // ranges not compared
	}{
		{"no block: nothing shared", up, nil, nil},
		{"defaults", "cluster {\n  redis = \"redis://127.0.0.1:6379/0\"\n}\n" + up, nil,
			&Cluster{Redis: "redis://127.0.0.1:6379/0", OnRedisFailure: OnRedisFailureDeny, Timeout: DefaultRedisTimeout,
				KeyPrefix: DefaultRedisKeyPrefix}},
		{"everything set", `cluster {
  redis            = "rediss://proxy:s3cret@redis.internal:6380/2"
  on_redis_failure = "local"
  timeout          = "150ms"
  key_prefix       = "team-a:"
  advertise        = "10.0.0.5:8080"
  key              = env("CLUSTER_KEY")
  previous_keys    = [env("OLD_KEY")]
}
` + up, map[string]string{"CLUSTER_KEY": strings.Repeat("k", 32), "OLD_KEY": strings.Repeat("o", 32)}, &Cluster{Redis: "rediss://proxy:s3cret@redis.internal:6380/2",
			OnRedisFailure: OnRedisFailureLocal, Timeout: 150 * time.Millisecond, KeyPrefix: "team-a:", Advertise: "10.0.0.5:8080",
			Key: strings.Repeat("k", 32), PreviousKeys: []string{strings.Repeat("o", 32)}}},
		{"secret from the environment", "cluster {\n  redis = env(\"REDIS_URL\")\n}\n" + up,
			map[string]string{"REDIS_URL": "redis://:pw@10.0.0.5:6379"},
			&Cluster{Redis: "redis://:pw@10.0.0.5:6379", OnRedisFailure: OnRedisFailureDeny, Timeout: DefaultRedisTimeout,
				KeyPrefix: DefaultRedisKeyPrefix}},
		{"unix socket", "cluster {\n  redis = \"unix:///run/redis/redis.sock\"\n}\n" + up, nil,
			&Cluster{Redis: "unix:///run/redis/redis.sock", OnRedisFailure: OnRedisFailureDeny, Timeout: DefaultRedisTimeout,
				KeyPrefix: DefaultRedisKeyPrefix}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := ParseWithOptions([]byte(tt.src), "p.hcl", "/base", fakeEnv(tt.env))
			wantDiags := ""
			if tt.want != nil && tt.want.Key == "" {
				wantDiags = keylessWarning
			}
			if cfg == nil || FormatDiagnostics(diags) != wantDiags {
				t.Fatalf("diagnostics:\n%s\nwant:\n%s", FormatDiagnostics(diags), wantDiags)
			}
			if tt.want == nil {
				if cfg.Cluster != nil {
					t.Fatalf("cluster = %+v, want nil", cfg.Cluster)
				}
				return
			}
			if cfg.Cluster == nil {
				t.Fatal("cluster = nil")
			}
			if cfg.Cluster.DeclRange.Start.Line != 1 || cfg.Cluster.RedisRange.Start.Line != 2 {
				t.Errorf("ranges = %v, %v", cfg.Cluster.DeclRange, cfg.Cluster.RedisRange)
			}
			got := *cfg.Cluster
			got.DeclRange, got.RedisRange = tt.want.DeclRange, tt.want.RedisRange
			if !reflect.DeepEqual(got, *tt.want) {
				t.Errorf("cluster = %+v, want %+v", got, *tt.want)
			}
		})
	}
}

// keylessWarning is what a cluster block at p.hcl:1 without a key gets.
const keylessWarning = `p.hcl:1:1: warning: Cluster without key; Without "key", a legacy session ends with the replica that holds it (no other replica can adopt it), ` +
	`and a pagination cursor or requestState one replica hands a client is refused by the others. Set key = env("MCP_PROXY_CLUSTER_KEY"), ` +
	`the same secret of at least 32 bytes on every replica (openssl rand -hex 32).` + "\n"

// TestClusterErrors: every mistake in the cluster block is reported at its file:line, all
// in one run, and no diagnostic repeats the URL (it may hold a password).
func TestClusterErrors(t *testing.T) {
	src := `cluster {
  redis            = "http://user:hunter2@127.0.0.1:6379"
  on_redis_failure = "allow"
  timeout          = 5
  key_prefix       = "a b"
}
cluster {
  redis = "redis://:hunter2@host:99999/0"
  key   = "too-short-hunter2"
}
cluster {
  on_redis_failur = "local"
}
cluster {
  redis = "redis://:hunter2@host:6379/zero"
}
cluster {
  redis = "localhost:6379"
}
cluster {
  redis     = "redis://:hunter2@[::1"
  advertise = "0.0.0.0:8080"
}
upstream "a" {
  command = ["a"]
}
`
	var kept []string // the keyless blocks' warnings are TestParseCluster's
	for _, l := range strings.SplitAfter(mustFail(t, src, fakeEnv(nil)), "\n") {
		if !strings.Contains(l, ": warning: Cluster without key;") {
			kept = append(kept, l)
		}
	}
	got := strings.Join(kept, "")
	want := strings.Join([]string{
		`p.hcl:2:22: error: Invalid redis URL; "redis" must start with redis://, rediss:// (TLS), unix://, redis-sentinel:// or rediss-sentinel:// (Sentinel), or redis-cluster:// or rediss-cluster:// (Redis Cluster), not "http://".`,
		`p.hcl:3:22: error: Invalid on_redis_failure; "on_redis_failure" must be "deny" (refuse the calls a rate limit applies to while Redis is unreachable) or "local" (check the limits in each replica's memory meanwhile), not "allow".`,
		`p.hcl:4:22: error: Invalid duration; "timeout" must be a duration string, not a number; use a duration string such as "60s", "1m30s" or "500ms".`,
		`p.hcl:5:22: error: Invalid key_prefix; "key_prefix" must be 1 to 64 characters without spaces or braces, such as "mcp-proxy:".`,
		`p.hcl:7:1: error: Duplicate cluster block; Only one cluster block is allowed; the first one is at p.hcl:1:1.`,
		`p.hcl:8:11: error: Invalid redis URL; "redis" has an invalid port: it must be 1 to 65535.`,
		`p.hcl:9:11: error: Invalid key; "key" must be a secret of at least 32 bytes, such as the output of openssl rand -hex 32, written with env(); it has 17.`,
		`p.hcl:11:1: error: Duplicate cluster block; Only one cluster block is allowed; the first one is at p.hcl:1:1.`,
		`p.hcl:11:1: error: Missing redis; The cluster block needs the URL of the Redis server the replicas share, such as redis = "redis://127.0.0.1:6379/0" (write a password with env(), as in redis = env("MCP_PROXY_REDIS_URL")).`,
		`p.hcl:12:3: error: Unsupported argument; An argument named "on_redis_failur" is not expected here. Did you mean "on_redis_failure"?`,
		`p.hcl:14:1: error: Duplicate cluster block; Only one cluster block is allowed; the first one is at p.hcl:1:1.`,
		`p.hcl:15:11: error: Invalid redis URL; "redis" must end with a database number (/0, /1, …) or nothing after the host.`,
		`p.hcl:17:1: error: Duplicate cluster block; Only one cluster block is allowed; the first one is at p.hcl:1:1.`,
		`p.hcl:18:11: error: Invalid redis URL; "redis" must be a URL that starts with redis://, rediss:// (TLS) or unix://, such as redis://127.0.0.1:6379/0 (Sentinel: redis-sentinel://host:26379/0?master_name=NAME; Redis Cluster: redis-cluster://host:6379).`,
		`p.hcl:20:1: error: Duplicate cluster block; Only one cluster block is allowed; the first one is at p.hcl:1:1.`,
		`p.hcl:21:15: error: Invalid redis URL; "redis" is not a valid URL: missing ']' in host.`,
		`p.hcl:22:15: error: Invalid advertise; "advertise" must be the host:port at which the other replicas reach this one, such as "10.0.0.5:8080", not "0.0.0.0:8080".`,
	}, "\n") + "\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(got, "hunter2") {
		t.Error("a diagnostic shows the password")
	}
}

// TestListenRefusedAtFileLine: what run refuses from the file alone (a cluster whose
// listener is 0.0.0.0 without advertise; a listener beyond loopback without auth) is a
// load error at the listener's address, so validate refuses it too.
func TestListenRefusedAtFileLine(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"listen \"http\" {\n  address = \"0.0.0.0:8080\"\n  insecure_no_auth = true\n}\ncluster {\n  redis = \"redis://127.0.0.1:6379/0\"\n}\nupstream \"a\" {\n  command = [\"true\"]\n}\n", "Cluster without advertise"},
		{"listen \"http\" {\n  address = \"10.0.0.5:8080\"\n}\nupstream \"a\" {\n  command = [\"true\"]\n}\n", "Listener without authentication"},
	} {
		_, diags := Parse([]byte(tc.src), "p.hcl", ".")
		if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.want) || !strings.Contains(diags.Error(), "p.hcl:2,") {
			t.Errorf("%q: %v, want %q at p.hcl:2", tc.src, diags, tc.want)
		}
	}
	ok := "listen \"http\" {\n  address = \"0.0.0.0:8080\"\n  insecure_no_auth = true\n}\ncluster {\n  redis = \"redis://127.0.0.1:6379/0\"\n  advertise = \"10.0.0.5:8080\"\n}\nupstream \"a\" {\n  command = [\"true\"]\n}\n"
	if _, diags := Parse([]byte(ok), "p.hcl", "."); diags.HasErrors() {
		t.Errorf("with advertise: %v", diags)
	}
}
