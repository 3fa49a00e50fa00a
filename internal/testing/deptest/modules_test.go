package deptest

import (
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// A module a package may depend on, directly or through another, and why.
type reason struct{ module, why string }

var (
	logging = []reason{
		{"github.com/rs/zerolog", "structured logs to stderr (the house logger)"},
		{"github.com/mattn/go-colorable", "zerolog's console writer"},
		{"github.com/mattn/go-isatty", "zerolog's console writer"},
		{"golang.org/x/sys", "zerolog's terminal check; the child's unread-input check (FIONREAD); h1client's pooled-connection peek"},
	}
	hcl = []reason{
		{"github.com/hashicorp/hcl/v2", "the configuration language, and policy conditions in it"},
		{"github.com/zclconf/go-cty", "HCL's values"},
		{"github.com/agext/levenshtein", "HCL's did-you-mean suggestions"},
		{"github.com/apparentlymart/go-textseg/v15", "HCL's text segmentation"},
		{"github.com/mitchellh/go-wordwrap", "HCL's diagnostics"},
		{"github.com/google/go-cmp", "go-cty's value comparison"},
		{"golang.org/x/text", "go-cty's Unicode normalization; the policy's NFC check"},
	}
	ratelimit = []reason{{"golang.org/x/time", "token buckets of rate limits"}}
	jose      = []reason{{"github.com/go-jose/go-jose/v4", "JWT and JWKS verification"}}
	protobuf  = []reason{{"google.golang.org/protobuf", "the plugin interface's generated messages"}}
	grpc      = []reason{
		{"google.golang.org/grpc", "the plugin interface's transport (go-plugin's gRPC protocol)"},
		{"google.golang.org/genproto/googleapis/rpc", "gRPC's status messages"},
		{"golang.org/x/net", "gRPC's HTTP/2"},
		{"golang.org/x/sys", "gRPC's and go-plugin's system calls"},
		{"golang.org/x/text", "x/net's IDNA tables"},
	}
	goplugin = []reason{
		{"github.com/hashicorp/go-plugin", "out-of-process plugins: handshake, checksums, mTLS, process management"},
		{"github.com/hashicorp/go-hclog", "go-plugin's logger (forwarded into zerolog)"},
		{"github.com/hashicorp/yamux", "go-plugin's connection multiplexing"},
		{"github.com/oklog/run", "go-plugin's process groups of goroutines"},
		{"github.com/golang/protobuf", "go-plugin's generated gRPC code"},
		{"github.com/fatih/color", "go-hclog's terminal colours"},
		{"github.com/mattn/go-colorable", "go-hclog's terminal colours"},
		{"github.com/mattn/go-isatty", "go-hclog's terminal check"},
	}
	pluginSDK = join(protobuf, grpc, goplugin)
	// OTLP's messages and the collector's service, as the exporter and the test receiver
	// use them.
	otlpWire = []reason{
		{"go.opentelemetry.io/proto/otlp", "OTLP's trace messages and the collector's TraceService"},
		{"github.com/grpc-ecosystem/grpc-gateway/v2", "linked by OTLP's collector package (its generated HTTP gateway, unused)"},
		{"google.golang.org/genproto/googleapis/api", "grpc-gateway's and OTLP's HTTP annotations"},
	}
	otel = join(otlpWire, protobuf, grpc, []reason{
		{"go.opentelemetry.io/otel", "tracing API: propagation, attributes, status codes"},
		{"go.opentelemetry.io/otel/trace", "spans and span contexts"},
		{"go.opentelemetry.io/otel/sdk", "tracer provider, batch span processor, samplers, resource"},
		{"go.opentelemetry.io/otel/exporters/otlp/otlptrace", "the OTLP trace exporter"},
		{"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc", "the OTLP exporter over gRPC"},
		{"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp", "the OTLP exporter over HTTP"},
		{"go.opentelemetry.io/otel/metric", "the SDK's self-observation instruments (no-op: the proxy sets no meter provider)"},
		{"go.opentelemetry.io/otel/log", "the OpenTelemetry API's global logger"},
		{"go.opentelemetry.io/auto/sdk", "otel/trace's hook for eBPF auto-instrumentation (inactive)"},
		{"github.com/go-logr/logr", "the OpenTelemetry SDK's internal logger"},
		{"github.com/go-logr/stdr", "the OpenTelemetry SDK's internal logger"},
		{"github.com/cenkalti/backoff/v5", "the OTLP exporters' retries"},
		{"github.com/cespare/xxhash/v2", "hashing of attribute sets in otel/attribute"},
		{"github.com/google/uuid", "the SDK resource's service.instance.id"},
	})
	redis = []reason{
		{"github.com/redis/go-redis/v9", "the cluster block's shared state in Redis (rate-limit buckets)"},
		{"go.uber.org/atomic", "go-redis's connection pool counters"},
		{"github.com/cespare/xxhash/v2", "go-redis's hash slots and client-side hashing"},
	}
	prometheus = []reason{
		{"github.com/prometheus/client_golang", "the /metrics registry, the Go runtime and process collectors, the exposition handler"},
		{"github.com/prometheus/client_model", "client_golang's metric messages"},
		{"github.com/prometheus/common", "client_golang's text exposition format"},
		{"github.com/prometheus/procfs", "the process collector's /proc reads"},
		{"github.com/beorn7/perks", "client_golang's summaries (unused here, linked by the package)"},
		{"github.com/cespare/xxhash/v2", "client_golang's label hashing"},
		{"github.com/munnerz/goautoneg", "client_golang's content negotiation of /metrics"},
		{"google.golang.org/protobuf", "client_model's generated messages"},
		{"golang.org/x/sys", "procfs's system calls"},
	}
)

func join(rs ...[]reason) []reason {
	var out []reason
	for _, r := range rs {
		out = append(out, r...)
	}
	return out
}

// modules lists, for each package, the third-party modules it may depend on
// transitively. The wire layer and the test server use the standard library only.
var modules = map[string][]reason{
	"jsonrpc":                       nil,
	"internal/jsonx":                nil,
	"internal/h1":                   nil,
	"internal/httpsyntax":           nil, // its tests compare it with x/net/http/httpguts, the package itself uses the standard library only
	"internal/h1client":             {{"golang.org/x/sys", "the non-blocking peek that checks a pooled connection is still open (MSG_PEEK)"}},
	"internal/glob":                 nil,
	"internal/clock":                nil,
	"internal/lazyre":               nil,
	"internal/seal":                 nil, // AES-GCM and HMAC of the standard library
	"internal/testing/leaktest":     nil,
	"internal/testing/benchwire":    nil, // the benchmarks' hand-written HTTP/1.1 client: the standard library only
	"internal/testing/testserver":   nil, // must build anywhere, with nothing but Go
	"internal/testing/authserver":   nil, // the standard library only: it shares nothing with what it tests
	"principal":                     nil,
	"mcp":                           nil,
	"cmd/mcp-bench":                 {{"golang.org/x/sys", "the floor forwarder's HTTP leg (internal/h1client's pooled-connection peek); posix_fadvise before idle readings"}},
	"config":                        hcl,
	"internal/importer":             hcl, // writes HCL with hclwrite
	"sandbox":                       {{"golang.org/x/sys", "Landlock, prctl, capset, ptrace, waitid, fcntl and flock for the thread start, its lifeline and private TMPDIRs, and the loopback interface's ioctl in the launcher"}},
	"cmd/mcp-proxy-sandbox":         {{"golang.org/x/sys", "the sandbox launcher (package sandbox)"}},
	"transport":                     logging,
	"upstream":                      logging,
	"credential":                    join(logging, jose), // jose: the private_key_jwt client assertion
	"router":                        logging,
	"server":                        logging,
	"auth":                          join(logging, jose),
	"policy":                        join(logging, hcl, ratelimit),
	"plugins/proto":                 join(protobuf, grpc),
	"plugins/sdk":                   pluginSDK,
	"plugins":                       join(logging, hcl, ratelimit, pluginSDK),
	"metrics":                       join(logging, hcl, ratelimit, pluginSDK, prometheus), // the observers of policy and plugins
	"admin":                         join(logging, hcl, ratelimit, pluginSDK, prometheus), // through metrics
	"internal/testing/testplugin":   pluginSDK,
	"plugins/guard":                 {{"golang.org/x/net", "IDNA host normalization (idna) in the guard plugin's URL check"}, {"golang.org/x/text", "x/net/idna's Unicode tables"}},
	"plugins/redact":                nil,
	"cmd/mcp-proxy-guard":           pluginSDK,
	"cmd/mcp-proxy-redact":          pluginSDK,
	"proxy":                         join(logging, hcl, ratelimit, jose, pluginSDK, otel, prometheus, redis),
	"cmd/mcp-proxy":                 join(logging, hcl, ratelimit, jose, pluginSDK, otel, prometheus, redis), // through proxy
	"cluster":                       join(logging, hcl, ratelimit, redis, jose),                              // jose: through credential (the token store's types)
	"internal/testing/topology":     nil,                                                                     // starts redis-server, haproxy and mcp-proxy: the standard library only
	"internal/testing/devcluster":   nil,
	"telemetry":                     join(logging, otel),
	"trust":                         join(logging, hcl), // hcl: the diagnostics validate prints
	"search":                        nil,                // the standard library only
	"internal/testing/otlptest":     join(otlpWire, protobuf, grpc),
	"internal/testing/otlpsink":     nil, // the standard library only
	"internal/testing/searchcorpus": nil, // runs npm and mcp-proxy: the standard library only
	"internal/testing/searcheval":   nil,
	"internal/testing/searchbench":  nil,
	"internal/testing/searchlex":    nil, // runs npm pack for WordNet: the standard library only
	"internal/testing/searchembed":  nil, // runs npm pack for the word vectors: the standard library only
}

// TestThirdPartyModules checks every package's transitive third-party modules against
// its list: a new dependency must be added here, with its reason, before it lands.
func TestThirdPartyModules(t *testing.T) {
	out, err := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}}", "../../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		name := strings.TrimPrefix(pkg, module)
		if name == pkg || strings.HasPrefix(name, "e2e") || strings.HasPrefix(name, "internal/testing/deptest") {
			continue
		}
		allowedMods, known := modules[name]
		if !known {
			t.Errorf("package %s has no entry in modules_test.go: list the modules it may use, and why", name)
			continue
		}
		deps, err := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if not .Module.Main}}{{.Module.Path}}{{end}}{{end}}", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		seen := map[string]bool{}
		for _, m := range strings.Fields(string(deps)) {
			seen[m] = true
		}
		var bad []string
		for m := range seen {
			ok := false
			for _, r := range allowedMods {
				ok = ok || r.module == m
			}
			if !ok {
				bad = append(bad, m)
			}
		}
		sort.Strings(bad)
		for _, m := range bad {
			t.Errorf("%s depends on %s, which is not in its list in modules_test.go (add it with a reason, or drop the dependency)", name, m)
		}
	}
}
