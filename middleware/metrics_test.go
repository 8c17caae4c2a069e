package middleware

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/batonproxy/baton/handoff"
)

// meterFixture is Metrics on a real SDK provider read on demand, set up as
// baton serve sets it up: histograms Baton's own, produced for the reader.
// (The proxy's tests cover a provider without them.)
type meterFixture struct {
	t      *testing.T
	m      *Metrics
	reader *sdkmetric.ManualReader
}

func newMeterFixture(t *testing.T) *meterFixture {
	t.Helper()
	hist := NewHistograms()
	r := sdkmetric.NewManualReader(sdkmetric.WithProducer(hist))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := NewMetrics(WithHistograms(mp, hist))
	if err != nil {
		t.Fatal(err)
	}
	return &meterFixture{t: t, m: m, reader: r}
}

// collect reads every metric by name.
func (f *meterFixture) collect() map[string]metricdata.Aggregation {
	f.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := f.reader.Collect(context.Background(), &rm); err != nil {
		f.t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// matches reports whether attrs holds every pair of want.
func matches(attrs attribute.Set, want map[string]string) bool {
	for k, v := range want {
		got, ok := attrs.Value(attribute.Key(k))
		if !ok || got.String() != v {
			return false
		}
	}
	return true
}

// sum adds up the points of a counter or gauge whose attributes match, and
// tells how many matched.
func sum(agg metricdata.Aggregation, want map[string]string) (total int64, points int) {
	var dps []metricdata.DataPoint[int64]
	switch a := agg.(type) {
	case metricdata.Sum[int64]:
		dps = a.DataPoints
	case metricdata.Gauge[int64]:
		dps = a.DataPoints
	}
	for _, dp := range dps {
		if matches(dp.Attributes, want) {
			total += dp.Value
			points++
		}
	}
	return total, points
}

// hist adds up count and sum of the matching points of a histogram.
func hist(agg metricdata.Aggregation, want map[string]string) (count uint64, total float64) {
	switch a := agg.(type) {
	case metricdata.Histogram[float64]:
		for _, dp := range a.DataPoints {
			if matches(dp.Attributes, want) {
				count, total = count+dp.Count, total+dp.Sum
			}
		}
	case metricdata.Histogram[int64]:
		for _, dp := range a.DataPoints {
			if matches(dp.Attributes, want) {
				count, total = count+dp.Count, total+float64(dp.Sum)
			}
		}
	}
	return count, total
}

// serve runs one request through AccessLog → Measure → a handler that
// fills in the Info as the rest of the chain would and answers status.
func (f *meterFixture) serve(side Side, agent, method string, status int, fill func(*Info)) {
	h := AccessLog(slog.New(slog.DiscardHandler), side, agent)(Measure(f.m)(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fill(InfoFromContext(r.Context()))
			if status != 0 {
				w.WriteHeader(status)
			}
		})))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(method, "http://summarizer/tasks", nil))
}

