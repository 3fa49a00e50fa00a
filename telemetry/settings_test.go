package telemetry

import (
	"reflect"
	"strings"
	"testing"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

func TestFromEnv(t *testing.T) {
	tests := []struct {
		name string
		vars map[string]string
		want Settings
		on   bool
		err  string
	}{
		{name: "nothing", vars: nil},
		{name: "protocol alone is not enough", vars: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}},
		{name: "base endpoint", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
			want: Settings{Endpoint: "http://collector:4318/v1/traces", Protocol: ProtocolHTTP, Sampling: 1}, on: true},
		{name: "base endpoint with a path", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/otlp/v1/traces"},
			want: Settings{Endpoint: "http://collector:4318/otlp/v1/traces", Protocol: ProtocolHTTP, Sampling: 1}, on: true},
		{name: "traces endpoint wins, as it is", vars: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT":        "http://collector:4318",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://traces.example.com/",
		}, want: Settings{Endpoint: "https://traces.example.com/", Protocol: ProtocolHTTP, Sampling: 1}, on: true},
		{name: "grpc with a ratio and a name", vars: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_TRACES_SAMPLER":         "parentbased_traceidratio",
			"OTEL_TRACES_SAMPLER_ARG":     "0.1",
			"OTEL_SERVICE_NAME":           "edge",
		}, want: Settings{Endpoint: "http://collector:4317", Protocol: ProtocolGRPC, Sampling: 0.1, Service: "edge"}, on: true},
		{name: "traces protocol wins", vars: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT":        "http://collector:4317",
			"OTEL_EXPORTER_OTLP_PROTOCOL":        "http/protobuf",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
		}, want: Settings{Endpoint: "http://collector:4317", Protocol: ProtocolGRPC, Sampling: 1}, on: true},
		{name: "always_off ignores the parent", vars: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "always_off",
		}, want: Settings{Endpoint: "http://c:4318/v1/traces", Protocol: ProtocolHTTP, Sampling: 0, IgnoreParent: true}, on: true},
		{name: "exporter none", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}},
		{name: "SDK disabled", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}},
		{name: "zipkin", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "zipkin"},
			err: "OTEL_TRACES_EXPORTER"},
		{name: "http/json", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			err: "http/json"},
		{name: "bad ratio", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "traceidratio",
			"OTEL_TRACES_SAMPLER_ARG": "2"}, err: "OTEL_TRACES_SAMPLER_ARG"},
		{name: "unknown sampler", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "jaeger_remote"},
			err: "OTEL_TRACES_SAMPLER"},
		{name: "endpoint without scheme", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, err: "collector:4318"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, on, err := FromEnv(env(tt.vars))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want one naming %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if on != tt.on || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v on=%v, want %+v on=%v", got, on, tt.want, tt.on)
			}
		})
	}
}

func TestTracesURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://localhost:4318":           "http://localhost:4318/v1/traces",
		"http://localhost:4318/":          "http://localhost:4318/v1/traces",
		"https://otel.example.com/otlp":   "https://otel.example.com/otlp",
		"http://c:4318/v1/traces":         "http://c:4318/v1/traces",
		"https://c/custom/path/v1/traces": "https://c/custom/path/v1/traces",
	} {
		if got := TracesURL(in); got != want {
			t.Errorf("TracesURL(%q) = %q, want %q", in, got, want)
		}
	}
}
