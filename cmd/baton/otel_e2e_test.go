package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff"
	"github.com/batonproxy/baton/proxy"
	"github.com/batonproxy/baton/sidecar"
	"github.com/batonproxy/baton/state"
)

// otlpReceiver is an OTLP collector endpoint for tests, over gRPC (the
// trace and metrics services) or HTTP (POST /v1/traces and /v1/metrics with
// protobuf bodies). It keeps every span and metric it is sent, with the
// agent its resource names.
type otlpReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu      sync.Mutex
	spans   []receivedSpan
	metrics map[string][]*metricpb.Metric // by baton.agent
}

type receivedSpan struct {
	agent string
	*tracepb.Span
}

func (r *otlpReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		agent := attr(rs.GetResource().GetAttributes(), "baton.agent")
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, receivedSpan{agent: agent, Span: s})
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (r *otlpReceiver) exportMetrics(req *colmetricpb.ExportMetricsServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.metrics == nil {
		r.metrics = map[string][]*metricpb.Metric{}
	}
	for _, rm := range req.GetResourceMetrics() {
		agent := attr(rm.GetResource().GetAttributes(), "baton.agent")
		for _, sm := range rm.GetScopeMetrics() {
			r.metrics[agent] = append(r.metrics[agent], sm.GetMetrics()...)
		}
	}
}

// metricsService is the gRPC metrics service of an otlpReceiver.
type metricsService struct {
	colmetricpb.UnimplementedMetricsServiceServer
	r *otlpReceiver
}

func (m metricsService) Export(_ context.Context, req *colmetricpb.ExportMetricsServiceRequest) (*colmetricpb.ExportMetricsServiceResponse, error) {
	m.r.exportMetrics(req)
	return &colmetricpb.ExportMetricsServiceResponse{}, nil
}

// startGRPC serves r over gRPC and returns its endpoint URL.
func (r *otlpReceiver) startGRPC(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, r)
	colmetricpb.RegisterMetricsServiceServer(srv, metricsService{r: r})
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return "http://" + l.Addr().String()
}

