package telemetry

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// scope is the instrumentation scope of the proxy's spans.
const scope = "github.com/mcp-proxy/mcp-proxy/telemetry"

// Tracing makes and exports the spans of routed calls. Create it with Start; its
// middlewares (Request, Upstream, or Wrap for both) go into the router's chain; Shutdown
// flushes what is buffered and stops the exporter. A nil *Tracing traces nothing.
type Tracing struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	// ratio is the sampler's ratio for new traces: at 0, a call without a client's trace
	// context starts no span at all.
	ratio float64
	// followParent: the sampler keeps a caller's decision, so that a call whose client
	// said "not sampled" needs no span at all.
	followParent bool

	shutdownOnce sync.Once
	shutdownErr  error
}

// Start builds the exporter (OTLP over HTTP or gRPC; neither connects before the first
// export), a batch span processor (one goroutine, stopped by Shutdown) and a
// parent-based ratio sampler.
func Start(ctx context.Context, s Settings) (*Tracing, error) {
	if err := checkEndpoint(s.Endpoint); err != nil {
		return nil, err
	}
	exp, err := newExporter(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("starting the OTLP exporter: %w", err)
	}
	res, err := newResource(ctx, s)
	if err != nil && res == nil {
		_ = exp.Shutdown(ctx) // nothing was exported: there is nothing to lose
		return nil, fmt.Errorf("describing the proxy for traces: %w", err)
	}
	return newTracing(sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(Sampler(s)),
		sdktrace.WithResource(res),
	), s), nil
}

// newTracing wraps a provider (tests give one with an in-memory exporter) whose sampler
// is Sampler(s).
func newTracing(tp *sdktrace.TracerProvider, s Settings) *Tracing {
	return &Tracing{provider: tp, tracer: tp.Tracer(scope), ratio: s.Sampling, followParent: !s.IgnoreParent}
}

// Sampler is the sampler Settings ask for: a trace-id ratio for new traces, and the
// caller's decision for traces it started unless IgnoreParent.
func Sampler(s Settings) sdktrace.Sampler {
	var root sdktrace.Sampler
	switch {
	case s.Sampling >= 1:
		root = sdktrace.AlwaysSample()
	case s.Sampling <= 0:
		root = sdktrace.NeverSample()
	default:
		root = sdktrace.TraceIDRatioBased(s.Sampling)
	}
	if s.IgnoreParent {
		return root
	}
	return sdktrace.ParentBased(root)
}

func newExporter(ctx context.Context, s Settings) (sdktrace.SpanExporter, error) {
	if s.Protocol == ProtocolGRPC {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpointURL(s.Endpoint)}
		if s.Headers != nil {
			opts = append(opts, otlptracegrpc.WithHeaders(s.Headers))
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(s.Endpoint)}
	if s.Headers != nil {
		opts = append(opts, otlptracehttp.WithHeaders(s.Headers))
	}
	return otlptracehttp.New(ctx, opts...)
}

// newResource describes the proxy: service.name (Settings, else the environment's, else
// DefaultService), service.version, the SDK, and OTEL_RESOURCE_ATTRIBUTES.
func newResource(ctx context.Context, s Settings) (*resource.Resource, error) {
	opts := []resource.Option{
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", DefaultService)),
		resource.WithFromEnv(), // later options win: the environment over the default
	}
	if s.Service != "" {
		opts = append(opts, resource.WithAttributes(attribute.String("service.name", s.Service)))
	}
	if s.Version != "" {
		opts = append(opts, resource.WithAttributes(attribute.String("service.version", s.Version)))
	}
	res, err := resource.New(ctx, opts...)
	if errors.Is(err, resource.ErrPartialResource) {
		err = nil // a malformed OTEL_RESOURCE_ATTRIBUTES entry is left out
	}
	return res, err
}

// Shutdown exports the spans still buffered, within ctx's deadline, and stops the
// exporter. It is safe on nil and to call twice (the second call returns the first's
// error).
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	t.shutdownOnce.Do(func() {
		if err := t.provider.Shutdown(ctx); err != nil {
			t.shutdownErr = fmt.Errorf("flushing traces: %w", err)
		}
	})
	return t.shutdownErr
}