func TestMeasureOutcomes(t *testing.T) {
	t.Parallel()
	egress := func(in *Info) { in.From, in.To, in.Hop = "analyst", "summarizer", 1 }
	tests := []struct {
		name   string
		side   Side
		agent  string
		status int
		fill   func(*Info)
		edge   [2]string // from, to
		want   map[string]string
		also   map[string]map[string]string // further counters at 1
	}{
		{name: "delivered", side: Egress, agent: "analyst", status: 201,
			fill: func(in *Info) { egress(in); in.Delivered = true },
			edge: [2]string{"analyst", "summarizer"}, want: map[string]string{"outcome": "delivered", "status_class": "2xx"}},
		{name: "refused by policy", side: Egress, agent: "analyst", status: 403,
			fill: func(in *Info) { egress(in); in.PolicyDenial = "no_edge" },
			edge: [2]string{"analyst", "summarizer"}, want: map[string]string{"outcome": "refused", "status_class": "4xx"},
			also: map[string]map[string]string{"baton.policy.denials": {"reason": "no_edge"}}},
		{name: "an address refused at dial time", side: Egress, agent: "analyst", status: 403,
			fill: func(in *Info) {
				in.From, in.External, in.Delivered, in.PolicyDenial = "analyst", "api.example.com:443", true, DenialDeniedAddress
			},
			edge: [2]string{"analyst", "_external:api.example.com:443"}, want: map[string]string{"outcome": "refused", "status_class": "4xx"},
			also: map[string]map[string]string{"baton.policy.denials": {"reason": "denied_address"}}},
		{name: "dead-lettered", side: Egress, agent: "analyst", status: 502,
			fill: func(in *Info) { egress(in); in.Delivered, in.DeadLetter = true, "r-1" },
			edge: [2]string{"analyst", "summarizer"}, want: map[string]string{"outcome": "dead_lettered", "status_class": "5xx"}},
		{name: "failed in transport", side: Egress, agent: "analyst", status: 502,
			fill: func(in *Info) { egress(in); in.Delivered, in.Err = true, errors.New("connection reset") },
			edge: [2]string{"analyst", "summarizer"}, want: map[string]string{"outcome": "failed", "status_class": "5xx"}},
		{name: "external fetch", side: Egress, agent: "analyst", status: 200,
			fill: func(in *Info) { in.From, in.External, in.Delivered = "analyst", "api.example.com:443", true },
			edge: [2]string{"analyst", "_external:api.example.com:443"}, want: map[string]string{"outcome": "delivered", "status_class": "2xx"}},
		{name: "external fetch through a route", side: Egress, agent: "analyst", status: 200,
			fill: func(in *Info) {
				in.From, in.External, in.Route, in.Delivered = "analyst", "api.openai.com:443", "openai", true
			},
			edge: [2]string{"analyst", "_external:openai"}, want: map[string]string{"outcome": "delivered", "status_class": "2xx"}},
		{name: "refused before resolution", side: Egress, agent: "analyst", status: 403,
			fill: func(in *Info) { in.PolicyDenial = DenialUnknownDestination },
			edge: [2]string{"analyst", LabelUnknown}, want: map[string]string{"outcome": "refused"},
			also: map[string]map[string]string{"baton.policy.denials": {"reason": "unknown_destination"}}},
		{name: "uncorrelated", side: Egress, agent: "analyst", status: 200,
			fill: func(in *Info) { egress(in); in.Delivered, in.Uncorrelated = true, true },
			edge: [2]string{"analyst", "summarizer"}, want: map[string]string{"outcome": "delivered"},
			also: map[string]map[string]string{"baton.handoff.uncorrelated": {}}},
		{name: "replayed", side: Ingress, agent: "summarizer", status: 200,
			fill: func(in *Info) { in.From, in.To, in.Hop, in.Dedupe = "analyst", "summarizer", 2, DedupeReplayed },
			edge: [2]string{"analyst", "summarizer"}, want: map[string]string{"outcome": "replayed", "status_class": "2xx"},
			also: map[string]map[string]string{"baton.dedupe.outcomes": {"outcome": "replayed"}}},
		{name: "dedupe conflict", side: Ingress, agent: "summarizer", status: 409,
			fill: func(in *Info) { in.From, in.To, in.Hop, in.Dedupe = "analyst", "summarizer", 2, DedupeConflict },
			edge: [2]string{"analyst", "summarizer"}, want: map[string]string{"outcome": "refused", "status_class": "4xx"},
			also: map[string]map[string]string{"baton.dedupe.outcomes": {"outcome": "conflict"}}},
		{name: "bad signature before the sender is known", side: Ingress, agent: "summarizer", status: 401,
			fill: func(in *Info) { in.SignatureFailure = "expired" },
			edge: [2]string{LabelUnknown, "summarizer"}, want: map[string]string{"outcome": "refused", "status_class": "4xx"},
			also: map[string]map[string]string{"baton.signature.failures": {"reason": "expired"}}},
		{name: "an unlisted reason is other", side: Ingress, agent: "summarizer", status: 401,
			fill: func(in *Info) { in.From, in.SignatureFailure = "analyst", "made-up" },
			edge: [2]string{"analyst", "summarizer"}, want: map[string]string{"outcome": "refused"},
			also: map[string]map[string]string{"baton.signature.failures": {"reason": "other"}}},
		{name: "client gone before any status", side: Ingress, agent: "summarizer", status: 0,
			fill: func(in *Info) { in.From, in.To, in.Delivered = "analyst", "summarizer", true },
			edge: [2]string{"analyst", "summarizer"}, want: map[string]string{"outcome": "failed", "status_class": "none"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newMeterFixture(t)
			f.serve(tc.side, tc.agent, http.MethodPost, tc.status, tc.fill)
			got := f.collect()
			edge := map[string]string{"from": tc.edge[0], "to": tc.edge[1], "side": tc.side.String()}
			want := map[string]string{}
			for k, v := range edge {
				want[k] = v
			}
			for k, v := range tc.want {
				want[k] = v
			}
			if n, points := sum(got["baton.handoff.requests"], want); n != 1 || points != 1 {
				t.Errorf("baton.handoff.requests%v = %d over %d series, want 1 over 1", want, n, points)
			}
			if n, all := sum(got["baton.handoff.requests"], nil); all != 1 || n != 1 {
				t.Errorf("baton.handoff.requests has %d series totalling %d, want one series of 1", all, n)
			}
			if c, _ := hist(got["baton.handoff.duration"], edge); c != 1 {
				t.Errorf("baton.handoff.duration%v count %d, want 1", edge, c)
			}
			for name, labels := range tc.also {
				w := map[string]string{}
				for k, v := range edge {
					w[k] = v
				}
				for k, v := range labels {
					w[k] = v
				}
				if n, _ := sum(got[name], w); n != 1 {
					t.Errorf("%s%v = %d, want 1", name, w, n)
				}
			}
		})
	}
}

