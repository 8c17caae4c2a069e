package proxy_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonproxy/baton/approval"
	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff"
	"github.com/batonproxy/baton/proxy"
	"github.com/batonproxy/baton/sidecar"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/trust"
)

// meteredBaton is a Baton whose metrics are served for Prometheus on its
// admin listener (from a registry of its own, as baton serve does) and
// whose spans are recorded.
type meteredBaton struct {
	*sidecar.Baton
	spans *tracetest.SpanRecorder
	logs  *syncBuffer
}

func startMetered(t *testing.T, yaml string, opts ...func(*proxy.Options)) *meteredBaton {
	t.Helper()
	c, err := config.Decode(strings.NewReader(yaml))
	if err != nil {
		t.Fatalf("decoding config: %v", err)
	}
	c.Listen = config.Listen{Egress: "127.0.0.1:0", Ingress: "127.0.0.1:0", Admin: "127.0.0.1:0"}
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	store, err := state.Open(c.Store)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	logs := &syncBuffer{}
	o := proxy.Options{
		Config: c, Store: store, TracerProvider: tp,
		Propagator:    propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		Logger:        slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		MeterProvider: mp, Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
	}
	for _, opt := range opts {
		opt(&o)
	}
	s, err := sidecar.New(o)
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
		_ = mp.Shutdown(ctx)
		_ = store.Close()
		if t.Failed() {
			t.Logf("%s log:\n%s", c.Agent, logs.String())
		}
	})
	return &meteredBaton{Baton: s, spans: sr, logs: logs}
}

// scrape is one parsed GET /metrics.
type scrape map[string]*dto.MetricFamily

func scrapeMetrics(t *testing.T, admin string) scrape {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return scrape(fams)
}

// hasLabels reports whether m carries every pair of want.
func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k {
				found = lp.GetValue() == v
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// value sums the samples of a series name as Prometheus renders it
// (name_count and name_sum address a histogram) over the series whose
// labels match; ok is false when none matched.
func (s scrape) value(name string, labels map[string]string) (v float64, ok bool) {
	fam, part := s[name], ""
	if fam == nil {
		for _, suffix := range []string{"_count", "_sum"} {
			if base, found := strings.CutSuffix(name, suffix); found && s[base] != nil {
				fam, part = s[base], suffix
			}
		}
	}
	if fam == nil {
		return 0, false
	}
	for _, m := range fam.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		ok = true
		switch {
		case part == "_count":
			v += float64(m.GetHistogram().GetSampleCount())
		case part == "_sum":
			v += m.GetHistogram().GetSampleSum()
		case m.Counter != nil:
			v += m.GetCounter().GetValue()
		case m.Gauge != nil:
			v += m.GetGauge().GetValue()
		default:
			v += m.GetUntyped().GetValue()
		}
	}
	return v, ok
}

