package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

func TestIDTracerContinuesOrStartsTraces(t *testing.T) {
	tr := (&idProvider{}).Tracer("test")
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

// With no exporter configured, serve uses idProvider, and a handoff through
// two Batons still carries one trace with Baton's span as each parent.
func TestNoExporterPropagatesThroughTwoBatons(t *testing.T) {
	var mu sync.Mutex
	var got http.Header
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Clone()
		mu.Unlock()
		io.WriteString(w, `{"ok":true}`)
	}))
	defer agent.Close()
	noEnv := func(string) string { return "" }
	b, telB := telemetryBaton(t, "agent: summarizer\nupstream: "+agent.URL+"\n", noEnv)
	a, _ := telemetryBaton(t, "agent: analyst\nupstream: http://127.0.0.1:9\npeers: {summarizer: {url: http://"+
		b.IngressAddr()+"}}\n", noEnv)
	if _, ok := telB.provider.(*idProvider); !ok {
		t.Fatalf("provider with no exporter is %T, want *idProvider", telB.provider)
	}
	for _, tc := range []struct{ in, traceID, flags string }{
		{"", "", "01"},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "4bf92f3577b34da6a3ce929d0e0e4736", "00"},
		{"00-5cf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-01", "5cf92f3577b34da6a3ce929d0e0e4737", "01"},
	} {
		req, _ := http.NewRequest("POST", "http://"+a.EgressAddr()+"/task", strings.NewReader(`{"task":"t"}`))
		req.Host = "summarizer"
		req.Header.Set("Content-Type", "application/json")
		if tc.in != "" {
			req.Header.Set("Traceparent", tc.in)
			req.Header.Set("Tracestate", "vendor=x")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		mu.Lock()
		tp, ts := got.Get("Traceparent"), got.Get("Tracestate")
		mu.Unlock()
		parts := strings.Split(tp, "-")
		if len(parts) != 4 || parts[3] != tc.flags || (tc.traceID != "" && parts[1] != tc.traceID) ||
			parts[2] == "00f067aa0ba902b7" || parts[2] == strings.Repeat("0", 16) {
			t.Fatalf("after %q the agent got traceparent %q; want trace %q, flags %s, a parent-id of Baton's", tc.in, tp, tc.traceID, tc.flags)
		}
		if tc.in != "" && ts != "vendor=x" {
			t.Fatalf("tracestate %q, want vendor=x", ts)
		}
		if resp.Header.Get("Traceparent") != "" && !strings.Contains(resp.Header.Get("Traceparent"), parts[1]) {
			t.Fatalf("response traceparent %q is another trace", resp.Header.Get("Traceparent"))
		}
	}
}
