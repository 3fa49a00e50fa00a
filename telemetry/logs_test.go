package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/router"
)

// TestLogHook: a line logged with a call's context carries the call's trace: the trace
// id and the recording span's id when the call is sampled; the client's trace id alone
// when the client sent an unsampled context; nothing when the call is sampled out
// without one (its ids are no one's). IDs, which the audit records use, agrees.
func TestLogHook(t *testing.T) {
	cases := []struct {
		name      string
		sampling  float64
		params    string
		wantTrace string // "span": the recorded span's trace
		wantSpan  bool
	}{
		{"sampled", 1, `{"name":"search"}`, "span", true},
		{"sampled, client context", 0, `{"name":"search","_meta":{"traceparent":"` + clientParent + `"}}`, clientTrace, true},
		{"unsampled client context", 1, `{"name":"search","_meta":{"traceparent":"00-` + clientTrace + `-` + clientSpan + `-00"}}`, clientTrace, false},
		{"sampled out", 0, `{"name":"search"}`, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, rec := testTracing(c.sampling)
			var buf bytes.Buffer
			log := zerolog.New(&buf).Hook(LogHook{})
			var traceID, spanID string
			end := func(ctx context.Context, _ *router.Call, reply router.Reply) {
				log.Warn().Ctx(ctx).Msg("upstream failed")
				log.Warn().Msg("no context")
				traceID, spanID = IDs(ctx)
				reply(json.RawMessage(`{}`), nil)
			}
			call(t, chain(end, tr.Wrap(nil)...), context.Background(), toolCall(c.params))
			want, wantSpan := c.wantTrace, ""
			if spans := rec.Ended(); len(spans) > 0 {
				leg := spans[0] // the upstream leg ends first
				if want == "span" {
					want = leg.SpanContext().TraceID().String()
				}
				wantSpan = leg.SpanContext().SpanID().String()
			}
			if !c.wantSpan {
				wantSpan = ""
			}
			lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
			if len(lines) != 2 {
				t.Fatalf("log:\n%s", buf.Bytes())
			}
			var withCtx, without map[string]any
			if err := json.Unmarshal(lines[0], &withCtx); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(lines[1], &without); err != nil {
				t.Fatal(err)
			}
			if got, _ := withCtx[LogTraceID].(string); got != want {
				t.Errorf("trace_id %q, want %q: %s", got, want, lines[0])
			}
			if got, _ := withCtx[LogSpanID].(string); got != wantSpan {
				t.Errorf("span_id %q, want %q: %s", got, wantSpan, lines[0])
			}
			if _, ok := without[LogTraceID]; ok {
				t.Errorf("a line without context has a trace id: %s", lines[1])
			}
			if traceID != want || spanID != wantSpan {
				t.Errorf("IDs = %q %q, want %q %q", traceID, spanID, want, wantSpan)
			}
		})
	}
}