// names lists every series name of the scrape as Prometheus stores them:
// histograms as _bucket, _sum and _count.
func (s scrape) names() []string {
	var out []string
	for name, fam := range s {
		switch fam.GetType() {
		case dto.MetricType_HISTOGRAM:
			out = append(out, name+"_bucket", name+"_sum", name+"_count")
		case dto.MetricType_SUMMARY:
			out = append(out, name, name+"_sum", name+"_count")
		default:
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// expect is one series value a scrape must show.
type expect struct {
	name   string
	labels map[string]string
	want   float64
}

func (s scrape) check(t *testing.T, who string, want []expect) {
	t.Helper()
	for _, e := range want {
		got, ok := s.value(e.name, e.labels)
		if !ok || got != e.want {
			t.Errorf("%s: %s%v = %v (present %v), want %v", who, e.name, e.labels, got, ok, e.want)
		}
	}
}

// metricsScenario drives two Batons, analyst → summarizer, through what
// each metric counts, and returns them with one scrape of each:
//   - five handoffs delivered (one an envelope, one a duplicate key that
//     summarizer's dedupe window answers);
//   - two handoffs to a peer whose address refuses connections: the first
//     retried once, then dead-lettered as the breaker opens; the second
//     dead-lettered at once by the open breaker;
//   - a request to an unknown destination;
//   - at summarizer's ingress, a sender without an edge, and a signed
//     request it has no bundle to verify.
type scenario struct {
	a, b        *meteredBaton
	sa, sb      scrape
	deadLetters []string
	gone        string
}

func metricsScenario(t *testing.T) *scenario {
	t.Helper()
	var got seen
	ag := httptestServer(got.handler(200, `{"ok":true}`))
	t.Cleanup(ag.Close)
	b := startMetered(t, "agent: summarizer\nupstream: "+ag.URL+"\nadmin_token: s3cret\n"+
		"edges: [{from: analyst, max_hops: 8, contract: {mode: observe, max_bytes: 100}}]\n")
	gone := closedAddr(t)
	ops, err := trust.GenerateKey("ops-1")
	if err != nil {
		t.Fatal(err)
	}
	a := startMetered(t, "agent: analyst\nupstream: http://127.0.0.1:1\n"+
		"peers: {summarizer: {url: http://"+b.IngressAddr()+"}, gone: {url: http://"+gone+"}, payments: {url: http://"+b.IngressAddr()+"}}\n"+
		"approvals: {approvers: [{name: ops, keys: ['"+ops.Public().String()+"']}]}\n"+
		"edges: [{to: summarizer, max_hops: 8}, {to: gone, retry: {attempts: 1, backoff: 1ms, max_backoff: 1ms}, "+
		"breaker: {failures: 2, open_for: 1m}}, {to: payments, confirm: {}}]\n")
	sc := &scenario{a: a, b: b, gone: gone}

	post := func(host, key, ct, body string, want int) *http.Response {
		t.Helper()
		h := http.Header{"Content-Type": {ct}}
		if key != "" {
			h.Set("Idempotency-Key", key)
		}
		resp := send(t, a.EgressAddr(), host, "POST", "/tasks", body, h)
		if resp.StatusCode != want {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("POST %s key %q: %d, want %d: %s", host, key, resp.StatusCode, want, b)
		}
		return resp
	}
	for _, k := range []string{"k1", "k2", "k3"} {
		post("summarizer", k, "application/json", `{"task":"`+k+`"}`, 200)
	}
	if r := post("summarizer", "k1", "application/json", `{"task":"k1"}`, 200); r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the duplicate was not replayed: %v", r.Header)
	}
	post("summarizer", "k4", envelopeType, string(handoff.Example()), 200)
	for i, want := range []int{502, 503} {
		r := post("gone", "g"+string(rune('1'+i)), "application/json", `{"task":"g"}`, want)
		var p struct {
			RecordID string `json:"record_id"`
		}
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil || p.RecordID == "" {
			t.Fatalf("dead letter %d: no record_id (%v)", i, err)
		}
		sc.deadLetters = append(sc.deadLetters, p.RecordID)
	}
	post("nobody", "", "application/json", `{}`, 403)
	// A handoff a gate holds, denied by an approver: nothing is sent.
	var held approval.ApprovalView
	if err := json.NewDecoder(post("payments", "p1", "application/json", `{"refund":1}`, 202).Body).Decode(&held); err != nil {
		t.Fatal(err)
	}
	deny := signedDecision(t, a.AdminAddr(), held.ID, "deny", ops, "ops")
	if st, p := do(t, deny); st != http.StatusOK {
		t.Fatalf("denying the held handoff: %d %+v", st, p)
	}
	if got.count() != 4 {
		t.Fatalf("summarizer's agent ran %d times, want 4", got.count())
	}

	direct := func(hdr http.Header, want int) {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+b.IngressAddr()+"/tasks", strings.NewReader(`{}`))
		req.Header = hdr
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("direct ingress request %v: %d, want %d", hdr, resp.StatusCode, want)
		}
	}
	direct(http.Header{"Baton-Agent": {"mallory"}}, 403)
	direct(http.Header{"Baton-Agent": {"analyst"}, "Signature-Input": {`sig1=("@method");keyid="k";created=1`},
		"Signature": {"sig1=:AAAA:"}}, 401)

	sc.sa, sc.sb = scrapeMetrics(t, a.AdminAddr()), scrapeMetrics(t, b.AdminAddr())
	return sc
}