func TestMeasureHTTPServerDuration(t *testing.T) {
	t.Parallel()
	f := newMeterFixture(t)
	fill := func(in *Info) { in.From, in.To, in.Delivered = "analyst", "summarizer", true }
	f.serve(Egress, "analyst", http.MethodPost, 200, fill)
	f.serve(Egress, "analyst", "BREW", 418, fill)
	f.serve(Ingress, "summarizer", http.MethodGet, 503, fill)
	got := f.collect()["http.server.request.duration"]
	for _, want := range []map[string]string{
		{"side": "egress", "http.request.method": "POST", "http.response.status_code": "200"},
		{"side": "egress", "http.request.method": "_OTHER", "http.response.status_code": "418"},
		{"side": "ingress", "http.request.method": "GET", "http.response.status_code": "503", "error.type": "503"},
	} {
		if c, _ := hist(got, want); c != 1 {
			t.Errorf("http.server.request.duration%v count %d, want 1", want, c)
		}
	}
	// A server's 4xx is the client's doing: no error.type.
	if c, _ := hist(got, map[string]string{"http.response.status_code": "418", "error.type": "418"}); c != 0 {
		t.Error("a server 418 carries error.type")
	}
}

func TestMetricsClient(t *testing.T) {
	t.Parallel()
	f := newMeterFixture(t)
	peer := f.m.Client("summarizer")
	peer.Record(http.MethodPost, 200, 20*time.Millisecond)
	peer.Record(http.MethodPost, 200, 40*time.Millisecond)
	peer.Record(http.MethodPost, 404, time.Millisecond)
	peer.Record("PURGE", 0, time.Millisecond)
	f.m.Client("").Record(http.MethodGet, 200, time.Millisecond)
	got := f.collect()["http.client.request.duration"]
	for _, tc := range []struct {
		want  map[string]string
		count uint64
		sum   float64
	}{
		{map[string]string{"server.address": "summarizer", "http.request.method": "POST", "http.response.status_code": "200"}, 2, 0.06},
		{map[string]string{"server.address": "summarizer", "http.response.status_code": "404", "error.type": "404"}, 1, 0.001},
		{map[string]string{"server.address": "summarizer", "http.request.method": "_OTHER", "error.type": "_OTHER"}, 1, 0.001},
	} {
		c, s := hist(got, tc.want)
		if c != tc.count || s < tc.sum-1e-9 || s > tc.sum+1e-9 {
			t.Errorf("http.client.request.duration%v = count %d sum %g, want %d and %g", tc.want, c, s, tc.count, tc.sum)
		}
	}
	if c, _ := hist(got, map[string]string{"http.request.method": "GET"}); c != 1 {
		t.Errorf("request without server.address: count %d", c)
	}
	if got := f.m.Client(""); got.base != nil {
		t.Errorf("no server: attributes %v", got.base)
	}
}

