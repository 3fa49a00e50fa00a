// Package otlptest is an OTLP trace receiver for tests: what an OpenTelemetry collector
// is to the proxy, on a free loopback port, over gRPC (the collector's TraceService) or
// HTTP (POST /v1/traces, protobuf). It keeps every span it is sent and lets a test wait
// for them.
//
// It is for tests only: it checks nothing and keeps everything in memory.
package otlptest

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// Span is one received span with what the tests look at decoded.
type Span struct {
	Name         string
	Kind         tracepb.Span_SpanKind
	TraceID      string // lowercase hex
	SpanID       string
	ParentSpanID string            // "" for a root span
	Attributes   map[string]string // values as text
	Links        []string          // trace-span ids of the linked contexts
	StatusCode   tracepb.Status_StatusCode
	StatusMsg    string
	Service      string            // service.name of the resource
	Headers      map[string]string // of the export that carried it (HTTP headers, gRPC metadata), lowercase keys
}

// Receiver collects spans. Close stops it.
type Receiver struct {
	// Endpoint is the base URL to export to: http://127.0.0.1:PORT.
	Endpoint string

	mu      sync.Mutex // guards spans and changed
	spans   []Span
	changed chan struct{} // closed and replaced whenever spans grow

	close func()
}

func newReceiver() *Receiver { return &Receiver{changed: make(chan struct{})} }

// StartGRPC starts a receiver implementing the collector's gRPC TraceService.
func StartGRPC() (*Receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := newReceiver()
	srv := grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(srv, &grpcService{r: r})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // ends with Stop
	}()
	r.Endpoint = "http://" + ln.Addr().String()
	r.close = func() {
		srv.Stop()
		<-done
	}
	return r, nil
}

type grpcService struct {
	collectorpb.UnimplementedTraceServiceServer
	r *Receiver
}

func (s *grpcService) Export(ctx context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	headers := map[string]string{}
	if md, ok := metadataFrom(ctx); ok {
		for k, v := range md {
			if len(v) > 0 {
				headers[k] = v[0]
			}
		}
	}
	s.r.add(req, headers)
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

// StartHTTP starts a receiver of OTLP/HTTP with protobuf bodies at /v1/traces.
func StartHTTP() (*Receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := newReceiver()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(io.LimitReader(req.Body, 64<<20))
		var msg collectorpb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &msg)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		headers := map[string]string{}
		for k := range req.Header {
			headers[strings.ToLower(k)] = req.Header.Get(k)
		}
		r.add(&msg, headers)
		out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // ends with Close
	}()
	r.Endpoint = "http://" + ln.Addr().String()
	r.close = func() {
		_ = srv.Close()
		<-done
	}
	return r, nil
}

// Close stops the receiver and waits for its goroutines.
func (r *Receiver) Close() { r.close() }

func (r *Receiver) add(req *collectorpb.ExportTraceServiceRequest, headers map[string]string) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{Name: s.GetName(), Kind: s.GetKind(), TraceID: hex.EncodeToString(s.GetTraceId()),
					SpanID: hex.EncodeToString(s.GetSpanId()), ParentSpanID: hex.EncodeToString(s.GetParentSpanId()),
					Attributes: attrs(s.GetAttributes()), StatusCode: s.GetStatus().GetCode(), StatusMsg: s.GetStatus().GetMessage(),
					Service: service, Headers: headers}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, hex.EncodeToString(l.GetTraceId())+"-"+hex.EncodeToString(l.GetSpanId()))
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// Spans returns the spans received so far, in arrival order.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Wait returns the spans received once match reports true for them, or an error after
// timeout with what did arrive.
func (r *Receiver) Wait(timeout time.Duration, match func([]Span) bool) ([]Span, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		spans, changed := append([]Span(nil), r.spans...), r.changed
		r.mu.Unlock()
		if match(spans) {
			return spans, nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return spans, errors.New(describe("no match after "+timeout.String(), spans))
		}
	}
}

func describe(msg string, spans []Span) string {
	for _, s := range spans {
		msg += fmt.Sprintf("\n  %s kind=%v trace=%s span=%s parent=%s %v", s.Name, s.Kind, s.TraceID, s.SpanID, s.ParentSpanID, s.Attributes)
	}
	return msg
}

// attrs renders attribute values as text.
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = fmt.Sprint(x.IntValue)
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = fmt.Sprint(x.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			m[kv.GetKey()] = fmt.Sprint(x.DoubleValue)
		default:
			m[kv.GetKey()] = v.String()
		}
	}
	return m
}

// metadataFrom returns the gRPC metadata of an incoming call.
func metadataFrom(ctx context.Context) (map[string][]string, bool) {
	md, ok := metadata.FromIncomingContext(ctx)
	return md, ok
}
