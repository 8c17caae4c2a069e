package middleware

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonproxy/baton/problem"
)

// traceparentRE is a version-00 traceparent as Baton sends it.
var traceparentRE = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-0[0-3]$`)

// w3c is the propagator main installs.
func w3c() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// tracedChain is AccessLog → Trace → next for side, with spans recorded.
func tracedChain(side Side, agent string, next http.Handler) (http.Handler, *tracetest.SpanRecorder) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	return AccessLog(slog.New(slog.DiscardHandler), side, agent)(Trace(tp, w3c())(next)), sr
}

// downstream is what the handler after Trace saw.
type downstream struct {
	header http.Header
	span   trace.SpanContext
	info   *Info
}

func capture(got *downstream) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.header = r.Header.Clone()
		got.span = trace.SpanContextFromContext(r.Context())
		got.info = InfoFromContext(r.Context())
	})
}

func TestTraceContext(t *testing.T) {
	t.Parallel()
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		spanID  = "00f067aa0ba902b7"
		valid   = "00-" + traceID + "-" + spanID + "-01"
	)
	tests := []struct {
		name       string
		header     http.Header
		continues  bool     // the trace of traceID goes on; else a new trace starts
		wantFlags  string   // of the traceparent sent on; "" for any
		wantState  []string // tracestate sent on; nil: none
		wantBag    []string // baggage members sent on, in any order; nil: none
		wantNoSpan bool     // the parent said not sampled: nothing recorded
	}{
		{name: "valid, sampled", header: http.Header{"Traceparent": {valid},
			"Tracestate": {"congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"}},
			continues: true, wantFlags: "01", wantState: []string{"congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"}},
		{name: "valid, not sampled", header: http.Header{"Traceparent": {"00-" + traceID + "-" + spanID + "-00"}},
			continues: true, wantFlags: "00", wantNoSpan: true},
		{name: "valid, random flag kept", header: http.Header{"Traceparent": {"00-" + traceID + "-" + spanID + "-03"}},
			continues: true, wantFlags: "03"},
		{name: "future version with more fields",
			header:    http.Header{"Traceparent": {"cc-" + traceID + "-" + spanID + "-01-what-the-future-holds"}},
			continues: true},
		{name: "absent", header: http.Header{"Tracestate": {"congo=t61rcWkgMzE"}}},
		{name: "garbage", header: http.Header{"Traceparent": {"garbage"}, "Tracestate": {"congo=t61rcWkgMzE"}}},
		{name: "all-zero trace id", header: http.Header{"Traceparent": {"00-" + strings.Repeat("0", 32) + "-" + spanID + "-01"},
			"Tracestate": {"congo=t61rcWkgMzE"}}},
		{name: "all-zero parent id", header: http.Header{"Traceparent": {"00-" + traceID + "-" + strings.Repeat("0", 16) + "-01"},
			"Tracestate": {"congo=t61rcWkgMzE"}}},
		{name: "upper-case hex", header: http.Header{"Traceparent": {strings.ToUpper(valid)},
			"Tracestate": {"congo=t61rcWkgMzE"}}},
		{name: "version ff", header: http.Header{"Traceparent": {"ff" + valid[2:]}, "Tracestate": {"congo=t61rcWkgMzE"}}},
		{name: "version 00 with another field", header: http.Header{"Traceparent": {valid + "-extra"},
			"Tracestate": {"congo=t61rcWkgMzE"}}},
		{name: "version 00 with reserved flags", header: http.Header{"Traceparent": {valid[:len(valid)-2] + "09"}}},
		{name: "short trace id", header: http.Header{"Traceparent": {"00-" + traceID[1:] + "-" + spanID + "-01"}}},
		{name: "two traceparent headers", header: http.Header{
			"Traceparent": {valid, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
			"Tracestate":  {"congo=t61rcWkgMzE"}}},
		{name: "tracestate over several headers is combined", header: http.Header{"Traceparent": {valid},
			"Tracestate": {"foo=1,bar=2", "", "rojo=1,congo=2", "baz=3"}},
			continues: true, wantState: []string{"foo=1,bar=2,rojo=1,congo=2,baz=3"}},
		{name: "tracestate with duplicate keys is discarded", header: http.Header{"Traceparent": {valid},
			"Tracestate": {"foo=1,foo=2"}}, continues: true},
		{name: "tracestate with an illegal key is discarded", header: http.Header{"Traceparent": {valid},
			"Tracestate": {"FOO=1"}}, continues: true},
		{name: "baggage kept", header: http.Header{"Traceparent": {valid}, "Baggage": {"userId=alice,isProduction=false"}},
			continues: true, wantBag: []string{"isProduction=false", "userId=alice"}},
		{name: "baggage kept over several headers", header: http.Header{"Baggage": {"userId=alice", "tenant=acme"}},
			wantBag: []string{"tenant=acme", "userId=alice"}},
		{name: "baggage kept with an invalid traceparent", header: http.Header{"Traceparent": {"garbage"},
			"Baggage": {"userId=alice"}}, wantBag: []string{"userId=alice"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got downstream
			h, sr := tracedChain(Egress, "analyst", capture(&got))
			r := httptest.NewRequest(http.MethodPost, "http://summarizer/", nil)
			for k, v := range tc.header {
				r.Header[k] = v
			}
			h.ServeHTTP(httptest.NewRecorder(), r)

			tps := got.header.Values(HeaderTraceparent)
			if len(tps) != 1 {
				t.Fatalf("traceparent sent on = %q, want one", tps)
			}
			m := traceparentRE.FindStringSubmatch(tps[0])
			if m == nil {
				t.Fatalf("traceparent sent on = %q, want a valid version-00 one", tps[0])
			}
			if m[1] != got.span.TraceID().String() || m[2] != got.span.SpanID().String() {
				t.Errorf("traceparent %s does not name Baton's span %s/%s", tps[0], got.span.TraceID(), got.span.SpanID())
			}
			if got.info.TraceID != m[1] {
				t.Errorf("Info.TraceID = %q, want %q", got.info.TraceID, m[1])
			}
			if tc.wantFlags != "" && !strings.HasSuffix(tps[0], "-"+tc.wantFlags) {
				t.Errorf("traceparent %s, want flags %s", tps[0], tc.wantFlags)
			}
			if continued := m[1] == traceID; continued != tc.continues {
				t.Errorf("trace id %s: continued = %v, want %v", m[1], continued, tc.continues)
			}
			for _, in := range tc.header.Values(HeaderTraceparent) {
				if strings.Contains(in, m[2]) {
					t.Errorf("parent-id %s sent on is the caller's, want Baton's span", m[2])
				}
			}
			if st := got.header.Values(HeaderTracestate); !slices.Equal(st, tc.wantState) {
				t.Errorf("tracestate sent on = %q, want %q", st, tc.wantState)
			}
			var bag []string
			for _, v := range got.header.Values(HeaderBaggage) {
				bag = append(bag, strings.Split(v, ",")...)
			}
			slices.Sort(bag)
			if !slices.Equal(bag, tc.wantBag) {
				t.Errorf("baggage sent on = %q, want %q", bag, tc.wantBag)
			}

			spans := sr.Ended()
			if tc.wantNoSpan {
				if len(spans) != 0 {
					t.Errorf("%d spans recorded for an unsampled parent, want none", len(spans))
				}
				return
			}
			if len(spans) != 1 {
				t.Fatalf("%d spans ended, want 1", len(spans))
			}
			s := spans[0]
			if s.SpanContext().SpanID() != got.span.SpanID() {
				t.Errorf("ended span %s, downstream saw %s", s.SpanContext().SpanID(), got.span.SpanID())
			}
			if tc.continues {
				if p := s.Parent(); !p.IsRemote() || p.TraceID().String() != traceID || p.SpanID().String() != spanID {
					t.Errorf("span parent = %s/%s remote %v, want the caller's %s/%s",
						p.TraceID(), p.SpanID(), p.IsRemote(), traceID, spanID)
				}
			} else if s.Parent().IsValid() {
				t.Errorf("new trace has parent %s", s.Parent().SpanID())
			}
		})
	}
}

func TestTraceSpan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		side       Side
		agent      string
		fill       func(*Info) // what the rest of the chain learnt
		status     int
		wantName   string
		wantKind   trace.SpanKind
		wantAttrs  map[attribute.Key]attribute.Value
		wantNoHop  bool
		wantAbsent []attribute.Key
		wantStatus codes.Code
		wantEvent  string
	}{
		{
			name: "egress handoff", side: Egress, agent: "analyst", status: 200,
			fill:     func(in *Info) { in.From, in.To, in.Hop = "analyst", "summarizer", 2 },
			wantName: "invoke_agent summarizer", wantKind: trace.SpanKindClient,
			wantAttrs: map[attribute.Key]attribute.Value{
				AttrOperation:               attribute.StringValue("invoke_agent"),
				AttrAgentName:               attribute.StringValue("summarizer"),
				AttrEdge:                    attribute.StringValue("analyst→summarizer"),
				AttrSide:                    attribute.StringValue("egress"),
				AttrHop:                     attribute.IntValue(2),
				"http.response.status_code": attribute.IntValue(200),
			},
			wantStatus: codes.Unset,
		},
		{
			name: "egress handoff the peer refused", side: Egress, agent: "analyst", status: 409,
			fill:     func(in *Info) { in.From, in.To, in.Hop = "analyst", "summarizer", 1 },
			wantName: "invoke_agent summarizer", wantKind: trace.SpanKindClient, wantStatus: codes.Error,
		},
		{
			name: "egress external fetch", side: Egress, agent: "analyst", status: 200,
			fill:     func(in *Info) { in.From, in.External = "analyst", "api.example.com:443" },
			wantName: "POST", wantKind: trace.SpanKindClient,
			wantAttrs: map[attribute.Key]attribute.Value{
				"server.address": attribute.StringValue("api.example.com:443"),
				AttrEdge:         attribute.StringValue("analyst→api.example.com:443"),
			},
			wantAbsent: []attribute.Key{AttrOperation, AttrAgentName},
			wantNoHop:  true, wantStatus: codes.Unset,
		},
		{
			name: "egress model call", side: Egress, agent: "analyst", status: 200,
			fill: func(in *Info) {
				in.From, in.External, in.Route = "analyst", "api.openai.com:443", "openai"
				in.Operation, in.Model = "chat", "gpt-4.1-mini"
			},
			wantName: "chat gpt-4.1-mini", wantKind: trace.SpanKindClient,
			wantAttrs: map[attribute.Key]attribute.Value{
				AttrOperation: attribute.StringValue("chat"),
				AttrEdge:      attribute.StringValue("analyst→api.openai.com:443"),
			},
			wantAbsent: []attribute.Key{AttrAgentName},
			wantNoHop:  true, wantStatus: codes.Unset,
		},
		{
			name: "egress refused before resolution", side: Egress, agent: "analyst", status: 403,
			fill:     func(*Info) {},
			wantName: "invoke_agent", wantKind: trace.SpanKindClient, wantStatus: codes.Error,
		},
		{
			name: "egress transport error", side: Egress, agent: "analyst", status: 502,
			fill: func(in *Info) {
				in.From, in.To, in.Hop = "analyst", "summarizer", 1
				in.Err = errors.New("dial tcp: connection refused")
			},
			wantName: "invoke_agent summarizer", wantKind: trace.SpanKindClient, wantStatus: codes.Error,
			wantEvent: "exception",
		},
		{
			name: "ingress handoff", side: Ingress, agent: "summarizer", status: 200,
			fill:     func(in *Info) { in.From, in.To, in.Hop = "analyst", "summarizer", 3 },
			wantName: "invoke_agent summarizer", wantKind: trace.SpanKindServer,
			wantAttrs: map[attribute.Key]attribute.Value{
				AttrOperation: attribute.StringValue("invoke_agent"),
				AttrAgentName: attribute.StringValue("summarizer"),
				AttrEdge:      attribute.StringValue("analyst→summarizer"),
				AttrSide:      attribute.StringValue("ingress"),
				AttrHop:       attribute.IntValue(3),
			},
			wantStatus: codes.Unset,
		},
		{
			name: "ingress: the agent's 404 is no server error", side: Ingress, agent: "summarizer", status: 404,
			fill:     func(in *Info) { in.From, in.To, in.Hop = "analyst", "summarizer", 1 },
			wantName: "invoke_agent summarizer", wantKind: trace.SpanKindServer, wantStatus: codes.Unset,
		},
		{
			name: "ingress: a 503 is", side: Ingress, agent: "summarizer", status: 503,
			fill:     func(in *Info) { in.From, in.To, in.Hop = "analyst", "summarizer", 1 },
			wantName: "invoke_agent summarizer", wantKind: trace.SpanKindServer, wantStatus: codes.Error,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, sr := tracedChain(tc.side, tc.agent, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tc.fill(InfoFromContext(r.Context()))
				w.WriteHeader(tc.status)
			}))
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "http://summarizer/", nil))

			spans := sr.Ended()
			if len(spans) != 1 {
				t.Fatalf("%d spans ended, want 1", len(spans))
			}
			s := spans[0]
			if s.Name() != tc.wantName || s.SpanKind() != tc.wantKind {
				t.Errorf("span %q kind %v, want %q kind %v", s.Name(), s.SpanKind(), tc.wantName, tc.wantKind)
			}
			attrs := map[attribute.Key]attribute.Value{}
			for _, kv := range s.Attributes() {
				attrs[kv.Key] = kv.Value
			}
			for k, v := range tc.wantAttrs {
				if attrs[k] != v {
					t.Errorf("%s = %v, want %v", k, attrs[k].String(), v.String())
				}
			}
			for _, k := range tc.wantAbsent {
				if v, ok := attrs[k]; ok {
					t.Errorf("%s = %v, want none", k, v.String())
				}
			}
			if got := attrs["http.response.status_code"]; got != attribute.IntValue(tc.status) {
				t.Errorf("http.response.status_code = %v, want %d", got.String(), tc.status)
			}
			if _, ok := attrs[AttrHop]; ok == tc.wantNoHop {
				t.Errorf("baton.hop present = %v, want %v", ok, !tc.wantNoHop)
			}
			if s.Status().Code != tc.wantStatus {
				t.Errorf("span status %v, want %v", s.Status().Code, tc.wantStatus)
			}
			var events []string
			for _, e := range s.Events() {
				events = append(events, e.Name)
			}
			if tc.wantEvent != "" && !slices.Contains(events, tc.wantEvent) {
				t.Errorf("events %q, want %q", events, tc.wantEvent)
			}
		})
	}
}

// TestTraceProblemsCarryTheTraceID checks that a refusal written after
// Trace names Baton's trace.
func TestTraceProblemsCarryTheTraceID(t *testing.T) {
	t.Parallel()
	var traceID string
	h, _ := tracedChain(Ingress, "summarizer", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		traceID = InfoFromContext(r.Context()).TraceID
		BodyTooLarge(w, r, 1)
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "http://summarizer/", nil))
	if doc := readProblem(t, rec, problem.BodyTooLarge); doc["trace_id"] != traceID || traceID == "" {
		t.Errorf("problem trace_id = %v, want %q", doc["trace_id"], traceID)
	}
}
