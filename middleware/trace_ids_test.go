package middleware

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

func TestIDTracerContinuesOrStartsTraces(t *testing.T) {
	tr := (&IDTracerProvider{}).Tracer("test")
	prop := propagation.TraceContext{}

	// No parent: a new sampled trace, a new span id each time.
	_, a := tr.Start(context.Background(), "a")
	_, b := tr.Start(context.Background(), "b")
	for _, s := range []trace.Span{a, b} {
		if sc := s.SpanContext(); !sc.IsValid() || !sc.IsSampled() || s.IsRecording() {
			t.Fatalf("root span context %v: want valid, sampled, not recording", sc)
		}
	}
	if a.SpanContext().TraceID() == b.SpanContext().TraceID() || a.SpanContext().SpanID() == b.SpanContext().SpanID() {
		t.Fatal("two roots share ids")
	}

	// A parent from the wire: trace id, flags and tracestate kept, span id new.
	for _, flags := range []string{"00", "01"} {
		parentTP := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-" + flags
		carrier := propagation.MapCarrier{"traceparent": parentTP, "tracestate": "vendor=x,other=y"}
		ctx, span := tr.Start(prop.Extract(context.Background(), carrier), "child", trace.WithSpanKind(trace.SpanKindServer))
		out := propagation.MapCarrier{}
		prop.Inject(ctx, out)
		sc := span.SpanContext()
		want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + sc.SpanID().String() + "-" + flags
		if out["traceparent"] != want || sc.SpanID().String() == "00f067aa0ba902b7" {
			t.Fatalf("traceparent %q after %q, want %q with a new parent-id", out["traceparent"], parentTP, want)
		}
		if out["tracestate"] != "vendor=x,other=y" {
			t.Fatalf("tracestate %q, want it kept", out["tracestate"])
		}
		// A new root leaves the parent's trace.
		_, root := tr.Start(ctx, "root", trace.WithNewRoot())
		if root.SpanContext().TraceID() == sc.TraceID() {
			t.Fatal("WithNewRoot kept the parent's trace id")
		}
	}
}
