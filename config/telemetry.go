package config

import (
	"net/url"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// OTLP export protocols of the telemetry block (the values OTEL_EXPORTER_OTLP_PROTOCOL
// takes).
const (
	OTLPHTTP = "http/protobuf"
	OTLPGRPC = "grpc"
)

// Telemetry is the telemetry block: traces exported over OTLP to an OpenTelemetry
// collector. Without the block the standard OTEL_* environment variables may still turn
// tracing on (the telemetry package reads them); the block, when present, wins.
type Telemetry struct {
	// Endpoint is the collector's base URL: http://host:port, or https:// for TLS. For
	// http/protobuf, /v1/traces is appended when the URL has no path. Default
	// http://localhost:4318 (http/protobuf) or http://localhost:4317 (grpc).
	Endpoint string
	Protocol string            // OTLPHTTP (default) or OTLPGRPC
	Sampling float64           // fraction of new traces recorded, 0..1; default 1 (a caller's sampled flag is followed)
	Service  string            // service.name of the proxy's spans; default "mcp-proxy"
	Headers  map[string]string // sent with every export (the collector's credentials); nil when not set
	// DeclRange is where the block is, for diagnostics reported later.
	DeclRange hcl.Range
}

// Defaults of the telemetry block.
const (
	DefaultOTLPHTTPEndpoint = "http://localhost:4318"
	DefaultOTLPGRPCEndpoint = "http://localhost:4317"
	DefaultServiceName      = "mcp-proxy"
)

type rawTelemetry struct {
	Endpoint    *hcl.Attribute `hcl:"otlp_endpoint,optional"`
	Protocol    *hcl.Attribute `hcl:"protocol,optional"`
	Sampling    *hcl.Attribute `hcl:"sampling,optional"`
	ServiceName *hcl.Attribute `hcl:"service_name,optional"`
	Headers     *hcl.Attribute `hcl:"headers,optional"`

	DefRange hcl.Range `hcl:",def_range"`
}

func decodeTelemetry(e *evaluator, raws []rawTelemetry) *Telemetry {
	return single(e, raws, "telemetry", func(r *rawTelemetry) hcl.Range { return r.DefRange },
		func(raw *rawTelemetry) *Telemetry { return decodeTelemetryBlock(e, raw) })
}

// decodeTelemetryBlock evaluates, defaults and validates one telemetry block.
func decodeTelemetryBlock(e *evaluator, raw *rawTelemetry) *Telemetry {
	t := &Telemetry{Protocol: OTLPHTTP, Sampling: 1, Service: DefaultServiceName, DeclRange: raw.DefRange}
	if s, ok := e.string(raw.Protocol); ok {
		switch s {
		case OTLPHTTP, OTLPGRPC:
			t.Protocol = s
		default:
			e.errorf(raw.Protocol, "Invalid protocol", "\"protocol\" must be %q or %q, got %q.", OTLPHTTP, OTLPGRPC, s)
		}
	}
	t.Endpoint = DefaultOTLPHTTPEndpoint
	if t.Protocol == OTLPGRPC {
		t.Endpoint = DefaultOTLPGRPCEndpoint
	}
	if s, ok := e.string(raw.Endpoint); ok {
		u, err := url.Parse(s)
		switch {
		case err != nil:
			e.errorf(raw.Endpoint, "Invalid otlp_endpoint", "\"otlp_endpoint\" must be a URL such as %q: %v.", DefaultOTLPHTTPEndpoint, err)
		case u.Scheme != "http" && u.Scheme != "https":
			e.errorf(raw.Endpoint, "Invalid otlp_endpoint",
				"\"otlp_endpoint\" must start with http:// or https://, such as %q, got %q.", DefaultOTLPHTTPEndpoint, s)
		case u.Host == "":
			e.errorf(raw.Endpoint, "Invalid otlp_endpoint", "\"otlp_endpoint\" must name a host and port, such as %q, got %q.",
				DefaultOTLPHTTPEndpoint, s)
		default:
			t.Endpoint = s
		}
	}
	if raw.Sampling != nil {
		if v, ok := e.value(raw.Sampling, cty.Number, "a number from 0 to 1"); ok {
			f, _ := v.AsBigFloat().Float64()
			if f < 0 || f > 1 {
				e.errorf(raw.Sampling, "Invalid sampling",
					"\"sampling\" is the fraction of traces recorded, from 0 (none) to 1 (all), got %v.", f)
			} else {
				t.Sampling = f
			}
		}
	}
	if s, ok := e.string(raw.ServiceName); ok {
		if s == "" {
			e.errorf(raw.ServiceName, "Invalid service_name", "\"service_name\" must not be empty; omit it to use %q.", DefaultServiceName)
		} else {
			t.Service = s
		}
	}
	if m, ok := e.stringMap(raw.Headers); ok {
		t.Headers = m
	}
	return t
}