func TestMeasureContract(t *testing.T) {
	t.Parallel()
	f := newMeterFixture(t)
	res := &handoff.Result{Completeness: 0.5, Envelope: make([]byte, 500), Violations: []handoff.Violation{
		{Kind: handoff.KindRequired}, {Kind: handoff.KindRequired}, {Kind: handoff.KindSchema}}}
	f.serve(Ingress, "summarizer", http.MethodPost, 422, func(in *Info) {
		in.From, in.To, in.Hop = "analyst", "summarizer", 3
		in.Contract, in.ContractPolicy = res, handoff.Policy{Mode: handoff.Enforce, MaxBytes: 1000}
	})
	f.serve(Egress, "analyst", http.MethodPost, 200, func(in *Info) {
		in.From, in.To, in.Hop, in.Delivered = "analyst", "summarizer", 1, true
		in.Contract = &handoff.Result{Completeness: 1, Envelope: make([]byte, 100)}
		in.ContractPolicy = handoff.Policy{Mode: handoff.Observe}
	})
	got := f.collect()
	in := map[string]string{"from": "analyst", "to": "summarizer", "side": "ingress"}
	out := map[string]string{"from": "analyst", "to": "summarizer", "side": "egress"}
	for _, tc := range []struct {
		labels map[string]string
		want   int64
	}{
		{map[string]string{"side": "ingress", "mode": "enforce", "kind": "required"}, 2},
		{map[string]string{"side": "ingress", "mode": "enforce", "kind": "schema"}, 1},
		{map[string]string{"side": "egress"}, 0},
	} {
		if n, _ := sum(got["baton.contract.violations"], tc.labels); n != tc.want {
			t.Errorf("baton.contract.violations%v = %d, want %d", tc.labels, n, tc.want)
		}
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		count  uint64
		sum    float64
	}{
		{"baton.contract.completeness", in, 1, 0.5},
		{"baton.contract.completeness", out, 1, 1},
		{"baton.envelope.size", in, 1, 500},
		{"baton.envelope.size", out, 1, 100},
		{"baton.envelope.size_ratio", in, 1, 0.5},
		{"baton.envelope.size_ratio", out, 0, 0}, // no max_bytes: no ratio
		{"baton.handoff.hops", in, 1, 3},
		{"baton.handoff.hops", out, 1, 1},
	} {
		if c, s := hist(got[tc.name], tc.labels); c != tc.count || s != tc.sum {
			t.Errorf("%s%v = count %d sum %g, want %d and %g", tc.name, tc.labels, c, s, tc.count, tc.sum)
		}
	}
}

func TestMetricsEdgesAreBounded(t *testing.T) {
	t.Parallel()
	f := newMeterFixture(t)
	f.m.Edge(Ingress, "planner", "summarizer") // configured: not counted against the bound
	senders := maxDynamicEdges + 6
	for i := range senders {
		f.serve(Ingress, "summarizer", http.MethodPost, 200, func(in *Info) {
			in.From, in.To, in.Delivered = fmt.Sprintf("sender-%d", i), "summarizer", true
		})
	}
	f.serve(Ingress, "summarizer", http.MethodPost, 200, func(in *Info) {
		in.From, in.To, in.Delivered = "planner", "summarizer", true
	})
	got := f.collect()["baton.handoff.requests"]
	froms := map[string]int64{}
	for _, dp := range got.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value("from")
		froms[v.AsString()] += dp.Value
	}
	if len(froms) != maxDynamicEdges+2 {
		t.Errorf("%d distinct senders labelled, want %d (the bound, _other and the configured one)", len(froms), maxDynamicEdges+2)
	}
	if froms[LabelOther] != 6 || froms["planner"] != 1 || froms["sender-0"] != 1 {
		t.Errorf("_other %d, planner %d, sender-0 %d; want 6, 1, 1", froms[LabelOther], froms["planner"], froms["sender-0"])
	}
}

