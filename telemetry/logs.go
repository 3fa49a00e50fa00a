package telemetry

import (
	"context"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
)

// Log fields of a traced call.
const (
	LogTraceID = "trace_id"
	LogSpanID  = "span_id"
)

// IDs returns the trace of the call whose context ctx is, as the log and the audit
// records name it: its trace id when the call is traced (sampled in, or its client sent
// a trace context: the client's trace id even when the call is not sampled), and the id
// of the span the proxy records for it (the request's server span, or the upstream
// leg's client span below it) only when there is one. Both are "" for a call that is not
// traced: a sampled-out call without the client's context has no trace anyone could
// look up.
func IDs(ctx context.Context) (traceID, spanID string) {
	span := trace.SpanFromContext(ctx)
	sc := span.SpanContext()
	if !sc.IsValid() {
		return "", ""
	}
	traceID = sc.TraceID().String()
	if span.IsRecording() {
		spanID = sc.SpanID().String()
	}
	return traceID, spanID
}

// LogHook adds trace_id and span_id (see IDs) to every log line written with the
// context of a traced call (zerolog's Event.Ctx): install it on the proxy's logger when
// tracing is on. A line without a context, or with one of an untraced call, is left as
// it is.
type LogHook struct{}

var _ zerolog.Hook = LogHook{}

// Run implements zerolog.Hook.
func (LogHook) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	span := trace.SpanFromContext(e.GetCtx())
	sc := span.SpanContext()
	if !sc.IsValid() {
		return
	}
	tid := sc.TraceID()
	e.Hex(LogTraceID, tid[:])
	if span.IsRecording() {
		sid := sc.SpanID()
		e.Hex(LogSpanID, sid[:])
	}
}
