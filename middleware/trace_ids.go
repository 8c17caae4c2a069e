package middleware

import (
	"context"
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// IDTracerProvider is the tracer provider of a Baton that exports no spans
// (baton serve with no exporter, the demo, benchmarks of the request path). What
// crosses the wire is exactly what the SDK would send with its default
// sampler (parent-based, always on): the caller's trace id, flags and
// tracestate kept, a fresh span id per span so that the next hop's parent-id
// is Baton's, a new sampled trace when there is no valid parent. What it
// leaves out is the recording: a span nobody will export holds no attributes,
// events, timestamps or status, and costs one small allocation.
type IDTracerProvider struct{ embedded.TracerProvider }

func (p *IDTracerProvider) Tracer(string, ...trace.TracerOption) trace.Tracer { return idTracer{p: p} }

type idTracer struct {
	embedded.Tracer
	p *IDTracerProvider
}

func (t idTracer) Start(ctx context.Context, _ string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := trace.SpanContextFromContext(ctx)
	newRoot := false
	if len(opts) > 0 {
		cfg := trace.NewSpanStartConfig(opts...)
		newRoot = cfg.NewRoot()
	}
	var sc trace.SpanContextConfig
	if parent.IsValid() && !newRoot {
		sc.TraceID, sc.TraceFlags, sc.TraceState = parent.TraceID(), parent.TraceFlags(), parent.TraceState()
	} else {
		sc.TraceID, sc.TraceFlags = newTraceID(), trace.FlagsSampled
	}
	sc.SpanID = newSpanID()
	s := &idSpan{sc: trace.NewSpanContext(sc), p: t.p}
	return trace.ContextWithSpan(ctx, s), s
}

// newTraceID and newSpanID draw from the runtime's per-thread ChaCha8
// generator: random as W3C Trace Context asks, without the lock the SDK's
// generator takes. All zeros is invalid and drawn again.
func newTraceID() (id trace.TraceID) {
	for !id.IsValid() {
		binary.LittleEndian.PutUint64(id[:8], rand.Uint64())
		binary.LittleEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id
}

func newSpanID() (id trace.SpanID) {
	for !id.IsValid() {
		binary.LittleEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}

// idSpan carries a span context and records nothing.
type idSpan struct {
	embedded.Span
	sc trace.SpanContext
	p  *IDTracerProvider
}

func (s *idSpan) SpanContext() trace.SpanContext          { return s.sc }
func (s *idSpan) IsRecording() bool                       { return false }
func (s *idSpan) End(...trace.SpanEndOption)              {}
func (s *idSpan) AddEvent(string, ...trace.EventOption)   {}
func (s *idSpan) AddLink(trace.Link)                      {}
func (s *idSpan) RecordError(error, ...trace.EventOption) {}
func (s *idSpan) SetStatus(codes.Code, string)            {}
func (s *idSpan) SetName(string)                          {}
func (s *idSpan) SetAttributes(...attribute.KeyValue)     {}
func (s *idSpan) TracerProvider() trace.TracerProvider    { return s.p }