func TestMetricsScrape(t *testing.T) {
	t.Parallel()
	sc := metricsScenario(t)
	toB := map[string]string{"from": "analyst", "to": "summarizer", "side": "egress"}
	toGone := map[string]string{"from": "analyst", "to": "gone", "side": "egress"}
	with := func(base map[string]string, kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	sc.sa.check(t, "analyst", []expect{
		{"baton_handoff_requests_total", with(toB, "outcome", "delivered", "status_class", "2xx"), 5},
		{"baton_handoff_requests_total", toB, 5},
		{"baton_handoff_requests_total", with(toGone, "outcome", "dead_lettered", "status_class", "5xx"), 2},
		{"baton_handoff_requests_total", map[string]string{"to": "_unknown", "outcome": "refused", "status_class": "4xx"}, 1},
		{"baton_policy_denials_total", map[string]string{"to": "_unknown", "reason": "unknown_destination"}, 1},
		{"baton_handoff_retries_total", toGone, 1},
		{"baton_handoff_retries_total", toB, 0},
		{"baton_dead_letter_writes_total", toGone, 2},
		{"baton_dead_letter_writes_total", toB, 0},
		{"baton_dead_letter_depth", toGone, 2},
		{"baton_dead_letter_depth", toB, 0},
		{"baton_breaker_state", toGone, 2},
		{"baton_breaker_state", toB, 0},
		{"baton_breaker_transitions_total", with(toGone, "state", "open"), 1},
		{"baton_retry_budget_remaining", toGone, 2},
		{"baton_retry_budget_remaining", toB, 3},
		{"baton_handoff_uncorrelated_total", toB, 5},
		{"baton_handoff_uncorrelated_total", toGone, 2},
		// The envelope example marks one artifact untrusted itself.
		{"baton_untrusted_labels_total", toB, 1},
		{"baton_untrusted_injections_total", toB, 0},
		{"baton_handoff_duration_seconds_count", toB, 5},
		{"baton_handoff_duration_seconds_count", toGone, 2},
		{"baton_handoff_hops_count", toB, 5},
		{"baton_handoff_hops_sum", toB, 5},
		{"baton_contract_completeness_count", toB, 1},
		{"baton_contract_completeness_sum", toB, 1},
		{"baton_envelope_size_bytes_count", toB, 1},
		{"http_server_request_duration_seconds_count", map[string]string{"side": "egress", "http_request_method": "POST"}, 9}, // five to summarizer, two to gone, one refused, one held
		{"http_client_request_duration_seconds_count", map[string]string{"server_address": "summarizer", "http_response_status_code": "200"}, 5},
		// Two tries to the refusing address; the open breaker let none of the second handoff through.
		{"http_client_request_duration_seconds_count", map[string]string{"server_address": "gone", "error_type": "_OTHER"}, 2},
		{"baton_store_errors_total", map[string]string{"op": "append_chained"}, 0},
	})
	if _, ok := sc.sa.value("baton_contract_violations_total", nil); ok {
		t.Error("analyst counted contract violations; its contract has no cap")
	}

	fromA := map[string]string{"from": "analyst", "to": "summarizer", "side": "ingress"}
	sc.sb.check(t, "summarizer", []expect{
		{"baton_handoff_requests_total", with(fromA, "outcome", "delivered", "status_class", "2xx"), 4},
		{"baton_handoff_requests_total", with(fromA, "outcome", "replayed", "status_class", "2xx"), 1},
		{"baton_handoff_requests_total", map[string]string{"from": "_unknown", "outcome": "refused", "status_class": "4xx"}, 2},
		{"baton_dedupe_outcomes_total", with(fromA, "outcome", "claimed"), 4},
		{"baton_dedupe_outcomes_total", with(fromA, "outcome", "replayed"), 1},
		{"baton_contract_violations_total", with(fromA, "mode", "observe", "kind", "size"), 1},
		{"baton_contract_violations_total", nil, 1},
		{"baton_envelope_size_ratio_count", fromA, 1},
		{"baton_signature_failures_total", map[string]string{"reason": "unknown_key"}, 1},
		{"baton_policy_denials_total", map[string]string{"reason": "no_edge"}, 1},
		{"baton_store_duration_seconds_count", map[string]string{"op": "claim_many"}, 5},
		{"baton_store_duration_seconds_count", map[string]string{"op": "swap"}, 4},
		{"baton_store_errors_total", map[string]string{"op": "claim_many"}, 0},
		{"http_client_request_duration_seconds_count", map[string]string{"server_address": "127.0.0.1", "http_response_status_code": "200"}, 4},
		// The edge is unsigned: every handoff on it is untrusted as a whole.
		{"baton_untrusted_labels_total", fromA, 6},
	})
	if ratio, _ := sc.sb.value("baton_envelope_size_ratio_sum", fromA); ratio <= 1 {
		t.Errorf("the envelope over max_bytes has a size ratio of %v, want > 1", ratio)
	}
	// No series is labelled with anything a request chose.
	for _, s := range []scrape{sc.sa, sc.sb} {
		for name, fam := range s {
			for _, m := range fam.GetMetric() {
				for _, lp := range m.GetLabel() {
					if v := lp.GetValue(); strings.Contains(v, "/tasks") || strings.HasPrefix(v, "k1") || v == "mallory" {
						t.Errorf("%s has label %s=%q", name, lp.GetName(), v)
					}
				}
			}
		}
	}
}

// TestMetricsSpanDetail checks the incident attributes on the spans of the
// scenario's handoffs.
func TestMetricsSpanDetail(t *testing.T) {
	t.Parallel()
	sc := metricsScenario(t)
	var replayed, resent, dead int
	for _, s := range sc.a.spans.Ended() {
		attrs := map[string]string{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.String()
		}
		if attrs["baton.replayed"] == "true" {
			replayed++
		}
		if attrs["http.request.resend_count"] == "1" {
			resent++
			if attrs["baton.edge.to"] != "gone" {
				t.Errorf("a resend to %q", attrs["baton.edge.to"])
			}
		}
		if id := attrs["baton.dead_letter.record_id"]; id != "" {
			dead++
			if id != sc.deadLetters[0] && id != sc.deadLetters[1] {
				t.Errorf("span names dead letter %q, not one of %v", id, sc.deadLetters)
			}
		}
		if d := attrs["baton.idempotency_key.digest"]; attrs["baton.edge.to"] == "summarizer" && len(d) != 16 {
			t.Errorf("key digest %q", d)
		}
	}
	if replayed != 1 || resent != 1 || dead != 2 {
		t.Errorf("analyst's spans: %d replayed, %d resent, %d dead-lettered; want 1, 1, 2", replayed, resent, dead)
	}
	var contract int
	for _, s := range sc.b.spans.Ended() {
		attrs := map[string]string{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.String()
		}
		if attrs["baton.contract.mode"] == "observe" {
			contract++
			if attrs["baton.contract.completeness"] != "1" {
				t.Errorf("completeness %q, want 1 (the example is complete)", attrs["baton.contract.completeness"])
			}
		}
	}
	if contract != 1 {
		t.Errorf("%d summarizer spans carry the contract check, want 1", contract)
	}
}

// TestMetricsOpenWithoutToken checks that /metrics, like the probes, needs
// no admin token, while the records API does.
func TestMetricsOpenWithoutToken(t *testing.T) {
	t.Parallel()
	b := startMetered(t, "agent: summarizer\nupstream: http://127.0.0.1:1\nadmin_token: s3cret\n")
	s := scrapeMetrics(t, b.AdminAddr())
	if _, ok := s["baton_store_errors_total"]; !ok {
		t.Errorf("a fresh Baton's scrape lacks baton_store_errors_total: %v", s.names())
	}
	resp, err := http.Get("http://" + b.AdminAddr() + "/v1/deadletters")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("records API without token: %d, want 401", resp.StatusCode)
	}
}