func TestMetricsEdgeCountersStartAtZero(t *testing.T) {
	t.Parallel()
	f := newMeterFixture(t)
	out := f.m.Edge(Egress, "analyst", "summarizer")
	f.m.Edge(Ingress, "planner", "analyst")
	got := f.collect()
	egress := map[string]string{"from": "analyst", "to": "summarizer", "side": "egress"}
	ingress := map[string]string{"from": "planner", "to": "analyst", "side": "ingress"}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		points int
	}{
		{"baton.handoff.retries", egress, 1},
		{"baton.dead_letter.writes", egress, 1},
		{"baton.handoff.uncorrelated", egress, 1},
		{"baton.untrusted.labels", egress, 1},
		{"baton.untrusted.injections", ingress, 1},
		{"baton.handoff.retries", ingress, 0},
	} {
		if n, points := sum(got[tc.name], tc.labels); n != 0 || points != tc.points {
			t.Errorf("%s%v: %d series totalling %d, want %d at 0", tc.name, tc.labels, points, n, tc.points)
		}
	}

	f.m.Retries(out, 2)
	f.m.Retries(out, 0)
	f.m.DeadLetter(out)
	f.m.BreakerTransition(out, 2)
	f.m.BreakerTransition(out, 2)
	f.m.BreakerTransition(out, 0)
	f.m.BreakerTransition(out, 7) // not a state
	f.m.Untrusted(out, 3, true)
	f.m.Untrusted(out, 2, false)
	f.m.Untrusted(out, 0, false)
	got = f.collect()
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   int64
	}{
		{"baton.handoff.retries", egress, 2},
		{"baton.dead_letter.writes", egress, 1},
		{"baton.breaker.transitions", map[string]string{"from": "analyst", "state": "open"}, 2},
		{"baton.breaker.transitions", map[string]string{"from": "analyst", "state": "closed"}, 1},
		{"baton.breaker.transitions", egress, 3},
		{"baton.untrusted.labels", egress, 5},
		{"baton.untrusted.injections", egress, 1},
	} {
		if n, _ := sum(got[tc.name], tc.labels); n != tc.want {
			t.Errorf("%s%v = %d, want %d", tc.name, tc.labels, n, tc.want)
		}
	}
}

func TestMetricsGauges(t *testing.T) {
	t.Parallel()
	f := newMeterFixture(t)
	e := f.m.Edge(Egress, "analyst", "summarizer")
	calls := 0
	stop, err := f.m.Observe(func(_ context.Context, g Gauges) {
		calls++
		g.Breaker(e, 2)
		g.RetryBudget(e, 3, 0.75)
		g.DeadLetters(e, 4)
	})
	if err != nil {
		t.Fatal(err)
	}
	got := f.collect()
	edge := map[string]string{"from": "analyst", "to": "summarizer", "side": "egress"}
	if n, _ := sum(got["baton.breaker.state"], edge); n != 2 {
		t.Errorf("baton.breaker.state = %d, want 2", n)
	}
	if n, _ := sum(got["baton.dead_letter.depth"], edge); n != 4 {
		t.Errorf("baton.dead_letter.depth = %d, want 4", n)
	}
	for name, want := range map[string]float64{"baton.retry_budget.remaining": 3, "baton.retry_budget.available": 0.75} {
		g, ok := got[name].(metricdata.Gauge[float64])
		if !ok || len(g.DataPoints) != 1 || g.DataPoints[0].Value != want {
			t.Errorf("%s = %+v, want one point at %g", name, got[name], want)
		}
	}
	stop()
	got = f.collect()
	if _, points := sum(got["baton.breaker.state"], nil); points != 0 || calls != 1 {
		t.Errorf("after stop: %d breaker points, %d callbacks; want 0 and 1", points, calls)
	}
}