// startHTTP serves r over OTLP/HTTP and returns its endpoint URL.
func (r *otlpReceiver) startHTTP(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	decode := func(w http.ResponseWriter, req *http.Request, into proto.Message) bool {
		body, err := io.ReadAll(req.Body)
		if err == nil {
			err = proto.Unmarshal(body, into)
		}
		if err != nil || req.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP/HTTP %s: content type %q, %v", req.URL.Path, req.Header.Get("Content-Type"), err)
			http.Error(w, "bad request", http.StatusBadRequest)
			return false
		}
		return true
	}
	reply := func(w http.ResponseWriter, m proto.Message) {
		b, _ := proto.Marshal(m)
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(b)
	}
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, req *http.Request) {
		var in coltracepb.ExportTraceServiceRequest
		if decode(w, req, &in) {
			out, _ := r.Export(req.Context(), &in)
			reply(w, out)
		}
	})
	mux.HandleFunc("POST /v1/metrics", func(w http.ResponseWriter, req *http.Request) {
		var in colmetricpb.ExportMetricsServiceRequest
		if decode(w, req, &in) {
			r.exportMetrics(&in)
			reply(w, &colmetricpb.ExportMetricsServiceResponse{})
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func attr(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			switch v := kv.GetValue().GetValue().(type) {
			case *commonpb.AnyValue_StringValue:
				return v.StringValue
			case *commonpb.AnyValue_IntValue:
				return strconv.FormatInt(v.IntValue, 10)
			case *commonpb.AnyValue_BoolValue:
				if v.BoolValue {
					return "true"
				}
				return "false"
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
	}
	return ""
}

// telemetryBaton starts a Baton in this process with the telemetry baton
// serve sets up from the environment env reads.
func telemetryBaton(t *testing.T, yaml string, env func(string) string) (*sidecar.Baton, *telemetry) {
	t.Helper()
	c, err := config.Parse(strings.NewReader(yaml+"listen: {egress: 127.0.0.1:0, ingress: 127.0.0.1:0, admin: 127.0.0.1:0}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tel, err := setupTelemetry(context.Background(), env, c.Agent)
	if err != nil {
		t.Fatal(err)
	}
	store := state.NewMemory(c.Store.Memory)
	s, err := sidecar.New(proxy.Options{Config: c, Store: store, Logger: slog.New(slog.DiscardHandler),
		TracerProvider: tel.provider, Propagator: tel.propagator,
		MeterProvider: tel.meters.provider, Metrics: tel.meters.handler})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		_ = tel.shutdown(ctx)
		store.Close()
	})
	return s, tel
}

// TestTraceThroughThreeBatons sends a handoff analyst → summarizer →
// writer through three Batons exporting to a real OTLP receiver, over gRPC
// and over HTTP, and checks the trace the receiver got: one trace id, each
// Baton's egress CLIENT span the parent of the next Baton's ingress SERVER
// span, and the incident attributes; then the metrics pushed beside it.
func TestTraceThroughThreeBatons(t *testing.T) {
	for _, proto := range []string{"grpc", "http/protobuf"} {
		t.Run(strings.ReplaceAll(proto, "/", "-"), func(t *testing.T) {
			rcv := &otlpReceiver{}
			endpoint := rcv.startHTTP(t)
			if proto == "grpc" {
				endpoint = rcv.startGRPC(t)
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", proto)
			for _, v := range []string{"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
				"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
				"OTEL_TRACES_SAMPLER", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"} {
				t.Setenv(v, "")
			}
			threeBatons(t, rcv)
		})
	}
}

func threeBatons(t *testing.T, rcv *otlpReceiver) {
	writerAgent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"written":true}`)
	}))
	defer writerAgent.Close()
	c, telC := telemetryBaton(t, "agent: writer\nupstream: "+writerAgent.URL+"\n", os.Getenv)

	// summarizer's agent hands the work on to writer, forwarding the
	// traceparent it was given, as an instrumented agent does.
	var bEgress string
	summarizerAgent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequest("POST", "http://"+bEgress+"/write", strings.NewReader(`{"draft":"x"}`))
		req.Host = "writer"
		req.Header.Set("Traceparent", r.Header.Get("Traceparent"))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	defer summarizerAgent.Close()
	b, telB := telemetryBaton(t, "agent: summarizer\nupstream: "+summarizerAgent.URL+"\n"+
		"peers: {writer: {url: http://"+c.IngressAddr()+"}}\n", os.Getenv)
	bEgress = b.EgressAddr()

	gone := closedListener(t)
	a, telA := telemetryBaton(t, "agent: analyst\nupstream: http://127.0.0.1:9\n"+
		"peers: {summarizer: {url: http://"+b.IngressAddr()+"}, gone: {url: http://"+gone+"}}\n"+
		"edges: [{to: summarizer}, {to: gone, retry: {attempts: 1, backoff: 1ms}}]\n", os.Getenv)

	const traceID = "0af7651916cd43dd8448eb211c80319c"
	const key = "task-7"
	post := func(host string, want int) {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+a.EgressAddr()+"/tasks", strings.NewReader(string(handoff.Example())))
		req.Host = host
		req.Header.Set("Content-Type", handoff.MediaType)
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Traceparent", "00-"+traceID+"-b7ad6b7169203331-01")
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("POST to %s: %d, want %d: %s", host, resp.StatusCode, want, body)
		}
	}
	post("summarizer", 200)
	post("summarizer", 200) // the agent's retry: summarizer's Baton replays it
	post("gone", 502)       // retried once, then dead-lettered

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range []*sidecar.Baton{a, b, c} {
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, tel := range []*telemetry{telA, telB, telC} {
		if err := tel.shutdown(ctx); err != nil {
			t.Fatalf("flushing telemetry: %v", err)
		}
	}

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	type key2 struct{ agent, kind string }
	spans := map[key2][]receivedSpan{}
	for _, s := range rcv.spans {
		if hex.EncodeToString(s.GetTraceId()) != traceID {
			t.Errorf("%s span %q in trace %x, want %s", s.agent, s.GetName(), s.GetTraceId(), traceID)
			continue
		}
		spans[key2{s.agent, s.GetKind().String()}] = append(spans[key2{s.agent, s.GetKind().String()}], s)
	}
	const client, server = "SPAN_KIND_CLIENT", "SPAN_KIND_SERVER"
	count := func(agent, kind string, want int) []receivedSpan {
		t.Helper()
		got := spans[key2{agent, kind}]
		if len(got) != want {
			var names []string
			for _, s := range rcv.spans {
				names = append(names, s.agent+":"+s.GetKind().String()+":"+s.GetName())
			}
			t.Fatalf("%s has %d %s spans, want %d; received %q", agent, len(got), kind, want, names)
		}
		return got
	}
	aOut := count("analyst", client, 3) // two to summarizer, one to gone
	bIn := count("summarizer", server, 2)
	bOut := count("summarizer", client, 1) // the replayed duplicate never reached the agent
	cIn := count("writer", server, 1)

	sum := sha256.Sum256([]byte(key))
	digest := hex.EncodeToString(sum[:8])
	check := func(s receivedSpan, want map[string]string) {
		t.Helper()
		for k, v := range want {
			if got := attr(s.GetAttributes(), k); got != v {
				t.Errorf("%s span %q: %s = %q, want %q", s.agent, s.GetName(), k, got, v)
			}
		}
	}
	parentOf := func(child, parent receivedSpan) {
		t.Helper()
		if string(child.GetParentSpanId()) != string(parent.GetSpanId()) {
			t.Errorf("%s %q has parent %x, want %s's %q %x", child.agent, child.GetName(), child.GetParentSpanId(),
				parent.agent, parent.GetName(), parent.GetSpanId())
		}
	}
	// Pair each of summarizer's inbound spans with the analyst span that
	// sent it, by parent id.
	byID := map[string]receivedSpan{}
	for _, s := range aOut {
		byID[string(s.GetSpanId())] = s
	}
	var replayed, first receivedSpan
	for _, s := range bIn {
		sender, ok := byID[string(s.GetParentSpanId())]
		if !ok {
			t.Fatalf("summarizer's ingress span %x has parent %x, no analyst egress span", s.GetSpanId(), s.GetParentSpanId())
		}
		check(sender, map[string]string{"baton.edge.from": "analyst", "baton.edge.to": "summarizer", "baton.hop": "1",
			"baton.idempotency_key.digest": digest, "baton.contract.mode": "observe", "baton.contract.completeness": "1"})
		if attr(s.GetAttributes(), "baton.replayed") == "true" {
			replayed = s
			check(sender, map[string]string{"baton.replayed": "true"})
		} else {
			first = s
		}
	}
	if replayed.Span == nil || first.Span == nil {
		t.Fatal("summarizer's two inbound spans are not one delivery and one replay")
	}
	check(first, map[string]string{"baton.edge.from": "analyst", "baton.edge.to": "summarizer", "baton.hop": "1",
		"baton.idempotency_key.digest": digest, "baton.contract.mode": "observe", "gen_ai.agent.name": "summarizer"})
	// An unsigned sender's content is untrusted: the labels say so first,
	// then name what the untrusted-content tracking labelled.
	if labels := strings.Split(attr(first.GetAttributes(), "baton.trust.labels"), ","); labels[0] != "posture=untrusted" {
		t.Errorf("summarizer's trust labels %q, want posture=untrusted first", labels)
	}
	parentOf(bOut[0], first) // through summarizer's agent, which forwarded traceparent
	check(bOut[0], map[string]string{"baton.edge.from": "summarizer", "baton.edge.to": "writer", "baton.hop": "2"})
	parentOf(cIn[0], bOut[0])
	check(cIn[0], map[string]string{"baton.edge.from": "summarizer", "baton.edge.to": "writer", "baton.hop": "2",
		"http.response.status_code": "200"})
	for _, s := range aOut {
		if attr(s.GetAttributes(), "baton.edge.to") != "gone" {
			continue
		}
		check(s, map[string]string{"http.request.resend_count": "1"})
		if id := attr(s.GetAttributes(), "baton.dead_letter.record_id"); !strings.HasPrefix(id, traceID+".") {
			t.Errorf("dead-lettered span names record %q", id)
		}
	}

	// The metrics went out over OTLP too: analyst sent two handoffs that
	// summarizer answered, and dead-lettered one.
	requests := func(agent string, want map[string]string) int64 {
		var n int64
		for _, m := range rcv.metrics[agent] {
			if m.GetName() != "baton.handoff.requests" {
				continue
			}
			for _, dp := range m.GetSum().GetDataPoints() {
				ok := true
				for k, v := range want {
					ok = ok && attr(dp.GetAttributes(), k) == v
				}
				if ok && dp.GetAsInt() > n {
					n = dp.GetAsInt() // cumulative: the last export is the largest
				}
			}
		}
		return n
	}
	for _, tc := range []struct {
		agent string
		want  map[string]string
		n     int64
	}{
		{"analyst", map[string]string{"to": "summarizer", "outcome": "delivered", "status_class": "2xx"}, 2},
		{"analyst", map[string]string{"to": "gone", "outcome": "dead_lettered"}, 1},
		{"summarizer", map[string]string{"side": "ingress", "outcome": "replayed"}, 1},
		{"writer", map[string]string{"from": "summarizer", "side": "ingress", "outcome": "delivered"}, 1},
	} {
		if n := requests(tc.agent, tc.want); n != tc.n {
			t.Errorf("%s pushed baton.handoff.requests%v = %d, want %d", tc.agent, tc.want, n, tc.n)
		}
	}
}

// closedListener returns an address that refuses connections.
func closedListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