// TestMetricsWithout checks that a Baton without a meter provider serves no
// /metrics and still proxies.
func TestMetricsWithout(t *testing.T) {
	t.Parallel()
	var got seen
	p := startPair(t, got.handler(200, "ok"), "", "")
	if resp := send(t, p.a.EgressAddr(), "summarizer", "POST", "/x", "{}", nil); resp.StatusCode != 200 {
		t.Fatalf("handoff: %d", resp.StatusCode)
	}
	resp, err := http.Get("http://" + p.a.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/metrics without metrics: %d, want 404", resp.StatusCode)
	}
}

// TestReplaySpanLinksToOriginal replays a dead letter and checks that the
// replay's span continues the original trace, links to the original span,
// and carries the edge and the key's digest.
func TestReplaySpanLinksToOriginal(t *testing.T) {
	t.Parallel()
	gone := closedAddr(t)
	a := startMetered(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {gone: {url: http://"+gone+"}}\n"+
		"retry: {attempts: 0}\n")
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	resp := send(t, a.EgressAddr(), "gone", "POST", "/tasks", `{"a":1}`, http.Header{
		"Traceparent": {"00-" + traceID + "-00f067aa0ba902b7-01"}, "Idempotency-Key": {"order-7"}})
	var p struct {
		RecordID string `json:"record_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || p.RecordID == "" {
		t.Fatalf("no dead letter: %d %v", resp.StatusCode, err)
	}
	var original trace.SpanContext
	for _, s := range a.spans.Ended() {
		if s.SpanKind() == trace.SpanKindClient && s.Name() == "invoke_agent gone" {
			original = s.SpanContext()
		}
	}
	if !original.IsValid() {
		t.Fatal("no egress span for the handoff")
	}
	res, err := a.DeadLetters.Replay(context.Background(), p.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == "" {
		t.Fatalf("replay to a refusing address succeeded: %+v", res)
	}
	var replay sdktrace.ReadOnlySpan
	for _, s := range a.spans.Ended() {
		if s.Name() == "invoke_agent gone (replay)" {
			replay = s
		}
	}
	if replay == nil {
		t.Fatal("no replay span")
	}
	if replay.SpanContext().TraceID() != original.TraceID() || replay.SpanContext().TraceID().String() != traceID {
		t.Errorf("replay in trace %s, original in %s", replay.SpanContext().TraceID(), original.TraceID())
	}
	links := replay.Links()
	if len(links) != 1 || links[0].SpanContext.SpanID() != original.SpanID() {
		t.Errorf("replay links %+v, want one link to span %s", links, original.SpanID())
	}
	attrs := map[string]string{}
	for _, kv := range replay.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	for k, want := range map[string]string{"baton.edge.from": "analyst", "baton.edge.to": "gone",
		"baton.dead_letter.record_id": p.RecordID} {
		if attrs[k] != want {
			t.Errorf("replay span %s = %q, want %q", k, attrs[k], want)
		}
	}
	if len(attrs["baton.idempotency_key.digest"]) != 16 {
		t.Errorf("replay span key digest %q", attrs["baton.idempotency_key.digest"])
	}
}
