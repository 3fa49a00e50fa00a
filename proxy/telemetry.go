package proxy

import (
	"context"
	"net/http"
	"os"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/telemetry"
)

// tracingFlushTimeout bounds how long the proxy waits, on exit, for the spans still
// buffered to reach the collector.
const tracingFlushTimeout = 5 * time.Second

// startTracing starts the tracing that the telemetry block, or without one the OTEL_*
// environment, asks for, for a binary of version; nil (and nothing running) when neither does. Variables the
// proxy cannot follow are logged and leave tracing off: the environment is shared with
// other programs, and the proxy serves without traces rather than not at all.
func startTracing(ctx context.Context, cfg *config.Config, version string, log zerolog.Logger) (*telemetry.Tracing, error) {
	lookup := os.LookupEnv
	if telemetry.Disabled(lookup) {
		if cfg.Telemetry != nil {
			log.Info().Msg("OTEL_SDK_DISABLED=true: tracing off despite the telemetry block")
		}
		return nil, nil
	}
	var s telemetry.Settings
	if t := cfg.Telemetry; t != nil {
		s = telemetry.Settings{Endpoint: t.Endpoint, Protocol: t.Protocol, Sampling: t.Sampling, Service: t.Service, Headers: t.Headers}
		if s.Protocol == telemetry.ProtocolHTTP {
			s.Endpoint = telemetry.TracesURL(s.Endpoint)
		}
	} else {
		var on bool
		var err error
		if s, on, err = telemetry.FromEnv(lookup); err != nil {
			log.Warn().Err(err).Msg("tracing off: the OTEL_* environment asks for what the proxy cannot do")
			return nil, nil
		} else if !on {
			return nil, nil
		}
	}
	s.Version = version
	otel.SetErrorHandler(&telemetry.ErrorLog{Log: log.With().Str("component", "tracing").Logger()})
	tr, err := telemetry.Start(ctx, s)
	if err != nil {
		return nil, err
	}
	source := "telemetry block"
	if cfg.Telemetry == nil {
		source = "OTEL_* environment"
	}
	log.Info().Str("endpoint", s.Endpoint).Str("protocol", s.Protocol).Float64("sampling", s.Sampling).
		Str("from", source).Msg("tracing to an OTLP collector")
	return tr, nil
}

// stopTracing flushes the spans still buffered and stops the exporter.
func stopTracing(tr *telemetry.Tracing, log zerolog.Logger) {
	if tr == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		log.Warn().Err(err).Msg("stopping tracing; spans may be lost")
	}
}

// traceLogs returns log with telemetry.LogHook when the proxy traces (tr not nil): the
// lines logged with a traced call's context carry its trace_id and span_id.
func traceLogs(log zerolog.Logger, tr *telemetry.Tracing) zerolog.Logger {
	if tr == nil {
		return log
	}
	return log.Hook(telemetry.LogHook{})
}

// httpTraceContext is the HTTP front end's hook that reads a request's traceparent
// header (a call's parent when its _meta has none); nil without tracing.
func httpTraceContext(tr *telemetry.Tracing) func(context.Context, *http.Request) context.Context {
	if tr == nil {
		return nil
	}
	return tr.HTTPContext
}
