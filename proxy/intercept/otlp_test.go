package intercept_test

import (
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpPort is where the OTLP receiver listens, in the peer namespace.
const otlpPort = "4318"

// otlpReceiver is an OTLP/HTTP collector endpoint (POST /v1/traces with a
// protobuf body, as cmd/baton's tests receive them): it keeps every span
// it is sent, with the agent its resource names (baton.agent). Metrics are
// accepted and dropped.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []otlpSpan
}

// otlpSpan is a received span and the agent whose Baton sent it.
type otlpSpan struct {
	agent string
	*tracepb.Span
}

func (s otlpSpan) attr(key string) string { return otlpAttr(s.GetAttributes(), key) }
func (s otlpSpan) id() string             { return hex.EncodeToString(s.GetSpanId()) }
func (s otlpSpan) parent() string         { return hex.EncodeToString(s.GetParentSpanId()) }
func (s otlpSpan) trace() string          { return hex.EncodeToString(s.GetTraceId()) }

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil || req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var reply proto.Message
	switch req.URL.Path {
	case "/v1/traces":
		var in coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &in); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range in.GetResourceSpans() {
			agent := otlpAttr(rs.GetResource().GetAttributes(), "baton.agent")
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					r.spans = append(r.spans, otlpSpan{agent: agent, Span: s})
				}
			}
		}
		r.mu.Unlock()
		reply = &coltracepb.ExportTraceServiceResponse{}
	case "/v1/metrics", "/v1/logs":
		w.WriteHeader(http.StatusOK)
		return
	default:
		http.NotFound(w, req)
		return
	}
	b, _ := proto.Marshal(reply)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(b)
}

// inTrace returns the spans received in trace.
func (r *otlpReceiver) inTrace(trace string) []otlpSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []otlpSpan
	for _, s := range r.spans {
		if s.trace() == trace {
			out = append(out, s)
		}
	}
	return out
}

// await waits (at most wait) until done holds of the spans received in
// trace, and returns them then.
func (r *otlpReceiver) await(trace string, wait time.Duration, done func([]otlpSpan) bool) []otlpSpan {
	deadline := time.Now().Add(wait)
	for {
		spans := r.inTrace(trace)
		if done(spans) || time.Now().After(deadline) {
			return spans
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startOTLP serves an otlpReceiver on otlpPort in the peer namespace, and
// returns it with the environment that has a Baton export its spans there,
// soon after they end.
func (tp *agentsTopo) startOTLP(t *testing.T) (*otlpReceiver, []string) {
	t.Helper()
	r := &otlpReceiver{}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(tp.peer.listen(t, "0.0.0.0:"+otlpPort))
	t.Cleanup(func() { srv.Close() })
	return r, []string{
		"OTEL_TRACES_EXPORTER=otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + hostPort(agentsPeerIP4, otlpPort),
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_METRICS_EXPORTER=none",
		"OTEL_BSP_SCHEDULE_DELAY=100",
	}
}

func otlpAttr(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.GetKey() != key {
			continue
		}
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue
		case *commonpb.AnyValue_IntValue:
			return strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			return strconv.FormatBool(v.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			return strconv.FormatFloat(v.DoubleValue, 'g', -1, 64)
		case *commonpb.AnyValue_ArrayValue:
			var parts []string
			for _, e := range v.ArrayValue.GetValues() {
				parts = append(parts, e.GetStringValue())
			}
			return strings.Join(parts, ",")
		}
	}
	return ""
}

// hasAttr reports whether the span has key at all.
func (s otlpSpan) hasAttr(key string) bool {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return true
		}
	}
	return false
}