func TestMetricsStore(t *testing.T) {
	t.Parallel()
	f := newMeterFixture(t)
	claim := f.m.Store("claim_many")
	f.m.Store("get")
	start := time.Now()
	claim.Done(start, nil)
	claim.Done(start, errors.New("connection refused"))
	got := f.collect()
	if c, _ := hist(got["baton.store.duration"], map[string]string{"op": "claim_many"}); c != 2 {
		t.Errorf("claim_many timed %d times, want 2", c)
	}
	if n, _ := sum(got["baton.store.errors"], map[string]string{"op": "claim_many"}); n != 1 {
		t.Errorf("claim_many errors = %d, want 1", n)
	}
	if n, points := sum(got["baton.store.errors"], map[string]string{"op": "get"}); n != 0 || points != 1 {
		t.Errorf("get errors: %d series at %d, want one at 0", points, n)
	}
}

// TestMetricsNil checks that Baton without metrics records nothing and
// breaks nothing.
func TestMetricsNil(t *testing.T) {
	t.Parallel()
	m, err := NewMetrics(nil)
	if m != nil || err != nil {
		t.Fatalf("NewMetrics(nil) = %v, %v", m, err)
	}
	next := drain()
	if h := Measure(m)(next); fmt.Sprintf("%p", h) != fmt.Sprintf("%p", next) {
		t.Error("Measure(nil) wraps the handler")
	}
	e := m.Edge(Egress, "a", "b")
	m.Retries(e, 1)
	m.DeadLetter(e)
	m.BreakerTransition(e, 2)
	m.Untrusted(m.EdgeOf(&Info{Side: Egress}), 1, true)
	m.Store("get").Done(time.Now(), errors.New("x"))
	m.Client("b").Record(http.MethodGet, 200, time.Second)
	stop, err := m.Observe(func(context.Context, Gauges) { t.Error("observed without metrics") })
	if err != nil {
		t.Fatal(err)
	}
	stop()
}

// TestExternalEdgesBounded: each external destination is an edge of its
// own, named by its route or host:port, up to maxExternalEdges of them; the
// ones after share "_external". Finding a destination's edge again costs no
// allocation, past the bound too. (Not parallel: it counts allocations.)
func TestExternalEdgesBounded(t *testing.T) {
	f := newMeterFixture(t)
	edgeTo := func(host, route string) *Edge {
		return f.m.EdgeOf(&Info{Side: Egress, Agent: "analyst", External: host, Route: route})
	}
	if e := edgeTo("api.openai.com:443", "openai"); e.to != "_external:openai" {
		t.Errorf("a route's destination is labelled %q", e.to)
	}
	for i := 1; i < maxExternalEdges+4; i++ {
		host := fmt.Sprintf("h%d.example.com:443", i)
		want := "_external:" + host
		if i >= maxExternalEdges {
			want = LabelExternal
		}
		if e := edgeTo(host, ""); e.to != want || e.from != "analyst" || e != edgeTo(host, "") {
			t.Errorf("destination %d: %s→%s, want analyst→%s, the same edge each time", i, e.from, e.to, want)
		}
	}
	in := &Info{Side: Egress, Agent: "analyst", External: "h3.example.com:443"}
	late := &Info{Side: Egress, Agent: "analyst", External: fmt.Sprintf("h%d.example.com:443", maxExternalEdges+1)}
	if n := testing.AllocsPerRun(100, func() { f.m.EdgeOf(in); f.m.EdgeOf(late) }); n != 0 {
		t.Errorf("finding an external destination's edge allocates %.0f times", n)
	}
}
