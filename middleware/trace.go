package middleware

// Trace continues the caller's W3C trace (or starts one when traceparent is
// absent or malformed: a bad header never fails the request) and wraps the
// rest of the chain in a span: at egress a CLIENT span "invoke_agent {peer}"
// for a handoff, "{operation} {model}" for a model call (package modelcall
// names it) or "{method}" for another external fetch, at ingress a SERVER
// span "invoke_agent {agent}". It then rewrites traceparent so the next hop's
// parent-id is Baton's span, keeping tracestate and baggage as the W3C rules
// say. It sits right after AccessLog on both sides, so that every answer,
// refusals included, carries a trace id; the span is named and given its edge
// attributes once the rest of the chain has run. It cannot fail.

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Header names of W3C Trace Context and Baggage.
const (
	HeaderTraceparent = "Traceparent"
	HeaderTracestate  = "Tracestate"
	HeaderBaggage     = "Baggage"
)

// Span attribute keys Baton sets.
const (
	AttrOperation = attribute.Key("gen_ai.operation.name")
	AttrAgentName = attribute.Key("gen_ai.agent.name")
	AttrEdge      = attribute.Key("baton.edge")
	AttrHop       = attribute.Key("baton.hop")
	AttrSide      = attribute.Key("baton.side")
	AttrKeyDigest = attribute.Key("baton.idempotency_key.digest")
)

// Trace returns the tracing middleware. tp and prop are injected (main sets
// the globals; nothing here reads them).
func Trace(tp trace.TracerProvider, prop propagation.TextMapPropagator) func(http.Handler) http.Handler {
	tracer := tp.Tracer("github.com/batonproxy/baton")
	// Whole option lists, made once: a list built at the call would be
	// allocated for every span.
	client := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
	server := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			in := info(r)
			// Two traceparent lines combine into one invalid value, and
			// tracestate may be split over several lines (W3C §3.2, §3.3;
			// the propagator reads only the first line of each).
			if len(r.Header[HeaderTraceparent]) > 1 {
				r.Header.Del(HeaderTraceparent)
			}
			if ts := r.Header[HeaderTracestate]; len(ts) > 1 {
				r.Header[HeaderTracestate] = []string{strings.Join(ts, ",")}
			}
			in.TraceparentIn = r.Header.Get(HeaderTraceparent)
			carrier := headerCarrier(r.Header)
			ctx := prop.Extract(r.Context(), carrier)
			// An invalid traceparent invalidates tracestate too, and a
			// tracestate that does not parse is discarded rather than passed
			// on; Inject writes back the one that parsed.
			if sc := trace.SpanContextFromContext(ctx); !sc.IsValid() || sc.TraceState().Len() == 0 {
				r.Header.Del(HeaderTracestate)
			}

			kind, opt := trace.SpanKindClient, client
			if in.Side == Ingress {
				kind, opt = trace.SpanKindServer, server
			}
			ctx, span := tracer.Start(ctx, "invoke_agent", opt...)
			defer span.End()
			sc := span.SpanContext()
			in.TraceID = sc.TraceID().String()

			r.Header.Del(HeaderTraceparent)
			prop.Inject(ctx, carrier)
			next.ServeHTTP(w, r.WithContext(ctx))

			if span.IsRecording() {
				annotate(span, in, r.Method, kind)
			}
		})
	}
}

// headerCarrier is propagation.HeaderCarrier with the propagators' own
// lowercase keys turned into header names by a lookup: canonicalising
// "traceparent" allocates "Traceparent" anew on each Get and Set, several
// times per request.
type headerCarrier http.Header

// Baggage reads every baggage line through Values, as it does from
// propagation.HeaderCarrier.
var _ propagation.ValuesGetter = headerCarrier{}

func carrierKey(key string) string {
	switch key {
	case "traceparent":
		return HeaderTraceparent
	case "tracestate":
		return HeaderTracestate
	case "baggage":
		return HeaderBaggage
	}
	return http.CanonicalHeaderKey(key)
}

func (c headerCarrier) Get(key string) string {
	if vs := c[carrierKey(key)]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

func (c headerCarrier) Values(key string) []string { return c[carrierKey(key)] }

func (c headerCarrier) Set(key, value string) { c[carrierKey(key)] = []string{value} }

func (c headerCarrier) Keys() []string { return propagation.HeaderCarrier(c).Keys() }

// annotate names the span and gives it its attributes and status. The edge
// is known only once the chain has run (egress resolves its destination after
// Trace, so that even a refused destination is traced). A span that records
// nothing (no exporter) skips all of it.
func annotate(span trace.Span, in *Info, method string, kind trace.SpanKind) {
	span.SetName(spanName(in, method))
	status := in.Status()
	// One SetAttributes call: each call allocates its slice and grows the
	// span's.
	attrs := [6 + maxDetail]attribute.KeyValue{
		AttrEdge.String(in.Edge()),
		AttrSide.String(in.Side.String()),
		attribute.Int("http.response.status_code", status),
	}
	n := 3
	switch {
	case in.Operation != "":
		// A model call: its gen_ai.* attributes are its own (modelcall).
		attrs[n], n = AttrOperation.String(in.Operation), n+1
	case in.External != "":
		// A fetch from the web or a tool is no agent: an HTTP client span.
		attrs[n], n = attribute.String("server.address", in.External), n+1
	default:
		attrs[n], attrs[n+1], n = AttrOperation.String("invoke_agent"), AttrAgentName.String(agentAttr(in)), n+2
	}
	if in.Handoff() {
		attrs[n], n = AttrHop.Int(in.Hop), n+1
	}
	n = spanDetail(attrs[:], n, in) // trace_detail.go
	span.SetAttributes(attrs[:n]...)
	if status >= 500 || (kind == trace.SpanKindClient && status >= 400) {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	if in.Err != nil {
		span.RecordError(in.Err)
	}
}

func spanName(in *Info, method string) string {
	switch {
	case in.Operation != "" && in.Model != "":
		return in.Operation + " " + in.Model
	case in.Operation != "":
		return in.Operation
	case in.Side == Ingress:
		return "invoke_agent " + in.Agent
	case in.Handoff() && in.To != "":
		return "invoke_agent " + in.To
	case in.External != "":
		return method
	}
	return "invoke_agent"
}

// agentAttr names the agent the span is about: the invoked one.
func agentAttr(in *Info) string {
	if in.Side == Ingress {
		return in.Agent
	}
	if in.Handoff() {
		return in.To
	}
	return in.External
}
