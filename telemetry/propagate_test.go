package telemetry

import (
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestParseTraceparent(t *testing.T) {
	tests := []struct {
		in      string
		ok      bool
		sampled bool
	}{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true, true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true, false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03", true, true}, // unknown flags dropped
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later", true, true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later", false, false}, // version 00 has exactly 4 fields
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", false, false},
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false, false},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false, false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false, false},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false, false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", false, false},
		{"00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01", false, false},
		{"", false, false},
	}
	for _, tt := range tests {
		cfg, ok := parseTraceparent([]byte(tt.in))
		if ok != tt.ok || (ok && cfg.TraceFlags.IsSampled() != tt.sampled) {
			t.Errorf("parseTraceparent(%q) = %v sampled %v, want %v sampled %v", tt.in, ok, cfg.TraceFlags.IsSampled(), tt.ok, tt.sampled)
		}
	}
}

func TestMetaContext(t *testing.T) {
	for params, want := range map[string]bool{
		`{"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}`:                     true,
		`{"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"=bad"}}`: true,
		`{"_meta":{"traceparent":7}}`:  false,
		`{"_meta":"x"}`:                false,
		`{"name":"x"}`:                 false,
		`[]`:                           false,
		``:                             false,
		`{"_meta":{"tracestate":"a"}}`: false,
	} {
		sc, ok := paramsContext(json.RawMessage(params))
		if ok != want || (ok && (!sc.IsRemote() || !sc.IsValid())) {
			t.Errorf("metaContext(%s) = %v %v, want %v", params, sc, ok, want)
		}
	}
	sc, _ := paramsContext(json.RawMessage(`{"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"a=1,b=2"}}`))
	if sc.TraceState().String() != "a=1,b=2" {
		t.Errorf("tracestate %q", sc.TraceState())
	}
}

func TestInjectMeta(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	state, _ := trace.ParseTraceState(`a=1,b=x"y`)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	const tp = `"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"`
	tests := []struct {
		params string
		sc     trace.SpanContext
		want   string
	}{
		{`{"name":"x"}`, sc, `{"name":"x","_meta":{` + tp + `}}`},
		{`{}`, sc, `{"_meta":{` + tp + `}}`},
		{``, sc, `{"_meta":{` + tp + `}}`},
		{`{"name":"x","_meta":{"progressToken":1,"traceparent":"old","tracestate":"old=1"}}`, sc,
			`{"name":"x","_meta":{"progressToken":1,` + tp + `}}`},
		{`{"_meta":"junk"}`, sc, `{"_meta":{` + tp + `}}`},
		{` { "a" : 1 } `, sc, ` { "a" : 1 ,"_meta":{` + tp + `}} `},
		{`{ }`, sc, `{ "_meta":{` + tp + `}}`},
		{`{"_meta": { "x" : [1,{"traceparent":2}] , "tracestate":"z=1" } ,"b":2}`, sc, `{"_meta": {"x" : [1,{"traceparent":2}],` + tp + `} ,"b":2}`},
		{`{"_meta":{}}`, sc.WithTraceState(state), `{"_meta":{` + tp + `,"tracestate":"a=1,b=x\"y"}}`},
	}
	for _, tt := range tests {
		got, err := injectMeta(json.RawMessage(tt.params), tt.sc)
		if err != nil || string(got) != tt.want {
			t.Errorf("injectMeta(%s) = %s, %v; want %s", tt.params, got, err, tt.want)
		}
	}
	if _, err := injectMeta(json.RawMessage(`[1]`), sc); err == nil {
		t.Error("params that are not an object took _meta")
	}
}

// FuzzMetaContext: whatever a client puts in _meta, reading it neither panics nor yields
// an invalid context, and what is read goes upstream as it came.
func FuzzMetaContext(f *testing.F) {
	f.Add(`{"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"a=1"}}`)
	f.Add(`{"_meta":{"traceparent":"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x"}}`)
	f.Fuzz(func(t *testing.T, params string) {
		sc, ok := paramsContext(json.RawMessage(params))
		if !ok {
			return
		}
		if !sc.IsValid() {
			t.Fatalf("invalid context from %s", params)
		}
		out, err := injectMeta(json.RawMessage(params), sc)
		if err != nil {
			return
		}
		if json.Valid([]byte(params)) && !json.Valid(out) {
			t.Fatalf("injecting into %s gave invalid JSON %s", params, out)
		}
		back, ok := paramsContext(out)
		if !ok || back.TraceID() != sc.TraceID() || back.SpanID() != sc.SpanID() || back.TraceFlags() != sc.TraceFlags() ||
			back.TraceState().String() != sc.TraceState().String() {
			t.Fatalf("round trip of %s: %v, then %s gave %v", params, sc, out, back)
		}
	})
}

// TestClientContextQuickCheck: the quick search that spares most requests a scan never
// misses a trace context that the full scan finds (escaped keys, a string ending in
// _meta before the key, the key after other members).
func TestClientContextQuickCheck(t *testing.T) {
	const tp = `"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"`
	for _, params := range []string{
		`{"_meta":{"traceparent":` + tp + `}}`,
		`{"name":"x_meta","_meta":{"progressToken":1,"traceparent":` + tp + `}}`,
		`{"name":"_meta","arguments":{"_meta":"parent"},"_meta":{"traceparent":` + tp + `}}`,
		`{"_meta":{"\u0074raceparent":` + tp + `}}`,
		`{"\u005fmeta":{"traceparent":` + tp + `}}`,
		`{ "_meta" : { "traceparent" : ` + tp + ` } }`,
		`{"_meta":{"progressToken":1}}`,
		`{"name":"traceparent","_meta":{}}`,
		`{"name":"x"}`,
		``,
	} {
		want, wantOK := paramsContext([]byte(params))
		in := clientContext([]byte(params))
		if in.fromMeta != wantOK || !in.sc.Equal(want) {
			t.Errorf("clientContext(%s) = %v %v, the full scan finds %v %v", params, in.sc, in.fromMeta, want, wantOK)
		}
	}
}

// FuzzClientContext: the quick check agrees with the full scan on any input.
func FuzzClientContext(f *testing.F) {
	f.Add(`{"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}`)
	f.Add(`{"a":"_meta","_meta":{"x":1,"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}}`)
	f.Fuzz(func(t *testing.T, params string) {
		want, wantOK := paramsContext([]byte(params))
		if in := clientContext([]byte(params)); in.fromMeta != wantOK || !in.sc.Equal(want) {
			t.Fatalf("clientContext(%q) = %v %v, the full scan finds %v %v", params, in.sc, in.fromMeta, want, wantOK)
		}
	})
}
