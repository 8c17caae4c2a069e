package middleware

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{
		"k1", `"k1"`, `"a\"b"`, `"a\\b"`, `"\"\\"`, `""`, `"`, `""""`, `"\"`, `"a\nb"`, " k ", "\t\"k\" ",
		"a,b", `"a,b"`, "a b", `"a b"`, "clé", `"clé"`, "a\x00b", "\"a\x7fb\"", strings.Repeat("k", 255),
		strings.Repeat("k", 256), `"` + strings.Repeat(`\\`, 255) + `"`, `"` + strings.Repeat(`\"`, 256) + `"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		key, err := ParseKey([]string{v})
		if err != nil {
			if key != "" {
				t.Errorf("ParseKey(%q) = %q with error %v", v, key, err)
			}
			return
		}
		if len(key) < 1 || len(key) > MaxKeyLen {
			t.Fatalf("ParseKey(%q) = %d characters, want 1 to %d", v, len(key), MaxKeyLen)
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				t.Fatalf("ParseKey(%q) = %q holds byte %#x", v, key, key[i])
			}
		}
		q := QuoteKey(key)
		back, err := ParseKey([]string{q})
		if err != nil || back != key {
			t.Fatalf("ParseKey(QuoteKey(%q)) = %q, %v", key, back, err)
		}
		if again, err := ParseKey([]string{q, q}); err == nil {
			t.Fatalf("two values %q parsed as %q", q, again)
		}
	})
}

func FuzzHopHeaders(f *testing.F) {
	for _, s := range []struct {
		agent, hop string
		twice      bool
	}{
		{"", "", false}, {"analyst", "1", false}, {"analyst", "8", false}, {"analyst", "9", false},
		{"analyst", "0", false}, {"analyst", "-1", false}, {"analyst", "abc", false}, {"analyst", "99999", false},
		{"analyst", "1", true}, {"Not An Agent", "1", false}, {"a.b", " 2 ", false}, {"analyst", "\x00", false},
		{strings.Repeat("a", 64), "1", false}, {"analyst", "٣", false},
	} {
		f.Add(s.agent, s.hop, s.twice)
	}
	f.Fuzz(func(t *testing.T, agent, hop string, twice bool) {
		in := &Info{Side: Ingress, Agent: "summarizer", TraceID: "t"}
		r := withInfo(httptest.NewRequest(http.MethodPost, "http://summarizer/", nil), in)
		r.Header[HeaderAgent] = []string{agent}
		r.Header[HeaderHop] = []string{hop}
		if twice {
			r.Header[HeaderHop] = append(r.Header[HeaderHop], hop)
		}
		served := false
		next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served = true })
		rec := httptest.NewRecorder()
		HopGuard(func(string) int { return 8 })(next).ServeHTTP(rec, r)

		switch rec.Code {
		case http.StatusOK:
			if !served {
				t.Fatal("200 without serving")
			}
			if in.Hop < 1 || in.Hop > 8 {
				t.Fatalf("Baton-Agent %q, Baton-Hop %q: accepted hop %d, want 1 to 8", agent, hop, in.Hop)
			}
			if in.From != "" && !ValidAgentName(in.From) {
				t.Fatalf("accepted sender %q", in.From)
			}
		case http.StatusBadRequest, http.StatusLoopDetected:
			if served {
				t.Fatalf("status %d, yet served", rec.Code)
			}
		default:
			t.Fatalf("Baton-Agent %q, Baton-Hop %q: status %d, want 200, 400 or 508", agent, hop, rec.Code)
		}
	})
}

func FuzzTraceparent(f *testing.F) {
	const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, s := range [][3]string{
		{valid, "congo=t61rcWkgMzE", "userId=alice"},
		{"", "", ""},
		{"garbage", "a=b", "c=d"},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "", ""},
		{"ff" + valid[2:], "", ""},
		{"cc" + valid[2:] + "-future", "", ""},
		{strings.ToUpper(valid), "", ""},
		{valid, "foo=1,foo=2", "k=v;p=1"},
		{valid, strings.Repeat("k=v,", 40), strings.Repeat("k=v,", 200)},
		{valid, "", "%zz=1"},
		{strings.Repeat("0", 1000), "\x00", "\xff"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	tp := sdktrace.NewTracerProvider()
	f.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracing := Trace(tp, w3c())
	f.Fuzz(func(t *testing.T, traceparent, tracestate, baggage string) {
		var got downstream
		in := &Info{Side: Egress, Agent: "analyst"}
		r := withInfo(httptest.NewRequest(http.MethodPost, "http://summarizer/", nil), in)
		r.Header[HeaderTraceparent] = []string{traceparent}
		r.Header[HeaderTracestate] = []string{tracestate}
		r.Header[HeaderBaggage] = []string{baggage}
		tracing(capture(&got)).ServeHTTP(httptest.NewRecorder(), r)

		tps := got.header.Values(HeaderTraceparent)
		if len(tps) != 1 {
			t.Fatalf("traceparent %q: sent on %q, want one", traceparent, tps)
		}
		m := traceparentRE.FindStringSubmatch(tps[0])
		if m == nil {
			t.Fatalf("traceparent %q: sent on %q, want a valid one", traceparent, tps[0])
		}
		if !got.span.IsValid() || m[1] != got.span.TraceID().String() || m[2] != got.span.SpanID().String() {
			t.Fatalf("traceparent sent on %s does not name Baton's span %v", tps[0], got.span)
		}
		if tid, err := trace.TraceIDFromHex(m[1]); err != nil || !tid.IsValid() {
			t.Fatalf("trace id %s invalid", m[1])
		}
		if sid, err := trace.SpanIDFromHex(m[2]); err != nil || !sid.IsValid() {
			t.Fatalf("span id %s invalid", m[2])
		}
		if in.TraceID != m[1] {
			t.Fatalf("Info.TraceID = %q, traceparent %s", in.TraceID, tps[0])
		}
		// A new trace (the caller's id is not in what it sent) carries no
		// tracestate of the caller's.
		if !strings.Contains(strings.ToLower(traceparent), m[1]) && got.header.Get(HeaderTracestate) != "" {
			t.Fatalf("new trace for traceparent %q, yet tracestate %q sent on", traceparent, got.header.Get(HeaderTracestate))
		}
	})
}
