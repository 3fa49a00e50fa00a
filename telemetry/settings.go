package telemetry

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// OTLP export protocols.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// DefaultService is the service.name of the proxy's spans unless told otherwise.
const DefaultService = "mcp-proxy"

// Settings says where spans go and how many are recorded. The zero value is not usable:
// Endpoint is required.
type Settings struct {
	// Endpoint is the collector's URL: for http/protobuf the full URL spans are POSTed
	// to (see TracesURL), for grpc http://host:port (plaintext) or https://host:port.
	Endpoint string
	Protocol string            // ProtocolHTTP or ProtocolGRPC; "" is ProtocolHTTP
	Headers  map[string]string // sent with every export; nil leaves the OTEL_EXPORTER_OTLP_*HEADERS variables to the exporter
	// Sampling is the fraction of new traces recorded, 0..1. A trace the caller started
	// keeps the caller's decision (its sampled flag) unless IgnoreParent is set.
	Sampling     float64
	IgnoreParent bool
	Service      string // service.name; "" is OTEL_SERVICE_NAME's, OTEL_RESOURCE_ATTRIBUTES's, else DefaultService
	Version      string // service.version
}

// TracesURL is the URL spans are POSTed to over http/protobuf, from a collector's base
// URL as the telemetry block and OTEL_EXPORTER_OTLP_ENDPOINT give it: /v1/traces is
// appended when the URL has no path of its own.
func TracesURL(base string) string {
	u, err := url.Parse(base)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return base
	}
	return strings.TrimSuffix(base, "/") + "/v1/traces"
}

// FromEnv reads the standard OpenTelemetry variables through lookup (os.LookupEnv in
// production). on is false when they do not ask for traces: no OTLP endpoint
// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, used as it is, or OTEL_EXPORTER_OTLP_ENDPOINT, a
// base URL), OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true. An error names a
// variable whose value the proxy cannot follow.
func FromEnv(lookup func(string) (string, bool)) (s Settings, on bool, err error) {
	get := func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	if Disabled(lookup) {
		return Settings{}, false, nil
	}
	switch exp := get("OTEL_TRACES_EXPORTER"); exp {
	case "", "otlp":
	case "none":
		return Settings{}, false, nil
	default:
		return Settings{}, false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: the proxy exports traces over OTLP only (otlp or none)", exp)
	}
	s.Protocol = get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if s.Protocol == "" {
		s.Protocol = get("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch s.Protocol {
	case "":
		s.Protocol = ProtocolHTTP
	case ProtocolHTTP, ProtocolGRPC:
	default:
		return Settings{}, false, fmt.Errorf("OTLP protocol %q: the proxy exports over %s or %s", s.Protocol, ProtocolHTTP, ProtocolGRPC)
	}
	if e := get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); e != "" {
		s.Endpoint = e
	} else if e := get("OTEL_EXPORTER_OTLP_ENDPOINT"); e != "" {
		s.Endpoint = e
		if s.Protocol == ProtocolHTTP {
			s.Endpoint = TracesURL(e)
		}
	} else {
		return Settings{}, false, nil
	}
	if err := checkEndpoint(s.Endpoint); err != nil {
		return Settings{}, false, err
	}
	s.Sampling, s.IgnoreParent, err = samplerFromEnv(get("OTEL_TRACES_SAMPLER"), get("OTEL_TRACES_SAMPLER_ARG"))
	if err != nil {
		return Settings{}, false, err
	}
	s.Service = get("OTEL_SERVICE_NAME")
	return s, true, nil
}

// Disabled reports whether OTEL_SDK_DISABLED=true turns OpenTelemetry off, which the
// proxy honours even when its telemetry block asks for traces.
func Disabled(lookup func(string) (string, bool)) bool {
	v, _ := lookup("OTEL_SDK_DISABLED")
	return strings.EqualFold(strings.TrimSpace(v), "true")
}

// samplerFromEnv maps OTEL_TRACES_SAMPLER and its argument to a ratio and whether the
// caller's decision is ignored.
func samplerFromEnv(name, arg string) (ratio float64, ignoreParent bool, err error) {
	ratioArg := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		f, err := strconv.ParseFloat(arg, 64)
		if err != nil || f < 0 || f > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: a ratio from 0 to 1 is required", arg)
		}
		return f, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return 1, false, nil
	case "parentbased_always_off":
		return 0, false, nil
	case "parentbased_traceidratio":
		f, err := ratioArg()
		return f, false, err
	case "always_on":
		return 1, true, nil
	case "always_off":
		return 0, true, nil
	case "traceidratio":
		f, err := ratioArg()
		return f, true, err
	}
	return 0, false, fmt.Errorf("OTEL_TRACES_SAMPLER=%q: the proxy knows always_on, always_off, traceidratio and their parentbased_ forms", name)
}

// checkEndpoint refuses what the exporters would silently replace by their default.
func checkEndpoint(e string) error {
	u, err := url.Parse(e)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("OTLP endpoint %q: an http:// or https:// URL with a host is required", e)
	}
	return nil
}
