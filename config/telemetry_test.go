package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

const telemetryUpstream = "upstream \"a\" {\n  command = [\"x\"]\n}\n"

func TestTelemetryBlock(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want *Telemetry
	}{
		{"absent", "", nil},
		{"defaults", "telemetry {}\n",
			&Telemetry{Endpoint: DefaultOTLPHTTPEndpoint, Protocol: OTLPHTTP, Sampling: 1, Service: DefaultServiceName}},
		{"grpc default endpoint", "telemetry {\n  protocol = \"grpc\"\n}\n",
			&Telemetry{Endpoint: DefaultOTLPGRPCEndpoint, Protocol: OTLPGRPC, Sampling: 1, Service: DefaultServiceName}},
		{"everything", `telemetry {
  otlp_endpoint = "https://otel.example.com:4318"
  protocol      = "http/protobuf"
  sampling      = 0.1
  service_name  = "gateway"
  headers       = { Authorization = "Bearer t" }
}
`, &Telemetry{Endpoint: "https://otel.example.com:4318", Protocol: OTLPHTTP, Sampling: 0.1, Service: "gateway",
			Headers: map[string]string{"Authorization": "Bearer t"}}},
		{"sampling zero", "telemetry {\n  sampling = 0\n}\n",
			&Telemetry{Endpoint: DefaultOTLPHTTPEndpoint, Protocol: OTLPHTTP, Sampling: 0, Service: DefaultServiceName}},
		{"sampling from env", "telemetry {\n  sampling = env(\"RATE\")\n}\n",
			&Telemetry{Endpoint: DefaultOTLPHTTPEndpoint, Protocol: OTLPHTTP, Sampling: 0.25, Service: DefaultServiceName}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParse(t, tt.src+telemetryUpstream, fakeEnv(map[string]string{"RATE": "0.25"}))
			got := cfg.Telemetry
			if got != nil {
				if got.DeclRange.Start.Line != 1 {
					t.Errorf("DeclRange = %v, want line 1", got.DeclRange)
				}
				c := *got
				c.DeclRange = hcl.Range{}
				got = &c
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestTelemetryBlockErrors(t *testing.T) {
	src := `telemetry {
  otlp_endpoint = "localhost:4318"
  protocol      = "http/json"
  sampling      = 1.5
  service_name  = ""
  headers       = ["x"]
  exporter      = "otlp"
}
telemetry {
  sampling = "all"
}
` + telemetryUpstream
	out := mustFail(t, src, Options{})
	for _, want := range []string{
		`p.hcl:2:19: error: Invalid otlp_endpoint`,
		`p.hcl:3:19: error: Invalid protocol`,
		`p.hcl:4:19: error: Invalid sampling`,
		`p.hcl:5:19: error: Invalid service_name`,
		`p.hcl:6:`,
		`p.hcl:7:3: error: Unsupported argument`,
		`p.hcl:9:1: error: Duplicate telemetry block`,
		`p.hcl:10:`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, out)
		}
	}
}
