package proxy

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// TestStartTracing: the telemetry block, else the OTEL_* environment, turns tracing on;
// with neither, or with OTEL_SDK_DISABLED, nothing runs; an environment the proxy cannot
// follow leaves it off without failing the start.
func TestStartTracing(t *testing.T) {
	block := &config.Telemetry{Endpoint: "http://127.0.0.1:1", Protocol: config.OTLPHTTP, Sampling: 1, Service: "x"}
	tests := []struct {
		name  string
		block *config.Telemetry
		env   map[string]string
		on    bool
	}{
		{name: "nothing"},
		{name: "environment", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, on: true},
		{name: "block", block: block, on: true},
		{name: "grpc block", block: &config.Telemetry{Endpoint: "http://127.0.0.1:1", Protocol: config.OTLPGRPC, Sampling: 0.5}, on: true},
		{name: "SDK disabled", block: block, env: map[string]string{"OTEL_SDK_DISABLED": "true"}},
		{name: "environment the proxy cannot follow", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1",
			"OTEL_TRACES_SAMPLER": "jaeger_remote"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
				"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"} {
				t.Setenv(k, tt.env[k])
			}
			tr, err := startTracing(context.Background(), &config.Config{Telemetry: tt.block}, "test", zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			if (tr != nil) != tt.on {
				t.Errorf("tracing on = %v, want %v", tr != nil, tt.on)
			}
			if httpTraceContext(tr) == nil == tt.on {
				t.Errorf("HTTP hook present = %v, want %v", httpTraceContext(tr) != nil, tt.on)
			}
			stopTracing(tr, zerolog.Nop()) // nothing buffered: returns at once
		})
	}
}
